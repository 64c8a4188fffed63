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

    [tool.nvstage.budgets.compile_time]    # from nvcc's -fdevice-time-trace files (check/
    max_header_seconds = 5.0               # compile_time.py: units, headers, template sets,
    max_template_set_count = 500           # device functions)

    [tool.nvstage.budgets.run]             # the decomposition's medians, from a run report
    max_launch_us = 20.0                   # also max_kernel_us, max_transfer_us,
                                           # max_total_us, max_wall_us

    [tool.nvstage.budgets.kernels."saxpy"] # per kernel: mangled or demangled name, or a glob;
    max_registers = 32                     # later tables win over earlier ones

    [tool.nvstage.baseline]                # allowed growth over --baseline, as fractions
    registers = 0.10
    stage_seconds = 0.25

This module reads and validates that configuration (pure); ``measure`` takes a build's
numbers, ``check`` holds them against the budgets, and ``report.checks`` renders the result.
"""

from __future__ import annotations

import fnmatch
import functools
import math
import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from nvstage.documents import load_toml_doc
from nvstage.errors import BudgetConfigError
from nvstage.inspect.kernels import kernel_names, spelling
from nvstage.run.workload.flags import SAFE_FLAGS
from nvstage.check.compile_time import KEYS
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.nvcc.plan import StageKind


# Per-kernel limits: config key -> the measurement it bounds.
KERNEL_LIMITS = {
    "max_registers": "registers",
    "max_spill_bytes": "spill_bytes",
    "max_shared_bytes": "shared_bytes",
    "max_kernel_us": "kernel_us",
}
# Limits that only make sense for the whole build.
BUILD_LIMITS = ("max_cubin_bytes", "max_fatbin_bytes", "required_arches", "stage_seconds",
                "run", "compile_time")
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
# What each [compile] key holds (a wrong type would reach nvcc as some other flag).
_COMPILE_LISTS = ("archs", "gencodes", "include_dirs", "defines", "extra")
_COMPILE_BOOLS = ("rdc", "lineinfo", "lto", "compile_only")
# [compile] extra takes only the flags a document may give nvcc (run/workload/flags.py).
_SAFE_EXTRA = SAFE_FLAGS


# -- the configuration ------------------------------------------------------------------

@dataclass(frozen=True)
class Limits:
    """One set of per-kernel limits; ``None``: no limit."""

    max_registers: int | None = None
    max_spill_bytes: int | float | None = None  # math.inf: no_spills = false
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
    compile_time: dict = field(default_factory=dict)  # check/compile_time.KEYS -> limit
    baseline: dict[str, float] = field(default_factory=lambda: dict(BASELINE_DEFAULTS))
    compile: dict = field(default_factory=dict)  # CompileOptions fields for a .cu source
    source: str | None = None  # a default SOURCE for check, relative to the config
    path: str | None = None  # where these came from

    def limits_for(self, kernel: str, demangled: str) -> Limits:
        """The defaults, merged with every kernel table whose pattern names the kernel, in
        file order. Exact names are looked up (a dict), globs tried one by one: at most
        ``MAX_GLOB_TABLES`` of them, so the work is kernels x globs, never kernels x
        tables (both sizes come from documents: 20,000 of each ran for over 5 minutes)."""
        exact, globs, seen = self._patterns
        if (kernel, demangled) in seen:  # the same kernel for another arch
            return seen[(kernel, demangled)]
        names = {spelling(n) for n in kernel_names(kernel, demangled)}
        hits = {i for n in names for i in exact.get(n, ())}
        hits.update(i for i, rx in globs if any(rx.match(n) for n in names))
        out = self.defaults
        for i in sorted(hits):
            out = out.merged(self.kernels[i][1])
        seen[(kernel, demangled)] = out
        return out

    @functools.cached_property
    def _patterns(self) -> tuple[dict[str, list[int]], list[tuple[int, re.Pattern]], dict]:
        """The kernel tables' patterns, by index: exact names in a dict, globs compiled; and
        the limits found so far, by kernel. Names and patterns are compared as
        ``inspect.kernels.matches`` compares them (in ``spelling``)."""
        exact: dict[str, list[int]] = {}
        globs = []
        for i, (pattern, _) in enumerate(self.kernels):
            if is_glob(pattern):
                globs.append((i, re.compile(fnmatch.translate(spelling(pattern)), re.DOTALL)))
            else:
                exact.setdefault(spelling(pattern), []).append(i)
        return exact, globs, {}

    def compile_options(self):

        opts = {k: tuple(v) if isinstance(v, list) else v for k, v in self.compile.items()}
        if "stop" not in opts and not opts.get("compile_only"):
            # Budgets are about device code: the fatbin is the last stage they need, and the
            # host stages would only add time.
            opts["stop"] = "fatbin"
        try:
            return CompileOptions(**opts)
        except TypeError as e:
            raise BudgetConfigError(f"{self.path or 'budgets'}: compile: {e}") from e



def is_glob(pattern: str) -> bool:
    """Whether ``fnmatch`` reads anything in ``pattern`` other than itself."""
    return any(c in pattern for c in "*?[")


def _name(key: str) -> str:
    """A key as a message shows it: quoted when it holds a newline or other control
    character (a message is one line), cut when long."""
    return key if key.isprintable() and len(key) <= 60 else repr(key[:60])


def _names(keys) -> str:
    return ", ".join(_name(k) for k in sorted(keys))


# Kernel tables one budgets file may hold, and how many of them may be globs (each glob is
# tried on every kernel of a build; an exact name is looked up): far above real files.
MAX_KERNEL_TABLES = 10_000
MAX_GLOB_TABLES = 100

# No budget is larger: a bigger number is a typo (or a document built to overflow a float).
_MAX_NUMBER = 10**18


def _number(where: str, key: str, value, *, integer: bool):
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok or value < 0 or value > _MAX_NUMBER or \
            (isinstance(value, float) and not math.isfinite(value)):
        kind = "a whole number" if integer else "a number"
        # repr() of an integer of thousands of digits raises; such a value is just "too large"
        shown = "a number over 1e18" if ok and not isinstance(value, bool) and \
            value > _MAX_NUMBER else f"{value!r:.60}"
        raise BudgetConfigError(f"{where}: {key} must be {kind} from 0 to 1e18, not {shown}")
    return value


def _limits(table: dict, where: str, *, build_keys: tuple[str, ...]) -> Limits:
    known = set(KERNEL_LIMITS) | {"no_spills"} | set(build_keys)
    unknown = sorted(set(table) - known - {"kernels"})
    if unknown:
        allowed = ", ".join(sorted(known))
        hint = None
        if set(unknown) & set(BUILD_LIMITS):
            hint = f"{_names(set(unknown) & set(BUILD_LIMITS))} applies to the whole build: " \
                   "put it in [tool.nvstage.budgets]"
        raise BudgetConfigError(f"{where}: unknown key(s) {_names(unknown)}; allowed: "
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
        elif spill is None:
            # false: spills allowed, which a per-kernel table uses to lift the default
            spill = math.inf
    return Limits(
        max_registers=_opt(table, "max_registers", where, True),
        max_spill_bytes=_number(where, "max_spill_bytes", spill, integer=True)
        if spill not in (None, math.inf) else spill,
        max_shared_bytes=_opt(table, "max_shared_bytes", where, True),
        max_kernel_us=_opt(table, "max_kernel_us", where, False),
    )


def _opt(table: dict, key: str, where: str, integer: bool):
    v = table.get(key)
    return None if v is None else _number(where, key, v, integer=integer)


def parse_budgets(doc: dict, *, path: str | None = None) -> Budgets:
    """Budgets from a parsed TOML document (a pyproject or a standalone file). Pure."""
    where = path or "budgets"
    if not isinstance(doc, dict):
        raise BudgetConfigError(f"{where}: the budgets must be a table, not {doc!r:.60}")
    root = doc.get("tool", {}).get("nvstage") if isinstance(doc.get("tool"), dict) else None
    allowed_top = {"budgets", "baseline", "compile", "source"}
    if root is None:
        if path and os.path.basename(path) == "pyproject.toml":
            raise BudgetConfigError(f"{path} has no [tool.nvstage] table",
                                    hint="add [tool.nvstage.budgets] with the limits to check")
        # A standalone file: the same tables at its top level. A misspelt table would
        # silently check nothing, so everything else is refused (but other tools' [tool.*]).
        root = {k: v for k, v in doc.items() if k != "tool"}
        table = "the top level"
    else:
        table = "[tool.nvstage]"
    if not isinstance(root, dict):
        raise BudgetConfigError(f"{where}: tool.nvstage must be a table",
                                hint="write [tool.nvstage.budgets] with the limits under it")
    unknown = sorted(set(root) - allowed_top)
    if unknown:
        raise BudgetConfigError(f"{where}: unknown table(s) at {table}: "
                                f"{_names(unknown)}; allowed: {', '.join(sorted(allowed_top))}")
    b = root.get("budgets", {})
    for key, value in (("budgets", b), ("budgets.kernels", b.get("kernels", {}) if
                       isinstance(b, dict) else {}), ("baseline", root.get("baseline", {})),
                       ("compile", root.get("compile", {}))):
        if not isinstance(value, dict):
            raise BudgetConfigError(f"{where}: {key} must be a table, not {value!r:.60}")
    defaults = _limits(b, f"{where} [budgets]", build_keys=BUILD_LIMITS)
    tables = b.get("kernels", {})
    globs = sum(1 for pattern in tables if is_glob(pattern))
    if len(tables) > MAX_KERNEL_TABLES or globs > MAX_GLOB_TABLES:
        many, most, name = ((len(tables), MAX_KERNEL_TABLES, "MAX_KERNEL_TABLES")
                            if len(tables) > MAX_KERNEL_TABLES else
                            (globs, MAX_GLOB_TABLES, "MAX_GLOB_TABLES"))
        what = "" if name == "MAX_KERNEL_TABLES" else " with a glob (*, ? or [...])"
        raise BudgetConfigError(f"{where}: {many} [budgets.kernels.\"...\"] tables{what}: "
                                f"more than the {most} nvstage reads ({name})",
                                hint="one table with a glob (\"scale*\") covers many kernels")
    kernels = []
    for pattern, table in tables.items():
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

    kinds = {k.value for k in StageKind} | {"*"}
    for k, v in stage.items():
        if k not in kinds:
            raise BudgetConfigError(f"{where}: stage_seconds.{_name(k)}: unknown stage kind",
                                    hint=f"choose from: {', '.join(sorted(kinds))}")
        _number(where, f"stage_seconds.{k}", v, integer=False)
    ctime = _compile_time(b.get("compile_time", {}), where)
    run = b.get("run", {})
    if not isinstance(run, dict) or set(run) - set(RUN_TERMS):
        raise BudgetConfigError(f"{where}: budgets.run takes {', '.join(RUN_TERMS)}")
    for k, v in run.items():
        _number(where, f"run.{k}", v, integer=False)
    base = dict(BASELINE_DEFAULTS)
    for k, v in root.get("baseline", {}).items():
        if k not in BASELINE_DEFAULTS:
            raise BudgetConfigError(f"{where}: baseline.{_name(k)}: unknown metric",
                                    hint=f"choose from: {', '.join(BASELINE_DEFAULTS)}")
        base[k] = float(_number(where, f"baseline.{k}", v, integer=False))
    comp = root.get("compile", {})
    bad = sorted(set(comp) - set(_COMPILE_KEYS))
    if bad:
        raise BudgetConfigError(f"{where}: compile: unknown option(s) {_names(bad)}",
                                hint=f"choose from: {', '.join(_COMPILE_KEYS)}")
    _check_compile(comp, where)
    src = root.get("source")
    if src is not None and not isinstance(src, str):
        raise BudgetConfigError(f"{where}: source must be a path (a string), not {src!r}")
    if src is not None and "\0" in src:  # no system call takes one: stat would raise
        raise BudgetConfigError(f"{where}: source: a file path cannot hold a NUL byte")
    if src is not None and path:
        src = str(Path(path).parent / src)
    return Budgets(
        defaults=defaults, kernels=tuple(kernels),
        max_cubin_bytes=_opt(b, "max_cubin_bytes", where, True),
        max_fatbin_bytes=_opt(b, "max_fatbin_bytes", where, True),
        required_arches=tuple(arches), stage_seconds=dict(stage),
        run={RUN_TERMS[k]: float(v) for k, v in run.items()}, compile_time=ctime,
        baseline=base,
        compile=dict(comp), source=src, path=path)


def _compile_time(table, where: str) -> dict:
    """``[budgets.compile_time]``: each key one of ``compile_time.KEYS``, each a number."""
    if not isinstance(table, dict):
        raise BudgetConfigError(f"{where}: compile_time must be a table of limits "
                                "(max_header_seconds = 5.0, ...)")
    for k, v in table.items():
        if k not in KEYS:
            raise BudgetConfigError(f"{where}: compile_time.{_name(k)}: unknown key",
                                    hint=f"choose from: {', '.join(KEYS)}")
        _number(where, f"compile_time.{k}", v, integer=KEYS[k] is int)
    return dict(table)


def _check_compile(comp: dict, where: str) -> None:
    """Each [compile] value of the type CompileOptions takes; ``extra`` only safe flags."""
    for key, value in comp.items():
        at = f"{where}: compile.{key}"
        if key in _COMPILE_LISTS:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise BudgetConfigError(f"{at} must be a list of strings, not {value!r:.60}")
            if any("\0" in v for v in value):  # each becomes an nvcc argument or a path
                raise BudgetConfigError(f"{at}: a string here cannot hold a NUL byte")
        elif key in _COMPILE_BOOLS:
            if not isinstance(value, bool):
                raise BudgetConfigError(f"{at} must be true or false, not {value!r:.60}")
        elif key == "maxrregcount":
            _number(where, "compile.maxrregcount", value, integer=True)
        elif key == "stop" and value not in ("ptx", "cubin", "fatbin"):
            raise BudgetConfigError(f"{at} must be \"ptx\", \"cubin\" or \"fatbin\", "
                                    f"not {value!r:.60}")
        elif key == "opt_level" and value not in ("0", "1", "2", "3"):
            raise BudgetConfigError(f"{at} must be \"0\" to \"3\", not {value!r:.60}")
    for word in comp.get("extra", []):
        if not _SAFE_EXTRA.fullmatch(word):
            raise BudgetConfigError(
                f"{where}: compile.extra: {word[:80]!r} is not a flag a budgets file may "
                "give nvcc (it could choose a program to run or a file to write)",
                hint="use the dedicated keys (include_dirs, defines, maxrregcount, ...), or "
                     "build with nvstage compile --keep DIR and check DIR")


def load_budgets(path: str | os.PathLike) -> Budgets:
    doc = load_toml_doc(path, "budgets", BudgetConfigError)
    return parse_budgets(doc, path=str(path))


def find_config(start: str | os.PathLike = ".") -> Path | None:
    """The nearest pyproject.toml with a [tool.nvstage] table, from ``start`` upwards."""
    d = Path(start).resolve()
    for folder in (d, *d.parents):
        p = folder / "pyproject.toml"
        if p.is_file():
            try:
                tool = tomllib.loads(p.read_text(encoding="utf-8")).get("tool")
            except (tomllib.TOMLDecodeError, UnicodeDecodeError, OSError):
                return p  # let load_budgets say what is wrong with it
            if isinstance(tool, dict) and "nvstage" in tool:
                return p
    return None


