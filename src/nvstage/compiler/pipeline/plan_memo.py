"""nvcc's plan, remembered: a miss need not run ``nvcc --dryrun`` again.

The plan follows from the nvcc and its toolkit, the host compiler it finds, the folder, the
words and the environment: the same key as a whole command's (``cache/command/command_key.py``), over the words as
nvstage asks nvcc (the user's, before the work folder is added). nvcc prints the work folder
in every intermediate's name; it is cut out where it occurs and the next build's pasted in, so
the text comes back as nvcc would print it for that folder. Sealed like every cache document
(HMAC under the user's key), in the marked cache folder under ``plans/``.
"""

from __future__ import annotations

import marshal
import os

from nvstage import fsio
from nvstage.compiler.store import layout as folder, zstd
from nvstage.compiler.cache.command.command_key import key as command_key

SCHEMA = "nvstage.plan/2"  # /2: the text's pieces marshalled, in a zstd frame
_MAX = 16 << 20


def _path(root: str, k: str) -> str:
    return os.path.join(root, "plans", k[:2], k)


def key(nvcc: str, words: list[str], cwd: str, env) -> str | None:
    return command_key(nvcc, [SCHEMA, *words], cwd, env)


def holds(nvcc: str, words: list[str], cwd: str, env) -> bool:
    """Whether a plan is stored for these words (``key``'s), its file not read: what
    ``planning.ask_ahead`` asks before it starts nvcc. No key is worked out before the cache
    folder is nvstage's: a key remembers in this process the names nvcc reads
    (``nvcc/environment.env_names``), and their note, which a later hit reads, is written only
    into an opened folder."""
    root = folder.cache_root(env)
    if root is None or folder.secret(env) is None:
        return False
    k = key(nvcc, words, cwd, env)
    return k is not None and os.path.isfile(_path(root, k))


def lookup(k: str | None, work: str, env) -> str | None:
    """The plan text stored under ``k``, with ``work`` where its work folder was."""
    root = folder.cache_root(env) if k is not None else None
    secret = folder.secret(env) if root is not None else None
    if secret is None:
        return None
    doc = fsio.read_sealed(_path(root, k), secret, _MAX)
    try:
        if doc.get("schema") != SCHEMA:
            return None
        pieces = marshal.loads(zstd.decompress(doc["z"], _MAX))
        if not isinstance(pieces, list) or not all(isinstance(p, str) for p in pieces):
            return None
    except (TypeError, KeyError, AttributeError, ValueError, EOFError, ImportError):
        return None
    return work.join(pieces)


def store(k: str | None, text: str, work: str, env) -> None:
    """Remember a plan nvcc printed in ``work`` (never an error: a plan not kept is made
    again next time)."""
    root = folder.cache_root(env) if k is not None and work else None
    secret = folder.secret(env) if root is not None else None  # made when the cache opened
    if secret is None:
        return
    try:
        packed = zstd.compress(marshal.dumps(text.split(work)))
    except ImportError:
        return
    fsio.write_sealed(_path(root, k), secret, {"schema": SCHEMA, "z": packed})
