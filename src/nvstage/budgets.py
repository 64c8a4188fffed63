"""Budgets that fail a build: limits per kernel and per build, checked against a real build.

The budgets live in ``[tool.nvstage]`` of a pyproject.toml, or in a standalone TOML file that
holds the same tables either under ``[tool.nvstage]`` or at its top level::

    [tool.nvstage.compile]                 # only used when check is given a .cu file
    archs = ["sm_80", "sm_90"]             # any CompileOptions field: defines, maxrregcount...

    [tool.nvstage.budgets]                 # defaults for every kernel, and build-wide limits
    max_registers = 64
    no_spills = true                       # or max_spill_bytes = 64 (stores + loads)
    max_shared_bytes = 49152               # static shared memory, per kernel
    max_cubin_bytes = 65536                # each cubin the build made
    max_fatbin_bytes = 262144
    required_arches = ["sm_80", "sm_90"]   # sm_NN: a cubin image; compute_NN: a PTX image
    max_kernel_us = 50.0                   # median GPU time per kernel, from a run report

    [tool.nvstage.budgets.stage_seconds]   # per stage kind; "*" for every other kind
    ptxas = 2.0
    "*" = 30.0

    [tool.nvstage.budgets.run]             # the decomposition's medians, from a run report
    max_launch_us = 20.0                   # also max_kernel_us, max_transfer_us,
                                           # max_total_us, max_wall_us

    [tool.nvstage.budgets.kernels."saxpy"] # per kernel: mangled or demangled name, or a glob;
    max_registers = 32                     # later tables win over earlier ones

    [tool.nvstage.baseline]                # allowed growth over --baseline, as fractions
    registers = 0.10
    stage_seconds = 0.25

Measurements are the build's own numbers (ptxas and cuobjdump via ``inspect.resources``, the
fatbin inventory, the manifest's stage times) and, when given, a run report's medians.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import re
import tomllib
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from . import __version__
from .errors import ArtifactError, InputNotFound, UsageError

SCHEMA = "nvstage.check/1"

# Per-kernel limits: config key -> the measurement it bounds.
KERNEL_LIMITS = {
    "max_registers": "registers",
    "max_spill_bytes": "spill_bytes",
    "max_shared_bytes": "shared_bytes",
    "max_kernel_us": "kernel_us",
}
# Limits that only make sense for the whole build.
BUILD_LIMITS = ("max_cubin_bytes", "max_fatbin_bytes", "required_arches", "stage_seconds",
                "run")
RUN_TERMS = {"max_launch_us": "launch", "max_kernel_us": "kernel",
             "max_transfer_us": "transfer", "max_total_us": "total", "max_wall_us": "wall"}
# Relative growth allowed against a baseline when the config does not say. Spills and shared
# memory may not grow at all; register counts move by a few with toolkit updates, and stage
# times on shared CI machines are noisy.
BASELINE_DEFAULTS = {
    "registers": 0.10, "spill_bytes": 0.0, "shared_bytes": 0.0, "cubin_bytes": 0.10,
    "fatbin_bytes": 0.10, "stage_seconds": 0.25, "kernel_us": 0.25,
}
_COMPILE_KEYS = ("archs", "gencodes", "rdc", "opt_level", "lineinfo", "include_dirs",
                 "defines", "maxrregcount", "lto", "extra", "stop", "compile_only")


class BudgetConfigError(UsageError):
    """The budgets file is missing, not TOML, or has keys or values nvstage does not know."""


class BaselineError(ArtifactError):
    """A --baseline file that is not a check report or manifest, or one for another build."""


# -- the configuration ------------------------------------------------------------------

@dataclass(frozen=True)
class Limits:
    """One set of per-kernel limits; ``None``: no limit."""

    max_registers: int | None = None
    max_spill_bytes: int | None = None
    max_shared_bytes: int | None = None
    max_kernel_us: float | None = None

    def merged(self, other: Limits) -> Limits:
        return Limits(**{f.name: getattr(other, f.name) if getattr(other, f.name) is not None
                         else getattr(self, f.name) for f in fields(self)})


@dataclass(frozen=True)
class Budgets:
    defaults: Limits = field(default_factory=Limits)
    kernels: tuple[tuple[str, Limits], ...] = ()  # (pattern, limits), in file order
    max_cubin_bytes: int | None = None
    max_fatbin_bytes: int | None = None
    required_arches: tuple[str, ...] = ()
    stage_seconds: dict[str, float] = field(default_factory=dict)  # kind or "*" -> seconds
    run: dict[str, float] = field(default_factory=dict)  # "launch"... -> microseconds
    baseline: dict[str, float] = field(default_factory=lambda: dict(BASELINE_DEFAULTS))
    compile: dict = field(default_factory=dict)  # CompileOptions fields for a .cu source
    source: str | None = None  # a default SOURCE for check, relative to the config
    path: str | None = None  # where these came from

    def limits_for(self, kernel: str, demangled: str) -> Limits:
        out = self.defaults
        for pattern, lim in self.kernels:
            if kernel_matches(pattern, kernel, demangled):
                out = out.merged(lim)
        return out

    def compile_options(self):
        from .options import CompileOptions

        opts = {k: tuple(v) if isinstance(v, list) else v for k, v in self.compile.items()}
        if "stop" not in opts and not opts.get("compile_only"):
            # Budgets are about device code: the fatbin is the last stage they need, and the
            # host stages would only add time.
            opts["stop"] = "fatbin"
        try:
            return CompileOptions(**opts)
        except TypeError as e:
            raise BudgetConfigError(f"{self.path or 'budgets'}: compile: {e}") from e

    def to_json(self) -> dict:
        return {
            "defaults": asdict(self.defaults),
            "kernels": {p: asdict(lim) for p, lim in self.kernels},
            "max_cubin_bytes": self.max_cubin_bytes, "max_fatbin_bytes": self.max_fatbin_bytes,
            "required_arches": list(self.required_arches),
            "stage_seconds": self.stage_seconds, "run": self.run, "baseline": self.baseline,
            "compile": self.compile, "path": self.path,
        }


def base_name(demangled: str) -> str:
    """``ns::scale<float>(float*, float, int)`` -> ``scale``: what a source file spells."""
    head = demangled.split("(", 1)[0]
    depth, out = 0, []
    for ch in head:  # drop template arguments, which may hold "::" themselves
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).split("::")[-1].strip()


def kernel_matches(pattern: str, kernel: str, demangled: str) -> bool:
    """A pattern names a kernel by its mangled name, its demangled signature, the signature
    without parameters (``scale<float>``) or its bare name (``scale``); globs allowed."""
    names = {kernel, demangled, demangled.split("(", 1)[0], base_name(demangled)}
    return any(fnmatch.fnmatchcase(n, pattern) for n in names)


def _number(where: str, key: str, value, *, integer: bool):
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or value < 0 or \
            (isinstance(value, float) and not math.isfinite(value)):
        kind = "a whole number" if integer else "a number"
        raise BudgetConfigError(f"{where}: {key} must be {kind} >= 0, not {value!r}")
    return value


def _limits(table: dict, where: str, *, build_keys: tuple[str, ...]) -> Limits:
    known = set(KERNEL_LIMITS) | {"no_spills"} | set(build_keys)
    unknown = sorted(set(table) - known - {"kernels"})
    if unknown:
        allowed = ", ".join(sorted(known))
        hint = None
        if set(unknown) & set(BUILD_LIMITS):
            hint = f"{', '.join(set(unknown) & set(BUILD_LIMITS))} applies to the whole build: " \
                   "put it in [tool.nvstage.budgets]"
        raise BudgetConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: "
                                f"{allowed}", hint=hint)
    spill = table.get("max_spill_bytes")
    if "no_spills" in table:
        if not isinstance(table["no_spills"], bool):
            raise BudgetConfigError(f"{where}: no_spills must be true or false")
        if table["no_spills"]:
            if spill not in (None, 0):
                raise BudgetConfigError(f"{where}: no_spills = true and max_spill_bytes = "
                                        f"{spill} disagree: keep one")
            spill = 0
    return Limits(
        max_registers=_opt(table, "max_registers", where, True),
        max_spill_bytes=_number(where, "max_spill_bytes", spill, integer=True)
        if spill is not None else None,
        max_shared_bytes=_opt(table, "max_shared_bytes", where, True),
        max_kernel_us=_opt(table, "max_kernel_us", where, False),
    )


def _opt(table: dict, key: str, where: str, integer: bool):
    v = table.get(key)
    return None if v is None else _number(where, key, v, integer=integer)


def parse_budgets(doc: dict, *, path: str | None = None) -> Budgets:
    """Budgets from a parsed TOML document (a pyproject or a standalone file). Pure."""
    where = path or "budgets"
    root = doc.get("tool", {}).get("nvstage") if isinstance(doc.get("tool"), dict) else None
    if root is None:
        if path and os.path.basename(path) == "pyproject.toml":
            raise BudgetConfigError(f"{path} has no [tool.nvstage] table",
                                    hint="add [tool.nvstage.budgets] with the limits to check")
        root = doc
    allowed_top = {"budgets", "baseline", "compile", "source"}
    unknown = sorted(set(root) - allowed_top)
    if unknown and root is not doc:
        raise BudgetConfigError(f"{where}: unknown table(s) in [tool.nvstage]: "
                                f"{', '.join(unknown)}; allowed: {', '.join(sorted(allowed_top))}")
    b = root.get("budgets", {})
    if not isinstance(b, dict):
        raise BudgetConfigError(f"{where}: budgets must be a table")
    defaults = _limits(b, f"{where} [budgets]", build_keys=BUILD_LIMITS)
    kernels = []
    for pattern, table in (b.get("kernels") or {}).items():
        if not isinstance(table, dict):
            raise BudgetConfigError(f"{where}: budgets.kernels.{pattern!r} must be a table")
        kernels.append((pattern, _limits(table, f"{where} [budgets.kernels.{pattern!r}]",
                                         build_keys=())))
    arches = b.get("required_arches", [])
    if not isinstance(arches, list) or not all(
            isinstance(a, str) and re.fullmatch(r"(sm|compute)_\d+[af]?", a) for a in arches):
        raise BudgetConfigError(f"{where}: required_arches must be a list like "
                                f"[\"sm_90\", \"compute_90\"], not {arches!r}")
    stage = b.get("stage_seconds", {})
    if not isinstance(stage, dict):
        raise BudgetConfigError(f"{where}: stage_seconds must be a table of stage kind = "
                                "seconds (ptxas = 2.0, \"*\" = 30.0)")
    from .plan import StageKind

    kinds = {k.value for k in StageKind} | {"*"}
    for k, v in stage.items():
        if k not in kinds:
            raise BudgetConfigError(f"{where}: stage_seconds.{k}: unknown stage kind",
                                    hint=f"choose from: {', '.join(sorted(kinds))}")
        _number(where, f"stage_seconds.{k}", v, integer=False)
    run = b.get("run", {})
    if not isinstance(run, dict) or set(run) - set(RUN_TERMS):
        raise BudgetConfigError(f"{where}: budgets.run takes {', '.join(RUN_TERMS)}")
    for k, v in run.items():
        _number(where, f"run.{k}", v, integer=False)
    base = dict(BASELINE_DEFAULTS)
    for k, v in (root.get("baseline") or {}).items():
        if k not in BASELINE_DEFAULTS:
            raise BudgetConfigError(f"{where}: baseline.{k}: unknown metric",
                                    hint=f"choose from: {', '.join(BASELINE_DEFAULTS)}")
        base[k] = float(_number(where, f"baseline.{k}", v, integer=False))
    comp = root.get("compile", {})
    bad = sorted(set(comp) - set(_COMPILE_KEYS))
    if bad:
        raise BudgetConfigError(f"{where}: compile: unknown option(s) {', '.join(bad)}",
                                hint=f"choose from: {', '.join(_COMPILE_KEYS)}")
    src = root.get("source")
    if src is not None and path:
        src = str(Path(path).parent / src)
    return Budgets(
        defaults=defaults, kernels=tuple(kernels),
        max_cubin_bytes=_opt(b, "max_cubin_bytes", where, True),
        max_fatbin_bytes=_opt(b, "max_fatbin_bytes", where, True),
        required_arches=tuple(arches), stage_seconds=dict(stage),
        run={RUN_TERMS[k]: float(v) for k, v in run.items()}, baseline=base,
        compile=dict(comp), source=src, path=path)


def load_budgets(path: str | os.PathLike) -> Budgets:
    p = Path(path)
    if not p.is_file():
        raise InputNotFound(f"no budgets file at {path}")
    try:
        doc = tomllib.loads(p.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise BudgetConfigError(f"{path} is not valid TOML: {e}") from e
    return parse_budgets(doc, path=str(p))


def find_config(start: str | os.PathLike = ".") -> Path | None:
    """The nearest pyproject.toml with a [tool.nvstage] table, from ``start`` upwards."""
    d = Path(start).resolve()
    for folder in (d, *d.parents):
        p = folder / "pyproject.toml"
        if p.is_file():
            try:
                if "nvstage" in tomllib.loads(p.read_text()).get("tool", {}):
                    return p
            except (tomllib.TOMLDecodeError, UnicodeDecodeError):
                return p  # let load_budgets say what is wrong with it
    return None


# -- measuring a build ------------------------------------------------------------------

@dataclass(frozen=True)
class KernelFacts:
    kernel: str
    demangled: str
    arch: str
    registers: int
    spill_bytes: int | None  # stores + loads; None: unknown (no ptxas -v numbers)
    shared_bytes: int
    file: str | None = None
    line: int | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Measurements:
    """What a build (and optionally a run) measured: the numbers budgets are checked against
    and a later check's baseline."""

    source: str
    kernels: list[KernelFacts]
    arches: list[str]  # images present: sm_NN cubins, compute_NN PTX
    arches_from: str  # the file the arches were read from
    cubin_bytes: dict[str, int]  # arch -> size of each cubin the build made
    fatbin_bytes: int | None
    stages: list[dict]  # index, kind, arch, seconds, cached
    kernel_us: dict[str, float] = field(default_factory=dict)  # run report: kernel -> median
    terms_us: dict[str, float] = field(default_factory=dict)  # run report: term -> median

    def to_json(self) -> dict:
        return {
            "source": self.source, "kernels": [k.to_json() for k in self.kernels],
            "arches": self.arches, "arches_from": self.arches_from,
            "cubin_bytes": self.cubin_bytes, "fatbin_bytes": self.fatbin_bytes,
            "stages": self.stages, "kernel_us": self.kernel_us, "terms_us": self.terms_us,
        }

    @classmethod
    def from_json(cls, d: dict) -> Measurements:
        return cls(source=d["source"], kernels=[KernelFacts(**k) for k in d["kernels"]],
                   arches=list(d["arches"]), arches_from=d.get("arches_from", ""),
                   cubin_bytes=dict(d["cubin_bytes"]), fatbin_bytes=d.get("fatbin_bytes"),
                   stages=list(d["stages"]), kernel_us=dict(d.get("kernel_us") or {}),
                   terms_us=dict(d.get("terms_us") or {}))


def load_build_from(manifest_or_build):
    """A ``Build``, given one or a keep folder / stages.json path."""
    from .pipeline import Build

    if isinstance(manifest_or_build, Build):
        return manifest_or_build
    from .inspect.manifest import load_build

    return load_build(manifest_or_build)


_DECL = re.compile(r"__global__")


def locate_kernel(source: str | os.PathLike, demangled: str,
                  _cache: dict | None = None) -> int | None:
    """The 1-based line where ``source`` defines the kernel: the first line naming it as a
    function within three lines of ``__global__``. None when the file does not say."""
    try:
        lines = Path(source).read_text(errors="replace").splitlines()
    except OSError:
        return None
    name = base_name(demangled)
    if not name:
        return None
    call = re.compile(rf"\b{re.escape(name)}\s*(<[^;{{]*>)?\s*\(")
    fallback = None
    for i, text in enumerate(lines):
        if call.search(text):
            if any(_DECL.search(lines[j]) for j in range(max(0, i - 3), i + 1)):
                return i + 1
            fallback = fallback or i + 1
    return fallback


def _final_rows(rows):
    """Per (kernel, arch): the final numbers when there are any (after an -rdc device link),
    else the per-file ones."""
    best: dict[tuple[str, str], object] = {}
    for r in rows:
        key = (r.kernel, r.arch)
        if key not in best or (r.final and not best[key].final):
            best[key] = r
    return list(best.values())


def _image_arches(build, toolkit) -> tuple[list[str], str]:
    """The arches whose code the build's fatbin carries (its object or executable else, its
    cubins and PTX when it stopped before the fatbin)."""
    from .inspect.fatbin import inventory

    for kind in ("fatbin", "object", "executable"):
        for a in build.artifacts:
            if a.kind == kind and os.path.isfile(a.path):
                imgs = [im for im in inventory(a.path, toolkit) if im.loadable]
                return sorted({im.arch for im in imgs}), a.name
    found = set()
    for a in build.artifacts:
        if a.kind == "cubin" and a.arch:
            found.add(a.arch)
        elif a.kind == "ptx" and a.arch:
            found.add(a.arch.replace("sm_", "compute_"))
    return sorted(found), "the build's cubin and PTX files"


def measure(manifest_or_build, *, toolkit=None, run_report=None) -> Measurements:
    """The numbers of one build (and run report, when given)."""
    from .inspect.resources import build_resources

    build = load_build_from(manifest_or_build)
    toolkit = toolkit or build.toolkit
    if build.status != "ok":
        raise ArtifactError(f"the build of {build.source} failed: there is nothing to check",
                            hint="fix the build first (nvstage compile shows why)")
    rows = _final_rows(build_resources(build, toolkit))
    kernels = []
    for r in sorted(rows, key=lambda r: (r.demangled, r.arch)):
        spill = None if r.spill_stores is None and r.spill_loads is None else \
            (r.spill_stores or 0) + (r.spill_loads or 0)
        line = locate_kernel(build.source, r.demangled)
        kernels.append(KernelFacts(r.kernel, r.demangled, r.arch, r.registers, spill,
                                   r.shared_bytes, build.source if line else None, line))
    arches, arches_from = _image_arches(build, toolkit)
    cubins: dict[str, int] = {}
    fatbin = None
    for a in build.artifacts:
        if a.kind == "cubin":
            cubins[a.arch or a.name] = max(cubins.get(a.arch or a.name, 0), a.size)
        elif a.kind == "fatbin":
            fatbin = max(fatbin or 0, a.size)
    stages = [{"index": r.stage.index, "kind": r.stage.kind.value, "arch": r.stage.arch,
               "seconds": r.seconds, "cached": r.cached} for r in build.runs]
    m = Measurements(build.source, kernels, arches, arches_from, cubins, fatbin, stages)
    if run_report is not None:
        m.kernel_us, m.terms_us = run_figures(run_report)
    return m


def load_json_doc(path_or_doc, what: str, err=ArtifactError) -> dict:
    if isinstance(path_or_doc, dict):
        return path_or_doc
    p = Path(path_or_doc)
    if not p.is_file():
        raise InputNotFound(f"no {what} at {p}")
    try:
        doc = json.loads(p.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise err(f"{p} is not a {what}: not JSON ({e})") from e
    if not isinstance(doc, dict):
        raise err(f"{p} is not a {what}: a JSON {type(doc).__name__}, not an object")
    return doc


def run_figures(run_report) -> tuple[dict[str, float], dict[str, float]]:
    """(median GPU microseconds per kernel, median microseconds per decomposition term) from a
    run report (``nvstage.run/1``). Unknown or missing fields give empty figures."""
    doc = load_json_doc(run_report, "run report")
    dec = doc.get("decomposition")
    if dec is None and isinstance(doc.get("run"), dict):
        dec = doc["run"].get("decomposition")
    if not isinstance(dec, dict):
        return {}, {}
    terms = {}
    for term in RUN_TERMS.values():
        s = dec.get(f"{term}_ns")
        if isinstance(s, dict) and isinstance(s.get("median"), (int, float)):
            terms[term] = s["median"] / 1000.0
    kernels: dict[str, float] = {}
    for op in dec.get("operations") or []:
        if not isinstance(op, dict) or op.get("kind") != "launch":
            continue
        g = op.get("gpu_ns")
        if isinstance(g, dict) and isinstance(g.get("median"), (int, float)):
            # A kernel launched several times in the sequence: its slowest median counts.
            name = str(op.get("name"))
            kernels[name] = max(kernels.get(name, 0.0), g["median"] / 1000.0)
    return kernels, terms


# -- checking ---------------------------------------------------------------------------

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


@dataclass
class CheckResult:
    measurements: Measurements
    violations: list[Violation]
    checked: int  # limits compared
    budgets_path: str | None = None
    baseline_path: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.violations

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA, "nvstage": __version__, "passed": self.passed,
            "violation_count": len(self.violations), "checked": self.checked,
            "budgets": self.budgets_path, "baseline": self.baseline_path,
            "violations": [v.to_json() for v in self.violations],
            "measurements": self.measurements.to_json(), "notes": self.notes,
        }


class _Checker:
    def __init__(self):
        self.violations: list[Violation] = []
        self.checked = 0

    def over(self, value, limit, **kw) -> None:
        if limit is None or value is None:
            return
        self.checked += 1
        if value > limit:
            self.violations.append(Violation(value=value, limit=limit, **kw))


def _fmt(v) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def check(manifest_or_build, budgets: Budgets, *, toolkit=None, run_report=None,
          baseline=None) -> CheckResult:
    """Check one build (a ``Build``, keep folder or stages.json) against ``budgets``, and
    against ``baseline`` (an earlier check report or manifest: path or parsed dict)."""
    m = measure(manifest_or_build, toolkit=toolkit, run_report=run_report)
    c = _Checker()
    notes = []
    for k in m.kernels:
        lim = budgets.limits_for(k.kernel, k.demangled)
        name = k.demangled
        where = {"kernel": name, "arch": k.arch, "file": k.file, "line": k.line}
        c.over(k.registers, lim.max_registers, metric="registers", **where,
               message=f"{name} ({k.arch}) uses {k.registers} registers; the budget is "
                       f"{lim.max_registers}")
        if lim.max_spill_bytes is not None and k.spill_bytes is None:
            notes.append(f"{name} ({k.arch}): spills unknown (no ptxas -v numbers)")
        c.over(k.spill_bytes, lim.max_spill_bytes, metric="spill_bytes", **where,
               message=f"{name} ({k.arch}) spills {k.spill_bytes} bytes (stores + loads); "
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
    if baseline is not None:
        base_path = baseline if not isinstance(baseline, dict) else "(given)"
        base = load_baseline(baseline, toolkit=toolkit)
        _compare(m, base, budgets.baseline, c, str(base_path))
    return CheckResult(m, c.violations, c.checked, budgets.path,
                       None if base_path is None else str(base_path), notes)


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
        return Measurements.from_json(doc["measurements"])
    except (KeyError, TypeError, AttributeError) as e:
        raise BaselineError(f"baseline {label} is damaged: its measurements are incomplete "
                            f"({type(e).__name__}: {e})",
                            hint="write it again with nvstage check --write-baseline") from e


def _compare(m: Measurements, base: Measurements, rel: dict[str, float], c: _Checker,
             label: str) -> None:
    now = {(k.kernel, k.arch): k for k in m.kernels}
    before = {(k.kernel, k.arch): k for k in base.kernels}
    if set(now) != set(before):
        def names(keys):
            return ", ".join(f"{now.get(k, before.get(k)).demangled} ({k[1]})"
                             for k in sorted(keys)) or "none"

        raise BaselineError(
            f"baseline {label} is for a different build: kernels/arches only in the "
            f"baseline: {names(set(before) - set(now))}; only in this build: "
            f"{names(set(now) - set(before))}",
            hint="write a new baseline for this build with nvstage check --write-baseline")
    for key, k in sorted(now.items()):
        b = before[key]
        for metric in ("registers", "spill_bytes", "shared_bytes"):
            _grew(c, getattr(k, metric), getattr(b, metric), rel[metric], metric,
                  kernel=k.demangled, arch=k.arch, file=k.file, line=k.line,
                  what=f"{k.demangled} ({k.arch}) {metric.replace('_', ' ')}")
    for arch, size in sorted(m.cubin_bytes.items()):
        _grew(c, size, base.cubin_bytes.get(arch), rel["cubin_bytes"], "cubin_bytes",
              kernel=None, arch=arch, what=f"the {arch} cubin size")
    _grew(c, m.fatbin_bytes, base.fatbin_bytes, rel["fatbin_bytes"], "fatbin_bytes",
          kernel=None, arch=None, what="the fatbin size")
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

    bs = keyed(base.stages)
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


def _grew(c: _Checker, value, before, fraction: float, metric: str, *, kernel, arch, what,
          file=None, line=None, unit="") -> None:
    if value is None or before is None:
        return
    allowed = before * (1 + fraction)
    c.checked += 1
    if value > allowed:
        growth = f"+{(value - before) / before:.0%}" if before else "from 0"
        c.violations.append(Violation(
            kernel, arch, metric, value, round(allowed, 6),
            f"{what} grew from {_fmt(before)}{unit} to {_fmt(value)}{unit} ({growth}); the "
            f"baseline allows {fraction:.0%}", file, line, against="baseline"))


# -- rendering (pure: a result in, text out) ---------------------------------------------

def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def _rel(path: str | None, base: str | None) -> str | None:
    if not path:
        return None
    base = os.path.abspath(base or os.getcwd())
    p = os.path.abspath(path)
    return os.path.relpath(p, base) if p.startswith(base.rstrip("/") + "/") else p


def github_annotations(result: CheckResult, *, base: str | None = None) -> str:
    """One ``::error`` workflow command per violation (file and line where known), so GitHub
    marks the kernel's line in the pull request. ``base``: the repository root."""
    out = []
    for v in result.violations:
        props = []
        f = _rel(v.file, base)
        if f:
            props.append(f"file={_gh_prop(f)}")
            if v.line:
                props.append(f"line={v.line}")
        props.append("title=" + _gh_prop(f"nvstage check: {v.metric}"
                                         + (" vs baseline" if v.against == "baseline" else "")))
        out.append(f"::error {','.join(props)}::{_gh_data(v.message)}")
    if result.passed:
        out.append(f"::notice title=nvstage check::{_gh_data(summary_line(result))}")
    return "\n".join(out) + "\n"


def summary_line(result: CheckResult) -> str:
    n = len(result.violations)
    if not n:
        return f"passed: {result.checked} limits checked, no violations"
    return f"failed: {n} violation{'s' if n != 1 else ''} of {result.checked} limits checked"


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").replace("<", "&lt;")


def markdown_summary(result: CheckResult, *, title: str = "nvstage check") -> str:
    """A job summary: the verdict, the violations, then every kernel's numbers."""
    m = result.measurements
    icon = "✅" if result.passed else "❌"
    lines = [f"## {icon} {title}: {summary_line(result)}", "",
             f"Source: `{_md(os.path.basename(m.source))}`; arches in {_md(m.arches_from)}: "
             f"{', '.join(m.arches) or 'none'}", ""]
    if result.violations:
        lines += ["| kernel | arch | metric | value | limit | against |",
                  "|---|---|---|---:|---:|---|"]
        for v in result.violations:
            lines.append(f"| {_md(v.kernel or '(build)')} | {_md(v.arch or '')} | {v.metric} | "
                         f"{_md(_fmt(v.value) if v.value is not None else '-')} | "
                         f"{_md(_fmt(v.limit))} | {v.against} |")
        lines.append("")
    if m.kernels:
        lines += ["| kernel | arch | registers | spill bytes | static shared |",
                  "|---|---|---:|---:|---:|"]
        for k in m.kernels:
            spill = "?" if k.spill_bytes is None else k.spill_bytes
            lines.append(f"| `{_md(k.demangled)}` | {k.arch} | {k.registers} | {spill} | "
                         f"{k.shared_bytes} |")
        lines.append("")
    for n in result.notes:
        lines.append(f"> {_md(n)}")
    return "\n".join(lines).rstrip() + "\n\n"
