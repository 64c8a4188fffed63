"""Two builds side by side: per kernel (registers, spills, shared memory, SASS instructions,
cubin size) and per stage (time), with deltas. "What did my change do to the kernel?"."""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field

KERNEL_METRICS = ("registers", "spill_stores", "spill_loads", "shared_bytes",
                  "instructions", "cubin_size")


@dataclass(frozen=True)
class Row:
    key: str  # "kernel (arch)" or "stage kind (arch)"
    a: dict  # metric -> value (None: absent in that build)
    b: dict

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
        return {"key": self.key, "a": self.a, "b": self.b,
                "delta": {m: self.delta(m) for m in metrics}}


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


def kernel_figures(build, toolkit) -> dict[str, dict]:
    """"kernel (arch[, per file])" -> the kernel metrics, from the build's kept artifacts."""

    from nvstage.inspect.elf import read_cubin
    from nvstage.inspect.resources import build_resources
    from nvstage.artifacts import read_regular
    from nvstage.inspect.sass import disassemble

    out: dict[str, dict] = {}

    def key(name, arch, final=True):
        return f"{name} ({arch}{'' if final else ', per file'})"

    for r in build_resources(build, toolkit):
        out[key(r.demangled, r.arch, r.final)] = {
            "registers": r.registers, "spill_stores": r.spill_stores,
            "spill_loads": r.spill_loads, "shared_bytes": r.shared_bytes}
    for a in build.artifacts:
        if a.kind != "cubin" or not os.path.isfile(a.path):
            continue
        final = not read_cubin(read_regular(a.path), a.path).relocatable
        for k in disassemble(a.path, toolkit):
            if not k.is_entry:
                continue
            row = out.setdefault(key(k.demangled, k.arch, final), {})
            row["instructions"] = k.instruction_count
            row["cubin_size"] = a.size
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


def diff_builds(a, b, toolkit=None, *, a_name: str = "A", b_name: str = "B") -> BuildDiff:
    """Compare two ``Build`` s (e.g. from ``nvstage.compiler.record.load_build``)."""
    from nvstage.compiler.record import partial_note, reading_toolkit, toolkit_note

    toolkit = reading_toolkit(a, toolkit)
    ka, kb = kernel_figures(a, toolkit), kernel_figures(b, toolkit)
    kernels = [Row(k, ka.get(k, {}), kb.get(k, {})) for k in _union(ka, kb)]
    sa, sb = stage_times(a), stage_times(b)
    stages = [Row(k, sa.get(k, {}), sb.get(k, {})) for k in _union(sa, sb)]
    notes = [f"{name}: {note}" for name, build in ((a_name, a), (b_name, b))
             if (note := toolkit_note(build, toolkit))]
    partial = {side: {"status": build.status, "note": note}
               for side, build in (("a", a), ("b", b)) if (note := partial_note(build))}
    return BuildDiff(a_name, b_name, kernels, stages, (a.stage_seconds, b.stage_seconds),
                     notes, partial)


def diff_paths(a_path, b_path, toolkit=None) -> BuildDiff:
    from nvstage.compiler.record import load_build

    a, b = load_build(a_path), load_build(b_path)
    return diff_builds(a, b, toolkit, a_name=str(a_path), b_name=str(b_path))


def _union(a: dict, b: dict) -> list[str]:
    return list(dict.fromkeys([*a, *b]))
