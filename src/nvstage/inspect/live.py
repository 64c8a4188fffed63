"""What is live at an instruction, and which source line wrote it: nvdisasm's life ranges per
register, joined with each register's writes and their lines.

``nvdisasm --life-range-mode narrow`` (``-lrm narrow``) draws a column per register beside each
instruction: blank where the register holds no live value, ``:`` live through it, ``^`` written
there, ``v`` read there, ``x`` read and written; its ``#`` column is the count ``-lrm count``
prints (the line view reads both from the one listing). A value live at an instruction comes
from the writes of its register that reach it: walking back from the instruction along the
code's flow (the listing's order, and each branch to a label before an instruction) over the
instructions where the register stays live, to the first write on each path. A write under a
predicate may not happen, so the walk goes on past it too. A register the instruction itself
writes counts to the instruction.

Each register counts once, to the line of its last write in the code (the one at the highest
offset): a loop's accumulator counts to the line inside the loop that updates it, and the lines
that gave it its first value (before the loop) are listed beside that line as ``also``. The line
of a write is the line the view counts the instruction to (``inspect.attribution``), and, where
that frame was inlined, the line of the call.

The values live at the peak are not ptxas's register count. Between them, by rule:
- registers below the highest one the code touches that hold nothing at the peak (holes): a
  64- or 128-bit operand takes an aligned pair or quad (``R2.64``, ``LDG.E.128 R4``), and the
  allocator keeps a value in one register for its life, so the registers are not packed at
  every instruction;
- R1 is the stack pointer by the ABI: written first and live throughout, it is one of the live;
- RZ (R255) reads as zero: never allocated, never counted;
- ptxas's count is the highest register the code touches plus one, plus two in a kernel whose
  section holds no subroutine (a ``$``-label: the toolkit's division routines, a ``__noinline__``
  function); where one is there, the count is the highest plus one (seen on 840 builds of the
  corpora, CUDA 13.0 and 13.5, sm_75 to sm_120; undocumented);
- occupancy then allocates a warp's registers in units of 256, 8 per thread
  (``cudaOccRegAllocationGranularity``): a step of its own (``hw.occupancy``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nvstage.errors import ArtifactError

_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_INSN = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*)$")
_LABEL = re.compile(r"^\s*(\.L\w+|\$[^\s:]+)\s*:")
_TARGET = re.compile(r"`\(([^)`]+)\)")
_PREDICATED = re.compile(r"^@!?U?P[0-6]\s+")  # @PT is always true: no condition
_CONDITION = re.compile(r"^\S+\s+[^`\s]")  # BRA P1, `(...)`, BRA.DIV UR4, `(...)`
_WRITES = "^x"
_MARKS = "^vx:"
ALLOC_UNIT = 8  # registers per thread: a warp's are allocated 256 at a time (sm_75 to sm_121)
RESERVED_LEAF = 2  # ptxas's count above the highest register, with no subroutine (seen)
MAX_REGISTERS = 256  # nvdisasm draws R0 to R254: more columns is not its listing
_LEAVES = ("BRA", "JMP", "BRX", "JMX", "EXIT", "RET", "KILL")


@dataclass(frozen=True)
class RangeListing:
    """One function of an ``-lrm narrow`` listing: its instructions in order, the labels before
    each, and each one's general-register row (one character per register: ``registers[n]``
    is the register of a row's ``n``-th character)."""
    name: str
    offsets: tuple[int, ...]
    texts: tuple[str, ...]
    labels: tuple[tuple[str, ...], ...]
    rows: tuple[str, ...]
    registers: tuple[int, ...]
    counts: tuple[int, ...]  # nvdisasm's '#' column

    def index(self, offset: int) -> int | None:
        try:
            return self.offsets.index(offset)
        except ValueError:
            return None

    def marks(self, i: int) -> dict[int, str]:
        """register -> its mark at instruction ``i``, for the registers live there."""
        row = self.rows[i]
        return {r: row[n] for n, r in enumerate(self.registers) if n < len(row)
                and row[n] in _MARKS}

    def mark(self, i: int, column: int) -> str:
        row = self.rows[i]
        return row[column] if column < len(row) else " "

    @property
    def highest(self) -> int:
        """The highest general register the function touches (-1: none)."""
        for n in range(len(self.registers) - 1, -1, -1):  # the top columns are mostly blank
            if any(n < len(row) and row[n] in _MARKS for row in self.rows):
                return self.registers[n]
        return -1

    @property
    def subroutines(self) -> bool:
        """Whether the section holds a subroutine after the kernel (nvdisasm labels its start
        with the function's ``$`` name). A ``CALL`` alone may be to a label of the kernel's."""
        return any(lab.startswith("$") for labs in self.labels for lab in labs)


def _opcode(text: str) -> str:
    body = _PREDICATED.sub("", text)
    body = body[4:] if body.startswith("@PT ") else body
    return body.split(" ", 1)[0].split(".", 1)[0]


def _columns(header: list[str]):
    """(the row's slice, register of each column) of the GPR section of a narrow listing's
    header rows (each the text after ``//``), or None where it is not one."""
    title = next((h for h in header if "GPR" in h), None)  # GPR is its first section
    if title is None:
        return None
    at = title.index("GPR")
    start, end = title.rfind("|", 0, at), title.find("|", at)
    digits = [h for h in header if h is not title and re.search(r"[0-9#]", h[start:end])]
    if start < 0 or end < 0 or not digits or "#" not in digits[-1][start:end]:
        return None
    hash_at = digits[-1].index("#", start, end)
    first, regs = None, []
    for p in range(hash_at + 1, end):
        if p < len(digits[-1]) and digits[-1][p].isdigit():
            first = p if first is None else first
            regs.append(int("".join(d[p] for d in digits if p < len(d) and d[p].isdigit())))
        elif first is not None:
            break
    if first is None or max(regs) >= MAX_REGISTERS or \
            regs != list(range(regs[0], regs[0] + len(regs))):
        return None  # not nvdisasm's R0, R1, ... in a row
    return (start, hash_at, first, first + len(regs)), tuple(regs)


def parse_ranges(text: str) -> dict[str, RangeListing]:
    """nvdisasm ``-lrm narrow -c`` -> each function's per-register life ranges. A function
    whose header cannot be read is left out (the line view's counts stay its own)."""
    if not isinstance(text, str):
        raise ArtifactError("nvdisasm output must be text")
    out: dict[str, RangeListing] = {}
    state = {"name": None, "header": [], "cols": None, "rows": [], "labels": []}

    def close():
        if state["name"] is not None and state["cols"] is not None:
            rows = state["rows"]
            cols = tuple(zip(*rows)) if rows else ((),) * 5
            out[state["name"]] = RangeListing(state["name"], *cols[:4], state["cols"][1],
                                              cols[4])

    for raw in text.splitlines():
        m = _SECTION.match(raw)
        if m:
            close()
            state.update(name=m.group(1), header=[], cols=None, rows=[], labels=[])
            continue
        if state["name"] is None:
            continue
        ins = _INSN.match(raw)
        if ins is None:
            lab = _LABEL.match(raw)
            if lab:
                state["labels"].append(lab.group(1))
            elif state["cols"] is None and "//" in raw:
                state["header"].append(raw[raw.index("//") + 2:])
                if "#" in state["header"][-1]:
                    state["cols"] = _columns(state["header"])
            continue
        body, sep, cells = ins.group(2).rpartition("//")
        if state["cols"] is None or not sep:
            continue
        (start, hash_at, a, b), _ = state["cols"]
        count = cells[start + 1:hash_at + 1].strip()
        row = cells[a:b]
        state["rows"].append((int(ins.group(1), 16), body.strip().rstrip(";").strip(),
                              tuple(state["labels"]), row,
                              int(count) if count.isdecimal() else
                              sum(c in _MARKS for c in row)))
        state["labels"] = []
    close()
    return out


def predecessors(listing: RangeListing) -> list[list[int]]:
    """Each instruction's predecessors in the code's flow: the one before it unless that one
    always leaves (an unconditional BRA, EXIT, RET), and each branch to a label before it. A
    CALL returns to the next instruction; the callee's body is its own."""
    at_label = {lab: i for i, labs in enumerate(listing.labels) for lab in labs}
    preds: list[list[int]] = [[] for _ in listing.texts]
    for i, t in enumerate(listing.texts):
        op = _opcode(t)
        conditional = bool(_PREDICATED.match(t))
        target = _TARGET.search(t)
        if op in ("BRA", "JMP") and target and target.group(1) in at_label:
            preds[at_label[target.group(1)]].append(i)
            conditional = conditional or bool(_CONDITION.match(_PREDICATED.sub("", t)))
        if not (op in _LEAVES and not conditional) and i + 1 < len(preds):
            preds[i + 1].append(i)
    return preds


def reaching_writes(listing: RangeListing, index: int, preds=None) -> dict[int, tuple[int, ...]]:
    """register -> the instructions (indices) whose writes reach ``index``, for each register
    live there (the instruction itself for a register it writes)."""
    preds = preds if preds is not None else predecessors(listing)
    column = {r: n for n, r in enumerate(listing.registers)}
    out = {}
    for reg, mark in listing.marks(index).items():
        if mark in _WRITES:
            out[reg] = (index,)
            continue
        n = column[reg]
        found, seen, todo = set(), {index}, list(preds[index])
        while todo:
            q = todo.pop()
            if q in seen:
                continue
            seen.add(q)
            c = listing.mark(q, n)
            if c not in _MARKS:
                continue  # not live here: no write reaches through it
            if c in _WRITES:
                found.add(q)
                if not _PREDICATED.match(listing.texts[q]):
                    continue
            todo.extend(preds[q])
        out[reg] = tuple(sorted(found))
    return out


@dataclass(frozen=True)
class WrittenAt:
    """The live registers whose last write in the code is at one source line."""
    file: str | None
    line: int | None
    text: str | None  # the line as written, where the view shows it
    via: tuple[str, int] | None  # the call it was inlined through, where it was
    registers: tuple[int, ...]
    also: tuple[tuple[str | None, int | None], ...] = ()  # other lines writing them (a loop's
    # first values, written before it)

    def to_json(self) -> dict:
        return {"file": self.file, "line": self.line, "source_text": self.text,
                "inlined_at": None if self.via is None else
                {"file": self.via[0], "line": self.via[1]},
                "count": len(self.registers),
                "registers": [f"R{r}" for r in self.registers],
                "also": [{"file": f, "line": n} for f, n in self.also]}


@dataclass(frozen=True)
class RegisterGap:
    """From the values live at the peak to ptxas's count, then to occupancy's allocation."""
    peak_live: int
    stack_pointer: bool  # R1 is one of them
    highest: int  # the highest general register the code touches
    holes: tuple[int, ...]  # registers below it holding nothing at the peak
    paired: int  # of those, in an aligned pair or quad with a live register
    reported: int | None  # ptxas's "Used N registers"
    subroutines: bool  # a subroutine sits in the kernel's section

    @property
    def above(self) -> int | None:
        """ptxas's count above the highest register touched (2 with no subroutine)."""
        return None if self.reported is None else self.reported - self.highest - 1

    @property
    def allocated(self) -> int | None:
        """Per thread, as occupancy allocates them."""
        return None if self.reported is None else -(-self.reported // ALLOC_UNIT) * ALLOC_UNIT

    def to_json(self) -> dict:
        return {"peak_live": self.peak_live, "stack_pointer_live": self.stack_pointer,
                "highest_register": f"R{self.highest}", "holes": len(self.holes),
                "hole_registers": [f"R{r}" for r in self.holes],
                "holes_in_pairs_or_quads": self.paired, "reported": self.reported,
                "above_highest": self.above, "subroutines": self.subroutines,
                "allocated_per_thread": self.allocated}


@dataclass(frozen=True)
class LiveAt:
    """The values live at one instruction, by the line that wrote them."""
    offset: int
    text: str
    at: tuple[str | None, int | None]  # the line the instruction counts to
    live: int  # nvdisasm's count
    written: tuple[WrittenAt, ...]  # the most registers first
    gap: RegisterGap | None = None

    def to_json(self) -> dict:
        return {"offset": self.offset, "text": self.text,
                "file": self.at[0], "line": self.at[1], "live_gpr": self.live,
                "written_at": [w.to_json() for w in self.written],
                "registers": None if self.gap is None else self.gap.to_json()}


def _paired(reg: int, live) -> bool:
    """Whether a free ``reg`` shares an aligned pair or quad with a live register."""
    quad = reg & ~3
    return any(r in live for r in range(quad, quad + 4) if r != reg)


def register_gap(listing: RangeListing, index: int, reported: int | None) -> RegisterGap:
    live = listing.marks(index)
    highest = listing.highest
    holes = tuple(r for r in range(highest + 1) if r not in live)
    return RegisterGap(listing.counts[index], 1 in live, highest, holes,
                       sum(_paired(r, live) for r in holes), reported, listing.subroutines)


def live_at(listing: RangeListing, offset: int, where, *, text_of=None,
            reported: int | None = None) -> LiveAt:
    """The values live at the instruction at ``offset``, by the line of their last write.
    ``where(offset) -> ((file, line), (file, line) of its call or None)``: the line an
    instruction counts to; ``text_of(file, line)``: that line's text where it may be shown;
    ``reported``: ptxas's register count."""
    index = listing.index(offset)
    if index is None:
        raise ArtifactError(f"no instruction at offset {offset:#06x} in {listing.name}")
    writes = reaching_writes(listing, index)
    groups: dict[tuple, list[int]] = {}
    also: dict[tuple, set] = {}
    for reg, at in writes.items():
        key = where(listing.offsets[max(at)]) if at else ((None, None), None)
        groups.setdefault(key, []).append(reg)
        also.setdefault(key, set()).update(where(listing.offsets[q])[0] for q in at)
    out = []
    for (line, via), regs in groups.items():
        others = sorted(also[(line, via)] - {line}, key=lambda fl: (fl[0] or "", fl[1] or 0))
        out.append(WrittenAt(line[0], line[1],
                             text_of(*line) if text_of and line[1] is not None else None,
                             via, tuple(sorted(regs)), tuple(others)))
    out.sort(key=lambda w: (-len(w.registers), w.file or "", w.line or 0))
    return LiveAt(offset, listing.texts[index], where(offset)[0], listing.counts[index],
                  tuple(out), register_gap(listing, index, reported))
