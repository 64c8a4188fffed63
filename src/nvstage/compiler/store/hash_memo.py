"""Headers' SHA-256 remembered across processes by identity, as ccache's inode cache does.

Every staged command reads the toolkit's and the system's headers (a kernel that includes
``cuda_runtime.h`` reads nearly two hundred), and each process hashed them all again. Here a header's digest is kept under its path with the identity it had
(inode, size, mtime, ctime); a later process whose stat of the path gives the same identity
takes the digest without reading the file. Kept in the cache folder as sealed notes, one per
folder of headers (``tools/hashes-<digest of the folder>.json``, sealed with the user's key
like every entry, so a document nobody sealed never stands for a file), each read only when a
file in its folder is first looked at: a process pays for the folders it reads, not for every
header the cache has seen.

Only what cannot have changed unseen is kept: a file whose mtime and ctime are at least
``SETTLE_NS`` older than the process that hashed it (ccache's "too new" rule; a write within
the same clock tick as the hash would keep the identity and change the contents), and whose
text does not spell the build's work folder (``Look.mentions``), and only for builds whose
work folder this process made under a random name after such a file last changed (never a keep
folder, whose name a header may hold), so a remembered file cannot spell the next one's.
At most ``MAX_FILES`` names a folder, the least recently hashed dropped first, and at most
``MAX_NOTES`` folders' notes, the oldest removed first.

Only the toolkit's files and the host compiler's own (``trust``: the folders the stage cache
calls fixed) are remembered: the files every process rereads, on the file systems a toolkit is
installed on. A project's own headers are always hashed: on a file system whose ctime is a
copy of the mtime (FAT, sshfs), a header rewritten with its old mtime and size keeps its
identity, and a digest kept across builds would outlive the edit.
"""

from __future__ import annotations

import os
import threading
import time

from nvstage import fsio
from nvstage.errors import CacheError

SETTLE_NS = 2_000_000_000
MAX_FILES = 4096
MAX_NOTES = 256


def note_name(folder: str) -> str:
    """The note that holds ``folder``'s files."""
    return "hashes-" + fsio.hexdigest(folder.encode("utf-8", "surrogateescape"))[:24]


class HashMemo:
    """The remembered digests of each folder read so far (``path -> [ino, size, mtime_ns,
    ctime_ns, digest, binary]``), and what this process hashed that may join them."""

    def __init__(self, cache=None, started_ns: int | None = None):
        self.cache = cache
        self.started_ns = time.time_ns() if started_ns is None else started_ns
        self.rows: dict[str, dict] = {}  # folder -> its note's rows
        self.fresh: dict[str, dict[str, list]] = {}  # folder -> rows to add
        self.roots: tuple[str, ...] = ()  # the folders whose files are remembered (``trust``)
        self._lock = threading.Lock()  # the stage threads and the bookkeeping thread look

    def trust(self, folders) -> None:
        """Remember the files under ``folders`` (the toolkit's and the host compiler's)."""
        roots = {os.path.join(os.path.normpath(f), "") for f in folders if f and
                 os.path.isabs(f)}
        with self._lock:
            self.roots = tuple(sorted(set(self.roots) | roots))

    def _within(self, path: str) -> bool:
        return os.path.normpath(path).startswith(self.roots)

    def _folder(self, folder: str) -> dict:
        rows = self.rows.get(folder)
        if rows is None:
            rows = self.rows[folder] = _read(self.cache, folder)
        return rows

    def get(self, path: str, sig: tuple) -> tuple[str, bool] | None:
        """(digest, holds a NUL byte) for ``path`` when its identity is still ``sig``."""
        if not self._within(path):
            return None
        folder, _, name = path.rpartition("/")
        with self._lock:
            row = self._folder(folder).get(name)
        if not isinstance(row, list) or len(row) != 6 or tuple(row[:4]) != sig:
            return None
        digest, binary = row[4], row[5]
        if not isinstance(digest, str) or len(digest) != 64 or not isinstance(binary, bool):
            return None
        return digest, binary

    def add(self, path: str, sig: tuple, digest: str, binary: bool) -> None:
        """Keep ``path``'s digest if its identity had settled before this process began."""
        _ino, _size, mtime, ctime = sig
        if max(mtime, ctime) < self.started_ns - SETTLE_NS and self._within(path):
            folder, _, name = path.rpartition("/")
            with self._lock:
                self.fresh.setdefault(folder, {})[name] = [*sig, digest, binary]


def _read(cache, folder: str) -> dict:
    if cache is None:
        return {}
    try:
        rows = cache.note(note_name(folder), "tools")
    except (OSError, ValueError, CacheError):
        return {}
    return rows if isinstance(rows, dict) else {}


def load(cache) -> HashMemo:
    """The memo kept in ``cache`` (a ``local.Cache``), each folder's note read when first
    needed; a note missing or not sealed by the user is an empty one."""
    return HashMemo(cache)


def save(cache, memo: HashMemo) -> None:
    """What this process hashed, added to each folder's note in ``cache`` (another process's
    additions since this one read it kept too); a note that cannot be written is just not
    kept: bookkeeping never fails a build."""
    if not memo.fresh:
        return
    for folder, fresh in memo.fresh.items():
        rows = _read(cache, folder)
        for name in fresh:  # newest last: the oldest go first past the cap
            rows.pop(name, None)
        rows.update(fresh)
        if len(rows) > MAX_FILES:
            rows = dict(list(rows.items())[-MAX_FILES:])
        try:
            cache.set_note(note_name(folder), rows, "tools")
        except (OSError, ValueError, CacheError):
            continue
    _prune(cache)


def _prune(cache) -> None:
    """At most ``MAX_NOTES`` folders' notes: a toolkit installed afresh at a new path (a CI
    runner's) leaves its old folders' behind."""
    tools = os.path.join(cache.root, "tools")
    try:
        with os.scandir(tools) as it:
            notes = [(e.stat(follow_symlinks=False).st_mtime_ns, e.path) for e in it
                     if e.name.startswith("hashes-") and e.is_file(follow_symlinks=False)]
    except OSError:
        return
    for _, path in sorted(notes)[:max(0, len(notes) - MAX_NOTES)]:
        try:
            os.unlink(path)
        except OSError:
            pass
