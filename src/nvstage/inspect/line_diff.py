"""Two builds of a kernel, or two kernels of one operation, compared source line by source line:
which lines gained or lost instructions and live registers (``diff A B --kernel K --lineinfo``).

Lines are matched by file name and line number: two builds of one source line up exactly, and
two kernels of one file (``fused,fused_wide``) share the lines of the functions both inline,
while each keeps its own body's lines. The paths differ between build folders, so the file's
name (not its folder) is the key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from nvstage.errors import UsageError


@dataclass(frozen=True)
class LineDelta:
    file: str
    line: int
    text: str | None
    instructions: tuple[int, int]  # (A, B)
    peak_gpr: tuple[int | None, int | None]

    @property
    def side(self) -> str | None:
        """"a" or "b" for a line with SASS in one of the two only (another kernel's body)."""
        a, b = self.instructions
        return None if bool(a) == bool(b) else ("a" if a else "b")

    @property
    def rose(self) -> bool:
        a, b = self.peak_gpr
        return a is not None and b is not None and b > a

    @property
    def fell(self) -> bool:
        a, b = self.peak_gpr
        return a is not None and b is not None and b < a

    @property
    def changed(self) -> bool:
        return self.instructions[0] != self.instructions[1] or self.rose or self.fell

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "source_text": self.text,
                "instructions": {"a": self.instructions[0], "b": self.instructions[1]},
                "peak_live_gpr": {"a": self.peak_gpr[0], "b": self.peak_gpr[1]},
                "rose": self.rose, "fell": self.fell, "only_in": self.side}


@dataclass(frozen=True)
class LinesDiff:
    a: str  # what was read: the build or artifact
    b: str
    kernels: tuple[str, str]  # demangled names
    archs: tuple[str, str]
    peak_gpr: tuple[int | None, int | None]
    instructions: tuple[int, int]
    rows: tuple[LineDelta, ...]

    @property
    def rose(self) -> list[LineDelta]:
        return [r for r in self.rows if r.rose]

    def to_json(self) -> dict:
        return {"a": self.a, "b": self.b,
                "kernels": {"a": self.kernels[0], "b": self.kernels[1]},
                "archs": {"a": self.archs[0], "b": self.archs[1]},
                "peak_live_gpr": {"a": self.peak_gpr[0], "b": self.peak_gpr[1]},
                "instructions": {"a": self.instructions[0], "b": self.instructions[1]},
                "rose_at": [{"file": r.file, "line": r.line} for r in self.rose],
                "lines": [r.to_json() for r in self.rows]}


def _lines(path, kernel: str, toolkit):
    """Every arch's line view of ``kernel`` in a build, build record or artifact."""
    from nvstage.compiler.buildlog.log import find

    if find(path) is not None:
        from nvstage.inspect.build_view import show_kernel

        shown = show_kernel(path, kernel, sections="lines", lineinfo=True, toolkit=toolkit)
    else:
        from nvstage.inspect.view import show

        shown = show(path, kernel=kernel, sections="lines", lineinfo=True, toolkit=toolkit)
    return shown.data.get("lines") or []


def _one(found, path, kernel: str, arch: str | None, other_archs: set[str]):
    if arch:
        found = [k for k in found if k.arch == arch]
    if not found:
        raise UsageError(f"no kernel {kernel!r}{f' for {arch}' if arch else ''} in {path}")
    if len(found) == 1:
        return found[0]
    common = [k for k in found if k.arch in other_archs]
    pick = max(common or found, key=lambda k: k.arch)
    if len({k.arch for k in found}) < len(found):  # one arch twice: a device link's copy too
        same = [k for k in found if k.arch == pick.arch]
        pick = max(same, key=lambda k: len(k.instructions))
    return pick


def diff_lines(a, b, kernel: str, toolkit, *, arch: str | None = None) -> LinesDiff:
    """``kernel`` ("NAME", or "NAME_A,NAME_B" for two kernels) in builds ``a`` and ``b`` (the
    same path twice for two kernels of one build), line by line. ``arch`` picks one where a
    build has several; without it the highest arch both have."""
    names = [n.strip() for n in kernel.split(",")]
    if len(names) > 2 or not all(names):
        raise UsageError(f"--kernel {kernel!r}: give NAME, or NAME_A,NAME_B")
    ka, kb = names[0], names[-1]
    found_a = _lines(a, ka, toolkit)
    found_b = _lines(b, kb, toolkit)
    one_a = _one(found_a, a, ka, arch, {k.arch for k in found_b})
    one_b = _one(found_b, b, kb, arch, {one_a.arch})
    for k, path in ((one_a, a), (one_b, b)):
        if not k.has_lineinfo:
            raise UsageError(f"{k.demangled or k.name} in {path} has no line info",
                             hint="build it with -lineinfo (or -G)")
    rows_a = {(os.path.basename(ln.file), ln.line): ln for ln in one_a.lines}
    rows_b = {(os.path.basename(ln.file), ln.line): ln for ln in one_b.lines}
    rows = []
    for key in sorted(rows_a.keys() | rows_b.keys()):
        la, lb = rows_a.get(key), rows_b.get(key)
        text = next((x.text for x in (lb, la) if x is not None and x.text is not None), None)
        rows.append(LineDelta(key[0], key[1], text,
                              (la.instructions if la else 0, lb.instructions if lb else 0),
                              (la.peak_gpr if la else None, lb.peak_gpr if lb else None)))
    return LinesDiff(str(a), str(b),
                     (one_a.demangled or one_a.name, one_b.demangled or one_b.name),
                     (one_a.arch, one_b.arch), (one_a.peak_gpr, one_b.peak_gpr),
                     (len(one_a.instructions), len(one_b.instructions)), tuple(rows))
