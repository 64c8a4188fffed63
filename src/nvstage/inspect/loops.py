"""The loops of a SASS function, and how many times each instruction runs per thread.

A loop is a branch back to an earlier label: its body runs from that label to the branch.
Several branches back to one label are one loop (the farthest is its end). A branch to itself
is the trap nvdisasm lists after the last ``EXIT``, never reached: not a loop. Loops nest by
containment; an instruction inside loops whose trip counts are t1, t2, ... runs t1 x t2 x ...
times per thread. Static SASS cannot tell a trip count: the caller says it (a workload's cost
file, or derived from its declared FLOPs), one figure for every loop or one per loop in the
order of their first instruction.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

_TARGET = re.compile(r"`\((\.L\w+)\)")


@dataclass(frozen=True)
class Loop:
    head: int  # offset of the body's first instruction (the label branched to)
    tail: int  # offset of the backward branch that ends the body
    label: str
    depth: int  # 1 for an outermost loop, 2 for one inside it, ...

    def contains(self, offset: int) -> bool:
        return self.head <= offset <= self.tail

    def to_json(self) -> dict:
        return {"head": self.head, "tail": self.tail, "label": self.label,
                "depth": self.depth}


def branch_target(text: str) -> str | None:
    """The label a ``BRA`` names ("BRA `(.L_x_8)" -> ".L_x_8"), else None."""
    m = _TARGET.search(text)
    return m.group(1) if m else None


def find_loops(instructions) -> tuple[Loop, ...]:
    """Every loop of one function's instructions (``SassInstruction``: offset, opcode, text,
    label), ordered by the offset of their first instruction."""
    labels = {i.label: i.offset for i in instructions if i.label}
    ends: dict[str, int] = {}
    for i in instructions:
        if i.opcode != "BRA":
            continue
        target = branch_target(i.text)
        if target is None or target not in labels:
            continue
        head = labels[target]
        if head < i.offset:  # == : the branch to itself after the last EXIT
            ends[target] = max(ends.get(target, head), i.offset)
    spans = sorted(((labels[t], end, t) for t, end in ends.items()), key=lambda s: (s[0], -s[1]))
    # A loop's depth counts the other loops that contain it: in this order, those before it
    # whose tail is not before its own (kept sorted: a crafted listing with 50,000 loops took
    # minutes when every pair was compared).
    out = []
    tails: list[int] = []
    same: dict[tuple[int, int], int] = {}
    for head, tail, label in spans:
        outer = len(tails) - bisect.bisect_left(tails, tail) - same.get((head, tail), 0)
        out.append(Loop(head, tail, label, 1 + outer))
        bisect.insort(tails, tail)
        same[(head, tail)] = same.get((head, tail), 0) + 1
    return tuple(out)


def trip_list(loops: Sequence[Loop], trips) -> tuple[float, ...]:
    """One trip count per loop from ``trips``: a number for every loop alike, or a sequence
    with one per loop. Raises ``ValueError`` naming the count when a sequence does not fit."""
    if isinstance(trips, (int, float)):
        return tuple(float(trips) for _ in loops)
    trips = tuple(float(t) for t in trips)
    if len(trips) != len(loops):
        raise ValueError(f"{len(trips)} trip count{'s' if len(trips) != 1 else ''} for "
                         f"{len(loops)} loop{'s' if len(loops) != 1 else ''}")
    return trips


def enclosing(offsets, loops: Sequence[Loop]) -> list[tuple[int, ...]]:
    """For each offset, the indices of the loops that hold it. Which loops hold an offset
    changes only at a loop's head or just past its tail, so it is worked out once per stretch
    between those (a walk per instruction and loop took seconds at the sizes the model reads)."""
    bounds = sorted({lp.head for lp in loops} | {lp.tail + 1 for lp in loops})
    stretch: dict[int, tuple[int, ...]] = {}
    out = []
    for off in offsets:
        s = bisect.bisect_right(bounds, off)
        if s not in stretch:
            stretch[s] = tuple(k for k, lp in enumerate(loops) if lp.contains(off))
        out.append(stretch[s])
    return out


def multiplicities(instructions, loops: Sequence[Loop], trips) -> list[float]:
    """How many times each instruction runs per thread: the product of the trip counts of the
    loops that hold it (1 outside every loop)."""
    per_loop = trip_list(loops, trips)
    product: dict[tuple[int, ...], float] = {}
    out = []
    for ks in enclosing((i.offset for i in instructions), loops):
        if ks not in product:
            product[ks] = math.prod(per_loop[k] for k in ks)
        out.append(product[ks])
    return out
