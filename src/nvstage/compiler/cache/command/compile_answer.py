"""``nvstage compile``'s own command line answered whole, as the launcher answers nvcc's.

Its words are not nvcc's (-arch twice builds both, nvstage's options), so its entries live
under keys of their own: the CLI's words after a marker no nvcc word can be, with the
variables that choose its nvcc and lay out its tables (``cli_args``). The nvcc the toolkit
search found is remembered (``remember_nvcc``), so that an answer needs no search
(importing cuda-pathfinder would cost more than the answer). Standard library only.
"""

from __future__ import annotations

import os
import sys

from nvstage import fsio, __version__
from nvstage.compiler.cache.command.answer import newest_result
from nvstage.compiler.store.layout import SCHEMA, WHOLE, opened
from nvstage.compiler.cache.command.command_key import file_stat

CLI_ENV = ("NVSTAGE_NVCC", "CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX", "COLUMNS")


def cli_args(argv: list[str], env) -> list[str]:
    """The words an ``nvstage compile ARGV`` entry is keyed by (``key``'s ``args``)."""
    return [f"\0nvstage compile {__version__}", repr([env.get(k) for k in CLI_ENV]), *argv]


def _choice_key(given: str | None, cwd: str, env) -> str:
    """Which nvcc ``nvstage compile`` finds depends on its ``--nvcc``, the variables
    cuda-pathfinder reads and the packages installed (an install or removal changes the
    site-packages folder): the key of the remembered answer."""
    parts = [SCHEMA, "nvcc choice", sys.executable, given, cwd if given else None,
             [env.get(k) for k in ("PATH", "CONDA_PREFIX", "CUDA_PATH", "CUDA_HOME",
                                   "LD_LIBRARY_PATH")]]
    for p in sys.path:  # where the wheels are found: an install there moves the folder
        try:
            parts.append([p, file_stat(p) if p.endswith(("site-packages", "dist-packages"))
                          else None])
        except OSError:
            parts.append([p, None])
    return fsio.hexdigest(repr(parts).encode("utf-8", "surrogateescape"))


def _choice_file(root: str, given: str | None, cwd: str, env) -> str:
    return os.path.join(root, WHOLE, "nvcc", _choice_key(given, cwd, env))


def remember_nvcc(given: str | None, cwd: str, env, nvcc: str, source: str) -> None:
    """Note which nvcc (and from where) the toolkit search found for ``given`` (the
    command's ``--nvcc`` or ``$NVSTAGE_NVCC``)."""
    where = opened(env)
    if where is None:
        return
    root, secret = where
    fsio.write_sealed(_choice_file(root, given, cwd, env), secret, [SCHEMA, nvcc, source])


def _remembered_nvcc(root: str, secret: bytes, given: str | None, cwd: str, env):
    try:
        schema, nvcc, source = fsio.read_sealed(_choice_file(root, given, cwd, env), secret,
                                                1 << 16)
    except (ValueError, TypeError):  # None, or not three values
        return None
    if schema != SCHEMA or not os.access(nvcc, os.X_OK):
        return None
    return nvcc, source


def nvcc_named(argv: list[str], env) -> str | None:
    """The ``--nvcc`` an ``nvstage compile`` command line gives, else ``$NVSTAGE_NVCC``
    (``cmdline.nvcc_choice``; here, so the command cache's answer needs no grammar)."""
    found = None
    for i, w in enumerate(argv):
        if w == "--":
            break
        if w == "--nvcc" and i + 1 < len(argv):
            found = argv[i + 1]
        elif w.startswith("--nvcc="):
            found = w.split("=", 1)[1]
    return found or env.get("NVSTAGE_NVCC") or None


def answer_cli(argv: list[str], given: str | None, cwd: str, env) -> dict | None:
    """``nvstage compile ARGV`` answered whole: its outputs restored, and the entry (whose
    ``view`` holds what the command prints) returned; None for a miss. ``given``: its
    ``--nvcc`` or ``$NVSTAGE_NVCC``."""
    where = opened(env)
    if where is None:
        return None
    found = _remembered_nvcc(*where, given, cwd, env)
    if found is None:
        return None
    return newest_result(found[0], cli_args(argv, env), cwd, env, *where, view=True)


# What a whole answer cannot replay: nothing to keep, show or print as JSON, no fresh run
# asked for; and no terminal (rich lays a terminal out by its width and colours; pipes and CI
# logs get the plain layout kept in the entry).
_NOT_WHOLE = frozenset({"--json", "--show", "--keep", "-keep", "--keep-dir", "-keep-dir",
                        "--no-cache", "--via", "--name-expr", "-h", "--help"})
_RICH_ENV = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS")


def whole_ok(argv: list[str], env, *, terminal: bool) -> bool:
    """Whether this command line may be answered (and recorded) whole; ``terminal``: stdout
    or stderr is one."""
    for w in argv:
        if w == "--":
            break
        if w.split("=", 1)[0] in _NOT_WHOLE:
            return False
    if env.get("NVSTAGE_CACHE", "1") == "0" or any(env.get(v) for v in _RICH_ENV):
        return False
    return not terminal


class Remember:
    """``nvstage compile``'s entry for the build it runs: ``on_built`` (the driver's hook)
    reads it while the work folder exists, ``store`` writes it with what the command printed.
    From the first build on, as the launcher's: the first rebuild is answered whole."""

    def __init__(self, argv: list[str], given: str | None, nvcc: str, source: str,
                 started_ns: int, cwd: str, env):
        self.argv, self.given, self.nvcc, self.source = argv, given, nvcc, source
        self.started_ns, self.cwd, self.env = started_ns, cwd, dict(env)
        self.pending = None

    def on_built(self, build, work: str, seen) -> None:
        from nvstage.compiler.cache.command.entry import CommandLine, outputs_of, prepare

        remember_nvcc(self.given, self.cwd, self.env, self.nvcc, self.source)
        command = CommandLine(self.nvcc, cli_args(self.argv, self.env), build.cwd, self.env)
        self.pending = prepare(command, build, work, outputs_of(build, build.cwd, work), "", "",
                               self.started_ns, seen=seen)

    def store(self, view: dict | None) -> bool:
        """Keep the entry, with ``view`` (what the command prints: ``before``, ``table``,
        ``after``, ``stages``, ``tail``); nothing without one."""
        return self.pending is not None and view is not None and self.pending.store(view)
