"""nvstage compare: two workloads side by side (unfused vs fused), estimated, and measured
where a GPU is present."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from nvstage.artifacts import json_safe
from nvstage.cli.common import data_console, emit_json, handled, stderr
from nvstage.cli.model import CalibrateOpt, GpuOpt, GpuSpecOpt, NvccOpt, _us, svg_option


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
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")
        ] = False,
) -> None:
    """Compare two workloads (unfused vs fused) term by term, with a verdict.

    Launches, intermediate bytes, kernels, registers, spills,
    occupancy, and the estimated decomposition (measured too with --measure on a GPU); the
    difference explained term by term, and a verdict that respects noise.

    Examples:

          nvstage compare examples/model/chain_unfused.toml examples/model/chain_fused.toml

          cd examples/model && nvstage compare chain_fused.toml chain_fused_wide.toml --svg f.svg

          nvstage compare A.toml B.toml --gpu h200 --measure --json
    """
    with handled(json_out):
        from nvstage.model.compare import compare
        from nvstage.model.calibrate import calibrate as fit
        from nvstage.compiler.toolkit import find_toolkit
        from nvstage.cli.model import gpu_option_value, write_svg

        target = gpu_option_value(gpu, gpu_spec)
        from nvstage.model.estimate import require_figures

        require_figures(target)
        toolkit = find_toolkit(nvcc)
        calibration = fit(calibrate, target, toolkit=toolkit) if calibrate else None
        err = stderr()
        cmp = compare(a, b, target, calibration=calibration, measure=measure, toolkit=toolkit,
                      log=lambda m: err.print(m, markup=False, style="dim"))
        if svg:
            from nvstage.report.bars import bar_from_decomposition, bar_from_estimate

            bars = [bar_from_estimate(cmp.a), bar_from_estimate(cmp.b)]
            if cmp.measured:
                bars += [bar_from_decomposition(cmp.measured["a"], cmp.a.workload),
                         bar_from_decomposition(cmp.measured["b"], cmp.b.workload)]
            write_svg(svg, bars, title=f"{cmp.a.workload} vs {cmp.b.workload} on {target.name}",
                      subtitle=cmp.verdict.short(cmp.a.workload, cmp.b.workload))
        if json_out:
            emit_json(json_safe(cmp.to_json()))
            return
        render(cmp, data_console(False))


def render(cmp, con) -> None:
    from rich import box
    from rich.table import Table

    a, b = cmp.a, cmp.b
    t = Table(box=box.SIMPLE, title=f"{a.workload} (A) vs {b.workload} (B) on {a.gpu.name}")
    t.add_column("")
    t.add_column("A", justify="right")
    t.add_column("B", justify="right")
    t.add_column("B - A", justify="right")

    def row(label, va, vb, fmt=str, diff=True):
        d = fmt(vb - va) if diff and isinstance(va, (int, float)) else ""
        t.add_row(label, fmt(va), fmt(vb), d)

    row("launches", a.n_launches, b.n_launches)
    row("kernels", len(a.kernels), len(b.kernels))
    row("kernel bytes (DRAM)", a.kernel_bytes, b.kernel_bytes)
    row("intermediate bytes written", a.intermediate_bytes_written,
        b.intermediate_bytes_written)
    row("intermediate bytes read", a.intermediate_bytes_read, b.intermediate_bytes_read)
    row("FLOPs", a.flops, b.flops, lambda v: f"{v:.4g}")
    row("max registers", max(x.facts.registers for x in a.launches),
        max(x.facts.registers for x in b.launches))
    row("spill bytes", _spills(a), _spills(b), lambda v: "-" if v is None else str(v),
        diff=False)
    row("min occupancy", min(x.facts.occupancy for x in a.launches),
        min(x.facts.occupancy for x in b.launches), lambda v: f"{v:.0%}")
    for label, fa, fb in (("sum launch us (estimate)", a.launch_s, b.launch_s),
                          ("sum kernel us (estimate)", a.kernel_s, b.kernel_s),
                          ("sum transfer us (estimate)", a.transfer_s, b.transfer_s),
                          ("T us (estimate)", a.total_s, b.total_s),
                          ("pipelined us (estimate)", a.pipelined_s, b.pipelined_s)):
        row(label, fa, fb, _us)
    if cmp.measured:
        for key, label in (("launch", "sum launch"), ("kernel", "sum kernel"),
                           ("transfer", "sum transfer"), ("total", "T"), ("wall", "wall")):
            sa, sb = getattr(cmp.measured["a"], key), getattr(cmp.measured["b"], key)
            if sa and sb:
                row(f"{label} us (measured median)", sa.median * 1e-9, sb.median * 1e-9, _us)
    con.print(t)
    k = Table(box=box.SIMPLE, title="kernels (registers and spills from ptxas, occupancy "
                                     "theoretical)")
    for col in ("side", "kernel", "regs", "spill bytes", "smem", "block", "occupancy",
                "limited by", "kernel us (estimate)", "bound"):
        k.add_column(col, justify="right" if col in ("regs", "spill bytes", "smem", "block",
                                                     "occupancy", "kernel us (estimate)")
                     else "left")
    for side, e in (("A", a), ("B", b)):
        for x in e.launches:
            f = x.facts
            sp = "-" if f.spill_stores is None else str((f.spill_stores or 0)
                                                        + (f.spill_loads or 0))
            k.add_row(side, x.kernel, str(f.registers), sp,
                      str(f.shared_static + f.shared_dynamic), str(f.block_size),
                      f"{f.occupancy:.0%}", ", ".join(f.limiters), _us(x.t_kernel_s), x.bound)
    con.print(k)
    con.print("difference B - A, term by term (estimate):", markup=False)
    for term in cmp.terms:
        con.print(f"  {term.name:<24} {term.seconds * 1e6:+10.2f} us  {term.detail}",
                  markup=False)
    con.print(f"  {'total':<24} {(b.total_s - a.total_s) * 1e6:+10.2f} us", markup=False)
    con.print(f"verdict: {cmp.verdict.sentence(a.workload, b.workload)}", markup=False)
    con.print(f"verdict without transfers (launch + kernel): "
              f"{cmp.device_verdict.sentence(a.workload, b.workload)}", markup=False)
    if cmp.measured_verdict:
        con.print(f"verdict (measured): {cmp.measured_verdict.sentence(a.workload, b.workload)}",
                  markup=False)
    if cmp.measure_note:
        con.print(cmp.measure_note, markup=False)
    for n in cmp.notes + list(a.notes) + list(b.notes):
        con.print(f"note: {n}", markup=False)


def _spills(e) -> int | None:
    vals = [x.facts for x in e.launches]
    if any(f.spill_stores is None for f in vals):
        return None
    return sum((f.spill_stores or 0) + (f.spill_loads or 0) for f in vals)
