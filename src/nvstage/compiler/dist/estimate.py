"""What a build would take with N remote cores: an estimate from its build record.

The model (labelled an estimate wherever shown): each unit is its stages one after another,
in plan order (its recorded times; a unit answered whole from the cache costs its recorded
time, locally); cicc and ptxas go to the farm, costing their recorded time plus the round
trip; everything else stays on the record's local cores. Steps that are not compiles (links,
archives) wait for every unit before them. Stages are placed greedily (list scheduling) on
the free cores of their side.

The round trip is measured in the record where it holds both remote and local runs of a kind
(the mean remote time less the mean local one); else it is the caller's assumption (0 s by
default, said so). The toolchain's upload is a one-time cost the record does not hold: the
caller's assumption too (``bench/dist_stages.py`` measures it).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

REMOTE_KINDS = frozenset({"cicc", "ptxas"})
ON_FARM = frozenset({"remote", "remote-hit"})


@dataclass(frozen=True)
class Step:
    kind: str
    seconds: float
    where: str | None = None  # the record's placement (None: local)


@dataclass
class Unit:
    name: str
    steps: list[Step]
    compile: bool = True  # False: a link or archive: waits for every unit before it


@dataclass
class FarmEstimate:
    remote_cores: int
    local_cores: int
    recorded_wall: float
    wall: float  # the estimate
    critical_path: float  # the longest unit with the round trips: no farm beats it
    local_work: float
    remote_work: float
    round_trip: float
    round_trip_measured: bool
    upload: float
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"estimate": True, "remote_cores": self.remote_cores,
                "local_cores": self.local_cores,
                "recorded_wall_seconds": round(self.recorded_wall, 6),
                "wall_seconds": round(self.wall, 6),
                "critical_path_seconds": round(self.critical_path, 6),
                "local_work_seconds": round(self.local_work, 6),
                "remote_work_seconds": round(self.remote_work, 6),
                "round_trip_seconds": round(self.round_trip, 6),
                "round_trip": "measured" if self.round_trip_measured else "assumed",
                "upload_seconds": round(self.upload, 6), "notes": self.notes}


def measured_round_trip(units: list[Unit]) -> float | None:
    """Mean remote time less mean local time, over the kinds the record holds both of."""
    diffs, weights = 0.0, 0
    for kind in REMOTE_KINDS:
        remote = [s.seconds for u in units for s in u.steps
                  if s.kind == kind and s.where == "remote"]
        local = [s.seconds for u in units for s in u.steps
                 if s.kind == kind and s.where not in ON_FARM]
        if remote and local:
            n = len(remote)
            diffs += (sum(remote) / n - sum(local) / len(local)) * n
            weights += n
    return max(0.0, diffs / weights) if weights else None


def estimate(units: list[Unit], remote_cores: int, local_cores: int, recorded_wall: float,
             *, round_trip: float | None = None, upload: float = 0.0) -> FarmEstimate:
    if remote_cores < 1 or local_cores < 1:
        raise ValueError("cores must be at least 1")
    measured = measured_round_trip(units)
    notes = []
    if round_trip is None:
        round_trip = measured if measured is not None else 0.0
        if measured is None:
            notes.append("no remote and local runs of one kind in the record: round trip "
                         "assumed 0 s (give --round-trip SECONDS)")
    upload_note = (f"toolchain upload assumed {upload:g} s, once" if upload else
                   "toolchain upload not counted (not in the record; give --upload SECONDS)")
    notes.append(upload_note)

    def cost(s: Step) -> tuple[bool, float]:
        if s.kind in REMOTE_KINDS:
            # A stage that ran remotely already carries its round trip.
            return True, s.seconds + (0.0 if s.where in ON_FARM else round_trip)
        return False, s.seconds

    local_free = [0.0] * local_cores
    remote_free = [upload] * remote_cores  # the first remote stages wait for the upload
    critical = local_work = remote_work = 0.0
    start = 0.0  # when the current segment (the compiles between two links) may start
    segment: list[Unit] = []
    for u in [*units, None]:
        if u is not None and u.compile:
            segment.append(u)
            continue
        # The segment's units, stage by stage in order of readiness, each on the first free
        # core of its side (list scheduling).
        ready = [(start, i, 0) for i, seg in enumerate(segment) if seg.steps]
        heapq.heapify(ready)
        end = start
        while ready:
            t, i, k = heapq.heappop(ready)
            remote, c = cost(segment[i].steps[k])
            pool = remote_free if remote else local_free
            done = max(heapq.heappop(pool), t) + c
            heapq.heappush(pool, done)
            end = max(end, done)
            if k + 1 < len(segment[i].steps):
                heapq.heappush(ready, (done, i, k + 1))
        for seg in segment:
            chain = 0.0
            for st in seg.steps:
                remote, c = cost(st)
                chain += c
                if remote:
                    remote_work += c
                else:
                    local_work += c
            critical = max(critical, chain)
        segment = []
        start = end
        if u is not None:  # a link: after everything before it, on one local core
            for st in u.steps:
                local_work += st.seconds
                start += st.seconds
            critical = max(critical, sum(st.seconds for st in u.steps))
            local_free = [max(f, start) for f in local_free]
            heapq.heapify(local_free)
    end = start
    return FarmEstimate(remote_cores, local_cores, recorded_wall, end, critical, local_work,
                    remote_work, round_trip, measured is not None and round_trip == measured,
                    upload, notes)


def units_of(view) -> list[Unit]:
    """A build view's (``inspect.build_view``) last build as units, in start order."""
    from nvstage.compiler.nvcc import step_kind as steps_mod

    out = []
    for u in sorted(view.last_units, key=lambda u: u.start):
        if u.stages and all(s.ran for s in u.stages):
            steps = [Step(s.kind, s.seconds, getattr(s, "where", None)) for s in u.stages]
        else:  # a whole-command hit, or a step with no stages: its own time, locally
            steps = [Step("command", u.seconds)]
        out.append(Unit(u.name, steps, compile=u.kind in (steps_mod.CUDA_COMPILE,
                                                          steps_mod.CXX_COMPILE)))
    return out
