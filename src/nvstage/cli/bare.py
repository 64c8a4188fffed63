"""nvstage run by a Python started without ``site``: the command line a build's launcher
setting names (``nvstage doctor --cmake-toolchain FILE --launcher`` writes it)::

    /venv/bin/python -S -P /venv/lib/python3.11/site-packages/nvstage/cli/bare.py NVCC ARGS

A build runs the launcher once per command, and most commands are hits. In a virtual
environment ``site`` (its .pth files, setuptools' distutils shim, the user's folder) is 3 ms of
a 10 ms hit, and a hit needs none of it: only nvstage's folder and, in a virtual environment,
its site-packages (the zstd extension), put on ``sys.path`` here where ``site`` would put them.
Then the resident nvstage is asked for the hit (``compiler/launcher/resident/ask.py``), before
``os`` or anything of nvstage but that module is loaded; then ``cli/launcher.py`` runs an nvcc
command with what it said (``cli/main.py`` any other), as ``nvstage`` would, with ``site``
before anything that is not a hit. ``-P``: the
folder of this file (``nvstage/cli``) is not put on ``sys.path``, where its modules would stand
for the standard library's.
"""

import sys

import posix  # not os: its import is 1 ms of a start without site


def _paths() -> str:
    """nvstage's folder, then a virtual environment's packages (found as site's venv() finds
    them: pyvenv.cfg beside the interpreter's folder), after the standard library's folders,
    where site would put them: a package there named as a standard module (a backport) never
    stands for it. Returns nvstage's folder."""
    here = __file__ if __file__.startswith("/") else posix.getcwd() + "/" + __file__
    top = here.rsplit("/", 3)[0]  # .../nvstage/cli/bare.py -> above nvstage
    sys.path.append(top)
    env = sys.executable.rsplit("/", 2)[0]
    try:
        posix.stat(env + "/pyvenv.cfg")
    except OSError:
        return top
    packages = env + "/lib/python%d.%d/site-packages" % sys.version_info[:2]
    if packages != top:
        sys.path.append(packages)
    return top


def _ask_module(top: str):
    """``compiler/launcher/resident/ask.py``, loaded by its file under its own name: nvstage's three
    package ``__init__`` files (0.6 ms of a hit) are imported only if the command goes on
    (``compiler/store/zstd.py`` loads its extension so, for the same reason)."""
    import _frozen_importlib as bootstrap  # loaded at every start: free
    import _frozen_importlib_external as external

    name = "nvstage.compiler.launcher.resident.ask"
    return bootstrap._load(external.spec_from_file_location(
        name, top + "/nvstage/compiler/launcher/resident/ask.py"))


if __name__ == "__main__":
    top = _paths()
    base = sys.argv[1].rsplit("/", 1)[-1] if len(sys.argv) > 1 else ""
    if base == "nvcc" or base.startswith("nvcc-"):  # cli/launcher.py's is_nvcc
        try:
            said = _ask_module(top).ask(sys.argv[1:])  # a hit asked of the resident nvstage
        except Exception:  # never a reason to fail a build: the launcher goes on unasked
            said = False
        if said:
            posix._exit(0)
        from nvstage.cli.launcher import main as launcher

        launcher(sys.argv[1:], said)  # the same command is not asked twice
    from nvstage.cli.main import main

    main()
