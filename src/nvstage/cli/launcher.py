"""``nvstage NVCC ARGS`` and ``nvstage TOOL ARGS``: nvstage in front of a build's step, as a
compiler launcher (``cli/main.py`` routes here before anything heavy is imported, and
``cli/bare.py`` comes here with what the resident nvstage said when it asked).

For nvcc, the launcher's one flow (``compiler/launcher/flow.py``: a hit of the resident
nvstage, a hit here, a hand-over to the resident, a staged run), where only a miss imports
the pipeline, after ``site`` where Python started without it. Any other tool runs unchanged,
timed and recorded (``compiler/launcher/tool_step.py``), on the standard library alone.
"""

from __future__ import annotations

import sys


def is_nvcc(first: str) -> bool:
    """Whether ``nvstage FIRST ...`` stands in front of nvcc (a path or name like nvcc)."""
    base = first.rsplit("/", 1)[-1]
    return base == "nvcc" or base.startswith("nvcc-")


def step(argv: list[str]) -> int:
    """A step that is not nvcc (a C++ compile, a link, an archive), run and recorded."""
    from nvstage.compiler.launcher.tool_step import run_step

    return run_step(argv)


def launch(argv: list[str], *asked) -> tuple[int, bool]:
    """Run ``argv`` (``NVCC ARGS`` or ``TOOL ARGS``): its exit status, and whether nvstage's
    own work is done (nothing left to tidy up: the process may end at once). ``asked``, if
    given: what the resident nvstage said when ``cli/bare.py`` asked it (``ask.ask``'s)."""
    if not is_nvcc(argv[0]):
        return step(argv), True
    from nvstage.compiler.launcher.flow import Command, launch as flow

    outcome = flow(Command.here(argv, *asked))
    return outcome.code, outcome.done


def main(argv: list[str], asked) -> None:
    """``cli/bare.py``'s nvcc command, once it asked the resident nvstage (``asked``: what it
    said): run, and this process ended, as ``cli/main.py`` runs and ends a launcher command."""
    if sys.stdin is None or sys.stdout is None or sys.stderr is None:  # cmd >&-
        from nvstage.cli.transparent import hold_closed_streams

        hold_closed_streams()
    # One command, then the process ends: the cyclic collector's passes over what a miss
    # imports (some 24 000 objects) are CPU every unit of a cold build pays, 5 ms of 80 here,
    # for cycles the end frees anyway (the resident nvstage, a process of its own, keeps it).
    import gc

    gc.disable()
    code, done = launch(argv, asked)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    if code < 0:  # a tool's death by a signal: nvstage's too
        from nvstage.cli.transparent import exit_as

        exit_as(code)
    if done:  # nothing open: the interpreter's teardown is a sixth of a hit
        import posix

        posix._exit(code)
    sys.exit(code)


def with_site() -> None:
    """``site`` where Python started without it (``cli/bare.py``): what is not a hit sees
    the environment it always does (as ``flow.with_site`` does for the launcher's miss)."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site  # not through the launcher's flow: nvstage's own commands need none of it

        site.main()
