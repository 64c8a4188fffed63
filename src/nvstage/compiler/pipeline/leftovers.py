"""Temporary folders that name their owner, and the sweep of those whose owner is gone.

A run ended by SIGKILL (the OOM killer, ``timeout -s KILL``, the resident nvstage's process
group killed during a miss) removes nothing: its work folder (``nvstage-*``) and its tools'
``$TMPDIR``s (``nvstage-tool-*``) would stay for ever. Each such folder holds a marker,
``.nvstage-owner``: the pid of the process that made it and that process's start time
(``/proc/PID/stat``'s field 22, clock ticks since boot), so that a pid used again since is
not taken for the owner. A later run removes the folders whose owner is gone: by that
identity, never by a name's pattern (a folder without the marker, or another user's, is
never touched). Not on the hit path: a miss sweeps now and then (``now_and_then``), and the
resident nvstage's client at once after a child of the server died under it.

Standard library only (the resident client imports it).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile

MARKER = ".nvstage-owner"
PREFIX = "nvstage-"
_MAX_LOOKED = 4096  # names of $TMPDIR looked at in one sweep (a shared /tmp can hold many)
_EVERY = 16  # a miss sweeps about once in this many


def _start(pid: int) -> str | None:
    """Process ``pid``'s start time (clock ticks since boot); None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read(4096).rpartition(b")")[2].split()
    except OSError:
        return None
    # After the name: state is field 3, so starttime (field 22) is the 20th of the rest.
    return fields[19].decode("ascii") if len(fields) > 19 and fields[0] != b"Z" else None


_MINE: list = []  # [pid, its marker's text]


def _identity() -> bytes:
    pid = os.getpid()
    if not _MINE or _MINE[0] != pid:  # a fork (the resident nvstage's child) is another owner
        _MINE[:] = [pid, b"%d %s\n" % (pid, (_start(pid) or "?").encode())]
    return _MINE[1]


def make(prefix: str = PREFIX, folder: str | None = None) -> str:
    """A new temporary folder (``tempfile.mkdtemp``'s) holding this process's marker, and
    naming its owner too (``_OWNER_IN_NAME``): a process killed between the folder's making
    and its marker's (a group SIGKILL as the first folder appears) leaves one it still owns."""
    pid, started = _identity().split()
    path = tempfile.mkdtemp(prefix=f"{prefix}o{pid.decode()}.{started.decode()}-", dir=folder)
    mark(path)
    return path


# The owner in a folder's name (``make``'s): ``-o<pid>.<start>-`` after the prefix.
_OWNER_IN_NAME = re.compile(r"-o(\d+)\.(\d+)-")


def mark(path: str) -> None:
    """Put this process's marker into the new folder ``path`` (made by it)."""
    try:
        fd = os.open(os.path.join(path, MARKER),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, _identity())
        finally:
            os.close(fd)
    except OSError:
        pass  # unmarked: never swept, as before


def owner_gone(path: str) -> bool:
    """Whether ``path`` is a folder of this user holding a marker whose process is gone."""
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return False
        try:
            fd = os.open(os.path.join(path, MARKER), os.O_RDONLY | os.O_NOFOLLOW |
                         os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:  # killed before its marker was written: its name says
            named = _OWNER_IN_NAME.search(os.path.basename(path))
            if named is None:
                return False
            fd, words = None, [named[1].encode(), named[2].encode()]
        if fd is not None:
            try:
                mst = os.fstat(fd)
                if not stat.S_ISREG(mst.st_mode) or mst.st_uid != os.getuid():
                    return False
                words = os.read(fd, 64).split()
            finally:
                os.close(fd)
        pid, started = int(words[0]), words[1].decode("ascii")
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return False
    if pid <= 0 or started == "?":
        return False
    return _start(pid) != started


def sweep(folder: str | None = None) -> list[str]:
    """Remove the ``nvstage-*`` folders in ``folder`` ($TMPDIR) whose owner is gone; their
    paths."""
    folder = folder or tempfile.gettempdir()
    removed = []
    try:
        with os.scandir(folder) as it:
            names = [e.name for _, e in zip(range(_MAX_LOOKED), it)
                     if e.name.startswith(PREFIX)]
    except OSError:
        return removed
    for name in names:
        path = os.path.join(folder, name)
        if owner_gone(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def sweep_after(pid: int, seconds: float = 2.0) -> list[str]:
    """``sweep`` once process ``pid`` is gone (waited for ``seconds`` at most): a killed
    process is still dying for a moment after its peer sees its socket close, and its
    folders would still have a living owner."""
    import time

    end = time.monotonic() + seconds
    while _start(pid) is not None and time.monotonic() < end:
        time.sleep(0.01)
    return sweep()


def now_and_then() -> None:
    """``sweep``, about once in _EVERY calls (a miss makes one): the cost of a look at
    $TMPDIR spread thin."""
    if os.urandom(1)[0] % _EVERY == 0:
        sweep()
