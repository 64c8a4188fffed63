"""The secret: the per-user key every cache document is sealed under, kept outside the cache
folder (the file is still named ``cache.key``).

Every document the caches trust is sealed with an HMAC-SHA256 under it (``fsio.seal``): a
stage entry's ``meta.json`` (which lists each file's SHA-256), a direct key's header sets and
the cache folder's notes (``cache/local/notes.py``), headers' remembered digests
(``store/hash_memo.py``), a command entry (``cache/command/entry.py``), ``nvstage compile``'s
remembered nvcc (``cache/command/compile_answer.py``), the nvcc environment note
(``nvcc/environment.py``) and remembered plans (``pipeline/plan_memo.py``). A plain checksum only finds damage: whoever could
write the cache folder could recompute it and make the next build link a planted object.
Without the key a document cannot be made to verify, so a planted or edited entry is a miss
like a damaged one (and is discarded). The hit path reads the same file
(``store/layout.secret``); only this module makes one.

The key is ``$XDG_CONFIG_HOME/nvstage/cache.key`` (``~/.config/nvstage/cache.key``): 32 random
bytes as hex, made 0600 in a 0700 folder the first time a cache needs it. A cache shared by
several users, or restored in CI from an earlier job, is useful only to those holding the same
key: sharing it is a decision, made by copying the file (and trusting everyone who holds it as
much as the compiler). A key file is read as it is found (a link to a shared key is followed),
a regular file of at most 4 KiB; anything else is an error, never a hang.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

from nvstage.errors import CacheError
from nvstage.paths import key_file_of

_MAX_KEY_BYTES = 4096
_MIN_KEY_BYTES = 16  # what a hand-made shared key must at least hold

_memo: dict[tuple, bytes] = {}  # (path, device, inode, size, mtime) -> key


def key_path() -> Path:
    return Path(key_file_of(os.environ))


def secret() -> bytes:
    """This user's cache key, made when there is none. Raises ``CacheError`` when it cannot be
    read or made (its ``__cause__`` is the OSError, so a caller may tell "read-only" apart)."""
    path = key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise CacheError(f"cannot read the stage cache's key {path}: {e.strerror or e}") from e
    try:
        _make_key(path)
        return _read_key(path)
    except OSError as e:
        raise CacheError(f"cannot make the stage cache's key {path}: {e.strerror or e}",
                         hint="set XDG_CONFIG_HOME to a folder you can write, or run with "
                              "--no-cache") from e


def _read_key(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        sig = (str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        if sig in _memo:
            return _memo[sig]
        if not stat.S_ISREG(st.st_mode):
            raise CacheError(f"the stage cache's key {path} is not a regular file",
                             hint="remove it: nvstage makes a new one")
        data = os.read(fd, _MAX_KEY_BYTES + 1).strip()
    finally:
        os.close(fd)
    if len(data) > _MAX_KEY_BYTES or len(data) < _MIN_KEY_BYTES:
        raise CacheError(f"the stage cache's key {path} holds {len(data)} bytes: a key has "
                         f"{_MIN_KEY_BYTES} to {_MAX_KEY_BYTES}",
                         hint="remove it: nvstage makes a new one")
    _memo[sig] = data
    return data


def _make_key(path: Path) -> None:
    """Write a new key whole, or leave the one another process made first."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".cache.key-")  # 0600
    try:
        with os.fdopen(fd, "wb") as f:
            # the kernel's CSPRNG, as secrets.token_hex's (whose import, with base64 and
            # hmac, is 1.5 ms of every cold command)
            f.write(os.urandom(32).hex().encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # never over an existing key: the first one made wins
        except FileExistsError:
            pass
        except OSError as e:
            if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                raise
            # A filesystem without hard links: rename, unless a key appeared meanwhile.
            if not path.exists():
                os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
