"""nvstage in front of nvcc, once the warm path (``compiler/cache/command/answer.py``, imported first
and alone by ``cli/main.py``) could not answer the whole command: handed to a resident nvstage
whose imports are done (``compiler/launcher/resident/handover.py``), else run here by the launcher, which
then starts a resident nvstage for the next commands. Each step imports only what it needs.
"""

from __future__ import annotations

import os


def launch(argv: list[str]) -> tuple[int, bool]:
    """Run ``nvcc ARGS`` (``argv[0]`` names nvcc), a miss of the warm path: its exit status,
    and whether nvstage's own work is done when it returns (a resident's answer: nothing left
    to tidy up)."""
    try:
        cwd = os.getcwd()
    except OSError:  # a folder since removed: run here, which runs plain nvcc there
        cwd = None
    from nvstage.compiler.launcher.resident import handover as resident
    from nvstage.compiler.store.layout import cache_root

    root = cache_root(os.environ) if resident.enabled(os.environ) else None
    if root is not None and cwd is not None:
        code = resident.delegate(argv, cwd, os.environ, root)
        if code is not None:
            return code, True
    from nvstage.compiler.launcher.flow import main as run_here

    code = run_here(argv)
    if cwd is None:
        return code, False
    start_resident()  # after: the launcher may have just made the cache folder
    return code, False


def start_resident() -> None:
    """A resident nvstage for the next commands, where it is on (``NVSTAGE_SERVER=1``) and
    none runs: after a miss run here, and after a hit answered here because no server was
    there to ask (else a build whose every command hits would never have one)."""
    from nvstage.compiler.launcher.resident import handover as resident
    from nvstage.compiler.store.layout import cache_root

    root = cache_root(os.environ) if resident.enabled(os.environ) else None
    if root is not None:
        from nvstage.compiler.launcher.resident.server import ensure

        ensure(root, os.environ)
