"""What ``nvstage check`` checks, and the rule that a gate which checked nothing fails: the
budgets (a given file, else the nearest pyproject.toml), the build (a keep folder or
stages.json as it is, or a .cu compiled now with the budgets' compile options), the gate."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from nvstage.check.budgets import Budgets, find_config, load_budgets
from nvstage.check.gate import CheckResult, check
from nvstage.errors import StageFailed, UsageError


def check_build(target: str | os.PathLike | None = None, *,
                 config: str | os.PathLike | None = None, baseline=None, run_report=None,
                 keep_dir: str | None = None, toolkit=None, nvcc: str | None = None
                 ) -> CheckResult:
    """Check ``target`` (a .cu file, keep folder or stages.json; None: the ``source`` the
    budgets name) against the budgets in ``config`` (default: the nearest pyproject.toml
    with [tool.nvstage]), and ``baseline`` when given. A .cu is compiled into ``keep_dir``,
    or a temporary folder kept while it is measured, with ``toolkit`` (else ``nvcc``'s, else
    the pip wheels'). Raises ``UsageError`` when there are no
    budgets, or when they checked nothing: such a gate would pass every build."""
    from nvstage.compiler.toolkit import find_toolkit

    cfg = config or find_config()
    if cfg is None:
        raise UsageError("no budgets: no --config and no pyproject.toml with [tool.nvstage] "
                         "here or above",
                         hint="add [tool.nvstage.budgets] to pyproject.toml or pass "
                              "--config budgets.toml")
    budgets = load_budgets(cfg)
    if target is None:
        if not budgets.source:
            raise UsageError("nothing to check: give a .cu file, keep folder or stages.json "
                             "(or set source in [tool.nvstage])")
        target = budgets.source
    toolkit = toolkit or find_toolkit(nvcc)
    with build_of(Path(target), budgets, toolkit, keep_dir) as build:
        result = check(build, budgets, toolkit=toolkit, run_report=run_report,
                       baseline=baseline)
    if result.checked == 0:
        why = f"the build of {result.measurements.source} has no kernels" \
            if not result.measurements.kernels else \
            f"{cfg} sets no limit that applies to this build"
        raise UsageError(f"nothing was checked: {why}",
                         hint="set limits in [tool.nvstage.budgets]: max_registers = 64, "
                              "no_spills = true, required_arches = [\"sm_90\"], ...")
    return result


@contextlib.contextmanager
def build_of(target: Path, budgets: Budgets, toolkit, keep_dir: str | None) -> Iterator:
    """A Build for the target: a keep folder or manifest as it is; a .cu compiled now, its
    files kept (in a temporary folder without ``keep_dir``) while the check measures them."""
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
    from nvstage.compiler.driver import without_temp_keep

    with tempfile.TemporaryDirectory(prefix="nvstage-check-") as tmp:
        try:
            build = _compile(target, budgets, toolkit, tmp)
        except StageFailed as e:  # its keep folder goes with ``tmp``: never point there
            raise without_temp_keep(e, ["nvstage", "compile", str(target),
                                        *budgets.compile_options().nvcc_args()]) from None
        yield build


def _compile(target: Path, budgets: Budgets, toolkit, keep_dir: str):
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
