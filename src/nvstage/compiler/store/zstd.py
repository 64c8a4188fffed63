"""Zstandard frames, as ccache and sccache compress their entries: the stage cache's files and
a whole command's entry are kept compressed.

Standard library only, and loaded only when a compressed file is read or written: Python 3.14
has ``compression.zstd`` (its ``_zstd`` extension is loaded here alone), older ones the
``backports-zstd`` package (the same module, by the same authors). Only its extension is
loaded, without the package's ``__init__``, which imports enum and functools (many times the
extension's cost): a command cache hit pays for what it reads, no more.

A frame is checked as it is read: one whole frame (a truncated one, trailing bytes or a bomb
over the size its reader allows raise ``ValueError``), and the caller compares the SHA-256 of
what comes out with the one its sealed document recorded, so a damaged file is a miss.
"""

from __future__ import annotations

import os
import sys

LEVEL = 3  # zstd's default: ccache's too (its compression_level 0 means zstd's default)
_mod = None


def _extension():
    """The ``_zstd`` extension module; ImportError when neither source has it."""
    global _mod
    if _mod is not None:
        return _mod
    if sys.version_info >= (3, 14):
        import _zstd  # a module of its own there

        _mod = _zstd
        return _mod
    name = "backports.zstd._zstd"
    if name in sys.modules:
        _mod = sys.modules[name]
        return _mod
    # Found as the import system would find it, then loaded by its file: the package's
    # __init__ (enum, functools, dataclasses) never runs.
    import _frozen_importlib as bootstrap  # loaded at every start: free
    import _frozen_importlib_external as external

    suffixes = tuple(external.EXTENSION_SUFFIXES)
    found = _find(name, suffixes, bootstrap, external)
    if found is None and sys.flags.no_site and "site" not in sys.modules:
        # Started without site (``cli/bare.py``) where the package is in none of the folders
        # it put on sys.path: site's folders, then look again.
        import site

        site.main()
        found = _find(name, suffixes, bootstrap, external)
    if found is None:
        raise ImportError("no zstd: pip install backports-zstd (Python before 3.14)")
    _mod = found
    return _mod


def _find(name, suffixes, bootstrap, external):
    """The extension loaded from the first folder on sys.path that has it; None if none."""
    for entry in sys.path:
        folder = os.path.join(entry or ".", "backports", "zstd")
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        for n in names:
            if n.startswith("_zstd.") and n.endswith(suffixes):
                path = os.path.join(folder, n)
                spec = bootstrap.ModuleSpec(name, external.ExtensionFileLoader(name, path),
                                            origin=path)
                return bootstrap._load(spec)
    return None


def available() -> bool:
    try:
        _extension()
    except ImportError:
        return False
    return True


def compress(data: bytes, level: int = LEVEL) -> bytes:
    """One zstd frame holding ``data`` (its size written in the header)."""
    z = _extension()
    c = z.ZstdCompressor(level)
    return c.compress(data, c.FLUSH_FRAME)


def decompress(frame: bytes, limit: int) -> bytes:
    """What one whole zstd frame holds, at most ``limit`` bytes; ValueError for anything
    else (truncated, trailing bytes, more than ``limit``, not zstd)."""
    z = _extension()
    d = z.ZstdDecompressor()
    try:
        out = d.decompress(frame, limit + 1)
    except z.ZstdError as e:
        raise ValueError(f"not a zstd frame: {e}") from None
    if len(out) > limit:
        raise ValueError("a zstd frame over its limit")
    if not d.eof or d.unused_data:
        raise ValueError("not one whole zstd frame")
    return out
