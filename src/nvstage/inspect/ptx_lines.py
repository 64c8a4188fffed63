"""PTX per source line: the ``.loc`` directives of a ``-lineinfo`` (or ``-G``) build, read with
the ``.file`` table they index, so that each PTX instruction is known by its source line.

cicc writes ``.loc FILE LINE COLUMN`` before the instructions of a line, and for inlined code
``.loc 1 4 3, function_name $L__info_string1, inlined_at 1 8 3``: the inlined function's line
and the call it came through. A run of ``.loc`` lines before one instruction goes outermost
first (the caller's line, then the inlined body's): the instruction belongs to the last, and
its chain of calls is followed back through the latest ``.loc`` lines. ``function_name``
points at a string of ``.debug_str`` written as ``.b8`` bytes (the mangled name). The
``.file`` table comes after the functions, so the text is read in two passes. Line 0 is
code no line owns.

Pure: text in, records out; every loop is bounded by the text's length.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from nvstage.errors import ArtifactError

_FUNC = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.(entry|func)[ \t]+"
                   r"(?:\([^)]*\)[ \t]*)?([A-Za-z_$%][\w$%.]*)")
_FILE = re.compile(r'^[ \t]*\.file[ \t]+(\d{1,9})[ \t]+"((?:[^"\\]|\\.)*)"')
_LOC = re.compile(r"^[ \t]*\.loc[ \t]+(\d{1,9})[ \t]+(\d{1,9})[ \t]+\d{1,9}"
                  r"(?:[ \t]*,[ \t]*function_name[ \t]+([\w$]+)(?:[ \t]*\+[ \t]*\d+)?)?"
                  r"(?:[ \t]*,[ \t]*inlined_at[ \t]+(\d{1,9})[ \t]+(\d{1,9})[ \t]+\d{1,9})?")
_TARGET = re.compile(r"^[ \t]*\.target[ \t]+(\w+)")
_STRING = re.compile(r"^[ \t]*([\w$]+):[ \t]*$")
_BYTES = re.compile(r"^[ \t]*\.b8[ \t]+([\d, \t]+)$")
_LABEL = re.compile(r"^([\w$]+):$")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)", re.S)
_HISTORY = 32  # .locs remembered to follow an inlined_at back to its call
# Calls one instruction is known to have been inlined through: real chains are a few deep; a
# crafted .loc inlined at the one before it, line after line, grew one per line (quadratic).
MAX_INLINED = 64
_MAX_NAME = 4096  # bytes of one function_name string; real ones are under a few hundred
_MAX_STATEMENT = 65536  # characters of one statement kept: a crafted one never ends


@dataclass(frozen=True)
class PtxInstruction:
    """One PTX instruction with the source line its ``.loc`` gave it."""
    number: int  # its line in the PTX text, from 1
    text: str  # as cicc wrote it, without the ";"
    file: str | None
    line: int | None
    inlined_at: tuple[tuple[str, int], ...] = ()  # the calls it came through, innermost first
    function: str | None = None  # the inlined function's (mangled) name, when .loc names it
    label: str | None = None  # the label just before it ("$L__BB0_2")

    @property
    def opcode(self) -> str:
        """``ld.global.nc.f32`` for ``@%p1 ld.global.nc.f32 %f1, [%rd8]``."""
        body = re.sub(r"^@!?%?\w+\s+", "", self.text)
        return body.split(None, 1)[0] if body else ""

    def to_json(self) -> dict:
        return {"number": self.number, "text": self.text, "file": self.file,
                "line": self.line, "function": self.function, "label": self.label,
                "inlined_at": [{"file": f, "line": n} for f, n in self.inlined_at]}


@dataclass(frozen=True)
class PtxFunction:
    """One ``.entry`` or ``.func`` of a PTX module, instruction by instruction."""
    name: str  # mangled, as the PTX names it
    module: str  # the PTX file, or the fatbin image's name
    arch: str  # "compute_90"
    instructions: tuple[PtxInstruction, ...]

    @property
    def has_lineinfo(self) -> bool:
        return any(i.line is not None for i in self.instructions)

    def per_line(self) -> dict[tuple[str, int], int]:
        """(file, line) -> PTX instructions."""
        out: dict[tuple[str, int], int] = {}
        for i in self.instructions:
            if i.file is not None and i.line is not None:
                out[(i.file, i.line)] = out.get((i.file, i.line), 0) + 1
        return out

    def to_json(self) -> dict:
        return {"name": self.name, "module": self.module, "arch": self.arch,
                "instructions": [i.to_json() for i in self.instructions]}


def _strings(lines: list[str]) -> dict[str, str]:
    """``$L__info_stringN`` -> the text of its ``.b8`` bytes (a mangled name)."""
    out: dict[str, str] = {}
    label = None
    for raw in lines:
        m = _STRING.match(raw)
        if m:
            label = m.group(1)
            continue
        m = _BYTES.match(raw)
        if m and label:
            cells = [c for c in re.split(r"[,\s]+", m.group(1)) if c][:_MAX_NAME]
            data = bytes(int(c) & 0xFF for c in cells if len(c) <= 3)
            out[label] = data.split(b"\0", 1)[0].decode("ascii", "replace")
        label = None
    return out


def parse_ptx_lines(text: str, *, module: str = "", arch: str = "") -> list[PtxFunction]:
    """Every function of PTX ``text`` with its instructions and their source lines."""
    if not isinstance(text, str):
        raise ArtifactError("PTX must be text")
    if "\x00" in text:
        text = text.split("\x00", 1)[0]  # extracted PTX may carry its C string terminator
    # Comments blanked, their newlines kept: numbers stay the text's line numbers.
    code = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text).split("\n")
    if not arch:  # a module named by no build: its own .target ("sm_90" -> "compute_90")
        target = next((m for m in map(_TARGET.match, code) if m), None)
        arch = target.group(1).replace("sm_", "compute_") if target else ""
    files = {int(m.group(1)): m.group(2).replace('\\"', '"').replace("\\\\", "\\")
             for m in map(_FILE.match, code) if m}
    names = _strings(code)
    out: list[PtxFunction] = []
    current: list[PtxInstruction] | None = None
    name = ""
    depth = 0
    # The latest .locs, newest last: an inlined_at names its call by location, and the call's
    # own .loc came before (in the same run, or before the instructions just emitted).
    run: list[tuple[tuple[str | None, int | None], tuple, str | None]] = []
    where: tuple = ((None, None), (), None)
    label = None
    pending, start = "", 0  # a statement not yet closed by its ";", and its first line

    def close():
        if current is not None:
            out.append(PtxFunction(name, module, arch, tuple(current)))

    for number, raw in enumerate(code, 1):
        line = raw.strip()
        if not line:
            continue
        m = _FUNC.match(raw)
        if m and depth == 0:
            close()
            current, name, run, where, label = [], m.group(2), [], ((None, None), (), None), None
            pending, start = "", 0
        if current is None:
            continue
        if depth == 0 and "{" not in line:
            if line.endswith(";"):  # a declaration (a prototype): no body follows
                current = None
            continue  # the function's header: parameters and performance directives
        opened, closed = line.count("{"), line.count("}")
        body = line.strip("{} \t")
        depth += opened - closed
        if depth <= 0:
            depth = 0
            close()
            current = None
            continue
        if not body:
            continue
        loc = _LOC.match(body)
        if loc:
            f, n = files.get(int(loc.group(1))), int(loc.group(2)) or None
            chain: tuple = ()
            if loc.group(4):
                at = (files.get(int(loc.group(4))), int(loc.group(5)))
                outer = next((c for (w, c, _) in reversed(run) if w == at), ())
                chain = (((at,) + outer) if at[0] is not None else outer)[:MAX_INLINED]
            fn = names.get(loc.group(3)) if loc.group(3) else None
            run = run[-(_HISTORY - 1):] + [((f, n), chain, fn)]
            where = run[-1]
            continue
        if not pending and body.startswith("."):
            continue  # .reg, .shared, .local, .param, .pragma: declarations, no work
        lm = _LABEL.match(body)
        if lm and not pending:
            label = lm.group(1)
            continue
        # A statement ends at its ";" and may span lines (a call's argument list does).
        *done, rest = body.split(";")
        for stmt in done:
            stmt = " ".join((pending + " " + stmt).split())
            pending = ""
            if stmt:
                (f, n), chain, fn = where
                current.append(PtxInstruction(start or number, stmt, f, n, chain, fn, label))
                label, start = None, 0
        if rest.strip():
            start = start or number
            pending = (pending + " " + rest)[-_MAX_STATEMENT:]
    close()
    return out


def file_matcher(sass_files):
    """``match(ptx_file)``: ``match_file`` against ``sass_files``, indexed once (a build whose
    #line directives name thousands of files matched each against all of them)."""
    files = set(sass_files)
    by_name: dict[str, list[str]] = {}
    for f in files:
        by_name.setdefault(os.path.basename(f), []).append(f)

    def match(ptx_file: str | None) -> str | None:
        if ptx_file is None:
            return None
        if ptx_file in files:
            return ptx_file
        same = by_name.get(os.path.basename(ptx_file), [])
        return same[0] if len(same) == 1 else ptx_file

    return match


def match_file(ptx_file: str | None, sass_files) -> str | None:
    """The name nvdisasm gave the file PTX names ``ptx_file``: the same path, else the one
    file of the same base name."""
    return file_matcher(sass_files)(ptx_file)
