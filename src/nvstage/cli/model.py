"""nvstage model: the offline estimate of a workload's launch / kernel / transfer time."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.artifacts import json_safe
from nvstage.cli.common import data_console, emit_json, handled, stderr

# Options that model, compare and run share: one definition each.
GpuOpt = Annotated[Optional[str], typer.Option("--gpu",
    help="A GPU preset: h200, h100, a100, l4, l40s, rtx4090, b200.")]
GpuSpecOpt = Annotated[Optional[Path], typer.Option("--gpu-spec",
    help="A custom GPU spec (.toml or .json; see nvstage.hw.gpus.load_gpu_spec).")]
CalibrateOpt = Annotated[Optional[Path], typer.Option("--calibrate",
    help="Fit the presets to a measured report (nvstage run W --profile --json FILE).")]
NvccOpt = Annotated[Optional[str], typer.Option("--nvcc", envvar="NVSTAGE_NVCC",
    help="Compile with this nvcc instead of the one from the pip wheels.")]


def svg_option(help: str):
    return Annotated[Optional[Path], typer.Option("--svg", help=help)]


def gpu_option_value(gpu: str | None, gpu_spec: Path | None):
    """The GpuSpec named by --gpu or read from --gpu-spec (h200 when neither is given)."""
    from nvstage.errors import UsageError
    from nvstage.hw.gpus import load_gpu_spec, resolve_gpu

    if gpu and gpu_spec:
        raise UsageError("give --gpu or --gpu-spec, not both")
    return load_gpu_spec(gpu_spec) if gpu_spec else resolve_gpu(gpu or "h200")


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
    json_out: Annotated[bool, typer.Option("--json", help="Print the estimate as JSON.")
        ] = False,
) -> None:
    """Estimate T = sum launch + sum kernel + sum transfer for a workload, with no GPU.

    Kernels are compiled for the GPU's arch so their real registers and shared memory give
    the occupancy; kernel time is a roofline (bytes over bandwidth or FLOPs over peak, from
    the cost file); copies are latency plus bytes over the PCIe link. Every figure is an
    estimate, shown with its inputs and the source of each preset.

    Examples:

          nvstage model examples/model/chain_unfused.toml --gpu h200

          nvstage model examples/model/matmul_tiled.toml --gpu l4 --json

          nvstage model examples/model/reduce.toml --calibrate run.json --svg reduce.svg
    """
    with handled(json_out):
        from nvstage.model.calibrate import calibrate as fit
        from nvstage.model.estimate import estimate, require_figures
        from nvstage.model.costfile import load_model_input
        from nvstage.compiler.toolkit import find_toolkit

        target = gpu_option_value(gpu, gpu_spec)
        require_figures(target)
        w, spec = load_model_input(workload, cost)
        toolkit = find_toolkit(nvcc)
        calibration = fit(calibrate, target, toolkit=toolkit) if calibrate else None
        e = estimate(w, target, cost=spec, calibration=calibration, toolkit=toolkit)
        if svg:
            from nvstage.report.bars import bar_from_estimate

            write_svg(svg, [bar_from_estimate(e)], title=f"{w.name} on {target.name}",
                      subtitle="every figure an estimate" + (" (calibrated)" if calibration
                                                               else ""))
        if json_out:
            doc = e.to_json()
            doc["calibration"] = calibration.to_json() if calibration else None
            emit_json(json_safe(doc))
            return
        render_estimate(e, data_console(False), calibration)


def write_svg(path: Path, bars, *, title: str, subtitle: str = "") -> None:
    """Stacked bars (``report.bars.Bar``) to an SVG file, atomically."""
    from nvstage.artifacts import write_atomic
    from nvstage.errors import UsageError
    from nvstage.report.bars import bars_svg

    try:
        svg = bars_svg(bars, title=title, subtitle=subtitle)
    except ValueError as e:  # figures that cannot be drawn: say so, no traceback
        raise UsageError(f"cannot draw {path}: {e}") from None
    write_atomic(path, svg)
    stderr().print(f"wrote {path}", markup=False)


def _us(s: float) -> str:
    return f"{s * 1e6:.2f}"


def render_estimate(e, con, calibration=None) -> None:
    """Per-launch and per-copy rows, the decomposition, the presets: all estimates."""
    from rich import box
    from rich.table import Table

    g = e.gpu
    con.print(f"ESTIMATE for {e.workload} on {g.display_name or g.name} ({g.arch}): "
              f"{g.memory_bandwidth / 1e12:.2f} TB/s, {g.fp32_flops / 1e12:.1f} TFLOP/s FP32, "
              f"{g.sm_count} SMs, PCIe {g.pcie_bandwidth / 1e9:.1f} GB/s per direction "
              f"(datasheet figures)", markup=False)
    from nvstage.report.units import fmt_bytes

    repeats = any(x.repeat != 1 for x in e.launches)
    t = Table(box=box.SIMPLE_HEAD, title="kernels, one repetition (estimate)", pad_edge=False,
              caption="GB/s: the DRAM bandwidth assumed achievable at this occupancy",
              caption_justify="left")
    cols = ["kernel"] + (["times"] if repeats else []) + [
        "grid x block", "regs", "spills", "smem", "occ", "DRAM", "GFLOP", "GB/s", "bound",
        "kernel us", "launch us"]
    for col in cols:
        t.add_column(col, justify="left" if col in ("kernel", "bound") else "right",
                     no_wrap=True)
    for x in e.launches:
        f = x.facts
        spills = "-" if f.spill_stores is None else str((f.spill_stores or 0)
                                                        + (f.spill_loads or 0))
        t.add_row(x.kernel, *([str(x.repeat)] if repeats else []),
                  f"{f.grid_blocks}x{f.block_size}", str(f.registers), spills,
                  str(f.shared_static + f.shared_dynamic), f"{f.occupancy:.0%}",
                  fmt_bytes(x.counts.bytes), f"{x.counts.flops / 1e9:.3g}",
                  f"{x.bandwidth / 1e9:.0f}", x.bound, _us(x.t_kernel_s), _us(x.t_launch_s))
    con.print(t)
    c = Table(box=box.SIMPLE, title="copies (estimate)")
    for col in ("op", "buffer", "bytes", "host memory", "GB/s est", "us"):
        c.add_column(col, justify="left" if col in ("op", "buffer", "host memory") else "right")
    for x in e.transfers:
        c.add_row(x.kind, x.buffer, fmt_bytes(x.nbytes), x.host_memory,
                  f"{x.bandwidth / 1e9:.1f}", _us(x.t_s))
    if e.transfers:
        con.print(c)
    s = Table(box=box.SIMPLE, title="decomposition, one repetition (us, estimate)")
    s.add_column("term")
    s.add_column("estimate", justify="right")
    for label, v in (("sum launch (host)", e.launch_s), ("sum kernel (GPU)", e.kernel_s),
                     ("sum transfer (GPU)", e.transfer_s), ("T (sequential)", e.total_s),
                     ("pipelined, one stream", e.pipelined_s),
                     ("bound if copies were chunked over streams", e.overlapped_bound_s)):
        s.add_row(label, _us(v))
    con.print(s)
    con.print(f"launches {e.n_launches}, kernels {len(e.kernels)}, kernel DRAM bytes "
              f"{e.kernel_bytes}, intermediates {', '.join(e.intermediates) or 'none'} "
              f"({e.intermediate_bytes_written} bytes written, {e.intermediate_bytes_read} "
              f"read)", markup=False)
    p = e.presets
    con.print("presets (estimate inputs):", markup=False)
    for name in p.names():
        con.print(f"  {name} = {getattr(p, name):.4g}  [{p.source(name)}]", markup=False)
    if calibration is not None:
        con.print(f"calibration from {calibration.profile}:", markup=False)
        for ch in calibration.changes:
            rel = f"{ch.relative:+.1%}" if ch.relative is not None else "new"
            con.print(f"  {ch.name}: {ch.before:.4g} -> {ch.after:.4g} ({rel}; {ch.how}, "
                      f"{ch.samples} sample{'s' if ch.samples != 1 else ''})", markup=False)
        for n in calibration.notes:
            con.print(f"  note: {n}", markup=False)
    for n in e.notes:
        con.print(f"note: {n}", markup=False)
