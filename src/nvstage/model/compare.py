"""Two workloads side by side (unfused vs fused): counts, resources, the estimated
decomposition, the measured one where a GPU is present, the difference term by term, and a
verdict that respects noise.

Verdict rules (B against A, on T):

- estimates: |T_B - T_A| / T_A under ``SAME_ESTIMATE`` (1%) is "same"; under
  ``ESTIMATE_THRESHOLD`` (10%) "too close to call"; otherwise "faster" or "slower". Two
  estimates share the model's biases, so their ratio is surer than either figure (each kernel
  term is within 26% of the frozen H200 measurements): the nearest measured pair there,
  chain_fused against chain_fused_wide, 11% apart, is ordered right; nothing nearer than 10%
  has been shown to be.
- measurements: the difference of the medians against the larger interquartile range of the
  two: more than twice it is "faster" or "slower"; within one IQR and within 1% is "same";
  anything else is "too close to call".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nvstage.hw.gpus import GpuSpec
from nvstage.model.estimate import (Estimate, Presets, _presets, estimate, fitted,
                                    require_figures)
from nvstage.model.bounds import count
from nvstage.run.prepare import load_and_validate
from nvstage.run.probe import probe
from nvstage.run.session import run_prepared

ESTIMATE_THRESHOLD = 0.10
SAME_ESTIMATE = 0.01
MEASURED_IQRS = 2.0
SAME_MEASURED = 0.01


@dataclass(frozen=True)
class Verdict:
    word: str  # "faster" | "slower" | "same" | "too close to call"
    basis: str  # "estimate" | "measured"
    relative: float  # (T_B - T_A) / T_A
    rule: str
    on: str = "T"  # what was compared: "T", or "launch + kernel"

    def to_json(self) -> dict:
        return {"verdict": self.word, "basis": self.basis, "relative_change": self.relative,
                "rule": self.rule, "on": self.on}

    def sentence(self, a: str, b: str) -> str:
        head = (f"{b} is {self.word} than {a}" if self.word in ("faster", "slower")
                else f"{b} vs {a}: {self.word}")
        return f"{head} ({self.relative:+.1%} on {self.on}, {self.basis}; {self.rule})"

    def short(self, a: str, b: str) -> str:
        return f"{b} vs {a}: {self.word} ({self.relative:+.1%} on {self.on}, {self.basis})"


def estimate_verdict(t_a: float, t_b: float, on: str = "T") -> Verdict:
    rel = (t_b - t_a) / t_a if t_a else 0.0
    rule = (f"estimates within {ESTIMATE_THRESHOLD:.0%} are too close to call, within "
            f"{SAME_ESTIMATE:.0%} the same")
    if abs(rel) < SAME_ESTIMATE:
        word = "same"
    elif abs(rel) < ESTIMATE_THRESHOLD:
        word = "too close to call"
    else:
        word = "faster" if rel < 0 else "slower"
    return Verdict(word, "estimate", rel, rule, on)


def measured_verdict(med_a: float, iqr_a: float, med_b: float, iqr_b: float) -> Verdict:
    rel = (med_b - med_a) / med_a if med_a else 0.0
    noise = max(iqr_a, iqr_b)
    diff = abs(med_b - med_a)
    rule = (f"medians differ by {diff * 1e6:.2f} us against the larger IQR {noise * 1e6:.2f} "
            f"us: more than {MEASURED_IQRS:g} IQRs decides")
    if diff > MEASURED_IQRS * noise and diff > 0:
        word = "faster" if rel < 0 else "slower"
    elif diff <= noise and abs(rel) < SAME_MEASURED:
        word = "same"
    else:
        word = "too close to call"
    return Verdict(word, "measured", rel, rule)


@dataclass(frozen=True)
class Term:
    """One line of the explanation: how much of the difference a cause accounts for."""

    name: str
    seconds: float  # B - A: negative means B saves this much
    detail: str

    def to_json(self) -> dict:
        return {"term": self.name, "delta_s": self.seconds, "detail": self.detail,
                "label": "estimate"}


@dataclass
class Comparison:
    a: Estimate
    b: Estimate
    terms: list[Term]
    verdict: Verdict
    device_verdict: Verdict  # on launch + kernel only (transfers left out)
    measured: dict | None = None  # {"a": Decomposition, "b": Decomposition}
    measured_verdict: Verdict | None = None
    measure_note: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        def side(e: Estimate) -> dict:
            return {
                "workload": e.workload, "file": e.file, "launches": e.n_launches,
                "kernels": list(e.kernels), "kernel_bytes": e.kernel_bytes, "flops": e.flops,
                "intermediates": list(e.intermediates),
                "intermediate_bytes_written": e.intermediate_bytes_written,
                "intermediate_bytes_read": e.intermediate_bytes_read,
                "resources": [la.facts.to_json() for la in e.launches],
                "kernels_explained": [{"kernel": x.kernel, "limiter": x.limiter,
                                       "detail": x.bounds.limiter_detail,
                                       "loads_in_flight_per_warp":
                                           x.code.loads_per_trip if x.code else None,
                                       "t_kernel_s": x.t_kernel_s} for x in e.launches],
                "estimate": {"label": "estimate", "launch_s": e.launch_s,
                             "kernel_s": e.kernel_s, "transfer_s": e.transfer_s,
                             "total_s": e.total_s, "pipelined_s": e.pipelined_s},
            }

        measured = None
        if self.measured:
            measured = {k: d.to_json() for k, d in self.measured.items()}
            for k, e in (("a", self.a), ("b", self.b)):
                measured[k]["kernels_vs_estimate"] = kernels_measured(e, self.measured[k])
        return {
            "schema": "nvstage.compare/1",
            "gpu": self.a.gpu.name, "presets": self.a.presets.to_json(),
            "a": side(self.a), "b": side(self.b),
            "difference": [t.to_json() for t in self.terms],
            "delta_total_s": self.b.total_s - self.a.total_s,
            "limiter_shift": limiter_shift(self.a, self.b),
            "verdict": self.verdict.to_json(),
            "device_verdict": self.device_verdict.to_json(),
            "measured": measured,
            "measured_verdict": self.measured_verdict.to_json() if self.measured_verdict
            else None,
            "measure_note": self.measure_note,
            "notes": self.notes,
        }


def _sum(e: Estimate, f) -> float:
    return sum(f(x) * x.repeat for x in e.launches)


def kernel_line(x) -> str:
    """One launch in the explanation's terms: registers, occupancy, loads in flight per warp,
    and its limiter with the limiter's numbers."""
    f = x.facts
    loads = count(x.code.loads_per_trip, "load") if x.code else "no SASS: loads"
    return (f"{x.kernel}: {f.registers} regs, {f.occupancy:.0%} occupancy "
            f"({f.active_blocks_per_sm * f.warps_per_block} warps/SM), {loads} in "
            f"flight per warp, limited by {x.bounds.limiter_detail}")


def explain(a: Estimate, b: Estimate) -> list[Term]:
    """The estimated difference B - A, split by cause; the lines add up to delta T.

    Each launch's kernel time is its DRAM time + its latency time + what the SM (issue, a
    pipe, shared memory) or the floor adds beyond those two, so the kernel difference splits
    exactly into those three.
    """
    p = a.presets
    terms = []
    dl = b.n_launches - a.n_launches
    terms.append(Term("launches", b.launch_s - a.launch_s,
                      f"{-dl if dl < 0 else dl} launch{'es' if abs(dl) != 1 else ''} "
                      f"{'removed' if dl < 0 else 'added'} x {p.launch_cost_s * 1e6:.2f} us "
                      f"launch cost" if dl else "same number of launches"))
    dram = lambda x: x.bounds.time("DRAM bandwidth")  # noqa: E731
    lat = lambda x: x.bounds.time("memory latency")  # noqa: E731
    excess = lambda x: x.t_kernel_s - x.bounds.memory_s  # noqa: E731
    db = b.kernel_bytes - a.kernel_bytes
    bw = a.gpu.memory_bandwidth * p.dram_efficiency
    terms.append(Term("DRAM bytes", _sum(b, dram) - _sum(a, dram),
                      f"{abs(db) / 1e6:.1f} MB {'removed' if db < 0 else 'added'} "
                      f"(intermediates {a.intermediate_bytes_written / 1e6:.1f} MB written, "
                      f"{a.intermediate_bytes_read / 1e6:.1f} MB read -> "
                      f"{b.intermediate_bytes_written / 1e6:.1f} / "
                      f"{b.intermediate_bytes_read / 1e6:.1f} MB) over {bw / 1e12:.2f} TB/s "
                      f"achievable"))

    def flight(e: Estimate) -> str:
        return ", ".join(
            f"{x.kernel} {x.code.loads_per_trip:.3g} x "
            f"{x.facts.active_blocks_per_sm * x.facts.warps_per_block} warps "
            f"({x.facts.registers} regs, {x.facts.occupancy:.0%})" if x.code else
            f"{x.kernel} -" for x in e.launches)

    lat_ns = a.gpu.memory_latency_s * 1e9 if a.gpu.memory_latency_s else 0
    terms.append(Term("memory latency", _sum(b, lat) - _sum(a, lat),
                      f"round trips of {lat_ns:.0f} ns not hidden; loads in flight per warp "
                      f"x warps per SM: A [{flight(a)}], B [{flight(b)}]"))
    terms.append(Term("SM work and floor", _sum(b, excess) - _sum(a, excess),
                      "what issue, a pipe, shared memory or the launch floor adds beyond "
                      f"memory: A {_sum(a, excess) * 1e6:.2f} us, B "
                      f"{_sum(b, excess) * 1e6:.2f} us"))
    dt = b.transfer_bytes - a.transfer_bytes
    terms.append(Term("transfers", b.transfer_s - a.transfer_s,
                      f"{abs(dt) / 1e6:.1f} MB {'less' if dt < 0 else 'more'} copied"
                      if dt else "same copies"))
    return terms


def kernels_measured(e: Estimate, dec) -> list[dict]:
    """Each launch of a measured run beside its estimate (``dec``: the run's decomposition,
    launches in the workload's order): kernel, limiter, estimated and measured median us."""
    ops = [o for o in dec.ops if o.kind == "launch"]
    order = [x for x in e.launches for _ in range(x.repeat)]
    out = []
    for x, o in zip(order, ops):
        measured = o.gpu.median * 1e-9 if o.gpu else None
        out.append({"kernel": x.kernel, "limiter": x.limiter, "estimate_s": x.t_kernel_s,
                    "measured_s": measured,
                    "error": (x.t_kernel_s - measured) / measured if measured else None})
    return out


def limiter_shift(a: Estimate, b: Estimate) -> str:
    """Which limiter moved: the limiters of A's and B's kernels, by share of kernel time."""
    def side(e: Estimate) -> dict[str, float]:
        out: dict[str, float] = {}
        for x in e.launches:
            out[x.limiter] = out.get(x.limiter, 0.0) + x.t_kernel_s * x.repeat
        return out

    def words(d: dict[str, float]) -> str:
        total = sum(d.values()) or 1.0
        return ", ".join(f"{k} {v / total:.0%}" for k, v in sorted(d.items(),
                                                                   key=lambda kv: -kv[1]))

    sa, sb = side(a), side(b)
    top = lambda d: max(d, key=d.get) if d else "-"  # noqa: E731
    moved = "unchanged" if top(sa) == top(sb) else f"moved from {top(sa)} to {top(sb)}"
    return f"A [{words(sa)}] -> B [{words(sb)}] of kernel time: the main limiter {moved}"


def limiters(e: Estimate) -> list[str]:
    """Each launch of ``e`` in the explanation's terms (``kernel_line``)."""
    return [kernel_line(x) for x in e.launches]


def compare(a, b, gpu: GpuSpec, *, calibration=None, measure: bool = False, toolkit=None,
            log=None) -> Comparison:
    """Estimate both workloads on ``gpu``; with ``measure``, also run both (``nvstage run``'s
    path, serialized, profiled) when ``probe()`` finds a driver, else say why not.
    ``calibration``: as ``estimate`` takes it (a run report's path is fitted once)."""
    require_figures(gpu)
    presets: Presets = _presets(fitted(calibration, gpu, toolkit))
    ea = estimate(a, gpu, calibration=presets, toolkit=toolkit)
    eb = estimate(b, gpu, calibration=presets, toolkit=toolkit)
    terms = explain(ea, eb)
    verdict = estimate_verdict(ea.total_s, eb.total_s)
    device = estimate_verdict(ea.launch_s + ea.kernel_s, eb.launch_s + eb.kernel_s,
                              "launch + kernel")
    cmp = Comparison(ea, eb, terms, verdict, device)
    if ea.workload == eb.workload and ea.file == eb.file:
        cmp.notes.append("A and B are the same workload")
    if measure:
        _measure(cmp, a, b, gpu, toolkit, log)
    else:
        cmp.measure_note = "not measured (pass --measure on a machine with a GPU)"
    return cmp


def _measure(cmp: Comparison, a, b, gpu: GpuSpec, toolkit, log) -> None:

    p = probe()
    if not p.available:
        cmp.measure_note = f"not measured: {p.reason}"
        return

    decs = {}
    for key, src in (("a", a), ("b", b)):
        w, prep, _ = load_and_validate(src, gpu.arch, toolkit=toolkit)
        result = run_prepared(w, prep, mode="serialized", profile=True, timeline=False,
                              toolkit=toolkit, log=log)
        if result.decomposition is None:
            cmp.measure_note = f"not measured: the run of {w.name} gave no decomposition"
            return
        if not result.passed:
            cmp.notes.append(f"{w.name}: the check failed ({result.status}); timing kept")
        decs[key] = result.decomposition
        if result.device.get("name"):
            cmp.notes.append(f"{w.name} measured on {result.device.get('name')}")
    da, db = decs["a"], decs["b"]
    cmp.measured = decs
    cmp.measured_verdict = measured_verdict(da.total.median * 1e-9, da.total.iqr * 1e-9,
                                            db.total.median * 1e-9, db.total.iqr * 1e-9)
    cmp.measure_note = "measured: nvstage run --profile --mode serialized, medians over reps"
