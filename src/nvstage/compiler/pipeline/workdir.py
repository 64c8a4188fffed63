"""The folder a build writes its intermediate files to, and the manifest kept in it.

A kept folder is locked for the build, and its manifest says "running" before the first stage
and "interrupted" when a signal stopped the build: a folder's earlier "ok" manifest must never
vouch for a mix of old and new files.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from nvstage.files import kind_of_mode, shown_path as _shown
from nvstage.compiler.manifest.model import Build, save_build
from nvstage.compiler.pipeline import leftovers
from nvstage.errors import UsageError


@contextlib.contextmanager
def work_folder(keep: str | os.PathLike | None, cwd: str,
                prefix: str = "nvstage-") -> Iterator[Path]:
    """The folder a build writes its intermediate files to.

    ``keep`` (relative to ``cwd``) is created if needed and locked for the build: a second
    build given the same folder at once would overwrite the first one's files mid-build, so it
    is refused. Without ``keep``: a new temporary folder, removed afterwards.

    A keep folder is a document (a CI artifact, a folder committed in someone's pull
    request), so it is never a symlink: ``vadd.nvstage -> /somewhere`` would have a build
    written into its target. An empty name (``--keep-dir "$UNSET"``) is refused rather than
    taken for the current folder. What the build writes inside it goes through
    ``clear_planted``.
    """
    if keep is not None and not os.fspath(keep).strip():
        raise UsageError("the keep folder's name is empty",
                         hint="give a folder: --keep-dir build.nvstage (an unset variable?)")
    if keep is None:
        # Marked with this process's identity: a run killed here leaves a folder that a
        # later one removes (``leftovers``), now and then.
        leftovers.now_and_then()
        work = Path(leftovers.make(prefix))
        try:
            yield work
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    given = Path(cwd, keep)
    if os.path.islink(given):
        raise UsageError(f"the keep folder {keep} is a symbolic link (to {_target(given)}): "
                         "nvstage does not build into a link",
                         hint="give the folder it points to, if that is the one you mean, or "
                              "remove the link")
    try:
        work = given.resolve()  # the folders above it may be links; the last one is not
        work.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: a link swapped in since the check above is refused all the same.
        fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        why = ("it is not a folder" if e.errno in (errno.EEXIST, errno.ENOTDIR) else
               "it is a symbolic link (or a loop of them)" if e.errno == errno.ELOOP else
               e.strerror or e)
        raise UsageError(f"cannot use {_shown(keep)} as the keep folder: {why}",
                         hint="give a folder you can write to") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"another nvstage build is using the keep folder {keep} right now",
                             hint="give each concurrent build its own --keep folder") from None
        yield work
    finally:
        os.close(fd)  # releases the lock


def _target(link: Path) -> str:
    try:
        return _shown(os.readlink(link))
    except OSError:
        return "?"


def clear_planted(work: Path, paths, cwd: str) -> list[str]:
    """Make sure nothing the build is about to write inside the keep folder ``work`` is a
    symlink, a FIFO, a device or a socket: a tool opening ``vadd.cpp4.ii`` for writing
    follows a link planted there (into ``~/.bashrc``), and blocks on a FIFO. Such an entry
    is one of the folder's own names, so it is removed (the file it pointed to is left
    alone); a folder in the way is refused. Paths outside ``work`` (the user's own ``-o``)
    keep nvcc's meaning and are not touched. Returns the names removed."""
    removed = []
    for p in paths:
        target = Path(cwd, p)
        if os.path.dirname(os.path.abspath(target)) != os.fspath(work):
            continue
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            continue
        except OSError as e:
            raise UsageError(f"cannot write {_shown(target)} in the keep folder: "
                             f"{e.strerror or e}") from None
        if stat.S_ISREG(mode):
            continue
        if stat.S_ISDIR(mode):
            raise UsageError(f"{_shown(target)} is a folder where the build writes a file",
                             hint="remove it, or give another --keep-dir")
        try:
            os.unlink(target)
        except OSError as e:
            raise UsageError(f"cannot remove {_shown(target)} ({_kind(mode)}) from the keep "
                             f"folder: {e.strerror or e}",
                             hint="remove it yourself, or give another --keep-dir") from None
        removed.append(_shown(target.name))
    return removed


def _kind(mode: int) -> str:
    return "a symbolic link" if stat.S_ISLNK(mode) else kind_of_mode(mode)


def finish(build: Build, work: Path, t_start: float, *, running: bool = False) -> None:
    """Stop the build's clock and, when the folder is kept, write its manifest beside it.

    ``running``: a manifest with status "running", written before the first stage. Should
    the build stop part way (a signal, a crash), the folder's earlier "ok" manifest must not
    vouch for a mix of old and new files.
    """
    build.wall_seconds = time.perf_counter() - t_start
    if build.keep_dir is not None:
        save_build(build, work, status="running" if running else None)


def finish_interrupted(build: Build, work: Path, t_start: float, err: BaseException) -> None:
    """``finish`` for a build Ctrl-C or a signal stopped: its manifest lists what finished,
    and no reader may take it for whole. Written only if it can be: the interruption goes on."""
    build.status = "interrupted"
    build.error = {"error": type(err).__name__, "hint": None,
                   "message": f"the build stopped before every stage ran ({err})"}
    with contextlib.suppress(OSError):
        finish(build, work, t_start)
