"""The entry a whole command is answered from next time, made after a miss ran through the
stage pipeline (by the launcher, or by ``nvstage compile``).

Only when it is safe: every cacheable stage was a hit or was stored, or judged storable (so the
stage cache judged nothing uncacheable: time macros, .incbin, files changed mid-build), the host
compiler was told nothing that reads or writes a file no entry holds (``host_flags``), the command
compiled and did not link, and no file it read changed while it ran. What the preprocessing read,
and where a new file would hide a header, comes from the stage cache (its ``Seen``), which learnt it
while the stages ran: the entry is written with the standard library alone.
"""

from __future__ import annotations

import contextlib
import marshal
import os
from collections.abc import Mapping
from dataclasses import dataclass

from nvstage import fsio
from nvstage.compiler.cache.command.answer import load, sha256_file
from nvstage.compiler.store.layout import (
    LEDGER,
    MAX_OUTPUT,
    SCHEMA,
    SETTLE_NS,
    cache_root,
    entry_dir,
    secret,
)
from nvstage.compiler.nvcc.host_flags import HOST_STAGES, unwatched_word
from nvstage.compiler.cache.command.command_key import file_stat, key

# The stages a command answered whole may have run (nvcc's -c, -ptx, -cubin, -fatbin).
_ANSWERABLE = frozenset({"host-preprocess", "cudafe++", "device-preprocess", "cicc", "ptxas",
                         "fatbinary", "host-compile", "cleanup", "depfile"})


def _dir_ident(d: str) -> list[int] | None:
    try:
        st = os.stat(d)
    except OSError:
        return None
    return [st.st_dev, st.st_ino]


def outputs_of(build, cwd: str, work: str) -> list[str]:
    """The files a build leaves behind (its stages' outputs outside the work folder)."""
    outs = [o for s in build.plan.runnable for o in s.outputs
            if not os.path.abspath(os.path.join(cwd, o)).startswith(work + os.sep)]
    if getattr(build, "time_trace", None):  # nvcc's -fdevice-time-trace file
        outs.append(os.path.relpath(build.time_trace, cwd))
    return list(dict.fromkeys(outs))


@dataclass(frozen=True)
class CommandLine:
    """A command as its command key is taken (``command_key.key``): nvcc's path, the
    words after it, the folder it ran in and its environment."""

    nvcc: str
    args: list[str]
    cwd: str
    env: Mapping[str, str]


def record(command: CommandLine, build, work: str, outputs: list[str], stdout: str,
           stderr: str, started_ns: int, *, seen=None, build_doc=None) -> bool:
    """Store the entry a later identical command can be answered from, when it is safe
    (``prepare``). False when not stored."""
    pending = prepare(command, build, work, outputs, stdout, stderr, started_ns, seen=seen,
                      build_doc=build_doc)
    return pending is not None and pending.store()


# Results kept per command (one per state of the files it read: a header edited and edited
# back is answered whole both times, as ccache's manifest keeps several results).
MAX_RESULTS = 8


class Pending:
    """A result read while the build's work folder still exists, added to its command's entry
    by ``store`` (the CLI adds what it prints first, ``view``).

    An entry is a folder, ``inv/ab/<key>/``: ``meta``, the sealed document (zstd, marshal:
    the files the results read, each with its stat and SHA-256, once for every result reading
    the same bytes, and the results, newest first), and each result's files, named by its id:
    ``<id>.<n>`` its outputs, ``<id>.build`` the build's manifest (zstd frames), and the
    hiding places it watches, ``s<digest>``, shared by results that watch the same ones. The
    document is written last, whole (``fsio.replace``); a file no result names is removed."""

    def __init__(self, root: str, k: str, result: dict, inputs: list, blobs: list[bytes],
                 cands: bytes, build_doc, secret: bytes):
        self.root, self.k, self.folder = root, k, entry_dir(root, k)
        self.result, self.inputs, self.blobs, self.cands = result, inputs, blobs, cands
        self.build_doc, self.secret = build_doc, secret

    def store(self, view: dict | None = None) -> bool:
        from nvstage.compiler.store import zstd

        result = self.result
        if view is not None:
            result["view"] = view
        rid = result["id"]
        try:
            os.makedirs(self.folder, exist_ok=True)
            written = 0
            doc = None
            if self.build_doc is not None:
                import json

                doc = json.dumps(self.build_doc, separators=(",", ":")).encode(
                    "utf-8", "surrogateescape")
                result["build_sha"] = fsio.hexdigest(doc)
                written += self._put(f"{rid}.build", zstd.compress(doc))
            for n, data in enumerate(self.blobs):
                if isinstance(data, str):  # the stage entry's file: a link, not a copy
                    if self._link(data, f"{rid}.{n}"):
                        continue
                    data = zstd.decompress(fsio.read_bounded(data, MAX_OUTPUT), MAX_OUTPUT)
                    if fsio.hexdigest(data) != result["outputs"][n][1]:
                        return False
                written += self._put(f"{rid}.{n}", zstd.compress(data))
            shadow = "s" + result["shadow_sha"][:32]
            if not os.path.exists(os.path.join(self.folder, shadow)):
                written += self._put(shadow, zstd.compress(self.cands))
            result["shadow_file"] = shadow
            old = load(self.root, self.k, self.secret) or {"files": [], "results": []}
            files, results = _merged(old, self.inputs, result)
            body = zstd.compress(marshal.dumps({"schema": SCHEMA, "files": files,
                                                "results": results}))
            written += self._put("meta", fsio.seal(self.secret, body))
            keep = {"meta", *(r.get("shadow_file") for r in results)}
            ids = {r["id"] for r in results}
            for name in os.listdir(self.folder):  # results dropped, and older layouts' files
                if name not in keep and name.split(".", 1)[0] not in ids:
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(self.folder, name))
            fsio.append_line(os.path.join(self.root, LEDGER), b"+%d" % written)
        except OSError:  # a full disk: the result is not kept; the next run records it
            return False
        return True

    def _put(self, name: str, data: bytes) -> int:
        fsio.replace(os.path.join(self.folder, name), data)
        return len(data)

    def _link(self, src: str, name: str) -> bool:
        """``name`` made another name of the stage entry's file ``src`` (the same zstd frame:
        an output outside the work folder is held as it is): whichever entry is evicted, the
        other keeps the bytes. False where the file system makes no hard link."""
        tmp = os.path.join(self.folder, f"{fsio.temporary_prefix(name)}{os.getpid()}")
        try:
            os.link(src, tmp)
            os.replace(tmp, os.path.join(self.folder, name))
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False
        return True


def _merged(old: dict, inputs: list, result: dict) -> tuple[list, list]:
    """The entry's files and results with ``result`` (reading ``inputs``) first: a file read
    with the same bytes is one row (its stat the newest), rows no result reads are dropped,
    and at most ``MAX_RESULTS`` results are kept (one for the same inputs replaced)."""
    rows = [list(r) for r in old["files"]]
    where = {(r[0], r[3]): n for n, r in enumerate(rows)}
    mine = []
    for row in inputs:
        n = where.get((row[0], row[3]))
        if n is None:
            n = where[(row[0], row[3])] = len(rows)
            rows.append(list(row))
        else:
            rows[n] = list(row)
        mine.append(n)
    result["inputs"] = mine
    results = [result] + [r for r in old["results"] if r["id"] != result["id"]]
    results = results[:MAX_RESULTS]
    used = sorted({n for r in results for n in r["inputs"]})
    renumber = {n: i for i, n in enumerate(used)}
    for r in results:
        r["inputs"] = [renumber[n] for n in r["inputs"]]
    return [rows[n] for n in used], results


def prepare(command: CommandLine, build, work: str, outputs: list[str], stdout: str,
            stderr: str, started_ns: int, *, seen=None, build_doc=None) -> Pending | None:
    """The entry a later identical command can be answered from, when it is safe. ``seen``
    (the stage cache's ``Seen``): the files each host-compiler stage read, their digests and
    their hiding places (``Seen.read_by``). ``build_doc``: the manifest kept beside the
    entry (the launcher's build log). None when nothing may be stored."""
    nvcc, args, cwd, env = command.nvcc, command.args, command.cwd, command.env
    c = build.cache or {}
    if seen is None or not c or c.get("corrupt", 0) or \
            c.get("misses", 0) != c.get("stored", 0) + seen.judged:
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
    inside = work + os.sep
    # Every stage that runs the host compiler reads headers: the host compile too, which
    # gcc runs on nvcc's generated code (its stub includes crt/host_runtime.h, found through
    # the user's -I folders first) with -Xcompiler's -include files, without __CUDACC__.
    for run in build.runs:
        if run.stage.kind.value not in HOST_STAGES:
            continue
        got = seen.read_by(run.stage, cwd, work, env, [build.toolkit.root])
        if got is None:
            return None
        names, (places, where) = got
        files.update(dict.fromkeys(names))
        cands.update(dict.fromkeys(c for c in places if not c.startswith(inside)))
        layout += [list(x) for x in where if x not in layout]
    # Each search folder's identity beside its real path: a hit compares one stat, not a
    # realpath (a lstat per part of the path). Taken now, and only where the folder is still
    # what the build saw.
    for row in layout:
        d, real = row[0], row[1]
        if (os.path.realpath(d) if os.path.isdir(d) else None) != real:
            return None
        row[2:] = [None if real is None else _dir_ident(d)]
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
        settled = max(st[1], st[2]) < started_ns - SETTLE_NS
        inputs.append([path, st, settled, sha])
    outs = []
    blobs = []
    for rel in outputs:
        p = os.path.join(cwd, rel)
        got = seen.taken.get(rel) if seen.taken is not None else None
        if got is None and seen.taken is not None:
            return None  # not read when the build answered: what was answered is not known
        if got is None:
            data = fsio.read_or_none(p, MAX_OUTPUT)
            if data is None:
                return None
            got = (data, bool(os.stat(p).st_mode & 0o111))
        data, executable = got
        sha = fsio.hexdigest(data)
        outs.append([rel, sha, executable, len(data)])
        held = seen.blobs.get(os.path.abspath(p))
        blobs.append(held[0] if held is not None and held[1:] == (sha, len(data)) else data)
    by_dir: dict[str, list[str]] = {}
    nearest: dict[str, str] = {}  # a candidate's folder -> the nearest one that exists
    for cand in sorted(cands):
        head = cand[:cand.rfind("/") + 1]  # os.path.dirname's answer, at a fraction of its cost
        parent = head.rstrip("/") or head
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
            shadow_dirs.append([d, None if _linked(d) else file_stat(d)])
        except OSError:
            return None
    from nvstage.compiler.store.presence import Presence

    shadow = Presence().of(cands)
    shadow_cands = []
    for d, names in by_dir.items():
        for cand in names:
            if shadow[cand] and max(file_stat(cand)[1:3]) >= started_ns:
                return None  # a hiding file made while the compiler ran: seen or not?
        # Each name under its folder: the same few hundred header names recur in every
        # search folder, and compress.
        under = d.rstrip("/") + "/"
        shadow_cands.append([[cand[len(under):] if cand.startswith(under) else cand,
                              shadow[cand]] for cand in names])
    cands_blob = marshal.dumps(shadow_cands)
    rid = fsio.hexdigest(marshal.dumps([[p, sha] for p, _, _, sha in inputs]))[:16]
    result = {"id": rid, "argv": [nvcc, *args], "cwd": cwd, "shadow": shadow_dirs,
              "shadow_sha": fsio.hexdigest(cands_blob), "layout": layout, "outputs": outs,
              "stdout": stdout, "stderr": stderr,
              "hits": c.get("hits", 0) + c.get("misses", 0)}
    return Pending(root, k, result, inputs, blobs, cands_blob, build_doc, key_bytes)


def _linked(folder: str) -> bool:
    """Whether ``folder`` holds a link: what a hiding place through it is (nothing, a folder
    gcc skips, a file a deeper place hides under) follows the link's target, whose making,
    removal or change of kind leaves this folder's stat as it was; so the folder is looked at
    on every hit (its stat recorded as None, which matches none)."""
    try:
        with os.scandir(folder) as it:
            return any(e.is_symlink() for e in it)
    except OSError:
        return True
