"""Checking a build against budgets and a baseline: every limit compared, each violation
named (kernel, arch, metric, value, limit, file and line where the kernel is defined)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from nvstage import __version__
from nvstage.check.budgets import Budgets
from nvstage.documents import load_json_doc
from nvstage.errors import ArtifactError, BaselineError
from nvstage.check.metrics import Measurements, locate_kernel, measure, load_build_from
from nvstage.compiler.nvcc.cubin_figures import SPILL_OR_LOCAL
from nvstage.inspect.resources import SPILL_SHORT
from nvstage.inspect.kernels import base_name
from nvstage.compiler.manifest.model import toolkit_note

SCHEMA = "nvstage.check/1"
# Growth smaller than this never fails a baseline, whatever the fraction: a 3 ms stage that
# takes 5 ms on a busy CI machine is noise, not a regression.
BASELINE_FLOORS = {"stage_seconds": 0.05, "kernel_us": 1.0}


@dataclass(frozen=True)
class Violation:
    kernel: str | None  # demangled name; None for a build-wide limit
    arch: str | None
    metric: str
    value: float | int | None
    limit: float | int | str | None
    message: str
    file: str | None = None
    line: int | None = None
    against: str = "budget"  # "budget" or "baseline"

    def to_json(self) -> dict:
        return asdict(self)


# What a kernel or cubin on one side of the baseline only is, in words.
UNMATCHED_WORDS = {"new": "new, not in the baseline", "removed": "removed, only in the baseline"}


@dataclass(frozen=True)
class Unmatched:
    """A kernel (or a cubin, kernel None) on one side of a baseline only: nothing to compare
    it with, so no baseline limit, and not a violation. ``kind``: "new" (only in this build;
    its budgets still apply) or "removed" (only in the baseline)."""

    kind: str
    kernel: str | None  # demangled name; None for an arch's cubin
    arch: str
    message: str

    def to_json(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Unchecked:
    """A translation unit of a build record that was not checked. ``state``: "failed" (its
    last build failed: no kernels to hold to the budgets, and the check fails), "fallback"
    (plain nvcc ran it: a note), "hit" or "ok" with a record that could not be read."""

    unit: str
    state: str
    reason: str | None
    source: str | None = None

    @property
    def failed(self) -> bool:
        return self.state == "failed"

    @property
    def why(self) -> str:
        if self.failed:
            return "not checked: its last build failed" + (f" ({self.reason})"
                                                          if self.reason else "")
        return f"not checked ({self.state}{': ' + self.reason if self.reason else ''})"

    @property
    def message(self) -> str:
        return f"{self.unit} {self.why}"

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class CheckResult:
    measurements: Measurements
    violations: list[Violation]
    checked: int  # limits compared
    budgets_path: str | None = None
    baseline_path: str | None = None
    notes: list[str] = field(default_factory=list)
    unmatched: list[Unmatched] = field(default_factory=list)  # vs the baseline
    unchecked: list[Unchecked] = field(default_factory=list)  # a build record's units
    # The folder a whole build's sources are in (CMake's source folder): what annotations'
    # paths are relative to where $GITHUB_WORKSPACE is not set. None for one build.
    source_folder: str | None = None

    @property
    def failed_units(self) -> list[Unchecked]:
        return [u for u in self.unchecked if u.failed]

    @property
    def passed(self) -> bool:
        # A unit whose build failed has kernels nobody measured: a gate that passed it
        # would pass a build it never saw.
        return not self.violations and not self.failed_units

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA, "nvstage": __version__, "passed": self.passed,
            "violation_count": len(self.violations), "checked": self.checked,
            "budgets": self.budgets_path, "baseline": self.baseline_path,
            "violations": [v.to_json() for v in self.violations],
            "measurements": self.measurements.to_json(), "notes": self.notes,
            "unmatched": [u.to_json() for u in self.unmatched],
            "unchecked": [u.to_json() for u in self.unchecked],
        }


class _Checker:
    def __init__(self):
        self.violations: list[Violation] = []
        self.checked = 0

    def over(self, value, limit, **kw) -> None:
        if limit is None or value is None or limit == math.inf:
            return
        self.checked += 1
        if value > limit:
            self.violations.append(Violation(value=value, limit=limit, **kw))


def fmt_value(v) -> str:
    """A measured number for a message: ints as they are, floats to three figures."""
    if isinstance(v, float):
        return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"
    return str(v)


def check(manifest_or_build, budgets: Budgets, *, toolkit=None, run_report=None,
          baseline=None, locate: bool = True) -> CheckResult:
    """Check one build (a ``Build``, keep folder or stages.json) against ``budgets``, and
    against ``baseline`` (an earlier check report or manifest: path or parsed dict).
    ``locate``: as ``metrics.measure``'s."""
    build = load_build_from(manifest_or_build)
    m = measure(build, toolkit=toolkit, run_report=run_report, locate=locate)
    c = _Checker()
    notes = []
    if toolkit is not None and (note := toolkit_note(build, toolkit)):
        notes.append(note)
    for k in m.kernels:
        lim = budgets.limits_for(k.kernel, k.demangled)
        name = k.demangled
        where = {"kernel": name, "arch": k.arch, "file": k.file, "line": k.line}
        c.over(k.registers, lim.max_registers, metric="registers", **where,
               message=f"{name} ({k.arch}) uses {k.registers} registers; the budget is "
                       f"{lim.max_registers}")
        if lim.max_spill_bytes not in (None, math.inf) and k.spill_bytes is None:
            notes.append(f"{name} ({k.arch}): spills unknown (no ptxas -v numbers)")
        moved = (f"stores and loads {k.spill_bytes} bytes of local memory, spills or a local "
                 "array (ptxas marked no spills in it)" if k.spill_kind == SPILL_OR_LOCAL
                 else f"spills {k.spill_bytes} bytes (stores + loads"
                 + (f", {SPILL_SHORT[k.spill_source]}" if k.spill_source in SPILL_SHORT
                    else "") + ")")
        c.over(k.spill_bytes, lim.max_spill_bytes, metric="spill_bytes", **where,
               message=f"{name} ({k.arch}) {moved}; "
                       + ("no spills are allowed" if lim.max_spill_bytes == 0
                          else f"the budget is {lim.max_spill_bytes}"))
        c.over(k.shared_bytes, lim.max_shared_bytes, metric="shared_bytes", **where,
               message=f"{name} ({k.arch}) uses {k.shared_bytes} bytes of static shared "
                       f"memory; the budget is {lim.max_shared_bytes}")
    for arch, size in sorted(m.cubin_bytes.items()):
        c.over(size, budgets.max_cubin_bytes, kernel=None, arch=arch, metric="cubin_bytes",
               message=f"the {arch} cubin is {size} bytes; the budget is "
                       f"{budgets.max_cubin_bytes}")
    c.over(m.fatbin_bytes, budgets.max_fatbin_bytes, kernel=None, arch=None,
           metric="fatbin_bytes", message=f"the fatbin is {m.fatbin_bytes} bytes; the budget "
                                          f"is {budgets.max_fatbin_bytes}")
    for arch in budgets.required_arches:
        c.checked += 1
        if arch not in m.arches:
            what = "cubin" if arch.startswith("sm_") else "PTX"
            c.violations.append(Violation(
                None, arch, "required_arch", None, arch,
                f"required arch {arch} is missing: {m.arches_from} has no {what} for it "
                f"(it has: {', '.join(m.arches) or 'none'})"))
    for s in m.stages:
        limit = budgets.stage_seconds.get(s["kind"], budgets.stage_seconds.get("*"))
        label = s["kind"] + (f" ({s['arch']})" if s["arch"] else "")
        c.over(s["seconds"], limit, kernel=None, arch=s["arch"], metric="stage_seconds",
               message=f"stage {s['index']} {label} took {s['seconds']:.3f} s; the budget is "
                       f"{limit} s")
    for name, us in sorted(m.kernel_us.items()):
        lim = budgets.limits_for(name, name).max_kernel_us
        c.over(us, lim, kernel=name, arch=None, metric="kernel_us",
               file=m.source if (line := locate_kernel(m.source, name)) else None, line=line,
               message=f"kernel {name} took {us:.3f} us (median GPU time); the budget is "
                       f"{lim} us")
    if budgets.run and not m.terms_us and run_report is not None:
        notes.append("the run report has no decomposition: run budgets not checked")
    for term, limit in budgets.run.items():
        c.over(m.terms_us.get(term), limit, kernel=None, arch=None, metric=f"{term}_us",
               message=f"the run's median {term} time is {m.terms_us.get(term, 0):.3f} us; "
                       f"the budget is {limit} us")
    if budgets.run and run_report is None:
        notes.append("no run report given: run budgets not checked")
    base_path = None
    unmatched = []
    if baseline is not None:
        base_path = baseline if not isinstance(baseline, dict) else "(given)"
        base = load_baseline(baseline, toolkit=toolkit)
        unmatched = _compare(m, base, budgets.baseline, c, str(base_path), notes)
    return CheckResult(m, c.violations, c.checked, budgets.path,
                       None if base_path is None else str(base_path), notes, unmatched)


def load_baseline(baseline, *, toolkit=None) -> Measurements:
    """The measurements an earlier check report (``nvstage.check/1``) or build manifest
    (``nvstage.compile/1``, measured again from its keep folder) recorded."""
    label = baseline if not isinstance(baseline, dict) else "the baseline"
    doc = load_json_doc(baseline, "check report or build manifest", BaselineError)
    schema = str(doc.get("schema", ""))
    if schema.startswith("nvstage.compile/"):
        if isinstance(baseline, dict):
            raise BaselineError("a build manifest baseline must be given as its path (its "
                                "keep folder holds the cubins to measure)")
        try:
            return measure(baseline, toolkit=toolkit)
        except ArtifactError as e:
            raise BaselineError(f"baseline {label}: {e.message}", hint=e.hint) from e
    if schema != SCHEMA:
        raise BaselineError(f"baseline {label} is not an nvstage check report or build "
                            f"manifest (schema {doc.get('schema')!r}; expected {SCHEMA!r})",
                            hint="write one with nvstage check --write-baseline FILE")
    try:
        return Measurements.from_json(doc.get("measurements"))
    except ValueError as e:
        raise BaselineError(f"baseline {label} is damaged: {e}",
                            hint="write it again with nvstage check --write-baseline") from None


def _compare(m: Measurements, base: Measurements, rel: dict[str, float], c: _Checker,
             label: str, notes: list[str] | None = None) -> list[Unmatched]:
    """Hold what both builds have against the baseline; return what only one side has."""
    now = {(k.kernel, k.arch): k for k in m.kernels}
    before = {(k.kernel, k.arch): k for k in base.kernels}
    added, removed = sorted(set(now) - set(before)), sorted(set(before) - set(now))
    # A kernel whose parameters changed has a new mangled name: one added and one removed of
    # the same name and arch are that kernel, and are compared (when the pairing is unique).
    pairs = _same_kernel(added, removed, now, before)
    paired_old = set(pairs.values())  # list.remove per pair was kernels x kernels
    added = [k for k in added if k not in pairs]
    removed = [k for k in removed if k not in paired_old]
    for new_key, old_key in pairs.items():
        if notes is not None:
            notes.append(f"{now[new_key].demangled} ({new_key[1]}): its signature changed "
                         f"since the baseline ({before[old_key].demangled}); compared with it")
    if (now or before) and not set(now) & set(before) and not pairs:
        # Nothing to compare: a baseline of another program, not this one a kernel apart.
        def names(keys):
            return ", ".join(f"{now.get(k, before.get(k)).demangled} ({k[1]})"
                             for k in keys) or "none"

        raise BaselineError(
            f"baseline {label} is for a different build: no kernel and arch in common "
            f"(only in the baseline: {names(removed)}; only in this build: {names(added)})",
            hint="compare with a baseline of the same program, or write a new one for this "
                 "build with nvstage check --write-baseline")
    unmatched = [Unmatched("new", now[k].demangled, k[1],
                           f"{now[k].demangled} ({k[1]}): {UNMATCHED_WORDS['new']} (its "
                           f"budgets still apply)") for k in added]
    unmatched += [Unmatched("removed", before[k].demangled, k[1],
                            f"{before[k].demangled} ({k[1]}): {UNMATCHED_WORDS['removed']}")
                  for k in removed]
    for arch in sorted(set(m.cubin_bytes) ^ set(base.cubin_bytes)):
        kind = "new" if arch in m.cubin_bytes else "removed"
        unmatched.append(Unmatched(kind, None, arch,
                                   f"the {arch} cubin: {UNMATCHED_WORDS[kind]}"))
    for key, k in sorted(now.items()):
        b = before.get(key) or before.get(pairs.get(key))
        if b is None:
            continue
        for metric in ("registers", "spill_bytes", "shared_bytes"):
            _grew(c, getattr(k, metric), getattr(b, metric), rel[metric], metric,
                  kernel=k.demangled, arch=k.arch, file=k.file, line=k.line,
                  what=f"{k.demangled} ({k.arch}) {metric.replace('_', ' ')}")
    # A kernel added since the baseline grows the cubin of its arch and the fatbin: growth
    # that is the new kernel's, not a regression, so those sizes are not held to the baseline
    # (max_cubin_bytes and max_fatbin_bytes still hold them).
    grown = {arch for _, arch in added}
    for arch, size in sorted(m.cubin_bytes.items()):
        if arch not in grown:
            _grew(c, size, base.cubin_bytes.get(arch), rel["cubin_bytes"], "cubin_bytes",
                  kernel=None, arch=arch, what=f"the {arch} cubin size")
    if not added:
        _grew(c, m.fatbin_bytes, base.fatbin_bytes, rel["fatbin_bytes"], "fatbin_bytes",
              kernel=None, arch=None, what="the fatbin size")
    skipped = [f"the {a} cubin" for a in sorted(grown & set(m.cubin_bytes)
                                                 & set(base.cubin_bytes))]
    if added and None not in (m.fatbin_bytes, base.fatbin_bytes):
        skipped.append("the fatbin")
    if skipped and notes is not None:
        notes.append(f"sizes not compared with the baseline (kernels or arches were added): "
                     f"{', '.join(skipped)}")
    # Stages are matched by kind, arch and order among stages of that kind: indices move
    # when a flag adds a stage.
    def keyed(stages):
        seen: dict[tuple, int] = {}
        out = {}
        for s in stages:
            k = (s["kind"], s.get("arch"))
            seen[k] = seen.get(k, 0) + 1
            out[(*k, seen[k])] = s
        return out

    # Likewise compile times: the source grew by the new kernels, so its stages take longer.
    bs = {} if added else keyed(base.stages)
    if added and base.stages and notes is not None:
        notes.append("stage times not compared with the baseline (kernels or arches were added)")
    for key, s in keyed(m.stages).items():
        b = bs.get(key)
        if b is None or s.get("cached") or b.get("cached"):
            continue  # a cached stage's time is the cache's, not the tool's
        label_ = s["kind"] + (f" ({s['arch']})" if s.get("arch") else "")
        _grew(c, s["seconds"], b["seconds"], rel["stage_seconds"], "stage_seconds",
              kernel=None, arch=s.get("arch"), what=f"stage {label_} time", unit=" s")
    for name, us in sorted(m.kernel_us.items()):
        _grew(c, us, base.kernel_us.get(name), rel["kernel_us"], "kernel_us", kernel=name,
              arch=None, what=f"kernel {name} time", unit=" us")
    return unmatched


def _same_kernel(added: list, removed: list, now: dict, before: dict) -> dict:
    """{added key: removed key} for kernels that share a name (``base_name``) and arch with
    exactly one kernel on the other side."""
    def by_name(keys, side):
        groups: dict[tuple, list] = {}
        for key in keys:
            groups.setdefault((base_name(side[key].demangled), key[1]), []).append(key)
        return groups

    gone = by_name(removed, before)
    return {new[0]: gone[name][0] for name, new in by_name(added, now).items()
            if len(new) == 1 and len(gone.get(name, ())) == 1}


def _grew(c: _Checker, value, before, fraction: float, metric: str, *, kernel, arch, what,
          file=None, line=None, unit="") -> None:
    if value is None or before is None:
        return
    allowed = max(before * (1 + fraction), before + BASELINE_FLOORS.get(metric, 0))
    c.checked += 1
    if value > allowed:
        growth = f"+{(value - before) / before:.0%}" if before else "from 0"
        c.violations.append(Violation(
            kernel, arch, metric, value, round(allowed, 6),
            f"{what} grew from {fmt_value(before)}{unit} to {fmt_value(value)}{unit} "
            f"({growth}); the baseline allows {fraction:.0%}", file, line, against="baseline"))


