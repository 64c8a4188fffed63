"""The folder a build writes its intermediate files to, and the manifest kept in it.

A kept folder is locked for the build, and its manifest says "running" before the first stage
and "interrupted" when a signal stopped the build: a folder's earlier "ok" manifest must never
vouch for a mix of old and new files.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from nvstage.compiler.record import Build, save_build
from nvstage.errors import UsageError


@contextlib.contextmanager
def work_folder(keep: str | os.PathLike | None, cwd: str,
                prefix: str = "nvstage-") -> Iterator[Path]:
    """The folder a build writes its intermediate files to.

    ``keep`` (relative to ``cwd``) is created if needed and locked for the build: a second
    build given the same folder at once would overwrite the first one's files mid-build, so it
    is refused. Without ``keep``: a new temporary folder, removed afterwards.
    """
    if keep is None:
        work = Path(tempfile.mkdtemp(prefix=prefix))
        try:
            yield work
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    work = Path(cwd, keep).resolve()
    try:
        work.mkdir(parents=True, exist_ok=True)
        fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise UsageError(f"cannot use {keep} as the keep folder: {e.strerror}",
                         hint="give a folder you can write to") from e
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"another nvstage build is using the keep folder {keep} right now",
                             hint="give each concurrent build its own --keep folder") from None
        yield work
    finally:
        os.close(fd)  # releases the lock


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
