"""Source, SASS and live registers joined line by line: which line of yours raised the registers.

nvdisasm gives the two halves in two listings that cannot be asked for at once: ``-gi`` marks
each run of instructions with its source location and the chain of calls it was inlined
through (``//## File "k.cu", line 2 inlined at "k.cu", line 9``, then the caller's own line),
and ``--life-range-mode narrow`` (``-lrm narrow``) appends, per instruction, the count of live
general, predicate and uniform registers (the counts ``-lrm count`` prints) and a column per
register (``inspect.live``: what is live at the peak, and which line wrote it); with ``-lrm``
the line options are ignored. The two listings are joined on the instruction offset. A run of
markers names the innermost location first and its callers after it: the instruction belongs
to the first, and ``inlined_at`` keeps the rest.

Each instruction counts to one frame of its chain (``inspect.attribution``): by default the
innermost that lies in a file of the user's, so the code inlined from ``<cooperative_groups.h>``
counts to the line that called it; ``innermost`` keeps nvdisasm's own location. The frames
inside the one it counts to stay with it, to be shown beneath.

Only the source a build's manifest names is ever read for its text (``sass.source_reader``:
one regular file, bounded), and a toolkit header's from the toolkit's own include folders;
every other location is shown by file and line alone.

A kernel's view holds the lines with code and the short runs between them: a run of more than
``FOLD`` lines with no code is left out (the views draw one row for it), so neither a header's
hundreds of lines nor the other kernels of a file sit inside a kernel's view.

Each line also gets its instruction mix (``inspect.mix``'s one table) and, where the build kept
the PTX the cubin was made from, the PTX instructions its ``.loc`` directives give the line
(``inspect.ptx_lines``; a line may have PTX and no SASS of its own).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from nvstage import proc
from nvstage.errors import ArtifactError, ToolkitError, NvstageError, UsageError
from nvstage.inspect.mix import Mix, classify, mix as mix_of
from nvstage.inspect.ptx_lines import MAX_INLINED, PtxFunction, file_matcher, parse_ptx_lines
from nvstage.files import read_regular
from nvstage.compiler.nvcc.cubin_figures import read_figures
from nvstage.inspect.attribution import Attribution
from nvstage.inspect.elf import _elf, read_cubin, refine_arch
from nvstage.inspect.fatbin import read_bytes, image_bytes, kind_of_file
from nvstage.inspect.live import parse_ranges, live_at
from nvstage.inspect.names import demangle_all
from nvstage.inspect.sass import source_reader

_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_MARK = re.compile(r'^\s*//## File "(.*?)", line (\d+)(?: inlined at "(.*?)", line (\d+))?')
# An instruction's line: its offset, then the rest, split in Python (``_instruction``). One
# pattern for the whole line backtracked cubically on a run of blanks: a crafted cubin whose
# called function's name holds 3,000 spaces kept show --lineinfo busy for minutes.
_INSN = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*)$")
_COLUMNS = re.compile(r"//\s*\|")
_HEADER = re.compile(r"^\s*//\s*\|((?:\s*[A-Z]+\s*\|)+)\s*$")
_LABEL = re.compile(r"^\s*(\.L\w+):")
_REGISTER_COUNT = "Invalid register count"
_MARKS = "^vx:"  # a register's marks in a narrow column (``inspect.live``)
COLUMNS = ("GPR", "PRED", "UGPR", "UPRED")
# Functions asked for one at a time where nvdisasm refuses a whole cubin's live ranges: each
# run starts nvdisasm (about a second), and a crafted cubin may name 100,000 functions.
MAX_FUNCTIONS = 128
# Distinct cubins of one file joined line by line: two nvdisasm runs each (about a second),
# and a crafted fatbin may hold thousands.
MAX_CUBINS = 256
# Source lines with no code listed between a kernel's first and last line with code, in one
# file and in all its files together (#line directives can name any number of files).
MAX_SPAN = 20_000
# A run of more lines than this with no code (no SASS, no PTX) folds to one row.
FOLD = 3
_KERNEL_START = re.compile(r"__global__|@triton\.jit")


@dataclass(frozen=True)
class Located:
    """One instruction of the ``-gi`` listing: where in the source it comes from."""
    offset: int
    text: str
    file: str | None
    line: int | None
    inlined_at: tuple[tuple[str, int], ...] = ()
    label: str | None = None


@dataclass(frozen=True)
class LineInstruction:
    offset: int
    text: str  # as nvdisasm prints it, predicate included
    opcode: str  # "IMAD" for "IMAD.WIDE"
    file: str | None
    line: int | None
    inlined_at: tuple[tuple[str, int], ...] = ()
    label: str | None = None  # the branch-target label just before it (".L_x_2")
    live: dict = field(default_factory=dict)  # "GPR" -> count, as -lrm count printed them
    frame: int = 0  # the frame of ``chain`` it counts to (``inspect.attribution``)

    @property
    def gpr(self) -> int | None:
        return self.live.get("GPR")

    @property
    def chain(self) -> tuple[tuple[str | None, int | None], ...]:
        """Its frames, innermost first: where nvdisasm puts it, then the calls it was inlined
        through."""
        return ((self.file, self.line),) + self.inlined_at

    @property
    def at(self) -> tuple[str | None, int | None]:
        """(file, line) it counts to: its own line in the view."""
        return self.chain[self.frame] if self.frame else (self.file, self.line)

    @property
    def inner(self) -> tuple[tuple[str, int], ...]:
        """The frames inside the one it counts to, outermost first (shown beneath it)."""
        return tuple(reversed(self.chain[:self.frame]))

    def to_json(self) -> dict:
        return {"offset": self.offset, "text": self.text, "opcode": self.opcode,
                "file": self.file, "line": self.line,
                "inlined_at": [{"file": f, "line": n} for f, n in self.inlined_at],
                "attributed": {"file": self.at[0], "line": self.at[1]},
                "chain": [{"file": f, "line": n} for f, n in self.chain],
                "label": self.label, "live_gpr": self.live.get("GPR"),
                "live_pred": self.live.get("PRED"), "live_ugpr": self.live.get("UGPR"),
                "live_upred": self.live.get("UPRED")}


@dataclass(frozen=True)
class SourceLine:
    file: str
    line: int
    text: str | None  # indented as written; None where the file is not the build's own
    # source or a toolkit header, or unreadable
    instructions: int
    peak_gpr: int | None  # the most general registers live at one of its instructions
    peak: bool = False  # holds the kernel's peak
    mix: dict = field(default_factory=dict)  # its SASS by class (``inspect.mix``): class -> n
    ptx_instructions: int | None = None  # None where no PTX of the kernel was kept

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "source_text": self.text,
                "instructions": self.instructions, "peak_live_gpr": self.peak_gpr,
                "peak": self.peak, "mix": self.mix, "ptx_instructions": self.ptx_instructions}


@dataclass(frozen=True)
class KernelLines:
    name: str
    arch: str
    image: str
    instructions: tuple[LineInstruction, ...]
    lines: tuple[SourceLine, ...]  # by file, then line; lines with no SASS included
    has_lineinfo: bool
    demangled: str = ""
    padding_nops: int = 0  # left out of ``instructions``: never issued
    ptx: PtxFunction | None = None  # the kernel in the PTX the build kept, where it kept one
    attribution: object = None  # ``inspect.attribution.Attribution``: whose lines, their names
    ranges: object = None  # ``inspect.live.RangeListing``: each register's life, where read
    registers: int | None = None  # ptxas's count ("Used N registers"), from the cubin
    asked: tuple = ()  # ``inspect.live.LiveAt`` of the instructions asked for (--live-at)

    @cached_property
    def peak_gpr(self) -> int | None:
        """Worked out once: the views ask for it per instruction and per line (a walk of every
        instruction each time made a 12,000-instruction kernel take a minute to print)."""
        return max((i.gpr for i in self.instructions if i.gpr is not None), default=None)

    @property
    def mix(self) -> Mix:
        """The kernel's instruction mix (``inspect.mix``: one table for every view)."""
        return mix_of(self.instructions)

    @property
    def peak_offset(self) -> int | None:
        """The first instruction with the most general registers live."""
        peak = self.peak_gpr
        return next((i.offset for i in self.instructions if peak is not None and i.gpr == peak),
                    None)

    def live_at(self, offset: int):
        """``inspect.live.LiveAt``: the values live at the instruction at ``offset``, by the
        line that wrote them; None where nvdisasm gave no life ranges."""
        if self.ranges is None or self.ranges.index(offset) is None:
            return None
        where = {}
        for i in self.instructions:
            via = i.chain[i.frame + 1] if i.frame + 1 < len(i.chain) else None
            where[i.offset] = (i.at, via)
        texts = {(ln.file, ln.line): ln.text.strip() for ln in self.lines if ln.text}
        return live_at(self.ranges, offset,
                       lambda o: where.get(o, ((None, None), None)),
                       text_of=lambda f, n: texts.get((f, n)), reported=self.registers)

    @cached_property
    def live_at_peak(self):
        """What is live at the peak instruction (``live_at``), worked out once."""
        at = self.peak_offset
        return None if at is None else self.live_at(at)

    def to_json(self) -> dict:
        peak = self.live_at_peak
        return {"name": self.name, "demangled": self.demangled, "arch": self.arch,
                "image": self.image, "has_lineinfo": self.has_lineinfo,
                "peak_live_gpr": self.peak_gpr, "padding_nops": self.padding_nops,
                "registers": self.registers,
                "live_at_peak": None if peak is None else peak.to_json(),
                "live_at": [a.to_json() for a in self.asked],
                "mix": self.mix.to_json(),
                "instructions": [i.to_json() for i in self.instructions],
                "lines": [ln.to_json() for ln in self.lines],
                "ptx": None if self.ptx is None else self.ptx.to_json(),
                "attribute": getattr(self.attribution, "mode", "user")}


def _instruction(raw: str) -> tuple[int, str, str | None] | None:
    """(offset, the instruction as written, the ``-lrm`` columns between the first and last
    ``|`` of its ``// |...|`` comment, or None) of a listing's line; None for another line."""
    m = _INSN.match(raw)
    if m is None:
        return None
    body, cells = m.group(2), None
    end = body.rstrip()
    if end.endswith("|"):
        c = _COLUMNS.search(body)
        if c is not None and c.end() < len(end):
            body, cells = body[:c.start()], end[c.end():-1]
    body = body.rstrip()
    body = body[:-1] if body.endswith(";") else body  # its ";", then any the text ends with
    return int(m.group(1), 16), body.strip().rstrip(";").strip(), cells


def parse_located(text: str) -> dict[str, list[Located]]:
    """nvdisasm ``-gi -c`` -> each function's instructions with their source location."""
    out: dict[str, list[Located]] = {}
    current: list[Located] | None = None
    marks: list[tuple[str, int]] = []  # the run of markers before the next instruction
    where: tuple[tuple[str, int], ...] = ()
    label = None
    for raw in text.splitlines():
        m = _SECTION.match(raw)
        if m:
            current = out.setdefault(m.group(1), [])
            marks, where, label = [], (), None
            continue
        m = _MARK.match(raw)
        if m:
            marks.append((m.group(1), int(m.group(2))))
            continue
        m = _LABEL.match(raw)
        if m:
            label = m.group(1)
            continue
        got = _instruction(raw)
        if got is not None and current is not None:
            if marks:
                where, marks = tuple(marks[:MAX_INLINED + 1]), []
            offset, body, _ = got
            if not body:
                continue
            file, line = where[0] if where else (None, None)
            current.append(Located(offset, body, file, line, where[1:], label))
            label = None
    return out


def parse_live(text: str) -> dict[str, dict[int, dict[str, int]]]:
    """nvdisasm ``-lrm count -c`` or ``-lrm narrow -c`` -> each function's live register
    counts by offset (a blank column is none live; a narrow column's count leads its cell,
    the registers' marks after it)."""
    out: dict[str, dict[int, dict[str, int]]] = {}
    current: dict[int, dict[str, int]] | None = None
    names: list[str] = []
    for raw in text.splitlines():
        m = _SECTION.match(raw)
        if m:
            current, names = out.setdefault(m.group(1), {}), []
            continue
        m = _HEADER.match(raw)
        if m and not names:
            got = [c.strip() for c in m.group(1).split("|") if c.strip()]
            if all(c in COLUMNS for c in got):
                names = got
            continue
        got = _instruction(raw)
        if got is not None and current is not None and got[2] is not None and names:
            cells = [(c.split() or [""])[0] for c in got[2].split("|")]
            counts = {}
            for name, cell in zip(names, cells):
                if cell and not cell.strip(_MARKS):
                    cell = ""  # a narrow cell of marks with no count before them: none
                if cell and not (cell.isdecimal() and len(cell) <= 9):
                    raise ArtifactError(f"nvdisasm's live-register column {name} reads "
                                        f"{cell[:40]!r}: not a count")
                counts[name] = int(cell) if cell else 0
            current[got[0]] = counts
    return out


def _opcode(text: str) -> str:
    body = re.sub(r"^@!?U?P[T\d]+\s+", "", text)
    return body.split(" ", 1)[0].split(".", 1)[0]


def join(name: str, located: list[Located], live: dict[int, dict[str, int]], *, arch: str,
         image: str, source_text=None, demangled: str = "",
         ptx: PtxFunction | None = None, attribution=None, ranges=None,
         registers: int | None = None) -> KernelLines:
    """One function's two listings joined on the offset, with its per-line records.
    ``source_text(file) -> list[str] | None``: the lines of a file whose text may be shown;
    ``ptx``: the function in the PTX the cubin was made from, counted per line too;
    ``attribution``: which frame of its chain each instruction counts to
    (``inspect.attribution``; none given: every file is the user's)."""
    attribution = attribution or Attribution()
    # ptxas pads a function with NOPs to a 128-byte boundary after its last instruction:
    # never issued, so no line's work (``sass.SassKernel.padding``, the same rule).
    end = len(located)
    while end > 0 and located[end - 1].text == "NOP":
        end -= 1
    end = end or len(located)
    ins = tuple(LineInstruction(x.offset, x.text, _opcode(x.text), x.file, x.line,
                                x.inlined_at, x.label, live.get(x.offset, {}),
                                attribution.frame(((x.file, x.line),) + x.inlined_at))
                for x in located[:end])
    by_line: dict[tuple[str, int], list[LineInstruction]] = {}
    for i in ins:
        f, n = i.at
        if f is not None and n is not None:
            by_line.setdefault((f, n), []).append(i)
    # PTX names its files as cicc was given them: the same paths as nvdisasm's, or else
    # matched by file name. Only files the SASS names: no PTX line widens the span elsewhere.
    # A PTX statement counts to the frame of its chain an instruction would (the same rule).
    ptx_count: dict[tuple[str, int], int] = {}
    if ptx is not None and by_line:
        sass_files = {f for f, _ in by_line}
        match = file_matcher(sass_files | {f for i in ins for f, _ in i.chain if f})
        matched: dict = {}  # once per PTX file, not per line
        for p in ptx.instructions:
            if p.line is None:
                continue
            chain = [(p.file, p.line), *p.inlined_at]
            for f, _ in chain:
                if f not in matched:
                    matched[f] = match(f)
            chain = [(matched[f], n) for f, n in chain]
            g, n = chain[attribution.frame(chain)]
            if g in sass_files:
                ptx_count[(g, n)] = ptx_count.get((g, n), 0) + 1
    files: dict[str, list[str] | None] = {}
    for f, _ in by_line:
        if f not in files:
            # a toolkit header's text from the toolkit's own include folder; else the
            # build's own source, the one file source_text reads
            got = None if attribution.is_user(f) else attribution.header_text(f)
            files[f] = got if got is not None else source_text(f) if source_text else None
    peak = max((i.gpr for i in ins if i.gpr is not None), default=None)
    numbers: dict[str, set[int]] = {f: set() for f in files}
    for f, n in (*by_line, *ptx_count):
        numbers[f].add(n)
    numbers = {f: sorted(ns) for f, ns in numbers.items()}
    # The span the kernel covers in each file: lines in between with no SASS are shown too,
    # unless the line numbers are spread too far to list (a crafted cubin or PTX may name line
    # 1 and line 999,999,999, or a thousand files each at lines 1 and 20,001): then the lines
    # with code alone. The files whose text is shown take their spans first.
    spans: dict[str, object] = {}
    budget = MAX_SPAN
    for f in sorted(files, key=lambda f: (files[f] is None, f)):
        ns = numbers[f]
        gaps = ns[-1] - ns[0] + 1 - len(ns)
        if gaps <= budget:
            budget -= gaps
            spans[f] = range(ns[0], ns[-1] + 1)
        else:
            spans[f] = ns
    lines: list[SourceLine] = []
    for f in sorted(files, key=lambda f: (not attribution.is_user(f), f)):
        text = files[f]
        for n in _folded(spans[f], set(numbers[f]), text):
            got = by_line.get((f, n), [])
            pk = max((i.gpr for i in got if i.gpr is not None), default=None)
            src = text[n - 1] if text is not None and 1 <= n <= len(text) else None
            classes: dict[str, int] = {}
            for i in got:
                c = classify(i.opcode, i.text)
                classes[c] = classes.get(c, 0) + 1
            lines.append(SourceLine(f, n, src, len(got), pk, pk is not None and pk == peak,
                                    dict(sorted(classes.items(), key=lambda kv: -kv[1])),
                                    ptx_count.get((f, n), 0) if ptx is not None else None))
    return KernelLines(name, arch, image, ins, tuple(lines), bool(by_line), demangled,
                       len(located) - end, ptx, attribution, ranges, registers)


def _folded(span, code: set[int], text=None):
    """The lines of ``span`` a view shows: those with ``code``, and the runs between them of
    ``FOLD`` lines or fewer (a longer run is one row in the views: a jump in the numbers). A
    run holding another kernel's signature folds too: a helper inlined from above it and the
    kernel's body are not one function (a kernel's own signature line has code)."""
    run: list[int] = []
    for n in span:
        if n in code:
            if len(run) <= FOLD and not (text and any(
                    1 <= m <= len(text) and _KERNEL_START.search(text[m - 1]) for m in run)):
                yield from run
            run = []
            yield n
        else:
            run.append(n)


def _run(argv: list[str], what: str) -> str:
    cp = proc.run(argv, timeout=300)
    if cp.returncode != 0:
        msg = (cp.stderr or cp.stdout).strip()
        if "ELF" in msg:
            raise ArtifactError(f"nvdisasm cannot read {what}: {msg}")
        raise ToolkitError(f"nvdisasm failed on {what}: {msg}")
    return cp.stdout


def _function_symbols(cubin: Path) -> list[int]:
    """The symbol indices of a cubin's functions, as nvdisasm's ``-fun`` takes them."""
    elf = _elf(read_bytes(cubin), cubin.name)
    table = elf.get_section_by_name(".symtab")
    if table is None:
        return []
    return [n for n, sym in enumerate(table.iter_symbols())
            if sym["st_info"]["type"] == "STT_FUNC"]


def _listings(cubin: Path, toolkit) -> tuple[str, str]:
    """(``-gi -c``, ``-lrm narrow -c``) listings of a cubin. nvdisasm has been seen to refuse
    some whole cubins' live ranges (``Invalid register count``): then one function at a time,
    and a function it still refuses (or past the first ``MAX_FUNCTIONS``) keeps its
    instructions with no counts."""
    nvd, path = toolkit.tool("nvdisasm"), os.path.abspath(cubin)
    located = _run([nvd, "-gi", "-c", path], cubin.name)
    try:
        live = _run([nvd, "--life-range-mode", "narrow", "-c", path], cubin.name)
    except ToolkitError as e:
        if _REGISTER_COUNT not in str(e):
            raise
        parts = []
        for index in _function_symbols(cubin)[:MAX_FUNCTIONS]:
            try:
                parts.append(_run([nvd, "--life-range-mode", "narrow", "-c", "-fun",
                                   str(index), path], cubin.name))
            except ToolkitError:
                continue
        live = "\n".join(parts)
    return located, live


def _arch_number(arch: str) -> int:
    m = re.search(r"_(\d+)", arch or "")
    return int(m.group(1)) if m else 0


def pick_ptx(functions: list[PtxFunction], arch: str) -> dict[str, PtxFunction]:
    """The PTX a cubin of ``arch`` was made from, by function name: the module of the same
    arch (``compute_90`` for ``sm_90``), else the newest older one (``arch=compute_80,
    code=sm_90`` compiles compute_80's PTX for sm_90)."""
    want = _arch_number(arch)
    exact = arch.replace("sm_", "compute_") if arch else ""
    older = [f for f in functions if _arch_number(f.arch) <= want or not f.arch]
    best = max(older, default=None, key=lambda f: (f.arch == exact, _arch_number(f.arch)))
    if best is None:
        return {}
    return {f.name: f for f in older if f.arch == best.arch}


def ptx_functions(texts) -> list[PtxFunction]:
    """``(text, module name, arch)`` of each kept PTX module -> its functions, line by line
    (a module that cannot be read is left out: the SASS view does not need it)."""
    out: list[PtxFunction] = []
    for text, module, arch in texts:
        try:
            out += parse_ptx_lines(text, module=module, arch=arch)
        except ArtifactError:
            continue
    return out


def cubin_lines(cubin: str | os.PathLike, toolkit, *, arch: str = "", image: str = "",
                source_text=None, ptx: list[PtxFunction] | None = None,
                attribution=None) -> list[KernelLines]:
    """Every function of one cubin, joined line by line; ``ptx``: the PTX functions the build
    kept, of which the cubin's arch picks its own (``pick_ptx``); ``attribution``: whose
    lines the instructions count to (default: the user's, by ``toolkit``'s folders)."""
    attribution = attribution or Attribution.of(toolkit)


    cubin = Path(cubin)
    located, live_text = _listings(cubin, toolkit)
    where = parse_located(located)
    live = parse_live(live_text)
    ranges = parse_ranges(live_text)
    names = demangle_all(where)
    mine = pick_ptx(ptx or [], arch)
    counts = _register_counts(cubin)
    return [join(f, ins, live.get(f, {}), arch=arch, image=image or cubin.name,
                 source_text=source_text, demangled=names[f], ptx=mine.get(f),
                 attribution=attribution, ranges=ranges.get(f), registers=counts.get(f))
            for f, ins in where.items()]


def _register_counts(cubin: Path) -> dict[str, int]:
    """Each kernel's register count as ptxas wrote it into the cubin (none where it cannot be
    read: the view does without)."""
    try:
        return {f.kernel: f.registers for f in read_figures(read_bytes(cubin), cubin.name)}
    except (NvstageError, OSError):
        return {}


def lines_of(path: str | os.PathLike, toolkit, *, source_text=None,
             attribution=None) -> list[KernelLines]:
    """Every function of a cubin, or of every cubin in a fatbin, object or executable (one
    image at a time, as ``sass.disassemble`` unpacks them), joined line by line."""
    import hashlib
    import tempfile


    kind = kind_of_file(path)
    if kind == "ptx":
        raise ArtifactError(f"{path} is PTX: there is no SASS until ptxas compiles it",
                            hint="nvstage compile it with --cubin")
    if kind == "cubin":
        arch = read_cubin(read_bytes(path), str(path)).arch
        return cubin_lines(path, toolkit, arch=arch, source_text=source_text,
                           attribution=attribution)
    out: list[KernelLines] = []
    stem = Path(path).name.split(".")[0]
    seen: set[bytes] = set()
    try:  # the PTX images beside the cubins, where the build embedded them
        ptx = ptx_functions((data.decode("utf-8", "replace"),
                             f"{stem}.{im.index}.{im.arch_name}.ptx", im.arch_name)
                            for im, data in image_bytes(path, toolkit, "ptx"))
    except ArtifactError:
        ptx = []
    cubins = []
    for im, data in image_bytes(path, toolkit, "cubin"):
        key = hashlib.sha256(data).digest()
        if key not in seen:
            seen.add(key)
            cubins.append((im, data))
    if len(cubins) > MAX_CUBINS:
        raise ArtifactError(f"{path} holds {len(cubins)} different cubins: the line view reads "
                            f"{MAX_CUBINS} at most (two nvdisasm runs each)",
                            hint="extract the one you want (cuobjdump -xelf) and show that")
    with tempfile.TemporaryDirectory(prefix="nvstage-lines-") as tmp:
        for im, data in cubins:
            arch = refine_arch(read_cubin(data, f"{path} image {im.index}").arch, im.arch_name)
            name = f"{stem}.{im.index}.{arch}.cubin"  # the inventory's name
            one = Path(tmp, name)
            one.write_bytes(data)
            out += cubin_lines(one, toolkit, arch=arch, image=name, source_text=source_text,
                               ptx=ptx, attribution=attribution)
            one.unlink()
    return out


def build_lines(build, toolkit=None, *, attribution=None) -> list[KernelLines]:
    """The line view of every cubin a build made, with the text of the source its manifest
    names and the PTX it kept."""
    toolkit = toolkit or build.toolkit
    text = source_reader(build.source, build.cwd, indent=True)
    kept = []
    for a in build.artifacts:
        if a.kind == "ptx" and os.path.isfile(a.path):
            try:
                kept.append((read_regular(a.path, what="PTX file").decode("utf-8", "replace"),
                             a.name, a.arch or ""))
            except (NvstageError, OSError):
                continue
    ptx = ptx_functions(kept)
    out: list[KernelLines] = []
    cubins = [a for a in build.artifacts if a.kind == "cubin" and os.path.isfile(a.path)]
    if len(cubins) > MAX_CUBINS:
        raise ArtifactError(f"{build.keep_dir or 'the build'} records {len(cubins)} cubins: the "
                            f"line view reads {MAX_CUBINS} at most (two nvdisasm runs each)",
                            hint="show one of them: nvstage show CUBIN --kernel NAME --lineinfo")
    for a in cubins:
        arch = refine_arch(read_cubin(read_bytes(a.path), a.path).arch, a.arch)
        out += cubin_lines(a.path, toolkit, arch=arch, source_text=text, ptx=ptx,
                           attribution=attribution)
    return out


def ask_live_at(kernels, where: str, kernel: str | None = "") -> list[KernelLines]:
    """``kernels`` (the line view of the one kernel asked for: ``kernel``) with what is live at
    each place ``where`` names: a comma list of source lines (``54``, ``k.cu:54``: the line's
    instruction with the most live registers) and offsets (``0x17a0``). ``UsageError`` for a
    place the kernel has no instruction at, or no line view to ask."""
    from dataclasses import replace


    if not kernel:
        raise UsageError("--live-at reads one kernel's line view: give --kernel NAME",
                         hint="nvstage show BUILD --kernel NAME --live-at 54")
    if not kernels:
        raise UsageError("--live-at reads the line view, which --sections left out",
                         hint="add lines to --sections, or leave --sections out")
    places = [w.strip() for w in where.split(",") if w.strip()]
    if not places or len(places) > MAX_ASKED:
        raise UsageError(f"--live-at takes 1 to {MAX_ASKED} places, a comma list: "
                         f"{where[:60]!r}", hint="--live-at 54,0x17a0")
    out = []
    for k in kernels:
        if k.ranges is None:
            raise UsageError(f"nvdisasm gave no life ranges for {k.demangled or k.name}: "
                             "nothing to say what is live where")
        asked = []
        for w in places:
            offset = _place(k, w)
            at = k.live_at(offset)
            if at is None:
                raise UsageError(f"{k.demangled or k.name} has no instruction at {w}",
                                 hint="the offsets are the line view's first column")
            asked.append(at)
        out.append(replace(k, asked=tuple(asked)))
    return out


MAX_ASKED = 16  # places one --live-at asks about: each walks the code once per live register


def _place(k: KernelLines, where: str) -> int:
    """The offset ``where`` names in ``k``: an offset (``0x17a0``), or a source line's
    instruction with the most live registers (``54``, ``k.cu:54``)."""
    if where.lower().startswith("0x"):
        try:
            return int(where, 16)
        except ValueError:
            raise UsageError(f"--live-at {where!r} is not an offset (hexadecimal, "
                             "0x17a0)") from None
    file, _, line = where.rpartition(":")
    if not line.isdecimal() or len(line) > 9:
        raise UsageError(f"--live-at {where!r} is neither a source line (54, k.cu:54) nor an "
                         "offset (0x17a0)")
    n = int(line)
    mine = [i for i in k.instructions if i.at[1] == n and (
        not file or (i.at[0] or "") == file or os.path.basename(i.at[0] or "") == file)]
    if not mine:
        raise UsageError(f"line {where} has no instruction of {k.demangled or k.name} (a "
                         "line's code may sit under the lines it calls or inlines)",
                         hint="the line view lists each line with its instructions: "
                              "--sections lines")
    return max(mine, key=lambda i: i.gpr or 0).offset
