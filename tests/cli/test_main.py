"""The entry point: --help and --version without typer or rich, every command listed, routing."""

import subprocess
import sys

from nvstage.cli.main import COMMANDS, run


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
    assert run(["nosuch"]) == 2
    assert "No such command" in capsys.readouterr().err


def test_help_and_version_import_neither_typer_nor_rich():
    code = ("import sys; from nvstage.cli.main import run; run(sys.argv[1:]);"
            "print([m for m in ('typer','rich','click','numpy') if m in sys.modules])")
    for args in (["--help"], ["--version"], ["compile", "--help"]):
        out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                             text=True).stdout
        assert out.rstrip().endswith("[]"), (args, out[-300:])
