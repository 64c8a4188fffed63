"""Files read within a bound (regular files only) and written atomically.

The record of what a stage produced, ``Artifact``, is in ``compiler/record.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tempfile
from pathlib import Path

from nvstage.errors import ArtifactError, InputNotFound, InputTooLarge, NotRegularFile, WriteError

# The most one reader takes from one file, checked before reading. The largest real fatbins
# (a library's kernels for several arches) are hundreds of MB; a 2 GiB file of zeros or a
# cubin padded to 2 GiB took 2-8 GB of memory and up to a minute to reject before this bound.
MAX_ARTIFACT_BYTES = 1 << 30  # 1 GiB


def _kind_of_mode(mode: int) -> str:
    for test, word in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"


def _not_regular(path, mode: int) -> NotRegularFile:
    return NotRegularFile(f"{path} is {_kind_of_mode(mode)}, not a regular file: nvstage "
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


def size_text(n: int) -> str:
    """Bytes for a message: ``2 GiB``, ``64 MiB``, ``512 bytes``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


def read_regular(path: str | os.PathLike, *, limit: int = MAX_ARTIFACT_BYTES,
                 limit_name: str = "MAX_ARTIFACT_BYTES", what: str = "artifact") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes.

    ``InputNotFound`` when missing, ``NotRegularFile`` for a FIFO, device or folder,
    ``InputTooLarge`` past the limit, ``ArtifactError`` when unreadable. The size is checked
    before reading and the read stops at ``limit + 1`` bytes, so a file that grows meanwhile
    (or a /proc file, whose size says 0) cannot take more."""
    try:
        with open_regular(path) as f:
            size = os.fstat(f.fileno()).st_size
            data = _read_upto(f, size, limit + 1) if size <= limit else b""
    except FileNotFoundError:
        raise InputNotFound(f"no such file: {path}") from None
    except NotRegularFile:
        raise
    except OSError as e:
        raise ArtifactError(f"cannot read {path}: {e.strerror or e}") from None
    if size > limit or len(data) > limit:
        at_least = "at least " if len(data) > size else ""  # it grew while being read
        raise InputTooLarge(f"{path} is {at_least}{size_text(max(size, len(data)))}: more "
                            f"than the {size_text(limit)} nvstage reads from one {what} "
                            f"({limit_name})",
                            hint="is it the file you meant? real ones are far smaller")
    return data


def _read_upto(f, size: int, most: int) -> bytes:
    """At most ``most`` bytes: the ``size`` stat gave in one read (asking read() for
    ``most`` would allocate that much up front), then, for a file that says 0 (/proc) or
    grew meanwhile, more in 1 MiB steps."""
    data = f.read(size + 1)
    if len(data) <= size:
        return data
    parts, total = [data], len(data)
    while total < most and (block := f.read(min(1 << 20, most - total))):
        parts.append(block)
        total += len(block)
    return b"".join(parts)


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """The file's SHA-256, streamed; a FIFO or device raises ``NotRegularFile`` (an
    OSError) instead of blocking or reading forever."""
    h = hashlib.sha256()
    with open_regular(path) as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def write_atomic(path: str | os.PathLike, data: bytes | str) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half."""
    path = Path(path)
    if path.is_dir():
        raise WriteError(f"cannot write {path}: it is a folder", hint="give a file name")
    raw = data.encode() if isinstance(data, str) else data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise WriteError(f"cannot write {path}: {e.strerror}",
                         hint="choose a folder you can write to") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; reports are meant to be shared
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError):  # a full disk, a quota: the old file is intact
            raise WriteError(f"cannot write {path}: {e.strerror}") from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    """``obj`` as standard JSON (no NaN or Infinity; see ``json_safe``), atomically."""
    write_atomic(path, json.dumps(json_safe(obj), indent=2, sort_keys=False,
                                  allow_nan=False) + "\n")
