"""nvstage check: fail a build whose kernels break their budgets (or grew past a baseline); a
whole build's kernels from its build record, each annotated at its source line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import handled
from nvstage.cli.options import nvcc_option
from nvstage.errors import UsageError
from nvstage.report.terminal.console import data_console


def check_cmd(
    target: Annotated[Optional[Path], typer.Argument(
        help="A .cu file (compiled first, with [tool.nvstage.compile] options), a keep "
        "folder, or its stages.json; or a build folder built with nvstage as the compiler "
        "launcher (every kernel of every translation unit). Default: source in "
        "[tool.nvstage].",
        show_default=False)
        ] = None,
    config: Annotated[Optional[Path], typer.Option("--config",
        help="pyproject.toml or a budgets TOML file (default: the nearest pyproject.toml "
        "with [tool.nvstage]).")] = None,
    baseline: Annotated[Optional[Path], typer.Option("--baseline",
        help="An earlier check report (--write-baseline) or stages.json to compare with: "
        "kernels in both are compared, one added or removed since is a note.")] = None,
    run_report: Annotated[Optional[Path], typer.Option("--run-report",
        help="A run profile (nvstage run --profile --json) for the time budgets.")] = None,
    fmt: Annotated[str, typer.Option("--format",
        help="text, json, github (workflow annotations) or markdown.")] = "text",
    json_out: Annotated[bool, typer.Option("--json", help="Same as --format json.")] = False,
    summary: Annotated[Optional[Path], typer.Option("--summary",
        help="Append a Markdown summary to this file (e.g. $GITHUB_STEP_SUMMARY).")] = None,
    write_baseline: Annotated[Optional[Path], typer.Option("--write-baseline",
        help="Write this check's report (JSON) here, for a later --baseline.")] = None,
    keep_dir: Annotated[Optional[str], typer.Option("--keep-dir",
        help="For a .cu: keep the build here (default: a temporary folder).")] = None,
    time_trace: Annotated[Optional[Path], typer.Option("--time-trace", metavar="PATH",
        help="nvcc's -fdevice-time-trace files (a trace or a folder of them) for "
        "[budgets.compile_time]; default: a build folder's own, or a .cu's traced as it is "
        "built.")] = None,
    time_baseline: Annotated[Optional[Path], typer.Option("--time-baseline", metavar="PATH",
        help="An earlier build's -fdevice-time-trace files: a unit, header, template set or "
        "device function whose time grew beyond the noise both builds show fails.")] = None,
    nvcc: nvcc_option("Use this nvcc instead of the one from the pip wheels.") = None,
) -> None:
    """Check kernels against budgets: registers, spills, shared memory, sizes, arches, times.

    Exits 1 when any budget is broken, naming each kernel (and its line, for GitHub), 0 when
    all hold. Given a build folder whose nvcc commands ran through nvstage, every kernel of
    the project is checked, each violation at the kernel's line in its translation unit; a
    unit whose last build failed is listed as not checked, and fails the check (exit 1).
    Budgets live in [tool.nvstage.budgets] of pyproject.toml, or in a TOML file given with
    --config that holds the same tables at its top level:

        [budgets]                       # every kernel, and the whole build
        max_registers = 64
        no_spills = true                # or max_spill_bytes = 64
        required_arches = ["sm_80", "sm_90"]

        [budgets.kernels."saxpy*"]      # one kernel (name or glob) overrides
        max_registers = 32

        [baseline]                      # growth allowed over --baseline
        registers = 0.10

    Also: max_shared_bytes, max_cubin_bytes, max_fatbin_bytes, max_kernel_us,
    [budgets.stage_seconds], [budgets.run] and [budgets.compile_time] (max_unit_seconds,
    max_front_end_seconds, max_header_seconds, max_template_set_seconds,
    max_template_set_count, max_function_seconds: from nvcc's -fdevice-time-trace files).

    Examples:

          nvstage check kernels/saxpy.cu --config budgets.toml

          nvstage check build.nvstage --format github --summary "$GITHUB_STEP_SUMMARY"

          nvstage check kernels/saxpy.cu --baseline main-check.json --write-baseline check.json

          nvstage check build/ --config budgets.toml --format github
    """
    from nvstage.check.target import check_build
    from nvstage.report.terminal.check import FORMATS, render

    with handled(json_out or fmt == "json"):
        if fmt not in FORMATS:
            raise UsageError(f"unknown --format {fmt!r}", hint=f"choose {', '.join(FORMATS)}")
        if json_out and fmt not in ("text", "json"):
            raise UsageError(f"--json and --format {fmt} ask for two outputs",
                             hint="give one of them; --summary FILE adds the Markdown summary "
                                  "to any format")
        result = check_build(target, config=config, baseline=baseline, run_report=run_report,
                              keep_dir=keep_dir, nvcc=nvcc, time_trace=time_trace,
                              time_baseline=time_baseline)
        render(result, "json" if json_out else fmt, con=data_console(False), summary=summary,
               write_baseline=write_baseline)
        if not result.passed:
            raise typer.Exit(1)
