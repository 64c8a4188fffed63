"""The stage cache's folder: nvstage's own or refused, its subfolders, locks and scratch.

Only a folder holding nvstage's ``CACHEDIR.TAG`` is written to, evicted from or cleared: a
folder somebody else made is refused, whatever its files are called. A running build's scratch
folder is locked, and ``clear`` leaves it alone.

Nothing in the folder is followed out of it or waited on: every file the cache reads is opened
without following a link and without blocking, must be a regular file and is read within a
bound (``read_file``), so a planted link, FIFO or device is a miss, never a hang; a link or file
where the cache keeps a folder (``tmp``, ``entries``, ...) is removed, not followed, before
anything is written, listed or deleted there. The documents it trusts are sealed
(``fsio.seal``) under the user's secret, kept outside the folder (``secret.py``).

Layout under the root (each part is its module's)::

    CACHEDIR.TAG                            marks the folder as made by nvstage for this cache
    entries/ab/<key>/meta.json, 0, 1, ...   one entry: the outputs and what the tool printed
    direct/ab/<key>.json                    header sets seen for a direct key (notes.py)
    notes/<key>.json                        facts about tools (a compiler's built-in folders)
    tools/<name>.json                       tool versions and nvcc's option grammar
    stats.json, size                        hits and misses over all builds, the size ledger
    tiers.json                              each tier's figures, tiers found down (remote/)
    inv/, plans/                            whole commands (cache/command), remembered plans
    tmp/                                    entries being written, builds' scratch folders
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
from collections.abc import Iterator
from pathlib import Path

from nvstage import fsio
from nvstage.compiler.store.secret import key_path, secret
from nvstage.compiler.store.layout import MARK, MARK_LINE, SIGNATURE
from nvstage.errors import CacheError
from nvstage.paths import ENV_CACHE_DIR, cache_dir, cache_dir_label, default_cache_dir

# The Cache Directory Tagging signature (backup tools skip the folder), then nvstage's line
# (``store/layout.py``): only a folder holding both is nvstage's.
MARK_TEXT = SIGNATURE + b"\n" + MARK_LINE + b"\n# See https://bford.info/cachedir/\n"
# What the cache itself writes at its root; a folder holding only NVSTAGE_OWN (the toolkit's
# notes, which nvstage before the sealed notes wrote before any build opened the cache) is as
# good as empty.
_NAMES = ("entries", "direct", "notes", "tmp", "stats.json", "tiers.json", "lock")
NVSTAGE_OWN = ("tools",)
# A mark being written, renamed to MARK when whole (and how nvstage before fsio named one).
_MARKING = (fsio.temporary_prefix(MARK), ".nvstage-mark-")
STALE_SCRATCH_S = 24 * 3600  # an unlocked scratch folder this old was left by a killed build
# The most the cache reads from one of its small documents (meta.json, a header set, a note,
# the counters): what a tool printed is in meta.json, and ptxas -v over thousands of kernels is
# megabytes; a planted /dev/zero or multi-GB file is refused before it is read.
MAX_DOC_BYTES = 64 << 20


def read_file(path: str | os.PathLike, limit: int) -> bytes:
    """The bytes of a regular file in the cache, of at most ``limit`` bytes
    (``fsio.read_bounded``: no link followed, no FIFO waited on). Anything else raises an
    OSError, which every caller takes as a miss: a planted link, FIFO or device never hangs a
    build or a command."""
    return fsio.read_bounded(path, limit)


def is_dir(path: Path) -> bool:
    """A real folder, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


class CacheFolder:
    """One cache folder: whether it is nvstage's, its subfolders, its lock and scratch
    folders, and the seal of its documents. Thread-safe within a process; safe across
    processes. ``Cache`` adds entries, notes and eviction."""

    def __init__(self, root: str | os.PathLike | None = None):
        """``root``: None for ``$NVSTAGE_CACHE_DIR`` or the XDG default."""
        self.root = Path(root) if root is not None else cache_dir()
        self.label = f"the cache folder {self.root}" if root is not None else cache_dir_label()
        # The XDG folder named for nvstage may be adopted although it holds the cache's names
        # (a cache from before the mark); a folder the user named may not.
        self._default = root is None and not os.environ.get(ENV_CACHE_DIR) and \
            self.root == default_cache_dir()
        self._lock = threading.Lock()
        self._opened = False
        self._secret: bytes | None = None

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
                     if n not in NVSTAGE_OWN and not n.startswith(_MARKING)}
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

    def open(self) -> CacheFolder:
        """Make sure the folder is nvstage's own: create and mark it when it is new; raise
        ``CacheError`` when it is not (``state``). Writes call this first."""
        if self.state() == "new":
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                fsio.replace(self.root / MARK, MARK_TEXT, mode=0o600)
            except OSError as e:  # the cause stays: a caller may tell "read-only" apart
                raise CacheError(f"{self.label} cannot be used as the stage cache: "
                                 f"{e.strerror or e}") from e
        self._key()
        self._opened = True
        return self

    def _key(self) -> bytes:
        """The secret that seals this cache's documents (``secret.py``), outside the folder.
        Raises ``CacheError`` when it cannot be read or made, or lies inside the folder."""
        if self._secret is None:
            where = key_path()
            if os.path.realpath(where.parent) == os.path.realpath(self.root) or \
                    os.path.realpath(where).startswith(os.path.join(
                        os.path.realpath(self.root), "")):
                raise CacheError(f"{self.label} holds the cache's own key {where}: whoever "
                                 f"can write the cache could read it",
                                 hint="keep the cache and XDG_CONFIG_HOME apart")
            self._secret = secret()
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
            remove(path, self.root)
        raise OSError(errno.EBUSY, f"{path} keeps being replaced")

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
                        remove_at(base, name, self.root)
                except OSError:
                    pass  # held by a running build (or going): not ours to clear
                finally:
                    os.close(fd)
        finally:
            os.close(base)


class Scratch:
    """A build's scratch folder in the cache's tmp/, held against ``clear`` until closed."""

    def __init__(self, path: str, fd: int):
        self.path, self._fd = path, fd

    def close(self) -> None:
        if self._fd >= 0:
            shutil.rmtree(self.path, ignore_errors=True)
            os.close(self._fd)
            self._fd = -1


KEY = re.compile(r"[0-9a-f]{64}")


def remove(path: Path, root: Path) -> None:
    """Remove a file, link or folder; a folder is renamed away first, so no reader sees half
    of it. Never follows a link."""
    remove_at(None, os.fspath(path), root)


def remove_at(dir_fd: int | None, name: str, root: Path) -> None:
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


def write_atomic(path: Path, data: bytes, tmpdir: Path) -> None:
    """``data`` into ``path`` (its folder a real one: ``Cache._dir``) by rename, which
    replaces a link there rather than writing through it; 0600, as the cache's own."""
    fsio.replace(path, data, tmpdir=tmpdir, mode=0o600)
