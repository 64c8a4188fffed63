"""Which nvcc a launcher command runs, and where it was found.

``nvstage /path/to/nvcc ARGS`` runs that nvcc. ``nvstage nvcc ARGS`` (Make's ``NVCC = nvstage
nvcc``) runs the nvcc on PATH when there is one: a launcher runs what the build names, as ccache
does. Where PATH has none, it runs the toolkit nvstage itself uses, found in
``compiler/toolkit/locate.py``'s order without importing it: ``$NVSTAGE_NVCC``, then the pip wheels
(``nvidia/cu13/bin`` or ``nvidia/cuda_nvcc/bin`` in a site-packages folder on ``sys.path``,
where cuda-pathfinder looks first), ``$CONDA_PREFIX/bin``, ``$CUDA_PATH`` or ``$CUDA_HOME``.

Standard library only: a hit asks it first, and the miss path asks the same, so both run one
nvcc. With nvcc on PATH that is the one lookup a hit always made; without, a few stats more. What only cuda-pathfinder finds (a toolkit root found through the
libcudart the loader sees) the miss path asks it for (``launcher.find_nvcc``); a hit never
sees such an nvcc, so its commands are misses, never wrong answers (the key names nvcc's real
path). Under ``cli/bare.py`` (no ``site``) ``sys.path`` holds a virtual environment's
site-packages only: wheels installed elsewhere (the user's folder) are again the miss path's.
"""

from __future__ import annotations

import os
import sys

# Where the nvcc came from, as the build log says it (an entry's ``nvcc_from``).
COMMAND, PATH, WHEELS = "command", "PATH", "pip wheels"
ENV_NVCC = "NVSTAGE_NVCC"
# The wheels' folders under site-packages, in cuda-pathfinder's order (its
# SITE_PACKAGES_BINDIRS for nvcc): CUDA 13's one folder, then CUDA 12's per-component one.
WHEEL_BINS = ("nvidia/cu13/bin", "nvidia/cuda_nvcc/bin")
_SITE_DIRS = ("site-packages", "dist-packages")


def executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def which(name: str, path_var: str) -> str | None:
    """``shutil.which`` without shutil: the first executable ``name`` on ``path_var``."""
    for d in path_var.split(os.pathsep):
        p = os.path.join(d or ".", name)
        if executable(p):
            return p
    return None


def is_elf(path: str) -> bool:
    """Whether ``path`` is an executable in ELF (a toolkit's nvcc), not a script (a wrapper,
    whose commands have no command key: what it reads is unknown). Raises OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        return os.read(fd, 4) == b"\x7fELF"
    finally:
        os.close(fd)


def find(name: str, env) -> tuple[str, str] | None:
    """(nvcc's path, where it came from) for a launcher command whose first word is ``name``;
    None when there is none (the miss path says why: ``launcher.not_found``)."""
    if os.sep in name:
        return (name, COMMAND) if executable(name) else None
    on_path = which(name, env.get("PATH", ""))
    if on_path is not None:
        return on_path, PATH
    return toolkit_nvcc(env) if name == "nvcc" else None


def toolkit_nvcc(env, folders: list[str] | None = None) -> tuple[str, str] | None:
    """The nvcc of the toolkit nvstage uses where PATH has none (the module's order):
    (its path, where it came from). ``folders``: the site-packages folders to look in
    (``site_folders()``'s by default)."""
    given = env.get(ENV_NVCC)
    if given:  # named: that one or none, as compiler/toolkit/locate.py has it
        return (given, "$" + ENV_NVCC) if executable(given) else None
    found = _in_wheels(site_folders() if folders is None else folders)
    if found is not None:
        return found, WHEELS
    for var, sub in (("CONDA_PREFIX", "bin"), ("CUDA_PATH", "bin"), ("CUDA_HOME", "bin")):
        root = env.get(var)
        if root:
            p = os.path.join(root, sub, "nvcc")
            if executable(p):
                return p, "$" + var
            if var == "CUDA_PATH":  # cuda-pathfinder: CUDA_PATH, when set, hides CUDA_HOME
                break
    return None


def where(source: str) -> str:
    """Where an nvcc came from, in words: "from PATH", "named by the command", "from the pip
    wheels: PATH has no nvcc"."""
    return {PATH: "from PATH", COMMAND: "named by the command"}.get(
        source, f"from {'the ' * (source == WHEELS)}{source}: PATH has no nvcc")


def said(nvcc: str, source: str, how: str) -> str:
    """The line ``$NVSTAGE_LAUNCHER_VERBOSE`` prints of a command: which nvcc ran it, found
    where, and how it went (a successful command prints nothing of nvstage's own without)."""
    return f"nvstage: nvcc {nvcc} ({where(source)}): {how}\n"


def site_folders() -> list[str]:
    """The site-packages folders on ``sys.path``, in its order (with ``site``, those
    ``site.getsitepackages()`` names; under ``cli/bare.py``, the virtual environment's that it
    puts there)."""
    return [p for p in sys.path if p.rstrip("/").rsplit("/", 1)[-1] in _SITE_DIRS]


def wheel_nvcc() -> str | None:
    """The nvcc cuda-pathfinder finds first, in the pip wheels, without importing it: its
    folders (``WHEEL_BINS``, each over every site-packages folder) in its order, the
    site-packages folders in its order (``site.getsitepackages()``, the user's folder second
    in a virtual environment and first outside one), resolved as it resolves them. None where
    no wheel has one: cuda-pathfinder's later places (conda, ``CUDA_PATH``, the loader's
    libcudart) are its own to look in."""
    import site

    parents = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        user = site.getusersitepackages()
        if user:
            parents.insert(1 if sys.prefix != sys.base_prefix else 0, user)
    found = _in_wheels(parents)
    return os.path.realpath(found) if found is not None else None


def _in_wheels(folders: list[str]) -> str | None:
    """The first executable nvcc in the wheels' folders under ``folders``, in
    cuda-pathfinder's order: each of ``WHEEL_BINS`` over every folder."""
    for sub in WHEEL_BINS:
        for folder in folders:
            p = os.path.join(folder, sub, "nvcc")
            if executable(p):
                return p
    return None
