"""nvstage check: fail a build whose kernels break their budgets (or grew past a baseline)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import data_console, emit_json, handled, stderr

FORMATS = ("text", "json", "github", "markdown")


def check_cmd(
    target: Annotated[Optional[Path], typer.Argument(
        help="A .cu file (compiled first, with \\[tool.nvstage.compile] options), a keep "
        "folder, or its stages.json. Default: source in \\[tool.nvstage].",
        show_default=False)
        ] = None,
    config: Annotated[Optional[Path], typer.Option("--config",
        help="pyproject.toml or a budgets TOML file (default: the nearest pyproject.toml "
        "with \\[tool.nvstage]).")] = None,
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
    nvcc: Annotated[Optional[str], typer.Option("--nvcc", envvar="NVSTAGE_NVCC",
        help="Use this nvcc instead of the one from the pip wheels.")] = None,
) -> None:
    """Check kernels against budgets: registers, spills, shared memory, sizes, arches, times.

    Exits 1 when any budget is broken, naming each kernel (and its line, for GitHub), 0 when
    all hold. Budgets live in [tool.nvstage.budgets] of pyproject.toml, or in a TOML file
    given with --config that holds the same tables at its top level:

        [budgets]                       # every kernel, and the whole build
        max_registers = 64
        no_spills = true                # or max_spill_bytes = 64
        required_arches = ["sm_80", "sm_90"]

        [budgets.kernels."saxpy*"]      # one kernel (name or glob) overrides
        max_registers = 32

        [baseline]                      # growth allowed over --baseline
        registers = 0.10

    Also: max_shared_bytes, max_cubin_bytes, max_fatbin_bytes, max_kernel_us,
    [budgets.stage_seconds] and [budgets.run] (see examples/budgets.toml).

    Examples:

          nvstage check kernels/saxpy.cu --config budgets.toml

          nvstage check build.nvstage --format github --summary "$GITHUB_STEP_SUMMARY"

          nvstage check kernels/saxpy.cu --baseline main-check.json --write-baseline check.json
    """
    json_mode = json_out or fmt == "json"
    with handled(json_mode):
        from nvstage.artifacts import write_json_atomic
        from nvstage.check.budgets import find_config, load_budgets
        from nvstage.check.gate import check
        from nvstage.report.checks import github_annotations, markdown_summary, summary_line
        from nvstage.errors import UsageError
        from nvstage.compiler.toolkit import find_toolkit

        if fmt not in FORMATS:
            raise UsageError(f"unknown --format {fmt!r}", hint=f"choose {', '.join(FORMATS)}")
        if json_out and fmt not in ("text", "json"):
            raise UsageError(f"--json and --format {fmt} ask for two outputs",
                             hint="give one of them; --summary FILE adds the Markdown summary "
                                  "to any format")
        if json_out:
            fmt = "json"
        cfg = config or find_config()
        if cfg is None:
            raise UsageError("no budgets: no --config and no pyproject.toml with "
                             "[tool.nvstage] here or above",
                             hint="add [tool.nvstage.budgets] to pyproject.toml or pass "
                                  "--config budgets.toml")
        budgets = load_budgets(cfg)
        if target is None:
            if not budgets.source:
                raise UsageError("nothing to check: give a .cu file, keep folder or "
                                 "stages.json (or set source in [tool.nvstage])")
            target = Path(budgets.source)
        toolkit = find_toolkit(nvcc)
        with _build_of(target, budgets, toolkit, keep_dir) as build:
            result = check(build, budgets, toolkit=toolkit, run_report=run_report,
                           baseline=baseline)
        if result.checked == 0:
            # A gate that compared nothing would pass every build: say so instead.
            why = f"the build of {result.measurements.source} has no kernels" \
                if not result.measurements.kernels else \
                f"{cfg} sets no limit that applies to this build"
            raise UsageError(f"nothing was checked: {why}",
                             hint="set limits in [tool.nvstage.budgets]: max_registers = 64, "
                                  "no_spills = true, required_arches = [\"sm_90\"], ...")
        doc = result.to_json()
        if write_baseline:
            _write(write_baseline, "--write-baseline", lambda: write_json_atomic(write_baseline,
                                                                               doc))
            stderr().print(f"check report written to {write_baseline}", markup=False)
        if summary:
            _write(summary, "--summary", lambda: _append(summary, markdown_summary(result)))
        if fmt == "json":
            emit_json(doc)
        elif fmt == "github":
            typer.echo(github_annotations(result, base=os.environ.get("GITHUB_WORKSPACE")),
                       nl=False)
        elif fmt == "markdown":
            typer.echo(markdown_summary(result), nl=False)
        else:
            _text(result, data_console(False))
        for n in result.notes + [u.message for u in result.unmatched]:
            stderr().print(f"note: {n}", markup=False)
        stderr().print(f"nvstage check {summary_line(result)}", markup=False)
        if not result.passed:
            raise typer.Exit(1)


@contextlib.contextmanager
def _build_of(target: Path, budgets, toolkit, keep_dir: str | None) -> Iterator:
    """A Build for the target: a keep folder or manifest as it is; a .cu compiled now, its
    files kept (in a temporary folder without --keep-dir) while the check measures them."""
    from nvstage.artifacts import is_folder

    if is_folder(target) or target.name.endswith(".json"):
        from nvstage.compiler.record import load_build

        yield load_build(target)
        return
    from nvstage.compiler.driver import check_source

    check_source(target, target)  # missing, a FIFO, a name too long: one line each
    if keep_dir is not None:  # "" is refused there, not taken for "no folder"
        yield _compile(target, budgets, toolkit, keep_dir)
        return
    import tempfile

    from nvstage.compiler.driver import without_temp_keep
    from nvstage.errors import StageFailed

    with tempfile.TemporaryDirectory(prefix="nvstage-check-") as tmp:
        try:
            build = _compile(target, budgets, toolkit, tmp)
        except StageFailed as e:  # its keep folder goes with ``tmp``: never point there
            raise without_temp_keep(e, ["nvstage", "compile", str(target),
                                        *budgets.compile_options().nvcc_args()]) from None
        yield build


def _compile(target: Path, budgets, toolkit, keep_dir: str):
    from dataclasses import replace

    from nvstage.compiler.driver import compile as run_compile

    options = budgets.compile_options()
    if options.output is None:
        # nvcc would put the fatbin or object in the current folder, where a second check
        # overwrites it: it belongs with the rest of the build.
        suffix = "." + options.stop if options.stop else ".o" if options.compile_only else ""
        if suffix:
            out = Path(keep_dir).resolve() / (target.name.rsplit(".", 1)[0] + suffix)
            options = replace(options, output=str(out))
    return run_compile(target, options, toolkit=toolkit, keep=keep_dir)


def _write(path: Path, option: str, write) -> None:
    """Run ``write``; a path that cannot be written becomes one message, not a traceback."""
    from nvstage.artifacts import is_folder
    from nvstage.errors import UsageError, WriteError

    if is_folder(path):
        raise UsageError(f"{option} {path} is a folder", hint="give a file path")
    try:
        write()
    except WriteError as e:  # its message names the file and what is wrong with it
        raise UsageError(f"{option}: {e.message}", hint=e.hint) from None
    except OSError as e:
        raise UsageError(f"{option}: cannot write {path}: {e.strerror or e}") from None


def _append(path: Path, text: str) -> None:
    # A job summary file is shared by every step of a job: add to it, never replace it.
    from nvstage.artifacts import append_text

    append_text(path, text)


def _text(result, con) -> None:
    from rich import box

    from nvstage.cli.show import PlainTable as Table  # kernel names: text, never markup

    m = result.measurements
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for col, just in (("kernel", "left"), ("arch", "left"), ("registers", "right"),
                      ("spill bytes", "right"), ("static shared", "right")):
        t.add_column(col, justify=just)
    for k in m.kernels:
        t.add_row(k.demangled, k.arch, str(k.registers),
                  "?" if k.spill_bytes is None else str(k.spill_bytes), str(k.shared_bytes))
    con.print(t)
    con.print(f"arches in {m.arches_from}: {', '.join(m.arches) or 'none'}", markup=False)
    for v in result.violations:
        where = f"{os.path.relpath(v.file)}:{v.line}: " if v.file and v.line else ""
        con.print(f"FAIL {where}{v.message}", markup=False)
