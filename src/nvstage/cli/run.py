"""nvstage run: launch a workload's kernels on the GPU, check the results, decompose the time.

The order of the checks is ``run.session.Session``'s. Here: the options, the session, what it
prints, and how the process ends: a run that left work on the GPU (a kernel that does not
finish, an interrupt) ends without the finalizers, which would wait for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import error_out, handled
from nvstage.cli.options import NvccOpt, svg_option
from nvstage.errors import NvstageError, NoDriver, GpuRunFailed, UsageError
from nvstage.report.terminal.console import say, print_plain_error


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
        help="Write the run document (schema nvstage.run/1) to this file, or with --dry-run "
             "the plan; - for stdout (the tables then go to stderr).")] = None,
    trace_file: Annotated[Optional[Path], typer.Option("--trace",
        help="Write a Chrome/Perfetto trace (host, kernel and copy lanes) to this file "
             "(needs --profile).")] = None,
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
    emitted: list[dict] = []  # the document, once it is on stdout (--json -)
    to_stdout = json_file is not None and str(json_file) == "-"
    with handled(False):
        try:
            _run(workload, profile=profile, mode=mode, json_file=json_file,
                 trace_file=trace_file, arch=arch, reps=reps, warmup=warmup, cupti=cupti,
                 dry_run=dry_run, nvcc=nvcc, svg=svg, emitted=emitted)
        except NvstageError as e:
            if to_stdout and not emitted:  # stdout still carries one document: this one
                error_out(e, True)
                raise typer.Exit(e.exit_code) from None
            if isinstance(e, NoDriver):  # exactly one line, never wrapped by the console
                _say(e, hint=False)
                raise typer.Exit(e.exit_code) from None
            raise


def _run(workload: Path, *, profile, mode, json_file, trace_file, arch, reps, warmup, cupti,
         dry_run, nvcc, svg, emitted: list) -> None:
    from nvstage.report.terminal import run as terminal
    from nvstage.run.session import open_session

    for name, v in (("--trace", trace_file), ("--svg", svg)):
        if v and dry_run:  # one line: a dry run measures nothing to draw
            raise UsageError(f"{name} draws measurements, and a dry run makes none: drop "
                             f"--dry-run and add --profile to write {v}")
    for name, v in (("--trace", trace_file), ("--svg", svg), ("--cupti", cupti)):
        if v and not profile and not dry_run:  # these need the per-op figures
            raise UsageError(f"{name} needs --profile", hint=f"nvstage run {workload} "
                             f"--profile {name}{'' if name == '--cupti' else ' FILE'}")
    session = open_session(workload, arch=arch, mode=mode, reps=reps, warmup=warmup,
                           nvcc=nvcc)
    terminal.findings(session)
    if dry_run:
        terminal.present_plan(session, json_file=json_file)
        return
    try:
        session.run(profile=profile, use_cupti=cupti, timeline=trace_file is not None,
                    log=lambda msg: say(msg, style="dim"))
    except KeyboardInterrupt as e:  # work may still be queued: never wait for it at exit
        signum = getattr(e, "signum", None) or 2  # a Terminated carries its signal
        _exit_now(GpuRunFailed("interrupted while the GPU was running the workload",
                               op="interrupted"), code=128 + signum)
    failure = session.failure
    try:
        terminal.present_run(session, json_file=json_file, trace_file=trace_file, svg=svg,
                             emitted=emitted)
    except NvstageError as e:  # a report could not be written
        if failure is None or not failure.context_lost:
            raise
        say(f"error: {e.message}")
    finally:  # with work left on the GPU, never reach the finalizers
        if failure is not None and failure.context_lost:
            _exit_now(failure)
    session.raise_for_status()


def _say(e: NvstageError, *, hint: bool = True) -> None:

    print_plain_error(e.message, e.hint if hint else None, e.more)


def _exit_now(failure, code: int | None = None) -> None:
    """Work is still running (or queued) on the GPU: end the process without the
    finalizers, which would free memory and destroy the context, and so wait for that work.
    Called once every report that could be written is written."""
    import os

    _say(failure)
    os._exit(failure.exit_code if code is None else code)
