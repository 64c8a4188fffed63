"""One build's tiers: the local folder first, then each remote tier, with a remote hit written
back to the local folder (what sccache calls multi-level).

A tier found down is also marked down in the local folder for ``NVSTAGE_REMOTE_BACKOFF``
seconds (60), so the next compile commands of a build (one process each, under a launcher)
skip it without waiting again. A tier that waited past its budget (``budget.py``) is marked
off for the rest of its build (the build tool's run; where no build tool runs the commands,
for the same backoff), and what each tier cost and stood for is added up over the build's
commands there too ("budget": label -> build, waited, stake, last).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from nvstage.compiler.cache.local import Cache
from nvstage.compiler.store.folder import MAX_DOC_BYTES
from nvstage.compiler.cache.local.notes import TierStats, header_set
from nvstage.compiler.cache.remote.budget import GAP_SECONDS, Budget
from nvstage.compiler.cache.remote.config import Config, backoff_seconds, configured
from nvstage.compiler.cache.remote.objects import MAX_OBJECT
from nvstage.compiler.cache.remote.tier import RemoteTier, notice
from nvstage.compiler.buildlog.current import build_identity
from nvstage.errors import CacheError

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
        self.build = build_identity()
        doc = cache.tier_doc()
        down, spent = doc.get("down", {}), doc.get("budget", {})
        now = time.time()
        backoff = backoff_seconds()
        self.budgets: dict[str, Budget] = {}
        for tier in self.remotes:
            mark = down.get(tier.label) if isinstance(down, dict) else None
            if backoff and (down_now(mark, now) or self._ours(mark, now)) and not tier.off:
                self.skipped[tier.label] = f"found {'too slow' if mark.get('build') else 'down'}" \
                                           f" by an earlier command: {mark.get('why')}"
            tier.on_down = self._mark_down
            before = spent.get(tier.label) if isinstance(spent, dict) else None
            self.budgets[tier.label] = Budget(*_figures(before)) \
                if self._ours(before, now) else Budget()
        if self.build and any(not self._said(down.get(label), now) for label in self.skipped):
            self._say_skipped()

    def _ours(self, mark, now: float) -> bool:
        """Whether a mark the local folder keeps (a budget's figures, a tier marked too slow)
        is this build's: named by the same build tool's run, or, with no build tool to name
        it, written less than ``GAP_SECONDS`` ago by a command of the same process tree."""
        if not isinstance(mark, dict) or self.build is None or mark.get("build") != self.build:
            return False
        if not self.build.startswith("process:"):
            return True
        last = mark.get("last")
        return isinstance(last, (int, float)) and now - last <= GAP_SECONDS

    def _on(self) -> list[RemoteTier]:
        return [t for t in self.remotes if not t.off and t.label not in self.skipped]

    def _said(self, mark, now: float) -> bool:
        """Whether a command of this build said already that the tier is off: said once a
        build, however many of its commands find it down at once (``make -j8``) or skip it."""
        return isinstance(mark, dict) and \
            self._ours({"build": mark.get("said"), "last": mark.get("said_at")}, now)

    def _say_skipped(self) -> None:
        """The line for a tier an earlier command marked down, by the first command of this
        build to skip it (the mark records that it was said)."""
        fresh: list[str] = []

        def change(doc):
            now = time.time()
            down = doc.get("down")
            for label in self.skipped:
                mark = down.get(label) if isinstance(down, dict) else None
                if isinstance(mark, dict) and self.build is not None and \
                        not self._said(mark, now):
                    mark.update(said=self.build, said_at=now)
                    fresh.append(label)
        try:
            self.cache.update_tier_doc(change)
        except OSError:
            return
        for label in fresh:
            notice(f"remote cache {label} is off for the rest of this build: "
                   f"{self.skipped[label]}")

    def _mark_down(self, tier: RemoteTier, why: str, slow: bool = False) -> bool:
        """A tier found down, for the backoff; one found too slow (``slow``), for the rest of
        this build too. True when a command of this build said so already (``_said``)."""
        backoff = backoff_seconds()
        if not backoff:
            return False
        said = [False]

        def change(doc):
            now = time.time()
            down = doc.get("down")
            if not isinstance(down, dict):
                down = doc["down"] = {}
            said[0] = self._said(down.get(tier.label), now)
            mark = {"until": now + backoff, "why": why}
            if slow and self.build is not None:
                mark.update(build=self.build, last=now)
            if self.build is not None:
                mark.update(said=self.build, said_at=now)
            down[tier.label] = mark
        try:
            self.cache.update_tier_doc(change)
        except OSError:
            pass
        return said[0]

    # -- entries ----------------------------------------------------------------------------
    def fetch_entry(self, keys: Sequence[str]) -> str | None:
        """Look for ``keys`` in each remote tier in turn; the first acceptable entry is
        written into the local folder and its key returned (None: a miss everywhere)."""
        for tier in self._on():
            stats = self.stats[tier.label]
            got = tier.get("entry", keys, stats, self.limit, self.budgets[tier.label])
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
            self.budgets[tier.label].add_stake(doc.get("seconds"))  # what the hit saved
            return key
        return None

    def missed(self, seconds: float = 0.0) -> None:
        """A stage that ran for ``seconds``: a miss in every tier that is on, and the work a
        hit there would have saved."""
        for tier in self._on():
            self.stats[tier.label].misses += 1
            self.budgets[tier.label].add_stake(seconds)

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
            if tier.put("entry", key, doc, blobs, self.stats[tier.label],
                        self.budgets[tier.label]):
                self.stats[tier.label].stored += 1

    # -- header sets (the direct mode) ------------------------------------------------------
    def fetch_sets(self, dkey: str) -> list[tuple[list[str], str, str]]:
        """Every header set the remote tiers hold for a direct key (checked as entries are)."""
        out: list[tuple[list[str], str, str]] = []
        for tier in self._on():
            got = tier.get("direct", [dkey], self.stats[tier.label], MAX_DOC_BYTES,
                           self.budgets[tier.label])
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
            tier.put("direct", dkey, doc, [], self.stats[tier.label], self.budgets[tier.label])

    # -- figures ----------------------------------------------------------------------------
    def add_spent(self, doc: dict) -> None:
        """This command's waiting and work at stake, tier by tier, added to its build's in
        the local folder's document (under its lock: commands of a build end at once). One
        build's figures per tier: another build's replace them."""
        if self.build is None:
            return
        spent = doc.get("budget")
        if not isinstance(spent, dict):
            spent = doc["budget"] = {}
        now = time.time()
        for label, budget in self.budgets.items():
            if not (budget.waited or budget.stake):
                continue
            old = spent.get(label)
            waited, stake = _figures(old) if self._ours(old, now) else (0.0, 0.0)
            spent[label] = {"build": self.build, "waited": round(waited + budget.waited, 6),
                            "stake": round(stake + budget.stake, 6), "last": now}

    def record(self) -> None:
        """Add this build's figures, and what each tier cost it, to those the local folder
        keeps (``nvstage cache``)."""
        self.cache.add_tier_stats(self.to_json(), self.add_spent)

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


def _figures(mark: dict) -> tuple[float, float]:
    """(waited, stake) as the local folder keeps them for a build (malformed: nothing)."""
    out = []
    for name in ("waited", "stake"):
        v = mark.get(name)
        out.append(float(v) if isinstance(v, (int, float)) and 0 <= v < 1e9 else 0.0)
    return out[0], out[1]


def _sets(doc: dict) -> list[tuple[list[str], str, str]]:
    """The header sets a remote direct document holds, as ``Cache.header_sets`` gives them;
    anything malformed is left out."""
    sets = doc.get("sets")
    if not isinstance(sets, list):
        return []
    return [s for s in (header_set(d) for d in sets[:_MAX_SETS]) if s is not None]


def open_tiers(cache: Cache | None) -> Tiers | None:
    """One build's tiers behind ``cache`` (None without a local cache or a remote one, or
    when they cannot be opened: a remote tier never fails a build)."""
    if cache is None:
        return None
    config = configured()
    if config is None or not config.tiers:
        return None
    try:
        return Tiers(cache, config)
    except (OSError, CacheError):
        return None


def down_now(mark, now: float) -> bool:
    """Whether a tier's recorded down mark (``Tiers._mark_down``) still holds at ``now``."""
    return isinstance(mark, dict) and isinstance(mark.get("until"), (int, float)) and \
        mark["until"] > now
