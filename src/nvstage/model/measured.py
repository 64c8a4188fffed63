"""Measured figures the model is checked against, per workload and term: the raw
``nvstage run --profile`` reports a device session saves under ``docs/measured/`` (per launch
and per term), and the frozen fixture of the 2026-11-30 H200 session, which kept only a
summary (``tests/data/measured/h200-2026-11-30.json``: per term, backed out of the saved
errors). Both are read as documents: bounded, and a figure that is not a finite positive
number is left out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from nvstage.errors import CalibrationError
from nvstage.documents import load_json_doc
from nvstage.hw.gpus import GPUS
from nvstage.model.calibrate import fit_kernel_sum, calibrate
from nvstage.model.estimate import estimate
from nvstage.model.presets import DEFAULT_PRESETS
from nvstage.run.document import load_run_report

TERMS = ("launch", "kernel", "transfer", "total")
_FITTED = ("launch_cost_s", "kernel_floor_s", "copy_latency_s", "pcie_pinned_efficiency")


@dataclass(frozen=True)
class Measured:
    """One workload as measured: seconds per term for one repetition (medians), and per launch
    index where the report has them."""

    workload: str
    terms_s: Mapping[str, float]
    launches_s: Mapping[int, float] | None
    source: str
    device: str | None = None  # the GPU's name as the run reported it

    def gpu(self):
        """The GPU preset the device is (by name: "NVIDIA H200" is h200), else None."""
        said = (self.device or "").lower().replace(" ", "")
        return next((g for n, g in GPUS.items() if n in said), None)


def _positive(v, scale: float = 1.0) -> float | None:
    """``v`` x ``scale`` where that is a finite number above 0 (1e-320 us is 0 s: a term of 0
    would divide the errors by zero)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v) * scale
    return f if math.isfinite(f) and f > 0 else None


def load_frozen(path) -> tuple[dict[str, Measured], dict[str, float]]:
    """The frozen fixture: measured terms per workload, and the presets that session fitted on
    chain_unfused (its saved "fit" lines)."""
    doc = load_json_doc(path, "frozen measurement fixture", CalibrationError)
    if doc.get("schema") != "nvstage.measured-fixture/1":
        raise CalibrationError(f"{path}: not a frozen measurement fixture")
    workloads = doc.get("workloads") or {}
    if not isinstance(workloads, Mapping):
        raise CalibrationError(f"{path}: its workloads are a JSON {type(workloads).__name__}, "
                               "not an object of workload names")
    out = {}
    for name, w in workloads.items():
        if not isinstance(w, Mapping) or not isinstance(name, str):
            continue
        us = w.get("measured_us") if isinstance(w.get("measured_us"), Mapping) else {}
        terms = {t: _positive(us.get(t), 1e-6) for t in TERMS if _positive(us.get(t), 1e-6)}
        session = doc.get("session") if isinstance(doc.get("session"), Mapping) else {}
        gpu = session.get("gpu") if isinstance(session.get("gpu"), str) else None
        out[name] = Measured(name, terms, None, str(path), gpu)
    fit = doc.get("fitted_presets") if isinstance(doc.get("fitted_presets"), Mapping) else {}
    return out, {k: _positive(fit.get(k)) for k in _FITTED if _positive(fit.get(k))}


def load_profiles(folder) -> dict[str, Measured]:
    """Every run report (``*.run.json``) under ``folder``, by the workload it measured (the
    newest file name last wins where two measured one workload)."""
    out = {}
    root = Path(folder).resolve()
    for p in sorted(Path(folder).rglob("*.run.json")):
        if not p.resolve().is_relative_to(root):  # a link out of the folder: not its report
            raise CalibrationError(f"{p} leads out of {folder}",
                                   hint="a folder of measurements holds its run reports")
        r = load_run_report(p, "run report", CalibrationError)
        d = r.decomposition
        if d is None or not r.workload:
            continue
        terms = {t: _positive(d.medians_ns.get(t), 1e-9) for t in TERMS
                 if _positive(d.medians_ns.get(t), 1e-9)}
        launches = {}
        for k, o in enumerate(x for x in (d.operations or []) if x.kind == "launch"):
            if _positive(o.gpu_ns, 1e-9):
                launches[k] = o.gpu_ns * 1e-9
        out[r.workload] = Measured(r.workload, terms, launches or None, str(p), r.device)
    return out


def term_errors(e, m: Measured) -> dict[str, float | None]:
    """(estimate - measured) / measured per term and for T."""
    est = {"launch": e.launch_s, "kernel": e.kernel_s, "transfer": e.transfer_s,
           "total": e.total_s}
    return {t: (est[t] - m.terms_s[t]) / m.terms_s[t] if t in m.terms_s else None
            for t in TERMS}


def calibrated_on(e, m: Measured, fitted: Mapping[str, float], base=None):
    """Presets fitted on one workload known only by its terms: the launch, floor and copy
    presets as its session fitted them (``fitted``), and the DRAM (or compute) efficiency fitted
    here to its kernel sum with this model (``calibrate.fit_kernel_sum``). ``e``: that
    workload's estimate with ``base``."""
    base = base or DEFAULT_PRESETS
    sources = dict(base.sources)
    values = dict(fitted)
    for name in values:
        sources[name] = f"fitted from {m.source}: that session's own fit on {m.workload}"
    if "kernel" in m.terms_s:
        for name, (v, n, how) in fit_kernel_sum(e, m.terms_s["kernel"], base).items():
            values[name] = v
            sources[name] = f"fitted from {m.source} ({m.workload}'s kernel sum): {how}"
    return replace(base, **values, sources=sources)


@dataclass(frozen=True)
class Row:
    """One workload's estimate against its measurement, with one set of presets."""

    workload: str
    presets: str  # "default" or "fit:NAME"
    errors: Mapping[str, float | None]  # per term
    estimate: object  # the Estimate
    measured: Measured

    def to_json(self) -> dict:
        return {"workload": self.workload, "presets": self.presets,
                "errors": dict(self.errors), "kernel_s": {
                    "estimate": self.estimate.kernel_s,
                    "measured": self.measured.terms_s.get("kernel")},
                "limiters": [x.limiter for x in self.estimate.launches]}


def validate(measured: Mapping[str, Measured], workloads: Mapping[str, Path], gpu, *,
             fit_on: str, fitted: Mapping[str, float] | None = None,
             toolkit=None) -> list[Row]:
    """Every measured workload estimated with the default presets, then with presets fitted on
    ``fit_on`` alone: from its run report where ``measured`` came from one (``calibrate``), else
    from its terms and the session's own ``fitted`` presets (``calibrated_on``)."""
    names = [n for n in measured if n in workloads]
    if fit_on not in names:
        raise CalibrationError(f"no measurement of {fit_on} to fit on",
                               hint=f"measured: {', '.join(sorted(measured)) or 'none'}")
    default = {n: estimate(workloads[n], gpu, toolkit=toolkit) for n in names}
    m = measured[fit_on]
    if m.source.endswith(".run.json"):
        presets = calibrate(m.source, gpu, workload=workloads[fit_on], toolkit=toolkit).presets
    else:
        presets = calibrated_on(default[fit_on], m, fitted or {})
    rows = []
    for n in names:
        rows.append(Row(n, "default", term_errors(default[n], measured[n]), default[n],
                        measured[n]))
        e = estimate(workloads[n], gpu, calibration=presets, toolkit=toolkit)
        rows.append(Row(n, f"fit:{fit_on}", term_errors(e, measured[n]), e, measured[n]))
    return rows
