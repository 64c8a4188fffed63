"""What a cache folder holds and has served: the counters over all builds, its size (the
ledger), eviction of the least recently used over the limit, and clearing it.

The size ledger (``LEDGER``) holds the bytes the last full count found (and when), and a line
per entry stored since. A build reads it rather than counting every entry (slow in a large
folder), and counts again once it says the limit is passed, or the count is an hour old.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from nvstage import fsio
from nvstage.compiler.store.folder import (
    NVSTAGE_OWN,
    STALE_SCRATCH_S,
    KEY,
    MAX_DOC_BYTES,
    CacheFolder,
    is_dir,
    read_file,
    remove,
    write_atomic,
)
from nvstage.compiler.store.layout import HITS, LEDGER, WHOLE
from nvstage.errors import CacheError

ENV_MAX = "NVSTAGE_CACHE_MAX_SIZE"
DEFAULT_MAX_BYTES = 2 << 30
_LEDGER_MAX = 1 << 20
_RECOUNT_S = 3600


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


_COUNTED = ("hits", "misses", "corrupt", "stored", "direct_hits", "made_again")


@dataclass
class Counters:
    """What one build (or, persisted, every build) asked of the cache."""

    hits: int = 0
    misses: int = 0
    corrupt: int = 0  # misses because an entry failed its hash check (removed, rebuilt)
    stored: int = 0
    direct_hits: int = 0  # hits found through recorded headers, without the compiler
    # hit stages run again for an output their entry does not hold, which a stage that ran
    # needed (``cache/stage/lazy.py``): a preprocessor, cudafe++, fatbinary
    made_again: int = 0
    # Each tier's figures for this build (``remote/tiers.py``), when a remote tier is configured:
    # in the manifest only then, so a build without one reads as before.
    tiers: list | None = None

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in _COUNTED}
        if self.tiers is not None:
            d["tiers"] = self.tiers
        asked = self.hits + self.misses
        d["hit_rate"] = round(self.hits / asked, 4) if asked else None
        return d


class Eviction(CacheFolder):
    """A cache folder's totals, size, eviction and clearing (``discard``: ``Entries``')."""

    def __init__(self, root: str | os.PathLike | None = None, *, max_bytes: int | None = None):
        """``max_bytes``: the size limit; None for ``$NVSTAGE_CACHE_MAX_SIZE`` or 2 GiB.
        Raises ``CacheError`` when ``$NVSTAGE_CACHE_MAX_SIZE`` is not a size."""
        super().__init__(root)
        self.max_bytes = _max_bytes_from_env() if max_bytes is None else max_bytes

    def record(self, c: Counters) -> None:
        """Add one build's counters to the persisted totals."""
        with self._flock():
            total = self.totals()
            for k in _COUNTED:
                setattr(total, k, getattr(total, k) + getattr(c, k))
            doc = {k: getattr(total, k) for k in _COUNTED}
            zeroed = self.zeroed()
            if zeroed is not None:
                doc["zeroed"] = zeroed
            write_atomic(self.root / "stats.json", json.dumps(doc).encode(), self._tmp())

    def _stats_doc(self) -> dict:
        try:
            d = json.loads(read_file(self.root / "stats.json", MAX_DOC_BYTES))
        except (OSError, ValueError, RecursionError):
            return {}
        return d if isinstance(d, dict) else {}

    def zeroed(self) -> float | None:
        """When the counters were last zeroed (``zero_stats``: Unix time); None if never."""
        when = self._stats_doc().get("zeroed")
        ok = isinstance(when, (int, float)) and not isinstance(when, bool) and 0 <= when < 1e11
        return float(when) if ok else None

    def zero_stats(self) -> bool:
        """Zero the counters (``stats.json``, the command cache's answers' ``inv/hits`` and each
        tier's figures in ``tiers.json``) and keep every entry, noting when (ccache's
        ``--zero-stats``). False when there is no cache; ``CacheError`` for a folder nvstage
        did not make."""
        if self.state("zero the counters of") == "new":
            return False
        with self._flock():
            write_atomic(self.root / "stats.json",
                         json.dumps({"zeroed": round(time.time(), 3)}).encode(), self._tmp())
            # Appended to without a lock by each whole answer: one added meanwhile goes with it.
            remove(self.root / WHOLE / HITS, self.root)
            doc = self.tier_doc()
            if "stats" in doc:
                doc.pop("stats")
                write_atomic(self.root / "tiers.json", json.dumps(doc).encode(), self._tmp())
        return True

    def totals(self) -> Counters:
        """The counters over all builds (unsealed: they decide nothing); zero when missing
        or unreadable (a FIFO there is unreadable, not a wait)."""
        try:
            d = self._stats_doc()
            total = Counters(**{k: int(d.get(k, 0)) for k in _COUNTED})
        except (ValueError, TypeError, AttributeError):
            total = Counters()
        # The stages the command cache's answers (``cache/command/answer.py``) stood for: one line per answer.
        try:
            lines = read_file(self.root / WHOLE / HITS, 64 << 20).split()
            total.hits += sum(int(n) for n in lines if n.isdigit())
        except (OSError, CacheError):
            pass
        return total

    def entries(self, counted: set | None = None) -> list[tuple[Path, float, int]]:
        """(entry folder, last use, bytes) for every entry (folders named as keys only).
        ``counted``: the files counted already, (device, inode): a command entry links
        the file of the stage entry holding its output, and a file is counted once."""
        return self._listed("entries", "meta.json", counted)

    def whole_commands(self, counted: set | None = None) -> list[tuple[Path, float, int]]:
        """(folder, when written, bytes) for every command entry (``cache/command/entry.py``, inv/)."""
        return self._listed(WHOLE, "meta", counted)

    def _listed(self, folder: str, meta: str,
                counted: set | None = None) -> list[tuple[Path, float, int]]:
        counted = set() if counted is None else counted
        out = []
        base = self.root / folder
        if not is_dir(base):
            return out  # missing, or a link: never listed through
        try:
            subs = list(base.iterdir())
        except OSError:
            return out
        for sub in subs:
            if not is_dir(sub):
                continue
            try:
                found = list(sub.iterdir())
            except OSError:
                continue
            for d in found:
                if not KEY.fullmatch(d.name) or d.name[:2] != sub.name or not is_dir(d):
                    continue
                try:
                    used = os.lstat(d / meta).st_mtime
                    size = 0
                    for f in d.iterdir():
                        st = os.lstat(f)
                        if st.st_nlink > 1:
                            if (st.st_dev, st.st_ino) in counted:
                                continue
                            counted.add((st.st_dev, st.st_ino))
                        size += st.st_size
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
            if not is_dir(base):
                continue
            try:
                subs = [d for d in base.iterdir() if len(d.name) == 2 and is_dir(d)]
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
        counted: set = set()
        return [(d, t, n, True) for d, t, n in self.entries(counted)] + \
            [(d, t, n, False) for d, t, n in (*self.whole_commands(counted),
                                              *self.small_files())]

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
        self._sweep(STALE_SCRATCH_S)
        self._sweep_whole_command_temps(STALE_SCRATCH_S)
        # Stage entries, command entries (which hold their outputs too), header sets
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
                    remove(d, self.root)
                total -= n
                removed += 1
        # The time rounded down: rounded to the nearest millisecond it could lie ahead of the
        # clock, and a ledger from the future is not believed (counted again at once).
        with contextlib.suppress(OSError):
            write_atomic(self.root / LEDGER, b"= %d %d.%03d\n" % (total, *divmod(
                time.time_ns() // 1_000_000, 1000)), self._tmp())
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
        """A command entry is written as ``inv/xx/KEY.tmp-PID`` and renamed: one a killed
        process left (SIGKILL mid-store) is removed once it is ``min_age_s`` old."""
        base = self.root / WHOLE
        if not is_dir(base):
            return
        now = time.time()
        try:
            subs = [d for d in base.iterdir() if len(d.name) == 2 and is_dir(d)]
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
                        remove(d, self.root)
                except OSError:
                    continue

    def clear(self) -> bool:
        """Remove every entry, header set, note and the counters, and whatever in tmp/ no
        running build holds (a build's scratch folder survives, and so does the build).
        False when there is no cache to clear. Raises ``CacheError`` for a folder nvstage did
        not make: nothing in it is touched, whatever its files are called."""
        if self.state("clear") == "new":
            try:
                left = set(os.listdir(self.root)) - set(NVSTAGE_OWN)
            except FileNotFoundError:
                return False
            if not left:
                return False
            self.open()  # the XDG folder's cache from before the mark: adopted, then cleared
        for name in ("entries", "direct", "notes", "stats.json", "tiers.json", WHOLE, "plans",
                     LEDGER):
            remove(self.root / name, self.root)
        for p in self.root.glob(".trash-*"):  # left by a clear that was killed
            remove(p, self.root)
        self._sweep(0)
        return True

    def describe(self) -> dict:
        """Where the cache is, its size and counters. Raises ``CacheError`` for a file or a
        folder nvstage did not make (never "an empty cache")."""
        self.state()
        entries = self.entries()
        return {"dir": str(self.root), "size": self.size(),
                "max_size": self.max_bytes, "entries": len(entries),
                "stats": {**self.totals().to_json(), "zeroed": self.zeroed()}}


def note_stored(root: str | os.PathLike, nbytes: int) -> None:
    """Add an entry's bytes to the size ledger (``LEDGER``): one appended line, no lock."""
    fsio.append_line(os.path.join(root, LEDGER), b"+%d" % nbytes)
