"""A content-addressed cache of stage outputs, shared by every build of this user.

A stage's key hashes what decides its outputs: the tool (resolved path, size, mtime, and the
toolkit version), its arguments with the work folder replaced by a placeholder, the current
folder, the environment nvcc gives it plus the host compiler's own variables, and the
contents of every file it reads. The current folder stays in the key: nvcc hands cudafe++
and cicc the source's absolute path, and the module id (and so the host object) is derived
from it. Host-compiler stages also read headers nobody names: the
first time such a stage runs it gets ``-MD -MF`` (the output is byte-identical with and
without it), and the headers it listed are recorded with their hashes under a "direct" key
(the key without the headers). A later build hashes those headers again and, when they all
match, finds the result without starting the compiler (ccache's direct mode). Unlike
ccache, it also notices a new header that would now be found first: each header set carries
the state of every place where a file could hide one of its headers (``headers.py``).

Layout under the root::

    entries/ab/<key>/meta.json, 0, 1, ...   one entry: the outputs and what the tool printed
    direct/ab/<key>.json                    header sets seen for a direct key
    notes/<key>.json                        facts about tools (a compiler's built-in folders)
    stats.json                              hits and misses over all builds
    tmp/                                    entries being written; renamed into place

An entry is written in ``tmp/`` and renamed into place whole, so a reader sees all of it or
none; when two builds race, the second rename fails and its copy is dropped. Every file is
hash-checked while it is copied out: a corrupt or truncated entry is a miss and is removed.
A hit touches ``meta.json``; eviction removes the least recently used entries over the limit.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .artifacts import sha256_file
from .paths import cache_dir

ENV_MAX = "NVSTAGE_CACHE_MAX_SIZE"
DEFAULT_MAX_BYTES = 2 << 30
SCHEMA = "nvstage.cache/1"
# Stands for the build's work folder in keys and in stored text outputs.
WORK_TOKEN = "@WORK@"
_DIRECT_SETS = 8  # header sets kept per direct key (one per distinct header state seen)
# The host compiler's own environment: anything here changes what gcc reads or writes.
HOST_ENV = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "GCC_EXEC_PREFIX",
            "COMPILER_PATH", "LIBRARY_PATH", "SOURCE_DATE_EPOCH", "LANG", "LC_ALL",
            "LC_MESSAGES", "LC_CTYPE", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS")


def parse_size(text: str) -> int:
    """``"500M"``, ``"2G"``, ``"123456"`` -> bytes."""
    text = text.strip().upper().rstrip("B").rstrip("I")
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(text[-1:], 1)
    return int(float(text[:-1] if mult > 1 else text) * mult)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canon(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


@dataclass
class Counters:
    """What one build (or, persisted, every build) asked of the cache."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0  # misses because an entry failed its hash check (removed, rebuilt)
    stored: int = 0
    direct_hits: int = 0  # hits found through recorded headers, without the compiler

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        asked = self.hits + self.misses
        d["hit_rate"] = round(self.hits / asked, 4) if asked else None
        return d


@dataclass
class Entry:
    key: str
    path: Path
    files: list[dict]  # {"name", "sha256", "size"} in blob order
    stdout: str
    stderr: str
    seconds: float  # how long the stage took when it really ran


@dataclass
class Restored:
    """Files copied out of an entry: destination -> (sha256, size)."""

    files: dict[str, tuple[str, int]] = field(default_factory=dict)


class Cache:
    """One cache folder. Thread-safe within a process; safe across processes."""

    def __init__(self, root: str | os.PathLike | None = None, *, max_bytes: int | None = None):
        self.root = Path(root) if root is not None else cache_dir()
        if max_bytes is None:
            max_bytes = parse_size(os.environ[ENV_MAX]) if os.environ.get(ENV_MAX) \
                else DEFAULT_MAX_BYTES
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    # -- paths ------------------------------------------------------------------------------
    def _entry_dir(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / key

    def _direct_file(self, key: str) -> Path:
        return self.root / "direct" / key[:2] / f"{key}.json"

    def _tmp(self) -> Path:
        t = self.root / "tmp"
        t.mkdir(parents=True, exist_ok=True)
        return t

    @contextlib.contextmanager
    def _flock(self) -> Iterator[None]:
        """A short cross-process lock for read-modify-write of small shared files."""
        self.root.mkdir(parents=True, exist_ok=True)
        with self._lock, open(self.root / "lock", "a+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    # -- entries ----------------------------------------------------------------------------
    def get(self, key: str) -> Entry | None | bool:
        """The entry for ``key``; None when absent; False when present but unreadable."""
        d = self._entry_dir(key)
        try:
            raw = (d / "meta.json").read_bytes()
        except FileNotFoundError:
            return None
        except OSError:
            return False
        try:
            meta = _unseal(raw)
            if meta is None or meta.get("key") != key:
                return False
            return Entry(key, d, list(meta["files"]), meta["stdout"], meta["stderr"],
                         float(meta["seconds"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return False

    def restore(self, entry: Entry, dests: Sequence[str | os.PathLike],
                rewrite: tuple[bytes, bytes] | None = None) -> Restored | None:
        """Copy the entry's files to ``dests`` (same order), checking each hash on the way.

        ``rewrite``: (placeholder, real path) put back into text files (see ``put``).
        Returns None, having copied nothing into place, when a file is missing or damaged.
        Each destination is replaced by rename: a hard link or open reader elsewhere never
        sees the cache's bytes change.
        """
        if len(dests) != len(entry.files):
            return None
        staged: list[tuple[str, Path]] = []
        out = Restored()
        try:
            for i, (info, dest) in enumerate(zip(entry.files, dests, strict=True)):
                dest = os.fspath(dest)
                data = (entry.path / str(i)).read_bytes()
                if len(data) != info["size"] or _sha(data) != info["sha256"]:
                    raise ValueError("hash mismatch")
                if rewrite and b"\0" not in data:
                    data = data.replace(*rewrite)
                os.makedirs(os.path.dirname(dest) or ".", exist_ok=True)
                fd, tmp = tempfile.mkstemp(prefix=".nvstage-", dir=os.path.dirname(dest) or ".")
                staged.append((dest, Path(tmp)))
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                out.files[dest] = (_sha(data), len(data))
            for dest, tmp in staged:
                os.replace(tmp, dest)
            staged = []
        except (OSError, ValueError, KeyError, TypeError):
            return None
        finally:
            for _, tmp in staged:
                with contextlib.suppress(OSError):
                    tmp.unlink()
        with contextlib.suppress(OSError):
            os.utime(entry.path / "meta.json")  # least recently used goes first
        return out

    def put(self, key: str, files: Sequence[str | os.PathLike], *, stdout: str, stderr: str,
            seconds: float, names: Sequence[str] | None = None, about: dict | None = None,
            rewrite: tuple[bytes, bytes] | None = None) -> bool:
        """Store ``files`` under ``key``; False when another build stored it first.

        ``rewrite``: (real path, placeholder) replaced in text files, so an entry made in one
        work folder restores correctly into another (cudafe's stub names its own path in
        ``#line`` markers). A binary file holding the path is not stored: False.
        """
        final = self._entry_dir(key)
        if final.exists():
            return False
        tmp = self._tmp() / f"{key[:16]}-{uuid.uuid4().hex}"
        tmp.mkdir()
        try:
            infos = []
            for i, f in enumerate(files):
                data = Path(f).read_bytes()
                if rewrite and rewrite[0] in data:
                    if b"\0" in data:
                        return False
                    data = data.replace(*rewrite)
                (tmp / str(i)).write_bytes(data)
                infos.append({"name": (names[i] if names else os.path.basename(f)),
                              "sha256": _sha(data), "size": len(data)})
            meta = {"schema": SCHEMA, "key": key, "files": infos, "stdout": stdout,
                    "stderr": stderr, "seconds": seconds, "created": time.time(),
                    "about": about or {}}
            (tmp / "meta.json").write_bytes(_sealed(meta))
            final.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.rename(tmp, final)
            except OSError:  # another build got there first: its entry is as good as ours
                return False
            tmp = None
            return True
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def discard(self, key: str) -> None:
        """Remove an entry (damaged): renamed away first, so no reader sees half of it."""
        d = self._entry_dir(key)
        trash = self._tmp() / f"trash-{uuid.uuid4().hex}"
        try:
            os.rename(d, trash)
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)

    # -- direct mode ------------------------------------------------------------------------
    def header_sets(self, direct_key: str) -> list[tuple[dict[str, str], str]]:
        """The header sets seen for a direct key: (header -> sha256, the digest of its shadow
        state; see ``headers.py``)."""
        try:
            doc = _unseal(self._direct_file(direct_key).read_bytes())
            return [(dict(s["headers"]), str(s["shadow"])) for s in doc["sets"]] if doc else []
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return []

    def add_header_set(self, direct_key: str, deps: Mapping[str, str], shadow: str) -> None:
        path = self._direct_file(direct_key)
        new = {"headers": dict(deps), "shadow": shadow}
        with self._flock():
            sets = [{"headers": h, "shadow": sh} for h, sh in self.header_sets(direct_key)]
            doc = {"sets": ([new] + [s for s in sets if s != new])[:_DIRECT_SETS]}
            _write_atomic(path, _sealed(doc), self._tmp())

    # -- notes: facts about tools, kept between builds ---------------------------------------
    def note(self, key: str):
        """What ``set_note`` stored under ``key``, or None."""
        try:
            doc = _unseal((self.root / "notes" / f"{key}.json").read_bytes())
            return doc["value"] if doc else None
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def set_note(self, key: str, value) -> None:
        _write_atomic(self.root / "notes" / f"{key}.json", _sealed({"value": value}),
                      self._tmp())

    # -- bookkeeping ------------------------------------------------------------------------
    def record(self, c: Counters) -> None:
        """Add one build's counters to the persisted totals."""
        with self._flock():
            total = self.totals()
            for k in ("hits", "misses", "corrupt", "stored", "direct_hits"):
                setattr(total, k, getattr(total, k) + getattr(c, k))
            _write_atomic(self.root / "stats.json", json.dumps(total.__dict__).encode(),
                          self._tmp())

    def totals(self) -> Counters:
        try:
            d = json.loads((self.root / "stats.json").read_bytes())
            return Counters(**{k: int(d.get(k, 0)) for k in Counters().__dict__})
        except (OSError, ValueError, TypeError, AttributeError):
            return Counters()

    def entries(self) -> list[tuple[Path, float, int]]:
        """(entry folder, last use, bytes) for every entry."""
        out = []
        base = self.root / "entries"
        if not base.is_dir():
            return out
        for sub in base.iterdir():
            if not sub.is_dir():
                continue
            for d in sub.iterdir():
                try:
                    used = (d / "meta.json").stat().st_mtime
                    size = sum(f.stat().st_size for f in d.iterdir())
                except OSError:
                    continue
                out.append((d, used, size))
        return out

    def size(self) -> int:
        return sum(n for _, _, n in self.entries())

    def evict(self, max_bytes: int | None = None) -> int:
        """Remove least recently used entries until the cache is under the limit."""
        limit = self.max_bytes if max_bytes is None else max_bytes
        entries = self.entries()
        total = sum(n for _, _, n in entries)
        removed = 0
        if total <= limit:
            return 0
        target = limit * 0.9  # a little room, so the next build does not evict again
        for d, _, n in sorted(entries, key=lambda e: e[1]):
            if total <= target:
                break
            self.discard(d.name)
            total -= n
            removed += 1
        return removed

    def clear(self) -> None:
        for name in ("entries", "direct", "notes", "tmp", "stats.json"):
            p = self.root / name
            if p.is_dir():
                trash = self.root / f".trash-{uuid.uuid4().hex}"
                with contextlib.suppress(OSError):
                    os.rename(p, trash)
                    shutil.rmtree(trash, ignore_errors=True)
            elif p.exists():
                p.unlink()

    def describe(self) -> dict:
        entries = self.entries()
        return {"dir": str(self.root), "size": sum(n for _, _, n in entries),
                "max_size": self.max_bytes, "entries": len(entries),
                "stats": self.totals().to_json()}


def _sealed(doc: dict) -> bytes:
    """``doc`` as JSON with a "check" over its canonical form: damage is seen on read."""
    return json.dumps({**doc, "check": _sha(_canon(doc))}).encode()


def _unseal(raw: bytes) -> dict | None:
    """A ``_sealed`` document; None when its check does not match (raises on bad JSON or a
    missing check, like ``json.loads``)."""
    doc = json.loads(raw)
    check = doc.pop("check")
    return doc if check == _sha(_canon(doc)) else None


def _write_atomic(path: Path, data: bytes, tmpdir: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=tmpdir, prefix=".w-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# -- keys -----------------------------------------------------------------------------------
class FileHasher:
    """sha256 of files as a key sees them.

    Files in the work folder are hashed with the folder's path replaced by a placeholder (so
    a build in another folder finds the same keys); files elsewhere (headers) are remembered
    by (inode, size, mtime): every preprocessing stage of a build reads the same ones.
    """

    def __init__(self, volatile: str | os.PathLike, token: bytes = WORK_TOKEN.encode()):
        self.volatile = os.path.join(os.path.abspath(volatile), "")
        self.real = os.path.abspath(volatile).encode()
        self.token = token
        self._memo: dict[str, tuple[tuple, str]] = {}

    def __call__(self, path: str) -> str | None:
        if os.path.abspath(path).startswith(self.volatile):
            try:
                return _sha(Path(path).read_bytes().replace(self.real, self.token))
            except OSError:
                return None
        try:
            st = os.stat(path)
        except OSError:
            return None
        # ctime too: a copy that keeps size and mtime (cp -p, rsync -a) still moves it.
        sig = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        got = self._memo.get(path)
        if got and got[0] == sig:
            return got[1]
        try:
            digest = sha256_file(path)
        except OSError:
            return None
        self._memo[path] = (sig, digest)
        return digest


def tool_identity(path: str) -> list:
    """A tool as a key part: its real path, size and mtime (ccache's compiler_check=mtime)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
        return [real, st.st_size, st.st_mtime_ns]
    except OSError:
        return [real, None, None]


class Paths:
    """Swap the work folder for a placeholder in keys, and back; resolve paths against cwd."""

    def __init__(self, work: str, cwd: str):
        self.work = os.path.abspath(work)
        self.cwd = cwd

    def norm(self, text: str) -> str:
        return text.replace(self.work, WORK_TOKEN)

    def real(self, text: str) -> str:
        return text.replace(WORK_TOKEN, self.work)

    def abs(self, path: str) -> str:
        return os.path.join(self.cwd, path)


def digest(parts) -> str:
    return _sha(_canon(parts))


_DEP_WORD = re.compile(r"(?:\\[ #\\]|\S)+")
_DEP_UNESCAPE = re.compile(r"\\([ #\\])|\$(\$)")


def parse_depfile(text: str) -> list[str]:
    """The prerequisites of a make rule written by ``gcc -MD`` (escaped blanks kept)."""
    words = [_DEP_UNESCAPE.sub(lambda m: m.group(1) or m.group(2), w)
             for w in _DEP_WORD.findall(text.replace("\\\n", " "))]
    # The first word(s) up to the one ending in ":" are the target.
    for n, w in enumerate(words):
        if w.endswith(":"):
            return list(dict.fromkeys(words[n + 1:]))
    return []
