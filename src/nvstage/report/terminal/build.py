"""A build on a terminal: the stage table, the summary line, NVRTC's name map, Triton's
metadata."""

from __future__ import annotations

import os
import re

from nvstage.compiler.manifest.model import Build, StageRun
from nvstage.report.terminal.console import plain_table, stderr, text_console
from nvstage.report.units import fmt_bytes, fmt_time, plural


def _short(path: str, base: str | None) -> str:
    if base and path.startswith(base.rstrip("/") + "/"):
        return os.path.relpath(path, base)
    return os.path.basename(path)


def _from(path: str, cwd: str) -> str:
    """``path`` as the folder the build ran in reaches it; absolute from a folder since
    removed (``cli/transparent.GONE``), which no relative path starts from."""
    return path if cwd == "/proc/self/cwd" else os.path.relpath(path, cwd)


def stage_table(build: Build):
    """One row per stage: order, stage, tool, arch, inputs -> outputs, size, time. Where that
    is too wide, narrower layouts of the same cells: the tool under the stage (where it
    differs) and every file on its own line; then the arch under the stage too; then, as
    every table, stacked records (``report/terminal/table.py``)."""
    wide = _stage_table(build, narrow=False, tiny=False)
    wide.narrower = (_stage_table(build, narrow=True, tiny=False),
                     _stage_table(build, narrow=True, tiny=True))
    return wide


def _stage_table(build: Build, *, narrow: bool, tiny: bool):
    t = plain_table(pad_edge=False, key=2)
    # One line a stage, its files a list that wraps between them (a file's name whole).
    cols = [("#", {"justify": "right"}), ("stage", {}), ("tool", {}), ("arch", {}),
            ("inputs -> outputs", {"prose": not narrow}), ("size", {"justify": "right"}),
            ("time", {"justify": "right"})]
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


# A build with no keep folder names its intermediates as plain nvcc does (the names reach the
# object): the table shows them without nvcc's temporary prefix, as a kept folder names them.
_TMPXFT = re.compile(r"tmpxft_00000000_[0-9a-f]{8}-\d+_")


def _row(run: StageRun, build: Build, narrow: bool = False) -> list[str]:
    s = run.stage
    base = build.keep_dir or build.cwd
    ins = [_TMPXFT.sub("", _short(p if os.path.isabs(p) else os.path.join(build.cwd, p), base))
           for p in s.inputs] or ["-"]
    outs = [_TMPXFT.sub("", a.name) for a in run.artifacts] or ["-"]
    if narrow:
        io = ",\n".join(ins) + "\n-> " + ",\n   ".join(outs)
    else:
        io = f"{', '.join(ins)} -> {', '.join(outs)}"
    size = sum(a.size for a in run.artifacts)
    time = fmt_time(run.seconds) + (("\n" if narrow else " ") + "(cached)"
                                       if run.cached else "")
    if run.where is not None:  # a distributed stage (compiler/dist): where it ran
        time += ("\n" if narrow else " ") + f"({run.where})"
    if not run.ok:
        time = f"FAILED ({run.returncode})"
    return [str(s.index), s.kind.value, s.tool, s.arch or "", io,
            fmt_bytes(size) if run.artifacts else "", time]


def summary_line(build: Build, kept: bool = True) -> str:
    """Wall time, the stage sum, the critical path (the wall-time floor) and the cache.
    ``kept``: False when the keep folder was nvstage's own temporary one (``--show`` without
    ``--keep``), removed by the time the line is read: the line names no folder then."""
    n = len(build.runs)
    parts = [f"{plural(n, 'stage')} in {fmt_time(build.wall_seconds)}",
             f"stage sum {fmt_time(build.stage_seconds)}"]
    if build.via == "nvcc":  # the runtime path asks nvcc for no plan
        parts.append(f"plan {fmt_time(build.plan_seconds)}")
    if build.critical_path:
        chain = " > ".join(str(i) for i in build.critical_path)
        parts.append(f"critical path {fmt_time(build.critical_path_seconds)} ({chain})")
    if build.jobs > 1:
        parts.append(f"-j {build.jobs}")
    cache = build.cache
    if cache:
        parts.append(f"cache {plural(cache['hits'], 'hit')}, "
                     f"{plural(cache['misses'], 'miss', 'misses')}")
    text = ", ".join(parts)
    if build.output:
        text += f"; output {_from(build.output, build.cwd)}"
    if build.keep_dir:
        if kept:
            text += f"; kept in {_from(build.keep_dir, build.cwd)}"
    elif any(_TMPXFT.search(a.name) for r in build.runs for a in r.artifacts):
        text += "; intermediates removed (named as plain nvcc names them: tmpxft_..._NAME)"
    return text + f"\ntoolkit: {build.toolkit.describe()}"


def name_map_table(build: Build):
    """Expression -> mangled name for a runtime build; None when there is none."""
    name_map = getattr(build, "name_map", None)
    if not name_map:
        return None
    t = plain_table(pad_edge=False)
    t.add_column("name expression")
    t.add_column("mangled name")
    for expr, mangled in name_map.items():
        t.add_row(expr, mangled)
    return t


def render_name_map(build: Build, console) -> None:
    """Print expression -> mangled name for a runtime build (nothing when there is none)."""
    table = name_map_table(build)
    if table is not None:
        console.print(table)


def render_build(build: Build, con, *, kept: bool = True) -> None:
    """What ``nvstage compile`` prints: nvcc's own planning warnings (stderr), the stage
    table (``con``), NVRTC's name map, what the tools printed (stderr, as nvcc passes it
    through), then the summary line (stderr; ``kept`` as ``summary_line`` takes it)."""
    from rich.text import Text


    err = stderr()
    _render_planning(build, err)
    _render_table(build, con)
    _render_tools(build, err)
    err.print(Text(summary_line(build, kept)), soft_wrap=True)


def whole_view(build: Build) -> dict:
    """What ``nvstage compile`` prints into a pipe when it is answered whole from the cache
    next time (``compiler/cache/command/compile_answer.py`` keeps it in the entry): ``build`` rendered
    now, every stage cached. ``before``, ``table`` and ``after``: stderr before the table,
    stdout, stderr after it (the summary line, made at the answer, left out)."""
    import dataclasses
    import io


    view = dataclasses.replace(build, runs=[dataclasses.replace(r, cached=True)
                                            for r in build.runs])
    before, table, after = io.StringIO(), io.StringIO(), io.StringIO()
    _render_planning(view, text_console(before))
    _render_table(view, text_console(table))
    _render_tools(view, text_console(after))
    tail = f"; output {_from(build.output, build.cwd)}" if build.output else ""
    return {"before": before.getvalue(), "table": table.getvalue(), "after": after.getvalue(),
            "stages": len(build.runs), "tail": f"{tail}\ntoolkit: {build.toolkit.describe()}"}


def _render_planning(build: Build, err) -> None:
    from rich.text import Text

    for line in build.plan.messages:  # nvcc's own warnings while it planned
        err.print(Text(line))


def _render_table(build: Build, con) -> None:
    con.print(stage_table(build))
    render_name_map(build, con)
    if build.via == "triton":
        from nvstage.report.terminal.triton import render_triton

        render_triton(build, con)


def _render_tools(build: Build, err) -> None:
    from rich.text import Text

    for run in build.runs:
        # NVRTC's stdout is the name-expression map, already shown as a table.
        outs = (run.stderr,) if build.via == "nvrtc" else (run.stdout, run.stderr)
        text = "\n".join(t.rstrip() for t in outs if t.strip())
        if text and run.ok:
            cached = ", cached" if run.cached else ""
            err.print(Text(f"[{run.stage.index} {run.stage.kind.value} {run.stage.tool}"
                           f"{cached}]", style="dim"))
            err.print(Text(text), soft_wrap=True)
