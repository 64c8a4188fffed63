"""Whose code an instruction is: the line view's roll-up of inlined library code to your line.

nvdisasm ``-gi`` gives every instruction its chain of frames, the innermost location first and
the calls it was inlined through after it. ``cg::reduce(warp, sum, cg::plus<float>{})`` leaves
its SHFL and FADD instructions at lines of ``cooperative_groups/details/reduce.h``, inlined at
the line that called it; counted at the innermost frame, the calling line has no code. By
default (``user``) an instruction counts to the innermost frame of its chain that lies in a file
of the user's, walking out past toolkit and library frames; ``innermost`` counts it where
nvdisasm puts it. A user's own inlined helper keeps its line: its file is the user's.

A file is a library's when it lies under the toolkit's folder (the one nvstage found itself),
under a system include folder, in a Python environment's site-packages, under a folder the
caller names (a vendored CUB), or under an ``include`` folder whose path below it names a
header of the toolkit's (a build made by another toolkit). Every other file is the user's.

A toolkit header is named as its include (``<cooperative_groups.h>``), and its text is read
only from the include folders of the toolkit nvstage found, by the path below them: the line
table's path only chooses among those files (a document chooses no file to read).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from nvstage.inspect.sass import source_lines

USER = "user"
INNERMOST = "innermost"
MODES = (USER, INNERMOST)
# Folders whose headers are the system's (the host compiler's and the distribution's).
SYSTEM_INCLUDE = ("/usr/include", "/usr/local/include", "/usr/lib/gcc", "/usr/lib64/gcc",
                  "/usr/lib/llvm", "/usr/lib/clang", "/opt/rh")
_PACKAGES = ("site-packages", "dist-packages")


def _norm(path: str) -> str:
    return os.path.normpath(path) if path else path


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


@dataclass
class Attribution:
    """How the line view attributes instructions: ``mode`` (``user`` or ``innermost``), the
    toolkit whose include folders name and show headers, and more ``library`` folders."""
    mode: str = USER
    toolkit_root: str = ""
    library: tuple[str, ...] = ()
    _user: dict = field(default_factory=dict, repr=False)
    _names: dict = field(default_factory=dict, repr=False)
    _texts: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of(cls, toolkit=None, mode: str = USER, library=()) -> "Attribution":
        root = getattr(toolkit, "root", "") or ""
        return cls(mode, _norm(os.path.realpath(root)) if root else "",
                   tuple(_norm(os.path.abspath(f)) for f in library))

    @property
    def includes(self) -> tuple[str, ...]:
        """The toolkit's include folders, the deepest first (CCCL's under ``include/cccl``)."""
        if not self.toolkit_root:
            return ()
        base = os.path.join(self.toolkit_root, "include")
        return tuple(f for f in (os.path.join(base, "cccl"), base) if os.path.isdir(f))

    def _relative(self, path: str) -> tuple[str, str] | None:
        """(an include folder of the toolkit's, the path below it) of the header the line
        table's ``path`` names, where one of the toolkit's include folders holds it."""
        parts = _norm(path).split(os.sep)
        for n in range(len(parts) - 2, -1, -1):  # the last "include" first
            if parts[n] not in ("include", "cccl"):
                continue
            rel = os.path.join(*parts[n + 1:]) if parts[n + 1:] else ""
            if not rel or rel.startswith(".."):
                continue
            for inc in self.includes:
                full = os.path.join(inc, rel)
                real = os.path.realpath(full)
                if _under(real, os.path.realpath(inc)) and os.path.isfile(real):
                    return inc, rel
        return None

    def is_user(self, path: str | None) -> bool:
        if not path:
            return False
        got = self._user.get(path)
        if got is None:
            p = _norm(path)
            lib = (bool(self.toolkit_root) and _under(p, self.toolkit_root)) \
                or any(_under(p, f) for f in SYSTEM_INCLUDE + self.library) \
                or any(part in _PACKAGES for part in p.split(os.sep)) \
                or self._relative(p) is not None
            got = self._user[path] = not lib
        return got

    def name(self, path: str | None) -> str:
        """A toolkit header as its include (``<cooperative_groups.h>``), a module in
        site-packages by the path below it (``triton/language/standard.py``), any other path
        as recorded."""
        if not path:
            return "?"
        got = self._names.get(path)
        if got is None:
            rel = self._relative(path) if not self.is_user(path) else None
            got = f"<{rel[1]}>" if rel else path
            parts = _norm(path).split(os.sep)
            if rel is None and not self.is_user(path):  # a Python package's module by its
                # import path: triton/language/standard.py
                at = max((n for n, x in enumerate(parts) if x in _PACKAGES), default=None)
                if at is not None and at + 1 < len(parts):
                    got = os.path.join(*parts[at + 1:])
            self._names[path] = got
        return got

    def header_text(self, path: str) -> list[str] | None:
        """The lines of a toolkit header, read from the toolkit's own include folder (by the
        path below it; bounded as any source is), or None."""
        if path in self._texts:
            return self._texts[path]

        rel = None if self.is_user(path) else self._relative(path)
        got = source_lines(os.path.join(*rel), indent=True) if rel else None
        self._texts[path] = got
        return got

    def frame(self, chain) -> int:
        """The index in ``chain`` ((file, line), innermost first) an instruction counts to."""
        if self.mode == INNERMOST:
            return 0
        for n, (f, _) in enumerate(chain):
            if self.is_user(f):
                return n
        return 0  # all a library's (a kernel written in a header): where nvdisasm puts it


def everyones() -> Attribution:
    """Every file the user's: the innermost frame, as a join with no toolkit reads it."""
    return Attribution(USER)
