"""Calibration: the estimator's presets refitted from a measured ``nvstage run --profile``
report, and the estimate's error against one (``relative_errors``).

The report is read through ``nvstage.run.document`` (bounded, every figure checked); each
preset fitted says from what, and how many samples, in its source.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from nvstage.files import is_regular
from nvstage.errors import CalibrationError
from nvstage.hw.gpus import GpuSpec
from nvstage.model.bounds import is_peak
from nvstage.model.costfile import CostSpec, load_model_input
from nvstage.model.estimate import DEFAULT_PRESETS, Estimate, Presets, estimate
from nvstage.run.document import RunReport, load_run_report
from nvstage.run.workload import Workload


@dataclass(frozen=True)
class Change:
    name: str
    before: float
    after: float
    samples: int
    how: str

    @property
    def relative(self) -> float | None:
        return (self.after - self.before) / self.before if self.before else None

    def to_json(self) -> dict:
        return {**asdict(self), "relative_change": self.relative}


@dataclass(frozen=True)
class Calibration:
    presets: Presets
    changes: tuple[Change, ...]
    profile: str
    device: str | None
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {"profile": self.profile, "device": self.device,
                "changes": [c.to_json() for c in self.changes],
                "presets": self.presets.to_json(), "notes": list(self.notes)}


def load_profile(profile) -> RunReport:
    """A run report with a decomposition that lists its operations (a path, a loaded dict or
    a ``RunReport``): what ``calibrate`` fits from."""
    report = load_run_report(profile, "run report", CalibrationError)
    if report.decomposition is None or report.decomposition.operations is None:
        label = profile if isinstance(profile, (str, Path)) else "the run report"
        raise CalibrationError(f"{label}: the report has no decomposition",
                               hint="run with --profile so every operation is timed")
    return report


def calibrate(profile, gpu: GpuSpec, *, workload=None, cost: CostSpec | None = None,
              base: Presets = DEFAULT_PRESETS, resources=None, toolkit=None) -> Calibration:
    """Fit the presets to a measured ``nvstage run --profile`` report.

    - launch_cost_s: median host time of the launches;
    - kernel_floor_s / copy_latency_s: the run's measured empty-kernel and 4-byte-copy times;
    - pcie_*_efficiency: bytes over (median copy time - latency), over the link's theoretical
      rate, for copies of 1 MiB or more;
    - dram_efficiency / compute_efficiency: from the kernels the base presets call memory- or
      SM-bound (and above twice the floor), ``fit_kernels``.

    ``profile``: a run report's path, a loaded dict or a ``RunReport``. ``workload``: the
    workload the report measured (default: the file it names).
    """
    import statistics

    origin = str(profile) if isinstance(profile, (str, Path)) else "profile"
    report = load_profile(profile)
    d = report.decomposition
    # A report may come from anywhere (a CI artifact of someone else's pull request): every
    # figure read from it must be a finite positive number, or it is not used.
    ops = d.operations
    notes = []
    changes: list[Change] = []
    values = {}

    launch_ops = [o for o in ops if o.kind == "launch"]
    hosts = [_positive(o.host_ns) for o in launch_ops if _positive(o.host_ns)]
    if hosts:
        values["launch_cost_s"] = (statistics.median(hosts) * 1e-9, len(hosts),
                                   "median host time of the launches")
    if _positive(d.empty_kernel_ns):
        values["kernel_floor_s"] = (d.empty_kernel_ns * 1e-9, 1,
                                    "the run's empty-kernel GPU time")
    if _positive(d.smallest_copy_ns):
        values["copy_latency_s"] = (d.smallest_copy_ns * 1e-9, 1,
                                    "the run's 4-byte copy GPU time")
    latency = values.get("copy_latency_s", (base.copy_latency_s,))[0]
    link = gpu.pcie_bandwidth
    for pinned, name in ((True, "pcie_pinned_efficiency"), (False, "pcie_pageable_efficiency")):
        big = [o for o in ops if o.kind in ("h2d", "d2h") and o.nbytes >= 1 << 20
               and o.pinned == pinned and _positive(o.gpu_ns)]
        if big and link:
            nbytes = sum(o.nbytes for o in big)
            secs = sum(max(o.gpu_ns * 1e-9 - latency, 1e-12) for o in big)
            values[name] = (nbytes / secs / link, len(big),
                            "copy bytes over median copy time less latency, over the link's "
                            "theoretical rate")
    if workload is None:
        wfile = report.workload_file
        if wfile and is_regular(wfile):  # a name from the report: never a traceback
            workload = wfile
    if workload is not None and launch_ops:

        if isinstance(workload, Workload):
            w = workload
            if cost is None:
                _, cost = load_model_input(w.file)
        else:
            w, found = load_model_input(workload)
            cost = cost or found
        est = estimate(w, gpu, calibration=replace(base, kernel_floor_s=0.0), cost=cost,
                       resources=resources, toolkit=toolkit)
        order = [li for kind, _, li in w.operations() if kind == "launch"]
        if len(order) != len(launch_ops):
            raise CalibrationError(f"{origin}: {len(launch_ops)} launches measured, the "
                                   f"workload {w.name} has {len(order)}",
                                   hint="calibrate with the workload the report was made from")
        by_index = {e.index: e for e in est.launches}
        kfloor = values.get("kernel_floor_s", (base.kernel_floor_s,))[0]
        pairs = []
        for op, li in zip(launch_ops, order):
            e = by_index[li]
            t = _positive(op.gpu_ns)
            if op.name != e.kernel:
                raise CalibrationError(f"{origin}: operation {op.index!r:.40} is "
                                       f"{op.name!r:.80}, the workload launches "
                                       f"{e.kernel}")
            if t and t * 1e-9 > 2 * kfloor:  # nearer the floor says nothing of the rest
                pairs.append((e, t * 1e-9))
        for name, (v, n, how) in fit_kernels(pairs, gpu, base).items():
            values[name] = (v, n, how)
    else:
        notes.append("no workload for the report's launches: kernel efficiencies not fitted")
    values = {k: v for k, v in values.items() if _positive(v[0])}  # overflowed or underflowed
    sources = dict(base.sources)
    for name, (v, n, how) in values.items():
        changes.append(Change(name, getattr(base, name), v, n, how))
        sources[name] = f"fitted from {origin}: {how} ({n} sample{'s' if n != 1 else ''})"
    fitted = replace(base, **{k: v for k, (v, _, _) in values.items()}, sources=sources)
    for name in fitted.names():
        if name not in values:
            notes.append(f"{name}: not fitted (nothing in the report measures it)")
    device = report.device
    if device and gpu.display_name and gpu.name.lower() not in device.lower():
        notes.append(f"the report was measured on {device}, the estimate is for "
                     f"{gpu.display_name}")
    return Calibration(fitted, tuple(changes), origin, device, tuple(notes))


MEMORY_LIMITERS = ("DRAM bandwidth", "memory latency")


def fit_kernels(pairs, gpu: GpuSpec, base: Presets = DEFAULT_PRESETS) -> dict:
    """``dram_efficiency`` and ``compute_efficiency`` fitted to measured kernel times.

    ``pairs``: (``LaunchEstimate``, measured seconds), one per launch measured (or one per
    launch entry with the seconds of all its repeats), the estimates made with ``base``.
    Memory-limited launches fit the DRAM efficiency so that their DRAM + latency times add up
    to the measured ones (the latency part is the GPU's published figure, kept); SM-limited
    launches (issue, a pipe, shared memory) fit the compute efficiency so that their bound
    adds up to the measured times. Sums, not a median: a workload known only by its kernel sum
    fits the same way (``fit_kernel_sum``). Returns name -> (value, launches, how); a family
    with nothing to fit is left out.
    """
    out = {}
    mem = [(e, t, k) for e, t, k in _weighted(pairs) if e.limiter in MEMORY_LIMITERS
           and e.counts.bytes]
    if mem:
        nbytes = sum(e.counts.bytes * k for e, _, k in mem)
        latency = sum(e.bounds.time("memory latency") * k for e, _, k in mem)
        measured = sum(t for _, t, _ in mem)
        if measured > latency:
            out["dram_efficiency"] = (
                nbytes / ((measured - latency) * gpu.memory_bandwidth), len(mem),
                "bytes over (measured time less the latency bound) of memory-limited kernels, "
                "over the datasheet bandwidth")
    # A launch held at a peak (its work at the datasheet's FLOP/s or bytes/s) says nothing of
    # the efficiency the guide's throughput is derated by: left out.
    core = [(e, t, k) for e, t, k in _weighted(pairs)
            if e.limiter not in MEMORY_LIMITERS + ("launch floor",) and not is_peak(e.limiter)]
    if core:
        at_one = sum(e.bounds.seconds * base.compute_efficiency * k for e, _, k in core)
        measured = sum(t for _, t, _ in core)
        out["compute_efficiency"] = (at_one / measured, len(core),
                                     "the SM-bound kernels' bound at the guide's peak over "
                                     "their measured time")
    return out


def _weighted(pairs):
    """(estimate, measured seconds, launches the seconds cover): a pair is one launch unless
    it says how many (a third item)."""
    for p in pairs:
        yield (p[0], p[1], p[2] if len(p) > 2 else 1)


def fit_kernel_sum(e: Estimate, kernel_s: float, base: Presets = DEFAULT_PRESETS) -> dict:
    """``fit_kernels`` for a workload known only by its measured kernel sum (``kernel_s``, one
    repetition): fitted only when every launch has one limiter family (memory, or the SM), as
    the sum then says something of that family alone."""
    families = {e_.limiter in MEMORY_LIMITERS for e_ in e.launches}
    if len(families) != 1:
        return {}
    return fit_kernels([(x, kernel_s * x.t_kernel_s * x.repeat / e.kernel_s, x.repeat)
                        for x in e.launches], e.gpu, base)


def _positive(v) -> float | None:
    """``v`` as a float if it is a finite number above zero, else None (a string, a bool,
    NaN, an integer too large for a float)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return f if math.isfinite(f) and f > 0 else None


def relative_errors(e: Estimate, report) -> dict[str, float | None]:
    """(estimate - measured) / measured per term and for T, against a run report's medians
    (a ``RunReport``, a path or a loaded dict): the table the GPU session fills in."""
    report = RunReport.from_json(report) if isinstance(report, Mapping) else \
        load_run_report(report, "run report", CalibrationError)
    medians = report.decomposition.medians_ns if report.decomposition else {}
    out: dict[str, float | None] = {}
    for key, est in (("launch", e.launch_s), ("kernel", e.kernel_s),
                     ("transfer", e.transfer_s), ("total", e.total_s)):
        m = _positive(medians.get(key))
        out[key] = (est - m * 1e-9) / (m * 1e-9) if m else None
    m = _positive(medians.get("wall"))
    out["pipelined_vs_wall"] = (e.pipelined_s - m * 1e-9) / (m * 1e-9) if m else None
    return out
