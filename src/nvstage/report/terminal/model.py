"""``nvstage model`` and ``nvstage compare`` on a terminal: every figure an estimate (or, with
``--measure``, a measurement), said so in each title."""

from __future__ import annotations

from nvstage.report.terminal.console import emit_json, plain_table, say, stdout
from nvstage.report.units import fmt_bytes, fmt_time, fmt_us


def _spill_bytes(f) -> str:
    return "-" if f.spill_bytes is None else str(f.spill_bytes)


def render_estimate(e, con) -> None:
    """Per-launch and per-copy rows, the decomposition, the presets: all estimates."""
    g = e.gpu
    clock = f"{g.boost_clock_mhz:g} MHz, " if g.boost_clock_mhz else ""
    latency = (f", memory latency {g.memory_latency_s * 1e9:.0f} ns (published)"
               if g.memory_latency_s else "")
    con.print(f"ESTIMATE for {e.workload} on {g.display_name or g.name} ({g.arch}): "
              f"{g.memory_bandwidth / 1e12:.2f} TB/s, {g.fp32_flops / 1e12:.1f} TFLOP/s FP32, "
              f"{g.sm_count} SMs, {clock}PCIe {g.pcie_bandwidth / 1e9:.1f} GB/s per direction "
              f"(datasheet figures){latency}", markup=False)
    repeats = any(x.repeat != 1 for x in e.launches)
    t = plain_table(title="kernels, one repetition (estimate)", pad_edge=False,
                    caption="in flight: global loads a warp keeps in flight (SASS); "
                            "limited by: the largest bound, detailed below",
                    caption_justify="left")
    cols = ["kernel"] + (["times"] if repeats else []) + [
        "grid x block", "regs", "spills", "smem", "occ", "DRAM", "in flight", "limited by",
        "kernel us", "launch us"]
    for col in cols:
        t.add_column(col, justify="left" if col in ("kernel", "limited by") else "right",
                     no_wrap=True)
    for x in e.launches:
        f = x.facts
        t.add_row(x.kernel, *([str(x.repeat)] if repeats else []),
                  f"{f.grid_blocks}x{f.block_size}", str(f.registers), _spill_bytes(f),
                  str(f.shared_static + f.shared_dynamic), f"{f.occupancy:.0%}",
                  fmt_bytes(x.counts.bytes),
                  f"{x.code.loads_per_trip:.3g}" if x.code else "-", x.limiter,
                  fmt_us(x.t_kernel_s), fmt_us(x.t_launch_s))
    con.print(t)
    b = plain_table(box_style="SIMPLE", key=2,
                    title="bounds per launch (us, estimate): kernel time = "
                          "max(DRAM + latency, issue, pipes, shared, peaks, floor)")
    for col in ("kernel", "bound", "us", "how"):  # how: a sentence, wrapped between words
        b.add_column(col, justify="right" if col == "us" else "left", prose=col == "how")
    for x in e.launches:
        for bd in x.bounds.bounds:
            if bd.seconds or bd.name == x.limiter:
                mark = " <- limiter" if bd.name == x.limiter else ""
                b.add_row(x.kernel, bd.name + mark, fmt_us(bd.seconds), bd.detail)
        if x.code and x.code.trips:
            b.add_row(x.kernel, "loop trips", "",
                      f"{', '.join(f'{t:g}' for t in x.code.trips)} ({x.code.trips_source})")
    con.print(b)
    render_loops(e, con)
    c = plain_table(box_style="SIMPLE", title="copies (estimate)", key=2)
    for col in ("op", "buffer", "bytes", "host memory", "GB/s est", "us"):
        c.add_column(col, justify="left" if col in ("op", "buffer", "host memory") else "right")
    for x in e.transfers:
        c.add_row(x.kind, x.buffer, fmt_bytes(x.nbytes), x.host_memory,
                  f"{x.bandwidth / 1e9:.1f}", fmt_us(x.t_s))
    if e.transfers:
        con.print(c)
    s = plain_table(box_style="SIMPLE", title="decomposition, one repetition (us, estimate)")
    s.add_column("term")
    s.add_column("estimate", justify="right")
    for label, v in (("sum launch (host)", e.launch_s), ("sum kernel (GPU)", e.kernel_s),
                     ("sum transfer (GPU)", e.transfer_s), ("T (sequential)", e.total_s),
                     ("pipelined, one stream", e.pipelined_s),
                     ("bound if copies were chunked over streams", e.overlapped_bound_s)):
        s.add_row(label, fmt_us(v))
    con.print(s)
    lines = [f"launches {e.n_launches}, kernels {len(e.kernels)}, kernel DRAM bytes "
             f"{e.kernel_bytes}, intermediates {', '.join(e.intermediates) or 'none'} "
             f"({e.intermediate_bytes_written} bytes written, {e.intermediate_bytes_read} "
             f"read)", "presets (estimate inputs):"]
    p = e.presets
    lines += [f"  {name} = {getattr(p, name):.4g}  [{p.source(name)}]" for name in p.names()]
    calibration = e.calibration
    if calibration is not None:
        lines.append(f"calibration from {calibration.profile}:")
        for ch in calibration.changes:
            rel = f"{ch.relative:+.1%}" if ch.relative is not None else "new"
            lines.append(f"  {ch.name}: {ch.before:.4g} -> {ch.after:.4g} ({rel}; {ch.how}, "
                         f"{ch.samples} sample{'s' if ch.samples != 1 else ''})")
        lines += [f"  note: {n}" for n in calibration.notes]
    lines += [f"note: {n}" for n in e.notes]
    for line in lines:
        con.print(line, markup=False)


def render_loops(e, con) -> None:
    """Each kernel's loops as compiled: source line, SASS range, shape, trip count per entry
    of the loop around it (derived from the code, or why not), and the count used."""
    launches = [x for x in e.launches if x.code and x.code.loops]
    if not launches:
        return
    t = plain_table(box_style="SIMPLE", key=2,
                    title="loops (SASS order; trips per entry of the loop around it, the "
                          "longest lane's, followed with the workload's values)")
    for col in ("kernel", "loop", "line", "SASS", "shape", "derived", "used", "how"):
        t.add_column(col, justify="right" if col in ("loop", "line", "derived", "used")
                     else "left", prose=col in ("shape", "how"))
    seen = set()
    for x in launches:
        if (x.kernel, x.code.trips) in seen:
            continue
        seen.add((x.kernel, x.code.trips))
        for r, used in zip(x.code.loops, x.code.trips):
            t.add_row(x.kernel, f"{r.index}" + ("" if r.depth == 1 else f" (in {r.depth - 1})"),
                      str(r.line) if r.line else "-", r.sass_range, r.shape or "-",
                      "-" if r.trips is None else f"{r.trips:g}"
                      + (f" = {r.expression}" if r.expression and r.expression != f"{r.trips:g}"
                         else ""), f"{used:g}", r.why)
    con.print(t)


def render_comparison(cmp, con) -> None:
    """Two estimates side by side, the difference term by term, the verdicts."""
    a, b = cmp.a, cmp.b
    t = plain_table(box_style="SIMPLE",
                    title=f"{a.workload} (A) vs {b.workload} (B) on {a.gpu.name}")
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
        row(label, fa, fb, fmt_us)
    if cmp.measured:
        for key, label in (("launch", "sum launch"), ("kernel", "sum kernel"),
                           ("transfer", "sum transfer"), ("total", "T"), ("wall", "wall")):
            sa, sb = getattr(cmp.measured["a"], key), getattr(cmp.measured["b"], key)
            if sa and sb:
                row(f"{label} us (measured median)", sa.median * 1e-9, sb.median * 1e-9, fmt_us)
    con.print(t)
    k = plain_table(box_style="SIMPLE", key=2, title="kernels (registers and spills from ptxas, "
                                               "occupancy theoretical)")
    for col in ("side", "kernel", "regs", "spill bytes", "smem", "block", "occupancy",
                "occupancy limit", "in flight", "kernel us (estimate)", "limited by"):
        k.add_column(col, justify="right" if col in ("regs", "spill bytes", "smem", "block",
                                                     "occupancy", "in flight",
                                                     "kernel us (estimate)") else "left")
    for side, e in (("A", a), ("B", b)):
        for x in e.launches:
            f = x.facts
            k.add_row(side, x.kernel, str(f.registers), _spill_bytes(f),
                      str(f.shared_static + f.shared_dynamic), str(f.block_size),
                      f"{f.occupancy:.0%}", ", ".join(f.limiters),
                      f"{x.code.loads_per_trip:.3g}" if x.code else "-", fmt_us(x.t_kernel_s),
                      x.limiter)
    con.print(k)
    from nvstage.model.compare import limiter_shift, limiters

    lines = [f"limiters (estimate): {limiter_shift(a, b)}", "each kernel's limiter (estimate):"]
    lines += [f"  A {line}" for line in limiters(a)] + [f"  B {line}" for line in limiters(b)]
    if cmp.measured:
        from nvstage.model.compare import kernels_measured

        lines.append("each kernel, estimate against measured median:")
        for side, e in (("A", a), ("B", b)):
            for k in kernels_measured(e, cmp.measured[side.lower()]):
                got = fmt_us(k["measured_s"]) if k["measured_s"] else "-"
                err = f" ({k['error']:+.1%})" if k["error"] is not None else ""
                lines.append(f"  {side} {k['kernel']}: {fmt_us(k['estimate_s'])} us estimated, "
                             f"{got} us measured{err}; limited by {k['limiter']}")
    lines.append("difference B - A, term by term (estimate):")
    lines += [f"  {term.name:<24} {fmt_time(term.seconds, 'us', digits=2, sign=True):>13}  "
              f"{term.detail}" for term in cmp.terms]
    lines.append(f"  {'total':<24} "
                 f"{fmt_time(b.total_s - a.total_s, 'us', digits=2, sign=True):>13}")
    lines.append(f"verdict: {cmp.verdict.sentence(a.workload, b.workload)}")
    lines.append(f"verdict without transfers (launch + kernel): "
                 f"{cmp.device_verdict.sentence(a.workload, b.workload)}")
    if cmp.measured_verdict:
        lines.append(f"verdict (measured): "
                     f"{cmp.measured_verdict.sentence(a.workload, b.workload)}")
    if cmp.measure_note:
        lines.append(cmp.measure_note)
    lines += [f"note: {n}" for n in cmp.notes + list(a.notes) + list(b.notes)]
    for line in lines:
        con.print(line, markup=False)


def _spills(e) -> int | None:
    facts = [x.facts for x in e.launches]
    if any(f.spill_stores is None for f in facts):
        return None
    return sum(f.spill_bytes for f in facts)


def present(what, *, json_out: bool = False, svg=None, con=None) -> None:
    """What ``nvstage model`` (an ``Estimate``) or ``nvstage compare`` (a ``Comparison``)
    prints: the SVG when asked for, then JSON or the tables."""
    from nvstage.model.compare import Comparison
    from nvstage.report.bars import comparison_svg, estimate_svg

    draw, render = ((comparison_svg, render_comparison) if isinstance(what, Comparison)
                    else (estimate_svg, render_estimate))
    if svg:
        draw(svg, what)
        say(f"wrote {svg}")
    if json_out:
        emit_json(what.to_json())
    else:
        render(what, con or stdout())
