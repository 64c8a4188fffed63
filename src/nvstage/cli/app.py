"""The nvstage command: a thin typer app over the library. Heavy imports live in commands."""

from __future__ import annotations

import typer

from .. import __version__
from .cache import cache_cmd
from .compile import compile_cmd
from .doctor import doctor_cmd
from .check import check_cmd
from .report import report_cmd
from .occupancy import occupancy_cmd
from .run import run_cmd
from .occupancy import occupancy_cmd
from .show import show_cmd
from .diff import diff_cmd
from .model import model_cmd
from .compare import compare_cmd

app = typer.Typer(
    name="nvstage",
    help="See and measure how CUDA source becomes work on a GPU.\n\n"
         "compile runs nvcc's own plan stage by stage and keeps every artifact; doctor says "
         "what toolkit and GPU this machine has.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command("compile")(compile_cmd)
app.command("doctor")(doctor_cmd)
app.command("check")(check_cmd)
app.command("report")(report_cmd)
app.command("occupancy")(occupancy_cmd)
app.command("run")(run_cmd)
app.command("occupancy")(occupancy_cmd)
app.command("show")(show_cmd)
app.command("diff")(diff_cmd)
app.command("model")(model_cmd)
app.command("compare")(compare_cmd)
app.command("cache")(cache_cmd)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nvstage {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    pass


def main() -> None:
    app()
