"""The sccache backend: a stage's command run as ``sccache TOOL ARGS...`` by the user's
client (which sends it to the sccache-dist scheduler its config names, or compiles locally).

Where it ran comes from the client's statistics (``--show-stats --stats-format json``) read
before and after: ``compilations`` counts compiles as they finish, ``dist_compiles`` those on
a build server, ``cache_hits`` answers from its cache. The statistics are the client
daemon's, shared by every compile it serves: a change is trusted only when all it counts
agree (every compile finished meanwhile remote, or every one a hit, or none of either).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from nvstage import proc
from nvstage.compiler.dist.farm_backend import Attempt
from nvstage.compiler.manifest.where import Where

_STATS_TIMEOUT = 30.0


@dataclass(frozen=True)
class Counts:
    """sccache counts each of these when a compile finishes (a request is counted as it
    arrives: an overlapping one still running is in the requests only)."""

    compiled: int  # compiles run, here or on a build server
    remote: int  # of which on a build server
    hits: int
    dist_errors: int

    def __sub__(self, other: Counts) -> Counts:
        return Counts(self.compiled - other.compiled, self.remote - other.remote,
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
    compiled = stats.get("compilations", 0)
    errors = stats.get("dist_errors", 0)
    return Counts(compiled if isinstance(compiled, int) else 0,
                  total(stats.get("dist_compiles")),
                  total(hits.get("counts") if isinstance(hits, dict) else None),
                  errors if isinstance(errors, int) else 0)


def placement(delta: Counts) -> tuple[Where, str | None]:
    """Where a run went, from the statistics' change while it ran (other compiles, this
    build's or another process's, may have finished meanwhile): every compile finished in the
    window on the farm, or every one a hit, or none of either: so was this one.
    (where, why the farm was not used)."""
    if delta.hits and not delta.compiled:
        return Where.REMOTE_HIT, None
    if delta.remote and delta.remote >= delta.compiled and not delta.hits:
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

    def stats(self, env: Mapping[str, str]) -> Counts | None:
        try:
            cp = proc.run([self.client, "--show-stats", "--stats-format", "json"], env=env,
                          timeout=_STATS_TIMEOUT)
            return parse_stats(cp.stdout) if cp.returncode == 0 else None
        except (ValueError, KeyError, TypeError, OSError):  # ToolMissing, ToolTimeout too
            return None

    def run(self, argv: Sequence[str], cwd: str, env: Mapping[str, str],
            timeout: float) -> Attempt:
        t = time.perf_counter()
        # The statistics' two reads are part of the stage's cost: timed with it.
        before = self.stats(env)
        cp = proc.run([self.client, *argv], cwd=cwd, env=env, timeout=timeout)
        after = self.stats(env) if before is not None else None
        seconds = time.perf_counter() - t
        where, why = (Where.UNKNOWN, None) if before is None or after is None else \
            placement(after - before)
        return Attempt(cp.returncode, cp.stdout, cp.stderr, seconds, where, why)
