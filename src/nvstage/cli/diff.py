"""nvstage diff: two builds side by side, or one source through nvcc and NVRTC."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import emit_json, handled
from nvstage.cli.options import JsonOpt, nvcc_option


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
    nvcc: nvcc_option("Use this nvcc's toolkit.") = None,
    json_out: JsonOpt = False,
) -> None:
    """Compare two builds kernel by kernel and stage by stage.

    Per kernel registers, spills, shared memory, SASS instructions, cubin size; per stage
    time; each with its delta. With --via, one source through nvcc, NVRTC and LTO instead.

    Examples:

          nvstage diff before.nvstage after.nvstage

          nvstage diff kernels/saxpy.cu --via nvcc,nvrtc --arch sm_90

          nvstage diff kernels/lto_a.cu kernels/lto_b.cu --via nvcc,nvrtc --arch sm_90 --lto
    """
    from nvstage.compiler.toolkit import find_toolkit
    from nvstage.errors import UsageError
    from nvstage.report.terminal import diff as terminal
    from nvstage.report.terminal.console import data_console

    with handled(json_out):
        if via is not None:
            paths = sorted(p.strip() for p in via.split(","))
            if paths != ["nvcc", "nvrtc"]:
                raise UsageError(f"--via {via!r}: only nvcc,nvrtc can be compared")
            if not arch:
                raise UsageError("--via needs --arch (e.g. --arch sm_90)")
            from nvstage.inspect.compiler_paths import compare_paths

            result = compare_paths(str(a) if b is None else [str(a), str(b)], arch=arch,
                                   toolkit=find_toolkit(nvcc), lto=lto)
            terminal.render_paths(result, data_console(json_out))
        else:
            if b is None:
                raise UsageError("diff needs two builds", hint="nvstage diff A B (keep folders "
                                 "or stages.json), or one .cu file with --via nvcc,nvrtc")
            from nvstage.inspect.build_diff import diff_builds

            result = diff_builds(a, b, find_toolkit(nvcc))
            terminal.render(result, data_console(json_out), all_rows=all_rows)
        if json_out:
            emit_json(result.to_json())
