"""The CLI's front door (``cli/``): routes a command line before anything heavy is imported.

Three fronts, decided here once:
- ``nvstage compile ...`` reads nvcc's own grammar (``compiler/pipeline/cmdline.py``): click, under
  typer, cannot express ``-std=c++17`` or ``-Xcompiler -O2`` as options;
- ``nvstage --help`` and ``--version`` print text kept here and in ``cli/help.py``, importing
  neither typer nor rich;
- every other command is a typer app (``cli/app.py``), imported only when one is asked for.
"""

from __future__ import annotations

import sys

from nvstage import __version__


def is_launcher_command(first: str) -> bool:
    """``nvstage FIRST ...`` stands in front of a compiler or another build tool (a path, or a
    name like nvcc), not one of nvstage's commands (none of which is spelt so)."""
    from nvstage.cli.launcher import is_nvcc

    return "/" in first or is_nvcc(first)


def run(argv: list[str]) -> int:
    """Run one command line (without the program name); returns the exit status."""
    _names_as_bytes()
    if argv and is_launcher_command(argv[0]):  # nvstage /path/to/nvcc ARGS: stand in front of it
        from nvstage.cli.launcher import launch

        _compiled.append(True)
        return _done(*launch(argv))
    from nvstage.cli.launcher import with_site

    with_site()  # a launcher's hit needs none of it; its miss runs it
    from nvstage.cli.help import COMMANDS

    if argv and argv[0] not in ("-h", "--help", "--version", "compile") and \
            argv[0] not in {name for _, commands in COMMANDS for name, _ in commands}:
        from nvstage.compiler.launcher.tool_step import on_path

        if on_path(argv[0]):  # nvstage g++ ARGS: a build step, as a path to it would be
            from nvstage.cli.launcher import step

            return _done(step(argv), True)
        # One line, as every other bad input gets, and before typer is imported.
        what = "option" if argv[0].startswith("-") else "command"
        sys.stderr.write(f"error: no such {what} {argv[0]!r} (nvstage --help lists them)\n")
        return 2
    from nvstage.cli.streams import watched

    return watched(_command, argv)  # nvstage's own stdout: ended as coreutils end, if it fails


def _command(argv: list[str]) -> int:
    """One of nvstage's own commands: help, version, compile, or one of the typer app's."""
    if not argv or argv[0] in ("-h", "--help"):
        from nvstage.cli.help import top_help

        sys.stdout.write(top_help())
        return 0 if argv else 2
    if argv[0] == "--version":
        sys.stdout.write(f"nvstage {__version__}\n")
        return 0
    if argv[0] == "compile":
        from nvstage.cli.compile import main as compile_main, was_answered

        _compiled.append(True)
        code = compile_main(argv[1:])
        if was_answered():
            _answered.append(True)
        return code
    from nvstage.cli.common import drop_junk_columns

    drop_junk_columns()  # before typer reads $COLUMNS for --help
    from nvstage.cli.app import app, usage_error

    try:
        # Not standalone: click's usage errors come back here, to be said in one line.
        code = app(argv, prog_name="nvstage", standalone_mode=False)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception as e:
        said = usage_error(e)
        if said is None:
            raise
        sys.stderr.write(said[0] + "\n")
        return said[1]
    return code if isinstance(code, int) else 0


def _done(code: int, answered: bool) -> int:
    if answered:
        _answered.append(True)
    return code


def _names_as_bytes() -> None:
    """A file name that is not UTF-8 reaches the tables as it is (``os.fsdecode``: each
    undecodable byte a surrogate), and is printed back as those bytes, as ``ls`` prints it.
    Under a UTF-8 locale Python's stdout is strict and would fail on the first one."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="surrogateescape")


# Set when the command was answered whole from the cache (the hit path).
_answered: list[bool] = []
# Set for a compile or a launcher command: the flows whose files are all written with their
# own closes, so that a fast exit loses nothing (others may leave a buffered file to exit).
_compiled: list[bool] = []


def main() -> None:
    _answered.clear()  # this command's, not an earlier run()'s in the same process
    _compiled.clear()
    if sys.stdin is None or sys.stdout is None or sys.stderr is None:  # cmd >&-
        from nvstage.cli.transparent import hold_closed_streams

        hold_closed_streams()
    code = run(sys.argv[1:])
    if code < 0:  # a tool's death by a signal: nvstage's too
        from nvstage.cli.transparent import exit_as

        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:
            pass
        exit_as(code)
    fast = bool(_answered)
    if not fast and _compiled:
        from nvstage.cli.transparent import nothing_left

        fast = nothing_left()
    if fast:
        # A hit leaves nothing open: its files are written and closed. The interpreter's own
        # teardown (2 ms here) is a sixth of a hit, which a build pays per command; after a
        # compile, with its modules loaded, 36 ms (bench/floor.py).
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:
            sys.exit(code)
        import posix  # os is not loaded on a hit without site (cli/bare.py)

        posix._exit(code)
    sys.exit(code)

