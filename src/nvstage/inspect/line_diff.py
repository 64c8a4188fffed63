"""Two builds of a kernel, or two kernels of one operation, compared source line by source line
(``diff A B --pair K_A=K_B --lineinfo``): which lines gained or lost instructions, live
registers and local-memory traffic (spills and stack).

Lines are aligned by their text and order (``inspect.align``), as a diff of the two kernels'
source would pair them, not by line number: llm.c's ``layernorm_forward_kernel3`` and
``kernel4`` share no line number, and the one-pass kernel's ``sum2 = cg::reduce(...)`` meets
no line of the other. Every aligned pair is a row with its file:line on both sides, equal or
not; a line one kernel has alone is a row of its own. Each instruction counts to the line the
line view counts it to (``inspect.attribution``: the user's line that called inlined library
code, unless ``attribute="innermost"``).

A Triton kernel and a CUDA kernel are not aligned line by line (two languages): such a pair is
compared per kernel (``build_diff``).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from nvstage.errors import UsageError
from nvstage.inspect import align as aligning
from nvstage.inspect.mix import access_bits
from nvstage.compiler.buildlog.log import find
from nvstage.inspect.build_view import show_kernel
from nvstage.inspect.pairs import parse
from nvstage.inspect.view import show

LOCAL = {"STL": "stores", "LDL": "loads"}
SPILL_MARK = '"SpillRefill"'  # nvdisasm's annotation of an STL/LDL ptxas wrote to spill
_PREDICATE = re.compile(r"^@!?U?P[T\d]+\s+")


@dataclass(frozen=True)
class Local:
    """A line's local-memory traffic, bytes per thread over its static STL and LDL: all of
    them, and those ptxas marked as spills (the rest is a stack array's)."""
    stores: int = 0
    loads: int = 0
    spill_stores: int = 0
    spill_loads: int = 0

    def __bool__(self) -> bool:
        return bool(self.stores or self.loads)

    def __add__(self, o: Local) -> Local:
        return Local(self.stores + o.stores, self.loads + o.loads,
                     self.spill_stores + o.spill_stores, self.spill_loads + o.spill_loads)

    def to_json(self) -> dict:
        return {"stores": self.stores, "loads": self.loads, "spill_stores": self.spill_stores,
                "spill_loads": self.spill_loads}


@dataclass(frozen=True)
class LineSide:
    """One side of a row: a source line of one kernel."""
    file: str  # as the row names it: the file's name, a toolkit header as an include
    path: str  # as the line table gives it
    line: int
    text: str | None
    instructions: int
    peak_gpr: int | None
    ptx: int | None  # PTX instructions (None where no PTX was kept)
    local: Local = field(default_factory=Local)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def to_json(self) -> dict:
        return {"file": self.file, "path": self.path, "line": self.line,
                "source_text": self.text, "instructions": self.instructions,
                "peak_live_gpr": self.peak_gpr, "ptx_instructions": self.ptx,
                "local": self.local.to_json()}


@dataclass(frozen=True)
class LineDelta:
    """One aligned row: a line of A and a line of B (their texts alike or the same), or a
    line one side has alone."""
    a: LineSide | None
    b: LineSide | None
    same_text: bool = True

    @property
    def file(self) -> str:
        return (self.a or self.b).file

    @property
    def line(self) -> int:
        return (self.a or self.b).line

    @property
    def text(self) -> str | None:
        return (self.a or self.b).text

    @property
    def instructions(self) -> tuple[int, int]:
        return (self.a.instructions if self.a else 0, self.b.instructions if self.b else 0)

    @property
    def peak_gpr(self) -> tuple[int | None, int | None]:
        return (self.a.peak_gpr if self.a else None, self.b.peak_gpr if self.b else None)

    @property
    def local(self) -> tuple[Local, Local]:
        return (self.a.local if self.a else Local(), self.b.local if self.b else Local())

    @property
    def side(self) -> str | None:
        """"a" or "b" for a line one kernel has alone."""
        return None if self.a and self.b else ("a" if self.a else "b")

    @property
    def has_code(self) -> bool:
        return any(s is not None and (s.instructions or s.ptx) for s in (self.a, self.b))

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
        la, lb = self.local
        return (self.instructions[0] != self.instructions[1] or self.rose or self.fell
                or la != lb or not self.same_text)

    def to_json(self) -> dict:
        la, lb = self.local
        return {"file": self.file, "line": self.line, "source_text": self.text,
                "a": self.a and self.a.to_json(), "b": self.b and self.b.to_json(),
                "same_text": self.same_text,
                "instructions": {"a": self.instructions[0], "b": self.instructions[1]},
                "peak_live_gpr": {"a": self.peak_gpr[0], "b": self.peak_gpr[1]},
                "local": {"a": la.to_json(), "b": lb.to_json()},
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
    local: tuple[Local, Local] = (Local(), Local())
    # Two builds of one kernel: whether its PTX and its SASS changed ("changed", "same";
    # None for two kernels, or where a side kept no PTX).
    ptx: str | None = None
    sass: str | None = None
    attribute: str = "user"

    @property
    def rose(self) -> list[LineDelta]:
        return [r for r in self.rows if r.rose]

    @property
    def local_changed(self) -> list[LineDelta]:
        return [r for r in self.rows if r.local[0] != r.local[1]]

    def counts(self) -> dict[str, int]:
        """How the rows aligned."""
        return {"same_text": sum(1 for r in self.rows if r.a and r.b and r.same_text),
                "changed_text": sum(1 for r in self.rows if r.a and r.b and not r.same_text),
                "only_a": sum(1 for r in self.rows if r.side == "a"),
                "only_b": sum(1 for r in self.rows if r.side == "b")}

    def to_json(self) -> dict:
        def at(r: LineDelta) -> dict:
            return {"file": r.file, "line": r.line,
                    "a": r.a and {"file": r.a.file, "line": r.a.line},
                    "b": r.b and {"file": r.b.file, "line": r.b.line}}

        return {"a": self.a, "b": self.b,
                "kernels": {"a": self.kernels[0], "b": self.kernels[1]},
                "archs": {"a": self.archs[0], "b": self.archs[1]},
                "attribute": self.attribute,
                "peak_live_gpr": {"a": self.peak_gpr[0], "b": self.peak_gpr[1]},
                "instructions": {"a": self.instructions[0], "b": self.instructions[1]},
                "local": {"a": self.local[0].to_json(), "b": self.local[1].to_json()},
                "ptx": self.ptx, "sass": self.sass, "aligned": self.counts(),
                "rose_at": [at(r) for r in self.rose],
                "local_changed_at": [at(r) for r in self.local_changed],
                "lines": [r.to_json() for r in self.rows]}


def _lines(path, kernel: str, toolkit, attribute: str):
    """Every arch's line view of ``kernel`` in a build, build record or artifact."""
    if find(path) is not None:

        shown = show_kernel(path, kernel, sections="lines", lineinfo=True, toolkit=toolkit,
                            attribute=attribute)
    else:

        shown = show(path, kernel=kernel, sections="lines", lineinfo=True, toolkit=toolkit,
                     attribute=attribute)
    return shown.data.get("lines") or []


def _one(found, path, kernel: str, arch: str | None, other_archs: set[str]):
    if arch:
        found = [k for k in found if k.arch == arch]
    if not found:
        raise UsageError(f"no kernel {kernel!r}{f' for {arch}' if arch else ''} in {path}",
                         hint="give a name as nvstage show prints it, or as the source "
                              "spells it")
    if len(found) == 1:
        return found[0]
    common = [k for k in found if k.arch in other_archs]
    pick = max(common or found, key=lambda k: k.arch)
    if len({k.arch for k in found}) < len(found):  # one arch twice: a device link's copy too
        same = [k for k in found if k.arch == pick.arch]
        pick = max(same, key=lambda k: len(k.instructions))
    return pick


def _python(kernel) -> bool:
    """Whether a kernel's own lines are Python's (a Triton kernel)."""
    return any(ln.file.endswith(".py") for ln in kernel.lines if ln.instructions)


def _file_name(kernel, path: str) -> str:
    attribution = kernel.attribution
    if attribution is not None and not attribution.is_user(path):
        return attribution.name(path)
    return os.path.basename(path)


def _locals(kernel) -> dict[tuple[str, int], Local]:
    """(file, line) -> the local traffic of the instructions counted to it."""
    out: dict[tuple[str, int], Local] = {}
    for i in kernel.instructions:
        what = LOCAL.get(i.opcode)
        if what is None:
            continue
        size = access_bits(_PREDICATE.sub("", i.text)) // 8
        spill = SPILL_MARK in i.text
        one = Local(stores=size, spill_stores=size if spill else 0) if what == "stores" else \
            Local(loads=size, spill_loads=size if spill else 0)
        f, n = i.at
        out[(f, n)] = out.get((f, n), Local()) + one
    return out


def _sides(kernel) -> tuple[list[LineSide], list[str]]:
    """The kernel's lines that take part in the alignment (those with code, and those with
    code-like text between them), and each one's key."""
    python = _python(kernel)
    local = _locals(kernel)
    sides, keys = [], []
    for ln in kernel.lines:
        k = aligning.key(ln.text, python)
        code = ln.instructions or ln.ptx_instructions
        if not k and not code:
            continue  # a blank or comment-only line: nothing to align
        sides.append(LineSide(_file_name(kernel, ln.file), ln.file, ln.line, ln.text,
                              ln.instructions, ln.peak_gpr, ln.ptx_instructions,
                              local.get((ln.file, ln.line), Local())))
        # a line whose text cannot be read aligns by where it is
        keys.append(k or f"\0{_file_name(kernel, ln.file)}:{ln.line}")
    return sides, keys


def _compare(x, y) -> str | None:
    return None if x is None or y is None else ("same" if x == y else "changed")


def diff_pair(one_a, one_b, a: str, b: str, *, attribute: str = "user") -> LinesDiff:
    """Two kernels' line views (``lineview.KernelLines``) aligned by their source."""
    for k, path in ((one_a, a), (one_b, b)):
        if not k.has_lineinfo:
            raise UsageError(f"{k.demangled or k.name} in {path} has no line info",
                             hint="build it with -lineinfo (or -G)")
    if _python(one_a) != _python(one_b):
        ta, tb = (one_a, one_b) if _python(one_a) else (one_b, one_a)
        raise UsageError(f"{ta.demangled or ta.name} is a Triton kernel and "
                         f"{tb.demangled or tb.name} a CUDA one: two languages' lines are "
                         "not aligned", hint="compare them per kernel (resources, "
                         "occupancy, mix): the same diff without --lineinfo")
    sa, ka = _sides(one_a)
    sb, kb = _sides(one_b)
    rows = []
    for i, j in aligning.align(ka, kb):
        x = sa[i] if i is not None else None
        y = sb[j] if j is not None else None
        rows.append(LineDelta(x, y, x is None or y is None or ka[i] == kb[j]))
    same_kernel = one_a.name == one_b.name
    ptx = sass = None
    if same_kernel:
        sass = _compare([i.text for i in one_a.instructions],
                        [i.text for i in one_b.instructions])
        if one_a.ptx is not None and one_b.ptx is not None:
            ptx = _compare([p.text for p in one_a.ptx.instructions],
                           [p.text for p in one_b.ptx.instructions])
    total = tuple(sum((s.local for s in side), Local()) for side in (sa, sb))
    return LinesDiff(a, b, (one_a.demangled or one_a.name, one_b.demangled or one_b.name),
                     (one_a.arch, one_b.arch), (one_a.peak_gpr, one_b.peak_gpr),
                     (len(one_a.instructions), len(one_b.instructions)), tuple(rows),
                     total, ptx, sass, attribute)


def diff_lines(a, b, pairs, toolkit, *, arch: str | None = None,
               attribute: str = "user") -> list[LinesDiff]:
    """Each pair (``inspect.pairs.Pair``; a ``str`` "NAME" or "NAME_A,NAME_B" is one) of
    kernels of builds ``a`` and ``b`` (the same path twice for two kernels of one build),
    line by line. ``arch`` picks one where a build has several; without it the highest arch
    both have."""
    if isinstance(pairs, str):
        pairs = parse(kernel=pairs)
    out = []
    for p in pairs:
        found_a = _lines(a, p.a, toolkit, attribute)
        found_b = _lines(b, p.b, toolkit, attribute)
        one_a = _one(found_a, a, p.a, arch, {k.arch for k in found_b})
        one_b = _one(found_b, b, p.b, arch, {one_a.arch})
        out.append(diff_pair(one_a, one_b, str(a), str(b), attribute=attribute))
    return out
