"""nvcc's plan, remembered: a miss need not run ``nvcc --dryrun`` again.

The plan follows from the nvcc and its toolkit, the host compiler it finds, the folder, the
words and the environment: the same key as a whole command's (``cache/command/command_key.py``), over the words as
nvstage asks nvcc (the user's, before the work folder is added). nvcc prints the work folder
in every intermediate's name; it is cut out where it occurs and the next build's pasted in, so
the text comes back as nvcc would print it for that folder. Sealed like every cache document
(HMAC under the user's key), in the marked cache folder under ``plans/``.

A cold build compiles each unit once, under words no earlier command used, so the plan is also
remembered by its shape (``Shape``): the words with the source's stem cut out, where nvcc
only echoes a name (the source, ``-o``, ``-MF``, ``-MT``). nvcc prints names as text, so the
next unit's plan is the same text with its own stem pasted in. A shape is trusted only once
the plan one unit taught gave another unit's plan exactly, as nvcc printed it; until then
nvcc plans as before.
"""

from __future__ import annotations

import marshal
import os
import re

from nvstage import fsio
from nvstage.compiler.store import layout as folder, zstd
from nvstage.compiler.cache.command.command_key import key as command_key

SCHEMA = "nvstage.plan/2"  # /2: the text's pieces marshalled, in a zstd frame
SHAPE = "nvstage.plan-shape/1"
_MAX = 16 << 20
# A stem that nvcc writes into names as it is (no quoting, no leading dash).
_STEM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")
# The options whose value nvcc only echoes (into the plan's names and outputs).
_ECHOED = frozenset({"-o", "--output-file", "-MF", "--dependency-output", "-MT",
                     "--dependency-target-name"})


def _path(root: str, k: str) -> str:
    return os.path.join(root, "plans", k[:2], k)


def key(nvcc: str, words: list[str], cwd: str, env) -> str | None:
    return command_key(nvcc, [SCHEMA, *words], cwd, env)


def holds(nvcc: str, words: list[str], source: str | None, cwd: str, env) -> bool:
    """Whether a plan is stored for these words (``key``'s), or proved for their shape
    (``Shape``), its file not read: what ``planning.ask_ahead`` asks before it starts nvcc.
    Nothing is asked of a folder that keeps no plan (in a new one the key, which reads nvcc's
    35 MB the first time, is worked out while nvcc plans), and no key is worked out before
    the cache folder is nvstage's: a key remembers in this process the names nvcc reads
    (``nvcc/environment.env_names``), and their note, which a later hit reads, is written only
    into an opened folder."""
    root = folder.cache_root(env)
    if root is None or not os.path.isdir(os.path.join(root, "plans")) or \
            folder.secret(env) is None:
        return False
    k = key(nvcc, words, cwd, env)
    if k is not None and os.path.isfile(_path(root, k)):
        return True
    shape = Shape.of(nvcc, words, source, cwd, env)
    return shape is not None and shape.holds()


def lookup(k: str | None, work: str, env) -> str | None:
    """The plan text stored under ``k``, with ``work`` where its work folder was."""
    root = folder.cache_root(env) if k is not None else None
    secret = folder.secret(env) if root is not None else None
    if secret is None:
        return None
    got = _read(root, k, secret, SCHEMA)
    return None if got is None else _joined(got[1], work)


def _joined(pieces, sep: str, inner: str | None = None) -> str | None:
    """``sep`` between the pieces (each a str, or with ``inner`` a list of str with ``inner``
    between them); None unless that is what they are, or when the text would pass ``_MAX``:
    marshal shares one object many times, so a small document can stand for a huge text."""
    if not isinstance(pieces, list):
        return None
    left = _MAX
    for p in pieces:
        parts = [p] if inner is None else p
        if not isinstance(parts, list):
            return None
        left -= len(sep) + 1  # at least a character of budget a piece, an empty one too
        for q in parts:
            if not isinstance(q, str):
                return None
            left -= len(q) + len(inner or "") + 1
            if left < 0:
                return None
    return sep.join(p if inner is None else inner.join(p) for p in pieces)


def _read(root: str, k: str, secret: bytes, schema: str) -> tuple[dict, object] | None:
    """(the document, its unpacked pieces) stored under ``k``, if it is a ``schema`` one."""
    doc = fsio.read_sealed(_path(root, k), secret, _MAX)
    try:
        if doc.get("schema") != schema:
            return None
        return doc, marshal.loads(zstd.decompress(doc["z"], _MAX))
    except (TypeError, KeyError, AttributeError, ValueError, EOFError, ImportError):
        return None


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


class Shape:
    """Where the plan of a command's shape is remembered: ``of`` gives it for a command whose
    source's stem nvcc only echoes, else None. ``seen``: the key of a plan one unit taught;
    ``sure``: of one that gave another unit's plan exactly (only that one is ever used)."""

    __slots__ = ("stem", "root", "secret", "seen", "sure")

    def __init__(self, stem: str, root: str, secret: bytes, seen: str, sure: str):
        self.stem, self.root, self.secret, self.seen, self.sure = stem, root, secret, seen, sure

    @classmethod
    def of(cls, nvcc: str, words: list[str], source: str | None, cwd: str, env) -> Shape | None:
        """``words``' shape (nvcc's arguments, led by the plan's kind as ``key``'s are), its
        source the word ``source``; None when the stem shows where nvcc may do more than echo
        it, or no cache folder is nvstage's (as ``holds``)."""
        stem = os.path.basename(source or "").rpartition(".")[0]
        if not _STEM.fullmatch(stem):
            return None
        shaped, echoed = [], False
        for w in words:
            # Only as a file's name: at the start or after a folder, before its extension
            # (``-o k.ptx`` from ptx.cu would say which kind of file nvcc writes).
            if stem in w and (not echoed and w != source or w.count(stem) != w.count(
                    f"/{stem}.") + w.startswith(f"{stem}.")):
                return None
            shaped.append(w.replace(stem, "\0"))
            echoed = w in _ECHOED
        root = folder.cache_root(env)
        secret = folder.secret(env) if root is not None else None
        if secret is None:
            return None
        k = key(nvcc, ["shape", *shaped], cwd, env)
        if k is None:
            return None
        return cls(stem, root, secret, k + "-seen", k)

    def holds(self) -> bool:
        return os.path.isfile(_path(self.root, self.sure))

    def lookup(self, work: str) -> str | None:
        """The plan for this command, in ``work``, from a shape that proved itself."""
        got = _read(self.root, self.sure, self.secret, SHAPE)
        return None if got is None else _joined(got[1], work, self.stem)

    def learn(self, text: str, work: str) -> None:
        """Take the plan nvcc printed in ``work`` for this command: it proves the shape
        another unit taught when it is that one's plan with this stem pasted in; else it is
        the one taught, for the next unit to prove."""
        taught = _read(self.root, self.seen, self.secret, SHAPE)
        proved = taught is not None and taught[0].get("stem") != self.stem and \
            _joined(taught[1], work, self.stem) == text
        # What is proved is the template taught, holes where its stem was: this stem may
        # also stand where nvcc prints a word of its own (``cuda`` in cuda_runtime.h).
        pieces = taught[1] if proved else [p.split(self.stem) for p in text.split(work)]
        try:
            packed = zstd.compress(marshal.dumps(pieces))
        except ImportError:
            return
        fsio.write_sealed(_path(self.root, self.sure if proved else self.seen), self.secret,
                          {"schema": SHAPE, "z": packed, "stem": self.stem})
