"""An nvcc time trace's events summed (the one place they are: ``inspect.compile_time`` reads
the files and sums a build's, the driver sums the unit it just traced), and the bounded summary
of one unit a build log entry keeps, so that a unit whose raw trace is gone or was replaced
still has its figures.

What the events mean is told in ``inspect/compile_time.py``. The summary is a document like
any other: written bounded (``TOP_ROWS`` rows per table, names cut to ``SUMMARY_NAME``), read
back strictly (``read_summary``: one ``ArtifactError`` line for anything else).
"""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass, field
from pathlib import Path

from nvstage.errors import ArtifactError

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
    from_summary: bool = False  # read from a build log entry's summary, not a trace
    # Work figures, which do not depend on the machine: headers parsed, instantiations,
    # device functions through NVVM (each counted once per arch pass).
    work: dict = field(default_factory=lambda: {"headers": 0, "instantiations": 0,
                                                "functions": 0})



@dataclass
class TraceSums:
    """Traces' events summed: per header, template, template set, device function and tool
    (``inspect.compile_time.CompileTime`` adds the views and the advice)."""

    units: list[UnitTime] = field(default_factory=list)
    headers: dict[str, HeaderCost] = field(default_factory=dict)
    templates: dict[str, Cost] = field(default_factory=dict)  # name with arguments
    template_sets: dict[str, Cost] = field(default_factory=dict)  # name without
    set_units: dict[str, dict[str, float]] = field(default_factory=dict)  # set -> unit -> s
    nvvm: dict[str, Cost] = field(default_factory=dict)  # mangled -> NVVM's time
    ptxas: dict[str, Cost] = field(default_factory=dict)  # mangled -> ptxas's time
    tools: dict[str, Cost] = field(default_factory=dict)  # tool -> total over units
    skipped: list[str] = field(default_factory=list)  # files in a folder that were no trace
    # Work that units read from a summary did beyond the rows it keeps (its top rows are in
    # the tables above): added to ``work()``'s figures, which stay whole. Distinct headers
    # cannot be summed (units share them): the most any such unit parsed, a floor.
    beyond: dict[str, int] = field(default_factory=dict)

    @property
    def passes(self) -> int:
        """cicc's passes: one per arch of each unit (a device link's trace has none)."""
        return sum(len(u.archs) for u in self.units)

    def costliest_unit(self, template_set: str) -> str | None:
        """The unit whose instantiations of ``template_set`` took longest."""
        units = self.set_units.get(template_set)
        return max(units, key=units.__getitem__) if units else None

    def work(self) -> dict:
        """Figures that do not depend on the machine: what was done, not how fast."""
        more = self.beyond.get
        return {"headers_parsed": sum(h.count for h in self.headers.values())
                + more("headers_parsed", 0),
                "distinct_headers": max(len(self.headers), more("distinct_headers", 0)),
                "instantiations": sum(c.count for c in self.templates.values())
                + more("instantiations", 0),
                "functions_optimised": sum(c.count for c in self.nvvm.values())
                + more("functions_optimised", 0),
                "entries_assembled": sum(c.count for c in self.ptxas.values())
                + more("entries_assembled", 0)}


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

def add_unit(out: TraceSums, path: str, other: dict, raw_events: list) -> UnitTime:
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


def _add_thread(out: TraceSums, unit: UnitTime, tool: str, evs: list[_Event]) -> None:
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



# -- one unit's summary, kept in its build log entry -----------------------------------------

SUMMARY_SCHEMA = "nvstage.unit-time/1"
# What a summary keeps: the top rows of each table, names cut, a chain's first headers. A real
# one is 3 to 6 KB (kernels/templates.cu: 4 KB); at these bounds about 40 KB at most.
TOP_ROWS = 10
SUMMARY_NAME = 512
MAX_CHAIN = 16
MAX_TOOLS = 32
MAX_ARCHS = 32
_WORK = ("headers", "distinct_headers", "instantiations", "functions", "entries")
_TABLES = ("template_sets", "templates", "functions_nvvm", "functions_ptxas")


def unit_summary(doc: dict, path: str) -> dict:
    """The bounded summary of one unit's merged trace (``time_trace.Tracer.merged``'s
    document): its figures, its work whole, the top ``TOP_ROWS`` of each table."""
    sums = TraceSums()
    other = doc.get("otherData") if isinstance(doc.get("otherData"), dict) else {}
    events = doc.get("traceEvents") if isinstance(doc.get("traceEvents"), list) else []
    unit = add_unit(sums, path, other, events)

    def cut(name: str) -> str:
        return name[:SUMMARY_NAME]

    def rows(d: dict[str, Cost]) -> list[dict]:
        top = sorted(d.items(), key=lambda kv: (-kv[1].seconds, kv[0]))[:TOP_ROWS]
        return [{"name": cut(k), "seconds": round(c.seconds, 6), "count": c.count}
                for k, c in top]

    heads = sorted(sums.headers.items(), key=lambda kv: (-kv[1].inclusive, kv[0]))[:TOP_ROWS]
    work = sums.work()
    return {
        "schema": SUMMARY_SCHEMA, "unit": cut(unit.unit), "archs": unit.archs[:MAX_ARCHS],
        "front_end_seconds": round(unit.front_end, 6), "wall_seconds": round(unit.wall, 6),
        "events": unit.events, "threads": unit.threads if -1 <= unit.threads < 2**31 else -1,
        "tools": {cut(k)[:64]: round(v, 6) for k, v in list(unit.tools.items())[:MAX_TOOLS]},
        "work": {"headers": work["headers_parsed"], "distinct_headers": work["distinct_headers"],
                 "instantiations": work["instantiations"],
                 "functions": work["functions_optimised"], "entries": work["entries_assembled"]},
        "headers": [{"path": cut(k), "inclusive_seconds": round(h.inclusive, 6),
                     "exclusive_seconds": round(h.exclusive, 6), "parses": h.count,
                     "instantiations": h.instantiations,
                     "chain": [cut(c) for c in h.chain[:MAX_CHAIN]]} for k, h in heads],
        "template_sets": rows(sums.template_sets), "templates": rows(sums.templates),
        "functions_nvvm": rows(sums.nvvm), "functions_ptxas": rows(sums.ptxas),
    }


def read_summary(d, where: str) -> dict:
    """A summary read back (an entry is anyone's file): the document when every field is of
    its kind and within its bound, else one ``ArtifactError`` line naming the first that is
    not. The work done is bounded by the bounds themselves."""

    def bad(what: str):
        return ArtifactError(f"{where}: the time summary's {what}")

    def text(v, what: str, limit: int = SUMMARY_NAME) -> str:
        if not isinstance(v, str) or len(v) > limit or "\0" in v:
            raise bad(f"{what} must be a string of at most {limit} characters")
        return v

    def seconds(v, what: str) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or \
                not (0 <= v < 1e7 and math.isfinite(v)):
            raise bad(f"{what} must be a number of seconds from 0 to 1e7")
        return float(v)

    def whole(v, what: str, low: int = 0) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not low <= v < 2**53:
            raise bad(f"{what} must be a whole number from {low}")
        return v

    def listed(v, what: str, limit: int) -> list:
        if not isinstance(v, list) or len(v) > limit:
            raise bad(f"{what} must be a list of at most {limit} items")
        return v

    def obj(v, what: str) -> dict:
        if not isinstance(v, dict):
            raise bad(f"{what} must be an object")
        return v

    d = obj(d, "document")
    if d.get("schema") != SUMMARY_SCHEMA:
        raise bad(f"schema must be {SUMMARY_SCHEMA}")
    tools = obj(d.get("tools"), "tools")
    if len(tools) > MAX_TOOLS:
        raise bad(f"tools must be at most {MAX_TOOLS}")
    work = obj(d.get("work"), "work")
    out = {
        "schema": SUMMARY_SCHEMA, "unit": text(d.get("unit"), "unit"),
        "archs": [text(a, "archs", 64) for a in listed(d.get("archs"), "archs", MAX_ARCHS)],
        "front_end_seconds": seconds(d.get("front_end_seconds"), "front_end_seconds"),
        "wall_seconds": seconds(d.get("wall_seconds"), "wall_seconds"),
        "events": whole(d.get("events"), "events"),
        "threads": whole(d.get("threads"), "threads", -1),
        "tools": {text(k, "tool", 64): seconds(v, "tool's seconds") for k, v in tools.items()},
        "work": {k: whole(work.get(k), f"work.{k}") for k in _WORK},
        "headers": [],
    }
    for h in listed(d.get("headers"), "headers", TOP_ROWS):
        h = obj(h, "header")
        out["headers"].append({
            "path": text(h.get("path"), "header's path"),
            "inclusive_seconds": seconds(h.get("inclusive_seconds"), "inclusive_seconds"),
            "exclusive_seconds": seconds(h.get("exclusive_seconds"), "exclusive_seconds"),
            "parses": whole(h.get("parses"), "parses"),
            "instantiations": whole(h.get("instantiations"), "instantiations"),
            "chain": [text(c, "chain") for c in listed(h.get("chain"), "chain", MAX_CHAIN)]})
    for key in _TABLES:
        out[key] = [{"name": text(obj(r, key).get("name"), f"{key} name"),
                     "seconds": seconds(r.get("seconds"), f"{key} seconds"),
                     "count": whole(r.get("count"), f"{key} count")}
                    for r in listed(d.get(key), key, TOP_ROWS)]
    return out


def add_summary(out: TraceSums, s: dict, path: str) -> UnitTime:
    """Add one unit's summary (``read_summary``'s) to ``out`` as ``add_unit`` adds a trace:
    its top rows into the tables, the rest of its work into ``out.beyond`` (so the work
    figures stay whole; distinct headers are then at least what was counted)."""
    unit = UnitTime(path=path, unit=s["unit"], archs=list(s["archs"]),
                    tools=dict(s["tools"]), front_end=s["front_end_seconds"],
                    wall=s["wall_seconds"], events=s["events"], threads=s["threads"],
                    from_summary=True)
    w = s["work"]
    unit.work = {"headers": w["headers"], "instantiations": w["instantiations"],
                 "functions": w["functions"]}
    for r in s["headers"]:
        h = out.headers.setdefault(r["path"], HeaderCost())
        h.inclusive += r["inclusive_seconds"]
        h.exclusive += r["exclusive_seconds"]
        h.count += r["parses"]
        h.instantiations += r["instantiations"]
        h.units.add(path)
        worst = r["inclusive_seconds"] * 1e6 / max(1, r["parses"])
        if worst > h.worst:
            h.worst, h.chain = worst, tuple(r["chain"])
    for key, table in (("template_sets", out.template_sets), ("templates", out.templates),
                       ("functions_nvvm", out.nvvm), ("functions_ptxas", out.ptxas)):
        for r in s[key]:
            table.setdefault(r["name"], Cost()).add(r["seconds"], r["count"])
            if key == "template_sets":
                by_unit = out.set_units.setdefault(r["name"], {})
                by_unit[unit.unit] = by_unit.get(unit.unit, 0.0) + r["seconds"]
    out.beyond["distinct_headers"] = max(out.beyond.get("distinct_headers", 0),
                                         w["distinct_headers"])
    more = {"headers_parsed": w["headers"] - sum(r["parses"] for r in s["headers"]),
            "instantiations": w["instantiations"] - sum(r["count"] for r in s["templates"]),
            "functions_optimised": w["functions"] - sum(r["count"] for r in s["functions_nvvm"]),
            "entries_assembled": w["entries"] - sum(r["count"] for r in s["functions_ptxas"])}
    for k, v in more.items():
        out.beyond[k] = out.beyond.get(k, 0) + max(0, v)
    for tool, seconds in unit.tools.items():
        out.tools.setdefault(tool, Cost()).add(seconds)
    out.units.append(unit)
    return unit
