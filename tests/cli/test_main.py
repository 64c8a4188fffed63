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


def test_a_finished_compile_skips_the_teardown_only_when_nothing_is_left():
    # After a compile the interpreter's teardown cost 36 ms (bench/floor.py): skipped then,
    # but never while a thread still works, a temporary folder waits for its finalizer, or a
    # library's exit handler or a logging handler would run.
    probe = """
import sys, tempfile, threading, logging, atexit
from nvstage.cli.transparent import nothing_left
said = [nothing_left()]
ev = threading.Event()
t = threading.Thread(target=ev.wait); t.start()
said.append(nothing_left()); ev.set(); t.join()
d = tempfile.TemporaryDirectory(); said.append(nothing_left()); d.cleanup()
said.append(nothing_left())
h = logging.FileHandler(sys.argv[1]); said.append(nothing_left()); h.close(); del h
import gc; gc.collect()
atexit.register(print); said.append(nothing_left())
atexit.unregister(print)  # Python 3.11 still counts the emptied slot: the usual way
sys.setprofile(lambda *a: None); said.append(nothing_left()); sys.setprofile(None)
print(said)
"""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", probe, f"{tmp}/log"], capture_output=True,
                             text=True, check=True).stdout
    assert out.splitlines()[0] == "[True, False, False, True, False, False, False]"


def test_a_compile_ends_with_its_output_whole(toolkit, kernels, tmp_path):
    # The fast exit flushes first: piped, the table and the JSON arrive whole.
    r = subprocess.run([sys.executable, "-m", "nvstage", "compile", str(kernels / "vadd.cu"),
                        "-arch=sm_90", "-c", "-o", str(tmp_path / "v.o"), "--no-cache",
                        "--json"], capture_output=True, text=True, cwd=tmp_path)
    import json

    assert r.returncode == 0 and json.loads(r.stdout)["status"] == "ok"
    assert (tmp_path / "v.o").stat().st_size > 0


def test_a_profiled_compile_keeps_its_profile(tmp_path):
    # cProfile -o writes after main() returns: a profiled command exits the usual way.
    prof = tmp_path / "p.prof"
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "nvstage",
                    "compile", "--help"], capture_output=True, check=True, cwd=tmp_path)
    assert prof.stat().st_size > 0
