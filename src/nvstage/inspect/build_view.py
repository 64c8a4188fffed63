"""The whole build, from its build record: every translation unit (and every other step: C++
compiles, device links, links, archives) with its stages and times, the totals per stage kind,
cache hits, and every kernel the build compiled with its resources and occupancy. What
``nvstage report BUILD``, ``check BUILD`` and ``show BUILD --kernel`` read; pure data, no
rendering.

A build run with nvstage as its compiler launcher leaves one entry per command
(``compiler.buildlog``), and the record holds the last few runs of the build tool (its
``builds``). The view keeps the latest entry of each unit: what the project now is, whose
kernels are shown and checked (an older entry of a unit built again since is counted, not
shown). Every headline figure (wall time, parallelism, hits, the slowest steps, the timeline)
is the last build's (``last_units``); the entries of units the last build rebuilt, as the
build before it left them, are kept apart (``earlier``) to say what it changed.
Everything comes from what the entries recorded: stage times, cache flags, and the resource
lines ptxas printed (nvstage always asks for them), so no file is read but the entries and
no tool runs. The intermediate files the manifests name lived in temporary folders and are
gone; nothing here needs them.

Times: an entry's ``started`` is the Unix time its command began (every process shares that
clock), a unit's ``start`` the seconds from the start of its build, a stage's ``started`` the
seconds from the start of its staged build. A stage is placed at the command's start plus that
offset: nvstage's own set-up before the first stage
(finding the toolkit, reading the command line) is not split out, and what follows the last
stage (writing the dependency file, remembering the command for a later cache hit) shows as
the rest of the command's time (``overhead_seconds``).
"""

from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field

from nvstage.compiler.nvcc import step_kind as steps
from nvstage.errors import ArtifactError, NvstageError, UsageError
from nvstage.inspect.kernels import KernelRecord, display_name, final_rows, matches
from nvstage.compiler.buildlog import log as buildlog
from nvstage.compiler.buildlog.log import command_text
from nvstage.compiler.manifest.model import partial_note
from nvstage.compiler.toolkit.locate import find_toolkit
from nvstage.hw.occupancy import occupancy, sweep
from nvstage.inspect.fatbin import kind_of_file
from nvstage.inspect.names import demangle_all
from nvstage.inspect.resources import stage_resources
from nvstage.inspect.view import (
    LINES,
    Shown,
    collect_build,
    collect_file,
    parse_sections,
    will_it_run,
    _attribution,
    check_gpu,
)

SCHEMA = "nvstage.build-view/1"
DEFAULT_BLOCK = 256
SLOWEST = 10  # rows of the slowest units and stages
NOTES_NAMED = 20  # notes of one kind named before the rest are counted


@dataclass(frozen=True)
class StageTime:
    """One stage of one unit, placed on the build's clock."""

    index: int
    kind: str
    arch: str | None
    start: float  # seconds since the view's start
    seconds: float
    cached: bool  # restored from the stage cache
    ran: bool  # False in a unit answered whole from the cache: these are the kept figures
    where: str | None = None  # a distributed stage's placement (compiler/dist: remote, ...)

    @property
    def label(self) -> str:
        return self.kind + (f" ({self.arch})" if self.arch else "")

    def to_json(self) -> dict:
        return {"index": self.index, "kind": self.kind, "arch": self.arch,
                "start": round(self.start, 6), "seconds": round(self.seconds, 6),
                "cached": self.cached, "ran": self.ran,
                **({} if self.where is None else {"where": self.where})}


@dataclass
class TranslationUnit:
    """One command of the build (its latest entry): an nvcc command, or another step."""

    index: int
    entry: object  # buildlog.Entry: for check and show, which read its manifest again
    source: str | None
    output: str | None
    status: str  # ok, fallback, failed, ran (a step run unchanged)
    reason: str | None  # why plain nvcc ran it, or which stage failed
    hit: bool  # answered whole from the cache
    start: float  # seconds since its build's start
    seconds: float
    pid: int
    command: str  # bounded
    stages: list[StageTime] = field(default_factory=list)
    kernels: list[KernelRecord] = field(default_factory=list)
    wall_seconds: float | None = None  # the staged build's own wall time
    plan_seconds: float | None = None
    cache: dict | None = None  # the stage cache's counters for this command
    lane: int = 0  # the timeline row: units that overlap get different rows
    notes: list[str] = field(default_factory=list)
    # The entry's manifest as read (``Entry.manifest_build``); None when it has none or a
    # damaged one, and in a view of a build record, which keeps of each manifest only what
    # it shows (the figures below, the stages, the kernels): a record at its caps holds tens
    # of thousands. A reader that needs the rest reads it again (``entry.manifest_build``).
    build: object = field(default=None, repr=False)
    kind: str = steps.CUDA_COMPILE  # compiler.steps: what kind of step
    tool: str = ""  # the program's file name
    run: int = 0  # the number of the build (buildlog.BuildRun) it ran in
    toolkit_version: str | None = None  # the manifest's toolkit's
    # (mangled kernel, arch, final) -> its SASS bytes, from the cubin figures the manifest
    # kept (None in older manifests)
    code_bytes: dict = field(default_factory=dict, repr=False)

    @property
    def name(self) -> str:
        """Short, for tables: the source's file name, else the output's, else the tool's."""
        return os.path.basename(self.source or self.output or "") or self.tool \
            or f"command {self.index}"

    @property
    def key(self) -> tuple:
        """What identifies the unit across builds (``buildlog.Entry.unit``)."""
        return self.entry.unit

    @property
    def end(self) -> float:
        return self.start + self.seconds

    @property
    def overhead_seconds(self) -> float | None:
        """The command's time beyond its staged build's wall time: nvstage's own work."""
        if self.wall_seconds is None or self.hit:
            return None
        return max(0.0, self.seconds - self.wall_seconds)

    @property
    def state(self) -> str:
        """ok, hit, fallback or failed: what a table says."""
        return "hit" if self.hit and self.status == "ok" else self.status

    def to_json(self) -> dict:
        return {"index": self.index, "kind": self.kind, "tool": self.tool, "build": self.run,
                "source": self.source, "output": self.output,
                "entry": getattr(self.entry, "file", "") or None, "status": self.status,
                "hit": self.hit, "reason": self.reason, "start": round(self.start, 6),
                "seconds": round(self.seconds, 6),
                "wall_seconds": None if self.wall_seconds is None else round(self.wall_seconds, 6),
                "overhead_seconds": None if self.overhead_seconds is None
                else round(self.overhead_seconds, 6),
                "pid": self.pid, "lane": self.lane, "command": self.command,
                "cache": self.cache, "stages": [s.to_json() for s in self.stages],
                "kernels": len(self.kernels), "notes": self.notes}


@dataclass(frozen=True)
class KernelRow:
    """One kernel on one arch, with the unit that built it and its occupancy."""

    record: KernelRecord
    unit: int  # TranslationUnit.index
    occupancy: object | None  # hw.occupancy.Occupancy at the view's block size
    best: object | None  # the best block size's Occupancy (a sweep)
    why_none: str | None = None  # why there is no occupancy

    def to_json(self, units: list[TranslationUnit]) -> dict:
        r, u = self.record, units[self.unit]
        occ = self.occupancy
        return {"kernel": r.kernel, "demangled": r.demangled, "name": r.name, "arch": r.arch,
                "unit": self.unit, "source": u.source, "output": u.output,
                "registers": r.registers, "spill_stores": r.spill_stores,
                "spill_loads": r.spill_loads, "spills": r.spills,
                "stack_frame": r.stack_frame, "shared_bytes": r.shared_bytes,
                "constant_bytes": r.constant_bytes, "barriers": r.barriers,
                "compile_ms": r.compile_ms, "final": r.final,
                "occupancy": None if occ is None else round(occ.occupancy, 4),
                "limiters": None if occ is None else list(occ.limiters),
                "best_block": None if self.best is None else self.best.block_size,
                "best_occupancy": None if self.best is None else round(self.best.occupancy, 4),
                "why_none": self.why_none}


@dataclass(frozen=True)
class KindTotals:
    """One stage kind across the build."""

    kind: str
    stages: int  # in every unit, hits included
    ran: int  # run by their tool in this build
    cached: int  # restored from the stage cache
    whole: int  # in units answered whole from the cache (not run at all)
    seconds: float  # time spent in this build (ran and cached stages)
    max_seconds: float

    @property
    def hit_rate(self) -> float | None:
        return (self.cached + self.whole) / self.stages if self.stages else None

    def to_json(self) -> dict:
        return {"kind": self.kind, "stages": self.stages, "ran": self.ran,
                "cached": self.cached, "whole_hits": self.whole,
                "seconds": round(self.seconds, 6), "max_seconds": round(self.max_seconds, 6),
                "hit_rate": None if self.hit_rate is None else round(self.hit_rate, 4)}


@dataclass
class BuildView:
    """A build record read as a whole build: the project as its latest entries leave it,
    the last build's figures."""

    folder: str  # the record folder
    started: float  # Unix time of the last build's start
    units: list[TranslationUnit]
    kernels: list[KernelRow]
    block: int  # the block size occupancy is computed at
    superseded: int = 0  # older entries of units built again since, left out
    skipped: list[str] = field(default_factory=list)  # entries that could not be read
    notes: list[str] = field(default_factory=list)
    builds: list = field(default_factory=list)  # buildlog.BuildRun, oldest first
    # The units the last build ran, as the builds before it left them (the entry each
    # replaced), by ``TranslationUnit.key``: what the last build changed.
    earlier: dict = field(default_factory=dict)

    # -- builds ------------------------------------------------------------------------

    @property
    def last_build(self):
        return self.builds[-1] if self.builds else None

    @property
    def previous_build(self):
        return self.builds[-2] if len(self.builds) > 1 else None

    @property
    def last_units(self) -> list[TranslationUnit]:
        """The units the last build ran: what every headline figure is of."""
        last = self.last_build
        return [u for u in self.units if last is None or u.run == last.number]

    def not_seen(self) -> list[str]:
        """The kinds of step a whole build of a CUDA project routes through nvstage that no
        build of this record did (``compiler.steps.EXPECTED``)."""
        seen = {e.kind for b in self.builds for e in b.entries} | {u.kind for u in self.units}
        return [k for k in steps.EXPECTED if k not in seen]

    def step_kinds(self) -> dict[str, int]:
        """The last build's steps per kind, in ``compiler.steps.KINDS`` order."""
        found = [u.kind for u in self.last_units]
        return {k: found.count(k) for k in steps.KINDS if k in found}

    def nvccs(self) -> list[dict]:
        """The nvccs the last build's nvcc commands ran, the most used first: its path, where
        the launcher found it (``PATH``, ``pip wheels``, ``command``; None in older records),
        its CUDA version (from a manifest; None where plain nvcc ran every command of it) and
        how many commands it ran."""
        rows: dict[str, dict] = {}
        for u in self.last_units:
            argv = u.entry.argv
            if not steps.is_nvcc(argv):
                continue
            row = rows.setdefault(argv[0], {"nvcc": argv[0], "from": None, "version": None,
                                            "commands": 0})
            row["commands"] += 1
            row["from"] = row["from"] or u.entry.nvcc_from
            version = u.toolkit_version or \
                getattr(getattr(u.build, "toolkit", None), "version", None)
            row["version"] = row["version"] or (version if isinstance(version, str) else None)
        return sorted(rows.values(), key=lambda r: -r["commands"])

    # -- totals (the last build's) -------------------------------------------------------

    @property
    def wall_seconds(self) -> float:
        """The last build's first start to its last end."""
        return max((u.end for u in self.last_units), default=0.0)

    @property
    def unit_seconds(self) -> float:
        """Every command's time in the last build added up (what one process would have
        taken)."""
        return sum(u.seconds for u in self.last_units)

    @property
    def parallelism(self) -> float | None:
        return self.unit_seconds / self.wall_seconds if self.wall_seconds > 0 else None

    @property
    def lanes(self) -> int:
        return max((u.lane for u in self.last_units), default=-1) + 1

    def counts(self) -> dict[str, int]:
        """The last build's commands by state (ok, hit, fallback, failed, ran)."""
        units = self.last_units
        out = {"units": len(units), "ok": 0, "hit": 0, "fallback": 0, "failed": 0, "ran": 0}
        for u in units:
            out[u.state] = out.get(u.state, 0) + 1
        return out

    def kind_totals(self) -> list[KindTotals]:
        """Per stage kind, in the order kinds first appear; the slowest kind first."""
        acc: dict[str, list] = {}
        for u in self.last_units:
            for s in u.stages:
                a = acc.setdefault(s.kind, [0, 0, 0, 0, 0.0, 0.0])
                a[0] += 1
                if not s.ran:
                    a[3] += 1
                    continue
                a[1 if not s.cached else 2] += 1
                a[4] += s.seconds
                a[5] = max(a[5], s.seconds)
        rows = [KindTotals(k, *v) for k, v in acc.items()]
        return sorted(rows, key=lambda r: -r.seconds)

    def cache_totals(self) -> dict:
        """Whole-command hits, and stage-cache hits among the stages that could be cached."""
        totals = self.kind_totals()
        stages = sum(t.stages for t in totals)
        cached = sum(t.cached for t in totals)
        whole = sum(t.whole for t in totals)
        staged = [u for u in self.last_units if u.status == "ok"]
        hits = sum(1 for u in staged if u.hit)
        return {"commands": len(staged), "command_hits": hits,
                "command_hit_rate": round(hits / len(staged), 4) if staged else None,
                "stages": stages, "stage_hits": cached, "stages_in_command_hits": whole,
                "stage_hit_rate": round((cached + whole) / stages, 4) if stages else None}

    def slowest_units(self, n: int = SLOWEST) -> list[TranslationUnit]:
        return sorted(self.last_units, key=lambda u: -u.seconds)[:n]

    def slowest_stages(self, n: int = SLOWEST) -> list[tuple[TranslationUnit, StageTime]]:
        pairs = [(u, s) for u in self.last_units for s in u.stages if s.ran]
        return sorted(pairs, key=lambda p: -p[1].seconds)[:n]

    # -- finding a kernel ---------------------------------------------------------------

    def unit_named(self, text: str) -> TranslationUnit:
        """The unit ``text`` names: its source or output (a path, or its end after a "/"),
        or its entry's file name. ``UsageError`` when none or several do."""
        return _one_unit(self, text)

    def find_kernel(self, name: str, unit: str | None = None
                    ) -> tuple[TranslationUnit, list[KernelRecord]]:
        """The unit that built the kernel ``name`` names (``inspect.kernels.matches``), and
        its records of that kernel. ``UsageError`` naming near matches when no unit has it,
        and listing the units when several have it (choose one with ``unit``)."""
        units = [self.unit_named(unit)] if unit else self.units
        found: dict[int, list[KernelRecord]] = {}
        for u in units:
            rows = [r for r in u.kernels if matches(name, r.kernel, r.demangled)]
            if rows:
                found[u.index] = rows
        if not found:
            where = f"in {units[0].name}" if unit else f"in the {len(self.units)} " \
                                                        f"translation units of {self.folder}"
            raise UsageError(f"no kernel matches {name!r} {where}",
                             hint=_near(name, [r for u in units for r in u.kernels]))
        if len(found) > 1:
            listed = "; ".join(f"{self.units[i].source or self.units[i].output}"
                               for i in list(found)[:NOTES_NAMED])
            raise UsageError(f"{len(found)} translation units built a kernel named {name!r}: "
                             f"{listed}",
                             hint="choose one with --tu SOURCE (its path, or the end of it)")
        i, rows = next(iter(found.items()))
        return self.units[i], rows

    def to_json(self) -> dict:
        last = self.last_build
        return {
            "schema": SCHEMA, "record": self.folder, "started": self.started,
            "build": None if last is None else last.number,
            "builds": [b.to_json() for b in self.builds],
            "steps": self.step_kinds(), "not_seen": self.not_seen(), "nvcc": self.nvccs(),
            "wall_seconds": round(self.wall_seconds, 6),
            "unit_seconds": round(self.unit_seconds, 6),
            "parallelism": None if self.parallelism is None else round(self.parallelism, 3),
            "lanes": self.lanes, "counts": self.counts(), "cache": self.cache_totals(),
            "stage_kinds": [t.to_json() for t in self.kind_totals()],
            "slowest_units": [{"unit": u.index, "source": u.source, "seconds": round(u.seconds, 6)}
                              for u in self.slowest_units()],
            "slowest_stages": [{"unit": u.index, "source": u.source, **s.to_json()}
                               for u, s in self.slowest_stages()],
            "block": self.block,
            "units": [u.to_json() for u in self.units],
            "kernels": [k.to_json(self.units) for k in self.kernels],
            "rebuilt": sum(1 for u in self.last_units if u.key in self.earlier),
            "superseded": self.superseded, "skipped": self.skipped, "notes": self.notes,
        }


def _near(name: str, records: list[KernelRecord]) -> str:
    names = sorted({display_name(r.demangled) or r.kernel for r in records})
    if not names:
        return "no translation unit of this build compiled a kernel nvstage has figures for"
    bare = {n.split("<", 1)[0]: n for n in names}
    close = difflib.get_close_matches(name, list(bare) + names, n=5, cutoff=0.5)
    close += [n for n in names if name.lower() in n.lower()]
    close = list(dict.fromkeys(bare.get(c, c) for c in close))
    if close:
        return f"did you mean {', '.join(close[:5])}? kernels there: " + \
            ", ".join(names[:NOTES_NAMED]) + (" ..." if len(names) > NOTES_NAMED else "")
    return "kernels there: " + ", ".join(names[:NOTES_NAMED]) + \
        (f" and {len(names) - NOTES_NAMED} more" if len(names) > NOTES_NAMED else "")


def _one_unit(view: BuildView, text: str) -> TranslationUnit:
    want = text.strip()
    absolute = os.path.abspath(want)

    def names(u: TranslationUnit):
        return [p for p in (u.source, u.output, getattr(u.entry, "file", "")) if p]

    exact = [u for u in view.units if absolute in names(u) or want in names(u)]
    found = exact or [u for u in view.units
                      if any(p.endswith("/" + want.lstrip("/")) for p in names(u))]
    if len(found) == 1:
        return found[0]
    if not found:
        listed = ", ".join(u.source or u.output or u.command for u in view.units[:NOTES_NAMED])
        raise UsageError(f"no translation unit of {view.folder} is {want!r}",
                         hint=f"give its source or object path (or the end of it): {listed}")
    raise UsageError(f"{len(found)} translation units match {want!r}: "
                     + "; ".join(u.source or u.output or "?" for u in found[:NOTES_NAMED]),
                     hint="give more of the path")


# -- reading ---------------------------------------------------------------------------------

def load_build_view(path: str | os.PathLike, *, block: int = DEFAULT_BLOCK,
                    every_entry: bool = False, earlier: bool = True) -> BuildView:
    """The build record at ``path`` (a build folder or its ``.nvstage-build``) as a whole
    build: the latest entry of each unit (every entry with ``every_entry``), occupancy at
    ``block`` threads per block; with ``earlier``, the entries the last build replaced too
    (read as units: what ``record_diff.since_previous`` compares). ``UsageError`` when
    ``path`` holds no build record."""
    if not isinstance(block, int) or not 1 <= block <= 1024:
        raise UsageError(f"block size {block!r}: give 1 to 1024 threads")
    rec = buildlog.load_build_log(path)
    runs = buildlog.builds_of(rec.entries)
    run_of = {id(e): r for r in runs for e in r.entries}
    entries, superseded = (rec.entries, 0) if every_entry else buildlog.current(rec.entries)
    last = runs[-1] if runs else None
    view = BuildView(rec.folder, last.started if last else 0.0, [], [], block, superseded,
                     list(rec.skipped), builds=runs)
    before: dict = {}
    if earlier and not every_entry and last is not None:
        # What the units the last build ran were before it: each one's entry before.
        rebuilt = {e.unit for e in last.entries}
        for e in rec.entries:  # oldest first
            if run_of[id(e)].number < last.number and e.unit in rebuilt:
                before[e.unit] = e
    problems: list[str] = []
    units, kept = [], []
    for n, e in enumerate([*entries, *before.values()]):
        r = run_of[id(e)]
        unit, build = _unit(n if n < len(entries) else n - len(entries), e, r.started)
        unit.run = r.number
        units.append(unit)
        kept.append(_lean(build, unit))  # the rest of the manifest is let go at once
    _demangle_ahead(kept)
    for unit, runs in zip(units, kept):
        if runs is not None:
            unit.kernels = _kernels(runs, unit)
    del kept
    view.units = units[:len(entries)]
    view.earlier = {u.key: u for u in units[len(entries):]}
    for unit in view.units:
        problems += [f"{unit.name}: {n}" for n in unit.notes]
    for number in {u.run for u in view.units}:
        _assign_lanes([u for u in view.units if u.run == number])
    known: dict = {}  # figures -> occupancy: a build's kernels share a few combinations
    for u in view.units:
        for r in u.kernels:
            view.kernels.append(kernel_row(r, u.index, block, known))
    if superseded:
        view.notes.append(f"{superseded} older entr{'y' if superseded == 1 else 'ies'} of units "
                          "built again since are left out of the project's units and kernels "
                          f"(the record keeps the last {buildlog.KEEP_BUILDS} builds whole)")
    view.notes += problems[:NOTES_NAMED]
    if len(problems) > NOTES_NAMED:
        view.notes.append(f"and {len(problems) - NOTES_NAMED} more notes about units")
    if rec.skipped:
        view.notes += [f"entry skipped: {s}" for s in rec.skipped[:NOTES_NAMED]]
        if len(rec.skipped) > NOTES_NAMED:
            view.notes.append(f"and {len(rec.skipped) - NOTES_NAMED} more entries skipped")
    if last is not None and last.tool is None:
        view.notes.append("no build tool named its commands' build (an older record, or a "
                          f"script): builds are told apart by pauses of {buildlog.GAP_SECONDS:g} "
                          "s or more")
    return view


def _unit(index: int, e, t0: float) -> tuple[TranslationUnit, object]:
    """The unit of one entry (``t0``: its build's start), and its manifest read as a
    ``Build`` (None when it has none)."""
    u = TranslationUnit(index, e, e.source, e.output, e.status, e.reason, e.hit,
                        e.started - t0, e.seconds, e.pid, command_text(e.argv), kind=e.kind,
                        tool=e.tool)
    if e.build is None:
        if e.status == "ok":
            u.notes.append("staged, but its entry holds no build manifest")
        return u, None
    try:
        build = e.manifest_build(plan=False)
    except ArtifactError as err:
        u.notes.append(err.message)
        return u, None
    u.wall_seconds, u.plan_seconds = build.wall_seconds, build.plan_seconds
    u.cache = build.cache if isinstance(build.cache, dict) else None
    for run in build.runs:
        # A stage after the command ended is a damaged or crafted entry: held to it.
        start = min(max(0.0, run.started), e.seconds)
        u.stages.append(StageTime(run.stage.index, run.stage.kind.value, run.stage.arch,
                                  u.start + start, min(run.seconds, e.seconds - start),
                                  run.cached, not e.hit, run.where))
    return u, build


def _lean(build, unit: TranslationUnit) -> list | None:
    """Of a unit's manifest, what the view keeps: its toolkit's version and its kernels' code
    sizes on the unit, and the runs that report kernels (returned, to be read once every
    name is demangled); None without a manifest. The rest (plans, command lines, what the
    tools printed) is let go: a view of a record at its caps would hold 5 GB of it."""
    if build is None:
        return None
    version = getattr(getattr(build, "toolkit", None), "version", None)
    unit.toolkit_version = version if isinstance(version, str) else None
    for run in build.runs:
        for f in run.figures or ():
            unit.code_bytes[(f.kernel, run.stage.arch or f.arch, f.final)] = \
                getattr(f, "code_bytes", None)
    return [run for run in build.runs if run.resources or run.figures]


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")


def _demangle_ahead(kept) -> None:
    """Every kernel name of every unit demangled in one c++filt run (the readers then find
    them known), not one run per ptxas stage (``kept``: each unit's runs, or None)."""
    names = {m for runs in kept if runs is not None for run in runs
             for m in _ENTRY.findall(run.resources or "")}
    names |= {f.kernel for runs in kept if runs is not None for run in runs
              for f in run.figures or ()}
    if names:
        demangle_all(sorted(names))


def _kernels(runs, unit: TranslationUnit) -> list[KernelRecord]:
    """The kernels a unit compiled, from the resource lines its manifest's ``runs`` kept (no
    tool runs: the manifest read without artifacts gives ``stage_resources`` no cubin to
    read)."""
    rows: list[KernelRecord] = []
    for run in runs:
        try:
            rows += stage_resources(run, None)
        except NvstageError as err:
            unit.notes.append(f"stage {run.stage.index} ({run.stage.kind.value}): "
                              f"{err.message}")
    return final_rows(rows)


def _assign_lanes(units: list[TranslationUnit]) -> None:
    """The first free row for each unit in start order (ninjatracing's layout): the rows a
    build needs are the most commands it ran at once."""
    order = sorted(units, key=lambda u: (u.start, u.index))
    for u, lane in zip(order, first_free_rows([(u.start, u.end) for u in order])):
        u.lane = lane


def first_free_rows(spans: list[tuple[float, float]]) -> list[int]:
    """For each (start, end) span, in start order, the lowest row whose spans have all ended
    by its start. A heap of busy rows and one of free rows: a record of a hundred thousand
    commands that all overlap takes n log n steps, not n squared."""
    import heapq

    busy: list[tuple[float, int]] = []  # (end, row)
    free: list[int] = []
    rows = []
    for start, end in spans:
        while busy and busy[0][0] <= start + 1e-9:
            heapq.heappush(free, heapq.heappop(busy)[1])
        row = heapq.heappop(free) if free else len(busy)  # every row is busy: a new one
        heapq.heappush(busy, (end, row))
        rows.append(row)
    return rows


def kernel_row(r: KernelRecord, unit: int, block: int, known: dict) -> KernelRow:
    """A kernel's row: its record, its unit's index and its occupancy at ``block`` (``known``:
    figures already worked out, shared by the rows of one view)."""
    if r.registers is None:
        return KernelRow(r, unit, None, None, "no register count")
    figures = dict(registers=r.registers, shared_static=r.shared_bytes,
                   barriers=r.barriers or 0)
    key = (r.arch, r.registers, r.shared_bytes, r.barriers or 0)
    if key not in known:
        try:
            known[key] = (occupancy(r.arch, block_size=block, **figures),
                          sweep(r.arch, **figures).best, None)
        except NvstageError as err:  # an arch nvstage has no limits for, a crafted count
            known[key] = (None, None, err.message)
    return KernelRow(r, unit, *known[key])


# -- one kernel, as show shows a keep folder's ----------------------------------------------

def show_kernel(record: str | os.PathLike | BuildView, kernel: str, *, unit: str | None = None,
                sections: str | None = None, lineinfo: bool = False, gpu: str | None = None,
                driver: str | None = None, toolkit=None, nvcc: str | None = None,
                attribute: str = "user", library=()):
    """``nvstage show BUILD --kernel NAME``: the kernel found in whichever translation unit
    built it (``unit`` chooses one when several did), shown as ``view.show`` shows a keep
    folder's build (a ``view.Shown``). Its resources come from the ptxas report the unit's
    entry kept; its SASS, PTX and fatbin images from the unit's object file, read only while
    it is still the one the entry recorded (same size and SHA-256)."""
    check_gpu(gpu, driver)
    _attribution(None, attribute)  # a typo refused before any work
    view = record if isinstance(record, BuildView) else load_build_view(record)
    u, rows = view.find_kernel(kernel, unit)
    wanted = parse_sections(sections, "build")
    if gpu and "fatbin" not in wanted:
        wanted = wanted + ("fatbin",)
    if lineinfo and LINES not in wanted:
        wanted = wanted + (LINES,)
    toolkit = toolkit or find_toolkit(nvcc)
    build = u.entry.manifest_build(files=True)
    shown = Shown(u.source or u.output or view.folder, "build", {})
    shown.notes.append(f"{rows[0].name} was built by {u.source or '?'} -> {u.output or '?'} "
                       f"(build record entry {getattr(u.entry, 'file', '') or '?'})")
    if u.hit:
        shown.notes.append("that command was answered whole from the cache: its figures are "
                           "the ones its last staged run recorded")
    if note := partial_note(build):
        shown.partial = {"status": build.status, "note": note}
        shown.notes.append(note)
    data = collect_build(build, wanted, toolkit, kernel=kernel, lineinfo=lineinfo or None,
                         attribute=attribute, library=library)
    obj = build.output  # found only when still the recorded file
    missing = tuple(s for s in wanted if s in ("ptx", "sass", LINES) and not data.get(s))
    if obj and kind_of_file(obj) in ("object", "fatbin", "executable"):
        if missing:
            data.update(collect_file(obj, kind_of_file(obj), missing, toolkit, kernel=kernel,
                                     lineinfo=lineinfo, source=build.source, cwd=build.cwd,
                                     attribute=attribute, library=library))
    elif missing or "fatbin" in wanted:
        shown.notes.append(f"{u.output or 'its output'} is gone or was rebuilt since this "
                           f"entry: only the figures the record kept are shown")
    shown.data = data
    if gpu:
        shown.will_it_run = will_it_run(data, "build", obj or u.output or "", gpu, driver,
                                        partial=shown.partial and shown.partial["status"])
    return shown


