"""The user's files (artifacts, reports, documents written out): read within a bound, regular
files only, and written atomically. nvstage's own cache documents are ``fsio``'s.

The record of what a stage produced, ``Artifact``, is in ``compiler/manifest/model.py``.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import math
import os
import re
import stat
from pathlib import Path

from nvstage import fsio
from nvstage.errors import (ArtifactError, InputNotFound, InputTooLarge, NotRegularFile, WriteError,
                            one_line)

# The most one reader takes from one file, checked before reading. The largest real fatbins
# (a library's kernels for several arches) are hundreds of MB; a 2 GiB file of zeros or a
# cubin padded to 2 GiB took 2-8 GB of memory and up to a minute to reject before this bound.
MAX_ARTIFACT_BYTES = 1 << 30  # 1 GiB


def kind_of_mode(mode: int) -> str:
    for test, word in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"


def _not_regular(path, mode: int) -> NotRegularFile:
    return NotRegularFile(f"{path} is {kind_of_mode(mode)}, not a regular file: nvstage "
                          "reads only regular files",
                          hint="copy what it holds into a file and give that")


def open_regular(path: str | os.PathLike):
    """``path`` opened for binary reading, if it is a regular file (symlinks followed).

    A FIFO would block the open or the read forever and a device such as /dev/zero never
    ends, so anything else raises ``NotRegularFile`` (an OSError) unread. A stat comes first,
    so a device is not even opened; O_NONBLOCK keeps the open from waiting for a FIFO's
    writer should the path be swapped meanwhile, and the type is checked again on the open
    descriptor. Other OSErrors (a missing file, no permission) pass through."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise _not_regular(path, mode)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _not_regular(path, mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def is_folder(path: str | os.PathLike) -> bool:
    """``Path.is_dir()`` without its exceptions: a name the system cannot even look up (too
    long, a link loop) is no folder, and the read or write that follows says what is wrong
    with it in one line, instead of a traceback from here."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def is_regular(path: str | os.PathLike) -> bool:
    """``Path.is_file()`` without its exceptions (see ``is_folder``)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def size_text(n: int) -> str:
    """Bytes for a message: ``2 GiB``, ``64 MiB``, ``512 bytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


def read_regular(path: str | os.PathLike, *, limit: int = MAX_ARTIFACT_BYTES,
                 limit_name: str = "MAX_ARTIFACT_BYTES", what: str = "artifact") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (``fsio.read_bounded``, links
    followed), or one line saying why not.

    ``InputNotFound`` when missing, ``NotRegularFile`` for a FIFO, device or folder,
    ``InputTooLarge`` past the limit, ``ArtifactError`` when unreadable. The size is checked
    before reading and the read stops at ``limit + 1`` bytes, so a file that grows meanwhile
    (or a /proc file, whose size says 0) cannot take more."""
    try:
        return fsio.read_bounded(path, limit, follow=True)
    except FileNotFoundError:
        raise InputNotFound(f"no such file: {shown_path(path)}") from None
    except fsio.NotRegular as e:
        raise _not_regular(path, e.mode) from None
    except fsio.TooLarge as e:
        at_least = "at least " if e.grew else ""  # it grew while being read
        raise InputTooLarge(f"{path} is {at_least}{size_text(e.size)}: more than the "
                            f"{size_text(limit)} nvstage reads from one {what} "
                            f"({limit_name})",
                            hint="is it the file you meant? real ones are far smaller") from None
    except OSError as e:  # no access, a name too long, a loop of links
        raise ArtifactError(f"cannot read {shown_path(path)}: {e.strerror or e}") from None


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """The file's SHA-256, streamed; a FIFO or device raises ``NotRegularFile`` (an
    OSError) instead of blocking or reading forever."""
    h = hashlib.sha256()
    with open_regular(path) as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def write_atomic(path: str | os.PathLike, data: bytes | str, *,
                 in_document_folder: bool = False) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half.

    Only a regular file (or nothing) is replaced, by a temporary file renamed over it. What
    the path names otherwise is never renamed over: a rename made ``-o /dev/null`` a plain
    file, for the whole machine when run as root. A character device (/dev/null, a
    terminal) or a pipe with a reader is written into directly, as a shell's ``>`` would;
    so is what a descriptor this process holds names (``/dev/stdout`` -> /proc/self/fd/1: a
    terminal, a pipe to ``jq``, the file stdout was sent to; ``>(gzip)``). A folder (or a
    link to one), a socket, a block device or a pipe nobody reads is refused with one line.
    Any other symlink is replaced by the file, whatever it points to, never written
    through: a link planted among documents (a keep folder) must not carry a write elsewhere.

    ``in_document_folder``: ``path`` is a name in a folder that may be someone else's (a
    keep folder's ``stages.json``, its ``report.html``), not a target the user typed: no
    symlink there is followed, not even to a descriptor, and a device or FIFO is refused."""
    path = Path(path)
    raw = _encoded(data)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:  # a name too long, a loop in the folders above, no access
        raise WriteError(f"cannot write {shown_path(path)}: {e.strerror or e}") from None
    if st is not None and not stat.S_ISREG(st.st_mode):
        mode = st.st_mode
        if stat.S_ISLNK(mode):
            target = None
            if not in_document_folder:
                with contextlib.suppress(OSError):
                    target = os.stat(path).st_mode
            # Replaced below, its target untouched; but a descriptor we hold is written
            # into, and a link to a folder is refused as the folder would be.
            mode = target if target is not None and (
                stat.S_ISDIR(target) or _through_open_fd(path)) else None
        if mode is not None:
            if not in_document_folder and (stat.S_ISCHR(mode) or stat.S_ISFIFO(mode)
                                           or stat.S_ISREG(mode)):
                _write_into(path, raw, mode)
                return
            raise WriteError(f"cannot write {shown_path(path)}: it is {kind_of_mode(mode)}",
                             hint="give a file name" if stat.S_ISDIR(mode) else
                             "nvstage writes to a file, a pipe or a character device only")
    _replace(path, raw)


def append_text(path: str | os.PathLike, text: str) -> None:
    """Add ``text`` at the end of ``path`` (a job summary shared by every step of a job),
    made if missing. What is not a regular file is written into or refused as
    ``write_atomic`` does: a pipe nobody reads would block the open for ever."""
    path = Path(path)
    raw = _encoded(text)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise WriteError(f"cannot write {shown_path(path)}: {e.strerror or e}") from None
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
            _write_into(path, raw, mode)
            return
        raise WriteError(f"cannot write {shown_path(path)}: it is {kind_of_mode(mode)}",
                         hint="give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab") as f:
            f.write(raw)
    except OSError as e:
        raise WriteError(f"cannot write {shown_path(path)}: {e.strerror or e}") from None


def _encoded(data: bytes | str) -> bytes:
    """UTF-8, with a file name that is not UTF-8 (its bytes carried as surrogates, as
    ``os.fsdecode`` gives them) written back as the bytes it is, not a traceback."""
    return data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data


def shown_path(path) -> str:
    """A path for a message: one line, and not 4 KB of it."""
    text = one_line(os.fspath(path))
    return text if len(text) <= 200 else f"{text[:120]}...{text[-40:]} ({len(text)} characters)"


# /dev/stdout, /dev/fd/3, /proc/self/fd/1: a descriptor this process already holds.
_OPEN_FD = re.compile(r"/(?:proc/(?:self|thread-self|\d+)|dev)/fd/\d+")


def _through_open_fd(path: Path) -> bool:
    """Whether ``path``'s chain of links passes through an open descriptor (/dev/stdout ->
    /proc/self/fd/1): what it names is a file the shell opened for us, not a link to replace."""
    p = os.path.abspath(path)
    for _ in range(40):  # the kernel's own bound on links followed
        if _OPEN_FD.fullmatch(p):
            return True
        try:
            target = os.readlink(p)
        except OSError:
            return False
        p = os.path.normpath(os.path.join(os.path.dirname(p), target))
    return False


def _write_into(path: Path, raw: bytes, mode: int) -> None:
    """Write into what ``path`` already is (a device, a pipe, an open file), no rename.
    A pipe is opened without waiting: one with no reader would block the open for ever."""
    flags = os.O_WRONLY | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    if stat.S_ISFIFO(mode):
        flags |= os.O_NONBLOCK
    elif stat.S_ISREG(mode):
        flags |= os.O_TRUNC
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ENXIO:
            raise WriteError(f"cannot write {shown_path(path)}: it is a FIFO (named pipe) that "
                             "nothing reads", hint="start its reader first, or give a file "
                             "name") from None
        raise WriteError(f"cannot write {shown_path(path)}: {e.strerror or e}") from None
    try:
        os.set_blocking(fd, True)
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view):]
    except OSError as e:
        raise WriteError(f"cannot write {shown_path(path)}: {e.strerror or e}") from None
    finally:
        os.close(fd)


def _replace(path: Path, raw: bytes) -> None:
    """A temporary file beside ``path``, renamed over it (``fsio.replace``): made with the
    mode a fresh write gets (reports are meant to be shared), on the disk before the rename."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fsio.replace(path, raw, sync=True)
    except OSError as e:  # a full disk, a quota, a name too long: the old file is intact
        hint = "choose a folder you can write to" if e.errno in (errno.EACCES, errno.EROFS) \
            else None
        raise WriteError(f"cannot write {shown_path(path)}: {e.strerror or e}",
                         hint=hint) from None


def json_safe(obj):
    """``obj`` with every NaN and infinity made null: ``json.dumps`` would write them as
    ``NaN``/``Infinity``, which are not JSON, and a strict reader (jq, JavaScript) rejects
    the whole document. Containers are copied; anything else is returned as it is."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    return obj


def write_json_atomic(path: str | os.PathLike, obj, *, in_document_folder: bool = False
                      ) -> None:
    """``obj`` as standard JSON (no NaN or Infinity; see ``json_safe``), atomically."""
    write_atomic(path, json.dumps(json_safe(obj), indent=2, sort_keys=False,
                                  allow_nan=False) + "\n", in_document_folder=in_document_folder)
