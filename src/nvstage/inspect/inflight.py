"""Global loads in flight per warp, read from SASS: the loads a warp issues before it first needs
one of their results.

A warp issues its instructions in order. A global load does not stall it; the first
instruction that reads a register the load writes (or overwrites it) does, until the load's
data is back. So the loads issued between two such stalls travel together: a *batch*, which
costs the warp one memory round trip. Little's law then says how many bytes the GPU keeps in
flight: resident warps x loads per batch x bytes per load.

The walk is linear over the listing. Batches never cross a loop boundary (a loop's head or its
backward branch): a batch inside a loop runs once per iteration, one outside once per thread.
Loads still outstanding at a boundary close their batch there (a loop that prefetches the next
iteration's data is counted one round trip per iteration, which overstates it). Forward
branches are read through, as if both paths ran. A load whose address depends on an earlier
load (pointer chasing) reads that load's register first, so it starts a batch of its own.

Registers are matched by name: ``R4.64`` in an address is R4 and R5; a load or store of 64 or
128 bits covers 2 or 4 registers from its first; uniform registers (``UR4``) and ``RZ`` are
not general registers. Loads are the ``global_load`` class of ``inspect.mix`` that write a
register (``LDG``, generic ``LD``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from nvstage.inspect.loops import Loop, enclosing, find_loops
from nvstage.inspect.mix import MEMORY, access_bits, classify

_REG = re.compile(r"(?<![A-Za-z0-9_])R(\d+)(\.64|\.128)?")
_PRED = re.compile(r"^@!?U?P[T\d]+\s+")
_LOADS = frozenset({"LDG", "LD"})
_STORES = ("global_store", "shared_store", "local", "atomic")


@dataclass(frozen=True)
class Batch:
    """Global loads a warp has in flight together."""

    first: int  # offset of the first load
    wait: int | None  # offset of the instruction that waits for them (None: nothing does)
    loads: int  # load instructions (each one per thread of the warp)
    bytes_per_thread: int
    loop: int | None  # index into ``InFlight.loops`` of the innermost loop holding it

    def to_json(self) -> dict:
        return {"first": self.first, "wait": self.wait, "loads": self.loads,
                "bytes_per_thread": self.bytes_per_thread, "loop": self.loop}


@dataclass(frozen=True)
class InFlight:
    """One function's batches of global loads and the loops they sit in."""

    batches: tuple[Batch, ...]
    loops: tuple[Loop, ...]

    @property
    def max_loads(self) -> int:
        """The most loads a warp keeps in flight at once (0: no global load)."""
        return max((b.loads for b in self.batches), default=0)

    def round_trips(self, trips_per_loop: Sequence[float] = ()) -> float:
        """Memory round trips per thread: each batch once, times the trip counts of the loops
        that hold it (``trips_per_loop``: one per loop, in order; 1 for a loop not given)."""
        times = self._times(trips_per_loop)
        return sum(times(b) for b in self.batches)

    def bytes_per_round_trip(self, trips_per_loop: Sequence[float] = ()) -> float:
        """Bytes per thread per round trip, averaged over the batches as they run."""
        trips = self.round_trips(trips_per_loop)
        times = self._times(trips_per_loop)
        moved = sum(b.bytes_per_thread * times(b) for b in self.batches)
        return moved / trips if trips else 0.0

    def loads_per_round_trip(self, trips_per_loop: Sequence[float] = ()) -> float:
        """Loads per batch, averaged over the batches as they run."""
        trips = self.round_trips(trips_per_loop)
        times = self._times(trips_per_loop)
        n = sum(b.loads * times(b) for b in self.batches)
        return n / trips if trips else 0.0

    def _times(self, trips_per_loop: Sequence[float]):
        """``times(batch)``: how often a batch runs per thread, each loop's product worked out
        once (not once per batch: a crafted listing has tens of thousands of batches)."""
        product: dict[int, float] = {}

        def times(b: Batch) -> float:
            if b.loop is None:
                return 1.0
            if b.loop not in product:
                inner = self.loops[b.loop]
                t = 1.0
                for k, lp in enumerate(self.loops):
                    if lp.head <= inner.head and inner.tail <= lp.tail:
                        t *= trips_per_loop[k] if k < len(trips_per_loop) else 1.0
                product[b.loop] = t
            return product[b.loop]

        return times

    def to_json(self) -> dict:
        return {"max_loads": self.max_loads, "batches": [b.to_json() for b in self.batches],
                "loops": [lp.to_json() for lp in self.loops]}


def _operands(text: str) -> str:
    body = _PRED.sub("", text)
    return body.split(" ", 1)[1] if " " in body else ""


def _regs(token_text: str, width: int = 1) -> set[int]:
    out: set[int] = set()
    for m in _REG.finditer(token_text):
        n = int(m.group(1))
        k = {".64": 2, ".128": 4}.get(m.group(2) or "", 1)
        out.update(range(n, n + max(k, width)))
    return out


def _referenced(i) -> set[int]:
    """Every general register an instruction reads or writes (a store's data operand at its
    access width)."""
    ops = _operands(i.text)
    cls = classify(i.opcode, i.text)
    if cls in _STORES and cls in MEMORY:
        head, sep, data = ops.rpartition(",")
        width = max(1, access_bits(_PRED.sub("", i.text)) // 32)
        return _regs(head) | _regs(data, width) if sep else _regs(ops, width)
    return _regs(ops)


def _load_dest(i) -> set[int]:
    ops = _operands(i.text)
    m = _REG.match(ops.strip())
    if not m:
        return set()
    width = max(1, access_bits(_PRED.sub("", i.text)) // 32)
    return set(range(int(m.group(1)), int(m.group(1)) + width))


def _is_load(i) -> bool:
    return i.opcode in _LOADS and classify(i.opcode, i.text) == "global_load"


def in_flight(instructions) -> InFlight:
    """The batches of global loads in one function's instructions (``SassInstruction``s, the
    padding left out)."""
    instructions = list(instructions)
    loops = find_loops(instructions)
    heads = {lp.head for lp in loops}
    tails = {lp.tail for lp in loops}
    holding = dict(zip((i.offset for i in instructions),
                       enclosing((i.offset for i in instructions), loops)))

    def innermost(offset: int) -> int | None:
        inside = holding.get(offset, ())
        return max(inside, key=lambda k: loops[k].depth) if inside else None

    batches: list[Batch] = []
    outstanding: set[int] = set()
    current: list = []

    def close(wait: int | None) -> None:
        if current:
            nbytes = sum(access_bits(_PRED.sub("", x.text)) // 8 for x in current)
            batches.append(Batch(current[0].offset, wait, len(current), nbytes,
                                 innermost(current[0].offset)))
        current.clear()
        outstanding.clear()

    for i in instructions:
        if i.offset in heads:
            close(None)  # entering a loop body (or looping back to its head)
        if outstanding and _referenced(i) & outstanding:
            close(i.offset)
        if _is_load(i):
            dest = _load_dest(i)
            current.append(i)
            outstanding.update(dest)
        if i.offset in tails:
            close(None)  # the backward branch: the next iteration starts a batch afresh
    close(None)
    return InFlight(tuple(batches), loops)
