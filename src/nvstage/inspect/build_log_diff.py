"""Two whole builds side by side, from build records: two builds of one record, or the last
builds of two build folders (``nvstage diff BUILD_A BUILD_B``, ``nvstage diff BUILD``).

Each side is the project as one build left it: for every unit (translation unit or other
step), its latest entry up to that build. Units are matched by their output's path inside the
build folder (two folders, two configurations of one project, compare), kernels by their
unit, name (``inspect.names``: module ids taken out, so a static kernel of two runs is one
kernel), arch and whether the figures are final. Per unit: its state (staged, hit, fallback,
ran, failed), time, and each stage's time and whether the stage cache restored it; per kernel:
registers, spills, static shared memory, SASS bytes and occupancy; kernels one side has alone
are added or removed. Everything comes from the records: no object file is read.

``pairs`` (``inspect.pairs``: ``--pair A=B``) compare the kernels they name instead, A's with
B's, of one unit or two (two versions of one operation in one file, a kernel renamed).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from nvstage.errors import UsageError
from nvstage.inspect.build_view import (
    DEFAULT_BLOCK,
    BuildView,
    TranslationUnit,
    kernel_row,
    load_build_view,
)
from nvstage.inspect.kernels import matches
from nvstage.compiler.buildlog.log import find, FOLDER
from nvstage.inspect.pairs import no_such, nothing_paired

SCHEMA = "nvstage.record-diff/1"
KERNEL_METRICS = ("registers", "spill_stores", "spill_loads", "shared_bytes", "sass_bytes",
                  "occupancy")
_LAST, _BEFORE = ("last", "-1"), ("prev", "previous", "-2")


@dataclass
class Side:
    """One side: a build of a record, and the project as that build left it."""

    spec: str  # as given ("build", "build@1")
    folder: str  # the record folder
    root: str  # the build folder: unit paths are matched relative to it
    run: object  # buildlog.BuildRun
    of: int  # how many builds the record holds
    units: list[TranslationUnit] = field(default_factory=list)

    @property
    def label(self) -> str:
        tool = f", {self.run.tool}" if self.run.tool else ""
        return f"{self.spec} (build {self.run.number} of {self.of}{tool})"

    def to_json(self) -> dict:
        return {"spec": self.spec, "record": self.folder, "root": self.root,
                **self.run.to_json(), "builds_in_record": self.of}


@dataclass
class UnitRow:
    key: str  # the unit's output inside the build folder (or its command)
    name: str
    kind: str
    a: dict | None  # None: the side has no such unit
    b: dict | None
    stages: list[dict] = field(default_factory=list)  # {"stage", "a", "b"}; rebuilt units

    @property
    def changed(self) -> bool:
        """Run again between the two sides (another entry), or on one side alone."""
        return self.a is None or self.b is None or self.a["entry"] != self.b["entry"]

    def to_json(self) -> dict:
        return {"unit": self.key, "name": self.name, "kind": self.kind, "a": self.a,
                "b": self.b, "changed": self.changed, "stages": self.stages}


@dataclass
class KernelRow:
    key: str  # "name (arch[, per file]) in unit"
    name: str  # as shown (module ids taken out)
    arch: str
    unit: str
    kernel: dict  # the mangled name on each side: {"a": ..., "b": ...}
    a: dict | None
    b: dict | None
    unit_name: str = ""  # short, for tables: the unit's source file name

    @property
    def status(self) -> str:
        if self.a is None:
            return "added"
        if self.b is None:
            return "removed"
        return "same" if self.a == self.b else "changed"

    def delta(self, metric: str):
        va, vb = (self.a or {}).get(metric), (self.b or {}).get(metric)
        if va is None or vb is None:
            return None
        return round(vb - va, 4) if isinstance(va, float) or isinstance(vb, float) else vb - va

    def to_json(self) -> dict:
        return {"key": self.key, "name": self.name, "arch": self.arch, "unit": self.unit,
                "kernel": self.kernel, "status": self.status, "a": self.a, "b": self.b,
                "delta": {m: self.delta(m) for m in KERNEL_METRICS}}


@dataclass
class RecordDiff:
    a: Side
    b: Side
    units: list[UnitRow]
    kernels: list[KernelRow]
    block: int
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        fig = ("wall_seconds", "step_seconds", "parallelism", "steps", "command_hits")
        ja, jb = self.a.to_json(), self.b.to_json()
        return {"schema": SCHEMA, "a": ja, "b": jb, "block": self.block,
                "delta": {k: None if ja[k] is None or jb[k] is None else round(jb[k] - ja[k], 6)
                          for k in fig},
                "units": [u.to_json() for u in self.units],
                "kernels": [k.to_json() for k in self.kernels],
                "added": [k.key for k in self.kernels if k.status == "added"],
                "removed": [k.key for k in self.kernels if k.status == "removed"],
                "notes": self.notes}


# -- which builds ------------------------------------------------------------------------------

def split_spec(text: str) -> tuple[str, str | None]:
    """``build`` -> (``build``, None); ``build@2`` -> (``build``, ``2``): a build folder (or
    record), and which of its builds (a number as ``show`` lists them, ``-1`` or ``last``,
    ``-2`` or ``prev``); a path that exists as given is a path, ``@`` and all."""
    if find(text) is not None or "@" not in text:
        return text, None
    path, _, which = text.rpartition("@")
    return path, which


def is_record(text: str) -> bool:
    """Whether ``text`` names a build record (with or without ``@BUILD``)."""
    return find(split_spec(text)[0]) is not None


def _pick(view: BuildView, which: str | None, spec: str, default: int = -1):
    runs = view.builds
    if not runs:
        raise UsageError(f"{spec}: the build record holds no readable entry")
    if which is None:
        index = default
    elif which in _LAST:
        index = -1
    elif which in _BEFORE:
        index = -2
    else:
        try:
            n = int(which)
        except ValueError:
            raise UsageError(f"{spec}: no build {which!r}",
                             hint="give a build's number (nvstage show BUILD lists them), "
                                  "@last or @prev") from None
        index = n - 1 if n > 0 else n
    if not -len(runs) <= index < len(runs):
        raise UsageError(f"{spec}: the record holds {len(runs)} build"
                         f"{'s' if len(runs) != 1 else ''}",
                         hint=f"give 1 to {len(runs)} (or -1 for the last)" if len(runs) > 1
                         else "build again, then compare: nvstage diff BUILD")
    return runs[index]


def _root(folder: str) -> str:

    folder = os.path.abspath(folder)
    return os.path.dirname(folder) if os.path.basename(folder) == FOLDER else folder


def _side(view: BuildView, spec: str, which: str | None, default: int = -1) -> Side:
    run = _pick(view, which, spec, default)
    state: dict = {}
    for u in view.units:  # every entry, oldest first: the latest up to the build wins
        if u.run <= run.number:
            state[u.key] = u
    return Side(spec, view.folder, _root(view.folder), run, len(view.builds),
                sorted(state.values(), key=lambda u: u.entry.started))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _rel(u: TranslationUnit, root: str) -> str:
    """A unit's key as a path inside the build folder ``root``, else inside the folder its
    command ran in (two build folders' units meet there; so do a record's and its copy's)."""
    *head, what, value = u.key
    cwd = getattr(u.entry, "cwd", "") or root
    base = root if _inside(value, root) or not _inside(value, cwd) else cwd
    if what == "output" and _inside(value, base):
        value = os.path.relpath(value, base)
    elif what == "command":
        value = value.split("\0")[0].replace(base.rstrip("/") + "/", "")
    return " ".join([*head[1:], value]) if head else value


# -- rows --------------------------------------------------------------------------------------

def _unit_doc(u: TranslationUnit) -> dict:
    return {"state": u.state, "seconds": round(u.seconds, 6), "reason": u.reason,
            "build": u.run, "entry": getattr(u.entry, "file", "") or None}


def _stages(u: TranslationUnit | None) -> dict[str, dict]:
    """"kind (arch)" -> {"seconds", "cached"} of the stages the command ran (a whole-command
    hit ran none: its stages are its last staged run's); a kind seen twice is numbered."""
    out: dict[str, dict] = {}
    if u is None:
        return out
    seen: dict[str, int] = {}
    for s in u.stages:
        seen[s.label] = seen.get(s.label, 0) + 1
        key = s.label if seen[s.label] == 1 else f"{s.label} #{seen[s.label]}"
        out[key] = {"seconds": round(s.seconds, 6), "cached": s.cached} if s.ran else \
            {"seconds": None, "cached": True}
    return out


def _code_bytes(u: TranslationUnit) -> dict:
    """(mangled kernel, arch, final) -> its SASS bytes, from the cubin figures the manifest
    kept (None in older manifests)."""
    if u.code_bytes:  # a view of a build record keeps them, not the manifest
        return u.code_bytes
    out = {}
    for run in getattr(u.build, "runs", None) or ():
        for f in run.figures or ():
            out[(f.kernel, run.stage.arch or f.arch, f.final)] = getattr(f, "code_bytes", None)
    return out


def _kernels(side: Side, block: int, known: dict) -> dict[str, tuple]:
    out: dict[str, tuple] = {}
    for u in side.units:
        unit = _rel(u, side.root)
        sizes = _code_bytes(u)
        for r in u.kernels:
            row = kernel_row(r, u.index, block, known)
            occ = row.occupancy
            figures = {"registers": r.registers, "spill_stores": r.spill_stores,
                       "spill_loads": r.spill_loads, "shared_bytes": r.shared_bytes,
                       "sass_bytes": sizes.get((r.kernel, r.arch, r.final)),
                       "occupancy": None if occ is None else round(occ.occupancy, 4)}
            key = f"{r.name} ({r.arch}{'' if r.final else ', per file'}) in {unit}"
            out.setdefault(key, (r, unit, figures, u.name))
    return out


def _paired(pairs, ka: dict, kb: dict) -> list[KernelRow]:
    """The rows of the kernels ``pairs`` name: each of A's with B's of its arch (and unit,
    where B's kernel is in several)."""
    def named(side: dict, name: str) -> list[str]:
        return [k for k, (r, *_) in side.items() if matches(name, r.kernel, r.demangled)]

    rows = []
    for p in pairs:
        xs, ys = named(ka, p.a), named(kb, p.b)
        if not xs:
            raise no_such("A", p.a, [r.name for r, *_ in ka.values()])
        if not ys:
            raise no_such("B", p.b, [r.name for r, *_ in kb.values()])
        for x in xs:
            ra, unit, fa, uname = ka[x]
            same_arch = [y for y in ys if (kb[y][0].arch, kb[y][0].final) == (ra.arch, ra.final)]
            y = next((y for y in same_arch if kb[y][1] == unit), same_arch[0] if same_arch
                     else None)
            if y is None:
                continue
            rb, unit_b, fb, _ = kb[y]
            name = ra.name if ra.name == rb.name else f"{ra.name} ~ {rb.name}"
            where = unit if unit == unit_b else f"{unit} ~ {unit_b}"
            rows.append(KernelRow(f"{name} ({ra.arch}{'' if ra.final else ', per file'}) in "
                                  f"{where}", name, ra.arch, where,
                                  {"a": ra.kernel, "b": rb.kernel}, fa, fb, uname))
    return rows


def compare(a: Side, b: Side, *, block: int = DEFAULT_BLOCK,
            notes: list[str] | None = None, pairs=()) -> RecordDiff:
    """The two sides, unit by unit and kernel by kernel (only the kernels ``pairs`` name,
    where they name some)."""
    ua = {_rel(u, a.root): u for u in a.units}
    ub = {_rel(u, b.root): u for u in b.units}
    units = []
    for key in dict.fromkeys([*ua, *ub]):
        x, y = ua.get(key), ub.get(key)
        some = y or x
        row = UnitRow(key, some.name, some.kind, None if x is None else _unit_doc(x),
                      None if y is None else _unit_doc(y))
        if row.changed:
            sa, sb = _stages(x), _stages(y)
            row.stages = [{"stage": s, "a": sa.get(s), "b": sb.get(s)}
                          for s in dict.fromkeys([*sa, *sb])]
        units.append(row)
    known: dict = {}
    ka, kb = _kernels(a, block, known), _kernels(b, block, known)
    if pairs:
        kernels = _paired(pairs, ka, kb)
        if not kernels:

            raise nothing_paired([r.name for r, *_ in ka.values()],
                                 [r.name for r, *_ in kb.values()], " on one arch")
        return RecordDiff(a, b, units, kernels, block, list(notes or []))
    kernels = []
    for key in dict.fromkeys([*ka, *kb]):
        x, y = ka.get(key), kb.get(key)
        r, unit, _, name = y or x
        kernels.append(KernelRow(key, r.name, r.arch, unit,
                                 {"a": x and x[0].kernel, "b": y and y[0].kernel},
                                 None if x is None else x[2], None if y is None else y[2],
                                 name))
    return RecordDiff(a, b, units, kernels, block, list(notes or []))


def diff_records(a: str | os.PathLike, b: str | os.PathLike | None = None, *,
                 block: int = DEFAULT_BLOCK, pairs=()) -> RecordDiff:
    """``nvstage diff A [B]`` for build records: A's build (the last, or ``A@N``) against B's;
    with no B, A's build against the one before it. ``pairs``: the kernels to compare
    (``inspect.pairs``; none: those of one name, unit and arch). ``UsageError`` when a side
    holds no record or no such build, or a pair names no kernel."""
    pa, wa = split_spec(os.fspath(a))
    views: dict[str, BuildView] = {}

    def view(path: str) -> BuildView:

        folder = find(path)
        if folder is None:
            raise UsageError(f"{path} holds no nvstage build record",
                             hint="give a build folder built through nvstage (README: "
                                  "'inside real builds'), or two keep folders")
        if str(folder) not in views:
            views[str(folder)] = load_build_view(folder, block=block, every_entry=True)
        return views[str(folder)]

    va = view(pa)
    if b is None:
        side_b = _side(va, os.fspath(a), wa)
        if side_b.run.number == 1:
            raise UsageError(f"{a}: build {side_b.run.number} is the first the record holds: "
                             "nothing before it to compare with",
                             hint="build again (or give two build folders)")
        side_a = _side(va, f"{pa}@{side_b.run.number - 1}", str(side_b.run.number - 1))
    else:
        pb, wb = split_spec(os.fspath(b))
        side_a, side_b = _side(va, os.fspath(a), wa), _side(view(pb), os.fspath(b), wb)
    notes = [n for v in views.values() for n in v.notes if "older entr" not in n]
    return compare(side_a, side_b, block=block, notes=list(dict.fromkeys(notes)), pairs=pairs)


def since_previous(view: BuildView) -> RecordDiff | None:
    """What the last build of ``view`` (the default view: latest entries, and ``earlier``)
    changed against the build before it; None when the record holds one build."""
    last, before = view.last_build, view.previous_build
    if last is None or before is None:
        return None
    root = _root(view.folder)
    b = Side("last", view.folder, root, last, len(view.builds), list(view.units))
    state = {u.key: view.earlier.get(u.key, u) if u.run == last.number else u
             for u in view.units}
    # A unit first built in the last build is not in the one before.
    a_units = [u for u in state.values() if u.run < last.number]
    a = Side("before", view.folder, root, before, len(view.builds), a_units)
    return compare(a, b, block=view.block)
