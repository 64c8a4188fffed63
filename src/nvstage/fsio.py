"""The files nvstage reads and writes of its own: bounded reads, atomic writes, digests and
sealed documents.

Standard library only, and little of it (os, stat, marshal at import; the rest inside the
function that needs it): the hit path answers a whole command with this
module before anything else is imported. No json (re, enum), no hashlib or hmac (OpenSSL is slow
to load) for a small document: the builtin SHA-256 does, and hashlib takes over only where its
speed pays for its import.

A sealed document is ``HMAC-SHA256(secret, body)`` in hex, a newline, then the body: one
format for every document nvstage must trust (the stage cache's entries, header sets and
notes, a whole command's entry, a remembered plan). Whoever can write the folder cannot make a
document that verifies without the secret, so a planted or edited one reads as missing.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys

_CHUNK = 1 << 20
# Above this many bytes OpenSSL's SHA-256 (hashlib: 2 ms to load, four times the builtin's
# speed) pays for itself.
_OPENSSL_FROM = 1 << 20


class NotRegular(OSError):
    """What a path names is not a regular file (a FIFO, a device, a folder, a link that is not
    followed): never opened for reading, or refused on the open descriptor."""

    def __init__(self, path, mode: int):
        import errno  # a builtin, but not loaded by a hit that reads what it expects

        super().__init__(errno.EINVAL, "not a regular file", os.fspath(path))
        self.mode = mode


class TooLarge(OSError):
    """A file over the bound it is read within: ``size`` bytes at least (``grew``: it grew
    while being read, so its stat said less)."""

    def __init__(self, path, size: int, grew: bool = False):
        import errno

        super().__init__(errno.EFBIG, "over the size read", os.fspath(path))
        self.size, self.grew = size, grew


# -- reading ----------------------------------------------------------------------------------
def read_bounded(path, limit: int, *, follow: bool = False) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes.

    Opened without blocking (a FIFO's open would wait for a writer) and, unless ``follow``,
    without following a link (O_NOFOLLOW: a planted link is ELOOP); the type is checked on the
    open descriptor and the read stops at ``limit + 1`` bytes, so a file that grows meanwhile
    (or a /proc file, whose size says 0) cannot take more. Raises ``NotRegular``, ``TooLarge``
    or the OSError of the open (a missing file is FileNotFoundError)."""
    if follow:  # a path someone gave: a device is not even opened (a tape would rewind)
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(path, mode)
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(path, st.st_mode)
        if st.st_size > limit:
            raise TooLarge(path, st.st_size)
        # The size the stat gave in one read (asking for ``limit`` would allocate that much
        # up front), then, for a file that says less than it holds, more in steps.
        data = os.read(fd, st.st_size + 1)
        if len(data) > st.st_size:
            parts, total = [data], len(data)
            while total <= limit and (block := os.read(fd, min(limit + 1 - total, _CHUNK))):
                parts.append(block)
                total += len(block)
            data = b"".join(parts)
            if total > limit:
                raise TooLarge(path, total, grew=True)
        return data
    finally:
        os.close(fd)


def read_or_none(path, limit: int, *, follow: bool = False) -> bytes | None:
    """``read_bounded``, None for anything it would raise: a cache's own file that is
    missing, planted or too large is a miss, never a hang and never an error."""
    try:
        return read_bounded(path, limit, follow=follow)
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return None


# -- writing ----------------------------------------------------------------------------------
def replace(path, data: bytes, *, tmpdir=None, mode: int = 0o666, sync: bool = False) -> None:
    """``data`` written to a new file, then renamed over ``path``: a reader sees the old file
    or the new one, never half, and a link at ``path`` is replaced, never written through.

    The temporary file is made in ``tmpdir`` (default: beside ``path``) with ``mode`` less the
    umask, as a tool's own write would be; ``sync``: flushed to the disk before the rename (a
    document people keep). Raises the OSError; the temporary file is gone either way."""
    path = os.fspath(path)
    folder = os.fspath(tmpdir) if tmpdir is not None else (os.path.dirname(path) or ".")
    tmp = os.path.join(folder, f"{temporary_prefix(os.path.basename(path))}"
                               f"{os.getpid()}-{os.urandom(4).hex()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 mode)
    try:
        with open(fd, "wb", closefd=True) as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # a full disk, and an interrupted write (Ctrl-C) alike
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def umask() -> int:
    """This process's umask: reading it means setting it, so it is set back at once (the warm
    client, ``launcher/resident/ask.py``, reads it the same way without ``os``)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def temporary_prefix(name: str) -> str:
    """How ``replace`` begins the name of the file it writes for ``name``: a reader listing a
    folder can tell a file being written from one that is there (within a folder entry's 255
    bytes whatever the target's name)."""
    return f".{name if len(os.fsencode(name)) <= 200 else 'nvstage'}."


def append_line(path, line: bytes) -> None:
    """``line`` appended to the regular file ``path`` (made if missing), with no lock: one
    small O_APPEND write is never interleaved with another. A link, a FIFO or a full disk
    leaves it unwritten (these lines are counts and ledgers: never a reason to fail)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW
                     | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError:
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.write(fd, line + b"\n")
    except OSError:
        pass
    finally:
        os.close(fd)


# -- digests ----------------------------------------------------------------------------------
def sha256(data: bytes = b""):
    """A SHA-256 object: OpenSSL's where hashlib is loaded already or ``data`` is large, else
    the builtin one (loading hashlib would cost more than a small hash)."""
    hashlib = sys.modules.get("hashlib")
    if hashlib is None and len(data) >= _OPENSSL_FROM:
        import hashlib
    if hashlib is not None:
        return hashlib.sha256(data)
    from _sha256 import sha256 as builtin

    return builtin(data)


def hexdigest(data: bytes) -> str:
    """``data``'s SHA-256 in hex."""
    return sha256(data).hexdigest()


def json_digest(parts) -> str:
    """The SHA-256 of ``parts`` (lists, strings, numbers) as canonical JSON: sorted keys, no
    blanks, so the same value always hashes the same."""
    import json

    return hexdigest(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode())


_X36 = bytes(x ^ 0x36 for x in range(256))
_X5C = bytes(x ^ 0x5C for x in range(256))


def hmac_hex(key: bytes, msg: bytes) -> bytes:
    """HMAC-SHA256 (RFC 2104) in hex: what ``hmac.new(key, msg, "sha256")`` gives, without
    importing hmac (and OpenSSL, unless ``msg`` is large)."""
    if len(key) > 64:
        key = sha256(key).digest()
    key = key.ljust(64, b"\0")
    inner = sha256(key.translate(_X36) + msg).digest()
    return sha256(key.translate(_X5C) + inner).hexdigest().encode()


# -- sealed documents -------------------------------------------------------------------------
def seal(secret: bytes, body: bytes) -> bytes:
    """A sealed document's bytes: the HMAC of ``body`` under ``secret``, a newline, ``body``."""
    return hmac_hex(secret, body) + b"\n" + body


def unseal(raw: bytes, secret: bytes) -> bytes | None:
    """The body of a ``seal``ed document; None when its seal is missing or does not hold
    (damaged, forged, sealed under another key, or written in another format)."""
    from _operator import _compare_digest

    mac, nl, body = raw.partition(b"\n")
    if not nl or not _compare_digest(mac, hmac_hex(secret, body)):
        return None
    return body


def read_sealed(path, secret: bytes, limit: int):
    """What ``write_sealed`` wrote to ``path`` under ``secret``; None when the file is missing,
    too large, not a regular file, or its seal does not hold (marshal is no format for
    untrusted data: it is read only after the HMAC checks out)."""
    raw = read_or_none(path, limit)
    body = None if raw is None else unseal(raw, secret)
    if body is None:
        return None
    try:
        return marshal.loads(body)
    except (ValueError, EOFError, TypeError):
        return None


def write_sealed(path, secret: bytes, value) -> None:
    """``value`` marshalled and sealed, written atomically (its folder made); a failure writes
    nothing (these notes only save work: never a reason to fail a build)."""
    data = seal(secret, marshal.dumps(value))
    if read_or_none(path, len(data)) == data:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        replace(path, data)
    except OSError:
        pass
