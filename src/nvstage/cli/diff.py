"""nvstage diff: two builds side by side, or one source through nvcc and NVRTC."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import emit_json, handled
from nvstage.cli.options import DiffTimeOpt, JsonOpt, nvcc_option
from nvstage.cli.show_time import diff_time
from nvstage.report.terminal.console import data_console


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
        help="Show unchanged kernels too (with --lineinfo: the lines without code too).")] = False,
    pair: Annotated[Optional[list[str]], typer.Option("--pair", metavar="A=B",
        help="Compare A's kernel A with B's kernel B (repeatable): two versions of one "
        "operation in one build (give the build once), a renamed kernel, a Triton kernel and "
        "a CUDA one. A name as show prints it or as the source spells it.")] = None,
    kernel: Annotated[Optional[str], typer.Option("--kernel", "-k", metavar="NAME[,NAME_B]",
        help="The kernel to compare (--pair NAME=NAME); NAME_A,NAME_B is --pair "
        "NAME_A=NAME_B.")] = None,
    lineinfo: Annotated[bool, typer.Option("--lineinfo",
        help="Compare each pair source line by source line, the lines aligned by their "
        "text: instructions, peak live registers and local-memory (spill and stack) "
        "traffic per line, and where they rose (needs -lineinfo builds).")] = False,
    attribute: Annotated[str, typer.Option("--attribute", metavar="user|innermost",
        help="With --lineinfo: which line inlined code counts to, as show's line view: "
        "user (default), the line of yours that called it; innermost: nvdisasm's.")
        ] = "user",
    block: Annotated[Optional[int], typer.Option("--block", metavar="N",
        help="Two builds through different compilers (nvcc, NVRTC, Triton): the launch block "
        "of the nvcc and NVRTC kernels, for their occupancy (a Triton kernel's is its "
        "num_warps x 32).")] = None,
    time: DiffTimeOpt = False,
    nvcc: nvcc_option("Use this nvcc's toolkit.") = None,
    json_out: JsonOpt = False,
) -> None:
    """Compare two builds kernel by kernel and stage by stage.

    Per kernel registers, spills, shared memory, SASS instructions and its own SASS bytes;
    per stage time; each with its delta, and why a kernel changed (its PTX as well as its
    SASS, or the SASS alone; a register cap from -maxrregcount, __launch_bounds__ or
    __maxnreg__). Kernels are paired by name, or as --pair A=B names them; nothing paired is
    an error that names what each side has. Two build folders (or two builds of one record):
    per unit and stage time, cache hits and fallbacks; per kernel registers, spills, shared
    memory, SASS bytes and occupancy; added and removed kernels. Builds through different
    compilers (a kept Triton build and an nvcc one of the same operation) pair their kernels
    by name (or --pair) and add occupancy and the SASS instruction mix. With --lineinfo, each
    pair line by line, aligned by source. With --via, one source through nvcc, NVRTC and LTO
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

          nvstage diff ln.nvstage --lineinfo \\
              --pair layernorm_forward_kernel3=layernorm_forward_kernel4

          nvstage diff softmax.triton sm.nvstage --block 256 \\
              --pair softmax_kernel=softmax_forward_kernel
    """
    from nvstage import diffs
    from nvstage.inspect.pairs import parse
    from nvstage.report.terminal import diff as terminal

    with handled(json_out):
        if time:  # nvcc's -fdevice-time-trace files of two builds
            return diff_time(a, b, all_rows, json_out)
        result = diffs.run(diffs.DiffRequest(a, b, via, arch, lto, tuple(parse(pair, kernel)),
                                             lineinfo, attribute, block, nvcc))
        terminal.render_any(result, data_console(json_out), all_rows=all_rows)
        if json_out:
            emit_json(result.to_json())
