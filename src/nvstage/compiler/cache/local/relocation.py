"""The work folder's path in what the cache stores: cut out, and pasted back on restore.

Intermediate files live in a per-build folder whose path the tools see and sometimes write
(cudafe++'s stub names itself in ``#line``). An entry stores each output, and what the tool
printed, without the path plus the offsets where it was (its sites). Restoring pastes the
restoring build's folder back at those offsets, so the same folder gets its bytes back
exactly, whatever they hold. A hit in another folder is that folder's answer only if every
site really came from the path, not from text that spells it (a source can spell a ``--keep``
folder, or cudafe++ can join two string literals into it). Only one kind of site is known to
come from the path: the line marker by which cudafe++'s and cicc's stub names itself
(``own_markers_only``). An entry with any other site, one inside a binary (offsets and lengths
there follow the path's length), or one in what the tool printed is stored under the key bound
to its folder (``Entries.put``'s ``pinned``): the same folder gets it back exactly, another
folder runs the stage.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

# Characters no tool escapes when it writes a path (gcc's #line escapes quotes and backslashes,
# make rules escape blanks, '#' and '$'): a work folder named with others is never relocated.
_PLAIN = re.compile(r"/[A-Za-z0-9/._+-]*")


@dataclass(frozen=True)
class Work:
    """A build's work folder as the cache sees it."""

    path: str  # absolute

    @property
    def raw(self) -> bytes:
        return os.fsencode(self.path)

    @property
    def plain(self) -> bool:
        return _PLAIN.fullmatch(self.path) is not None


def cut(data: bytes, part: bytes) -> tuple[bytes, list[int]]:
    """``data`` without each occurrence of ``part`` (left to right, as ``bytes.split``), and
    the offsets in the result where they were: ``paste`` gives ``data`` back exactly."""
    pieces = data.split(part)
    sites, at = [], 0
    for p in pieces[:-1]:
        at += len(p)
        sites.append(at)
    return b"".join(pieces), sites


def paste(blob: bytes, sites: Sequence[int], part: bytes) -> bytes:
    """``part`` put back into ``blob`` at each site (offsets in ``blob``, ascending)."""
    out, last = [], 0
    for s in sites:
        out += [blob[last:s], part]
        last = s
    out.append(blob[last:])
    return b"".join(out)


def own_markers_only(data: bytes, work: bytes, own: bytes) -> bool:
    """Whether every occurrence of ``work`` in ``data`` begins ``own`` (the file's own path)
    in a line marker naming it, ``# 1 "/w/k.cudafe1.stub.c"``: what cudafe++ and cicc write
    from their ``--stub_file_name`` argument. No text a source holds can become such a line
    in their output (they run no directives: #line and stringizing were the preprocessor's)."""
    line = re.compile(rb'#(?:line)? \d+ "' + re.escape(own) + rb'"(?: \d+)*\r?')
    at = data.find(work)
    while at >= 0:
        start = data.rfind(b"\n", 0, at) + 1
        end = data.find(b"\n", at)
        end = len(data) if end < 0 else end
        if not line.fullmatch(data, start, end) or data.find(b'"', start) + 1 != at:
            return False
        at = data.find(work, at + len(work))
    return True


def cut_digest(blob: bytes, sites: Sequence[int]) -> str:
    """A work-folder file as keys see it (``keys.FileHasher``): its bytes cut at the folder's
    path (``blob``) and the sites, hashed together, so no text can pass for the path. An entry
    records it for each output, and a later build keys the next stage with it without the file
    (``cache/stage/stage_cache.py``)."""
    import hashlib
    import json

    h = hashlib.sha256(b"nvstage-cut/1\0%s\0" % json.dumps(list(sites)).encode())
    h.update(blob)
    return h.hexdigest()


def sites_ok(sites, size: int) -> bool:
    return isinstance(sites, list) and all(
        type(s) is int and 0 <= s <= size for s in sites) and sites == sorted(sites)


def pieces_ok(pieces) -> bool:
    """Whether ``pieces`` is text cut at the work folder's path: a non-empty list of strings."""
    return isinstance(pieces, list) and bool(pieces) and all(isinstance(p, str) for p in pieces)
