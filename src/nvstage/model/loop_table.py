"""Each loop of a kernel as compiled, and its trip count derived from the code: the loop table
``nvstage model`` prints and its ``--json`` carries (``per_launch[].code.loops``).

A loop of the SASS (``inspect.loops``) is paired with a loop of the PTX it was compiled from:
in order, where both have the same loops nested alike (ptxas keeps the loops it is given), else
by the source line of the branch that closes it. The PTX is followed with the workload's values
(``model.ptx_walk``) for a few threads: the first and last lanes of the first warp, the block's
last thread, and the first and last threads of the grid's last block; a loop's trip count is how
many times the longest of them reached its head, per time it reached the head of the loop
around it (a warp runs its longest lane). Its shape, from the PTX: a body made of N copies of
the same work is unrolled by N; a second loop closed on the same source line, or copies of the
body's work outside the loop, are its remainder.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from nvstage.inspect.mix import MEMORY, classify
from nvstage.model.ptx_walk import (Insn, PtxFunction, Thread, single_term, trip_expression,
                                    walk)
from nvstage.model.sass_walk import walk as walk_sass
from nvstage.run.workload.expr import ExprError, eval_int_expr

# What counts as the work of a loop body when telling copies apart: memory and arithmetic
# on data, not the loop's own index arithmetic.
_WORK = ("ld", "st", "fma", "add", "mul", "sub", "ldmatrix", "mma", "wmma", "atom", "red",
         "cp", "shfl", "ex2", "rcp", "sqrt", "rsqrt", "max", "min")


@dataclass(frozen=True)
class LoopRow:
    """One SASS loop: where it is, how it was shaped, and its trip count."""

    index: int  # in the order of the SASS loops' first instruction (what trips = [...] follows)
    head: int  # SASS offsets
    tail: int
    depth: int
    line: int | None  # the source line of the branch that closes it
    shape: str  # "as written", "unrolled by 4", "remainder of loop 2", ...
    trips: float | None  # per entry of the loop around it; None: not derived
    why: str  # how the count was found, or why it could not be
    expression: str | None = None  # the count in the launch's names, where derivable

    @property
    def sass_range(self) -> str:
        return f"{self.head:#06x}-{self.tail:#06x}"

    def to_json(self) -> dict:
        return {"index": self.index, "head": self.head, "tail": self.tail,
                "sass": self.sass_range, "depth": self.depth, "line": self.line,
                "shape": self.shape, "trips": self.trips, "derived": self.trips is not None,
                "expression": self.expression, "how": self.why}


def threads(block: tuple[int, int, int], grid: tuple[int, int, int]) -> list[Thread]:
    """The threads followed: lanes 0 and 31 of block 0's first warp, block 0's last thread,
    and the first and last threads of the last block."""
    def tid(linear: int) -> tuple[int, int, int]:
        x, y = block[0], block[1]
        return (linear % x, linear // x % y, linear // (x * y))

    n = block[0] * block[1] * block[2]
    last_block = (grid[0] - 1, grid[1] - 1, grid[2] - 1)
    picks = [((0, 0, 0), 0), ((0, 0, 0), min(31, n - 1)), ((0, 0, 0), n - 1),
             (last_block, 0), (last_block, n - 1)]
    seen, out = set(), []
    for cta, lin in picks:
        if (cta, lin) not in seen:
            seen.add((cta, lin))
            out.append(Thread(tid(lin), block, cta, grid))
    return out


def _parents(spans) -> list[int | None]:
    out = []
    for k, (h, t, _) in enumerate(spans):
        around = [j for j, (h2, t2, _) in enumerate(spans) if j != k and h2 <= h and t <= t2]
        out.append(max(around, key=lambda j: spans[j][0]) if around else None)
    return out


def _depths(parents) -> list[int]:
    out = []
    for p in parents:
        d = 1
        while p is not None:
            d += 1
            p = parents[p]
        out.append(d)
    return out


def ptx_trips(fn: PtxFunction, args: list, block, grid) -> tuple[list, list]:
    """Per PTX loop (``fn.loops()`` order): (trips or None, how)."""
    spans = fn.loops()
    parents = _parents(spans)
    most = [0] * len(spans)
    bad: dict[int, str] = {}
    for th in threads(block, grid):
        w = walk(fn, args, th)
        for k, (_, _, label) in enumerate(spans):
            most[k] = max(most[k], w.reached.get(label, 0))
        if w.stopped:
            why, line, at = w.stopped
            for k, (h, t, _) in enumerate(spans):
                if h <= at <= t or h > at:
                    bad.setdefault(k, f"{why} (line {line})" if line else why)
            if why.startswith("followed for"):
                break
    trips, how = [], []
    for k in range(len(spans)):
        if k in bad:
            trips.append(None)
            how.append(bad[k])
            continue
        p = parents[k]
        outer = most[p] if p is not None else 1
        trips.append(most[k] / outer if outer else 0.0)
        how.append("PTX followed")
    return trips, how


def _work(ins: Insn) -> bool:
    return ins.base in _WORK and (ins.kind == "f" or ins.base in ("ld", "st", "ldmatrix",
                                                                    "mma", "wmma", "atom",
                                                                    "red", "cp", "shfl"))


def _period(seq: list) -> int:
    """The largest N such that ``seq`` is N copies of one block (1 if none)."""
    n = len(seq)
    for copies in range(n, 1, -1):
        if n % copies == 0:
            size = n // copies
            if all(seq[i] == seq[i % size] for i in range(n)):
                return copies
    return 1


def _own_work(fn: PtxFunction, spans, parents) -> tuple[dict, list, list[list]]:
    """(body index -> its innermost PTX loop, every work instruction, each loop's own work
    as (op, line) pairs: outside the loops nested in it and their remainder copies)."""
    inner = [[j for j, p in enumerate(parents) if p == k] for k in range(len(spans))]
    innermost = {}
    for k, (h, t, _) in enumerate(spans):  # by head: an inner loop overwrites its span
        for j in range(h, t + 1):
            innermost[j] = k
    work = [i for i in fn.body if isinstance(i, Insn) and _work(i)]
    body_work: list[list] = [[] for _ in spans]
    for i in work:
        k = innermost.get(i.index)
        if k is not None:
            body_work[k].append((i.op, i.line))
    # An inner loop's remainder copies sit in the loop around it: not that loop's own work.
    for k in range(len(spans)):
        mine = {ln for j in inner[k] for _, ln in body_work[j]}
        body_work[k] = [w for w in body_work[k] if w[1] not in mine]
    return innermost, work, body_work


def shapes(fn: PtxFunction) -> list[tuple]:
    """How each PTX loop was shaped (``fn.loops()`` order): (words,), or ("remainder of loop",
    PTX loop) or ("unrolled by", N, its remainder's PTX loop)."""
    spans = fn.loops()
    parents = _parents(spans)
    innermost, work, body_work = _own_work(fn, spans, parents)
    lines = [fn.body[t].line if isinstance(fn.body[t], Insn) else None for _, t, _ in spans]
    out = []
    for k, (h, t, _) in enumerate(spans):
        n = _period(body_work[k])
        sibling = [j for j in range(len(spans)) if j != k and lines[j] == lines[k]
                   and lines[k] is not None and parents[j] == parents[k]]
        if sibling and any(len(body_work[j]) > len(body_work[k]) for j in sibling):
            j = max(sibling, key=lambda j: len(body_work[j]))
            out.append(("remainder of loop", j))
            continue
        if n > 1:
            work_lines = {ln for _, ln in body_work[k]}
            outside = [i for i in work if i.line in work_lines
                       and innermost.get(i.index) == parents[k]]
            if sibling:
                out.append(("unrolled by", n, sibling[0]))
                continue
            elif outside:
                copies = len(outside) // max(len(body_work[k]) // n, 1)
                rest = f", remainder: {copies} cop{'y' if copies == 1 else 'ies'} outside it"
            else:
                rest = ""
            out.append((f"unrolled by {n}{rest}",))
        else:
            out.append(("as written",))
    return out


def pair(sass_loops, spans, sass_lines, ptx_lines) -> list[int | None]:
    """For each SASS loop, the index of its PTX loop (None where none is found): in order
    where both nest alike, else by the closing branch's source line."""
    ptx_depths = _depths(_parents(spans))
    if len(sass_loops) == len(spans) and [lp.depth for lp in sass_loops] == ptx_depths:
        return list(range(len(spans)))
    out, used = [], set()
    for k, line in enumerate(sass_lines):
        match = next((j for j, pl in enumerate(ptx_lines)
                      if line is not None and pl == line and j not in used), None)
        if match is not None:
            used.add(match)
        out.append(match)
    return out


def sass_trips(code, fn: PtxFunction, args: list, block, grid) -> tuple[list, list]:
    """Per SASS loop: (trips or None, how), from following the SASS (``model.sass_walk``)
    for the threads ``threads`` picks."""
    loops = code.loops
    heads = {lp.head for lp in loops}
    most = dict.fromkeys(heads, 0)
    bad: dict[int, str] = {}
    lines = {i.offset: i.source for i in code.instructions}
    for th in threads(block, grid):
        w = walk_sass(code.instructions, heads, code.arch, fn.layout, args, th, loops)
        for h in heads:
            most[h] = max(most[h], w.reached[h])
        if w.stopped:
            why, at = w.stopped
            src = lines.get(at)
            where = f" (line {src.rpartition(':')[2]})" if src else ""
            for k, lp in enumerate(loops):
                if lp.contains(at) or lp.head > at:
                    bad.setdefault(k, why + where)
            if why.startswith("followed for"):
                break  # the other threads would run as long: not walked
    parents = []
    for k, lp in enumerate(loops):
        around = [j for j, o in enumerate(loops) if j != k and o.head <= lp.head
                  and lp.tail <= o.tail and o.depth < lp.depth]
        parents.append(max(around, key=lambda j: loops[j].depth) if around else None)
    trips, how = [], []
    for k, lp in enumerate(loops):
        if k in bad:
            trips.append(None)
            how.append(bad[k])
            continue
        p = parents[k]
        outer = most[loops[p].head] if p is not None else 1
        trips.append(most[lp.head] / outer if outer else 0.0)
        how.append("SASS followed")
    return trips, how


def _sass_work(code) -> list[int]:
    """Each SASS loop's own work (memory and floating-point instructions outside the loops
    nested in it), to tell an unrolled loop from its remainder."""
    loops = code.loops
    out = [0] * len(loops)
    for i in code.instructions:
        holders = [k for k, lp in enumerate(loops) if lp.contains(i.offset)]
        if holders and classify(i.opcode, i.text) in (*MEMORY, "fp32", "fp16", "fp64",
                                                      "tensor", "sfu"):
            out[max(holders, key=lambda k: loops[k].depth)] += 1
    return out


def sass_shapes(code, lines: list) -> list[str | None]:
    """Loops ptxas made from one source loop (closed on the same line, in the same loop):
    the smallest is the remainder, the others unrolled by their work over its. None where a
    loop has no sibling."""
    loops = code.loops
    work = _sass_work(code)
    out: list[str | None] = [None] * len(loops)
    groups: dict = {}
    for k, lp in enumerate(loops):
        if lines[k] is not None:
            around = tuple(j for j, o in enumerate(loops) if j != k and o.contains(lp.head)
                           and o.depth < lp.depth)
            groups.setdefault((lines[k], around), []).append(k)
    for ks in groups.values():
        if len(ks) < 2:
            continue
        small = min(ks, key=lambda k: work[k])
        others = [k for k in ks if k != small]
        for k in others:
            n = round(work[k] / work[small]) if work[small] else 0
            out[k] = (f"unrolled by {n} (its body {n} of loop {small + 1}'s)" if n > 1
                      else f"a copy of loop {small + 1}")
        out[small] = "remainder of loop" + ("s " if len(others) > 1 else " ") + \
            " and ".join(str(k + 1) for k in others)
    return out


def loop_table(code, fn: PtxFunction | None, args: list | None, block, grid,
               names: dict | None = None) -> list[LoopRow]:
    """The rows of one kernel (``code``: a ``model.kernelcode.KernelCode``; ``fn``: its PTX,
    None where there is none; ``args``: one value per PTX parameter, None where unknown;
    ``names``: PTX parameter -> what the workload passes, for the counts' expressions).
    Trip counts from the SASS where it can be followed, else from the PTX's loop paired with
    it; shapes from the SASS's loops closed on one line, else from the PTX."""
    loops = code.loops
    sass_lines = []
    for lp in loops:
        tail = next((i for i in code.instructions if i.offset == lp.tail), None)
        src = tail.source if tail is not None else None
        sass_lines.append(int(src.rpartition(":")[2]) if src and src[-1].isdigit() else None)
    if fn is None or args is None:
        why = "no PTX to follow" if fn is None else "the launch's arguments are not known"
        return [LoopRow(k + 1, lp.head, lp.tail, lp.depth, sass_lines[k], "", None, why)
                for k, lp in enumerate(loops)]
    spans = fn.loops()
    ptx_lines = [fn.body[t].line for _, t, _ in spans]
    paired = pair(loops, spans, sass_lines, ptx_lines)
    in_order = paired == list(range(len(spans)))
    s_trips, s_how = sass_trips(code, fn, args, block, grid)
    # The PTX walk: for the expressions' check and as a fallback, not where the SASS walk
    # already ran out of steps (the PTX's would too).
    p_trips, p_how = (ptx_trips(fn, args, block, grid)
                      if any(j is not None for j in paired)
                      and not any(h.startswith("followed for") for h in s_how) else ([], []))
    ptx_shape = shapes(fn)
    shape_of = ptx_shape.__getitem__
    fixed = fixed_dims(block, grid)
    values = {p: v for p, v in zip(fn.params, args) if isinstance(v, int)}
    ptx_work = _own_work(fn, spans, _parents(spans))[2]
    sass_work = _sass_work(code)
    by_sass = sass_shapes(code, [ptx_lines[paired[k]] if paired[k] is not None
                                 and ptx_lines[paired[k]] is not None else sass_lines[k]
                                 for k in range(len(loops))])
    sass_of = {j: k for k, j in enumerate(paired) if j is not None}

    def said(s: tuple) -> str:
        if len(s) == 1:
            return s[0]
        other = sass_of.get(s[-1])
        name = f"loop {other + 1}" if other is not None else "a loop ptxas removed"
        return f"remainder of {name}" if len(s) == 2 else f"unrolled by {s[1]}, remainder: {name}"

    rows = []
    for k, lp in enumerate(loops):
        j = paired[k]
        line = ptx_lines[j] if j is not None and ptx_lines[j] is not None else sass_lines[k]
        t, how = s_trips[k], s_how[k]
        # The PTX's count stands in only where ptxas kept the PTX's loops one for one.
        if t is None and in_order and p_trips and p_trips[j] is not None:
            t, how = p_trips[j], "PTX followed (ptxas kept its loops)"
        if t is not None and not math.isfinite(t):
            t = None
        shape = by_sass[k] or (said(shape_of(j)) if j is not None else "as written")
        # The PTX loop's expression, where the SASS loop runs as often as it does (or, a loop
        # ptxas unrolled by U with its remainder outside it, a U-th as often) and the
        # expression, evaluated for the threads followed, gives the count they ran.
        expr, unroll = None, 1
        if j is not None and t is not None and p_trips and p_trips[j] is not None:
            if p_trips[j] != t and by_sass[k] is None and ptx_work[j] and \
                    sass_work[k] % len(ptx_work[j]) == 0:
                unroll = sass_work[k] // len(ptx_work[j])
            count = _counted(fn, spans, j, ptx_shape, ptx_work)
            if (p_trips[j] == t or unroll > 1) and \
                    _holds(count, values, fixed, (block, grid), (t, unroll)):
                expr = count({**(names or {}), **fixed})
                if unroll > 1:
                    expr = f"{expr} // {unroll}"
                    shape = (f"{shape}; then by {unroll} by ptxas" if shape != "as written"
                             else f"unrolled by {unroll} by ptxas, remainder outside it")
        rows.append(LoopRow(k + 1, lp.head, lp.tail, lp.depth, line, shape, t,
                            how.removesuffix(f" (line {line})"), expr))
    return rows


def fixed_dims(block, grid) -> dict:
    """The launch's dimensions of size 1, as values for the counts' expressions: their
    index is 0, so an expression reads ``threadIdx.x``, not a 3-D block's linear index."""
    out: dict = {}
    for size, index, dims in (("%ntid", "%tid", block), ("%nctaid", "%ctaid", grid)):
        for d, n in zip("xyz", dims):
            if n == 1:
                out[f"{size}.{d}"], out[f"{index}.{d}"] = 1, 0
    return out


_DIM = re.compile(r"\b(threadIdx|blockIdx|blockDim|gridDim)\.([xyz])\b")


def _counted(fn: PtxFunction, spans, j: int, ptx_shape: list, work: list):
    """PTX loop ``j``'s count as a function of the names to write it in: its own counted
    loop's, or, a loop LLVM unrolled by N (its work over its remainder loop's) after a
    remainder loop counting down from ``P % N`` (the source loop's P passes), ``P // N``."""
    rem = next((r for r, s in enumerate(ptx_shape) if s == ("remainder of loop", j)), None)
    n = len(work[j]) // len(work[rem]) if rem is not None and work[rem] and \
        len(work[j]) % len(work[rem]) == 0 else 0

    def count(names: dict) -> str | None:
        text = trip_expression(fn, spans[j], names)
        if text is None and n > 1:
            rest, tail = trip_expression(fn, spans[rem], names), f" % {n}"
            if rest and rest.endswith(tail) and single_term(rest.removesuffix(tail)):
                text = f"{rest.removesuffix(tail)} // {n}"
        return text
    return count


def _holds(count, values: dict, fixed: dict, launch: tuple, want: tuple) -> bool:
    """Whether the loop's expression (``count``: its text for given names), with the launch's
    values (``values``: PTX parameter -> value) and floor-divided by the unroll (``want``:
    (trips, unroll)), gives the trips for the longest of the threads followed: an expression
    is shown only where it is the count."""
    text = count({**values, **fixed})
    if text is None:
        return False
    trips, unroll = want
    text = f"({text}) // {unroll}"
    longest = 0
    for th in threads(*launch):
        env = {f"{name}_{d}": dims[i] for name, dims in (
            ("threadIdx", th.tid), ("blockDim", th.ntid), ("blockIdx", th.ctaid),
            ("gridDim", th.nctaid)) for i, d in enumerate("xyz")}
        try:
            got = eval_int_expr(_DIM.sub(r"\1_\2", text), env)
        except (ExprError, ZeroDivisionError, OverflowError):
            return False
        longest = max(longest, got)
    return longest == trips
