"""The stage cache's storage: entries of stage outputs under keys, shared by every build of
this user.

Here a key is only a name (64 hex digits): what it hashes is ``keys.py``, how a build looks
stages up and stores them is ``stage.py``, and the header shadowing of the direct mode is
``headers.py``.

Layout under the root::

    CACHEDIR.TAG                            marks the folder as made by nvstage for this cache
    entries/ab/<key>/meta.json, 0, 1, ...   one entry: the outputs and what the tool printed
    direct/ab/<key>.json                    header sets seen for a direct key
    notes/<key>.json                        facts about tools (a compiler's built-in folders)
    tools/<name>.json                       tool versions and nvcc's option grammar
    stats.json                              hits and misses over all builds
    tiers.json                              each tier's figures, tiers found down (tiers.py)
    tmp/                                    entries being written, builds' scratch folders

An entry is written in ``tmp/`` and renamed into place whole, so a reader sees all of it or
none; when two builds race, the second rename fails and its copy is dropped. Every file is
hash-checked while it is copied out: a corrupt or truncated entry is a miss and is removed.
``meta.json`` (which holds those hashes), the header sets and the notes are sealed with an
HMAC under a key kept outside the folder (``seal.py``): an entry written or edited without
the key is a miss like a damaged one, and is removed. Restored files get the mode a tool's
fresh write would give them (the umask applied).
A hit touches ``meta.json``; eviction removes the least recently used entries over the limit.
Only a folder holding nvstage's ``CACHEDIR.TAG`` is written to, evicted from or cleared: a
folder somebody else made is refused, whatever its files are called. A running build's scratch
folder is locked, and ``clear`` leaves it alone.

Nothing in the folder is followed out of it or waited on: every file the cache reads is
opened without following a link and without blocking, must be a regular file and is read
within a bound (``read_file``), so a planted link, FIFO or device is a miss, never a hang; a
link or file where the cache keeps a folder (``tmp``, ``entries``, ...) is removed, not
followed, before anything is written, listed or deleted there.

The work folder. Intermediate files live in a per-build folder whose path the tools see and
sometimes write (cudafe++'s stub names itself in ``#line``). An entry stores each output, and
what the tool printed, without the path plus the offsets where it was (its sites). Restoring
pastes the restoring build's folder back at those offsets, so the same folder gets its bytes
back exactly, whatever they hold. A hit in another folder is that folder's answer only if
every site really came from the path, not from text that spells it (a source can spell a
``--keep`` folder, or cudafe++ can join two string literals into it). Only one kind of site is
known to come from the path: the line marker by which cudafe++'s and cicc's stub names itself
(``own_markers_only``). An entry with any other site, one inside a binary (offsets and lengths
there follow the path's length), or one in what the tool printed is stored under the key
bound to its folder (``put``'s ``pinned``): the same folder gets it back exactly, another
folder runs the stage.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nvstage import fsio
from nvstage.compiler.cache import seal
from nvstage.compiler.warm.folder import HITS, LEDGER, MARK, MARK_LINE, SIGNATURE, WHOLE
from nvstage.errors import CacheError
from nvstage.paths import ENV_CACHE_DIR, cache_dir, cache_dir_label, default_cache_dir

ENV_MAX = "NVSTAGE_CACHE_MAX_SIZE"
DEFAULT_MAX_BYTES = 2 << 30
# /3: documents sealed as every sealed document is (``fsio.seal``); a /2 entry is a miss.
SCHEMA = "nvstage.cache/3"
# The Cache Directory Tagging signature (backup tools skip the folder), then nvstage's line
# (``warm/folder.py``): only a folder holding both is nvstage's.
MARK_TEXT = SIGNATURE + b"\n" + MARK_LINE + b"\n# See https://bford.info/cachedir/\n"
# What the cache itself writes at its root; a folder holding only NVSTAGE_OWN (the toolkit's
# notes, which nvstage before the sealed notes wrote before any build opened the cache) is as
# good as empty.
_NAMES = ("entries", "direct", "notes", "tmp", "stats.json", "tiers.json", "lock")
_NVSTAGE_OWN = ("tools",)
_MARKING = ".nvstage-mark-"  # a mark being written, renamed to MARK when whole
_DIRECT_SETS = 8  # header sets kept per direct key (one per distinct header state seen)
# The size ledger: the bytes the last full count found (and when), and a line per entry stored
# since. A build reads it rather than counting every entry (400 ms at 10,000 entries), and
# counts again once it says the limit is passed, or the count is an hour old.
_LEDGER_MAX = 1 << 20
_RECOUNT_S = 3600
_STALE_SCRATCH_S = 24 * 3600  # an unlocked scratch folder this old was left by a killed build
# The most the cache reads from one of its small documents (meta.json, a header set, a note,
# the counters): what a tool printed is in meta.json, and ptxas -v over thousands of kernels is
# megabytes; a planted /dev/zero or multi-GB file is refused before it is read.
MAX_DOC_BYTES = 64 << 20
_NOTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


SIZE_FORMS = "bytes (123456) or a number with K, M, G or T (500M, 2G, 1.5GiB)"
# Digits, not float(): "1e400" and "nan" are no sizes, and 20 digits bound the work.
_SIZE = re.compile(r"(\d{1,20})(?:\.(\d{1,9}))?\s*([KMGT]?)(?:I?B)?", re.IGNORECASE)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
    """``"500M"``, ``"2G"``, ``"1.5GiB"``, ``"123456"`` -> bytes (rounded down); ValueError
    for anything else (see ``SIZE_FORMS``)."""
    m = _SIZE.fullmatch(text.strip())
    if not m:
        raise ValueError(f"not a size: {text!r}; give {SIZE_FORMS}")
    whole, frac, unit = m.groups()
    mult = _UNITS[unit.upper()]
    return int(whole) * mult + (int(frac) * mult // 10 ** len(frac) if frac else 0)


def _max_bytes_from_env() -> int:
    raw = os.environ.get(ENV_MAX)
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        return parse_size(raw)
    except ValueError:
        shown = raw if len(raw) <= 40 else raw[:40] + "..."
        raise CacheError(f"{ENV_MAX}={shown!r} is not a size: give {SIZE_FORMS}") from None


# Characters no tool escapes when it writes a path (gcc's #line escapes quotes and backslashes,
# make rules escape blanks, '#' and '$'): a work folder named with others is never relocated.
_PLAIN = re.compile(r"/[A-Za-z0-9/._+-]*")


@dataclass(frozen=True)
class Work:
    """A build's work folder as the cache sees it."""

    path: str  # absolute

    @property
    def raw(self) -> bytes:
        return os.fsencode(self.path)

    @property
    def plain(self) -> bool:
        return _PLAIN.fullmatch(self.path) is not None


def cut(data: bytes, part: bytes) -> tuple[bytes, list[int]]:
    """``data`` without each occurrence of ``part`` (left to right, as ``bytes.split``), and
    the offsets in the result where they were: ``paste`` gives ``data`` back exactly."""
    pieces = data.split(part)
    sites, at = [], 0
    for p in pieces[:-1]:
        at += len(p)
        sites.append(at)
    return b"".join(pieces), sites


def paste(blob: bytes, sites: Sequence[int], part: bytes) -> bytes:
    """``part`` put back into ``blob`` at each site (offsets in ``blob``, ascending)."""
    out, last = [], 0
    for s in sites:
        out += [blob[last:s], part]
        last = s
    out.append(blob[last:])
    return b"".join(out)


def own_markers_only(data: bytes, work: bytes, own: bytes) -> bool:
    """Whether every occurrence of ``work`` in ``data`` begins ``own`` (the file's own path)
    in a line marker naming it, ``# 1 "/w/k.cudafe1.stub.c"``: what cudafe++ and cicc write
    from their ``--stub_file_name`` argument. No text a source holds can become such a line
    in their output (they run no directives: #line and stringizing were the preprocessor's)."""
    line = re.compile(rb'#(?:line)? \d+ "' + re.escape(own) + rb'"(?: \d+)*\r?')
    at = data.find(work)
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        if not line.fullmatch(data, start, end) or data.find(b'"', start) + 1 != at:
            return False
        at = data.find(work, at + len(work))
    return True


def _sites_ok(sites, size: int) -> bool:
    return isinstance(sites, list) and all(
        type(s) is int and 0 <= s <= size for s in sites) and sites == sorted(sites)


def pieces_ok(pieces) -> bool:
    """Whether ``pieces`` is text cut at the work folder's path: a non-empty list of strings."""
    return isinstance(pieces, list) and bool(pieces) and all(isinstance(p, str) for p in pieces)


_sha = fsio.hexdigest
digest = fsio.json_digest  # every key is one (what it hashes is ``keys.py``)


def read_file(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of a regular file in the cache, of at most ``limit`` bytes
    (``fsio.read_bounded``: no link followed, no FIFO waited on). Anything else raises an
    OSError, which every caller takes as a miss: a planted link, FIFO or device never hangs a
    build or a command."""
    return fsio.read_bounded(path, limit)


def _is_dir(path: Path) -> bool:
    """A real folder, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


_COUNTED = ("hits", "misses", "corrupt", "stored", "direct_hits")


@dataclass
class Counters:
    """What one build (or, persisted, every build) asked of the cache."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0  # misses because an entry failed its hash check (removed, rebuilt)
    stored: int = 0
    direct_hits: int = 0  # hits found through recorded headers, without the compiler
    # Each tier's figures for this build (``tiers.py``), when a remote tier is configured:
    # in the manifest only then, so a build without one reads as before.
    tiers: list | None = None

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in _COUNTED}
        if self.tiers is not None:
            d["tiers"] = self.tiers
        asked = self.hits + self.misses
        d["hit_rate"] = round(self.hits / asked, 4) if asked else None
        return d


@dataclass
class Entry:
    key: str
    path: Path
    files: list[dict]  # {"name", "sha256", "size", "sites"} in blob order
    stdout: str  # with the reading build's work folder put back
    stderr: str
    seconds: float  # how long the stage took when it really ran


@dataclass
class Restored:
    """Files copied out of an entry: destination -> (sha256, size)."""

    files: dict[str, tuple[str, int]] = field(default_factory=dict)


class Cache:
    """One cache folder. Thread-safe within a process; safe across processes."""

    def __init__(self, root: str | os.PathLike | None = None, *, max_bytes: int | None = None):
        """``root``: None for ``$NVSTAGE_CACHE_DIR`` or the XDG default. Raises
        ``CacheError`` when ``$NVSTAGE_CACHE_MAX_SIZE`` is not a size."""
        self.root = Path(root) if root is not None else cache_dir()
        self.label = f"the cache folder {self.root}" if root is not None else cache_dir_label()
        # The XDG folder named for nvstage may be adopted although it holds the cache's names
        # (a cache from before the mark); a folder the user named may not.
        self._default = root is None and not os.environ.get(ENV_CACHE_DIR) and \
            self.root == default_cache_dir()
        self.max_bytes = _max_bytes_from_env() if max_bytes is None else max_bytes
        self._lock = threading.Lock()
        self._opened = False
        self._secret: bytes | None = None

    # -- the folder: nvstage's own, or refused -----------------------------------------------
    def state(self, doing: str | None = None) -> str:
        """"ours" (marked), "new" (missing, or empty: nvstage may make it its own). Raises
        ``CacheError`` for anything else: a file, a folder nvstage did not make, /proc/self
        (``doing``: what was refused, for the message: "clear")."""
        try:
            st = os.stat(self.root)
        except FileNotFoundError:
            return "new"
        except OSError as e:  # a file on the way (ENOTDIR), no permission, a loop
            raise CacheError(f"{self.label} cannot be used as the stage cache: "
                             f"{e.strerror or e}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise CacheError(f"{self.label} is not a folder: the stage cache needs one "
                             f"(a new or empty folder, which nvstage marks as its own)")
        if self.marked():
            return "ours"
        try:
            # A mark another build is writing right now (``open``) is no stranger's file.
            names = {n for n in os.listdir(self.root)
                     if n not in _NVSTAGE_OWN and not n.startswith(_MARKING)}
        except OSError as e:
            raise CacheError(f"{self.label} cannot be used as the stage cache: "
                             f"{e.strerror or e}") from None
        if MARK in names and self.marked():
            return "ours"  # another build's mark landed between the two looks
        if not names or (self._default and names <= set(_NAMES)):
            return "new"
        if doing:
            raise CacheError(f"refusing to {doing} {self.label}: nvstage did not make it (it "
                             f"holds other files and no {MARK} from nvstage)")
        raise CacheError(f"{self.label} is not an nvstage cache folder: it holds files nvstage "
                         f"did not put there and no {MARK} from nvstage; name a new or empty "
                         f"folder")

    def marked(self) -> bool:
        """Whether the root holds nvstage's mark (a small regular file, read without following
        a link, so a planted link to a FIFO or device cannot hang or fool it)."""
        try:
            fd = os.open(self.root / MARK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return False
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            text = os.read(fd, 4096)
        except OSError:
            return False
        finally:
            os.close(fd)
        lines = text.splitlines()
        return len(lines) >= 2 and lines[0] == SIGNATURE and lines[1] == MARK_LINE

    def open(self) -> Cache:
        """Make sure the folder is nvstage's own: create and mark it when it is new; raise
        ``CacheError`` when it is not (``state``). Writes call this first."""
        if self.state() == "new":
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=self.root, prefix=_MARKING)
                with os.fdopen(fd, "wb") as f:
                    f.write(MARK_TEXT)
                os.replace(tmp, self.root / MARK)
            except OSError as e:  # the cause stays: a caller may tell "read-only" apart
                raise CacheError(f"{self.label} cannot be used as the stage cache: "
                                 f"{e.strerror or e}") from e
        self._key()
        self._opened = True
        return self

    def _key(self) -> bytes:
        """The key that seals this cache's documents (``seal.py``), outside the folder.
        Raises ``CacheError`` when it cannot be read or made, or lies inside the folder."""
        if self._secret is None:
            where = seal.key_path()
            if os.path.realpath(where.parent) == os.path.realpath(self.root) or \
                    os.path.realpath(where).startswith(os.path.join(
                        os.path.realpath(self.root), "")):
                raise CacheError(f"{self.label} holds the cache's own key {where}: whoever "
                                 f"can write the cache could read it",
                                 hint="keep the cache and XDG_CONFIG_HOME apart")
            self._secret = seal.secret()
        return self._secret

    def _seal(self, doc: dict) -> bytes:
        return fsio.seal(self._key(), json.dumps(doc, sort_keys=True,
                                                 separators=(",", ":")).encode())

    def _unseal(self, raw: bytes) -> dict | None:
        """A document ``_seal`` made; None when damaged, forged, sealed under another key,
        or no JSON object."""
        body = fsio.unseal(raw, self._key())
        try:
            doc = json.loads(body) if body is not None else None
        except (ValueError, RecursionError):  # not JSON, not UTF-8, or nested past the stack
            return None
        return doc if isinstance(doc, dict) else None

    @property
    def default(self) -> bool:
        """Whether this is the XDG folder nobody named (no ``$NVSTAGE_CACHE_DIR``)."""
        return self._default

    def _ensure(self) -> None:
        if not self._opened:
            self.open()

    # -- paths ------------------------------------------------------------------------------
    def _entry_dir(self, key: str) -> Path:
        return self.root / "entries" / key[:2] / key

    def _direct_file(self, key: str) -> Path:
        return self.root / "direct" / key[:2] / f"{key}.json"

    def _dir(self, *parts: str) -> Path:
        """``root/parts...``, each a real folder, made when missing. A link, file or FIFO
        where the cache keeps a folder is removed first, never followed: ``tmp`` linked to
        a folder of yours would have every build sweep (delete) old files there."""
        self._ensure()
        p = self.root
        for part in parts:
            p = p / part
            for _ in range(4):
                try:
                    if stat.S_ISDIR(os.lstat(p).st_mode):
                        break
                    os.unlink(p)  # the link itself, not what it points to
                except FileNotFoundError:
                    pass
                with contextlib.suppress(FileExistsError):
                    os.mkdir(p)
            else:
                raise OSError(errno.ENOTDIR, f"{p} keeps being replaced")
        return p

    def _tmp(self) -> Path:
        try:
            return self._dir("tmp")
        except FileNotFoundError:  # the whole folder was removed mid-build: make it again
            self._opened = False
            try:
                self.open()
            except CacheError as e:  # mid-build, a write that fails: the build goes on
                raise OSError(errno.ENOENT, e.message) from None
            return self._dir("tmp")

    @contextlib.contextmanager
    def _flock(self) -> Iterator[None]:
        """A short cross-process lock for read-modify-write of small shared files."""
        self._tmp()
        with self._lock:
            fd = self._lock_file()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)

    def _lock_file(self) -> int:
        """The lock file, opened without following a link or waiting on a FIFO; anything
        but a regular file there is removed and the file made again."""
        path = self.root / "lock"
        for _ in range(4):
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK |
                             os.O_CLOEXEC, 0o600)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
                    raise
            else:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    return fd
                os.close(fd)
            _remove(path, self.root)
        raise OSError(errno.EBUSY, f"{path} keeps being replaced")

    # -- entries ----------------------------------------------------------------------------
    def get(self, key: str, work: Work | None = None) -> Entry | None | bool:
        """The entry for ``key``, its printed text holding ``work``'s path where the tool's
        did; None when absent; False when present but unreadable (or needing a folder)."""
        d = self._entry_dir(key)
        try:
            raw = read_file(d / "meta.json", MAX_DOC_BYTES)
        except FileNotFoundError:
            return None
        except OSError:  # a link, FIFO, device or oversized file planted there
            return False
        if _sealed_as_before(raw):  # an entry from before /3: a miss, made again
            self.discard(key)
            return None
        try:
            meta = self._unseal(raw)
            if meta is None or meta.get("key") != key or meta.get("schema") != SCHEMA:
                return False
            printed = [meta["stdout"], meta["stderr"]]
            if not all(pieces_ok(p) for p in printed) or \
                    (work is None and any(len(p) > 1 for p in printed)):
                return False
            stdout, stderr = (work.path.join(p) if work else p[0] for p in printed)
            return Entry(key, d, list(meta["files"]), stdout, stderr, float(meta["seconds"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return False

    def restore(self, entry: Entry, dests: Sequence[str | os.PathLike],
                work: Work | None = None) -> Restored | None:
        """Copy the entry's files to ``dests`` (same order), checking each hash on the way.

        ``work``: the restoring build's folder, pasted back at each file's sites (see ``put``).
        Returns None, having copied nothing into place, when a file is missing or damaged
        (or has sites and no ``work`` is given).
        Each destination is replaced by rename: a hard link or open reader elsewhere never
        sees the cache's bytes change. Each gets the mode the tool's own write would have
        given it: 0666 (0777 for an executable) less the umask, applied by the system.
        """
        if len(dests) != len(entry.files):
            return None
        staged: list[tuple[str, Path]] = []
        out = Restored()
        try:
            for i, (info, dest) in enumerate(zip(entry.files, dests, strict=True)):
                dest = os.fspath(dest)
                size = info["size"]
                if type(size) is not int:
                    raise ValueError("bad size")
                data = read_file(entry.path / str(i), size)
                if len(data) != size or _sha(data) != info["sha256"]:
                    raise ValueError("hash mismatch")
                sites = info.get("sites", [])
                if not _sites_ok(sites, len(data)) or (sites and work is None):
                    raise ValueError("bad sites")
                sha = info["sha256"]  # verified just above: hashed again only when pasted
                if sites:
                    data = paste(data, sites, work.raw)
                    sha = _sha(data)
                folder = os.path.dirname(dest) or "."
                os.makedirs(folder, exist_ok=True)
                tmp = os.path.join(folder, f".nvstage-{os.urandom(6).hex()}")
                # Created with the mode a fresh write asks for: the umask (and a folder's
                # default ACL) applies as it would to the tool's own file; mkstemp's 0600
                # would take read access from the group and others.
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW |
                             os.O_CLOEXEC, 0o777 if info.get("x") else 0o666)
                staged.append((dest, Path(tmp)))
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                out.files[dest] = (sha, len(data))
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
            work: Work | None = None, pinned: str | None = None,
            own_markers: bool = False, place: tuple[bytes, str] | None = None) -> bool:
        """``put_entry``: whether it stored."""
        return self.put_entry(key, files, stdout=stdout, stderr=stderr, seconds=seconds,
                              names=names, about=about, work=work, pinned=pinned,
                              own_markers=own_markers, place=place) is not None

    def put_entry(self, key: str, files: Sequence[str | os.PathLike], *, stdout: str,
                  stderr: str, seconds: float, names: Sequence[str] | None = None,
                  about: dict | None = None, work: Work | None = None,
                  pinned: str | None = None, own_markers: bool = False,
                  place: tuple[bytes, str] | None = None) -> str | None:
        """Store ``files`` under ``key``; the key it went under, or None when another build
        stored it first, or when it may not be stored.

        ``work``: the build's folder. Each file, and the printed text, is stored without its
        path, with the sites where it was; ``restore`` pastes the restoring build's folder
        there: the same folder gets the same bytes back. Another folder may use the entry
        only when each site surely came from the path, not from text that happened to spell
        it (a source can spell a folder the user named): with ``own_markers``, a text file's
        sites in line markers naming that file itself (``own_markers_only``). Any other
        site, in a binary, or in the printed text, sends the entry to ``pinned``, a key bound
        to this folder (not stored at all without one).

        ``place``: (the base folder's path, the key bound to it) when keys see paths under a
        base folder as relative ones (``keys.Place``). An output or printed text that still
        holds the folder's absolute path (a tool made a relative path absolute: cicc's line
        table, gcc's -g working folder) is what a build in that place gives, not in another:
        it goes under the place's key (``pinned``, when bound to the work folder too, binds
        the place as well).
        """
        with self._staging(key) as tmp:
            infos, bound, placed = [], False, False
            for i, f in enumerate(files):
                with open(f, "rb") as fh:
                    data = fh.read()
                    executable = bool(os.fstat(fh.fileno()).st_mode & 0o111)
                sites: list[int] = []
                if work is not None:
                    blob, sites = cut(data, work.raw)
                    bound = bound or bool(sites) and not (
                        own_markers and b"\0" not in data and
                        own_markers_only(data, work.raw, os.fsencode(os.fspath(f))))
                    data = blob
                placed = placed or (place is not None and place[0] in data)
                (tmp / str(i)).write_bytes(data)
                infos.append({"name": (names[i] if names else os.path.basename(f)),
                              "sha256": _sha(data), "size": len(data), "sites": sites,
                              **({"x": True} if executable else {})})
            printed = [[text] if work is None else text.split(work.path)
                       for text in (stdout, stderr)]
            if any(len(p) > 1 for p in printed):
                bound = True
            if bound:
                if pinned is None:
                    return None
                key = pinned
            elif place is not None and (placed or any(
                    os.fsdecode(place[0]) in piece for p in printed for piece in p)):
                key = place[1]
            final = self._entry_dir(key)
            if os.path.lexists(final):
                return None
            if not self._commit(tmp, final, key, infos, printed, seconds, about or {}):
                return None
            return key

    @contextlib.contextmanager
    def _staging(self, key: str) -> Iterator[Path]:
        """A held folder in tmp/ to make an entry in: ``_commit`` renames it into place, and
        what is left of it on the way out (a refusal, a full disk, Ctrl-C) is removed."""
        tmp, held = self._held_dir(f"{key[:16]}-")
        try:
            yield Path(tmp)
        finally:
            try:  # still the folder the descriptor holds: not renamed into place
                a, b = os.stat(tmp), os.fstat(held)
                if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                    shutil.rmtree(tmp, ignore_errors=True)
            except OSError:
                pass
            finally:
                os.close(held)

    def _commit(self, tmp: Path, final: Path, key: str, infos: list, printed: list,
                seconds: float, about: dict) -> bool:
        """Seal the entry's document into ``tmp`` and rename it into place; False when
        another build got there first (its entry is as good as ours)."""
        meta = {"schema": SCHEMA, "key": key, "files": infos, "stdout": printed[0],
                "stderr": printed[1], "seconds": seconds, "created": time.time(),
                "about": about}
        sealed = self._seal(meta)
        (tmp / "meta.json").write_bytes(sealed)
        self._dir("entries", key[:2])
        try:
            os.rename(tmp, final)
        except OSError:
            return False
        note_stored(self.root, len(sealed) + sum(i["size"] for i in infos))
        return True

    def _held_dir(self, prefix: str) -> tuple[str, int]:
        """A new folder in tmp/ and an open descriptor holding a shared lock on it until it is
        closed: ``clear`` and the sweep of stale folders leave held folders alone."""
        for _ in range(5):
            path = tempfile.mkdtemp(prefix=prefix, dir=self._tmp())
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                continue  # a clear took it already: make another
            fcntl.flock(fd, fcntl.LOCK_SH)
            try:
                a, b = os.stat(path), os.fstat(fd)
                if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
                    return path, fd
            except OSError:
                pass
            os.close(fd)  # a clear took it between mkdtemp and the lock: make another
        raise OSError(errno.EBUSY, f"{self.root / 'tmp'} keeps being cleared")

    def scratch(self) -> Scratch:
        """A scratch folder for one build (its depfiles), held until ``Scratch.close``."""
        return Scratch(*self._held_dir("deps-"))

    def discard(self, key: str) -> None:
        """Remove an entry (damaged): renamed away first, so no reader sees half of it."""
        d = self._entry_dir(key)
        if not (_is_dir(self.root / "entries") and _is_dir(d.parent)):
            return  # through a link: not the cache's to remove
        trash = self._tmp() / f"trash-{os.urandom(16).hex()}"
        try:
            os.rename(d, trash)
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)

    # -- moving entries between tiers (``tiers.py``) ------------------------------------------
    def export_entry(self, key: str) -> tuple[dict, list[bytes]] | None:
        """An entry as a remote tier stores it: its document (files with their hashes and
        sites, the printed text as pieces, seconds, about) and the blobs, each checked; None
        when missing or damaged."""
        d = self._entry_dir(key)
        try:
            meta = self._unseal(read_file(d / "meta.json", MAX_DOC_BYTES))
            if meta is None or meta.get("key") != key or meta.get("schema") != SCHEMA:
                return None
            blobs = []
            for i, info in enumerate(meta["files"]):
                data = read_file(d / str(i), int(info["size"]))
                if _sha(data) != info["sha256"]:
                    return None
                blobs.append(data)
            doc = {k: meta[k] for k in ("files", "stdout", "stderr", "seconds", "about")}
            return doc, blobs
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def import_entry(self, key: str, doc: dict, blobs: Sequence[bytes]) -> bool:
        """Write an entry a remote tier gave (``export_entry``'s form) into this cache, sealed
        with this user's key: the caller has checked its signature, if one is required; here
        every field is checked as ``get`` and ``restore`` will read it. False when it is not
        an entry, or is here already."""
        try:
            files = doc["files"]
            printed = [doc["stdout"], doc["stderr"]]
            seconds = float(doc["seconds"])
            about = doc.get("about") or {}
            if not isinstance(files, list) or len(files) != len(blobs) or \
                    not all(pieces_ok(p) for p in printed) or not isinstance(about, dict):
                return False
            infos = []
            for info, data in zip(files, blobs):
                name, sha, size = info["name"], info["sha256"], info["size"]
                sites = info.get("sites", [])
                if not isinstance(name, str) or not name.isdigit() or type(size) is not int \
                        or size != len(data) or sha != _sha(data) or \
                        not _sites_ok(sites, size):
                    return False
                infos.append({"name": name, "sha256": sha, "size": size, "sites": sites,
                              **({"x": True} if info.get("x") is True else {})})
        except (KeyError, TypeError, ValueError):
            return False
        final = self._entry_dir(key)
        if os.path.lexists(final):
            return False
        with self._staging(key) as tmp:
            for i, data in enumerate(blobs):
                (tmp / str(i)).write_bytes(data)
            return self._commit(tmp, final, key, infos, printed, seconds, about)

    # -- direct mode ------------------------------------------------------------------------
    def header_sets(self, direct_key: str) -> list[tuple[dict[str, str], str]]:
        """The header sets seen for a direct key: (header -> sha256, the digest of its shadow
        state; see ``headers.py``)."""
        try:
            doc = self._unseal(read_file(self._direct_file(direct_key), MAX_DOC_BYTES))
            return [(dict(s["headers"]), str(s["shadow"])) for s in doc["sets"]] if doc else []
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return []

    def add_header_set(self, direct_key: str, deps: Mapping[str, str], shadow: str) -> None:
        new = {"headers": dict(deps), "shadow": shadow}
        with self._flock():
            sets = [{"headers": h, "shadow": sh} for h, sh in self.header_sets(direct_key)]
            doc = {"sets": ([new] + [s for s in sets if s != new])[:_DIRECT_SETS]}
            folder = self._dir("direct", direct_key[:2])
            sealed = self._seal(doc)
            _write_atomic(folder / f"{direct_key}.json", sealed, self._tmp())
        note_stored(self.root, len(sealed))  # a rewrite counts whole: the next count corrects

    # -- notes: facts about tools, kept between builds ---------------------------------------
    def note(self, key: str, folder: str = "notes"):
        """What ``set_note`` stored under ``key`` (in ``folder``: "notes", or "tools" for the
        toolkit's), or None: missing, damaged, unsealed, or no key to check it with."""
        if folder not in ("notes", "tools") or not _NOTE_NAME.fullmatch(key):
            raise ValueError(f"not a note: {folder}/{key}")
        try:
            doc = self._unseal(read_file(self.root / folder / f"{key}.json", MAX_DOC_BYTES))
            return doc["value"] if doc and doc.get("note") == key else None
        except (OSError, CacheError, ValueError, KeyError, TypeError, AttributeError):
            return None

    def set_note(self, key: str, value, folder: str = "notes") -> None:
        """Keep ``value`` (JSON) under ``key``, sealed; raises OSError or ``CacheError``."""
        if folder not in ("notes", "tools") or not _NOTE_NAME.fullmatch(key):
            raise ValueError(f"not a note: {folder}/{key}")
        _write_atomic(self._dir(folder) / f"{key}.json",
                      self._seal({"note": key, "value": value}), self._tmp())

    # -- bookkeeping ------------------------------------------------------------------------
    def record(self, c: Counters) -> None:
        """Add one build's counters to the persisted totals."""
        with self._flock():
            total = self.totals()
            for k in _COUNTED:
                setattr(total, k, getattr(total, k) + getattr(c, k))
            _write_atomic(self.root / "stats.json",
                          json.dumps({k: getattr(total, k) for k in _COUNTED}).encode(),
                          self._tmp())

    def tier_doc(self) -> dict:
        """What ``tiers.py`` keeps here: each tier's figures over all builds using this folder
        ("stats": label -> figures) and tiers found down ("down": label -> until, why).
        Unsealed: it decides nothing but whether a later build skips a tier for a while.
        {} when missing or unreadable."""
        try:
            doc = json.loads(read_file(self.root / "tiers.json", MAX_DOC_BYTES))
            return doc if isinstance(doc, dict) else {}
        except (OSError, ValueError, RecursionError):
            return {}

    def update_tier_doc(self, change) -> None:
        """``change(doc)`` applied to ``tier_doc()`` under the cache's lock, and written."""
        with self._flock():
            doc = self.tier_doc()
            change(doc)
            _write_atomic(self.root / "tiers.json", json.dumps(doc).encode(), self._tmp())

    def totals(self) -> Counters:
        """The counters over all builds (unsealed: they decide nothing); zero when missing
        or unreadable (a FIFO there is unreadable, not a wait)."""
        try:
            d = json.loads(read_file(self.root / "stats.json", MAX_DOC_BYTES))
            total = Counters(**{k: int(d.get(k, 0)) for k in _COUNTED})
        except (OSError, ValueError, TypeError, AttributeError, RecursionError):
            total = Counters()
        # The stages whole-command answers (``warm/answer.py``) stood for: one line per answer.
        try:
            lines = read_file(self.root / WHOLE / HITS, 64 << 20).split()
            total.hits += sum(int(n) for n in lines if n.isdigit())
        except (OSError, CacheError):
            pass
        return total

    def entries(self) -> list[tuple[Path, float, int]]:
        """(entry folder, last use, bytes) for every entry (folders named as keys only)."""
        return self._listed("entries", "meta.json")

    def whole_commands(self) -> list[tuple[Path, float, int]]:
        """(folder, when written, bytes) for every whole-command entry (``warm/entry.py``, inv/)."""
        return self._listed(WHOLE, "meta")

    def _listed(self, folder: str, meta: str) -> list[tuple[Path, float, int]]:
        out = []
        base = self.root / folder
        if not _is_dir(base):
            return out  # missing, or a link: never listed through
        try:
            subs = list(base.iterdir())
        except OSError:
            return out
        for sub in subs:
            if not _is_dir(sub):
                continue
            try:
                found = list(sub.iterdir())
            except OSError:
                continue
            for d in found:
                if not _KEY.fullmatch(d.name) or d.name[:2] != sub.name or not _is_dir(d):
                    continue
                try:
                    used = os.lstat(d / meta).st_mtime
                    size = sum(os.lstat(f).st_size for f in d.iterdir())
                except OSError:
                    continue
                out.append((d, used, size))
        return out

    def small_files(self) -> list[tuple[Path, float, int]]:
        """(file, when written, bytes) for every header-set file (``direct/``) and remembered
        plan (``plans/``): a few KB each, but one per source and command, so they count."""
        out = []
        for folder in ("direct", "plans"):
            base = self.root / folder
            if not _is_dir(base):
                continue
            try:
                subs = [d for d in base.iterdir() if len(d.name) == 2 and _is_dir(d)]
            except OSError:
                continue
            for sub in subs:
                try:
                    found = list(sub.iterdir())
                except OSError:
                    continue
                for f in found:
                    try:
                        st = os.lstat(f)
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode):
                        out.append((f, st.st_mtime, st.st_size))
        return out

    def _held(self) -> list[tuple[Path, float, int, bool]]:
        """What counts against the size limit: (path, last use, bytes, a stage entry?)."""
        return [(d, t, n, True) for d, t, n in self.entries()] + \
            [(d, t, n, False) for d, t, n in (*self.whole_commands(), *self.small_files())]

    def size(self) -> int:
        return sum(n for _, _, n, _ in self._held())

    def evict(self, max_bytes: int | None = None) -> int:
        """Remove least recently used entries until the cache is under the limit, and scratch
        folders killed builds left behind. Only in a folder nvstage marked as its own."""
        if not self.marked():
            return 0
        limit = self.max_bytes if max_bytes is None else max_bytes
        if max_bytes is None:
            known = self._ledger()
            if known is not None and known <= limit:
                return 0
        self._sweep(_STALE_SCRATCH_S)
        self._sweep_whole_command_temps(_STALE_SCRATCH_S)
        # Stage entries, whole-command entries (which hold their outputs too), header sets
        # and plans share the limit.
        entries = self._held()
        total = sum(e[2] for e in entries)
        removed = 0
        if total > limit:
            target = limit * 0.9  # a little room, so the next build does not evict again
            for d, _, n, stage_entry in sorted(entries, key=lambda e: e[1]):
                if total <= target:
                    break
                if stage_entry:
                    self.discard(d.name)
                else:
                    _remove(d, self.root)
                total -= n
                removed += 1
        with contextlib.suppress(OSError):
            _write_atomic(self.root / LEDGER, b"= %d %.3f\n" % (total, time.time()), self._tmp())
        return removed

    def _ledger(self) -> int | None:
        """The bytes held, as the size ledger tells them; None when a full count is due (no
        ledger, a damaged one, or a count over an hour old)."""
        try:
            lines = read_file(self.root / LEDGER, _LEDGER_MAX).split(b"\n")
            mark, total, when = lines[0].split()
            total, age = int(total), time.time() - float(when)
            if mark != b"=" or total < 0 or not 0 <= age < _RECOUNT_S:
                return None
            for line in lines[1:]:
                if line:
                    added = int(line[1:]) if line.startswith(b"+") else -1
                    if added < 0:
                        return None
                    total += added
        except (OSError, ValueError):
            return None
        return total

    def _sweep_whole_command_temps(self, min_age_s: float) -> None:
        """A whole-command entry is written as ``inv/xx/KEY.tmp-PID`` and renamed: one a killed
        process left (SIGKILL mid-store) is removed once it is ``min_age_s`` old."""
        base = self.root / WHOLE
        if not _is_dir(base):
            return
        now = time.time()
        try:
            subs = [d for d in base.iterdir() if len(d.name) == 2 and _is_dir(d)]
        except OSError:
            return
        for sub in subs:
            try:
                found = [d for d in sub.iterdir() if ".tmp-" in d.name]
            except OSError:
                continue
            for d in found:
                try:
                    if now - os.lstat(d).st_mtime >= min_age_s:
                        _remove(d, self.root)
                except OSError:
                    continue

    def clear(self) -> bool:
        """Remove every entry, header set, note and the counters, and whatever in tmp/ no
        running build holds (a build's scratch folder survives, and so does the build).
        False when there is no cache to clear. Raises ``CacheError`` for a folder nvstage did
        not make: nothing in it is touched, whatever its files are called."""
        if self.state("clear") == "new":
            try:
                left = set(os.listdir(self.root)) - set(_NVSTAGE_OWN)
            except FileNotFoundError:
                return False
            if not left:
                return False
            self.open()  # the XDG folder's cache from before the mark: adopted, then cleared
        for name in ("entries", "direct", "notes", "stats.json", "tiers.json", WHOLE, "plans",
                     LEDGER):
            _remove(self.root / name, self.root)
        for p in self.root.glob(".trash-*"):  # left by a clear that was killed
            _remove(p, self.root)
        self._sweep(0)
        return True

    def _sweep(self, min_age_s: float) -> None:
        """Remove what tmp/ holds that no build holds (see ``_held_dir``) and is at least
        ``min_age_s`` old. tmp/ is opened without following a link, and everything in it is
        reached through that descriptor: a ``tmp`` linked to a folder elsewhere is removed
        (the link), never listed through, whatever replaces it meanwhile."""
        path = self.root / "tmp"
        try:
            base = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR):  # a link or a file: not the cache's
                with contextlib.suppress(OSError):
                    os.unlink(path)
            return
        try:
            names = os.listdir(base)
        except OSError:
            names = []
        now = time.time()
        try:
            for name in names:
                try:
                    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK |
                                 os.O_CLOEXEC, dir_fd=base)
                except OSError:
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=base)  # a link, or gone already
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    if now - os.fstat(fd).st_mtime >= min_age_s:
                        # under the lock: a build waiting for it looks again
                        _remove_at(base, name, self.root)
                except OSError:
                    pass  # held by a running build (or going): not ours to clear
                finally:
                    os.close(fd)
        finally:
            os.close(base)

    def describe(self) -> dict:
        """Where the cache is, its size and counters. Raises ``CacheError`` for a file or a
        folder nvstage did not make (never "an empty cache")."""
        self.state()
        entries = self.entries()
        return {"dir": str(self.root), "size": self.size(),
                "max_size": self.max_bytes, "entries": len(entries),
                "stats": self.totals().to_json()}


class Scratch:
    """A build's scratch folder in the cache's tmp/, held against ``clear`` until closed."""

    def __init__(self, path: str, fd: int):
        self.path, self._fd = path, fd

    def close(self) -> None:
        if self._fd >= 0:
            shutil.rmtree(self.path, ignore_errors=True)
            os.close(self._fd)
            self._fd = -1


_KEY = re.compile(r"[0-9a-f]{64}")


def _sealed_as_before(raw: bytes) -> bool:
    """Whether ``raw`` is an entry's document as nvstage.cache/2 sealed it (the seal a field
    of its JSON): read by nothing now, and no reason to count the entry damaged."""
    if not raw.startswith(b"{"):
        return False
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("schema") == "nvstage.cache/2"


def _remove(path: Path, root: Path) -> None:
    """Remove a file, link or folder; a folder is renamed away first, so no reader sees half
    of it. Never follows a link."""
    _remove_at(None, os.fspath(path), root)


def _remove_at(dir_fd: int | None, name: str, root: Path) -> None:
    """``_remove`` of ``name`` in the folder open as ``dir_fd`` (None: ``name`` is a path)."""
    try:
        if not stat.S_ISDIR(os.lstat(name, dir_fd=dir_fd).st_mode):
            os.unlink(name, dir_fd=dir_fd)
            return
        trash = root / f".trash-{os.urandom(16).hex()}"
        os.rename(name, trash, src_dir_fd=dir_fd)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def note_stored(root: str | os.PathLike, nbytes: int) -> None:
    """Add an entry's bytes to the size ledger (``LEDGER``): one appended line, no lock."""
    fsio.append_line(os.path.join(root, LEDGER), b"+%d" % nbytes)


def _write_atomic(path: Path, data: bytes, tmpdir: Path) -> None:
    """``data`` into ``path`` (its folder a real one: ``Cache._dir``) by rename, which
    replaces a link there rather than writing through it; 0600, as the cache's own."""
    fsio.replace(path, data, tmpdir=tmpdir, mode=0o600)


# -- the toolkit's notes: tool versions, nvcc's grammar ------------------------------------
def tool_note(name: str):
    """A note about a tool kept in the user's stage cache (``tools/``, sealed like an entry),
    or None: none there, damaged or unsealed, or no cache folder nvstage may use (refused,
    not made yet, a bad ``$NVSTAGE_CACHE_DIR``). The caller then works it out again: for a
    command that builds nothing, the cache's state is never an error."""
    try:
        cache = Cache()
        if cache.state() != "ours":
            return None
        return cache.note(name, "tools")
    except (CacheError, OSError, ValueError):
        return None


def set_tool_note(name: str, value) -> None:
    """Remember ``value`` (JSON) as ``tool_note(name)``; nothing when the cache folder cannot
    be nvstage's (the same gate a build passes: a folder of yours is refused, not written)."""
    try:
        Cache().open().set_note(name, value, "tools")
    except (CacheError, OSError, ValueError):
        pass
