"""Headers' SHA-256 remembered across processes by identity, as ccache's inode cache does.

Every staged command reads the toolkit's and the system's headers (190 files, 3.5 MB for a
kernel that includes ``cuda_runtime.h``), and each process hashed them all again: 15 to 20 ms
of every miss. Here a header's digest is kept under its path with the identity it had
(inode, size, mtime, ctime); a later process whose stat of the path gives the same identity
takes the digest without reading the file. Kept in the cache folder as one sealed note
(``tools/hashes.json``, sealed with the user's key like every entry), so a document nobody
sealed never stands for a file.

Only what cannot have changed unseen is kept: a file whose mtime and ctime are at least
``SETTLE_NS`` older than the process that hashed it (ccache's "too new" rule; a write within
the same clock tick as the hash would keep the identity and change the contents), and whose
text does not spell the build's work folder (``Look.mentions``: a work folder is made by each
process under a random name after such a file last changed, so a remembered file cannot spell
the next one's). At most ``MAX_FILES`` paths, the least recently hashed dropped first.
"""

from __future__ import annotations

import time

from nvstage.errors import CacheError

NOTE = "hashes"
SETTLE_NS = 2_000_000_000
MAX_FILES = 20_000


class HashMemo:
    """The remembered digests (``path -> [ino, size, mtime_ns, ctime_ns, digest, binary]``)
    and what this process hashed that may join them."""

    def __init__(self, rows: dict | None = None, started_ns: int | None = None):
        self.rows = rows if isinstance(rows, dict) else {}
        self.started_ns = time.time_ns() if started_ns is None else started_ns
        self.fresh: dict[str, list] = {}

    def get(self, path: str, sig: tuple) -> tuple[str, bool] | None:
        """(digest, holds a NUL byte) for ``path`` when its identity is still ``sig``."""
        row = self.rows.get(path)
        if not isinstance(row, list) or len(row) != 6 or tuple(row[:4]) != sig:
            return None
        digest, binary = row[4], row[5]
        if not isinstance(digest, str) or len(digest) != 64 or not isinstance(binary, bool):
            return None
        return digest, binary

    def add(self, path: str, sig: tuple, digest: str, binary: bool) -> None:
        """Keep ``path``'s digest if its identity had settled before this process began."""
        _ino, _size, mtime, ctime = sig
        if max(mtime, ctime) < self.started_ns - SETTLE_NS:
            self.fresh[path] = [*sig, digest, binary]


def load(cache) -> HashMemo:
    """The memo kept in ``cache`` (a ``local.Cache``); an empty one when there is none or it
    does not unseal."""
    try:
        rows = cache.note(NOTE, "tools")
    except (OSError, ValueError):
        rows = None
    return HashMemo(rows)


def save(cache, memo: HashMemo) -> None:
    """What this process hashed, added to what ``cache`` keeps (another process's additions
    since this one loaded it kept too); a note that cannot be written is just not kept."""
    if not memo.fresh:
        return
    try:
        now = cache.note(NOTE, "tools")
        rows = now if isinstance(now, dict) else {}
        for path in memo.fresh:  # newest last: the oldest go first past the cap
            rows.pop(path, None)
        rows.update(memo.fresh)
        if len(rows) > MAX_FILES:
            rows = dict(list(rows.items())[-MAX_FILES:])
        cache.set_note(NOTE, rows, "tools")
    except (OSError, ValueError, CacheError):  # bookkeeping only: never fail a build
        pass
