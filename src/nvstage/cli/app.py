"""The typer app behind every command but compile (see cli/main.py, the entry point, which routes
to it). Heavy imports live in the commands."""

from __future__ import annotations

import typer

from nvstage import __version__
from nvstage.cli.cache import cache_cmd
from nvstage.cli.check import check_cmd
from nvstage.cli.compare import compare_cmd
from nvstage.cli.diff import diff_cmd
from nvstage.cli.doctor import doctor_cmd
from nvstage.cli.model import model_cmd
from nvstage.cli.occupancy import occupancy_cmd
from nvstage.cli.report import report_cmd
from nvstage.cli.run import run_cmd
from nvstage.cli.show import show_cmd

app = typer.Typer(
    name="nvstage",
    help="See and measure how CUDA source becomes work on a GPU.\n\n"
         "compile runs nvcc's own plan stage by stage and keeps every artifact; show, "
         "occupancy and diff look inside what it built; run launches it on a GPU and "
         "decomposes the time; model and compare estimate the same offline; check and "
         "report gate and document builds in CI.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Markdown: paragraphs reflow, indented examples stay code, [brackets] stay text.
    rich_markup_mode="markdown",
    context_settings={"help_option_names": ["-h", "--help"]},
)
# Commands in the order a user meets them, grouped in --help.
_COMMANDS = (
    ("Build", (("cache", cache_cmd),)),
    ("Inspect", (("show", show_cmd), ("occupancy", occupancy_cmd), ("diff", diff_cmd))),
    ("Run and estimate", (("run", run_cmd), ("model", model_cmd), ("compare", compare_cmd))),
    ("CI", (("check", check_cmd), ("report", report_cmd))),
    ("Setup", (("doctor", doctor_cmd),)),
)
for panel, commands in _COMMANDS:
    for name, fn in commands:
        app.command(name, rich_help_panel=panel)(fn)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nvstage {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    pass

