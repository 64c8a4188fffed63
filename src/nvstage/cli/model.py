"""nvstage model: the offline estimate of a workload's launch / kernel / transfer time."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import handled
from nvstage.cli.options import CalibrateOpt, GpuOpt, GpuSpecOpt, NvccOpt, json_option, svg_option
from nvstage.report.terminal.console import say

def model_cmd(
    workload: Annotated[Path, typer.Argument(help="The workload TOML file (with its "
                                             "NAME.cost.toml beside it).", show_default=False)],
    gpu: GpuOpt = None,
    gpu_spec: GpuSpecOpt = None,
    cost: Annotated[Optional[Path], typer.Option("--cost",
        help="The per-launch reads, writes and FLOPs (default: NAME.cost.toml).")] = None,
    calibrate: CalibrateOpt = None,
    svg: svg_option("Also draw the decomposition as a stacked bar to this SVG file.") = None,
    nvcc: NvccOpt = None,
    json_out: json_option("Print the estimate as JSON.") = False,
    init: Annotated[bool, typer.Option("--init",
        help="Write a commented workload and cost file to fill in for a kernel of WORKLOAD, "
             "here a .cu file, a Triton .py file (with --signature) or a kept Triton build "
             "(no GPU named).")] = False,
    kernel: Annotated[Optional[str], typer.Option("--kernel",
        help="With --init: the kernel (needed when the file has several).")] = None,
    output: Annotated[Optional[str], typer.Option("-o", "--output",
        help="With --init: NAME for NAME.toml and NAME.cost.toml (default: the file's "
             "stem).")] = None,
    include_dir: Annotated[Optional[list[str]], typer.Option("-I", "--include-dir",
        help="With --init: a folder to search for headers, as nvcc's -I (repeatable; kept "
             "in the workload).")] = None,
    flag: Annotated[Optional[list[str]], typer.Option("--flag",
        help="With --init: an nvcc flag the code is built with, e.g. --flag=--use_fast_math "
             "(repeatable; the flags a workload accepts; kept in the workload).")] = None,
    signature: Annotated[Optional[str], typer.Option("--signature",
        help="With --init FILE.py: each parameter's Triton type, as nvstage compile --via "
             "triton takes it: 'x:*fp32,n:i32' (the file is read, never run).")] = None,
    constexpr: Annotated[Optional[list[str]], typer.Option("--constexpr",
        help="With --init FILE.py: a tl.constexpr's value, NAME=VALUE (repeatable).")] = None,
) -> None:
    """Estimate T = sum launch + sum kernel + sum transfer for a workload, with no GPU.

    Kernels are compiled for the GPU's arch: their registers and shared memory give the
    occupancy, their SASS the loads in flight per warp and the instruction mix. Each launch is
    bound by DRAM, memory latency, issue, each pipe, shared memory and a floor; its time is the
    largest (DRAM and latency added) and its limiter is named. Copies are latency plus bytes
    over the PCIe link. Every figure is an estimate, shown with its inputs and sources.

    Examples:

          nvstage model examples/model/chain_unfused.toml --gpu h200

          nvstage model examples/model/matmul_tiled.toml --gpu l4 --json

          nvstage model examples/model/reduce.toml --calibrate run.json --svg reduce.svg

          nvstage model --init layernorm.cu --kernel layernorm_forward_kernel1 -o ln

          nvstage model --init fusion_chain.py --kernel fused --signature 'x:*fp32,n:i32'
    """
    from nvstage.compiler.toolkit.locate import find_toolkit
    from nvstage.hw.gpus import choose_gpu
    from nvstage.model.estimate import estimate
    from nvstage.report.terminal.model import present

    if init:
        from nvstage.model.init import checked_flags, write_skeleton
        from nvstage.model.init_triton import is_triton_input, write_triton_skeleton

        with handled(False):
            then = None
            if is_triton_input(workload):
                written, then = write_triton_skeleton(
                    workload, kernel=kernel, output=output, signature=signature,
                    constexprs=tuple(constexpr or ()), nvcc_words=[*(flag or ()),
                                                                   *(include_dir or ())],
                    arch=choose_gpu(gpu, gpu_spec).arch if gpu or gpu_spec else None)
            else:
                written = write_skeleton(workload, find_toolkit(nvcc), kernel=kernel,
                                         output=output, flags=checked_flags(flag or ()),
                                         include_dirs=tuple(include_dir or ()),
                                         triton_words=(signature, *(constexpr or ())))
            for p in written:
                say(f"wrote {p}")
            if then:
                say(then, soft_wrap=True)  # a command to paste: one line
        return
    with handled(json_out):
        e = estimate(workload, choose_gpu(gpu, gpu_spec), cost=cost, calibration=calibrate,
                     toolkit=find_toolkit(nvcc))
        present(e, json_out=json_out, svg=svg)
