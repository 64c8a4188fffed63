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

import math
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from nvstage.errors import ArtifactError, InputTooLarge, NvstageError
from nvstage.files import read_regular
from nvstage.compiler.buildlog.log import find
from nvstage.compiler.nvcc.time_trace import TRACES
from nvstage.documents import parse_json_text

# The most one trace may hold. kernels/templates.cu gives 1,631 events in 240 KB; a unit using
# cub::DeviceReduce and thrust::sort 23,543 events in 52 MB (its templates' arguments), read in
# 3 s and 140 MB here. Past these a trace is refused before it is parsed.
MAX_TRACE_BYTES = 256 << 20
MAX_EVENTS = 2_000_000
# The most trace files one summary reads (a folder of a whole build's traces).
MAX_TRACES = 20_000
# Characters kept of a header path, template or function name: a CUB instantiation's
# arguments run past it (names sharing their first MAX_NAME characters are then one row).
MAX_NAME = 2000

HEADER = "Processing Header File"
FRONT_END = "CUDA C++ Front-End"
TEMPLATES = ("Instantiating Template Function", "Instantiating Template Class")
NVVM_FUNCTION = ("Generating Function IR", "OptFunction")
PTXAS_FUNCTION = "Optimizing compilation unit"
# Tools whose work the trace shows only as a total.
TOTAL_ONLY = ("gcc (preprocessing 4)", "gcc (preprocessing 1)", "cudafe++", "fatbinary",
              "gcc (compiling)")


@dataclass
class Cost:
    """Time (seconds) and how many events made it."""

    seconds: float = 0.0
    count: int = 0

    def add(self, seconds: float, count: int = 1) -> None:
        self.seconds += seconds
        self.count += count


@dataclass
class HeaderCost:
    """A header's parse time: inclusive (with what it includes), exclusive (itself), how many
    times it was parsed (each arch pass of each unit parses it again), by how many units, and
    the include chain of its costliest parse (outermost first, the unit's source at the top)."""

    inclusive: float = 0.0
    exclusive: float = 0.0
    count: int = 0
    units: set = field(default_factory=set)
    chain: tuple[str, ...] = ()
    worst: float = -1.0
    instantiations: int = 0  # made while it (or a header it includes) was parsed

    def to_json(self) -> dict:
        return {"inclusive_seconds": self.inclusive, "exclusive_seconds": self.exclusive,
                "parses": self.count, "instantiations": self.instantiations,
                "units": len(self.units), "chain": list(self.chain)}


@dataclass
class UnitTime:
    """One trace: one unit's compile."""

    path: str  # the trace file
    unit: str  # its source (otherData.inputFiles), else the trace's name
    archs: list[str] = field(default_factory=list)  # cicc passes' archs
    tools: dict[str, float] = field(default_factory=dict)  # tool -> seconds
    front_end: float = 0.0  # cicc's front end, summed over arch passes
    wall: float = 0.0  # first event to last
    events: int = 0
    threads: int = -1  # nvcc's --threads (otherData.numThreads; -1: not given)
    # Work figures, which do not depend on the machine: headers parsed, instantiations,
    # device functions through NVVM (each counted once per arch pass).
    work: dict = field(default_factory=lambda: {"headers": 0, "instantiations": 0,
                                                "functions": 0})


@dataclass
class CompileTime:
    """The summary of one or more traces."""

    units: list[UnitTime] = field(default_factory=list)
    headers: dict[str, HeaderCost] = field(default_factory=dict)
    templates: dict[str, Cost] = field(default_factory=dict)  # name with arguments
    template_sets: dict[str, Cost] = field(default_factory=dict)  # name without
    set_units: dict[str, dict[str, float]] = field(default_factory=dict)  # set -> unit -> s
    nvvm: dict[str, Cost] = field(default_factory=dict)  # mangled -> NVVM's time
    ptxas: dict[str, Cost] = field(default_factory=dict)  # mangled -> ptxas's time
    tools: dict[str, Cost] = field(default_factory=dict)  # tool -> total over units
    skipped: list[str] = field(default_factory=list)  # files in a folder that were no trace

    @property
    def passes(self) -> int:
        """cicc's passes: one per arch of each unit (a device link's trace has none)."""
        return sum(len(u.archs) for u in self.units)

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
            "work": self.work(),
            "tools": {k: {"seconds": c.seconds, "count": c.count}
                      for k, c in sorted(self.tools.items(), key=lambda kv: -kv[1].seconds)},
            "units": [{"unit": u.unit, "trace": u.path, "archs": u.archs,
                       "front_end_seconds": u.front_end, "tools": u.tools, "work": u.work,
                       "wall_seconds": u.wall, "events": u.events} for u in units],
            "headers": [{"path": k, **h.to_json()} for k, h in heads],
            "template_sets": costs(self.template_sets),
            "templates": costs(self.templates),
            "functions_nvvm": costs(self.nvvm, True),
            "functions_ptxas": costs(self.ptxas, True),
            "advice": [a.to_json() for a in advice(self)],
            "skipped": self.skipped,
        }

    def costliest_unit(self, template_set: str) -> str | None:
        """The unit whose instantiations of ``template_set`` took longest."""
        units = self.set_units.get(template_set)
        return max(units, key=units.__getitem__) if units else None

    def work(self) -> dict:
        """Figures that do not depend on the machine: what was done, not how fast."""
        return {"headers_parsed": sum(h.count for h in self.headers.values()),
                "distinct_headers": len(self.headers),
                "instantiations": sum(c.count for c in self.templates.values()),
                "functions_optimised": sum(c.count for c in self.nvvm.values()),
                "entries_assembled": sum(c.count for c in self.ptxas.values())}


def _num(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) and 0 <= v < 1e15 else None


def _text(v) -> str | None:
    return v[:MAX_NAME] if isinstance(v, str) else None


@dataclass
class _Event:
    name: str
    ts: float  # microseconds
    dur: float
    detail: str
    parent: int = -1  # index of the innermost event it lies in, on its thread
    header: int = -1  # index of the innermost header it lies in


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


def summarize(paths, *, into: CompileTime | None = None) -> CompileTime:
    """The summary of trace files (or folders of them, read recursively: every ``*.json``
    that is an nvcc trace; others are listed in ``skipped``)."""
    out = into or CompileTime()
    for path in _trace_files(paths, out):
        other, events = read_trace(path)
        add_unit(out, str(path), other, events)
    return out


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
    return files


def _looks_like_trace(path: Path) -> bool:
    """A .json file whose start is an nvcc trace's (``otherData`` with ``inputFiles``, or a
    ``traceEvents`` list): a build folder also holds compile_commands.json and the like."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return b'"traceEvents"' in head or b'"inputFiles"' in head


def add_unit(out: CompileTime, path: str, other: dict, raw_events: list) -> UnitTime:
    """Add one trace's events to ``out``; returns the unit's own figures."""
    inputs = other.get("inputFiles") if isinstance(other, dict) else None
    # One input: the unit's source. Several (a device link's objects): the trace's own name.
    unit_name = _text(inputs[0]) if isinstance(inputs, list) and len(inputs) == 1 else None
    unit = UnitTime(path=path, unit=unit_name or Path(path).name.removesuffix(".json"))
    threads = other.get("numThreads")
    unit.threads = threads if isinstance(threads, int) and not isinstance(threads, bool) else -1
    tools: dict[int, str] = {}  # pid -> process name
    arch_of: dict[int, str] = {}  # pid -> the arch its thread names
    threads: dict[tuple, list[_Event]] = {}
    first, last = math.inf, 0.0
    for e in raw_events:
        if not isinstance(e, dict):
            continue
        ph, pid = e.get("ph"), e.get("pid")
        pid = pid if isinstance(pid, int) and not isinstance(pid, bool) else -1
        args = e.get("args") if isinstance(e.get("args"), dict) else {}
        if ph == "M":
            name = _text(args.get("name"))
            if e.get("name") == "process_name" and name:
                tools[pid] = name
            elif e.get("name") == "thread_name" and name and name.endswith("]") and " [" in name:
                arch_of[pid] = name[name.rindex(" [") + 2:-1]
            continue
        if ph != "X":
            continue
        name, ts, dur = _text(e.get("name")), _num(e.get("ts")), _num(e.get("dur"))
        if name is None or ts is None or dur is None:
            continue
        detail = _text(args.get("detail")) or _text(args.get("name")) or ""
        tid = e.get("tid") if isinstance(e.get("tid"), (int, str)) else 0
        threads.setdefault((pid, tid), []).append(_Event(name, ts, dur, detail))
        unit.events += 1
        first, last = min(first, ts), max(last, ts + dur)
    unit.wall = (last - first) / 1e6 if unit.events else 0.0
    for (pid, _), evs in threads.items():
        tool = tools.get(pid, f"pid {pid}")
        _nest(evs)
        _add_thread(out, unit, tool, evs)
        if tool == "cicc" or any(e.name == FRONT_END for e in evs):
            arch = arch_of.get(pid)
            if arch and arch not in unit.archs:
                unit.archs.append(arch)
    for tool, seconds in unit.tools.items():
        out.tools.setdefault(tool, Cost()).add(seconds)
    out.units.append(unit)
    return unit


def _nest(evs: list[_Event]) -> None:
    """Each event's parent on its thread: the innermost event that starts before it and ends
    after it. Events that overlap without nesting (a hostile or broken trace) are siblings."""
    evs.sort(key=lambda e: (e.ts, -e.dur))
    stack: list[int] = []
    for i, e in enumerate(evs):
        while stack and evs[stack[-1]].ts + evs[stack[-1]].dur < e.ts + e.dur:
            stack.pop()  # ended before this one ends: not its parent
        if stack:
            e.parent = stack[-1]
            p = evs[e.parent]
            e.header = e.parent if p.name == HEADER else p.header
        stack.append(i)


def _add_thread(out: CompileTime, unit: UnitTime, tool: str, evs: list[_Event]) -> None:
    top = sum(e.dur for e in evs if e.parent < 0) / 1e6
    unit.tools[tool] = unit.tools.get(tool, 0.0) + top
    child_headers = [0.0] * len(evs)  # a header's nested headers' time
    inside = [0] * len(evs)  # instantiations made inside a header (its nested ones too)
    seen: set[tuple[str, str]] = set()  # functions met on this thread (one arch pass)
    for e in evs:
        if e.name == HEADER and e.header >= 0:
            child_headers[e.header] += e.dur
        elif e.name in TEMPLATES:
            h, depth = e.header, 0
            while h >= 0 and depth < 256:
                inside[h] += 1
                h, depth = evs[h].header, depth + 1
    for i, e in enumerate(evs):
        if e.name == HEADER and e.detail:
            h = out.headers.setdefault(_path(e.detail), HeaderCost())
            h.inclusive += e.dur / 1e6
            h.exclusive += max(0.0, e.dur - child_headers[i]) / 1e6
            h.count += 1
            h.instantiations += inside[i]
            h.units.add(unit.path)
            unit.work["headers"] += 1
            if e.dur > h.worst:
                h.worst = e.dur
                h.chain = (unit.unit, *_chain(evs, i))
        elif e.name == FRONT_END:
            unit.front_end += e.dur / 1e6
        elif e.name in TEMPLATES:
            full, tset = _template(e.detail)
            out.templates.setdefault(full, Cost()).add(e.dur / 1e6)
            unit.work["instantiations"] += 1
            out.template_sets.setdefault(tset, Cost()).add(e.dur / 1e6)
            by_unit = out.set_units.setdefault(tset, {})
            by_unit[unit.unit] = by_unit.get(unit.unit, 0.0) + e.dur / 1e6
        elif e.name in NVVM_FUNCTION and e.detail:
            # OptFunction comes once per NVVM pass over the function: a function counts once
            # per arch pass (a granularity may have dropped any one of its events).
            first = _first(seen, "n", e.detail)
            out.nvvm.setdefault(e.detail, Cost()).add(e.dur / 1e6, first)
            unit.work["functions"] += first
        elif e.name == PTXAS_FUNCTION and e.detail:
            out.ptxas.setdefault(e.detail, Cost()).add(e.dur / 1e6, _first(seen, "p", e.detail))


def _path(detail: str) -> str:
    """A header's path as cicc gives it, ``..`` folded (nvcc's include folder is
    ``.../bin/../include``); a name, never a file read."""
    return posixpath.normpath(detail) if detail.startswith("/") else detail


def _first(seen: set, kind: str, name: str) -> int:
    """1 the first time ``name`` is met in this pass, then 0."""
    if (kind, name) in seen:
        return 0
    seen.add((kind, name))
    return 1


def _chain(evs: list[_Event], i: int) -> list[str]:
    out = []
    while i >= 0 and len(out) < 256:
        out.append(_path(evs[i].detail))
        i = evs[i].header
    return out[::-1]


def _template(detail: str) -> tuple[str, str]:
    """``name [name<args>]`` -> (``name<args>``, ``name``): cicc's spelling of an
    instantiation; anything else is its own set."""
    head, bracket, rest = detail.partition(" [")
    if bracket:  # a name past MAX_NAME has lost its closing "]"
        return rest[:-1] if rest.endswith("]") else rest, head
    return detail, detail.split("<", 1)[0]


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
