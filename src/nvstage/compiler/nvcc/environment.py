"""The environment nvcc reads: the variables that can change what one of its commands builds.

Taken from the toolkit in use, since a release may add one (a key over the command line and a
fixed list returned stale objects when ``PTXAS_FLAGS`` or ``INCLUDES`` changed):

- ``nvcc.profile`` (beside the real nvcc): a ``NAME += ...`` or ``NAME =+ ...`` line adds to
  what the environment holds (``INCLUDES``, ``SYSTEM_INCLUDES``, ``LIBRARIES``,
  ``CUDAFE_FLAGS``, ``PTXAS_FLAGS``, ``PATH``, ``LD_LIBRARY_PATH``); a plain ``NAME = ...``
  line overrides it (``TOP``, ``CICC_PATH``): the environment's value never reaches the plan.
- nvcc's own binary: the variables it reads that no profile names (``OCG_FLAGS`` to ptxas,
  ``NVVM_FLAGS`` to cicc, ``NVLINK_FLAGS`` to nvlink, ``NV_NVVM_VERSION``) are NUL-terminated
  identifiers in it. Every one with an underscore is keyed (about 50 in 13.5, most never set):
  keying a name that changes nothing costs a miss when it changes, leaving one out a stale
  object. ``TMPDIR`` alone is left out: it names nvcc's scratch files, never their contents.

Scanning nvcc's ``.rodata`` (1 MB of its 35) takes a few ms; the names are still remembered
per nvcc identity
(its real path and the stat of it and its profile) in the cache folder, sealed like every note
(``inv/env/``: ``env_names``), and in the process. Standard library only: a hit reads one
small sealed note.
"""

from __future__ import annotations

import os

from nvstage import fsio
from nvstage.compiler.store.layout import WHOLE, opened

SCHEMA = "nvstage.nvcc-env/1"
# Scratch-file names only: plain nvcc's outputs are the same under any TMPDIR (tested).
NEUTRAL = frozenset({"TMPDIR"})
# Seen read by the 13.5 wheels' nvcc: keyed whatever the scan finds (an nvcc that is a wrapper
# script has no profile beside it and no names in its bytes).
KNOWN = frozenset({"INCLUDES", "SYSTEM_INCLUDES", "LIBRARIES", "CUDAFE_FLAGS", "PTXAS_FLAGS",
                   "OCG_FLAGS", "NVVM_FLAGS", "NVLINK_FLAGS", "NV_NVVM_VERSION",
                   "LD_LIBRARY_PATH"})
_MAX_BINARY = 1 << 30


def profile_names(text: str) -> tuple[frozenset[str], frozenset[str]]:
    """(added to, overridden): the names an nvcc.profile's lines append or prepend to from
    the environment (``+=``, ``=+``), and the names it assigns outright (``=``)."""
    added, assigned = set(), set()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        head, _, _ = line.partition("=")
        appends = head.endswith("+") or line[len(head) + 1:].startswith("+")
        name = head.rstrip("+").strip()
        if not name.replace("_", "").isalnum() or not name.isascii():
            continue
        (added if appends else assigned).add(name)
    return frozenset(added), frozenset(assigned - added)


_NAME = None


def binary_names(data: bytes) -> frozenset[str]:
    """The NUL-terminated upper-case identifiers with an underscore in an executable's bytes:
    the environment variables it may read by name (and some other strings, harmless)."""
    import re

    global _NAME
    _NAME = _NAME or re.compile(rb"\0([A-Z][A-Z0-9_]{3,63})(?=\0)")
    return frozenset(w.decode("ascii") for w in _NAME.findall(data) if b"_" in w.strip(b"_"))


def _strings_of(path: str) -> bytes:
    """The bytes the names are in: an ELF executable's ``.rodata`` (a small part of nvcc:
    read alone, the scan is far shorter), else the whole file."""
    import struct

    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) == 64 and head[:4] == b"\x7fELF" and head[4] == 2 and head[5] == 1:
            shoff, = struct.unpack_from("<Q", head, 0x28)
            entsize, count, names_at = struct.unpack_from("<HHH", head, 0x3A)
            if entsize >= 64 and 0 < count < 4096 and names_at < count:
                f.seek(shoff)
                table = f.read(entsize * count)
                sections = [struct.unpack_from("<IIQQQQ", table, k * entsize)
                            for k in range(count) if (k + 1) * entsize <= len(table)]
                if names_at < len(sections):
                    f.seek(sections[names_at][4])
                    strtab = f.read(min(sections[names_at][5], 1 << 20))
                    for name, _, _, _, offset, size in sections:
                        if strtab[name:name + 8] == b".rodata\0" and size <= _MAX_BINARY:
                            f.seek(offset)
                            return b"\0" + f.read(size)
        f.seek(0)
        return f.read(_MAX_BINARY)


def derive(real_nvcc: str) -> tuple[str, ...]:
    """The variables keyed for this nvcc, worked out from its profile and binary."""
    folder = os.path.dirname(real_nvcc)
    try:
        with open(os.path.join(folder, "nvcc.profile"), encoding="utf-8",
                  errors="replace") as f:
            added, assigned = profile_names(f.read(1 << 20))
    except OSError:
        added, assigned = frozenset(), frozenset()
    try:
        found = binary_names(_strings_of(real_nvcc))
    except (OSError, ValueError):  # struct.error is a ValueError
        found = frozenset()
    return tuple(sorted((added | found | KNOWN) - assigned - NEUTRAL))


def identity(real_nvcc: str) -> str:
    """What the names follow from: the real nvcc's path and the stat of it and its profile
    (``env_names`` remembers the names under it)."""
    parts: list = [SCHEMA, real_nvcc]
    for p in (real_nvcc, os.path.join(os.path.dirname(real_nvcc), "nvcc.profile")):
        try:
            st = os.stat(p)
            parts.append([st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino])
        except OSError:
            parts.append(None)
    return repr(parts)


_memo: dict = {}


def env_names(real_nvcc: str, env) -> tuple[str, ...]:
    """The variables nvcc reads beside ``key.ENV`` (``derive``), remembered per nvcc identity:
    in the process, and as a sealed note in the cache folder (a hit reads one small file;
    working them out reads nvcc's 35 MB)."""
    ident = identity(real_nvcc)
    got = _memo.get(ident)
    if got is not None:
        return got
    where = opened(env)
    path = None
    if where is not None:
        path = os.path.join(where[0], WHOLE, "env",
                            fsio.hexdigest(ident.encode("utf-8", "surrogateescape")))
        note = fsio.read_sealed(path, where[1], 1 << 20)
        if isinstance(note, list) and len(note) == 2 and note[0] == SCHEMA \
                and isinstance(note[1], tuple) and all(isinstance(n, str) for n in note[1]):
            _memo[ident] = note[1]
            return note[1]
    got = derive(real_nvcc)
    if path is not None:
        fsio.write_sealed(path, where[1], [SCHEMA, got])
    _memo[ident] = got
    return got
