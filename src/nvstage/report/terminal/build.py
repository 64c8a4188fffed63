"""Rich tables for builds. Plain text when the console has no colour (pipes, tests)."""

from __future__ import annotations

import os

from rich import box
from rich.table import Table

from nvstage.compiler.record import Build, StageRun
from nvstage.report.units import fmt_bytes, fmt_seconds


def _short(path: str, base: str | None) -> str:
    if base and path.startswith(base.rstrip("/") + "/"):
        return os.path.relpath(path, base)
    return os.path.basename(path)


# Below this many columns the stage table stacks its cells (one file per line, the tool under
# its stage) instead of letting file names break mid-word; below VERY_NARROW the arch goes
# under the stage too.
NARROW = 120
VERY_NARROW = 90


def stage_table(build: Build, width: int | None = None) -> Table:
    """One row per stage: order, stage, tool, arch, inputs -> outputs, size, time. On a
    console narrower than ``NARROW`` the tool goes under the stage (where it differs) and
    every file takes its own line."""
    narrow = width is not None and width < NARROW
    tiny = width is not None and width < VERY_NARROW
    t = Table(box=box.SIMPLE_HEAD, title=None, pad_edge=False)
    cols = [("#", {"justify": "right"}), ("stage", {"no_wrap": True}), ("tool", {}),
            ("arch", {"no_wrap": True}),
            ("inputs -> outputs", {"overflow": "fold", "min_width": 20}),
            ("size", {"justify": "right", "no_wrap": True}),
            ("time", {"justify": "right", "no_wrap": True})]
    if tiny:
        del cols[3]
    if narrow:
        del cols[2]
    for col, kw in cols:
        t.add_column(col, **kw)
    for run in build.runs:
        row = _row(run, build, narrow)
        if narrow:
            tool = row.pop(2)
            row[1] += f"\n({tool})" if tool != row[1] else ""
        if tiny:
            arch = row.pop(2)
            row[1] += f"\n{arch}" if arch else ""
        t.add_row(*row)
    return t


def _row(run: StageRun, build: Build, narrow: bool = False) -> list[str]:
    s = run.stage
    base = build.keep_dir or build.cwd
    ins = [_short(p if os.path.isabs(p) else os.path.join(build.cwd, p), base)
           for p in s.inputs] or ["-"]
    outs = [a.name for a in run.artifacts] or ["-"]
    if narrow:
        io = ",\n".join(ins) + "\n-> " + ",\n   ".join(outs)
    else:
        io = f"{', '.join(ins)} -> {', '.join(outs)}"
    size = sum(a.size for a in run.artifacts)
    time = fmt_seconds(run.seconds) + (("\n" if narrow else " ") + "(cached)"
                                       if run.cached else "")
    if not run.ok:
        time = f"FAILED ({run.returncode})"
    return [str(s.index), s.kind.value, s.tool, s.arch or "", io,
            fmt_bytes(size) if run.artifacts else "", time]


def summary_line(build: Build) -> str:
    """Wall time, the stage sum, the critical path (the wall-time floor) and the cache."""
    n = len(build.runs)
    parts = [f"{n} stages in {fmt_seconds(build.wall_seconds)}",
             f"stage sum {fmt_seconds(build.stage_seconds)}"]
    if build.via == "nvcc":  # the runtime path asks nvcc for no plan
        parts.append(f"plan {fmt_seconds(build.plan_seconds)}")
    if build.critical_path:
        chain = " > ".join(str(i) for i in build.critical_path)
        parts.append(f"critical path {fmt_seconds(build.critical_path_seconds)} ({chain})")
    if build.jobs > 1:
        parts.append(f"-j {build.jobs}")
    cache = build.cache
    if cache:
        parts.append(f"cache {cache['hits']} hit{'s' if cache['hits'] != 1 else ''}, "
                     f"{cache['misses']} miss{'es' if cache['misses'] != 1 else ''}")
    text = ", ".join(parts)
    if build.output:
        text += f"; output {os.path.relpath(build.output, build.cwd)}"
    if build.keep_dir:
        text += f"; kept in {os.path.relpath(build.keep_dir, build.cwd)}"
    return text + f"\ntoolkit: {build.toolkit.describe()}"
