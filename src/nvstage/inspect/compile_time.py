"""Where compile time goes: nvcc's ``-fdevice-time-trace`` files read and summed, per unit and
across a build, in the manner of ClangBuildAnalyzer for clang's ``-ftime-trace``.

A trace is a Chrome trace nvcc writes per unit (seen, CUDA 13.5): one process per tool, named
by ``process_name`` metadata (``gcc (preprocessing 4)``, ``cudafe++``, ``cicc``, ``ptxas``,
``fatbinary``, ``gcc (compiling)``), each tool's thread named ``FILE [ARCH]``. cudafe++ and
the host compiler have one span each (their total); cicc and ptxas write their insides:

- the front end (``CUDA C++ Front-End``) holds ``Processing Header File`` (``args.detail``
  the header's path; nested, so a header's span includes the headers it includes),
  ``Instantiating Template Function``/``Class`` (``name [name<args>]``), ``Scanning
  Function Body``;
- NVVM, per function (mangled): ``Generating Function IR``, ``OptFunction``;
- ptxas: ``Optimizing compilation unit`` per entry (``args.name``, mangled).

With several archs cicc and ptxas run once per arch: a header's cost is counted once per arch
pass, and the passes are said beside it. Traces are documents: bounded in size and events,
never trusted (a name is a string cut to ``MAX_NAME``; a number that is not one is no event).
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from nvstage import fsio
from nvstage.errors import ArtifactError, InputTooLarge, NvstageError
from nvstage.files import read_regular
from nvstage.compiler.buildlog.log import current, find, load_build_log
from nvstage.compiler.nvcc.time_trace import TRACES
from nvstage.compiler.nvcc.trace_summary import (  # noqa: F401 (this module's names too)
    FRONT_END,
    HEADER,
    MAX_NAME,
    NVVM_FUNCTION,
    PTXAS_FUNCTION,
    TEMPLATES,
    TOTAL_ONLY,
    Cost,
    HeaderCost,
    TraceSums,
    UnitTime,
    add_summary,
    add_unit,
)
from nvstage.documents import parse_json_text

# The most one trace may hold. kernels/templates.cu gives 1,631 events in 240 KB; a unit using
# cub::DeviceReduce and thrust::sort 23,543 events in 52 MB (its templates' arguments), read in
# 3 s and 140 MB here. Past these a trace is refused before it is parsed.
MAX_TRACE_BYTES = 256 << 20
MAX_EVENTS = 2_000_000
# The most trace files one summary reads (a folder of a whole build's traces).
MAX_TRACES = 20_000


@dataclass
class CompileTime(TraceSums):
    """The summary of one or more traces: ``TraceSums`` with its tables and advice."""

    notes: list[str] = field(default_factory=list)  # what was left out, and why

    def to_json(self, top: int | None = None, names: dict[str, str] | None = None) -> dict:
        names = names or {}

        def costs(d: dict[str, Cost], demangle: bool = False) -> list[dict]:
            rows = sorted(d.items(), key=lambda kv: (-kv[1].seconds, kv[0]))[:top]
            return [{"name": k, **({"demangled": names.get(k, k)} if demangle else {}),
                     "seconds": c.seconds, "count": c.count} for k, c in rows]

        heads = sorted(self.headers.items(), key=lambda kv: (-kv[1].inclusive, kv[0]))[:top]
        units = sorted(self.units, key=lambda u: (-u.front_end, u.unit))[:top]
        return {
            "schema": "nvstage.compile-time/1",
            "traces": len(self.units), "arch_passes": self.passes,
            "from_summaries": sum(1 for u in self.units if u.from_summary),
            "work": self.work(),
            "tools": {k: {"seconds": c.seconds, "count": c.count}
                      for k, c in sorted(self.tools.items(), key=lambda kv: -kv[1].seconds)},
            "units": [{"unit": u.unit, "trace": u.path,
                       "from": "summary" if u.from_summary else "trace", "archs": u.archs,
                       "front_end_seconds": u.front_end, "tools": u.tools, "work": u.work,
                       "wall_seconds": u.wall, "events": u.events} for u in units],
            "headers": [{"path": k, **h.to_json()} for k, h in heads],
            "template_sets": costs(self.template_sets),
            "templates": costs(self.templates),
            "functions_nvvm": costs(self.nvvm, True),
            "functions_ptxas": costs(self.ptxas, True),
            "advice": [a.to_json() for a in advice(self)],
            "skipped": self.skipped,
            "notes": self.notes,
        }


def read_trace(path: str | os.PathLike) -> tuple[dict, list[dict]]:
    """(otherData, events) of a trace file: one ``ArtifactError`` line for anything else."""
    try:
        raw = read_regular(path, limit=MAX_TRACE_BYTES, limit_name="MAX_TRACE_BYTES",
                           what="nvcc time trace")
    except InputTooLarge as e:
        raise ArtifactError(e.message, hint="raise -fdevice-time-trace-granularity to drop "
                                            "short events") from None
    except NvstageError as e:
        raise ArtifactError(e.message, hint=e.hint) from None
    text = raw.decode("utf-8", errors="replace")
    doc = parse_json_text(text, f"{path} is not an nvcc time trace")
    if isinstance(doc, list):  # Chrome's other form: the events alone
        doc = {"traceEvents": doc}
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise ArtifactError(f"{path} is not an nvcc time trace: no traceEvents list")
    if len(events) > MAX_EVENTS:
        raise ArtifactError(f"{path} holds {len(events):,} trace events: more than the "
                            f"{MAX_EVENTS:,} nvstage reads (MAX_EVENTS)",
                            hint="raise -fdevice-time-trace-granularity to drop short events")
    other = doc.get("otherData")
    return other if isinstance(other, dict) else {}, events


def trace_paths(path) -> list:
    """Where a path's traces are: the path (a trace, or a folder of them), and for a build
    folder its build log's ``traces/`` (NVSTAGE_TIME_TRACE=1's, in a hidden folder)."""
    record = find(path)
    own = record / TRACES if record is not None else None
    return [path, own] if own is not None and own.is_dir() else [path]


def summarize(paths, *, into: CompileTime | None = None, leave=frozenset()) -> CompileTime:
    """The summary of trace files (or folders of them, read recursively: every ``*.json``
    that is an nvcc trace; others are listed in ``skipped``), but the files in ``leave``."""
    out = into or CompileTime()
    for path in _trace_files(paths, out):
        if path.resolve() in leave:
            continue
        other, events = read_trace(path)
        add_unit(out, str(path), other, events)
    return out


def summarize_path(path) -> CompileTime:
    """What ``show``, ``diff`` and ``check`` read at ``path`` (``--time``): its traces
    (``trace_paths``) and, for a build folder, its build log's project view: a unit whose
    latest entry was traced but whose trace is gone, was replaced since (nvstage's own), or
    lies outside the folders read (a user's ``-fdevice-time-trace /elsewhere/t.json``) counts
    by the summary its entry keeps (``trace_summary``: its top rows, its work whole), and a
    replaced file is not read. A user's trace rewritten since (by a build outside nvstage) is
    newer than the entry: it is read as it is. No file an entry names is read but those the
    folders read hold."""
    record = find(path)
    out = CompileTime()
    leave: set[Path] = set()
    paths = trace_paths(path)
    if record is not None:
        roots = [Path(p).resolve() for p in paths]
        latest, _ = current(load_build_log(record).entries)
        for e in latest:
            f = e.trace_file
            if f is None:
                continue
            file = f.where(record, e.cwd)
            walked = any(file.resolve().is_relative_to(r) for r in roots)
            if walked and (_intact(file, f) or not f.in_log and file.exists()):
                continue  # read with the rest
            if walked:
                leave.add(file.resolve())
            try:
                summary = e.time_summary()
            except ArtifactError as err:
                out.notes.append(f"{err.message}: the unit left out")
                continue
            if summary is not None:
                add_summary(out, summary, str(record / "tu" / e.file))
    return summarize(paths, into=out, leave=leave)


def _intact(file: Path, f) -> bool:
    """``file`` is the trace an entry names as it was written (``TraceFile``: size, CRC-32):
    a regular file, never a link."""
    try:
        data = fsio.read_bounded(file, MAX_TRACE_BYTES)
    except OSError:
        return False
    return len(data) == f.size and zlib.crc32(data) == f.crc32


def _trace_files(paths, out: CompileTime) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            for f in sorted(p.rglob("*.json")):
                if any(part.startswith(".") or part.startswith("CompilerId")
                       for part in f.relative_to(p).parts[:-1]):
                    continue  # .nvstage-build's entries, .git; CMake's compiler probe
                if f.is_file() and not f.is_symlink():
                    if _looks_like_trace(f):
                        files.append(f)
                    else:
                        out.skipped.append(str(f))
                if len(files) > MAX_TRACES:
                    raise ArtifactError(f"{p} holds more than {MAX_TRACES:,} trace files "
                                        "(MAX_TRACES)", hint="give a folder of fewer units")
        else:
            files.append(p)
    seen: set[Path] = set()  # a file met twice (PATH was the build log's own folder) once
    return [f for f in files if not ((r := f.resolve()) in seen or seen.add(r))]


def _looks_like_trace(path: Path) -> bool:
    """A .json file whose start is an nvcc trace's (``otherData`` with ``inputFiles``, or a
    ``traceEvents`` list): a build folder also holds compile_commands.json and the like."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return b'"traceEvents"' in head or b'"inputFiles"' in head



# -- advice: each rule with the figures it rests on ----------------------------------------

# A header "most units parse" (rule 1): at least this share of the units, and two of them.
MOST_UNITS = 0.5
# A share of the front end's time past which a header or template set is worth acting on.
SHARE = 0.2
# One function's share of NVVM's (or ptxas's) time past which it is named (rule 4).
ONE_FUNCTION = 0.5


@dataclass(frozen=True)
class Advice:
    rule: str  # shared-header, template-set, serial-archs, one-function
    subject: str
    evidence: str
    suggestion: str

    def to_json(self) -> dict:
        return {"rule": self.rule, "subject": self.subject, "evidence": self.evidence,
                "suggestion": self.suggestion}


def advice(s: CompileTime) -> list[Advice]:
    """What the summary suggests, each with its evidence (the rules are the constants above):

    - shared-header: a header most units parse (MOST_UNITS), costing more than SHARE of the
      front end: a precompiled or forward-declared interface would spare the parses;
    - template-set: a template set costing more than SHARE of the front end: instantiate it
      explicitly in one unit (``extern template`` in the others);
    - serial-archs: a unit whose device code is compiled for several archs one after another
      (no ``--threads``): ``--threads N`` (or ``--split-compile``) runs them at once;
    - one-function: one device function taking more than ONE_FUNCTION of NVVM's or ptxas's
      time (of at least 0.1 s): split it, or look at its inlining and unrolling."""
    out: list[Advice] = []
    front = sum(u.front_end for u in s.units) or 0.0
    units = len({u.path for u in s.units if u.archs})
    if front > 0:
        named: set[str] = set()
        for path, h in sorted(s.headers.items(), key=lambda kv: -kv[1].inclusive)[:3]:
            n = len(h.units)
            if named & set(h.chain[:-1]):
                continue  # inside a header already named: that one is the interface
            if n >= 2 and n >= MOST_UNITS * units and h.inclusive > SHARE * front:
                named.add(path)
                out.append(Advice(
                    "shared-header", path,
                    f"parsed by {n} of {units} units ({h.count} parses), "
                    f"{h.inclusive:.2f} s inclusive: {h.inclusive / front:.0%} of the front end",
                    "a precompiled or forward-declared interface would spare most parses"))
        for name, c in sorted(s.template_sets.items(), key=lambda kv: -kv[1].seconds)[:3]:
            if c.seconds > SHARE * front:
                out.append(Advice(
                    "template-set", name,
                    f"{c.count} instantiations, {c.seconds:.2f} s: "
                    f"{c.seconds / front:.0%} of the front end",
                    "instantiate it explicitly in one unit (extern template in the others)"))
    serial = sorted((u for u in s.units if len(u.archs) >= 2 and u.threads in (-1, 0, 1)),
                    key=lambda u: -(u.tools.get("cicc", 0.0) + u.tools.get("ptxas", 0.0)))
    if serial:
        shown = ", ".join(f"{u.unit} ({len(u.archs)} archs, cicc and ptxas "
                          f"{u.tools.get('cicc', 0.0) + u.tools.get('ptxas', 0.0):.2f} s)"
                          for u in serial[:3])
        out.append(Advice(
            "serial-archs", serial[0].unit if len(serial) == 1 else f"{len(serial)} units",
            f"device code compiled for each arch one after another: {shown}"
            + (", ..." if len(serial) > 3 else ""),
            "nvcc --threads N (or --split-compile N) compiles the archs at once"))
    for tool, d in (("NVVM", s.nvvm), ("ptxas", s.ptxas)):
        total = sum(c.seconds for c in d.values())
        if d and total >= 0.1:
            name, c = max(d.items(), key=lambda kv: kv[1].seconds)
            if c.seconds > ONE_FUNCTION * total:
                out.append(Advice(
                    "one-function", name,
                    f"{c.seconds:.2f} s of {tool}'s {total:.2f} s ({c.seconds / total:.0%})",
                    "split it, or look at what is inlined and unrolled into it"))
    return out
