"""What each launch of a workload moves and computes: the counts ``nvstage model`` needs.

A workload (``nvstage.run.workload``) says which buffers a launch is passed, not which it reads or
writes, nor how many FLOPs it does. Those come from a cost file beside the workload,
``NAME.cost.toml`` for ``NAME.toml`` (or ``--cost FILE``), so ``nvstage run`` keeps reading the
workload unchanged::

    host_memory = "pinned"        # or "pageable": how the copies' host buffers are allocated

    [[launch]]                    # one per [[launch]] of the workload, in the same order
    kernel = "scale"              # checked against the workload's launch
    reads = ["x"]                 # buffers read once in full ...
    writes = { t1 = "n / 2" }     # ... or { buffer = "elements" } for part of one
    flops = "n"                   # floating-point operations of one launch (an expression)
    trips = "k / 32"              # optional: how many times each loop of the kernel runs per
                                  # thread, or a list with one per loop (in SASS order)
    instructions = { fp32 = "2 * k" }  # optional: instructions per thread as the kernel runs,
                                  # per class of inspect.mix, instead of the SASS's counts

A workload file may also carry the same keys in a ``[model]`` table; this reader takes it out
before the workload is parsed (``nvstage run`` does not accept that table yet).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nvstage.files import is_regular
from nvstage.errors import CostSpecError, ExprError, MissingCounts
from nvstage.run.workload import Workload
from nvstage.run.workload.expr import MAX_INT_BITS, eval_int_expr, quote_expr
from nvstage.run.workload.reader import read_toml
from nvstage.run.workload.spec import DTYPES
from nvstage.inspect.mix import CLASSES

HOST_MEMORY = ("pinned", "pageable")
_LAUNCH_KEYS = ("kernel", "reads", "writes", "flops", "trips", "instructions")
MAX_LOOPS = 64  # trip counts one launch may list


@dataclass(frozen=True)
class Touch:
    buffer: str
    elements: str | int | None = None  # None: the whole buffer


@dataclass(frozen=True)
class LaunchCost:
    kernel: str
    reads: tuple[Touch, ...]
    writes: tuple[Touch, ...]
    flops: str | int | float
    trips: tuple[str | int | float, ...] | str | int | float | None = None
    instructions: tuple[tuple[str, str | int | float], ...] | None = None


@dataclass(frozen=True)
class CostSpec:
    launches: tuple[LaunchCost, ...]
    host_memory: str = "pinned"
    file: str | None = None


@dataclass(frozen=True)
class LaunchCounts:
    """One [[launch]] entry, evaluated: bytes per buffer and FLOPs of one launch."""

    index: int
    kernel: str
    repeat: int
    reads: tuple[tuple[str, int], ...]  # (buffer, bytes)
    writes: tuple[tuple[str, int], ...]
    flops: float
    trips: tuple[float, ...] | float | None = None  # None: not declared
    instructions: dict | None = None  # class -> per thread, where declared

    @property
    def bytes_read(self) -> int:
        return sum(b for _, b in self.reads)

    @property
    def bytes_written(self) -> int:
        return sum(b for _, b in self.writes)

    @property
    def bytes(self) -> int:
        return self.bytes_read + self.bytes_written

    def to_json(self) -> dict:
        return {"index": self.index, "kernel": self.kernel, "repeat": self.repeat,
                "reads": dict(self.reads), "writes": dict(self.writes),
                "bytes_read": self.bytes_read, "bytes_written": self.bytes_written,
                "flops": self.flops,
                "trips": list(self.trips) if isinstance(self.trips, tuple) else self.trips,
                "instructions": self.instructions}


def cost_path_for(workload_path: str | Path) -> Path:
    p = Path(workload_path)
    return p.with_name(p.stem + ".cost.toml")


def load_model_input(path: str | Path, cost: str | Path | None = None
                     ) -> tuple[Workload, CostSpec]:
    """The workload and its counts: from ``cost``, a ``[model]`` table, or ``NAME.cost.toml``."""
    p = Path(path)
    data = read_toml(p)
    inline = data.pop("model", None)
    w = Workload.from_dict(data, base=p.resolve().parent, file=str(path), name=p.stem)
    if cost is not None:
        return w, load_cost(cost, w)
    if inline is not None:
        return w, cost_from_dict(inline, w, origin=f"{path}: [model]")
    sidecar = cost_path_for(p)
    if is_regular(sidecar):  # a name too long for a sidecar is no sidecar, not a traceback
        return w, load_cost(sidecar, w)
    raise MissingCounts(
        f"{path}: no reads, writes and FLOPs per launch, so no kernel time can be estimated",
        hint=f"write {sidecar} with one [[launch]] per launch (kernel, reads, writes, flops), "
             f"or pass --cost FILE; see examples/model/*.cost.toml")


def load_cost(path: str | Path, w: Workload) -> CostSpec:
    return cost_from_dict(read_toml(path, "cost", CostSpecError), w, origin=str(path))


def cost_from_dict(data: Any, w: Workload, *, origin: str) -> CostSpec:
    """Validate a cost table against the workload: one entry per launch, known buffers, and
    expressions that evaluate over the workload's parameters."""
    def err(msg: str, where: str = "", hint: str | None = None, cls=CostSpecError):
        return cls(msg, where=f"{origin}" + (f": {where}" if where else ""), hint=hint)

    if not isinstance(data, Mapping):
        raise err("must be a table")
    for k in data:
        if k not in ("host_memory", "launch"):
            raise err(f"unknown key {k!r}", hint="allowed: host_memory, [[launch]]")
    host = data.get("host_memory", "pinned")
    if host not in HOST_MEMORY:
        raise err(f"host_memory must be pinned or pageable, not {host!r}", "host_memory")
    raw = data.get("launch")
    if raw is None or raw == []:
        raise err("no [[launch]] entries: no reads, writes or FLOPs to estimate from",
                  hint="one [[launch]] per launch of the workload, with kernel, reads, writes "
                       "and flops", cls=MissingCounts)
    if not isinstance(raw, list):
        raise err("launch must be an array of tables ([[launch]])")
    if len(raw) != len(w.launches):
        raise err(f"{len(raw)} [[launch]] entr{'y' if len(raw) == 1 else 'ies'} for the "
                  f"workload's {len(w.launches)}", hint="one per [[launch]] of the workload, "
                  "in the same order", cls=MissingCounts)
    values = w.param_values()
    names = {b.name for b in w.buffers}
    out = []
    for i, (t, lz) in enumerate(zip(raw, w.launches)):
        where = f"[launch[{i}]]"
        if not isinstance(t, Mapping):
            raise err("must be a table", where)
        for k in t:
            if k not in _LAUNCH_KEYS:
                raise err(f"unknown key {k!r}", f"{where} {k}",
                          hint=f"allowed: {', '.join(_LAUNCH_KEYS)}")
        missing = [k for k in ("reads", "writes", "flops") if k not in t]
        if missing:
            raise err(f"missing {', '.join(missing)} for kernel {lz.kernel}", where,
                      hint="reads and writes: buffer names (or {buffer = \"elements\"}); "
                           "flops: an expression, 0 for none", cls=MissingCounts)
        if "kernel" in t and t["kernel"] != lz.kernel:
            raise err(f"kernel {t['kernel']!r} but the workload's launch[{i}] is "
                      f"{lz.kernel!r}", f"{where} kernel")
        passed = {a.buffer for a in lz.args if hasattr(a, "buffer")}
        touches = {}
        for key in ("reads", "writes"):
            touches[key] = _touches(t[key], names, passed, err, f"{where} {key}")
            for tch in touches[key]:
                if tch.elements is not None:
                    n = _number(tch.elements, values, err, f"{where} {key}.{tch.buffer}")
                    if n < 0 or isinstance(n, float) and not n.is_integer():
                        raise err(f"{quote_expr(tch.elements)} is {n}: an element count is a whole "
                                  "number >= 0", f"{where} {key}.{tch.buffer}")
        flops = t["flops"]
        if isinstance(flops, bool) or not isinstance(flops, (int, float, str)):
            raise err("must be a number or an expression", f"{where} flops")
        if _number(flops, values, err, f"{where} flops") < 0:
            raise err("cannot be negative", f"{where} flops")
        trips = _trips(t.get("trips"), values, err, f"{where} trips")
        declared = _instructions(t.get("instructions"), values, err, f"{where} instructions")
        out.append(LaunchCost(lz.kernel, touches["reads"], touches["writes"], flops, trips,
                              declared))
    return CostSpec(tuple(out), host, origin)


def _trips(v, values, err, where: str):
    """A loop trip count (or a list of them): numbers or expressions, each at least 0."""
    if v is None:
        return None
    many = isinstance(v, list)
    items = v if many else [v]
    if many and not 1 <= len(items) <= MAX_LOOPS:
        raise err(f"a list of 1 to {MAX_LOOPS} trip counts, not {len(items)}", where)
    for x in items:
        if isinstance(x, bool) or not isinstance(x, (int, float, str)):
            raise err("a trip count is a number or an expression", where,
                      hint='e.g. trips = "k / 32", or trips = ["n / (blocks * block)", 8]')
        if _number(x, values, err, where) < 0:
            raise err("a trip count cannot be negative", where)
    return tuple(items) if many else v


def _instructions(v, values, err, where: str):
    """Instructions per thread per class, declared: {class = number or expression}."""
    if v is None:
        return None
    if not isinstance(v, Mapping) or not v:
        raise err('a table of instruction classes, e.g. instructions = { fp32 = "2 * k" }',
                  where)
    for cls, x in v.items():
        if cls not in CLASSES and cls != "other":
            raise err(f"no instruction class {cls!r}", where,
                      hint=f"classes: {', '.join(list(CLASSES) + ['other'])}")
        if isinstance(x, bool) or not isinstance(x, (int, float, str)):
            raise err("a count is a number or an expression", f"{where}.{cls}")
        if _number(x, values, err, f"{where}.{cls}") < 0:
            raise err("a count cannot be negative", f"{where}.{cls}")
    return tuple(v.items())


def _touches(v, names: set[str], passed: set[str], err, where: str) -> tuple[Touch, ...]:
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        items = [(x, None) for x in v]
    elif isinstance(v, Mapping):
        items = list(v.items())
        for _, e in items:
            if isinstance(e, bool) or not isinstance(e, (int, str)):
                raise err("element counts are integers or expressions", where)
    else:
        raise err('must be a list of buffer names or a table {buffer = "elements"}', where)
    out = []
    for name, elements in items:
        if name not in names:
            raise err(f"no buffer named {name!r}", where,
                      hint=f"buffers: {', '.join(sorted(names))}")
        if name not in passed:
            raise err(f"buffer {name} is not passed to this launch", where)
        out.append(Touch(name, elements))
    return tuple(out)


def _number(expr, values, err, where: str) -> float:
    try:
        v = eval_int_expr(expr, values)
    except (ExprError, ArithmeticError, TypeError) as e:
        raise err(f"cannot evaluate {quote_expr(expr)}: {e}", where) from None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise err(f"{quote_expr(expr)} is not a number", where)
    if isinstance(v, float) and not math.isfinite(v):
        # nan = nan in TOML, or 1e308 * 10: it reached int() in launch_counts, or made
        # every time in the estimate NaN
        said = f"{quote_expr(expr)} is {v}," if isinstance(expr, str) else f"{v} is"
        raise err(f"{said} not a finite number", where)
    if abs(v) > 2 ** MAX_INT_BITS:  # 1e308 bytes would overflow the estimate's sums
        raise err(f"{quote_expr(expr)} exceeds 2**{MAX_INT_BITS}", where)
    return v


def launch_counts(w: Workload, spec: CostSpec) -> list[LaunchCounts]:
    """Bytes read and written per buffer, and FLOPs, of each launch entry."""
    values = w.param_values()
    out = []
    for i, (lz, c) in enumerate(zip(w.launches, spec.launches)):
        def nbytes(t: Touch) -> int:
            b = w.buffer(t.buffer)
            size = DTYPES[b.dtype]
            if t.elements is None:
                return w.element_count(b, values) * size
            return int(eval_int_expr(t.elements, values)) * size

        trips = c.trips
        if trips is not None:
            trips = (tuple(float(eval_int_expr(x, values)) for x in trips)
                     if isinstance(trips, tuple) else float(eval_int_expr(trips, values)))
        declared = None
        if c.instructions is not None:
            declared = {k: float(eval_int_expr(x, values)) for k, x in c.instructions}
        out.append(LaunchCounts(i, lz.kernel, lz.repeat,
                                tuple((t.buffer, nbytes(t)) for t in c.reads),
                                tuple((t.buffer, nbytes(t)) for t in c.writes),
                                float(eval_int_expr(c.flops, values)), trips, declared))
    return out


def intermediates(w: Workload, counts: list[LaunchCounts]) -> tuple[str, ...]:
    """Buffers that only carry data from one launch to a later one: written by a launch,
    read by a later launch, and neither copied in nor copied back."""
    out = []
    for b in w.buffers:
        if b.name in w.to_device or b.name in w.from_device:
            continue
        written = [c.index for c in counts if any(n == b.name for n, _ in c.writes)]
        read = [c.index for c in counts if any(n == b.name for n, _ in c.reads)]
        if written and any(r > min(written) for r in read):
            out.append(b.name)
    return tuple(out)
