"""What ``nvstage check`` checks, and the rule that a gate which checked nothing fails: the
budgets (a given file, else the nearest pyproject.toml), the build (a keep folder or
stages.json as it is, a .cu compiled now with the budgets' compile options, or every
translation unit of a build record), the gate.

A build record (a build run with nvstage as its compiler launcher) is checked unit by unit
with the same gate, each unit's build as its entry's manifest recorded it (``check_record``):
the kernels from the ptxas report it kept, the cubins and PTX the fatbinary stage embedded
(sizes and arches as recorded: the files were temporary), the stage times. Each violation
points at the kernel's line in the unit's source, found by a bounded read of that file (a
regular file with a C, C++ or CUDA source's name; it is only ever read)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from nvstage.check.budgets import Budgets, find_config, load_budgets
from nvstage.check.gate import CheckResult, check, Violation, Unchecked
from nvstage.compiler.manifest.model import Build, load_build
from nvstage.errors import NvstageError, StageFailed, UsageError
from nvstage.files import is_folder, is_regular, read_regular
from nvstage.check.metrics import Measurements
from nvstage.compiler.toolkit.locate import find_toolkit
from nvstage.check.compile_time import held, regressions
from nvstage.compiler.buildlog.log import find, FOLDER
from nvstage.compiler.pipeline.driver import (
    check_source,
    without_temp_keep,
    compile as run_compile,
)
from nvstage.inspect.build_view import load_build_view


def check_build(target: str | os.PathLike | None = None, *,
                 config: str | os.PathLike | None = None, baseline=None, run_report=None,
                 keep_dir: str | None = None, toolkit=None, nvcc: str | None = None,
                 time_trace: str | os.PathLike | None = None,
                 time_baseline: str | os.PathLike | None = None) -> CheckResult:
    """Check ``target`` (a .cu file, keep folder or stages.json; None: the ``source`` the
    budgets name) against the budgets in ``config`` (default: the nearest pyproject.toml
    with [tool.nvstage]), and ``baseline`` when given. A .cu is compiled into ``keep_dir``,
    or a temporary folder kept while it is measured, with ``toolkit`` (else ``nvcc``'s, else
    the pip wheels'). ``time_trace``: nvcc's -fdevice-time-trace files (a trace or a folder)
    for ``[budgets.compile_time]``; without it a build folder's own traces, or a .cu's, traced
    as it is compiled; ``time_baseline``: an earlier build's traces, against which a unit,
    header, template set or function whose time regressed fails. Raises ``UsageError`` when
    there are no
    budgets, or when they checked nothing: such a gate would pass every build."""
    cfg = config or find_config()
    if cfg is None:
        raise UsageError("no budgets: no --config and no pyproject.toml with [tool.nvstage] "
                         "here or above",
                         hint="add [tool.nvstage.budgets] to pyproject.toml or pass "
                              "--config budgets.toml")
    budgets = load_budgets(cfg)
    if target is None:
        if not budgets.source:
            raise UsageError("nothing to check: give a .cu file, keep folder or stages.json "
                             "(or set source in [tool.nvstage])")
        target = budgets.source
    toolkit = toolkit or find_toolkit(nvcc)

    if find(target) is not None:
        given = [o for o, v in (("--baseline", baseline), ("--run-report", run_report),
                                ("--keep-dir", keep_dir)) if v is not None]
        if given:
            raise UsageError(f"{' and '.join(given)} apply to one build; {target} is a whole "
                             "build's record, checked unit by unit against the budgets",
                             hint="check one unit's keep folder for a baseline or a run "
                                  "report")
        result = check_record(target, budgets, toolkit=toolkit)
        _compile_time(result, budgets, time_trace or target, time_baseline)
    else:
        with build_of(Path(target), budgets, toolkit, keep_dir) as build:
            result = check(build, budgets, toolkit=toolkit, run_report=run_report,
                           baseline=baseline)
            _compile_time(result, budgets, time_trace or getattr(build, "time_trace", None),
                          time_baseline)
    if result.checked == 0 and not result.failed_units:  # failed units fail it already
        if result.unchecked and not result.measurements.kernels:
            shown = "; ".join(u.message for u in result.unchecked[:NAMED])
            raise UsageError(f"nothing was checked: no translation unit of "
                             f"{result.measurements.source} could be: {shown}",
                             hint="rebuild through nvstage (the compiler launcher) so that "
                                  "its units are staged")
        why = f"the build of {result.measurements.source} has no kernels" \
            if not result.measurements.kernels else \
            f"{cfg} sets no limit that applies to this build"
        raise UsageError(f"nothing was checked: {why}",
                         hint="set limits in [tool.nvstage.budgets]: max_registers = 64, "
                              "no_spills = true, required_arches = [\"sm_90\"], ...")
    return result


@contextlib.contextmanager
def build_of(target: Path, budgets: Budgets, toolkit, keep_dir: str | None) -> Iterator:
    """A Build for the target: a keep folder or manifest as it is; a .cu compiled now, its
    files kept (in a temporary folder without ``keep_dir``) while the check measures them."""
    if is_folder(target) or target.name.endswith(".json"):

        yield load_build(target)
        return

    check_source(target, target)  # missing, a FIFO, a name too long: one line each
    if keep_dir is not None:  # "" is refused there, not taken for "no folder"
        yield _compile(target, budgets, toolkit, keep_dir)
        return

    with tempfile.TemporaryDirectory(prefix="nvstage-check-") as tmp:
        try:
            build = _compile(target, budgets, toolkit, tmp)
        except StageFailed as e:  # its keep folder goes with ``tmp``: never point there
            raise without_temp_keep(e, ["nvstage", "compile", str(target),
                                        *budgets.compile_options().nvcc_args()]) from None
        yield build


def _compile_time(result: CheckResult, budgets: Budgets, traces, baseline=None) -> None:
    """``[budgets.compile_time]`` held against the traces, and the traces against a
    ``baseline``'s: added to ``result``."""
    for on, check_it in ((budgets.compile_time, lambda: held(budgets.compile_time, traces)),
                         (baseline, lambda: regressions(baseline, traces))):
        if not on:
            continue
        broken, checked, note = check_it()
        result.checked += checked
        result.notes += [note] if note else []
        result.violations.extend(
            Violation(kernel=None, arch=None, metric=o.metric, value=o.value, limit=o.limit,
                      message=o.message, file=o.file,
                      against="baseline" if o.metric.endswith("_regression") else "budget")
            for o in broken)


def _compile(target: Path, budgets: Budgets, toolkit, keep_dir: str):

    options = budgets.compile_options()
    if budgets.compile_time:  # traced, every stage run: a restored stage has no trace
        trace = str(Path(keep_dir).resolve() / "time-trace.json")
        options = replace(options, extra=(*options.extra, "-fdevice-time-trace", trace))
    if options.output is None:
        # nvcc would put the fatbin or object in the current folder, where a second check
        # overwrites it: it belongs with the rest of the build.
        suffix = "." + options.stop if options.stop else ".o" if options.compile_only else ""
        if suffix:
            out = Path(keep_dir).resolve() / (target.name.rsplit(".", 1)[0] + suffix)
            options = replace(options, output=str(out))
    return run_compile(target, options, toolkit=toolkit, keep=keep_dir,
                       cache=not budgets.compile_time)


# -- a whole build, from its build record ------------------------------------------------------

# The names a translation unit's source may have for check to read it for kernel lines (a
# record naming /etc/passwd as a source is not followed there).
SOURCE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cxx", ".cc", ".c++", ".cp", ".c", ".C", ".h",
                   ".hpp", ".hxx", ".hh", ".inl", ".inc")
# Where recorded artifacts "are": nowhere, so no reader opens a file a record names.
_NOWHERE = "/nonexistent/nvstage-build-record-artifact"
NAMED = 20  # units named in one note before the rest are counted


@dataclass
class RecordedBuild(Build):
    """A unit's build as its entry's manifest recorded it: no file of it read, its artifacts
    (``recorded``) the embedded cubins and PTX and the fatbin, by kind, arch and size."""

    recorded: list = field(default_factory=list)

    @property
    def artifacts(self) -> list:
        return [a for r in self.runs for a in r.artifacts] + self.recorded


def recorded_build(entry, build=None) -> RecordedBuild:
    """The ``RecordedBuild`` of a build-record entry (``ArtifactError`` when it has no
    manifest or a damaged one); ``build``: its manifest already read (no file touched)."""
    if build is None:
        build = entry.manifest_build(plan=False)  # touches no file; the gate needs no plan
    embedded = entry.embedded_files()
    recorded = []
    for a in entry.recorded_artifacts():
        if a.kind == "fatbin" or a.kind in ("cubin", "ptx") and (embedded is None
                                                                 or a.path in embedded):
            recorded.append(replace(a, path=os.path.join(_NOWHERE, os.path.basename(a.path))))
    return RecordedBuild(**{f.name: getattr(build, f.name) for f in fields(Build)},
                         recorded=recorded)


def readable_source(path: str | None) -> bool:
    """Whether check may read ``path`` for kernel lines: a source's name, a regular file
    (``metrics.locate_kernel`` bounds the read)."""
    return bool(path) and path.endswith(SOURCE_SUFFIXES) and is_regular(path)


def check_record(record: str | os.PathLike, budgets: Budgets, *, toolkit=None) -> CheckResult:
    """Every kernel of every translation unit of the build record at ``record`` (a build
    folder or its ``.nvstage-build``) against ``budgets``: the gate run on each unit's
    recorded build, the results joined. Commands plain nvcc ran, failed ones and damaged
    entries are named in the notes, unchecked."""
    view = load_build_view(record, earlier=False)  # the project as it is: no history
    violations, kernels, stages, notes, unchecked = [], [], [], list(view.notes), []
    units: list[Unchecked] = []
    arches: set[str] = set()
    cubins: dict[str, int] = {}
    fatbin = None
    checked = 0
    # The CUDA compiles: C++ compiles, links and archives (and nvcc's device links, which
    # nvstage runs unchanged) build no kernel figures of their own.
    cuda = [u for u in view.units if u.kind == "cuda-compile" and u.status != "ran"]
    for u in cuda:
        label = u.name
        entry = u.entry.in_memory() if u.status == "ok" else u.entry  # one read of it
        if u.status != "ok" or entry.build is None:
            unchecked.append(f"{label} ({u.state}{': ' + u.reason if u.reason else ''})")
            units.append(Unchecked(label, u.state, u.reason, u.source))
            continue
        read = readable_source(u.source)  # decided before anything reads it
        try:
            build = recorded_build(entry, u.build)
            build.source = u.source or build.source
            result = check(build, budgets, toolkit=toolkit, locate=read)
        except NvstageError as e:
            unchecked.append(f"{label} ({e.message})")
            units.append(Unchecked(label, "unreadable", e.message, u.source))
            continue
        if not read and u.source:
            notes.append(f"{label}: {u.source} is not read for kernel lines (not a regular "
                         "file with a C, C++ or CUDA source's name)")
        checked += result.checked
        m = result.measurements
        for v in result.violations:
            file, line = (v.file, v.line) if read and v.file else (None, None)
            if v.kernel is None:  # a build-wide limit: this unit's, at its source
                violations.append(replace(v, message=f"{label}: {v.message}",
                                          file=u.source if read else None, line=None))
            else:
                violations.append(replace(v, file=file, line=line))
        kernels += [k if read else replace(k, file=None, line=None) for k in m.kernels]
        stages += [{**s, "unit": label} for s in m.stages]
        arches.update(m.arches)
        for arch, size in m.cubin_bytes.items():
            cubins[arch] = max(cubins.get(arch, 0), size)
        if m.fatbin_bytes is not None:
            fatbin = max(fatbin or 0, m.fatbin_bytes)
        notes += [f"{label}: {n}" for n in result.notes]
    if unchecked:
        notes.append(f"{len(unchecked)} of {len(cuda)} translation units not checked: "
                     + "; ".join(unchecked[:NAMED])
                     + (f" and {len(unchecked) - NAMED} more" if len(unchecked) > NAMED else ""))
    staged = len(cuda) - len(unchecked)
    m = Measurements(view.folder, kernels, sorted(arches),
                     f"the {staged} translation unit{'s' if staged != 1 else ''} of the build "
                     "record", cubins, fatbin, stages)
    return CheckResult(m, violations, checked, budgets.path, None, list(dict.fromkeys(notes)),
                       unchecked=units, source_folder=source_folder(view))


_CMAKE_SOURCE = "CMAKE_HOME_DIRECTORY:INTERNAL="


def source_folder(view) -> str | None:
    """The folder the build's sources are in: CMake's source folder (``CMakeCache.txt``'s
    ``CMAKE_HOME_DIRECTORY`` in the build folder), else the folder all the units' sources are
    under; None when they share none but the root. A name only: nothing under it is read."""
    record = os.path.abspath(view.folder)
    build = os.path.dirname(record) if os.path.basename(record) == FOLDER else record
    cache = os.path.join(build, "CMakeCache.txt")
    try:
        text = read_regular(cache, limit=8 << 20, what="CMakeCache.txt").decode("utf-8",
                                                                                 "replace")
    except (NvstageError, OSError):  # no CMake build, or no readable cache
        text = ""
    for line in text.splitlines():
        if line.startswith(_CMAKE_SOURCE):
            found = line[len(_CMAKE_SOURCE):].strip()
            if os.path.isabs(found) and is_folder(found):
                return os.path.normpath(found)
    sources = [u.source for u in view.units if u.source and os.path.isabs(u.source)]
    try:
        common = os.path.commonpath(sources) if sources else None
    except ValueError:
        return None
    if common and len(sources) == 1:
        common = os.path.dirname(common)
    return common if common and common != os.path.dirname(common) else None
