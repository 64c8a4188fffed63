"""One build's tiers: the local folder first, then each remote tier, with a remote hit written
back to the local folder (what sccache calls multi-level).

A tier found down is also marked down in the local folder for ``NVSTAGE_REMOTE_BACKOFF``
seconds (60), so the next compile commands of a build (one process each, under a launcher)
skip it without waiting again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from nvstage.compiler.cache.local import Cache
from nvstage.compiler.cache.local.folder import MAX_DOC_BYTES
from nvstage.compiler.cache.local.notes import header_set
from nvstage.compiler.cache.remote.config import Config, backoff_seconds, configured
from nvstage.compiler.cache.remote.objects import MAX_OBJECT
from nvstage.compiler.cache.remote.tier import RemoteTier, TierStats

_MAX_SETS = 8


class Tiers:
    """What one build asks of the remote tiers, behind its local cache folder: entries and
    header sets fetched (and written back to the folder), results pushed, and the figures."""

    def __init__(self, cache: Cache, config: Config):
        self.cache = cache
        self.config = config
        self.remotes = list(config.tiers)
        self.stats = {t.label: TierStats() for t in self.remotes}
        self.local = TierStats()
        self.skipped: dict[str, str] = {}
        self.limit = min(MAX_OBJECT, max(cache.max_bytes, 1 << 20))
        down = cache.tier_doc().get("down", {})
        now = time.time()
        backoff = backoff_seconds()
        for tier in self.remotes:
            mark = down.get(tier.label) if isinstance(down, dict) else None
            if backoff and down_now(mark, now) and not tier.off:
                self.skipped[tier.label] = f"found down by an earlier command: {mark.get('why')}"
            tier.on_down = self._mark_down

    def _on(self) -> list[RemoteTier]:
        return [t for t in self.remotes if not t.off and t.label not in self.skipped]

    def _mark_down(self, tier: RemoteTier, why: str) -> None:
        backoff = backoff_seconds()
        if not backoff:
            return

        def change(doc):
            doc.setdefault("down", {})[tier.label] = {"until": time.time() + backoff,
                                                     "why": why}
        try:
            self.cache.update_tier_doc(change)
        except OSError:
            pass

    # -- entries ----------------------------------------------------------------------------
    def fetch_entry(self, keys: Sequence[str]) -> str | None:
        """Look for ``keys`` in each remote tier in turn; the first acceptable entry is
        written into the local folder and its key returned (None: a miss everywhere)."""
        for tier in self._on():
            stats = self.stats[tier.label]
            got = tier.get("entry", keys, stats, self.limit)
            if got is None:
                continue
            key, doc, blobs = got
            try:
                imported = self.cache.import_entry(key, doc, blobs)
            except OSError:
                imported = False
            if not imported and not os.path.isdir(self.cache._entry_dir(key)):
                stats.rejected += 1
                continue
            stats.hits += 1
            return key
        return None

    def missed(self) -> None:
        """A stage that runs: a miss in every tier that is on."""
        for tier in self._on():
            self.stats[tier.label].misses += 1

    def push_entry(self, key: str) -> None:
        """Write the local entry under ``key`` to every tier that takes writes."""
        writers = [t for t in self._on() if t.writable]
        if not writers:
            return
        got = self.cache.export_entry(key)
        if got is None:
            return
        doc, blobs = got
        for tier in writers:
            if tier.put("entry", key, doc, blobs, self.stats[tier.label]):
                self.stats[tier.label].stored += 1

    # -- header sets (the direct mode) ------------------------------------------------------
    def fetch_sets(self, dkey: str) -> list[tuple[list[str], str, str]]:
        """Every header set the remote tiers hold for a direct key (checked as entries are)."""
        out: list[tuple[list[str], str, str]] = []
        for tier in self._on():
            got = tier.get("direct", [dkey], self.stats[tier.label], MAX_DOC_BYTES)
            if got is None:
                continue
            for s in _sets(got[1]):
                if s not in out:
                    out.append(s)
        return out

    def push_sets(self, dkey: str, sets: Sequence[tuple[list[str], str, str]]) -> None:
        """Write a direct key's header sets (newest first) to every tier that takes writes."""
        writers = [t for t in self._on() if t.writable]
        if not writers or not sets:
            return
        doc = {"sets": [{"names": list(n), "digest": d, "shadow": sh}
                        for n, d, sh in sets[:_MAX_SETS]]}
        for tier in writers:
            tier.put("direct", dkey, doc, [], self.stats[tier.label])

    # -- figures ----------------------------------------------------------------------------
    def to_json(self) -> list[dict]:
        """This build's figures, tier by tier (the local folder first)."""
        out = [{"tier": "local", **self.local.to_json()}]
        for tier in self.remotes:
            d = {"tier": tier.label, **self.stats[tier.label].to_json()}
            if tier.off:
                d["off"] = tier.off
            elif tier.label in self.skipped:
                d["off"] = self.skipped[tier.label]
            elif tier.writes_off:
                d["writes_off"] = tier.writes_off
            if tier.why_read_only:
                d["read_only"] = tier.why_read_only
            out.append(d)
        return out


def _sets(doc: dict) -> list[tuple[list[str], str, str]]:
    """The header sets a remote direct document holds, as ``Cache.header_sets`` gives them;
    anything malformed is left out."""
    sets = doc.get("sets")
    if not isinstance(sets, list):
        return []
    return [s for s in (header_set(d) for d in sets[:_MAX_SETS]) if s is not None]


def open_tiers(cache: Cache | None) -> Tiers | None:
    """One build's tiers behind ``cache`` (None without a local cache or a remote one)."""
    if cache is None:
        return None
    config = configured()
    if config is None or not config.tiers:
        return None
    return Tiers(cache, config)


def record(cache: Cache, tiers: Tiers | None, local: TierStats | None = None) -> None:
    """Add one build's figures to those the local folder keeps (``nvstage cache``)."""
    rows = tiers.to_json() if tiers is not None else \
        [{"tier": "local", **(local or TierStats()).to_json()}]

    def change(doc):
        stats = doc.setdefault("stats", {})
        if not isinstance(stats, dict):
            stats = doc["stats"] = {}
        for row in rows:
            total, builds = recorded_stats(stats.get(row["tier"]))
            total.add({k: v for k, v in row.items() if k != "tier"})
            stats[row["tier"]] = {**total.to_json(), "builds": builds + 1}
    cache.update_tier_doc(change)


def recorded_stats(old) -> tuple[TierStats, int]:
    """A tier's figures as the cache folder keeps them, and the builds they cover (what is
    malformed counts as nothing)."""
    total = TierStats()
    if not isinstance(old, dict):
        return total, 0
    total.add(old)
    return total, old["builds"] if isinstance(old.get("builds"), int) else 0


def down_now(mark, now: float) -> bool:
    """Whether a tier's recorded down mark (``Tiers._mark_down``) still holds at ``now``."""
    return isinstance(mark, dict) and isinstance(mark.get("until"), (int, float)) and \
        mark["until"] > now
