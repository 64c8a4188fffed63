"""Following one kernel's SASS for one thread, with the workload's values: how many times the
thread reaches the head of each loop, as ptxas shaped the loops.

ptxas reshapes what the PTX gives it (a loop unrolled 4x in the PTX may become a 16x loop, the
4x loop and its remainder), so the trip counts the model multiplies the SASS's instructions by
are best read from the SASS itself. Its integer arithmetic, compares and branches on the launch's
values are followed exactly: the parameters from the constant bank where the arch keeps them
(cc 7.5 to 8.9 at 0x160, 9.0 at 0x210, 10.0 and later at 0x380; the block and grid sizes before
them), the thread's indices from its special registers. Loads, floating-point results and
anything else not followed are unknown; a branch on an unknown value is taken as the PTX walk
takes one (``model.ptx_walk``): an ``if`` inside a loop falls through, a loop's exit stops the
walk there.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from nvstage.model.ptx_walk import Thread

MAX_STEPS = 200_000  # instructions one walk follows (under a second): past it, it stops, said
M32 = 0xFFFFFFFF
M64 = (1 << 64) - 1
_PRED = re.compile(r"^@(!?)(U?P[T\d]+)\s+")
_CONST = re.compile(r"^c\[0x0\]\[(0x[0-9a-fA-F]+|RZ|URZ)\]$")
_SPECIAL = {"SR_TID.X": ("tid", 0), "SR_TID.Y": ("tid", 1), "SR_TID.Z": ("tid", 2),
            "SR_CTAID.X": ("ctaid", 0), "SR_CTAID.Y": ("ctaid", 1),
            "SR_CTAID.Z": ("ctaid", 2)}
_TARGET = re.compile(r"`\((\.L\w+)\)")


@dataclass(frozen=True)
class Bank:
    """Where the arch keeps a launch's values in constant bank 0."""

    ntid: int
    nctaid: int
    params: int


def bank_for(arch: str) -> Bank:
    """The layout of constant bank 0 for ``arch``, as ptxas addresses it (read off listings
    of a kernel that reads blockDim, gridDim and its parameters, CUDA 13)."""
    num = int(re.sub(r"\D", "", arch.split("_")[-1]) or 0)
    if num >= 100:
        return Bank(0x360, 0x370, 0x380)
    if num >= 90:
        return Bank(0x0, 0xC, 0x210)
    return Bank(0x0, 0xC, 0x160)


def param_bytes(params: list, args: list) -> dict[int, int | None]:
    """Each byte of the parameter space -> its value (None: unknown), from the PTX's
    parameters (name, size, align) and one value per parameter."""
    out: dict[int, int | None] = {}
    off = 0
    for (_, size, align), v in zip(params, args):
        off = (off + align - 1) // align * align
        for b in range(size):
            out[off + b] = None if v is None or size > 8 else (v >> (8 * b)) & 0xFF
        off += size
    return out


class _Unknown(Exception):
    pass


@dataclass
class SassWalk:
    reached: dict  # instruction offset -> times reached (loop heads' counts)
    steps: int = 0
    stopped: tuple | None = None  # (why, offset)
    assumed: list = field(default_factory=list)


@functools.lru_cache(maxsize=8192)
def _operand(op: str) -> tuple:
    """An operand as (kind, value, negated, inverted, absolute): kind "reg" (a register's
    name), "pair" (R4.64), "const" (a byte offset in bank 0), "imm" or "unknown"."""
    op = op.replace(".reuse", "")
    neg, inv = op.startswith("-"), op.startswith("~")
    op = op.lstrip("-~")
    absolute = op.startswith("|")
    op = op.strip("|")
    if op.endswith(".64"):
        return ("pair", op[:-3], neg, inv, absolute)
    if re.match(r"^(U?R\d+|RZ|URZ|SRZ)$", op):
        return ("reg", op, neg, inv, absolute)
    m = _CONST.match(op)
    if m is not None:
        return ("const", 0 if m.group(1) in ("RZ", "URZ") else int(m.group(1), 16), neg, inv,
                absolute)
    if re.match(r"^0x[0-9a-fA-F]+$|^\d+$", op):
        return ("imm", int(op, 0), neg, inv, absolute)
    return ("unknown", op, neg, inv, absolute)


def _split(ops: str) -> list[str]:
    return [o.strip() for o in ops.split(",")] if ops.strip() else []


def _lut(lut: int, a: int, b: int, c: int, mask: int) -> int:
    out = 0
    for i in range(8):
        if lut >> i & 1:
            out |= ((a if i & 4 else ~a) & (b if i & 2 else ~b) & (c if i & 1 else ~c))
    return out & mask


def walk(instructions, heads: set, arch: str, params: list, args: list, thread: Thread,
         loops=(), *, max_steps: int = MAX_STEPS) -> SassWalk:
    """Follow one function's SASS (``SassInstruction`` list, padding left out) for one
    thread. ``heads``: the offsets whose arrivals are counted (the loops' heads); ``params``:
    the PTX's (name, size, align) per parameter; ``args``: one value per parameter;
    ``loops``: ``inspect.loops.Loop`` records, to tell a loop's exit from an ``if``."""
    bank = bank_for(arch)
    pbytes = param_bytes(params, args)
    dims = {bank.ntid + 4 * i: thread.ntid[i] for i in range(3)}
    dims.update({bank.nctaid + 4 * i: thread.nctaid[i] for i in range(3)})
    labels = {i.label: k for k, i in enumerate(instructions) if i.label}
    regs: dict[str, int | None] = {}
    preds: dict[str, int | None] = {}
    out = SassWalk({h: 0 for h in heads})
    special = {"tid": thread.tid, "ctaid": thread.ctaid}

    def const(off: int, width: int) -> int:
        v = 0
        for b in range(width):
            o = off + b
            if o - bank.params in pbytes:
                x = pbytes[o - bank.params]
            else:
                base = o - o % 4
                x = (dims[base] >> (8 * (o - base))) & 0xFF if base in dims else None
            if x is None:
                raise _Unknown(off)
            v |= x << (8 * b)
        return v

    def reg(name: str, wide: bool = False) -> int:
        if name in ("RZ", "URZ", "SRZ"):
            return 0
        if not wide:
            v = regs.get(name)
            if v is None:
                raise _Unknown(name)
            return v
        m = re.match(r"^(U?R)(\d+)$", name)
        if not m:
            raise _Unknown(name)
        lo, hi = regs.get(name), regs.get(f"{m.group(1)}{int(m.group(2)) + 1}")
        if lo is None or hi is None:
            raise _Unknown(name)
        return lo | hi << 32

    def val(op: str, wide: bool = False) -> int:
        kind, a, neg, inv, absolute = _operand(op)
        if kind == "reg":
            v = reg(a, wide)
        elif kind == "pair":
            v = reg(a, True)
        elif kind == "const":
            v = const(a, 8 if wide else 4)
        elif kind == "imm":
            v = a
        else:
            raise _Unknown(op)
        if absolute:
            v = -v if v >> (63 if wide else 31) & 1 else v
        if inv:
            v = ~v
        if neg:
            v = -v
        return v & (M64 if wide else M32)

    def pred(op: str) -> int:
        neg = op.startswith("!")
        op = op.lstrip("!")
        if op in ("PT", "UPT"):
            v = 1
        else:
            v = preds.get(op)
            if v is None:
                raise _Unknown(op)
        return v ^ 1 if neg else v

    def put(name: str, v: int | None, wide: bool = False) -> None:
        if name in ("RZ", "URZ", "PT", "UPT"):
            return
        if not wide:
            regs[name] = None if v is None else v & M32
            return
        m = re.match(r"^(U?R)(\d+)$", name)
        if m:
            hi = f"{m.group(1)}{int(m.group(2)) + 1}"
            regs[name] = None if v is None else v & M32
            regs[hi] = None if v is None else (v >> 32) & M32
    code = decode(instructions)
    k, steps = 0, 0
    while 0 <= k < len(code):
        offset, guard, base, parts, ops, handler, target, clobbers = code[k]
        if offset in out.reached:
            out.reached[offset] += 1
        steps += 1
        if steps > max_steps:
            out.stopped = (f"followed for {max_steps} instructions without ending", offset)
            break
        if guard is not None:
            p = 1 if guard[1] in ("PT", "UPT") else preds.get(guard[1])
            if p is None:
                if base == "BRA":
                    t = labels.get(target)
                    dest = instructions[t].offset if t is not None else -1
                    inner = [lp for lp in loops if lp.contains(offset)]
                    inner = max(inner, key=lambda lp: lp.head) if inner else None
                    if dest < offset or (inner and not inner.contains(dest)):
                        out.stopped = ("its exit depends on values read from memory", offset)
                        break
                    out.assumed.append(offset)
                elif base == "EXIT":
                    out.stopped = ("whether the thread exits depends on values read from "
                                   "memory", offset)
                    break
                else:
                    _clear(clobbers, regs, preds)
                k += 1
                continue
            if p == guard[0]:
                k += 1
                continue
        if base in ("BRA", "JMP"):
            t = labels.get(target)
            if t is None:
                out.stopped = ("a branch nvstage cannot follow", offset)
                break
            k = t
            continue
        if base == "CALL":
            # A call (the slow path of an IEEE division or square root) is stepped over:
            # by the ABI the caller keeps nothing it needs after the call in the registers
            # the callee may write, and its result is floating-point work.
            out.assumed.append(offset)
            k += 1
            continue
        if base in ("EXIT", "RET", "KILL", "BRX", "JMX"):
            if base != "EXIT":
                out.stopped = (f"{base} is not followed", offset)
            break
        if handler is None:
            _clear(clobbers, regs, preds)
        else:
            try:
                handler(parts, ops, val, pred, put, preds, special)
            except (_Unknown, ValueError, IndexError, KeyError, ZeroDivisionError):
                _clear(clobbers, regs, preds)
        k += 1
    out.steps = steps
    return out


_DECODED: dict = {}


def decode(instructions) -> list:
    """Each instruction as (offset, guard (negated, predicate) or None, base opcode, parts,
    operands, handler or None, branch target, registers and predicates it writes), once
    per listing."""
    key = id(instructions)
    hit = _DECODED.get(key)
    if hit is not None and hit[0] is instructions:
        return hit[1]
    out = []
    for ins in instructions:
        text = ins.text.rstrip(" ;")
        g = _PRED.match(text)
        body = text[g.end():] if g else text
        mnemonic, _, rest = body.partition(" ")
        ops = _split(rest)
        parts = tuple(mnemonic.split("."))
        base = parts[0]
        op = base[1:] if base.startswith("U") and base[1:] in _OPS else base
        m = _TARGET.search(text) if base in ("BRA", "JMP") else None
        out.append((ins.offset, (g.group(1) == "!", g.group(2)) if g else None, base, parts,
                    ops, _OPS.get(op), m.group(1) if m else None, _writes(ops, parts)))
    if len(_DECODED) > 16:
        _DECODED.clear()
    _DECODED[key] = (instructions, out)
    return out


def _clear(clobbers, regs, preds) -> None:
    for name in clobbers:
        if name[0] in "PU" and re.match(r"^U?P\d+$", name):
            preds[name] = None
        else:
            regs[name] = None


def _width(parts) -> int:
    """Registers a load or move writes: 1, or 2/4 for .64/.128."""
    return 4 if "128" in parts else 2 if "64" in parts else 1


def _writes(ops, parts) -> tuple[str, ...]:
    """What an instruction writes, made unknown when it is not followed: its destination (a
    register, or a pair or quad for .64/.128 and wide multiplies) and predicate outputs."""
    out = []
    for o in ops[:2]:
        o = o.replace(".reuse", "").lstrip("!")
        if re.match(r"^U?P\d+$", o):
            out.append(o)
        elif (m := re.match(r"^(U?R)(\d+)$", o)) is not None:
            n = (2 if "WIDE" in parts else 1) if parts[0] in ("IMAD", "UIMAD") else \
                _width(parts)
            out += [f"{m.group(1)}{int(m.group(2)) + j}" for j in range(n)]
            break
        else:
            break
    return tuple(out)


def _signed(v: int, bits: int = 32) -> int:
    return v - (1 << bits) if v >> (bits - 1) & 1 else v


def _mov(parts, ops, val, pred, put, preds, special):
    put(ops[0], val(ops[1]))


def _s2r(parts, ops, val, pred, put, preds, special):
    s = _SPECIAL.get(ops[1])
    if s is None:
        if ops[1] == "SR_LANEID":
            put(ops[0], special["tid"][0] % 32)
            return
        raise _Unknown(ops[1])
    put(ops[0], special[s[0]][s[1]])


def _cs2r(parts, ops, val, pred, put, preds, special):
    if ops[1] != "SRZ":
        raise _Unknown(ops[1])
    put(ops[0], 0, wide="64" in parts)


def _ldc(parts, ops, val, pred, put, preds, special):
    wide = "64" in parts
    put(ops[0], val(ops[1], wide), wide=wide)


def _outputs(ops):
    """Split an instruction's operands into its predicate outputs after the destination."""
    dst, i, outs = ops[0], 1, []
    while i < len(ops) and re.match(r"^!?U?P[T\d]+$", ops[i]):
        outs.append(ops[i])
        i += 1
    return dst, outs, ops[i:]


def _iadd3(parts, ops, val, pred, put, preds, special):
    dst, outs, src = _outputs(ops)
    carries = 0
    if "X" in parts:
        carries = sum(pred(p) for p in src[3:])
    total = sum(val(s) for s in src[:3]) + carries
    put(dst, total)
    for n, p in enumerate(outs):
        if p not in ("PT", "UPT"):
            preds[p] = 1 if total >> (32 + n) & 1 else 0


def _viadd(parts, ops, val, pred, put, preds, special):
    put(ops[0], sum(val(s) for s in ops[1:3]))


def _imad(parts, ops, val, pred, put, preds, special):
    dst, outs, src = _outputs(ops)
    a, b = val(src[0]), val(src[1])
    if "U32" not in parts and ("HI" in parts or "WIDE" in parts):
        a, b = _signed(a), _signed(b)
    product = a * b
    if "HI" in parts:
        total = (product >> 32) + val(src[2])
        put(dst, total)
    elif "WIDE" in parts:
        total = product + val(src[2], wide=True)
        put(dst, total & M64, wide=True)
    else:
        carry = sum(pred(p) for p in src[3:]) if "X" in parts else 0
        total = product + val(src[2]) + carry
        put(dst, total)
    for p in outs:
        if p not in ("PT", "UPT"):
            preds[p] = 1 if (total >> (64 if "WIDE" in parts else 32)) & 1 else 0


def _lea(parts, ops, val, pred, put, preds, special):
    dst, outs, src = _outputs(ops)
    if "HI" in parts:
        a = val(src[0])
        if "SX32" in parts:
            lo, hi = a, (M32 if a >> 31 & 1 else 0)
            shift = val(src[2])
            rest = src[3:]
        else:
            hi, shift, rest = val(src[2]), val(src[3]), src[4:]
            lo = a
        part = (((hi << 32) | lo) << shift) >> 32
        total = part + val(src[1]) + (sum(pred(p) for p in rest) if "X" in parts else 0)
    else:
        total = (val(src[0]) << val(src[2])) + val(src[1])
        if "X" in parts:
            total += sum(pred(p) for p in src[3:])
    put(dst, total)
    for p in outs:
        if p not in ("PT", "UPT"):
            preds[p] = 1 if total >> 32 & 1 else 0


def _shf(parts, ops, val, pred, put, preds, special):
    lo, sh, hi = val(ops[1]), val(ops[2]) & 0x3F, val(ops[3])
    v = hi << 32 | lo
    if "S32" in parts or "S64" in parts:
        v = _signed(v, 64)
    v = (v << sh) if "L" in parts else (v >> sh)
    put(ops[0], (v >> 32) if "HI" in parts else v)


def _lop3(parts, ops, val, pred, put, preds, special):
    if re.match(r"^U?P[T\d]+$", ops[0]):  # LOP3.LUT P0, R3, ...: the predicate comes first
        outs, dst, src = [ops[0]], ops[1], ops[2:]
    else:
        dst, outs, src = _outputs(ops)
    r = _lut(val(src[3]), val(src[0]), val(src[1]), val(src[2]), M32)
    put(dst, r)
    for p in outs:
        if p not in ("PT", "UPT"):
            preds[p] = 1 if r else 0


def _plop3(parts, ops, val, pred, put, preds, special):
    a, b, c = pred(ops[2]), pred(ops[3]), pred(ops[4])
    for dst, lut in ((ops[0], val(ops[5])), (ops[1], val(ops[6]))):
        if dst not in ("PT", "UPT"):
            preds[dst] = _lut(lut, a, b, c, 1)


_CMP = {"EQ": lambda a, b: a == b, "NE": lambda a, b: a != b, "LT": lambda a, b: a < b,
        "LE": lambda a, b: a <= b, "GT": lambda a, b: a > b, "GE": lambda a, b: a >= b}
_BOOL = {"AND": lambda x, y: x & y, "OR": lambda x, y: x | y, "XOR": lambda x, y: x ^ y}


def _isetp(parts, ops, val, pred, put, preds, special):
    cmp = next(p for p in parts if p in _CMP)
    bop = next(p for p in parts if p in _BOOL)
    a, b = val(ops[2]), val(ops[3])
    if "U32" not in parts:
        a, b = _signed(a), _signed(b)
    if "EX" in parts:  # the high words, with the low words' compare as the last operand
        low = pred(ops[5])
        if cmp in ("EQ", "NE"):
            r = (a == b and low) if cmp == "EQ" else (a != b or low)
        else:
            r = _CMP[cmp.replace("E", "T") if cmp in ("GE", "LE") else cmp](a, b) or \
                (a == b and low)
    else:
        r = _CMP[cmp](a, b)
    c = pred(ops[4])
    for dst, v in ((ops[0], int(r)), (ops[1], int(not r))):
        if dst not in ("PT", "UPT"):
            preds[dst] = _BOOL[bop](v, c)


def _sel(parts, ops, val, pred, put, preds, special):
    put(ops[0], val(ops[1]) if pred(ops[3]) else val(ops[2]))


def _imnmx(parts, ops, val, pred, put, preds, special):
    a, b = val(ops[1]), val(ops[2])
    if "U32" not in parts:
        a, b = _signed(a), _signed(b)
    put(ops[0], min(a, b) if pred(ops[3]) else max(a, b))


def _iabs(parts, ops, val, pred, put, preds, special):
    put(ops[0], abs(_signed(val(ops[1]))))


def _nop(parts, ops, val, pred, put, preds, special):
    return None


def _hfma2(parts, ops, val, pred, put, preds, special):
    if ops[1:3] == ["-RZ", "RZ"]:  # ptxas's zeroing idiom
        put(ops[0], 0)
        return
    raise _Unknown("HFMA2")


_OPS = {"MOV": _mov, "MOV32I": _mov, "S2R": _s2r, "S2UR": _s2r, "CS2R": _cs2r,
        "LDC": _ldc, "LDCU": _ldc, "IADD3": _iadd3, "IADD": _viadd, "VIADD": _viadd,
        "IADD32I": _viadd, "IMAD": _imad, "LEA": _lea, "SHF": _shf, "LOP3": _lop3,
        "PLOP3": _plop3, "ISETP": _isetp, "SEL": _sel, "IMNMX": _imnmx, "VIMNMX": _imnmx,
        "IABS": _iabs, "HFMA2": _hfma2, "BSSY": _nop, "BSYNC": _nop, "WARPSYNC": _nop,
        "BAR": _nop, "NOP": _nop, "MEMBAR": _nop, "DEPBAR": _nop, "R2UR": _mov}
