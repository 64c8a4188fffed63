"""nvstage diff: two builds side by side, or one source through nvcc and NVRTC."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import data_console, emit_json, handled, stderr


def diff_cmd(
    a: Annotated[Path, typer.Argument(
        help="A build (keep folder or stages.json); with --via, the .cu file.",
        show_default=False)],
    b: Annotated[Optional[Path], typer.Argument(
        help="The other build (keep folder or stages.json); with --via, a second .cu file "
        "linked with the first.", show_default=False)] = None,
    via: Annotated[Optional[str], typer.Option("--via",
        help="Compare compiler paths for ONE .cu file instead: nvcc,nvrtc.")] = None,
    arch: Annotated[Optional[str], typer.Option("--arch", help="With --via: the arch (sm_90).")
        ] = None,
    lto: Annotated[bool, typer.Option("--lto", help="With --via: link-time optimisation.")
        ] = False,
    all_rows: Annotated[bool, typer.Option("--all",
        help="Show unchanged kernels too.")] = False,
    nvcc: Annotated[Optional[str], typer.Option("--nvcc", envvar="NVSTAGE_NVCC",
        help="Use this nvcc's toolkit.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON to stdout.")] = False,
) -> None:
    """Compare two builds kernel by kernel and stage by stage.

    Per kernel registers, spills, shared memory, SASS instructions, cubin size; per stage
    time; each with its delta. With --via, one source through nvcc, NVRTC and LTO instead.

    Examples:

          nvstage diff before.nvstage after.nvstage

          nvstage diff kernels/saxpy.cu --via nvcc,nvrtc --arch sm_90

          nvstage diff kernels/lto_a.cu kernels/lto_b.cu --via nvcc,nvrtc --arch sm_90 --lto
    """
    from nvstage.errors import UsageError
    from nvstage.compiler.toolkit import find_toolkit

    with handled(json_out):
        if via is not None:
            paths = sorted(p.strip() for p in via.split(","))
            if paths != ["nvcc", "nvrtc"]:
                raise UsageError(f"--via {via!r}: only nvcc,nvrtc can be compared")
            if not arch:
                raise UsageError("--via needs --arch (e.g. --arch sm_90)")
            from nvstage.inspect import compiler_paths as crosspath
            sources = str(a) if b is None else [str(a), str(b)]
            toolkit = find_toolkit(nvcc)
            result = crosspath.compare_paths(sources, arch=arch, toolkit=toolkit, lto=lto)
            crosspath.render(result, data_console(json_out))
            if json_out:
                emit_json(result.to_json())
            return
        if b is None:
            raise UsageError("diff needs two builds", hint="nvstage diff A B (keep folders or "
                             "stages.json), or one .cu file with --via nvcc,nvrtc")
        from nvstage.inspect.build_diff import diff_paths

        result = diff_paths(a, b, find_toolkit(nvcc))
        for side in result.partial.values():  # before the tables: they hold part of a build
            stderr().print(f"note: {side['note']}", markup=False, soft_wrap=True)
        render(result, data_console(json_out), all_rows=all_rows)
        if json_out:
            emit_json(result.to_json())


def _fmt(v, metric: str) -> str:
    if v is None:
        return "-"
    if metric == "seconds":
        from nvstage.report.units import fmt_seconds

        return fmt_seconds(v)
    return str(v)


def _fmt_delta(d, metric: str) -> str:
    if d is None or d == 0:
        return "" if d == 0 else "-"
    if metric == "seconds":
        return f"{d * 1e3:+.1f} ms"
    return f"{d:+d}"


def render(result, con, *, all_rows: bool = False) -> None:
    from rich import box
    from rich.text import Text

    from nvstage.inspect.build_diff import KERNEL_METRICS
    from nvstage.cli.show import PlainTable as Table  # keys are kernel names: text, never markup

    labels = {"registers": "regs", "spill_stores": "spill st", "spill_loads": "spill ld",
              "shared_bytes": "smem", "instructions": "SASS instr", "cubin_size": "cubin bytes"}
    t = Table(box=box.SIMPLE_HEAD, title=Text(f"kernels: A = {result.a}, B = {result.b}",
                                              style="table.title"),
              title_justify="left", pad_edge=False)
    t.add_column("kernel", overflow="fold")
    for m in KERNEL_METRICS:
        t.add_column(f"{labels[m]} A->B", justify="right")
    shown = 0
    for r in result.kernels:
        if not all_rows and not r.changed:
            continue
        shown += 1
        t.add_row(r.key, *(f"{_fmt(r.a.get(m), m)} -> {_fmt(r.b.get(m), m)}"
                           f" {_fmt_delta(r.delta(m), m)}".rstrip() for m in KERNEL_METRICS))
    if shown:
        con.print(t)
    else:
        con.print(f"kernels: no change in {len(result.kernels)} kernel(s)", markup=False)
    s = Table(box=box.SIMPLE_HEAD, title="stages", title_justify="left", pad_edge=False)
    for c, j in (("stage", "left"), ("A", "right"), ("B", "right"), ("delta", "right")):
        s.add_column(c, justify=j)
    any_cached = False
    for r in result.stages:
        cached = r.a.get("cached") or r.b.get("cached")
        any_cached = any_cached or bool(cached)
        mark = {True: " (cached)", False: "", None: ""}
        s.add_row(r.key, _fmt(r.a.get("seconds"), "seconds") + mark[r.a.get("cached")],
                  _fmt(r.b.get("seconds"), "seconds") + mark[r.b.get("cached")],
                  "not comparable" if cached else
                  (_fmt_delta(r.delta("seconds"), "seconds") or "0"))
    ta, tb = result.total_seconds
    s.add_row("total", _fmt(ta, "seconds"), _fmt(tb, "seconds"),
              _fmt_delta(tb - ta, "seconds") or "0")
    con.print(s)
    for n in result.notes:
        con.print(f"note: {n}", markup=False)
    if any_cached:
        con.print("note: (cached) stages were restored from the stage cache, not run; build "
                  "with --no-cache to compare compile times")
