"""The command cache's answer: a whole nvcc command answered from its entry, no process started.

In a build of hundreds of translation units most commands are hits, and a hit is what users
feel: this package answers one with the standard library alone (no typer, rich, cuda-python or
numpy, and of nvstage only ``fsio``, ``paths`` and the hit path's modules), before anything else is
imported.

Under the command's key (``key.py``), an entry made when the command last ran through the
stage pipeline (``entry.py``) lists every file the preprocessor read (the source and each
header, system ones included) with its stat and SHA-256, the places where a new file would hide
one of those headers and the search folders' layout, the output files (object, PTX, cubin,
dependency file) and what the tools printed. A hit needs every file unchanged (the stat alone
where it was settled when recorded, else the contents, as ccache's race rule does), no new
hiding file and the same layout; then the outputs are copied into place, checked against their
SHA-256 on the way, and what the tools printed is printed again. Anything else is a miss: the
pipeline runs (its stage cache still saves what it can) and records a new entry.

Entries are sealed like every cache document (``fsio.seal``, under the user's key) and live in
the stage cache's folder under ``inv/``, only in a folder nvstage marked as its own
(``folder.py``).
"""

from __future__ import annotations

import marshal
import os
import stat
import time

from nvstage import fsio
from nvstage.compiler.store.layout import (
    HITS,
    MAX_META,
    MAX_OUTPUT,
    SCHEMA,
    SETTLE_NS,
    WHOLE,
    entry_dir,
    opened,
)
from nvstage.compiler.cache.command.command_key import file_stat, key
from nvstage.compiler.toolkit.nvcc_lookup import find as find_nvcc, said

# What this package imports is what a hit costs before it does anything: the standard library
# that ``fsio`` imports, and marshal, whose bytes are only read after their HMAC checks out
# (marshal is no format for untrusted data).


def load(root: str, k: str, secret: bytes) -> dict | None:
    """The entry under ``k`` (``entry.Pending``'s document) if its seal holds."""
    raw = fsio.read_or_none(os.path.join(entry_dir(root, k), "meta"), MAX_META)
    body = None if raw is None else fsio.unseal(raw, secret)
    if body is None:
        return None
    from nvstage.compiler.store import zstd

    try:  # sealed, then compressed: nothing unsealed is decompressed
        meta = marshal.loads(zstd.decompress(body, MAX_META))
    except (ValueError, EOFError, TypeError, ImportError):
        return None
    return meta if isinstance(meta, dict) and meta.get("schema") == SCHEMA else None


def sha256_file(path: str) -> str | None:
    """A file's SHA-256 (through a link: a header may be one); None when it cannot be read."""
    data = fsio.read_or_none(path, MAX_OUTPUT, follow=True)
    return None if data is None else fsio.hexdigest(data)


class Memory:
    """What a resident nvstage keeps between the hits it answers (``launcher/resident/server.py``; a
    launcher answers one and keeps nothing): each entry's document under its file's identity (an
    entry is rewritten whole, under a new inode: ``fsio.replace``), and each watched folder's
    stat (with its list of hiding places, whatever command names them) in which its hiding
    places were last found as recorded, where that folder's listing alone said so (nothing below
    it can appear without changing it) and its stat had settled (a change in the same timestamp
    tick would not show); and the lists of hiding places and the build manifests by their
    SHA-256 (``shadow``, ``manifests``)."""

    MAX = 4096
    # The documents kept, by their files' bytes (compressed: a document of a source with a
    # few hundred headers is about 13 KB there, several times that in memory): a server of a
    # large project's thousands of commands stays small.
    META_BYTES = 8 << 20

    def __init__(self):
        # (path, secret) -> (the file's identity, the document)
        self.metas = _Kept(self.META_BYTES)
        self.folders: dict = {}
        self.digests: dict = {}  # a file's path -> (its settled stat, its SHA-256)
        self.shadows = _Kept(self.META_BYTES)  # hiding places' SHA-256 -> the list
        # Build manifests' SHA-256 -> their bytes (``build_record.add_hit``): one read and
        # checked is that manifest in every later hit's build-record entry.
        self.manifests = _Kept(self.META_BYTES)

    def digest(self, path: str, now: list[int]) -> str | None:
        """``path``'s SHA-256, read again unless its stat is the settled one it had when it
        was last read (a source built right after an edit is unsettled in its entry)."""
        got = self.digests.get(path)
        if got is not None and got[0] == now:
            return got[1]
        sha = sha256_file(path)
        if sha is not None and max(now[1], now[2]) < time.time_ns() - SETTLE_NS:
            _bounded(self.digests)[path] = (now, sha)
        return sha

    def shadow(self, path: str, sha: str):
        """An entry's hiding places (``_shadow``), kept by their SHA-256: the commands of a
        project share a few such lists (the same search folders, the same headers), and one
        read and checked is that list wherever it is named."""
        got = self.shadows.get(sha)
        if got is None:
            raw = _shadow_bytes(path, sha)
            if raw is None:
                return None
            got = self.shadows.keep(sha, marshal.loads(raw), len(raw))
        return got

    def load(self, root: str, k: str, secret: bytes) -> dict | None:
        path = os.path.join(entry_dir(root, k), "meta")
        try:
            st = os.stat(path)
        except OSError:
            return None
        ident = (st.st_dev, st.st_ino, st.st_size)
        got = self.metas.get((path, secret))
        if got is not None and got[0] == ident:
            return got[1]
        meta = load(root, k, secret)
        if meta is not None:  # a document read again is counted again: let go sooner
            self.metas.keep((path, secret), (ident, meta), st.st_size)
        return meta


class _Kept(dict):
    """What a ``Memory`` keeps of one kind, within ``Memory.MAX`` items and ``budget`` bytes:
    all of it let go at once when the next would pass either (the next hits read it again)."""

    def __init__(self, budget: int):
        super().__init__()
        self.budget, self.used = budget, 0

    def keep(self, key, value, size: int):
        if len(self) >= Memory.MAX or self.used + size > self.budget:
            self.clear()
            self.used = 0
        self[key] = value
        self.used += size
        return value


def _bounded(d: dict) -> dict:
    if len(d) >= Memory.MAX:
        d.clear()
    return d


def inputs_unchanged(meta: dict, result: dict, entry: str | None = None,
                     memo: dict | None = None, memory: Memory | None = None) -> bool:
    """Every file ``result``'s preprocessing read is as recorded, no new file hides one of
    them, and the search folders are what they were. ``memo``: what the results tried before
    it found (a file's row -> unchanged?, a path -> its SHA-256); ``memory``: a resident's."""
    memo = {} if memo is None else memo
    rows = meta["files"]
    for n in result["inputs"]:
        ok = memo.get(n)
        if ok is None:
            path, st, settled, sha = rows[n]
            try:
                now = file_stat(path)
            except OSError:
                now = None
            if now is None:
                ok = False
            elif now == st and settled:
                ok = True
            else:
                if path not in memo:
                    memo[path] = sha256_file(path) if memory is None else \
                        memory.digest(path, now)
                ok = memo[path] == sha
            memo[n] = ok
        if not ok:
            return False
    # Where a new file would hide a header: a folder whose entries changed (its mtime and
    # ctime move when a name is made, removed or renamed in it) has its candidates looked at
    # again (a listing per folder); an unchanged folder cannot have gained or lost one.
    cands = None
    for n, (d, st) in enumerate(result["shadow"]):
        try:
            now = file_stat(d)
        except OSError:
            now = None
        if now == st:
            continue
        # What a look decides is the folder's names against the list's (kept by its SHA-256):
        # the commands that share both share the look (a build folder's stat moves each build).
        seen = (d, result["shadow_sha"], n)
        if memory is not None and now is not None and memory.folders.get(seen) == now:
            continue
        if cands is None:  # kept apart (thousands of names for a thrust source), sealed by sha
            path, sha = os.path.join(entry or "", result["shadow_file"]), result["shadow_sha"]
            cands = _shadow(path, sha) if memory is None else memory.shadow(path, sha)
            if cands is None:
                return False
            from nvstage.compiler.store.presence import Presence

            presence = Presence()  # each folder listed once, not each name asked
        there, by_listing = presence.under(d, [c for c, _ in cands[n]])
        if any(there[c] != was for c, was in cands[n]):
            return False
        if memory is not None and by_listing and now is not None and \
                max(now[1], now[2]) < time.time_ns() - SETTLE_NS:
            _bounded(memory.folders)[seen] = now
    for row in result["layout"]:
        d, real = row[0], row[1]
        ident = row[2] if len(row) > 2 else None
        if ident is not None:  # the folder it was when recorded (its realpath then): one stat
            try:
                st = os.stat(d)
            except OSError:
                return False
            if stat.S_ISDIR(st.st_mode) and [st.st_dev, st.st_ino] == ident:
                continue
        if (os.path.realpath(d) if os.path.isdir(d) else None) != real:
            return False
    return True


def _shadow(path: str, sha: str):
    raw = _shadow_bytes(path, sha)
    return None if raw is None else marshal.loads(raw)


def _shadow_bytes(path: str, sha: str) -> bytes | None:
    from nvstage.compiler.store import zstd

    raw = fsio.read_or_none(path, MAX_META)
    try:
        raw = zstd.decompress(raw, MAX_META) if raw is not None else None
    except (ValueError, ImportError):
        return None
    if raw is None or fsio.hexdigest(raw) != sha:
        return None
    return raw


def restore(result: dict, src: str, cwd: str) -> bool:
    """Each output written into place from the entry, checked against its SHA-256; False
    (nothing half-written left behind as the output) when one does not check out."""
    from nvstage.compiler.store import zstd

    rid = result["id"]
    for n, (rel, sha, executable, size) in enumerate(result["outputs"]):
        packed = fsio.read_or_none(os.path.join(src, f"{rid}.{n}"), MAX_OUTPUT)
        try:
            data = None if packed is None else zstd.decompress(packed, size)
        except (ValueError, ImportError):
            data = None
        if data is None or fsio.hexdigest(data) != sha:
            return False
        dest = os.path.join(cwd, rel)
        try:
            # Over an existing file in place, as nvcc writes: the folder's entries do not
            # change, so the next hit's look at that folder stays one stat. A new one is made
            # whole under another name first, with the mode nvcc's own write would give it.
            # O_NONBLOCK: a fifo planted as the output is ENXIO, not a wait for a reader
            # (a regular file ignores the flag).
            fd = os.open(dest, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            fd = None
        except OSError:
            return False
        try:
            st = os.fstat(fd) if fd is not None else None
            if st is not None and not stat.S_ISREG(st.st_mode):
                os.close(fd)
                return False
            if st is not None and _host_object(data) and \
                    (st.st_nlink > 1 or stat.S_IMODE(st.st_mode) != 0o666 & ~fsio.umask()):
                # gcc's assembler removes the object before it writes it: another name of the
                # old one keeps its bytes, and the new one has the mode this umask gives, as
                # after a plain nvcc run (nvcc's other outputs, the depfile among them, are
                # written in place).
                os.close(fd)
                fd = None
            if fd is None:
                fsio.replace(dest, data, mode=0o777 if executable else 0o666)
                continue
            try:
                # Over the old bytes, then cut to length: ext4 treats a truncation to zero
                # followed by writes as a replacement and allocates (and writes back) the
                # blocks at close, 0.3 ms a file against 16 us this way.
                done = 0
                while done < len(data):
                    done += os.pwrite(fd, memoryview(data)[done:], done)
                os.ftruncate(fd, len(data))
            finally:
                os.close(fd)
        except OSError:  # a full disk: no half file left beside the output
            return False
    try:
        os.utime(os.path.join(src, "meta"))  # least recently used goes first
    except OSError:
        pass
    return True


def _host_object(data: bytes) -> bool:
    """Whether ``data`` is an ELF file for the host (the assembler's object), not a cubin."""
    if data[:4] != b"\x7fELF" or len(data) < 20:
        return False
    return int.from_bytes(data[18:20], "little" if data[5] == 1 else "big") != 190  # EM_CUDA


def newest_result(nvcc: str, args: list[str], cwd: str, env, root: str, secret: bytes,
                  view: bool = False, memory: Memory | None = None) -> dict | None:
    """The newest result for ``nvcc args`` whose every file read is unchanged, its outputs
    restored into place (``answer``'s, and ``nvstage compile``'s own); None for a miss.
    ``view``: only a result that holds what the CLI prints; ``memory``: a resident nvstage's
    (``Memory``)."""
    k = key(nvcc, args, cwd, env)
    if k is None:
        return None
    meta = load(root, k, secret) if memory is None else memory.load(root, k, secret)
    if meta is None:
        return None
    d = entry_dir(root, k)
    memo: dict = {}
    for result in meta["results"]:
        if view and not isinstance(result.get("view"), dict):
            continue
        try:
            if not inputs_unchanged(meta, result, d, memo, memory) or \
                    not restore(result, d, cwd):
                continue
        except (OSError, ValueError, TypeError, KeyError, IndexError):
            continue  # a malformed result behind a good seal: the next, or the pipeline
        result["dir"] = d
        _count(root, result.get("hits", 0))
        return result
    return None


def _count(root: str, hits: int) -> None:
    """The stage hits a whole answer stands for, added to the cache's totals (``nvstage
    cache``; ``Cache.totals`` adds them up)."""
    try:
        fsio.append_line(os.path.join(root, WHOLE, HITS), b"%d" % int(hits))
    except (ValueError, TypeError):
        pass


def answer(argv: list[str], cwd: str, env, memory: Memory | None = None) -> dict | None:
    """The answering verb: ``argv`` (``NVCC ARGS...``) answered whole from the command cache,
    its outputs in place; what was served (for its build log entry, ``current.add_hit``, and
    what the tools printed: ``out``, ``err``); None for a miss. ``memory``: a resident's."""
    t0, started = time.perf_counter(), time.time()
    found = find_nvcc(argv[0], env)  # the nvcc the miss path would run (nvcc_lookup)
    where = opened(env) if found is not None else None
    if where is None:
        return None
    nvcc, nvcc_from = found
    meta = newest_result(nvcc, argv[1:], cwd, env, *where, memory=memory)
    if meta is None:
        return None
    err = meta["stderr"].encode("utf-8", "surrogateescape")
    if env.get("NVSTAGE_LAUNCHER_VERBOSE"):
        err = said(nvcc, nvcc_from, "answered whole from the cache").encode(
            "utf-8", "surrogateescape") + err
    return {"dir": meta["dir"], "argv": [nvcc, *argv[1:]], "cwd": cwd, "t0": t0,
            "started": started, "env": env, "build_sha": meta.get("build_sha"),
            "build": os.path.join(meta["dir"], f"{meta['id']}.build"),
            "nvcc_from": nvcc_from, "out": meta["stdout"].encode("utf-8", "surrogateescape"),
            "err": err}


def serve(argv: list[str], cwd: str, env, memory: Memory | None = None,
          client: tuple[int, int] | None = None) -> dict | None:
    """The serving verb: ``answer``, and the build log's entry of the hit written, for this
    process or for ``client`` ((pid, parent pid): the resident nvstage serves another
    process's command). What was served (``answer``'s: the caller prints or sends ``out``
    and ``err``); None for a miss. Never raises: a broken entry or log is never a reason to
    fail a build (the pipeline answers a miss), and a command served must not run again."""
    try:
        served = answer(argv, cwd, env, memory)
    except Exception:
        return None
    if served is None:
        return None
    if client is not None:
        served.update(pid=client[0], ppid=client[1])
    try:
        from nvstage.compiler.buildlog import current

        current.add_hit(served, None if memory is None else memory.manifests)
    except Exception:
        pass
    return served
