"""nvstage run: launch a workload's kernels on the GPU, check the results, decompose the time.

The order of checks, so a bad workload is reported the same way on any machine:
1. the workload file is parsed (errors name the file, table and key; exit 2);
2. the code is compiled (or read) and every launch is validated against the kernels' real
   parameter lists (exit 2), with no GPU needed;
3. ``--dry-run`` stops here and prints the plan;
4. only then is the driver probed: no driver or GPU is one line and exit 7, never a hang;
5. the run itself: a failing kernel, copy or allocation is named (exit 8) with what ran before
   it kept in ``--json``; a failed check exits 9.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.artifacts import json_safe
from nvstage.cli.common import data_console, emit_json, handled, stderr
from nvstage.errors import CheckFailed, NvstageError
from nvstage.cli.model import NvccOpt, svg_option

DEFAULT_ARCH = "sm_90"  # used to validate (and dry-run) when no --arch and no GPU is seen


def run_cmd(
    workload: Annotated[Path, typer.Argument(help="The workload TOML file.",
                                             show_default=False)],
    profile: Annotated[bool, typer.Option("--profile",
        help="Time every launch (host), kernel and copy (GPU), and decompose the total.")
        ] = False,
    mode: Annotated[str, typer.Option("--mode",
        help="serialized: synchronise after every operation (the sequential baseline); "
             "pipelined: asynchronous, as real programs run.")] = "serialized",
    json_file: Annotated[Optional[Path], typer.Option("--json",
        help="Write the run document (schema nvstage.run/1) to this file; - for stdout "
             "(the tables then go to stderr).")] = None,
    trace_file: Annotated[Optional[Path], typer.Option("--trace",
        help="Write a Chrome/Perfetto trace (host, kernel and copy lanes) to this file.")
        ] = None,
    arch: Annotated[Optional[str], typer.Option("--arch",
        help="Compile for this arch (default: the GPU's; sm_90 to validate without one).")
        ] = None,
    reps: Annotated[Optional[int], typer.Option("--reps",
        help="Repetitions (default: the workload's [run] reps).")] = None,
    warmup: Annotated[Optional[int], typer.Option("--warmup",
        help="Warm-up repetitions (default: the workload's).")] = None,
    cupti: Annotated[bool, typer.Option("--cupti",
        help="Also collect CUPTI activity records (needs the cupti extra).")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", "--validate-only",
        help="Validate the workload and print the plan of operations; needs no GPU.")
        ] = False,
    svg: svg_option("Draw the measured decomposition as a stacked bar to this SVG file "
                     "(needs --profile).") = None,
    nvcc: NvccOpt = None,
) -> None:
    """Run a workload's kernels on the GPU, check the results, and measure the time.

    With --profile: each launch's host time, each kernel's and copy's GPU time (event pairs;
    CUPTI too with --cupti), bytes and bandwidth of each copy (pinned host memory), module
    load time apart, and T = sum launch + sum kernel + sum transfer against the measured wall
    time, with medians and spread over repetitions. Figures below the measured noise floor
    are flagged.

    A kernel that faults is named (exit 8) and what ran before it is kept in --json. A
    kernel that does not finish within NVSTAGE_GPU_TIMEOUT_S seconds (default 60) ends the
    run the same way, never a hang.

    Examples:

          nvstage run examples/run/saxpy.toml --profile

          nvstage run examples/run/many_launches.toml --profile --mode pipelined --trace t.json

          nvstage run examples/run/saxpy.toml --profile --svg saxpy.svg

          nvstage run examples/run/vadd.toml --dry-run
    """
    from nvstage.errors import NoDriver

    emitted: list[dict] = []  # the document, once it is on stdout (--json -)
    with handled(False):
        try:
            _run(workload, profile, mode, json_file, trace_file, arch, reps, warmup, cupti,
                 dry_run, nvcc, svg, emitted)
        except NvstageError as e:
            if _to_stdout(json_file) and not emitted:  # stdout still carries one document
                emit_json(e.to_json())
            if isinstance(e, NoDriver):  # exactly one line, never wrapped by the console
                _say(e, hint=False)
                raise typer.Exit(e.exit_code) from None
            raise


def _to_stdout(json_file: Path | None) -> bool:
    return json_file is not None and str(json_file) == "-"


def _run(workload, profile, mode, json_file, trace_file, arch, reps, warmup, cupti, dry_run,
         nvcc, svg=None, emitted: list | None = None) -> None:
    from nvstage.errors import NoDriver, UsageError
    from nvstage.run.probe import probe
    from nvstage.compiler.toolkit import find_toolkit
    from nvstage.run.prepare import load_and_validate
    from nvstage.run.workload import Workload
    from nvstage.run.workload.dry_run import dry_run_lines, dry_run_plan

    if mode not in ("serialized", "pipelined"):
        raise UsageError(f"unknown --mode {mode!r}", hint="choose serialized or pipelined")
    from nvstage.run.workload.spec import MAX_REPS

    for name, v in (("--reps", reps), ("--warmup", warmup)):
        if v is not None and not (1 if name == "--reps" else 0) <= v <= MAX_REPS:
            raise UsageError(f"{name} must be {'>= 1' if name == '--reps' else '>= 0'} and "
                             f"at most {MAX_REPS}")
    for name, v in (("--trace", trace_file), ("--svg", svg), ("--cupti", cupti)):
        if v and not profile and not dry_run:  # these need the per-op figures
            raise UsageError(f"{name} needs --profile", hint=f"nvstage run {workload} "
                             f"--profile {name}{'' if name == '--cupti' else ' FILE'}")
    err = stderr()
    w = Workload.from_toml(workload)
    w.check_work(reps, warmup)  # --reps/--warmup replace the file's: bound them as a whole
    p = probe()
    arch_note = ""
    if arch is None:
        arch, arch_note = _default_arch(p)
    toolkit = find_toolkit(nvcc)
    w, prep, notes = load_and_validate(w, arch, toolkit=toolkit)
    for n in notes:
        err.print(f"note: {n.where}: {n.message}", markup=False, highlight=False)
    to_stdout = _to_stdout(json_file)
    if dry_run:
        out = data_console(to_stdout)
        if arch_note:
            err.print(arch_note, markup=False)
        for line in dry_run_lines(w):
            out.print(line, markup=False, highlight=False)
        if to_stdout:
            emit_json(json_safe({"schema": "nvstage.run-plan/1", "arch": arch,
                                 **dry_run_plan(w)}))
        err.print(f"valid: {len(w.launches)} launch entr{'y' if len(w.launches) == 1 else 'ies'}"
                  f", {w.operation_count()} operations per repetition (no GPU used)",
                  markup=False)
        return
    if not p.available:  # one line: what is missing and what still works
        raise NoDriver(f"cannot run on a GPU: {p.reason}; compile, show and the offline tools "
                       "still work (the workload is valid)")
    from nvstage.errors import GpuRunFailed
    from nvstage.run.document import run_document
    from nvstage.run.session import run_workload

    def log(msg: str) -> None:
        err.print(msg, markup=False, style="dim")

    result, failure = None, None
    try:
        result = run_workload(w, prep, mode=mode, reps=reps, warmup=warmup, profile=profile,
                              use_cupti=cupti, timeline=trace_file is not None, toolkit=toolkit,
                              log=log)
    except GpuRunFailed as e:
        failure, result = e, e.result
    except KeyboardInterrupt as e:  # work may still be queued: never wait for it at exit
        signum = getattr(e, "signum", None) or 2  # a Terminated carries its signal
        _exit_now(GpuRunFailed("interrupted while the GPU was running the workload",
                               op="interrupted"), code=128 + signum)
    try:
        _write_reports(doc=run_document(result, w, prep, probe=p,
                                        error=failure.to_json() if failure else None),
                       result=result, w=w, mode=mode, to_stdout=to_stdout,
                       json_file=json_file, trace_file=trace_file, svg=svg, err=err,
                       emitted=emitted)
    except NvstageError as e:  # a report could not be written
        if failure is None or not failure.context_lost:
            raise
        err.print(f"error: {e.message}", markup=False)
    finally:  # with work left on the GPU, never reach the finalizers
        if failure is not None and failure.context_lost:
            _exit_now(failure)
    if failure:
        raise failure
    if result.status == "check-failed":
        raise CheckFailed("the results do not match the check: "
                          + "; ".join(f"{c.buffer}: {c.mismatches}/{c.elements} differ"
                                      f"{' (' + c.message + ')' if c.message else ''}"
                                      for c in result.checks if not c.ok))


def _write_reports(*, doc, result, w, mode, to_stdout, json_file, trace_file, svg, err,
                   emitted) -> None:
    """The tables, then each export asked for: --json (file or stdout), --trace, --svg."""
    from nvstage.artifacts import write_json_atomic

    if result is not None:
        render(result, data_console(to_stdout))
    if to_stdout:
        emit_json(json_safe(doc))
        if emitted is not None:
            emitted.append(doc)
    elif json_file:
        write_json_atomic(json_file, doc)
        err.print(f"wrote {json_file}", markup=False)
    if trace_file and result is not None and result.timeline is not None:
        from nvstage.report.trace import chrome_trace

        write_json_atomic(trace_file, chrome_trace(
            result.timeline, result.decomposition,
            {"workload": w.name, "mode": mode, "device": result.device.get("name")}))
        err.print(f"wrote {trace_file}", markup=False)
    if svg and result is not None and result.decomposition is not None \
            and result.decomposition.reps:
        write_run_svg(svg, result, w.name)


def _say(e: NvstageError, *, hint: bool = True) -> None:
    """The error (and its hint) as plain lines on stderr, flushed: for the exits that do not
    go through ``handled`` and its console."""
    import sys

    sys.stderr.write(f"error: {e.message}\n" + (f"hint: {e.hint}\n" if hint and e.hint
                                                else ""))
    sys.stdout.flush()
    sys.stderr.flush()


def _exit_now(failure, code: int | None = None) -> None:
    """Work is still running (or queued) on the GPU: end the process without the
    finalizers, which would free memory and destroy the context, and so wait for that work.
    Called once every report that could be written is written."""
    import os

    _say(failure)
    os._exit(failure.exit_code if code is None else code)


def write_run_svg(path, result, name: str) -> None:
    """The measured decomposition (medians over repetitions) as one stacked bar."""
    from nvstage.report.bars import bar_from_decomposition
    from nvstage.cli.model import write_svg

    device = (result.device or {}).get("name") or "GPU"
    write_svg(path, [bar_from_decomposition(result.decomposition, name)],
              title=f"{name} on {device}",
              subtitle=f"measured, {result.mode}, median of {len(result.decomposition.reps)} "
                       f"repetitions")


def _default_arch(p) -> tuple[str, str]:
    if p.available and getattr(p, "arch", None):
        return p.arch, ""
    if p.available:
        from nvstage.run.devices import nvml_gpus

        gpus, _, _ = nvml_gpus()
        if gpus:
            return gpus[0].arch, ""
    return DEFAULT_ARCH, (f"note: no GPU seen; validated for {DEFAULT_ARCH} (pass --arch to "
                          "choose)")


def _us(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1000:.2f}"


def render(result, con) -> None:
    """Per-op rows, the decomposition, the checks: all measured, units in the headers."""
    from rich import box
    from rich.table import Table

    d = result.decomposition
    load = result.load or {}
    if load:
        con.print(f"module load ({load.get('kind')}, {load.get('bytes')} bytes"
                  f"{', incl. PTX JIT' if load.get('includes_ptx_jit') else ''}): "
                  f"{load.get('seconds', 0) * 1e3:.2f} ms (not part of T)", markup=False)
    if d is not None and d.ops:
        t = Table(box=box.SIMPLE, title=f"operations, median over {len(d.reps)} reps "
                  f"(IQR), {result.mode}")
        for col in ("#", "op", "name", "host us", "GPU us", "GPU IQR us", "bytes", "GB/s",
                    "flags"):
            t.add_column(col, justify="right" if col not in ("op", "name", "flags") else "left")
        for o in d.ops:
            t.add_row(str(o.index), o.kind, o.name,
                      _us(o.host.median if o.host else None),
                      _us(o.gpu.median if o.gpu else None),
                      _us(o.gpu.iqr if o.gpu else None),
                      str(o.nbytes) if o.nbytes else "",
                      f"{o.bandwidth_gbs:.1f}" if o.bandwidth_gbs else "",
                      "; ".join(o.flags))
        con.print(t)
        s = Table(box=box.SIMPLE, title="decomposition (us): T = launch + kernel + transfer")
        for col in ("term", "median", "p25", "p75", "min", "max"):
            s.add_column(col, justify="left" if col == "term" else "right")
        for label, sp in (("sum launch (host)", d.launch), ("sum kernel (GPU)", d.kernel),
                          ("sum transfer (GPU)", d.transfer), ("T", d.total),
                          ("wall (measured)", d.wall), ("overlap = T - wall", d.overlap)):
            if sp:
                s.add_row(label, _us(sp.median), _us(sp.p25), _us(sp.p75), _us(sp.min),
                          _us(sp.max))
        con.print(s)
        f = d.floor
        con.print(f"noise floor: event resolution {_us(f.event_resolution_ns)} us, empty "
                  f"kernel {_us(f.empty_kernel_ns)} us, 4-byte copy {_us(f.smallest_copy_ns)} "
                  f"us (copies from pinned host memory)", markup=False)
        for flag in d.flags:
            con.print(f"flag: {flag}", markup=False)
    elif result.walls_ns:
        from nvstage.run.decompose import spread

        sp = spread(result.walls_ns)
        con.print(f"wall time per repetition: median {_us(sp.median)} us, IQR {_us(sp.iqr)} "
                  f"us over {sp.n} (run with --profile for the decomposition)", markup=False)
    for n in result.notes:
        con.print(f"note: {n}", markup=False)
    for c in result.checks:
        status = "pass" if c.ok else "FAIL"
        con.print(f"check {c.buffer}: {status} ({c.mismatches}/{c.elements} differ, max abs "
                  f"err {c.max_abs_err})", markup=False)
    con.print(f"status: {result.status}", markup=False)
