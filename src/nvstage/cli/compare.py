"""nvstage compare: two workloads side by side (unfused vs fused), estimated, and measured
where a GPU is present."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvstage.cli.common import handled
from nvstage.cli.options import CalibrateOpt, GpuOpt, GpuSpecOpt, NvccOpt, json_option, svg_option
from nvstage.report.terminal.console import say


def compare_cmd(
    a: Annotated[Path, typer.Argument(help="Workload A (e.g. unfused).", show_default=False)],
    b: Annotated[Path, typer.Argument(help="Workload B (e.g. fused).", show_default=False)],
    gpu: GpuOpt = None,
    gpu_spec: GpuSpecOpt = None,
    calibrate: CalibrateOpt = None,
    measure: Annotated[bool, typer.Option("--measure",
        help="Also run both on the GPU (nvstage run's path, serialized, profiled); skipped "
             "with the reason when no driver is found.")] = False,
    svg: svg_option("Draw both decompositions as stacked bars to this SVG file.") = None,
    nvcc: NvccOpt = None,
    json_out: json_option("Print the comparison as JSON.") = False,
) -> None:
    """Compare two workloads (unfused vs fused) term by term, with a verdict.

    Launches, intermediate bytes, kernels, registers, spills, occupancy, loads in flight per
    warp, each kernel's limiter, and the estimated decomposition (measured too with --measure
    on a GPU); the difference explained by cause, and a verdict that respects noise.

    Examples:

          nvstage compare examples/model/chain_unfused.toml examples/model/chain_fused.toml

          cd examples/model && nvstage compare chain_fused.toml chain_fused_wide.toml --svg f.svg

          nvstage compare A.toml B.toml --gpu h200 --measure --json
    """
    from nvstage.compiler.toolkit.locate import find_toolkit
    from nvstage.hw.gpus import choose_gpu
    from nvstage.model.compare import compare
    from nvstage.report.terminal.model import present

    with handled(json_out):
        cmp = compare(a, b, choose_gpu(gpu, gpu_spec), calibration=calibrate, measure=measure,
                      toolkit=find_toolkit(nvcc), log=lambda m: say(m, style="dim"))
        present(cmp, json_out=json_out, svg=svg)
