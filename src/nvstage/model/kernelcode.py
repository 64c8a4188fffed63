"""What the compiled code of a workload's kernels says, for the kernel bounds: each kernel's SASS
(nvdisasm on the cubin the workload was built into), its loops, its batches of global loads in
flight (``inspect.inflight``) and its instruction mix, made dynamic per thread with the loops'
trip counts.

Trip counts come from the workload's cost file (``trips``: one figure for every loop, or one
per loop in the order of their first instruction), or, where it gives none, from its declared
FLOPs: the trip count that makes the kernel's floating-point instructions do the FLOPs the cost
file declares (loops one level deep only). Where neither says, each loop counts once and a note
says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from nvstage.inspect.inflight import InFlight, in_flight
from nvstage.inspect.loops import Loop, enclosing, multiplicities, trip_list, find_loops
from nvstage.inspect.mix import MEMORY, classify, flops, mix
from nvstage.inspect.sass import disassemble

# A kernel's SASS is read only up to these sizes (the walk costs instructions x loops): past
# them the kernel is estimated without its code, and a note says so. Real kernels are far
# smaller; a crafted cubin is not.
MAX_INSTRUCTIONS = 100_000
MAX_LOOPS = 256
# Classes with a pipe of their own in the guide's throughput table (``hw.pipes``).
PIPE_CLASSES = ("fp32", "fp16", "fp64", "int", "convert", "sfu", "shuffle")
SHARED_CLASSES = ("shared_load", "shared_store")
# Tensor-core instructions on 8-bit, 4-bit or integer data: faster than the BF16 peak the
# model's tensor floor uses (CUDA binary utilities' instruction set reference).
_NARROW_MMA = frozenset({"IMMA", "IGMMA", "QGMMA", "OMMA", "QMMA", "BMMA", "BGMMA", "UTCIMMA",
                         "UTCQMMA", "UTCOMMA"})


@dataclass(frozen=True)
class KernelCode:
    """One kernel's SASS, as the model reads it."""

    symbol: str
    instructions: tuple
    loops: tuple[Loop, ...]
    inflight: InFlight
    arch: str = ""  # what it was compiled for: where its launch values sit (model.sass_walk)

    @classmethod
    def of(cls, kernel) -> KernelCode | None:
        """From an ``inspect.sass.SassKernel`` (its padding left out); None past the sizes
        this reads."""
        code = tuple(kernel.code)
        if len(code) > MAX_INSTRUCTIONS or len(find_loops(code)) > MAX_LOOPS:
            return None
        fl = in_flight(code)
        return cls(kernel.name, code, fl.loops, fl, kernel.arch)

    def derived_trips(self, flops_per_thread: float) -> float | None:
        """The trip count that makes the FLOPs match, for loops one level deep; None where
        that cannot be said (no loop, nested loops, no floating-point work inside)."""
        if not self.loops or any(lp.depth > 1 for lp in self.loops) or flops_per_thread <= 0:
            return None
        inside = outside = 0
        held = enclosing((i.offset for i in self.instructions), self.loops)
        for i, ks in zip(self.instructions, held):
            f = flops(i.opcode, i.text)
            if ks:
                inside += f
            else:
                outside += f
        if not inside or flops_per_thread <= outside:
            return None
        return (flops_per_thread - outside) / inside

    def dynamic(self, trips=None, *, flops_per_thread: float = 0.0,
                declared: dict | None = None, rows=(), banks=None) -> DynamicCode:
        """Counts per thread as the kernel runs. ``trips``: as the cost file declares them;
        else each loop's count derived from the code (``rows``: the loop table,
        ``model.loop_table``), else, where none is derived, from ``flops_per_thread``, else
        1 per loop. ``declared``: instructions per class the cost file gives directly, which
        replace the SASS's. ``banks``: the shared accesses' bank conflicts
        (``model.banks``), whose factor scales the shared bytes."""
        how = "no loop"
        asked: tuple = ()
        if self.loops:
            found = [r.trips for r in rows] if len(rows) == len(self.loops) else []
            if trips is not None:
                how = "declared in the cost file"
            elif found and all(t is not None for t in found):
                trips = found
                how = "derived from the code"
            elif any(t is not None for t in found):
                asked = tuple(r for r in rows if r.trips is None)
                trips = [1.0 if t is None else t for t in found]
                how = ("derived from the code, except loop" + ("s " if len(asked) > 1 else " ")
                       + ", ".join(str(r.index) for r in asked) + ": counted once")
            else:
                trips = self.derived_trips(flops_per_thread)
                how = ("derived from the declared FLOPs" if trips is not None else
                       "unknown: each loop counted once (declare trips in the cost file)")
                if trips is None:
                    asked = tuple(rows)
                trips = 1.0 if trips is None else trips
        per_loop = trip_list(self.loops, trips if trips is not None else 1.0)
        weights = multiplicities(self.instructions, self.loops, per_loop)
        m = mix(self.instructions, weights)
        by_class: dict[str, float] = {}
        for i, wt in zip(self.instructions, weights):
            f = flops(i.opcode, i.text)
            if f:
                cls = classify(i.opcode, i.text)
                by_class[cls] = by_class.get(cls, 0.0) + f * wt
        fl = self.inflight
        round_trips = fl.round_trips(per_loop)
        loads = fl.loads_per_round_trip(per_loop)
        per_load = fl.bytes_per_round_trip(per_loop) / loads if loads else 0.0
        d = _counted(dict(m.counts), dict(m.memory_bytes), declared, per_loop, how,
                     round_trips, loads, per_load, fl.max_loads)
        factor = banks.factor if banks is not None else None
        narrow = any(i.opcode in _NARROW_MMA for i in self.instructions)
        return replace(d, loops=tuple(rows), asked=asked, flops_by_class=by_class,
                       fast_tensor=narrow,
                       banks=banks, shared_bytes=d.shared_bytes * (factor or 1.0),
                       shared_requested=d.shared_bytes)


def _counted(counts: dict, memory: dict, declared: dict | None, trips, how, round_trips,
             loads, per_load, max_loads) -> DynamicCode:
    """The dynamic record, with the classes the cost file declares put in place of the
    SASS's (a declared shared class keeps the SASS's bytes per instruction, 4 where it has
    none)."""
    memory = dict(memory)
    if declared:
        for cls, n in declared.items():
            if cls in SHARED_CLASSES:
                per = memory.get(cls, 0) / counts[cls] if counts.get(cls) else 4
                memory[cls] = per * n
            counts[cls] = n
        how += "; instructions of " + ", ".join(declared) + " declared in the cost file"
    counts = {c: n for c, n in counts.items() if n}
    return DynamicCode(trips, how, sum(counts.values()),
                       {c: counts[c] for c in PIPE_CLASSES if counts.get(c)},
                       sum(memory.get(c, 0) for c in SHARED_CLASSES if c in MEMORY),
                       round_trips, loads, per_load, max_loads, counts)


def declared_code(declared: dict) -> DynamicCode:
    """Counts from the cost file alone, for a kernel with no SASS to read (PTX)."""
    return _counted({}, {}, declared, (), "no SASS", 0.0, 0.0, 0.0, 0)


@dataclass(frozen=True)
class DynamicCode:
    """One kernel's counts per thread as it runs (SIMT: per warp the same, in warp
    instructions)."""

    trips: tuple[float, ...]  # one per loop
    trips_source: str
    instructions: float
    pipes: dict  # class -> instructions
    shared_bytes: float  # requested from shared memory
    round_trips: float  # batches of global loads, one after another
    loads_per_trip: float
    bytes_per_load: float
    max_loads_in_flight: int
    classes: dict  # every class -> instructions
    loops: tuple = ()  # ``model.loop_table.LoopRow`` per loop, where the table was made
    asked: tuple = ()  # the rows whose trip count was neither declared nor derived
    flops_by_class: dict = field(default_factory=dict)  # per thread, from the SASS
    banks: object = None  # ``model.banks.Banks``, where the shared accesses were followed
    shared_requested: float = 0.0  # shared bytes per thread before the bank factor

    fast_tensor: bool = False  # 8-bit, 4-bit or integer tensor-core instructions

    @property
    def flops(self) -> float:
        """FLOPs per thread the SASS does with these trip counts (tensor cores not counted)."""
        return sum(self.flops_by_class.values())

    def to_json(self) -> dict:
        return {"trips": list(self.trips), "trips_source": self.trips_source,
                "loops": [r.to_json() for r in self.loops],
                "loops_asked": [r.index for r in self.asked],
                "flops_per_thread": self.flops, "flops_by_class": self.flops_by_class,
                "shared_bytes_requested_per_thread": self.shared_requested,
                "banks": self.banks.to_json() if self.banks is not None else None,
                "instructions_per_thread": self.instructions, "pipes": self.pipes,
                "shared_bytes_per_thread": self.shared_bytes,
                "round_trips_per_thread": self.round_trips,
                "loads_in_flight_per_warp": self.loads_per_trip,
                "max_loads_in_flight_per_warp": self.max_loads_in_flight,
                "bytes_per_load": self.bytes_per_load, "classes": self.classes}


def workload_code(image: bytes, kind: str, arch: str, toolkit) -> dict[str, KernelCode]:
    """Every entry kernel's code for ``arch`` in a workload's built image (a cubin or fatbin),
    by symbol. PTX has no SASS until the driver compiles it: nothing then."""
    import os
    import tempfile


    if kind not in ("cubin", "fatbin"):
        return {}
    with tempfile.TemporaryDirectory(prefix="nvstage-model-") as tmp:
        path = os.path.join(tmp, f"workload.{kind}")
        with open(path, "wb") as f:
            f.write(image)
        kernels = [k for k in disassemble(path, toolkit, lineinfo=True) if k.is_entry]
    mine = [k for k in kernels if k.arch.rstrip("af") == arch.rstrip("af")]
    return {k.name: KernelCode.of(k) for k in (mine or kernels)}


def finite(d: DynamicCode) -> bool:
    """Every count a finite number (trip counts multiplied over nested loops can overflow)."""
    import math

    return all(math.isfinite(v) for v in (d.instructions, d.shared_bytes, d.round_trips,
                                          *d.pipes.values()))
