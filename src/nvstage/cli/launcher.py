"""``nvstage NVCC ARGS`` and ``nvstage TOOL ARGS``: nvstage in front of a build's step, as a
compiler launcher (``cli/main.py`` routes here before anything heavy is imported).

For nvcc, the whole command is answered from the cache if it can be, cheapest first: asked of
the resident nvstage (``compiler/launcher/resident/ask.py``, ``NVSTAGE_SERVER=1``), then answered by this
process (``compiler/cache/command/answer.py``); only a miss imports the pipeline (``compiler/launcher/front.py``),
after ``site`` where Python started without it (``cli/bare.py``). Any other tool runs unchanged,
timed and recorded (``compiler/launcher/tool_step.py``), on the standard library alone.
"""

from __future__ import annotations

import sys


# What ``cli/bare.py`` was told when it asked before importing this (taken once): the same
# command is not asked twice.
ASKED: list = []


def is_nvcc(first: str) -> bool:
    """Whether ``nvstage FIRST ...`` stands in front of nvcc (a path or name like nvcc)."""
    base = first.rsplit("/", 1)[-1]
    return base == "nvcc" or base.startswith("nvcc-")


def step(argv: list[str]) -> int:
    """A step that is not nvcc (a C++ compile, a link, an archive), run and recorded."""
    from nvstage.compiler.launcher.tool_step import run_step

    return run_step(argv)


def launch(argv: list[str]) -> tuple[int, bool]:
    """Run ``argv`` (``NVCC ARGS`` or ``TOOL ARGS``): its exit status, and whether nvstage's
    own work is done (nothing left to tidy up: the process may end at once)."""
    if not is_nvcc(argv[0]):
        return step(argv), True
    from nvstage.compiler.launcher.resident.ask import MISSED, ask

    if ASKED:
        said = ASKED.pop()
    else:
        try:
            said = ask(argv)
        except Exception:  # never a reason to fail a build: go on unasked
            said = False
    if said:
        return 0, True
    # MISSED: the server looked already, and found no whole entry to answer it.
    if said is not MISSED and _answered_here(argv):
        if said is None:  # on, and no server to ask: one for the next commands
            with_site()  # sys.prefix (which names its socket) as a server sees it
            from nvstage.compiler.launcher.front import start_resident

            start_resident()
        return 0, True
    with_site()
    from nvstage.compiler.launcher.front import launch as miss

    return miss(argv)


def _answered_here(argv: list[str]) -> bool:
    import os

    from nvstage.compiler.cache.command.answer import serve

    try:
        cwd = os.getcwd()
    except OSError:  # a folder since removed: no entry is of it (the miss runs plain nvcc)
        return False
    return serve(argv, cwd, os.environ)


def with_site() -> None:
    """``site`` where Python started without it (``cli/bare.py``): what is not a hit sees
    the environment it always does (.pth files, the user's folder, sitecustomize)."""
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()
