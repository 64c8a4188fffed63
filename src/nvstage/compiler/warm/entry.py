"""The entry a whole command is answered from next time, made after a miss ran through the
stage pipeline (by the launcher, or by ``nvstage compile``).

Only when it is safe: every cacheable stage was a hit or was stored (so the stage cache judged
nothing uncacheable: time macros, .incbin, files changed mid-build), the host compiler was told
nothing that reads or writes a file no entry holds (``host_flags``), the command compiled and
did not link, and no file it read changed while it ran. What the preprocessing read, and where
a new file would hide a header, comes from the stage cache (its ``Seen``), which learnt it
while the stages ran: the entry is written with the standard library alone.
"""

from __future__ import annotations

import marshal
import os

from nvstage import fsio
from nvstage.compiler.warm.answer import sha256_file
from nvstage.compiler.warm.folder import (LEDGER, MAX_OUTPUT, SCHEMA, cache_root, entry_dir,
                                          secret)
from nvstage.compiler.warm.host_flags import HOST_STAGES, unwatched_word
from nvstage.compiler.warm.key import file_stat, key

# A file changed this close to the moment its stat was taken may change again within the
# same timestamp tick: its stat is not trusted, its contents are compared (ccache's rule).
_SETTLE_NS = 2_000_000_000
# The stages a command answered whole may have run (nvcc's -c, -ptx, -cubin, -fatbin).
_ANSWERABLE = frozenset({"host-preprocess", "cudafe++", "device-preprocess", "cicc", "ptxas",
                         "fatbinary", "host-compile", "cleanup", "depfile"})
_PREPROCESS = frozenset({"host-preprocess", "device-preprocess"})


def outputs_of(build, cwd: str, work: str) -> list[str]:
    """The files a build leaves behind (its stages' outputs outside the work folder)."""
    outs = [o for s in build.plan.runnable for o in s.outputs
            if not os.path.abspath(os.path.join(cwd, o)).startswith(work + os.sep)]
    return list(dict.fromkeys(outs))


def record(nvcc: str, args: list[str], cwd: str, env, build, work: str, outputs: list[str],
           stdout: str, stderr: str, started_ns: int, seen=None, build_doc=None) -> bool:
    """Store the entry a later identical command can be answered from, when it is safe
    (``prepare``). False when not stored."""
    pending = prepare(nvcc, args, cwd, env, build, work, outputs, stdout, stderr, started_ns,
                      seen=seen, build_doc=build_doc)
    return pending is not None and pending.store()


class Pending:
    """An entry read while the build's work folder still exists, written by ``store``
    (the CLI adds what it prints first, ``view``)."""

    def __init__(self, root: str, k: str, meta: dict, blobs: list[bytes], cands: bytes,
                 build_doc, secret: bytes):
        self.root, self.final = root, entry_dir(root, k)
        self.meta, self.blobs, self.cands = meta, blobs, cands
        self.build_doc, self.secret = build_doc, secret

    def store(self, view: dict | None = None) -> bool:
        if view is not None:
            self.meta["view"] = view
        doc = None
        if self.build_doc is not None:  # kept beside the entry, sealed by its digest
            import json

            doc = json.dumps(self.build_doc, separators=(",", ":")).encode(
                "utf-8", "surrogateescape")
            self.meta["build_sha"] = fsio.hexdigest(doc)
        body = marshal.dumps(self.meta)
        final = self.final
        # An entry is a folder, renamed into place whole (``cache/local`` sweeps one a killed
        # process left by this name).
        tmp = f"{final}.tmp-{os.getpid()}"
        try:
            os.makedirs(tmp, exist_ok=False)
            for n, data in enumerate(self.blobs):
                with open(os.path.join(tmp, str(n)), "wb") as f:
                    f.write(data)
            with open(os.path.join(tmp, "shadow"), "wb") as f:
                f.write(self.cands)
            if doc is not None:
                with open(os.path.join(tmp, "build.json"), "wb") as f:
                    f.write(doc)
            with open(os.path.join(tmp, "meta"), "wb") as f:
                f.write(fsio.seal(self.secret, body))
            if os.path.isdir(final):  # an older entry for the same command: replaced
                import shutil

                shutil.rmtree(final, ignore_errors=True)
            os.rename(tmp, final)
            size = sum(map(len, self.blobs)) + len(self.cands) + len(body) + len(doc or b"")
            fsio.append_line(os.path.join(self.root, LEDGER), b"+%d" % size)
        except BaseException as e:  # a full disk, and an interrupted build (Ctrl-C) alike:
            import shutil  # a half-made folder is never an entry, and nothing evicts it

            shutil.rmtree(tmp, ignore_errors=True)
            if not isinstance(e, OSError):
                raise
            return False
        return True


def prepare(nvcc: str, args: list[str], cwd: str, env, build, work: str, outputs: list[str],
            stdout: str, stderr: str, started_ns: int, *, seen=None,
            build_doc=None) -> Pending | None:
    """The entry a later identical command can be answered from, when it is safe. ``seen``
    (the stage cache's ``Seen``): the files each preprocessing stage read, their digests and
    their hiding places (``Seen.preprocessed``). ``build_doc``: the manifest kept beside the
    entry (the launcher's build record). None when nothing may be stored."""
    c = build.cache or {}
    if seen is None or not c or c.get("misses", 0) != c.get("stored", 0) or c.get("corrupt", 0):
        return None
    if any(unwatched_word(r.stage.argv[1:]) for r in build.runs
           if r.stage.kind.value in HOST_STAGES):
        return None
    # A compilation only: a link searches libraries by name, and a device link reads the
    # toolkit's libraries, none of which the entry watches.
    if any(r.stage.kind.value not in _ANSWERABLE for r in build.runs):
        return None
    root = cache_root(env)
    k = key(nvcc, args, cwd, env)
    key_bytes = secret(env) if root is not None else None
    if k is None or key_bytes is None:  # no key, no entry: the stage cache said why already
        return None
    files: dict[str, None] = {}
    cands: dict[str, None] = {}
    layout: list = []
    for run in build.runs:
        if run.stage.kind.value not in _PREPROCESS:
            continue
        got = seen.preprocessed(run.stage, cwd, work, env, [build.toolkit.root])
        if got is None:
            return None
        names, (places, where) = got
        files.update(dict.fromkeys(names))
        cands.update(dict.fromkeys(c for c in places if not c.startswith(work + os.sep)))
        layout += [x for x in where if x not in layout]
    inputs = []
    for path in files:
        try:
            st = file_stat(path)
        except OSError:
            return None
        if max(st[1], st[2]) >= started_ns:
            return None  # changed while the command ran: what it read is not known
        sha = seen.digest(path) or sha256_file(path)
        if sha is None:
            return None
        settled = max(st[1], st[2]) < started_ns - _SETTLE_NS
        inputs.append([path, st, settled, sha])
    outs = []
    blobs = []
    for rel in outputs:
        p = os.path.join(cwd, rel)
        data = fsio.read_or_none(p, MAX_OUTPUT)
        if data is None:
            return None
        executable = bool(os.stat(p).st_mode & 0o111)
        outs.append([rel, fsio.hexdigest(data), executable])
        blobs.append(data)
    by_dir: dict[str, list[str]] = {}
    nearest: dict[str, str] = {}  # a candidate's folder -> the nearest one that exists
    for cand in sorted(cands):
        parent = os.path.dirname(cand)
        d = nearest.get(parent)
        if d is None:
            d = parent
            while not os.path.isdir(d) and os.path.dirname(d) != d:
                d = os.path.dirname(d)  # a folder to be made is seen in its nearest parent
            nearest[parent] = d
        by_dir.setdefault(d, []).append(cand)
    # The folders as they are now, outputs written (a later change is a new or removed name),
    # and only then what is in them: a name made in between shows in the folder's stat.
    shadow_dirs = []
    for d in by_dir:
        try:
            shadow_dirs.append([d, file_stat(d)])
        except OSError:
            return None
    from nvstage.compiler.warm.presence import Presence

    shadow = Presence().of(cands)
    shadow_cands = []
    for names in by_dir.values():
        for cand in names:
            if shadow[cand] and max(file_stat(cand)[1:3]) >= started_ns:
                return None  # a hiding file made while the compiler ran: seen or not?
        shadow_cands.append([[cand, shadow[cand]] for cand in names])
    cands_blob = marshal.dumps(shadow_cands)
    meta = {"schema": SCHEMA, "argv": [nvcc, *args], "cwd": cwd, "inputs": inputs,
            "shadow": shadow_dirs, "shadow_sha": fsio.hexdigest(cands_blob),
            "layout": layout, "outputs": outs, "stdout": stdout, "stderr": stderr,
            "hits": c.get("hits", 0) + c.get("misses", 0)}
    return Pending(root, k, meta, blobs, cands_blob, build_doc, key_bytes)
