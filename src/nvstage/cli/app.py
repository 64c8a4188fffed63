"""The typer app behind every command but compile (see cli/main.py, the entry point, which routes
to it). Heavy imports live in the commands."""

from __future__ import annotations

import typer
from typer.core import TyperCommand, TyperGroup

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

# Click's own formatter, whichever click typer brings (its own copy from 0.28 on).
class _Formatter(typer.Context.formatter_class):
    """Help in the plain style of ``nvstage --help`` (cli/main.py), which never loads typer:
    prose reflows to the width; an indented block (an example, a TOML table) stays as
    written, one line per line."""

    def write_text(self, text: str) -> None:
        paragraphs = text.split("\n\n")
        super().write_text("\n\n".join("\b\n" + p if p[:1] == " " else p for p in paragraphs))


class _Context(typer.Context):
    formatter_class = _Formatter


class _Command(TyperCommand):
    """A command whose arguments read as the top-level help writes them: ARTIFACT, [TARGET]."""

    context_class = _Context

    def get_params(self, ctx):
        params = super().get_params(ctx)
        for p in params:
            if p.param_type_name == "argument" and p.metavar is None and p.name:
                p.metavar = p.name.upper()
        return params

    def collect_usage_pieces(self, ctx) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if p.param_type_name == "argument":
                pieces.append(p.metavar if p.required else f"[{p.metavar}]")
        return pieces


class _Group(TyperGroup):
    context_class = _Context


app = typer.Typer(
    name="nvstage",
    cls=_Group,
    help="See and measure how CUDA source becomes work on a GPU.\n\n"
         "compile runs nvcc's own plan stage by stage and keeps every artifact; show, "
         "occupancy and diff look inside what it built; run launches it on a GPU and "
         "decomposes the time; model and compare estimate the same offline; check and "
         "report gate and document builds in CI.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain text, as `nvstage --help` and `nvstage compile --help` are (no boxes): one style
    # for every command's help; _Formatter keeps the indented examples as written.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
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
        app.command(name, cls=_Command, rich_help_panel=panel)(fn)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"nvstage {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                       help="Print the version and exit.")) -> None:
    pass



def usage_error(e: Exception) -> tuple[str, int] | None:
    """Click's usage error (a missing argument, an unknown option, a bad value) or abort as
    one line and its exit status, as nvstage says every other bad input; None for anything
    else."""
    import typer.core

    # The click typer runs on: its own copy from typer 0.28 on, the click package before.
    _click = getattr(typer.core, "_click", None) or typer.core.click
    if isinstance(e, typer.Abort):
        return "error: aborted", 1
    if not isinstance(e, _click.ClickException):
        return None
    text = " ".join(e.format_message().split()).rstrip(".")
    text = text[:1].lower() + text[1:]
    ctx = getattr(e, "ctx", None)
    where = f" ({ctx.command_path} --help)" if ctx is not None else ""
    return f"error: {text}{where}", e.exit_code
