"""The kernel term, bound by bound: each limiter's time for one launch, from numbers alone.

Every function here is arithmetic on figures the caller names (the workload's bytes, the SASS's
dynamic counts, the GPU's datasheet and the guide's per-SM throughput), so each is unit-tested on
hand-checked numbers. ``kernel_bounds`` puts them together:

- DRAM: the workload's bytes over the achievable bandwidth.
- memory latency (Little's law): a thread's dependent round trips to memory (batches of global
  loads, ``inspect.inflight``) each cost the memory latency, once per wave of resident blocks.
  Put as bytes: the GPU keeps resident warps x loads per batch x bytes per load in flight,
  against a bandwidth-latency product the kernel may not reach.
- memory, the two together: DRAM time + latency time. The sum, not the larger of the two: a
  round trip's latency is paid before its bytes stream, and the published H200 streaming
  measurements (tests/data/published) follow the sum within about 20% from a quarter of the
  SM's warps up, where the larger of the two is off by up to a factor of two.
- issue: the busiest SM's warp instructions over its schedulers' issue rate.
- pipes: per class (FP32, FP64, integer, conversions, special functions, shuffles, FP16), the
  busiest SM's warp instructions over the class's per-SM throughput.
- shared memory: the bytes the busiest SM's warps request from shared memory over its
  bandwidth (every access counted as requested: broadcasts not credited, bank conflicts not
  charged).
- waves and tail: the grid against SMs x resident blocks per SM. The latency bound pays one
  round-trip sequence per wave (the last, partial one too); the per-SM bounds count the busiest
  SM's blocks (the grid divided by the SMs, rounded up).
- launch floor: no kernel takes less.
- peaks (never below physics): the launch's work at the peak of the pipe its SASS does it on
  (FLOPs at the FP32, FP16, FP64 or tensor peak), and its bytes at the datasheet's DRAM
  bandwidth. Whatever the loop-derived bounds say, no kernel beats these.

The estimate is the largest of memory, issue, the pipes, shared memory, the peaks and the
floor: memory traffic and the SM's own work overlap across warps, the classic roofline
assumption.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DRAM = "DRAM bandwidth"
LATENCY = "memory latency"
ISSUE = "instruction issue"
SHARED = "shared memory"
FLOOR = "launch floor"
DRAM_PEAK = "DRAM peak"
# The pipe a launch's FLOPs run on -> the name of its peak bound.
PEAK_NAMES = {"fp32": "FP32 peak", "fp16": "FP16 peak", "fp64": "FP64 peak",
              "tensor": "tensor peak"}


def pipe_name(cls: str) -> str:
    return f"{cls} pipe"


def count(n: float, what: str) -> str:
    """``n`` and ``what``, plural unless ``n`` is one: "1 load", "2.5 loads"."""
    return f"{n:.4g} {what}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class Bound:
    """One limiter's time for one launch, and its numbers in words."""

    name: str
    seconds: float
    detail: str

    def to_json(self) -> dict:
        return {"name": self.name, "seconds": self.seconds, "detail": self.detail}


@dataclass(frozen=True)
class KernelBounds:
    """Every bound of one launch, the memory combination, the estimate and what limits it."""

    bounds: tuple[Bound, ...]
    memory_s: float  # DRAM + latency
    seconds: float
    limiter: str  # the bound's name; for memory, whichever of DRAM and latency is larger

    def bound(self, name: str) -> Bound | None:
        return next((b for b in self.bounds if b.name == name), None)

    def time(self, name: str) -> float:
        b = self.bound(name)
        return b.seconds if b else 0.0

    @property
    def limiter_detail(self) -> str:
        """The limiter with its numbers; for memory, both of its parts."""
        if self.limiter in (DRAM, LATENCY):
            parts = [f"{b.name} {b.seconds * 1e6:.2f} us ({b.detail})"
                     for b in (self.bound(DRAM), self.bound(LATENCY)) if b and b.seconds]
            return f"{self.limiter}: memory {self.memory_s * 1e6:.2f} us = " + " + ".join(parts)
        b = self.bound(self.limiter)
        return f"{self.limiter}: {b.detail}" if b else self.limiter

    def to_json(self) -> dict:
        return {"bounds": [b.to_json() for b in self.bounds], "memory_s": self.memory_s,
                "seconds": self.seconds, "limiter": self.limiter,
                "combination": "max(DRAM + latency, issue, pipes, shared memory, peaks, "
                               "floor)"}


def waves(blocks: int, sms: int, blocks_per_sm: int) -> int:
    """Waves of resident blocks the grid needs (the last one possibly partial)."""
    if blocks <= 0:
        return 0
    return math.ceil(blocks / (sms * max(blocks_per_sm, 1)))


def busiest_sm_blocks(blocks: int, sms: int) -> int:
    """Blocks the busiest SM runs: the grid spread over every SM, rounded up."""
    return math.ceil(blocks / sms) if blocks > 0 else 0


def dram_time(nbytes: float, bandwidth: float) -> float:
    return nbytes / bandwidth if nbytes else 0.0


def latency_time(n_waves: int, round_trips_per_thread: float, latency_s: float) -> float:
    """Little's law as time: each wave's threads wait ``round_trips_per_thread`` memory
    latencies one after another."""
    return n_waves * round_trips_per_thread * latency_s


def per_sm_time(warps: float, per_warp: float, per_clock: float, clock_hz: float) -> float:
    """``warps`` on one SM, each needing ``per_warp`` units of a resource the SM provides at
    ``per_clock`` units per clock (instructions issued, a pipe's instructions, shared bytes)."""
    if not per_warp or not warps:
        return 0.0
    return warps * per_warp / (per_clock * clock_hz)


@dataclass(frozen=True)
class LaunchShape:
    """What the bounds need of one launch, every figure per launch."""

    blocks: int
    warps_per_block: int
    blocks_per_sm: int  # resident, from the theoretical occupancy
    dram_bytes: float
    round_trips: float  # per thread
    loads_per_trip: float  # per warp, averaged over its batches
    bytes_per_load: float  # per thread
    instructions: float  # per warp (= per thread: SIMT)
    pipes: dict  # class -> warp instructions per warp
    shared_bytes: float  # per thread, bank conflicts charged and broadcasts credited
    flops: float = 0.0  # the launch's work, FLOPs
    flops_pipe: str = "fp32"  # the pipe they run on (a key of PEAK_NAMES)
    flops_said: str = ""  # where the figure comes from ("declared", "derived from the SASS")
    shared_said: str = ""  # the bank conflicts in words, for the shared bound


@dataclass(frozen=True)
class Machine:
    """What the bounds need of the GPU and the presets."""

    sms: int
    clock_hz: float | None  # None: no published clock, so no per-SM bound
    bandwidth: float  # achievable DRAM bytes/s
    latency_s: float | None  # None: no figure, so no latency bound
    issue_per_clock: float
    pipe_per_clock: dict  # class -> warp instructions per clock per SM
    shared_bytes_per_clock: float
    floor_s: float
    warp_size: int = 32
    peaks: dict = None  # pipe -> FLOP/s at its peak (not derated), with its source
    dram_peak: float = 0.0  # the datasheet's DRAM bytes/s


def kernel_bounds(s: LaunchShape, m: Machine) -> KernelBounds:
    """Every bound of one launch and the estimate (see the module's rules)."""
    bounds = []
    t_dram = dram_time(s.dram_bytes, m.bandwidth)
    bounds.append(Bound(DRAM, t_dram, f"{s.dram_bytes / 1e6:.1f} MB over "
                                      f"{m.bandwidth / 1e12:.2f} TB/s achievable"))
    n_waves = waves(s.blocks, m.sms, s.blocks_per_sm)
    t_lat = 0.0
    if m.latency_s is not None and s.round_trips:
        t_lat = latency_time(n_waves, s.round_trips, m.latency_s)
        # resident on an SM: what occupancy allows, or what the grid gives it when smaller
        warps_sm = min(s.blocks_per_sm, busiest_sm_blocks(s.blocks, m.sms)) * s.warps_per_block
        in_flight = warps_sm * s.loads_per_trip * s.bytes_per_load * m.warp_size
        product = m.bandwidth * m.latency_s / m.sms
        bounds.append(Bound(LATENCY, t_lat, (
            f"{count(s.loads_per_trip, 'load')} in flight per warp x {warps_sm} warps per SM "
            f"x {s.bytes_per_load * m.warp_size:.0f} B = {in_flight / 1024:.1f} KiB per SM "
            f"against {product / 1024:.1f} KiB (bandwidth x {m.latency_s * 1e9:.0f} ns); "
            f"{count(s.round_trips, 'round trip')} per thread x {count(n_waves, 'wave')}")))
    memory = t_dram + t_lat
    core = []
    if m.clock_hz:
        busiest = busiest_sm_blocks(s.blocks, m.sms) * s.warps_per_block
        tail = (f"{busiest} warps on the busiest SM "
                f"({count(busiest_sm_blocks(s.blocks, m.sms), 'block')} of {s.blocks} over "
                f"{m.sms} SMs)")
        t = per_sm_time(busiest, s.instructions, m.issue_per_clock, m.clock_hz)
        core.append(Bound(ISSUE, t, f"{s.instructions:.4g} instructions per warp x {tail} / "
                                    f"{m.issue_per_clock:g} per clock"))
        for cls, n in sorted(s.pipes.items()):
            rate = m.pipe_per_clock.get(cls)
            if rate and n:
                t = per_sm_time(busiest, n, rate, m.clock_hz)
                core.append(Bound(pipe_name(cls), t, f"{n:.4g} {cls} instructions per warp "
                                                     f"x {busiest} warps / {rate:g} per clock"))
        if s.shared_bytes:
            per_warp = s.shared_bytes * m.warp_size
            t = per_sm_time(busiest, per_warp, m.shared_bytes_per_clock, m.clock_hz)
            said = f" ({s.shared_said})" if s.shared_said else ""
            core.append(Bound(SHARED, t, f"{per_warp:.4g} B per warp x {busiest} warps / "
                                         f"{m.shared_bytes_per_clock:g} B per clock{said}"))
    core += peak_bounds(s, m)
    bounds += core
    bounds.append(Bound(FLOOR, m.floor_s, "no kernel takes less"))
    candidates = [(memory, DRAM if t_dram >= t_lat else LATENCY)]
    candidates += [(b.seconds, b.name) for b in core]
    candidates.append((m.floor_s, FLOOR))
    seconds, limiter = max(candidates, key=lambda c: c[0])
    return KernelBounds(tuple(bounds), memory, seconds, limiter)


def peak_bounds(s: LaunchShape, m: Machine) -> list[Bound]:
    """The launch's work at the peaks: its FLOPs on its pipe, its bytes at the datasheet's
    DRAM bandwidth (the floors physics sets, whatever the loops say)."""
    out = []
    peak = (m.peaks or {}).get(s.flops_pipe)
    if s.flops and peak:
        rate, source = peak
        said = f" ({s.flops_said})" if s.flops_said else ""
        out.append(Bound(PEAK_NAMES[s.flops_pipe], s.flops / rate,
                         f"{s.flops / 1e9:.4g} GFLOP{said} at {rate / 1e12:.4g} TFLOP/s "
                         f"({source})"))
    if s.dram_bytes and m.dram_peak:
        out.append(Bound(DRAM_PEAK, s.dram_bytes / m.dram_peak,
                         f"{s.dram_bytes / 1e6:.1f} MB at the datasheet's "
                         f"{m.dram_peak / 1e12:.2f} TB/s"))
    return out


def is_peak(name: str) -> bool:
    return name == DRAM_PEAK or name in PEAK_NAMES.values()
