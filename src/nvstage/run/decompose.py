"""The sequential decomposition, pure: T = sum t_launch + sum t_kernel + sum t_transfer.

Inputs are measured samples (nanoseconds, one per repetition per operation) and the wall time
of each repetition; nothing here touches a GPU. ``overlap = T - wall``: positive when the
host, the SMs and the copy engines ran side by side, negative when time went to something
none of the three terms holds (launch-to-start latency, synchronisation wake-ups).
t_launch is host time inside the launch call (what Nsight Systems calls API time); t_kernel and
t_transfer are GPU time (an event pair on the stream, or a CUPTI activity record).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

KINDS = ("launch", "h2d", "d2h")  # an operation is a kernel launch or a copy


@dataclass(frozen=True)
class Spread:
    """Median and spread of a set of samples (nanoseconds, or any unit)."""

    n: int
    median: float
    p25: float
    p75: float
    min: float
    max: float

    @property
    def iqr(self) -> float:
        return self.p75 - self.p25

    def to_json(self) -> dict:
        d = asdict(self)
        d["iqr"] = self.iqr
        return d


def spread(values: Sequence[float]) -> Spread | None:
    """Median, quartiles (inclusive method, as numpy's default linear), min and max."""
    vals = sorted(float(v) for v in values)
    if not vals:
        return None
    if len(vals) == 1:
        v = vals[0]
        return Spread(1, v, v, v, v, v)
    q = statistics.quantiles(vals, n=4, method="inclusive")
    return Spread(len(vals), statistics.median(vals), q[0], q[2], vals[0], vals[-1])


@dataclass(frozen=True)
class NoiseFloor:
    """What the device cannot resolve, measured once per run (nanoseconds).

    event_resolution: the smallest non-zero difference between back-to-back timed events.
    empty_kernel: GPU time of a kernel that does nothing. smallest_copy: GPU time of a
    4-byte host-to-device copy. timer: cost of reading the host clock twice.
    """

    event_resolution_ns: float | None = None
    empty_kernel_ns: float | None = None
    smallest_copy_ns: float | None = None
    host_timer_ns: float | None = None
    # Below this many event resolutions an event-timed figure is noise-dominated.
    resolution_factor: float = 10.0

    def kernel_floor(self) -> float:
        return max(self.empty_kernel_ns or 0.0,
                   self.resolution_factor * (self.event_resolution_ns or 0.0))

    def copy_floor(self) -> float:
        return max(self.smallest_copy_ns or 0.0,
                   self.resolution_factor * (self.event_resolution_ns or 0.0))

    def host_floor(self) -> float:
        return self.resolution_factor * (self.host_timer_ns or 0.0)

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(kernel_floor_ns=self.kernel_floor(), copy_floor_ns=self.copy_floor(),
                 host_floor_ns=self.host_floor())
        return d


@dataclass
class OpSamples:
    """One operation of the sequence, measured once per repetition.

    For a launch: ``host_ns`` is the time the host spent inside the launch call (t_launch) and
    ``gpu_ns`` the kernel's GPU time (t_kernel). For a copy: ``gpu_ns`` is t_transfer and
    ``host_ns`` the copy call's own host time (shown, but not one of the three terms).
    """

    index: int
    kind: str  # "launch" | "h2d" | "d2h"
    name: str  # kernel name, or buffer name for a copy
    host_ns: list[float] = field(default_factory=list)
    gpu_ns: list[float] = field(default_factory=list)
    nbytes: int = 0
    pinned: bool = True
    gpu_source: str = "events"  # "events" or "cupti"

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"operation kind must be one of {KINDS}, not {self.kind!r}")


@dataclass(frozen=True)
class OpSummary:
    index: int
    kind: str
    name: str
    host: Spread | None
    gpu: Spread | None
    nbytes: int
    pinned: bool
    gpu_source: str
    bandwidth_gbs: float | None  # bytes / median GPU time, 1 GB = 1e9 bytes
    flags: tuple[str, ...]

    def to_json(self) -> dict:
        return {
            "index": self.index, "kind": self.kind, "name": self.name,
            "host_ns": self.host.to_json() if self.host else None,
            "gpu_ns": self.gpu.to_json() if self.gpu else None,
            "bytes": self.nbytes, "pinned": self.pinned if self.kind != "launch" else None,
            "gpu_source": self.gpu_source, "bandwidth_gbs": self.bandwidth_gbs,
            "flags": list(self.flags),
        }


@dataclass(frozen=True)
class RepTotals:
    """The three sums, T, the wall time and the overlap for one repetition (ns)."""

    launch_ns: float
    kernel_ns: float
    transfer_ns: float
    wall_ns: float

    @property
    def total_ns(self) -> float:  # T
        return self.launch_ns + self.kernel_ns + self.transfer_ns

    @property
    def overlap_ns(self) -> float:
        return self.total_ns - self.wall_ns

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(total_ns=self.total_ns, overlap_ns=self.overlap_ns)
        return d


@dataclass(frozen=True)
class Decomposition:
    mode: str  # "serialized" | "pipelined"
    ops: tuple[OpSummary, ...]
    reps: tuple[RepTotals, ...]
    floor: NoiseFloor
    launch: Spread | None
    kernel: Spread | None
    transfer: Spread | None
    total: Spread | None  # T
    wall: Spread | None
    overlap: Spread | None
    flags: tuple[str, ...] = ()

    @property
    def overlap_fraction(self) -> float | None:
        """Median overlap over median T: the share of the sequential baseline hidden."""
        if not self.total or not self.overlap or self.total.median == 0:
            return None
        return self.overlap.median / self.total.median

    def to_json(self) -> dict:
        def sp(s):
            return s.to_json() if s else None

        return {
            "mode": self.mode,
            "units": "ns",
            "definition": "T = sum launch host time + sum kernel GPU time + sum transfer GPU "
                          "time; overlap = T - wall",
            "launch_ns": sp(self.launch), "kernel_ns": sp(self.kernel),
            "transfer_ns": sp(self.transfer), "total_ns": sp(self.total),
            "wall_ns": sp(self.wall), "overlap_ns": sp(self.overlap),
            "overlap_fraction": self.overlap_fraction,
            "noise_floor": self.floor.to_json(),
            "flags": list(self.flags),
            "operations": [o.to_json() for o in self.ops],
            "repetitions": [r.to_json() for r in self.reps],
        }




def summarize_op(op: OpSamples, floor: NoiseFloor) -> OpSummary:
    host, gpu = spread(op.host_ns), spread(op.gpu_ns)
    flags = []
    if op.kind == "launch":
        if gpu and gpu.median < floor.kernel_floor():
            flags.append("kernel time below the noise floor")
        if host and host.median < floor.host_floor():
            flags.append("launch time below the host timer floor")
    elif gpu and gpu.median < floor.copy_floor():
        flags.append("copy time below the noise floor")
    bw = None
    if op.kind != "launch" and gpu and gpu.median > 0 and op.nbytes:
        bw = op.nbytes / gpu.median  # bytes per ns == GB/s
    return OpSummary(op.index, op.kind, op.name, host, gpu, op.nbytes, op.pinned,
                     op.gpu_source, bw, tuple(flags))


def rep_totals(ops: Sequence[OpSamples], walls_ns: Sequence[float]) -> list[RepTotals]:
    """The three sums per repetition. Every op must have one sample per repetition."""
    n = len(walls_ns)
    for op in ops:
        if op.kind == "launch" and len(op.host_ns) != n:
            raise ValueError(f"operation {op.index} ({op.name}) has {len(op.host_ns)} launch "
                             f"samples for {n} repetitions")
        if len(op.gpu_ns) != n:
            raise ValueError(f"operation {op.index} ({op.name}) has {len(op.gpu_ns)} GPU "
                             f"samples for {n} repetitions")
    out = []
    for r in range(n):
        launch = sum(op.host_ns[r] for op in ops if op.kind == "launch")
        kernel = sum(op.gpu_ns[r] for op in ops if op.kind == "launch")
        transfer = sum(op.gpu_ns[r] for op in ops if op.kind != "launch")
        out.append(RepTotals(launch, kernel, transfer, float(walls_ns[r])))
    return out


def decompose(ops: Sequence[OpSamples], walls_ns: Sequence[float], floor: NoiseFloor,
              mode: str) -> Decomposition:
    """Summarise every operation and the per-repetition decomposition."""
    reps = rep_totals(ops, walls_ns)
    summaries = tuple(summarize_op(op, floor) for op in ops)
    flags = []
    flagged = sum(1 for s in summaries if s.flags)
    if flagged:
        flags.append(f"{flagged} of {len(summaries)} operations are below the noise floor")
    if len(reps) < 3:
        flags.append(f"only {len(reps)} repetition(s): the spread is not meaningful")
    return Decomposition(
        mode=mode, ops=summaries, reps=tuple(reps), floor=floor,
        launch=spread([r.launch_ns for r in reps]),
        kernel=spread([r.kernel_ns for r in reps]),
        transfer=spread([r.transfer_ns for r in reps]),
        total=spread([r.total_ns for r in reps]),
        wall=spread([r.wall_ns for r in reps]),
        overlap=spread([r.overlap_ns for r in reps]),
        flags=tuple(flags),
    )


def relative_gap(a: float, b: float) -> float:
    """|a - b| / b: how far a measured figure is from a reference one."""
    return abs(a - b) / b if b else float("inf")
