"""The sccache backend: a stage's command run as ``sccache TOOL ARGS...`` by the user's
client (which sends it to the sccache-dist scheduler its config names, or compiles locally).

Where it ran comes from the client's statistics (``--show-stats --stats-format json``) read
before and after: ``dist_compiles`` counts compiles on a build server, ``cache_hits`` answers
from its cache. The statistics are the client daemon's, shared by every compile it serves:
a delta is this stage's alone when no other run through it overlapped in this process, and
is trusted otherwise only when all it counts agree (all remote, all hits, or none of either).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nvstage import proc
from nvstage.compiler.dist.backend import Attempt
from nvstage.compiler.dist.where import Where

_STATS_TIMEOUT = 30.0


@dataclass(frozen=True)
class Counts:
    requests: int
    remote: int
    hits: int
    dist_errors: int

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.requests - other.requests, self.remote - other.remote,
                      self.hits - other.hits, self.dist_errors - other.dist_errors)


def parse_stats(text: str) -> Counts:
    """sccache's ``--show-stats --stats-format json``. Raises ValueError on anything else."""
    doc = json.loads(text)
    stats = doc["stats"] if isinstance(doc, dict) else None
    if not isinstance(stats, dict):
        raise ValueError("no 'stats' object")

    def total(d) -> int:
        if not isinstance(d, dict):
            return 0
        return sum(v for v in d.values() if isinstance(v, int) and not isinstance(v, bool))

    hits = stats.get("cache_hits", {})
    requests = stats.get("compile_requests", 0)
    errors = stats.get("dist_errors", 0)
    return Counts(requests if isinstance(requests, int) else 0,
                  total(stats.get("dist_compiles")),
                  total(hits.get("counts") if isinstance(hits, dict) else None),
                  errors if isinstance(errors, int) else 0)


def placement(delta: Counts, alone: bool) -> tuple[Where, str | None]:
    """Where a run went, from the statistics' change while it ran (``alone``: no other run
    in this process overlapped it). (where, why the farm was not used)."""
    if delta.hits and not delta.remote and (alone or delta.hits >= delta.requests):
        return Where.REMOTE_HIT, None
    if delta.remote and not delta.hits and (alone or delta.remote >= delta.requests):
        return Where.REMOTE, None
    if not delta.remote and not delta.hits:
        why = ("the farm answered with an error" if delta.dist_errors else
               "the scheduler or build server could not be used")
        return Where.LOCAL, why
    return Where.UNKNOWN, None


class Sccache:
    name = "sccache"

    def __init__(self, client: str):
        self.client = client
        self._lock = threading.Lock()
        self._running: dict[int, bool] = {}  # run id -> overlapped by another
        self._next = 0

    def stats(self, env: Mapping[str, str]) -> Counts | None:
        try:
            cp = proc.run([self.client, "--show-stats", "--stats-format", "json"], env=env,
                          timeout=_STATS_TIMEOUT)
            return parse_stats(cp.stdout) if cp.returncode == 0 else None
        except (ValueError, KeyError, TypeError, OSError):  # ToolMissing, ToolTimeout too
            return None

    def run(self, argv: Sequence[str], cwd: str, env: Mapping[str, str],
            timeout: float) -> Attempt:
        with self._lock:
            me, self._next = self._next, self._next + 1
            for k in self._running:
                self._running[k] = True
            self._running[me] = bool(self._running)
        try:
            before = self.stats(env)
            t = time.perf_counter()
            cp = proc.run([self.client, *argv], cwd=cwd, env=env, timeout=timeout)
            seconds = time.perf_counter() - t
            after = self.stats(env) if before is not None else None
        finally:
            with self._lock:
                overlapped = self._running.pop(me)
        if before is None or after is None:
            where, why = Where.UNKNOWN, None
        else:
            where, why = placement(after - before, alone=not overlapped)
        return Attempt(cp.returncode, cp.stdout, cp.stderr, seconds, where, why)
