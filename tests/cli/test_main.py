"""The entry point: --help and --version without typer or rich, every command listed, routing."""

import subprocess
import sys

from nvstage.cli.help import COMMANDS
from nvstage.cli.main import run


def test_help_lists_every_command(capsys):
    from nvstage.cli.app import app

    assert run(["--help"]) == 0
    out = capsys.readouterr().out
    typer_commands = {c.name for c in app.registered_commands}
    listed = {name for _, cmds in COMMANDS for name, _ in cmds}
    assert listed == typer_commands | {"compile"}
    for name in listed:
        assert f"\n  {name} " in out


def test_no_command_prints_help_and_fails(capsys):
    assert run([]) == 2 and "Usage: nvstage COMMAND" in capsys.readouterr().out


def test_version_and_unknown_command(capsys):
    assert run(["--version"]) == 0 and capsys.readouterr().out.startswith("nvstage ")
    assert run(["frobnicate"]) == 2
    assert capsys.readouterr().err == \
        "error: no such command 'frobnicate' (nvstage --help lists them)\n"
    assert run(["--frobnicate"]) == 2
    assert capsys.readouterr().err == \
        "error: no such option '--frobnicate' (nvstage --help lists them)\n"


def test_usage_errors_are_one_line(cli):
    # click's own "Usage: ... Try ... Error: ..." block (a rich box under typer) was three
    # to seven lines; every other bad input is one.
    for args, words in ((["show"], "missing argument 'ARTIFACT' (nvstage show --help)"),
                        (["occupancy", "--block", "abc", "x"], "'abc' is not a valid int"),
                        (["cache", "--nosuch"], "no such option: --nosuch")):
        r = cli(*args)
        assert r.exit_code == 2 and r.stdout == "", (args, r.output)
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("error: "), r.stderr
        assert words in r.stderr, r.stderr


def test_every_help_is_one_plain_style(cli):
    """nvstage --help, compile --help and each typer command's --help: the same plain text
    (Usage line, indented prose, "Options:"), with no box drawn around any part."""
    listed = [name for _, cmds in COMMANDS for name, _ in cmds]
    for args in [["--help"]] + [[name, "--help"] for name in listed]:
        r = cli(*args)
        assert r.exit_code == 0, (args, r.output)
        first = r.stdout.splitlines()[0]
        assert first.startswith("Usage: nvstage" + (f" {args[0]}" if len(args) > 1 else "")), \
            (args, first)
        assert not set("╭╮╰╯│─") & set(r.stdout), (args, r.stdout[:400])
        assert "\nOptions:\n" in r.stdout or "\nnvstage options:\n" in r.stdout, args


def test_help_and_version_import_neither_typer_nor_rich():
    code = ("import sys; from nvstage.cli.main import run; run(sys.argv[1:]);"
            "print([m for m in ('typer','rich','click','numpy') if m in sys.modules])")
    for args in (["--help"], ["--version"], ["compile", "--help"], ["frobnicate"]):
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                             text=True).stdout
        assert out.rstrip().endswith("[]"), (args, out[-300:])
