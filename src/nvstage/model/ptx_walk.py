"""Following one kernel's PTX for one thread, with the workload's values: what its loops and its
shared-memory addresses come to when the code runs.

The PTX is the compiled code before ptxas: its integer arithmetic, compares and branches are
exact, so with the launch's parameters, block and grid, and a thread's indices, the thread's
path through the kernel can be followed as the GPU would take it, counting how many times it
reaches each label (a loop's head: its iterations) and where each shared-memory access lands.
Values read from memory are unknown, and so is all floating-point work: a branch on an unknown
value inside a loop (an ``if`` on data) is followed on its fall-through side and said; a loop
whose exit depends on one stops the walk there, and that loop is not derived. Buffers are given
distinct addresses (their contents stay unknown); shared variables addresses at 64 KiB steps,
so each starts on bank 0 as the hardware aligns them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_ENTRY = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern)\s+)*\.entry\s+([A-Za-z_$%][\w$%.]*)")
_LABEL = re.compile(r"^[ \t]*([\w$]+):[ \t]*(?://.*)?$")  # LLVM's (Triton's) add a comment
_LOC = re.compile(r"^[ \t]*\.loc[ \t]+\d+[ \t]+(\d+)[ \t]+\d+(.*)$")
_INLINED = re.compile(r"inlined_at[ \t]+\d+[ \t]+(\d+)")
_INSN = re.compile(r"^[ \t]*(@!?%\w+[ \t]+)?([a-z][\w.]*)[ \t]*(.*?);")
_TYPE = re.compile(r"^[busf](8|16|32|64)$")
_SPECIAL = {f"%{r}.{a}": (r, i) for r in ("tid", "ntid", "ctaid", "nctaid")
            for i, a in enumerate("xyz")}
_FLOAT_LITERAL = re.compile(r"^-?0[fFdD][0-9a-fA-F]+$")
MAX_STEPS = 200_000  # instructions one walk follows (a fraction of a second): past it, stops, said
MAX_BODY = 200_000  # PTX instructions of one kernel read


class _Unknown(Exception):
    pass


@dataclass(frozen=True)
class Insn:
    index: int
    guard: str | None  # "%p1" or "!%p1"
    op: str  # "add.s32"
    base: str  # "add"
    mods: tuple[str, ...]
    args: tuple[str, ...]
    line: int | None  # the user's source line (.loc; the inlined-at line for inlined code)
    kind: str  # "b" | "s" | "u" | "f"
    bits: int


@dataclass
class PtxFunction:
    name: str
    params: list  # parameter names, in order
    body: list  # Insn or label (str)
    labels: dict = field(default_factory=dict)  # label -> index in body
    layout: list = field(default_factory=list)  # (name, bytes, alignment) per parameter

    def loops(self) -> list[tuple[int, int, str]]:
        """(head, tail, label) per loop, by head: a branch back to an earlier label (the
        farthest such branch ends it)."""
        ends: dict[str, int] = {}
        for ins in self.body:
            if isinstance(ins, Insn) and ins.base == "bra" and ins.args:
                t = self.labels.get(ins.args[0])
                if t is not None and t < ins.index:
                    ends[ins.args[0]] = max(ends.get(ins.args[0], t), ins.index)
        return sorted((self.labels[lb], e, lb) for lb, e in ends.items())


def _args(s: str) -> tuple[str, ...]:
    out, depth, cur = [], 0, []
    for ch in s:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return tuple(out)


def _type(mods: tuple[str, ...]) -> tuple[str, int]:
    for m in reversed(mods):
        t = _TYPE.match(m)
        if t:
            return m[0], int(t.group(1))
        if m == "pred":
            return "b", 1
    return "b", 32


def _layout(words: list[str]) -> tuple[str, int, int]:
    """A ``.param`` declaration's (name, bytes, alignment): ``.u64 p`` is 8 and 8, ``.align
    8 .b8 s[16]`` 16 and 8 (the ``.align`` after ``.ptr`` is the pointee's)."""
    name = words[-1]
    count = re.search(r"\[(\d+)\]$", name)
    size = next((int(m.group(1)) // 8 for w in words
                 if (m := re.match(r"^\.[busf](\d+)$", w))), 8)
    align = size
    for k, w in enumerate(words[:-1]):
        if w == ".align" and (k == 0 or words[k - 1] != ".ptr") and words[k + 1].isdigit():
            align = int(words[k + 1])
    if count:
        size *= int(count.group(1))
    return re.sub(r"\[\d+\]$", "", name), size, max(align, 1)


def parse_function(ptx: str, name: str) -> PtxFunction | None:
    """The ``.entry`` named ``name`` of a PTX text, or None."""
    lines = ptx.splitlines()
    start = next((i for i, t in enumerate(lines)
                  if (m := _ENTRY.match(t)) and m.group(1) == name), None)
    if start is None:
        return None
    params, layout, i = [], [], start + 1
    while i < len(lines) and not lines[i].strip().startswith(")"):
        words = lines[i].strip().rstrip(",").split()
        if words and words[0] == ".param":
            params.append(re.sub(r"\[\d+\]$", "", words[-1]))
            layout.append(_layout(words))
        i += 1
    fn = PtxFunction(name, params, [], layout=layout)
    line, depth = None, 0
    for t in lines[i:]:
        s = t.strip()
        if s == "{":
            depth += 1
        elif s == "}":
            depth -= 1
            if depth <= 0:
                break
        if (lm := _LABEL.match(t)) is not None:
            fn.labels[lm.group(1)] = len(fn.body)
            fn.body.append(lm.group(1))
        elif (loc := _LOC.match(t)) is not None:
            ia = _INLINED.search(loc.group(2))
            line = int(ia.group(1)) if ia else int(loc.group(1))
        elif s and s[0] not in "./{}" and (im := _INSN.match(t)) is not None:
            mods = tuple(im.group(2).split("."))
            g = im.group(1)
            fn.body.append(Insn(len(fn.body), g.strip()[1:] if g else None, im.group(2),
                                mods[0], mods[1:], _args(im.group(3)), line,
                                *_type(mods[1:])))
            if len(fn.body) > MAX_BODY:
                return None
    return fn


@dataclass(frozen=True)
class Thread:
    tid: tuple[int, int, int]
    ntid: tuple[int, int, int]
    ctaid: tuple[int, int, int]
    nctaid: tuple[int, int, int]


@dataclass
class Walk:
    """One thread's path: how many times it reached each label, and, when asked, the
    addresses of its first shared-memory accesses per instruction."""

    reached: dict  # label -> times
    steps: int
    stopped: tuple | None = None  # (why, source line, PTX instruction index)
    assumed: list = field(default_factory=list)  # lines of ifs on data, fall-through taken
    shared: dict = field(default_factory=dict)  # insn index -> [(address or None, bytes)]
    shared_runs: dict = field(default_factory=dict)  # insn index -> times run


def _signed(v: int, bits: int) -> int:
    v &= (1 << bits) - 1
    return v - (1 << bits) if v >> (bits - 1) else v


def _width(ins: Insn) -> int:
    """Bytes one thread's shared access moves: the type's width times the vector's."""
    vec = next((int(m[1:]) for m in ins.mods if m in ("v2", "v4", "v8")), 1)
    return vec * max(ins.bits // 8, 1)


def walk(fn: PtxFunction, args: list, thread: Thread, *, max_steps: int = MAX_STEPS,
         shared_samples: int = 0, until: frozenset = frozenset()) -> Walk:
    """Follow ``fn`` for one thread. ``args``: one value per parameter (int, or None where
    unknown). ``shared_samples``: keep the addresses of that many executions of each
    ``ld.shared``/``st.shared``; ``until``: stop once each of these shared accesses (PTX
    instruction indices) has its samples."""
    left = set(until)
    params = dict(zip(fn.params, args))
    regs: dict = {}
    symbols: dict = {}
    loops = fn.loops()
    inner: dict[int, tuple[int, int]] = {}
    for h, t, _ in loops:  # by head: a later (inner) loop overwrites its span
        for j in range(h, t + 1):
            inner[j] = (h, t)
    out = Walk({}, 0)
    special = {"tid": thread.tid, "ntid": thread.ntid, "ctaid": thread.ctaid,
               "nctaid": thread.nctaid}

    def val(a: str) -> int:
        if a[0] == "%":
            s = _SPECIAL.get(a)
            if s is not None:
                return special[s[0]][s[1]]
            v = regs.get(a)
            if v is None:
                if a == "%laneid":
                    return thread.tid[0] % 32
                raise _Unknown(a)
            return v
        if a[0].isdigit() or a[0] == "-":
            if _FLOAT_LITERAL.match(a):
                raise _Unknown(a)
            neg = a[0] == "-"
            d = a.lstrip("-")
            v = int(d, 16) if d[:2] in ("0x", "0X") else int(d.rstrip("Uu"), 10)
            return -v if neg else v
        base = a.split("+")[0]
        if base in params:
            raise _Unknown(a)
        return symbols.setdefault(base, 0x10000 * (len(symbols) + 1))

    body = fn.body
    pc, steps = 0, 0
    reached = out.reached
    while pc < len(body):
        ins = body[pc]
        if isinstance(ins, str):
            reached[ins] = reached.get(ins, 0) + 1
            pc += 1
            continue
        steps += 1
        if steps > max_steps:
            out.stopped = (f"followed for {max_steps} instructions without ending", ins.line,
                           pc)
            break
        if ins.guard:
            neg = ins.guard[0] == "!"
            g = regs.get(ins.guard.lstrip("!"))
            if g is None:
                if ins.base == "bra":
                    target = fn.labels.get(ins.args[0], pc)
                    span = inner.get(pc)
                    if target < pc or (span and not span[0] <= target <= span[1]):
                        out.stopped = ("its exit depends on values read from memory",
                                       ins.line, pc)
                        break
                    out.assumed.append(ins.line)
                elif ins.args and ins.args[0][:1] == "%":
                    regs[ins.args[0]] = None
                pc += 1
                continue
            if bool(g) == neg:
                pc += 1
                continue
        base = ins.base
        if base == "bra":
            pc = fn.labels.get(ins.args[0], len(body))
            continue
        if base in ("ret", "exit", "trap"):
            break
        if base in ("ld", "st") and "shared" in ins.mods:
            out.shared_runs[ins.index] = out.shared_runs.get(ins.index, 0) + 1
            seen = out.shared.setdefault(ins.index, [])
            if len(seen) < shared_samples:
                ref = ins.args[1] if base == "ld" else ins.args[0]
                seen.append((_address(ref, val), _width(ins)))
                if len(seen) == shared_samples and ins.index in left:
                    left.discard(ins.index)
                    if not left:
                        break
        if ins.args and ins.args[0][:1] == "%":
            if ins.kind == "f" and base != "setp":
                pc += 1  # floating-point work: never a branch's or an address's input
                continue
            try:
                _execute(ins, base, regs, val, params)
            except (_Unknown, KeyError, ValueError, IndexError, ZeroDivisionError):
                for d in ins.args[0].split("|"):
                    regs[d] = None
        pc += 1
    out.steps = steps
    return out


def _address(ref: str, val) -> int | None:
    inner = ref.strip().strip("[]").replace(" ", "")
    parts = re.split(r"\+(?=-?\w)", inner)
    try:
        return sum(val(p) for p in parts)
    except (_Unknown, ValueError):
        return None


def _execute(ins: Insn, base: str, regs: dict, val, params: dict) -> None:
    a, mods, kind, bits = ins.args, ins.mods, ins.kind, ins.bits
    dst = a[0]
    if base == "ld":
        if "param" not in mods:
            raise _Unknown("memory")
        v = params.get(a[1].strip("[]").split("+")[0])
        if v is None:
            raise _Unknown("param")
    elif base == "setp":
        if kind == "f":
            raise _Unknown("float")
        x, y = val(a[1]), val(a[2])
        cmp = mods[0]
        if kind == "s":
            x, y = _signed(x, bits), _signed(y, bits)
        else:
            x, y = x & ((1 << bits) - 1), y & ((1 << bits) - 1)
        r = {"eq": x == y, "ne": x != y, "lt": x < y, "le": x <= y, "gt": x > y,
             "ge": x >= y, "lo": x < y, "ls": x <= y, "hi": x > y, "hs": x >= y}[cmp]
        if len(mods) > 2 and mods[1] in ("and", "or", "xor"):
            c = bool(val(a[3].lstrip("!"))) != a[3].startswith("!")
            r = {"and": r and c, "or": r or c, "xor": r != c}[mods[1]]
        if "|" in dst:
            p, q = dst.split("|")
            regs[p], regs[q] = int(r), int(not r)
        else:
            regs[dst] = int(r)
        return
    elif base in ("mov", "cvta"):
        v = val(a[-1])
    elif base == "cvt":
        types = [m for m in mods if _TYPE.match(m)]
        if len(types) != 2 or "f" in (types[0][0], types[1][0]):
            raise _Unknown("float")
        sk, sb = types[1][0], int(types[1][1:])
        x = val(a[1])
        v = _signed(x, sb) if sk == "s" else x & ((1 << sb) - 1)
        bits = int(types[0][1:])
    elif base == "selp":
        c = bool(val(a[3].lstrip("!"))) != a[3].startswith("!")
        v = val(a[1]) if c else val(a[2])
    elif base == "not":
        v = ~val(a[1])
    elif base == "neg":
        v = -_signed(val(a[1]), bits)
    else:
        xs = [val(x) for x in a[1:]]
        xs = ([_signed(x, bits) for x in xs] if kind == "s"
              else [x & ((1 << bits) - 1) for x in xs])
        if base in ("add", "sub", "mul", "mad", "mul24", "mad24"):
            v = xs[0] - xs[1] if base == "sub" else (xs[0] + xs[1] if base == "add"
                                                     else xs[0] * xs[1])
            if "hi" in mods:
                v >>= bits
            if base in ("mad", "mad24"):
                v += xs[2]
            if "wide" in mods:
                bits *= 2
        elif base == "shl":
            v = xs[0] << min(xs[1] & 0xFF, bits)
        elif base == "shr":
            v = xs[0] >> min(xs[1] & 0xFF, bits)
        elif base == "and":
            v = xs[0] & xs[1]
        elif base == "or":
            v = xs[0] | xs[1]
        elif base == "xor":
            v = xs[0] ^ xs[1]
        elif base == "min":
            v = min(xs[0], xs[1])
        elif base == "max":
            v = max(xs[0], xs[1])
        elif base == "abs":
            v = abs(xs[0])
        elif base in ("div", "rem"):
            q = abs(xs[0]) // abs(xs[1]) * (1 if (xs[0] >= 0) == (xs[1] >= 0) else -1)
            v = q if base == "div" else xs[0] - xs[1] * q
        else:
            raise _Unknown(base)
    regs[dst] = v & ((1 << bits) - 1)


# -- trip counts as expressions ---------------------------------------------------------
# A value as a polynomial over the launch's names: {(name, ...): coefficient}, () the
# constant. Enough for the index arithmetic of counted loops (adds, multiplies, shifts by
# constants); anything else has no expression.
_NAMES = {"%tid": "threadIdx", "%ntid": "blockDim", "%ctaid": "blockIdx",
          "%nctaid": "gridDim"}


def _poly_add(a: dict, b: dict, sign: int = 1) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return {k: v for k, v in out.items() if v}


def _poly_mul(a: dict, b: dict) -> dict | None:
    out: dict = {}
    for ka, va in a.items():
        for kb, vb in b.items():
            k = tuple(sorted(ka + kb))
            if len(k) > 3:
                return None
            out[k] = out.get(k, 0) + va * vb
    return {k: v for k, v in out.items() if v}


def _poly_text(p: dict) -> str:
    if not p:
        return "0"
    terms = []
    for k in sorted(p, key=lambda k: (p[k] < 0, -len(k), k)):
        v = p[k]
        name = " * ".join(k)
        body = (name if abs(v) == 1 else f"{abs(v)} * {name}") if k else str(abs(v))
        terms.append(("- " if v < 0 else "+ ") + body)
    text = " ".join(terms)
    return text[2:] if text.startswith("+ ") else "-" + text[2:]


def _symbolic(fn: PtxFunction, reg: str, before: int, names: dict, depth: int = 0
              ) -> dict | None:
    """``reg``'s value just before body index ``before``, from its last definition above
    that index in straight code, as a polynomial; None where it is not index arithmetic."""
    if depth > 24:
        return None
    if not reg.startswith("%"):
        try:
            return {(): int(reg, 0)} if not _FLOAT_LITERAL.match(reg) else None
        except ValueError:
            return None
    special = reg.split(".")
    if special[0] in _NAMES and len(special) == 2:
        fixed = names.get(reg)  # a dimension of 1 in this launch: its index is 0
        return {(): fixed} if isinstance(fixed, int) else \
            {(f"{_NAMES[special[0]]}.{special[1]}",): 1}
    if reg == "%laneid":  # the thread's linear index in its block, modulo the warp's 32
        t = [_symbolic(fn, f"%tid.{d}", 0, names) for d in "xyz"]
        n = [_symbolic(fn, f"%ntid.{d}", 0, names) for d in "xy"]
        linear = _poly_add(_poly_add(t[0], _poly_mul(n[0], t[1])),
                           _poly_mul(_poly_mul(n[0], n[1]), t[2]))  # at most 3 names a term
        return _atom(linear, "%", 32)
    for j in range(before - 1, -1, -1):
        ins = fn.body[j]
        if isinstance(ins, str) or not ins.args or ins.args[0] != reg:
            continue
        if ins.guard:
            return None
        a = ins.args

        def sym(x):
            return _symbolic(fn, x, j, names, depth + 1)
        if ins.base == "ld" and "param" in ins.mods:
            name = names.get(a[1].strip("[]"))
            if isinstance(name, int):  # a value, not a name: for checking an expression
                return {(): name}
            return {(name,): 1} if name else None
        if ins.base in ("mov", "cvt"):
            return sym(a[-1])
        if ins.base in ("add", "sub"):
            x, y = sym(a[1]), sym(a[2])
            return None if x is None or y is None else _poly_add(x, y, 1 if ins.base == "add"
                                                                 else -1)
        if ins.base == "mul" and "lo" in ins.mods or ins.base == "mad" and "lo" in ins.mods:
            x, y = sym(a[1]), sym(a[2])
            p = None if x is None or y is None else _poly_mul(x, y)
            if ins.base == "mad" and p is not None:
                z = sym(a[3])
                p = None if z is None else _poly_add(p, z)
            return p
        if ins.base == "shl":
            x, y = sym(a[1]), sym(a[2])
            if x is None or y is None or set(y) - {()}:
                return None
            return _poly_mul(x, {(): 1 << y.get((), 0)})
        if ins.base == "not":  # two's complement: ~x = -x - 1 (LLVM's n - i - 1)
            x = sym(a[1])
            return None if x is None else _poly_add({(): -1}, x, -1)
        if ins.base in ("and", "rem", "shr", "div") and len(a) == 3:
            x, y = sym(a[1]), sym(a[2])
            if ins.base == "div" and y is not None and set(y) - {()}:
                return _divided(ins, x, y)
            return _by_constant(ins, x, y)
        return None
    return None


def _divided(ins: Insn, x: dict | None, y: dict) -> dict | None:
    """``x / y`` (unsigned) with ``y`` a sum of the launch's names: a loop's count as LLVM
    computes it before unrolling, ``(n - i - 1) / stride + 1``; ``(a - 1) // b`` is written
    ``cdiv(a, b) - 1`` (equal for integers and b > 0), so the ``+ 1`` after it cancels."""
    if x is None or ins.kind != "u" or any(v < 0 for v in y.values()):
        return None
    if x.get((), 0) == -1:
        a = _poly_add(x, {(): 1})
        return {(f"cdiv({_poly_text(a)}, {_poly_text(y)})",): 1, (): -1}
    return {(f"({_poly_text(x)}) // ({_poly_text(y)})",): 1}


def _by_constant(ins: Insn, x: dict | None, y: dict | None) -> dict | None:
    """``x & (2^k - 1)``, ``x % c``, ``x >> k`` or ``x / c`` with ``c`` a constant, as a
    term of its own (``threadIdx.x % 32``: a warp-stride loop's lane); only where ``x`` is
    a sum of the launch's names with positive factors (sizes and indices, never negative),
    so the modulo and the floor division are C's unsigned ones."""
    if x is None or y is None or set(y) - {()}:
        return None
    c = y.get((), 0)
    if ins.base == "and":
        if c <= 0 or c & (c + 1):  # a mask of low bits only
            return None
        return _atom(x, "%", c + 1)
    if ins.base == "shr":
        if c == ins.bits - 1 and all(v >= 0 for v in x.values()):
            return {}  # the sign of a size or an index (C's x / 4 rounds it toward 0): 0
        return _atom(x, "//", 1 << c) if 0 <= c < ins.bits else None
    if c <= 0 or ins.kind != "u":  # C's signed / and % truncate: not Python's
        return None
    return _atom(x, "%" if ins.base == "rem" else "//", c)


def _atom(x: dict | None, op: str, c: int) -> dict | None:
    """``x op c`` (``%`` or ``//``) as a polynomial: a number where ``x`` is one, else one
    term named by its text; None where ``x`` may be negative."""
    if x is None or any(v < 0 for v in x.values()) or c <= 0:
        return None
    if set(x) <= {()}:
        v = x.get((), 0)
        return {(): v % c if op == "%" else v // c}
    if op == "//" and c > 1 and x.get((), 0) == c - 1:  # (K + 63) // 64: Triton's cdiv
        return {(f"cdiv({_poly_text(_poly_add(x, {(): 1 - c}))}, {c})",): 1}
    text = _poly_text(x)
    if not single_term(text):
        text = f"({text})"
    return {(f"{text} {op} {c}",): 1}


def single_term(text: str) -> bool:
    """A name, a number, or one call or bracket closed at the end (``cdiv(a, b)``): what
    needs no brackets before ``%`` or ``//``."""
    if re.fullmatch(r"[\w.]+", text):
        return True
    m = re.match(r"\w*\(", text)
    if m is None:
        return False
    depth = 0
    for i in range(m.end() - 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i == len(text) - 1
    return False


def trip_expression(fn: PtxFunction, span: tuple[int, int, str], names: dict) -> str | None:
    """A counted loop's trips per entry as an expression in the launch's names: its closing
    branch on ``setp.lt`` (or le, gt, ge, ne) of a register stepped by a constant in the
    loop against a value fixed before it. ``names``: PTX parameter -> the name or expression
    the workload passes. None for any other shape."""
    head, tail, _ = span
    latch = fn.body[tail]
    if not isinstance(latch, Insn) or not latch.guard or latch.args[0] != span[2]:
        return None
    p = latch.guard.lstrip("!")
    setp = next((i for i in reversed(fn.body[head:tail]) if isinstance(i, Insn)
                 and i.args and i.args[0] == p), None)
    if setp is None or setp.base != "setp" or setp.mods[0] not in ("lt", "le", "gt", "ge",
                                                                   "ne"):
        return None
    # Registers the loop writes (not a `bar.sync 0`'s or `wgmma.wait_group 0`'s operand).
    defined = {i.args[0]: i for i in fn.body[head:tail] if isinstance(i, Insn) and i.args
               and i.args[0][:1] == "%"}
    iv, bound, flip = setp.args[1], setp.args[2], False
    if iv not in defined:
        iv, bound, flip = bound, iv, True
    step_ins = defined.get(iv)
    if step_ins is None or bound in defined or step_ins.base not in ("add", "sub") \
            or step_ins.args[1] != iv:
        return None
    cmp = setp.mods[0]
    if flip:
        cmp = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le"}.get(cmp, cmp)
    if latch.guard.startswith("!"):
        return None
    # The step: a constant, or a value fixed before the loop (a grid-stride loop's
    # blockDim.x * gridDim.x), counted as positive.
    step_p = _symbolic(fn, step_ins.args[2], head, names) \
        if step_ins.args[2] not in defined else None
    if step_p is None:
        return None
    if set(step_p) - {()}:
        if step_ins.base != "add" or cmp not in ("lt", "ne") or \
                any(v < 0 for v in step_p.values()):
            return None
        init, end = _symbolic(fn, iv, head, names), _symbolic(fn, bound, head, names)
        if init is None or end is None:
            return None
        return f"cdiv({_poly_text(_poly_add(end, init, -1))}, {_poly_text(step_p)})"
    step = step_p[()] * (1 if step_ins.base == "add" else -1)
    init, end = _symbolic(fn, iv, head, names), _symbolic(fn, bound, head, names)
    if init is None or end is None or step == 0:
        return None
    if cmp in ("lt", "ne") and step > 0:
        span_p = _poly_add(end, init, -1)
    elif cmp == "le" and step > 0:
        span_p = _poly_add(_poly_add(end, init, -1), {(): 1})
    elif cmp in ("gt", "ne") and step < 0:
        span_p, step = _poly_add(init, end, -1), -step
    elif cmp == "ge" and step < 0:
        span_p, step = _poly_add(_poly_add(init, end, -1), {(): 1}), -step
    else:
        return None
    text = _poly_text(span_p)
    if set(span_p) <= {()}:
        return str(-(-span_p.get((), 0) // step))
    return text if step == 1 else f"cdiv({text}, {step})"
