"""Two builds side by side: per kernel (registers, spills, shared memory, SASS instructions,
cubin size) and per stage (time), with deltas. "What did my change do to the kernel?".

Two builds through different compilers (nvcc, NVRTC, Triton) are two ways of writing one
operation: their kernels are paired by name where the symbols differ (Triton's ``fused`` with
nvcc's ``fused(float const*, ...)``, sm_90a with sm_90), and each row also holds the
theoretical occupancy at the kernel's launch block (Triton's is fixed by its num_warps; an
nvcc or NVRTC kernel's is the ``block`` given) and the SASS instruction mix by class."""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field

from nvstage.inspect.kernels import KernelRecord

KERNEL_METRICS = ("registers", "spill_stores", "spill_loads", "shared_bytes",
                  "instructions", "cubin_size")


@dataclass(frozen=True)
class Row:
    key: str  # "kernel (arch)" or "stage kind (arch)"
    a: dict  # metric -> value (None: absent in that build)
    b: dict
    b_key: str | None = None  # B's kernel where it is named otherwise (paired across compilers)

    def delta(self, metric: str):
        va, vb = self.a.get(metric), self.b.get(metric)
        if va is None or vb is None:
            return None
        return vb - va

    @property
    def changed(self) -> bool:
        return any(self.a.get(m) != self.b.get(m) for m in set(self.a) | set(self.b)
                   if m not in ("seconds", "cached"))

    def to_json(self) -> dict:
        metrics = sorted((set(self.a) | set(self.b)) - {"cached"})
        doc = {"key": self.key, "a": self.a, "b": self.b,
               "delta": {m: self.delta(m) for m in metrics}}
        if self.b_key is not None:
            doc["b_key"] = self.b_key
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

    def to_json(self) -> dict:
        doc = {"a": self.a, "b": self.b, "notes": self.notes,
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
    from nvstage.artifacts import read_regular
    from nvstage.inspect.elf import read_cubin
    from nvstage.inspect.gather import with_code
    from nvstage.inspect.resources import build_resources

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
                b_name: str | None = None, block: int | None = None) -> BuildDiff:
    """Compare two builds: ``Build`` s, or keep folders or stages.json files (named by their
    paths unless ``a_name``/``b_name`` say otherwise; a ``Build`` is "A" or "B").
    ``block``: the launch block of the nvcc and NVRTC kernels, for the occupancy a diff
    across compilers shows (a Triton kernel's block is its num_warps x 32)."""
    from nvstage.compiler.manifest.model import (
        Build,
        load_build,
        partial_note,
        reading_toolkit,
        toolkit_note,
    )

    if not isinstance(a, Build):
        a_name, a = a_name or str(a), load_build(a)
    if not isinstance(b, Build):
        b_name, b = b_name or str(b), load_build(b)
    a_name, b_name = a_name or "A", b_name or "B"

    toolkit = reading_toolkit(a, toolkit)
    ra, rb = kernel_records(a, toolkit), kernel_records(b, toolkit)
    ka = {k: _figures(r) for k, r in ra.items()}
    kb = {k: _figures(r) for k, r in rb.items()}
    notes = [f"{name}: {note}" for name, build in ((a_name, a), (b_name, b))
             if (note := toolkit_note(build, toolkit))]
    if across(a, b):
        from nvstage.inspect.build_compare import paired_rows

        kernels = [Row(k, fa, fb, b_key=kb_name) for k, fa, fb, kb_name
                   in paired_rows(a, b, ra, rb, ka, kb, toolkit, block, notes)]
    else:
        kernels = [Row(k, ka.get(k, {}), kb.get(k, {})) for k in _union(ka, kb)]
    sa, sb = stage_times(a), stage_times(b)
    stages = [Row(k, sa.get(k, {}), sb.get(k, {})) for k in _union(sa, sb)]
    partial = {side: {"status": build.status, "note": note}
               for side, build in (("a", a), ("b", b)) if (note := partial_note(build))}
    return BuildDiff(a_name, b_name, kernels, stages, (a.stage_seconds, b.stage_seconds),
                     notes, partial)


def across(a, b) -> bool:
    """Whether two builds come through different compilers (or either through Triton): then
    their kernels are paired by name and compared with occupancy and mix too."""
    return a.via != b.via or "triton" in (a.via, b.via)


def _union(a: dict, b: dict) -> list[str]:
    return list(dict.fromkeys([*a, *b]))
