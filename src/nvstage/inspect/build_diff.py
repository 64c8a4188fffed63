"""Two builds side by side: per kernel (registers, spills, shared memory, SASS instructions,
its own SASS bytes) and per stage (time), with deltas, and why each kernel changed
(``inspect.why``: whether its PTX changed as well as its SASS, what capped its registers).
"What did my change do to the kernel?".

Kernels are compared in pairs: those of one name on both sides, or those ``pairs`` name
(``inspect.pairs``: ``--pair A=B``), which may be two kernels of one build (two versions of
one operation) or of two compilers. A diff with no kernel on both sides says so and names what
each side has (``pairs.nothing_paired``): never "no change".

Two builds through different compilers (nvcc, NVRTC, Triton) are two ways of writing one
operation: their kernels are paired by name where the symbols differ (Triton's ``fused`` with
nvcc's ``fused(float const*, ...)``, sm_90a with sm_90), and each row also holds the
theoretical occupancy at the kernel's launch block (Triton's is fixed by its num_warps; an
nvcc or NVRTC kernel's is the ``block`` given) and the SASS instruction mix by class."""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field

from nvstage.inspect.kernels import KernelRecord, matches
from nvstage.files import read_regular
from nvstage.compiler.manifest.model import (
    Build,
    load_build,
    partial_note,
    reading_toolkit,
    toolkit_note,
)
from nvstage.errors import UsageError
from nvstage.inspect.build_compare import paired_rows
from nvstage.inspect.elf import read_cubin
from nvstage.inspect.gather import with_code
from nvstage.inspect.pairs import nothing_paired, no_such
from nvstage.inspect.resources import build_resources
from nvstage.inspect.why import build_facts, arch_number, explain

KERNEL_METRICS = ("registers", "spill_stores", "spill_loads", "shared_bytes",
                  "instructions", "sass_bytes")
# Not a kernel's own figure: the size of the cubin that holds it with every other kernel of
# its file (kept in the JSON; a kernel whose cubin changed elsewhere has not changed).
_NOT_OWN = ("seconds", "cached", "cubin_size")


@dataclass(frozen=True)
class Row:
    key: str  # "kernel (arch)" or "stage kind (arch)"
    a: dict  # metric -> value (None: absent in that build)
    b: dict
    b_key: str | None = None  # B's kernel where it is named otherwise (paired across compilers)
    why: dict | None = None  # ``why.explain``'s: which stage changed, what capped registers

    def delta(self, metric: str):
        va, vb = self.a.get(metric), self.b.get(metric)
        if va is None or vb is None:
            return None
        return vb - va

    @property
    def changed(self) -> bool:
        return any(self.a.get(m) != self.b.get(m) for m in set(self.a) | set(self.b)
                   if m not in _NOT_OWN)

    def to_json(self) -> dict:
        metrics = sorted((set(self.a) | set(self.b)) - {"cached"})
        doc = {"key": self.key, "a": self.a, "b": self.b,
               "delta": {m: self.delta(m) for m in metrics}}
        if self.b_key is not None:
            doc["b_key"] = self.b_key
        if self.why is not None:
            doc["why"] = self.why
        return doc


@dataclass
class BuildDiff:
    a: str  # where each build was read from
    b: str
    kernels: list[Row] = field(default_factory=list)
    stages: list[Row] = field(default_factory=list)
    total_seconds: tuple[float, float] = (0.0, 0.0)
    notes: list[str] = field(default_factory=list)
    # Each side whose build is not whole (running, interrupted, failed): "a"/"b" -> its
    # status and a line saying so. Empty for two whole builds (and then not in the JSON).
    partial: dict[str, dict] = field(default_factory=dict)
    pairs: list = field(default_factory=list)  # ``pairs.Pair`` s asked for (none: by name)

    def to_json(self) -> dict:
        doc = {"a": self.a, "b": self.b, "notes": self.notes,
               "pairs": [p.to_json() for p in self.pairs],
               "kernels": [r.to_json() for r in self.kernels],
               "stages": [r.to_json() for r in self.stages],
               "stage_seconds": {"a": self.total_seconds[0], "b": self.total_seconds[1],
                                 "delta": self.total_seconds[1] - self.total_seconds[0]}}
        if self.partial:
            doc["partial"] = self.partial
        return doc


def kernel_records(build, toolkit) -> dict[str, KernelRecord]:
    """"kernel (arch[, per file])" -> the kernel's record (``inspect.kernels``), with the SASS
    instruction count and cubin size where the build's cubin is still there."""
    out = {_key(r): r for r in build_resources(build, toolkit)}
    for a in build.artifacts:
        if a.kind != "cubin" or not os.path.isfile(a.path):
            continue
        final = not read_cubin(read_regular(a.path), a.path).relocatable
        records = {(r.kernel, r.arch): r for r in out.values() if r.final == final}
        for r in with_code(a.path, toolkit, records, final=final, size=a.size):
            out[_key(r)] = r
    return out


def _key(r: KernelRecord) -> str:
    return f"{r.demangled} ({r.arch}{'' if r.final else ', per file'})"


def _figures(r: KernelRecord) -> dict:
    """The metrics a diff row compares: those of the record's sources it has."""
    out = {}
    if r.registers is not None:  # not a kernel only the SASS has
        out.update(registers=r.registers, spill_stores=r.spill_stores,
                   spill_loads=r.spill_loads, shared_bytes=r.shared_bytes)
    if r.instructions is not None:
        out.update(instructions=r.instructions, cubin_size=r.image_size)
    return out


def _with_sass_bytes(figures: dict, facts) -> dict:
    """The row's figures with the kernel's own SASS bytes, where its cubin was read."""
    if facts is not None and facts.sass_bytes is not None:
        figures = {**figures, "sass_bytes": facts.sass_bytes}
    return figures


def stage_times(build) -> dict[str, dict]:
    """"kind (arch)" -> {"seconds", "cached"}; a kind seen twice for one arch is numbered (#2).

    A stage restored from the cache did not run: its time is a copy's, not a compile's, and
    the renderers say so rather than show a speed-up that is not there."""
    seen: dict[str, int] = defaultdict(int)
    out = {}
    for run in build.runs:
        s = run.stage
        base = f"{s.kind.value}" + (f" ({s.arch})" if s.arch else "")
        seen[base] += 1
        key = base if seen[base] == 1 else f"{base} #{seen[base]}"
        out[key] = {"seconds": run.seconds, "cached": bool(getattr(run, "cached", False))}
    return out


def diff_builds(a, b, toolkit=None, *, a_name: str | None = None,
                b_name: str | None = None, block: int | None = None,
                pairs=()) -> BuildDiff:
    """Compare two builds: ``Build`` s, or keep folders or stages.json files (named by their
    paths unless ``a_name``/``b_name`` say otherwise; a ``Build`` is "A" or "B").
    ``block``: the launch block of the nvcc and NVRTC kernels, for the occupancy a diff
    across compilers shows (a Triton kernel's block is its num_warps x 32). ``pairs``
    (``pairs.Pair`` s): the kernels to compare, A's with B's; none: those of one name.
    ``UsageError`` when no kernel is on both sides, or a pair names none."""
    if not isinstance(a, Build):
        a_name, a = a_name or str(a), load_build(a)
    if not isinstance(b, Build):
        b_name, b = b_name or str(b), load_build(b)
    a_name, b_name = a_name or "A", b_name or "B"

    toolkit = reading_toolkit(a, toolkit)
    ra, rb = kernel_records(a, toolkit), kernel_records(b, toolkit)
    facts_a, facts_b = build_facts(a), build_facts(b)
    ka = {k: _with_sass_bytes(_figures(r), _facts(facts_a, r)) for k, r in ra.items()}
    kb = {k: _with_sass_bytes(_figures(r), _facts(facts_b, r)) for k, r in rb.items()}
    notes = [f"{name}: {note}" for name, build in ((a_name, a), (b_name, b))
             if (note := toolkit_note(build, toolkit))]
    chosen = resolve(pairs, ra, rb) if pairs else None
    two = across(a, b)
    if two:

        kernels = [Row(k, fa, fb, b_key=kb_name) for k, fa, fb, kb_name
                   in paired_rows(a, b, ra, rb, ka, kb, toolkit, block, notes, chosen)]
    elif chosen is not None:
        kernels = [Row(x, ka[x], kb[y], b_key=None if x == y else y) for x, y in chosen]
    else:
        kernels = _by_name(ka, kb)
    if not any(r.a and r.b for r in kernels) and (ra or rb):
        raise nothing_paired(_names(ra), _names(rb))
    kernels = [_explained(r, ra, rb, facts_a, facts_b, same=not two) if r.a and r.b else r
               for r in kernels]
    sa, sb = stage_times(a), stage_times(b)
    stages = [Row(k, sa.get(k, {}), sb.get(k, {})) for k in _union(sa, sb)]
    partial = {side: {"status": build.status, "note": note}
               for side, build in (("a", a), ("b", b)) if (note := partial_note(build))}
    return BuildDiff(a_name, b_name, kernels, stages, (a.stage_seconds, b.stage_seconds),
                     notes, partial, list(pairs or ()))


def _facts(facts: dict, r: KernelRecord):

    return facts.get((r.kernel, arch_number(r.arch), r.final))


def _explained(row: Row, ra: dict, rb: dict, facts_a: dict, facts_b: dict, *,
               same: bool) -> Row:
    """The row with why it changed (``why.explain``); two builds of one kernel (its mangled
    name on both sides, one compiler) also say which stage changed."""
    from dataclasses import replace


    x, y = ra.get(row.key), rb.get(row.b_key or row.key)
    if x is None or y is None:
        return row
    why = explain(_facts(facts_a, x), _facts(facts_b, y), same_kernel=same and
                  x.kernel == y.kernel,
                  registers=(row.a.get("registers"), row.b.get("registers")))
    return replace(row, why=why)


def _names(records: dict) -> list[str]:
    return [r.name for r in records.values()]


def _per_file(key: str) -> str:
    return key.replace(", per file)", ")")


def _by_name(ka: dict, kb: dict) -> list[Row]:
    """Rows of the kernels of one key on both sides; a kernel one side has per file (before
    the device link of an -rdc build) and the other linked pairs with it too."""
    rows = []
    only_b = {_per_file(k): k for k in kb if k not in ka}
    taken = set()
    for k in ka:
        if k in kb:
            rows.append(Row(k, ka[k], kb[k]))
        elif _per_file(k) in only_b and only_b[_per_file(k)] not in taken:
            other = only_b[_per_file(k)]
            taken.add(other)
            rows.append(Row(k, ka[k], kb[other], b_key=other))
        else:
            rows.append(Row(k, ka[k], {}))
    rows += [Row(k, {}, kb[k]) for k in kb if k not in ka and k not in taken]
    return rows


def resolve(pairs, ra: dict, rb: dict) -> list[tuple[str, str]]:
    """(A's key, B's key) of each kernel the ``pairs`` name, one row per arch both sides
    built it for (Triton's sm_90a meets nvcc's sm_90). ``UsageError`` for a name that names
    no kernel on its side, or a pair with no arch in common."""
    out: list[tuple[str, str]] = []
    for p in pairs:
        xs = [k for k, r in ra.items() if matches(p.a, r.kernel, r.demangled)]
        ys = [k for k, r in rb.items() if matches(p.b, r.kernel, r.demangled)]
        if not xs:
            raise no_such("A", p.a, _names(ra))
        if not ys:
            raise no_such("B", p.b, _names(rb))
        got = []
        for x in xs:
            ident = (ra[x].arch.rstrip("af"), ra[x].final)
            y = next((y for y in ys if (rb[y].arch.rstrip("af"), rb[y].final) == ident), None)
            if y is not None:
                got.append((x, y))
        if not got and len(xs) == 1 and len(ys) == 1 and \
                ra[xs[0]].arch.rstrip("af") == rb[ys[0]].arch.rstrip("af"):
            got = [(xs[0], ys[0])]  # one linked, one per file: the same kernel's two states
        if not got:
            raise UsageError(f"--pair {p}: A's is built for "
                             f"{', '.join(sorted({ra[x].arch for x in xs}))} and B's for "
                             f"{', '.join(sorted({rb[y].arch for y in ys}))}: no arch to "
                             "compare them on", hint="build both for one arch")
        out += got
    return list(dict.fromkeys(out))


def across(a, b) -> bool:
    """Whether two builds come through different compilers (or either through Triton): then
    their kernels are paired by name and compared with occupancy and mix too."""
    return a.via != b.via or "triton" in (a.via, b.via)


def _union(a: dict, b: dict) -> list[str]:
    return list(dict.fromkeys([*a, *b]))
