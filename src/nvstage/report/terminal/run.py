"""``nvstage run`` out: the plan of a dry run; the measured tables; the run document (a file or
stdout), the Chrome trace and the SVG asked for."""

from __future__ import annotations

from nvstage.report.terminal.console import data_console, emit_json, plain_table, say
from nvstage.report.units import fmt_time, fmt_us


def findings(session) -> None:
    """What validation noted (on stderr): it holds for a dry run and a run alike."""
    for n in session.findings:
        say(f"note: {n.where}: {n.message}")


def present_plan(session, *, json_file=None, to_stdout: bool = False) -> None:
    """A dry run: the operations of one repetition, and its JSON (the plan) in ``json_file``
    ("-": stdout; ``to_stdout`` says the same)."""
    from nvstage.run.workload.dry_run import dry_run_lines

    w = session.workload
    to_stdout = to_stdout or (json_file is not None and str(json_file) == "-")
    out = data_console(to_stdout)
    if session.arch_note:
        say(session.arch_note)
    for line in dry_run_lines(w):
        out.print(line, markup=False, highlight=False)
    if to_stdout:
        emit_json(session.plan())
    elif json_file is not None:
        from nvstage.files import write_json_atomic

        write_json_atomic(json_file, session.plan())
        say(f"wrote {json_file} (the plan: a dry run measures nothing)")
    say(f"valid: {len(w.launches)} launch entr{'y' if len(w.launches) == 1 else 'ies'}, "
        f"{w.operation_count()} operations per repetition (no GPU used)")


def present_run(session, *, json_file=None, trace_file=None, svg=None,
                emitted: list | None = None) -> None:
    """The tables, then each export asked for: the run document (``json_file``; "-" is
    stdout, and the document is appended to ``emitted`` once it is there), the trace, the
    SVG."""
    from nvstage.files import write_json_atomic

    result, w = session.result, session.workload
    to_stdout = json_file is not None and str(json_file) == "-"
    doc = session.document()
    if result is not None:
        render(result, data_console(to_stdout))
    if to_stdout:
        emit_json(doc)
        if emitted is not None:
            emitted.append(doc)
    elif json_file:
        write_json_atomic(json_file, doc)
        say(f"wrote {json_file}")
    if trace_file and result is not None and result.timeline is not None:
        from nvstage.report.trace import chrome_trace

        write_json_atomic(trace_file, chrome_trace(
            result.timeline, result.decomposition,
            {"workload": w.name, "mode": session.mode, "device": result.device.get("name")}))
        say(f"wrote {trace_file}")
    if svg and result is not None and result.decomposition is not None \
            and result.decomposition.reps:
        from nvstage.report.bars import run_svg

        run_svg(svg, result, w.name)
        say(f"wrote {svg}")


def render(result, con) -> None:
    """Per-op rows, the decomposition, the checks: all measured, units in the headers."""
    d = result.decomposition
    load = result.load or {}
    if load:
        con.print(f"module load ({load.get('kind')}, {load.get('bytes')} bytes"
                  f"{', incl. PTX JIT' if load.get('includes_ptx_jit') else ''}): "
                  f"{fmt_time(load.get('seconds', 0), 'ms', digits=2)} (not part of T)",
                  markup=False)
    if d is not None and d.ops:
        t = plain_table(box_style="SIMPLE", title=f"operations, median over {len(d.reps)} "
                        f"reps (IQR), {result.mode}")
        for col in ("#", "op", "name", "host us", "GPU us", "GPU IQR us", "bytes", "GB/s",
                    "flags"):
            t.add_column(col, justify="right" if col not in ("op", "name", "flags") else "left")
        for o in d.ops:
            t.add_row(str(o.index), o.kind, o.name,
                      fmt_us(ns=o.host.median if o.host else None),
                      fmt_us(ns=o.gpu.median if o.gpu else None),
                      fmt_us(ns=o.gpu.iqr if o.gpu else None),
                      str(o.nbytes) if o.nbytes else "",
                      f"{o.bandwidth_gbs:.1f}" if o.bandwidth_gbs else "",
                      "; ".join(o.flags))
        con.print(t)
        s = plain_table(box_style="SIMPLE",
                        title="decomposition (us): T = launch + kernel + transfer")
        for col in ("term", "median", "p25", "p75", "min", "max"):
            s.add_column(col, justify="left" if col == "term" else "right")
        for label, sp in (("sum launch (host)", d.launch), ("sum kernel (GPU)", d.kernel),
                          ("sum transfer (GPU)", d.transfer), ("T", d.total),
                          ("wall (measured)", d.wall), ("overlap = T - wall", d.overlap)):
            if sp:
                s.add_row(label, *(fmt_us(ns=v) for v in (sp.median, sp.p25, sp.p75, sp.min,
                                                          sp.max)))
        con.print(s)
        f = d.floor
        con.print(f"noise floor: event resolution {fmt_us(ns=f.event_resolution_ns)} us, "
                  f"empty kernel {fmt_us(ns=f.empty_kernel_ns)} us, 4-byte copy "
                  f"{fmt_us(ns=f.smallest_copy_ns)} us (copies from pinned host memory)",
                  markup=False)
        for flag in d.flags:
            con.print(f"flag: {flag}", markup=False)
    elif result.walls_ns:
        from nvstage.run.decompose import spread

        sp = spread(result.walls_ns)
        con.print(f"wall time per repetition: median {fmt_us(ns=sp.median)} us, IQR "
                  f"{fmt_us(ns=sp.iqr)} us over {sp.n} (run with --profile for the decomposition)",
                  markup=False)
    for n in result.notes:
        con.print(f"note: {n}", markup=False)
    for c in result.checks:
        status = "pass" if c.ok else "FAIL"
        con.print(f"check {c.buffer}: {status} ({c.mismatches}/{c.elements} differ, max abs "
                  f"err {c.max_abs_err})", markup=False)
    con.print(f"status: {result.status}", markup=False)
