"""Shared-memory bank conflicts and broadcasts, from the addresses a warp's lanes use.

Shared memory has 32 banks, each 32 bits wide, each serving one 32-bit word per clock; lanes
reading the same word are served together (a broadcast); a write's lanes to one word are one
write (the CUDA C++ Programming Guide, Shared Memory, compute capability 5.x and later; the
same on 6.x to 12.x). A warp's access is then served in wavefronts: at least one per 128 bytes
of distinct words it touches, and at least as many as the most distinct words one bank holds.
So a column read of ``float tile[32][32]`` (lanes 128 bytes apart: every lane on bank 0) takes
32 wavefronts where its bytes ask for one, and ``tile[32][33]`` (132 bytes apart: 32 banks) one.

The addresses come from following the kernel's PTX (``model.ptx_walk``) for the 32 lanes of the
first warp of block 0, the first few times each ``ld.shared``/``st.shared`` runs; each access
is weighed by how often the first lane runs it. Where an address depends on values read from
memory, or a lane does not get there within the walk, that access is not derived.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from nvstage.model.ptx_walk import PtxFunction, Thread, walk

BANKS = 32
BANK_BYTES = 4
WAVEFRONT_BYTES = BANKS * BANK_BYTES
SAMPLES = 4  # executions of each access compared across lanes
LANE_STEPS = 50_000  # instructions each lane is followed for (the first lane: to its end)


def wavefronts(accesses: list[tuple[int, int]]) -> int:
    """Wavefronts one warp access takes: (address, bytes) per active lane."""
    words = {w for a, n in accesses for w in range(a // BANK_BYTES,
                                                  (a + max(n, 1) - 1) // BANK_BYTES + 1)}
    per_bank: dict[int, int] = defaultdict(int)
    for w in words:
        per_bank[w % BANKS] += 1
    return max(math.ceil(len(words) * BANK_BYTES / WAVEFRONT_BYTES), max(per_bank.values()))


@dataclass(frozen=True)
class Access:
    """One ``ld.shared``/``st.shared`` of the PTX, as the first warp runs it."""

    line: int | None
    store: bool
    runs: float  # per thread (the first lane's count)
    requested: float  # wavefronts its bytes ask for (32 lanes x bytes / 128)
    served: float | None  # wavefronts it takes, averaged over the samples; None: not derived

    @property
    def ways(self) -> float | None:
        return None if self.served is None else self.served / self.requested


@dataclass(frozen=True)
class Banks:
    """A kernel's shared accesses and the factor they put on the bytes it requests."""

    accesses: tuple[Access, ...]
    note: str = ""  # why nothing was derived

    @property
    def derived(self) -> tuple[Access, ...]:
        return tuple(a for a in self.accesses if a.served is not None and a.runs)

    @property
    def factor(self) -> float | None:
        """Wavefronts served over wavefronts requested, over every derived access weighed by
        its runs; None where none is derived."""
        d = self.derived
        asked = sum(a.runs * a.requested for a in d)
        return sum(a.runs * a.served for a in d) / asked if asked else None

    @property
    def undetermined(self) -> tuple[Access, ...]:
        return tuple(a for a in self.accesses if a.served is None and a.runs)

    def worst(self) -> Access | None:
        d = [a for a in self.derived if a.ways and a.ways > 1]
        return max(d, key=lambda a: (a.ways, a.runs)) if d else None

    def words(self) -> str:
        """The explanation: the worst conflict and its line, broadcasts, what is not derived."""
        if not self.accesses:
            return ""
        if self.factor is None:
            return "bank conflicts not derived" + (f" ({self.note})" if self.note else "")
        parts = []
        w = self.worst()
        if w is not None:
            parts.append(f"{w.ways:.3g}-way bank conflicts at line {w.line}" if w.line
                         else f"{w.ways:.3g}-way bank conflicts")
        b = [a for a in self.derived if a.ways is not None and a.ways < 1]
        if b:
            lines = sorted({a.line for a in b if a.line})
            parts.append("broadcasts" + (f" at line{'s' if len(lines) > 1 else ''} "
                                         + ", ".join(map(str, lines)) if lines else ""))
        if not parts:
            parts.append("no bank conflicts")
        if self.undetermined:
            lines = sorted({a.line for a in self.undetermined if a.line})
            parts.append("not derived at line" + ("s " if len(lines) > 1 else " ")
                         + ", ".join(map(str, lines)) if lines else "some not derived")
        return "; ".join(parts)

    def to_json(self) -> dict:
        return {"factor": self.factor, "explanation": self.words(), "accesses": [
            {"line": a.line, "store": a.store, "runs_per_thread": a.runs,
             "wavefronts_requested": a.requested, "wavefronts": a.served, "ways": a.ways}
            for a in self.accesses]}


def bank_conflicts(fn: PtxFunction, args: list, block: tuple[int, int, int],
                   grid: tuple[int, int, int], warp_size: int = 32) -> Banks:
    """The shared accesses of ``fn`` run by block 0's first warp, with the workload's values."""
    def tid(linear: int) -> tuple[int, int, int]:
        return (linear % block[0], linear // block[0] % block[1],
                linear // (block[0] * block[1]))

    n = min(warp_size, block[0] * block[1] * block[2])
    if not any(not isinstance(i, str) and i.base in ("ld", "st") and "shared" in i.mods
               for i in fn.body):
        return Banks(())
    first = walk(fn, args, Thread(tid(0), block, (0, 0, 0), grid), shared_samples=SAMPLES)
    if not first.shared_runs:
        return Banks(())
    lanes = [first] + [walk(fn, args, Thread(tid(i), block, (0, 0, 0), grid),
                            max_steps=LANE_STEPS, shared_samples=SAMPLES,
                            until=frozenset(first.shared_runs))
                       for i in range(1, n)]
    by_index = {i.index: i for i in fn.body if not isinstance(i, str)}
    out = []
    for idx, runs in sorted(first.shared_runs.items()):
        ins = by_index[idx]
        width = first.shared[idx][0][1]
        requested = n * width / WAVEFRONT_BYTES
        served = []
        for k in range(SAMPLES):
            acc = [lane.shared[idx][k] for lane in lanes
                   if idx in lane.shared and len(lane.shared[idx]) > k]
            if len(acc) < n and k == 0 or any(a is None for a, _ in acc):
                served = None
                break
            if acc:
                served.append(wavefronts(acc))
        value = sum(served) / len(served) if served else None
        out.append(Access(ins.line, ins.base == "st", float(runs), requested, value))
    return Banks(tuple(out))
