"""nvstage in front of nvcc, in the order that costs least: the whole command answered from the
cache (``compiler/warm``, the standard library only), else handed to a resident nvstage whose
imports are done (``compiler/warm/resident.py``), else run here by the launcher (which then
starts a resident nvstage for the next commands). Each step imports only what it needs.
"""

from __future__ import annotations

import os


def launch(argv: list[str]) -> tuple[int, bool]:
    """Run ``nvcc ARGS`` (``argv[0]`` names nvcc): its exit status, and whether nvstage's own
    work is done when it returns (a hit or a resident's answer: nothing left to tidy up)."""
    from nvstage.compiler.warm.answer import serve

    cwd = os.getcwd()
    if serve(argv, cwd, os.environ):
        return 0, True
    from nvstage.compiler.warm import resident
    from nvstage.compiler.warm.folder import cache_root

    root = cache_root(os.environ) if resident.enabled(os.environ) else None
    if root is not None:
        code = resident.delegate(argv, cwd, os.environ, root)
        if code is not None:
            return code, True
    from nvstage.compiler.launcher import main as run_here

    code = run_here(argv)
    # Again: the launcher may have just made the cache folder.
    root = cache_root(os.environ) if resident.enabled(os.environ) else None
    if root is not None:  # a server for the next commands
        from nvstage.compiler.resident import ensure

        ensure(root, os.environ)
    return code, False
