"""The records of a workload and their evaluated values (parameters, counts, launch
dimensions, scalar arguments): everything here checks what it computes against CUDA's limits
and names the file, table and key when it cannot."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nvstage.errors import ExprError, WorkloadError
from nvstage.run.workload.expr import MAX_INT_BITS, eval_int_expr, quote_expr
from nvstage.hw.gpus import ARCHS

# dtype name -> (numpy name, bytes)
DTYPES = {
    "float16": 2, "float32": 4, "float64": 8,
    "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
}
# scalar tag -> (numpy dtype, bytes, is_float)
SCALARS = {
    "i8": ("int8", 1, False), "i16": ("int16", 2, False), "i32": ("int32", 4, False),
    "i64": ("int64", 8, False), "u8": ("uint8", 1, False), "u16": ("uint16", 2, False),
    "u32": ("uint32", 4, False), "u64": ("uint64", 8, False),
    "f16": ("float16", 2, True), "f32": ("float32", 4, True), "f64": ("float64", 8, True),
}
CODE_KINDS = ("source", "cubin", "fatbin", "ptx", "triton")
# CUDA's launch limits (CUDA C++ Programming Guide, Technical Specifications: the same for
# every compute capability nvstage knows): grid x, y, z and block x, y, z, threads per block.
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
# Repetitions, warm-ups and repeats of one launch: far above any real run, low enough that
# a typo (or a hostile file) cannot queue work for days.
MAX_REPS = 1_000_000
# ... but each bound alone allowed 10**6 repeats x 10**6 repetitions, and any number of
# [[launch]] entries: the work is bounded as a whole. [[launch]] entries in one file (each is
# evaluated and validated; 300,000 took 70 s), operations (copies and launches) in one
# repetition, and operations in a whole run (warm-ups included): at a few microseconds a
# launch, the last is minutes of GPU time and about a GB of per-operation figures.
MAX_LAUNCH_ENTRIES = 10_000
MAX_OPERATIONS = 1_000_000
MAX_TOTAL_OPERATIONS = 10_000_000


@dataclass(frozen=True)
class CodeSpec:
    """Where the device code comes from: one of a .cu source, a cubin, a fatbin, PTX, or
    kept Triton builds."""

    kind: str  # "source" | "cubin" | "fatbin" | "ptx" | "triton"
    path: str  # absolute (for Triton: the first keep folder)
    ptx: str | None = None  # optional PTX for validating a packaged cubin/fatbin
    stop: str = "cubin"  # for a source: compile to "cubin" or "fatbin"
    defines: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()
    triton: tuple = ()  # ``workload.triton.TritonKernel`` per keep folder named
    flags: tuple[str, ...] = ()  # nvcc flags for a source ([kernel] flags)


@dataclass(frozen=True)
class Init:
    kind: str = "zeros"  # "zeros" | "random" | "range" | "fill" | "npy"
    seed: int = 0
    low: float = 0.0
    high: float = 1.0
    start: float = 0.0
    step: float = 1.0
    value: float = 0.0
    path: str | None = None


@dataclass(frozen=True)
class BufferSpec:
    name: str
    dtype: str
    count: str | int  # expression over the parameters
    init: Init = Init()


@dataclass(frozen=True)
class Scalar:
    tag: str  # "i32", "f32", ...
    expr: str | int | float
    counts: tuple[str, ...] | None = None  # buffers this value counts elements of

    @property
    def dtype(self) -> str:
        return SCALARS[self.tag][0]

    @property
    def size(self) -> int:
        return SCALARS[self.tag][1]

    @property
    def is_float(self) -> bool:
        return SCALARS[self.tag][2]


@dataclass(frozen=True)
class BufferArg:
    buffer: str


Arg = Scalar | BufferArg


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[str | int, ...]
    block: tuple[str | int, ...]
    args: tuple[Arg, ...]
    shared: str | int = 0  # dynamic shared memory, bytes
    repeat: int = 1  # launches of this entry per repetition


@dataclass(frozen=True)
class CheckSpec:
    expect: tuple[tuple[str, str], ...] = ()  # (buffer, expression over initial contents)
    rtol: float = 1e-5
    atol: float = 1e-6


def _max_shared_optin() -> int:

    return max(a.shared_per_block_optin for a in ARCHS.values())


@dataclass(frozen=True)
class Workload:
    name: str
    code: CodeSpec
    params: tuple[tuple[str, Any], ...] = ()
    buffers: tuple[BufferSpec, ...] = ()
    to_device: tuple[str, ...] = ()
    from_device: tuple[str, ...] = ()
    launches: tuple[Launch, ...] = ()
    reps: int = 10
    warmup: int = 2
    check: CheckSpec = CheckSpec()
    file: str | None = None

    # -- evaluated values ------------------------------------------------------------
    def param_values(self) -> dict[str, Any]:
        """Parameters in order; later ones may use earlier ones (``m = "2 * n"``)."""
        values: dict[str, Any] = {}
        for name, expr in self.params:
            try:
                values[name] = eval_int_expr(expr, values)
            except (ExprError, ArithmeticError, TypeError) as e:
                raise WorkloadError(f"cannot evaluate {quote_expr(expr)}: {e}",
                                    where=self._where("params", name)) from None
        return values

    def buffer(self, name: str) -> BufferSpec | None:
        for b in self.buffers:
            if b.name == name:
                return b
        return None

    def element_count(self, b: BufferSpec, values: Mapping[str, Any] | None = None) -> int:
        values = self.param_values() if values is None else values
        n = self._int(b.count, values, self._where(f"buffers.{b.name}", "count"))
        if n <= 0:
            raise WorkloadError(f"element count must be positive, got {n}",
                                where=self._where(f"buffers.{b.name}", "count"))
        return n

    def nbytes(self, b: BufferSpec, values: Mapping[str, Any] | None = None) -> int:
        return self.element_count(b, values) * DTYPES[b.dtype]

    def dims(self, launch_index: int, values: Mapping[str, Any] | None = None) -> dict:
        """grid, block and shared memory of one launch, evaluated."""
        values = self.param_values() if values is None else values
        lz = self.launches[launch_index]
        where = f"launch[{launch_index}]"
        grid = tuple(self._int(g, values, self._where(where, "grid")) for g in lz.grid)
        block = tuple(self._int(b, values, self._where(where, "block")) for b in lz.block)
        shared = self._int(lz.shared, values, self._where(where, "shared"))
        for key, dims, limits in (("grid", grid, MAX_GRID), ("block", block, MAX_BLOCK)):
            if any(d <= 0 for d in dims):
                raise WorkloadError(f"{key} dimensions must be positive, got {dims}",
                                    where=self._where(where, key))
            for axis, d, most in zip("xyz", dims, limits):
                if d > most:
                    raise WorkloadError(f"{key} {axis} is {d}: CUDA allows at most {most}",
                                        where=self._where(where, key),
                                        hint=f"CUDA's limits: grid {MAX_GRID[0]} x "
                                             f"{MAX_GRID[1]} x {MAX_GRID[2]}, block "
                                             f"{MAX_BLOCK[0]} x {MAX_BLOCK[1]} x "
                                             f"{MAX_BLOCK[2]} ({MAX_THREADS_PER_BLOCK} "
                                             "threads in all)")
        if math.prod(block) > MAX_THREADS_PER_BLOCK:
            raise WorkloadError(f"a block holds at most {MAX_THREADS_PER_BLOCK} threads, got "
                                f"{math.prod(block)}", where=self._where(where, "block"))
        if shared < 0:
            raise WorkloadError("dynamic shared memory cannot be negative",
                                where=self._where(where, "shared"))
        most = _max_shared_optin()
        if shared > most:
            raise WorkloadError(f"dynamic shared memory of {shared} bytes: no GPU gives a "
                                f"block more than {most}", where=self._where(where, "shared"))
        return {"grid": grid, "block": block, "shared": shared}

    def scalar_value(self, s: Scalar, values: Mapping[str, Any], where: str):
        try:
            v = eval_int_expr(s.expr, values)
        except (ExprError, ArithmeticError, TypeError) as e:
            raise WorkloadError(f"cannot evaluate {quote_expr(s.expr)}: {e}",
                                where=where) from None
        if not s.is_float:
            if isinstance(v, float) and not v.is_integer():
                raise WorkloadError(f"{s.tag} needs an integer, {quote_expr(s.expr)} is {v}",
                                    where=where)
            v = int(v)
            bits = 8 * s.size
            lo, hi = ((0, 2**bits - 1) if s.tag.startswith("u")
                      else (-(2**(bits - 1)), 2**(bits - 1) - 1))
            if not lo <= v <= hi:
                raise WorkloadError(f"{v} does not fit in {s.tag}", where=where)
        return v

    def operation_count(self) -> int:
        """How many operations one repetition runs (``len(operations())``, not built)."""
        return (len(self.to_device) + sum(lz.repeat for lz in self.launches)
                + len(self.from_device))

    def check_work(self, reps: int | None = None, warmup: int | None = None,
                   where: str | None = None) -> None:
        """The work a run queues, bounded as a whole: ``MAX_OPERATIONS`` per repetition and
        ``MAX_TOTAL_OPERATIONS`` over every repetition and warm-up (``reps``/``warmup``: the
        command line's, else the file's). ``WorkloadError`` naming the limit past either."""
        reps = self.reps if reps is None else reps
        warmup = self.warmup if warmup is None else warmup
        where = where or self.file or "workload"
        per_rep = self.operation_count()
        if per_rep > MAX_OPERATIONS:
            raise WorkloadError(f"one repetition runs {per_rep} operations (copies, and each "
                                f"launch times its repeat): more than the {MAX_OPERATIONS} "
                                "nvstage runs in one (MAX_OPERATIONS)", where=where,
                                hint="lower repeat, or split the workload")
        total = per_rep * (reps + warmup)
        if total > MAX_TOTAL_OPERATIONS:
            raise WorkloadError(f"{reps} repetitions and {warmup} warm-ups of {per_rep} "
                                f"operations are {total} operations: more than the "
                                f"{MAX_TOTAL_OPERATIONS} nvstage runs in one run "
                                "(MAX_TOTAL_OPERATIONS)", where=where,
                                hint="lower reps, warmup or repeat")

    def operations(self) -> list[tuple[str, str, int | None]]:
        """The sequence of one repetition: (kind, name, launch index) in order."""
        ops: list[tuple[str, str, int | None]] = [("h2d", b, None) for b in self.to_device]
        for i, lz in enumerate(self.launches):
            ops += [("launch", lz.kernel, i)] * lz.repeat
        ops += [("d2h", b, None) for b in self.from_device]
        return ops

    def _int(self, expr, values, where) -> int:
        try:
            v = eval_int_expr(expr, values)
        except (ExprError, ArithmeticError, TypeError) as e:
            raise WorkloadError(f"cannot evaluate {quote_expr(expr)}: {e}",
                                where=where) from None
        if isinstance(v, float):
            if not v.is_integer():
                raise WorkloadError(f"{quote_expr(expr)} is {v}, not a whole number "
                                    f"(use // or cdiv(a, b) to round)", where=where)
            v = int(v)
        if not isinstance(v, int):
            raise WorkloadError(f"{quote_expr(expr)} is not a number", where=where)
        if v.bit_length() > MAX_INT_BITS:  # 1e308 is a whole number too
            raise WorkloadError(f"{quote_expr(expr)} exceeds 2**{MAX_INT_BITS}", where=where)
        return v

    def _where(self, table: str, key: str | None = None) -> str:
        return locate(self.file, table, key)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> Workload:
        from nvstage.run.workload.reader import read_toml

        p = Path(path)
        return cls.from_dict(read_toml(p), base=p.resolve().parent, file=str(path),
                             name=p.stem)

    @classmethod
    def from_dict(cls, data: Mapping, *, base: str | os.PathLike | None = None,
                  file: str | None = None, name: str = "workload") -> Workload:
        from nvstage.run.workload.reader import Reader

        return Reader(data, Path(base or os.getcwd()), file).read(name)


def locate(file: str | None, table: str, key: str | None = None) -> str:
    """Where in a workload a value sits: ``saxpy.toml: [launch] grid``."""
    loc = f"[{table}]" + (f" {key}" if key else "")
    return f"{file}: {loc}" if file else loc
