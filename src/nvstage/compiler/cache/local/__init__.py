"""The stage cache's local folder, by concern (the folder itself, its locks and the secret are
``store/``'s): entries (``entries``), where the work folder's path goes in them
(``relocation``), header sets, notes and the tiers' document (``notes``), counters, size,
eviction and clearing (``eviction``), and the toolkit's notes (``tool_notes``). ``Cache`` is
all of them over one folder.
"""

from __future__ import annotations

from nvstage.compiler.cache.local.entries import Entries
from nvstage.compiler.cache.local.eviction import Eviction
from nvstage.compiler.cache.local.notes import Notes


class Cache(Entries, Notes, Eviction):
    """One cache folder. Thread-safe within a process; safe across processes."""

    def describe(self) -> dict:
        """``Eviction.describe``, and the stage entries' files as stored (zstd) and as the
        builds wrote them."""
        info = super().describe()
        info["stored_bytes"], info["uncompressed_bytes"] = self.packed_bytes()
        return info


__all__ = ["Cache"]
