"""Which of many paths exist, asked folder by folder rather than name by name.

The places where a new file would hide a header (``headers.shadow_candidates``) run to
thousands of names for one source, almost none of which exist, spread over a few dozen
folders. One listing of a folder answers for every name in it: a name it does not hold is not
there. A listed name is still asked by stat (a link may dangle), as is a name that a listing
holds in another case (a case-folding folder would find it) and every name in a folder that
cannot be listed (searchable but not readable). A folder is not there: gcc skips a folder named
as the header it looks for. Standard library only: the command cache's
answer (``cache/command/answer.py``) uses it when a watched folder changed; the stage cache too.
"""

from __future__ import annotations

import os
import stat

# Iterable is named in annotations only (strings here): collections.abc would cost a hit that
# looks at a changed folder about 3 ms of imports.

_NOT_THERE = False  # a folder that does not exist (or is not a folder): nothing in it is


class Presence:
    """``os.path.exists`` for many paths, with memory: one build's stages ask about the same
    places, and each folder is listed once. Make a new one to see the disk as it is now."""

    def __init__(self):
        self._files: dict[str, bool] = {}
        self._dirs: dict[str, object] = {}  # folder -> (names, folded names | None),
        # _NOT_THERE, or None (cannot be listed: its names are asked one by one)

    def of(self, paths: Iterable[str]) -> dict[str, bool]:  # noqa: F821
        """Each path -> whether it exists now (or when this memory first looked)."""
        return {p: self._one(p) for p in paths}

    def _one(self, path: str) -> bool:
        got = self._files.get(path)
        if got is None:
            got = self._files[path] = self._look(path)
        return got

    def under(self, folder: str, names: list[str]) -> tuple[dict[str, bool], bool]:
        """Each name (a path relative to ``folder``, or an absolute one) -> whether it exists,
        and whether the folder's listing alone said so for every one. One listing of
        ``folder`` answers for every name whose first part it does not hold: nothing below a
        folder that is not there exists (most of the places a header could hide are under
        folders nobody made), so those names cost no look of their own."""
        base = folder.rstrip("/") + "/"
        out: dict[str, bool] = {}
        holds: dict[str, bool] = {}  # a first part -> whether the folder may hold it
        for name in names:
            first = name.split("/", 1)[0]
            may = holds.get(first)
            if may is None:
                may = holds[first] = first in ("", ".", "..") or not base.startswith("/") or \
                    self._holds(folder, first)
            out[name] = may and self._one(name if name.startswith("/") else base + name)
        return out, not any(holds.values())

    def _holds(self, parent: str, name: str) -> bool:
        """Whether ``parent``'s listing may hold ``name`` (also in another case, or when the
        folder cannot be listed); False when the folder is not there."""
        listing = self._dirs.get(parent, self)
        if listing is self:
            listing = self._dirs[parent] = _listing(parent)
        if listing is _NOT_THERE:
            return False
        if listing is not None:
            names, folded = listing
            if name not in names:
                if folded is None:
                    folded = {n.casefold() for n in names}
                    self._dirs[parent] = (names, folded)
                if name.casefold() not in folded:
                    return False
        return True

    def _look(self, path: str) -> bool:
        cut = path.rfind("/")  # os.path.split's answer, at a fraction of its cost
        parent, name = path[:cut] or "/", path[cut + 1:]
        if name in ("", ".", "..") or not path.startswith("/"):  # names no listing holds
            return _a_file(path)
        return self._holds(parent, name) and _a_file(path)


def _a_file(path: str) -> bool:
    """Whether the compiler would take ``path`` as the header: it is there and no folder (gcc
    skips a folder of the header's name and searches on, so a folder that becomes a file is a
    new hiding file)."""
    try:
        return not stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _listing(folder: str):
    try:
        return frozenset(os.listdir(folder)), None
    except (FileNotFoundError, NotADirectoryError):
        return _NOT_THERE
    except (OSError, ValueError):  # not readable, or a name with a NUL: stat each name
        return None


def present(candidates: Iterable[str],  # noqa: F821
            presence: Presence | None = None) -> list[str]:
    """The candidates that exist now, sorted: the shadow state of a header set."""
    got = (presence or Presence()).of(candidates)
    return sorted(c for c, there in got.items() if there)
