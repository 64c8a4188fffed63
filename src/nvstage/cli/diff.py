"""nvstage diff: two builds side by side, or one source through nvcc and NVRTC."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import emit_json, handled
from nvstage.cli.options import JsonOpt, nvcc_option


def diff_cmd(
    a: Annotated[Path, typer.Argument(
        help="A build: a keep folder or stages.json, or a build folder with a build record "
        "(BUILD@N for its build N; alone, its last build against the one before); with --via, "
        "the .cu file.", show_default=False)],
    b: Annotated[Optional[Path], typer.Argument(
        help="The other build (of the same kind as A); with --via, a second .cu file linked "
        "with the first.", show_default=False)] = None,
    via: Annotated[Optional[str], typer.Option("--via",
        help="Compare compiler paths for ONE .cu file instead: nvcc,nvrtc.")] = None,
    arch: Annotated[Optional[str], typer.Option("--arch", help="With --via: the arch (sm_90); "
        "with --lineinfo: the arch to compare where a build has several.")
        ] = None,
    lto: Annotated[bool, typer.Option("--lto", help="With --via: link-time optimisation.")
        ] = False,
    all_rows: Annotated[bool, typer.Option("--all",
        help="Show unchanged kernels (with --lineinfo: lines) too.")] = False,
    kernel: Annotated[Optional[str], typer.Option("--kernel", "-k", metavar="NAME[,NAME_B]",
        help="With --lineinfo: the kernel to compare; NAME_A,NAME_B for two kernels (of one "
        "build when B is A or not given).")] = None,
    lineinfo: Annotated[bool, typer.Option("--lineinfo",
        help="Compare --kernel source line by source line: instructions and peak live "
        "registers per line, and the lines where they rose (needs -lineinfo builds).")
        ] = False,
    block: Annotated[Optional[int], typer.Option("--block", metavar="N",
        help="Two builds through different compilers (nvcc, NVRTC, Triton): the launch block "
        "of the nvcc and NVRTC kernels, for their occupancy (a Triton kernel's is its "
        "num_warps x 32).")] = None,
    nvcc: nvcc_option("Use this nvcc's toolkit.") = None,
    json_out: JsonOpt = False,
) -> None:
    """Compare two builds kernel by kernel and stage by stage.

    Per kernel registers, spills, shared memory, SASS instructions, cubin size; per stage
    time; each with its delta. Two build folders (or two builds of one record): per unit and
    stage time, cache hits and fallbacks; per kernel registers, spills, shared memory, SASS
    bytes and occupancy; added and removed kernels. Builds through different compilers (a kept
    Triton build and an nvcc one of the same operation) pair their kernels by name and add
    occupancy and the SASS instruction mix. With --via, one source through nvcc, NVRTC and LTO
    instead.

    Examples:

          nvstage diff before.nvstage after.nvstage

          nvstage diff build build-release

          nvstage diff build                  # its last build against the one before

          nvstage diff build@1 build@3

          nvstage diff chain.nvstage fused.triton --block 256

          nvstage diff kernels/saxpy.cu --via nvcc,nvrtc --arch sm_90

          nvstage diff kernels/lto_a.cu kernels/lto_b.cu --via nvcc,nvrtc --arch sm_90 --lto

          nvstage diff r64.nvstage r32.nvstage --kernel spill --lineinfo

          nvstage diff chain.nvstage --kernel fused,fused_wide --lineinfo
    """
    from nvstage.compiler.toolkit.locate import find_toolkit
    from nvstage.errors import UsageError
    from nvstage.inspect import record_diff
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
        elif lineinfo or kernel:
            if not (lineinfo and kernel):
                raise UsageError("--kernel and --lineinfo go together: diff A B --kernel NAME "
                                 "--lineinfo")
            if b is None and "," not in kernel:
                raise UsageError("one build and one kernel: nothing to compare",
                                 hint="give two builds, or two kernels: --kernel A,B")
            from nvstage.inspect.line_diff import diff_lines

            result = diff_lines(a, a if b is None else b, kernel, find_toolkit(nvcc),
                                arch=arch)
            terminal.render_lines(result, data_console(json_out), all_rows=all_rows)
        elif record_diff.is_record(str(a)) or (b is not None and record_diff.is_record(str(b))):
            if b is not None and not (record_diff.is_record(str(a))
                                      and record_diff.is_record(str(b))):
                one, other = (a, b) if record_diff.is_record(str(a)) else (b, a)
                raise UsageError(f"{one} is a build folder with a build record and {other} is "
                                 "not: diff compares two of a kind",
                                 hint="give two build folders, or two keep folders")
            from nvstage.report.terminal import record_diff as records

            result = record_diff.diff_records(a, b)
            records.render(result, data_console(json_out), all_rows=all_rows)
        else:
            if b is None:
                raise UsageError("diff needs two builds", hint="nvstage diff A B (keep folders "
                                 "or stages.json, or build folders), or one .cu file with "
                                 "--via nvcc,nvrtc")
            from nvstage.inspect.build_diff import diff_builds

            if block is not None and not 1 <= block <= 1024:
                raise UsageError(f"--block {block}: a block holds 1 to 1024 threads")
            result = diff_builds(a, b, find_toolkit(nvcc), block=block)
            terminal.render(result, data_console(json_out), all_rows=all_rows)
        if json_out:
            emit_json(result.to_json())
