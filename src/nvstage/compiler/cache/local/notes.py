"""The small documents a cache folder keeps beside its entries: the header sets of the
direct mode, the notes about tools, and the tiers' figures (``TierStats``: the local folder's,
kept by every build, and each remote tier's, where one is configured).

Header sets and notes are sealed like entries (``fsio.seal``): one that fails its seal reads
as missing and is made again. The tiers' document is not: it decides nothing but whether a
later build skips a tier for a while.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nvstage import fsio
from nvstage.compiler.cache.local.eviction import note_stored
from nvstage.compiler.store.folder import MAX_DOC_BYTES, CacheFolder, read_file, write_atomic
from nvstage.compiler.cache.local.relocation import pieces_ok
from nvstage.compiler.store import zstd
from nvstage.errors import CacheError

_DIRECT_SETS = 8  # header sets kept per direct key (one per distinct header state seen)
_NOTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def headers_digest(pairs) -> str:
    """One digest for a header set: its (name, content digest) pairs, sorted. A set is found
    again only when every header's contents are what they were, so one digest is all a set
    needs to keep of them (a few KB less per source than a digest per header)."""
    return fsio.json_digest(sorted([n, d] for n, d in pairs))


def header_set(d) -> tuple[list[str], str, str] | None:
    """A header set as a document holds it (``{"names", "digest", "shadow"}``), checked: each
    name a work-folder-cut path (``keys.Paths.name``); None when malformed."""
    if not isinstance(d, dict):
        return None
    names, digest, shadow = d.get("names"), d.get("digest"), d.get("shadow")
    if not (isinstance(names, list) and isinstance(digest, str) and isinstance(shadow, str)):
        return None
    for n in names:
        try:
            if not isinstance(n, str) or not pieces_ok(json.loads(n)):
                return None
        except ValueError:
            return None
    return names, digest, shadow


@dataclass
class TierStats:
    """What one build (or, persisted, every build using a local folder) asked of a tier: the
    local folder, or a remote tier (``remote/tiers.py``)."""

    hits: int = 0
    misses: int = 0
    errors: int = 0  # faults: the tier went off
    rejected: int = 0  # objects that were no acceptable entry (garbage, signatures)
    stored: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    seconds: float = 0.0

    def add(self, other: dict) -> None:
        for k, v in other.items():
            if k in self.__dataclass_fields__ and isinstance(v, (int, float)):
                setattr(self, k, getattr(self, k) + v)

    def to_json(self) -> dict:
        d = dict(self.__dict__)
        d["seconds"] = round(d["seconds"], 6)
        return d


def recorded_stats(old) -> tuple[TierStats, int]:
    """A tier's figures as the cache folder keeps them, and the builds they cover (what is
    malformed counts as nothing)."""
    total = TierStats()
    if not isinstance(old, dict):
        return total, 0
    total.add(old)
    return total, old["builds"] if isinstance(old.get("builds"), int) else 0


class Notes(CacheFolder):
    """A cache folder's header sets, notes and tier document."""

    def _direct_file(self, key: str) -> Path:
        return self.root / "direct" / key[:2] / f"{key}.z"

    def header_sets(self, direct_key: str) -> list[tuple[list[str], str, str]]:
        """The header sets seen for a direct key: (the headers' names, the digest of their
        contents, ``headers_digest``; the digest of its shadow state, see ``headers.py``)."""
        try:
            raw = read_file(self._direct_file(direct_key), MAX_DOC_BYTES)
            body = fsio.unseal(raw, self._key())
            if body is None:
                return []
            doc = json.loads(zstd.decompress(body, MAX_DOC_BYTES))
            return [s for s in (header_set(d) for d in doc["sets"]) if s is not None]
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError,
                RecursionError):
            return []

    def add_header_set(self, direct_key: str, names: Sequence[str], digest: str,
                       shadow: str) -> None:
        new = [list(names), digest, shadow]
        with self._flock():
            sets = [list(s) for s in self.header_sets(direct_key)]
            doc = {"sets": [{"names": n, "digest": d, "shadow": sh} for n, d, sh in
                            ([new] + [s for s in sets if s != new])[:_DIRECT_SETS]]}
            folder = self._dir("direct", direct_key[:2])
            sealed = fsio.seal(self._key(), zstd.compress(
                json.dumps(doc, separators=(",", ":")).encode("utf-8", "surrogateescape")))
            write_atomic(folder / f"{direct_key}.z", sealed, self._tmp())
        note_stored(self.root, len(sealed))  # a rewrite counts whole: the next count corrects

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
        write_atomic(self._dir(folder) / f"{key}.json",
                     self._seal({"note": key, "value": value}), self._tmp())

    def tier_doc(self) -> dict:
        """The tiers' document: each tier's figures over all builds using this folder
        ("stats": label -> figures, ``add_tier_stats``) and, from ``remote/tiers.py``, remote
        tiers found down ("down": label -> until, why) and their budgets ("budget").
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
            write_atomic(self.root / "tiers.json", json.dumps(doc).encode(), self._tmp())

    def add_tier_stats(self, rows: Sequence[dict],
                       also: Callable[[dict], None] | None = None) -> None:
        """One build's figures, tier by tier (``{"tier": label, **TierStats.to_json()}``, the
        local folder's first), added to those this folder keeps over every build ("stats":
        label -> figures and builds, for ``nvstage cache``); ``also(doc)``, a remote tier's
        own marks, under the same lock."""
        def change(doc):
            stats = doc.setdefault("stats", {})
            if not isinstance(stats, dict):
                stats = doc["stats"] = {}
            for row in rows:
                total, builds = recorded_stats(stats.get(row["tier"]))
                total.add({k: v for k, v in row.items() if k != "tier"})
                stats[row["tier"]] = {**total.to_json(), "builds": builds + 1}
            if also is not None:
                also(doc)
        self.update_tier_doc(change)
