"""What ``nvstage run`` runs: a workload, as a TOML file or the same dataclasses from Python.

A workload names its device code (a .cu source compiled through the nvstage pipeline, or a
packaged cubin / fatbin / PTX), named parameters, buffers (dtype, element count, initial
contents), which buffers go to the device before and come back after, a sequence of launches,
repetitions and warm-up, and a check of the results. Expressions (``"(n + 255) / 256"``,
``"a * x + y"``) go through small AST evaluators, never ``eval``.

Validation against the kernels' real parameter lists (from PTX, and the demangled signature
where the name is mangled) happens here, before anything touches a GPU.

Example::

    [kernel]
    source = "../kernels/saxpy.cu"
    [params]
    n = "1 << 20"
    a = 2.0
    [buffers.x]
    dtype = "float32"
    count = "n"
    init = { random = { seed = 1 } }
    [buffers.y]
    dtype = "float32"
    count = "n"
    init = { range = { start = 0 } }
    [transfer]
    to_device = ["x", "y"]
    from_device = ["y"]
    [[launch]]
    kernel = "saxpy"
    grid = "(n + 255) / 256"
    block = 256
    args = [{ i32 = "n" }, { f32 = "a" }, "x", "y"]
    [run]
    reps = 10
    warmup = 2
    [check]
    rtol = 1e-6
    [check.expect]
    y = "a * x + y"
"""

from __future__ import annotations

import ast
import math
import operator
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nvstage.documents import one_line
from nvstage.errors import NvstageError, UsageError

SCHEMA_KEYS = ("kernel", "params", "buffers", "transfer", "launch", "run", "check")
# Tables other commands read from the same file (nvstage model's byte and FLOP counts).
FOREIGN_KEYS = ("model",)

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
CODE_KINDS = ("source", "cubin", "fatbin", "ptx")
# CUDA's launch limits (CUDA C++ Programming Guide, Technical Specifications: the same for
# every compute capability nvstage knows): grid x, y, z and block x, y, z, threads per block.
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
# Repetitions, warm-ups and repeats of one launch: far above any real run, low enough that
# a typo (or a hostile file) cannot queue work for days.
MAX_REPS = 1_000_000


class WorkloadError(UsageError):
    """A workload that cannot be run as written: names the file, table and key."""

    def __init__(self, message: str, *, where: str = "", hint: str | None = None):
        # Names from the file (tables, keys, buffers) end up in the message: a newline or
        # escape sequence in one must not break the one-line error or the terminal.
        where, message = one_line(where), one_line(message)
        self.where = where
        super().__init__(f"{where}: {message}" if where else message, hint=hint)


# ---------------------------------------------------------------------------------------
# Safe expressions
# ---------------------------------------------------------------------------------------

_BINOPS: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow, ast.MatMult: operator.matmul, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift,
    ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
}
_UNOPS: dict[type, Callable] = {ast.USub: operator.neg, ast.UAdd: operator.pos,
                                ast.Invert: operator.invert}
_CMPOPS: dict[type, Callable] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}


def quote_expr(expr) -> str:
    """An expression for a message, cut short: a hostile one may be thousands of characters."""
    text = repr(expr)
    return text if len(text) <= 80 else f"{text[:60]}...' ({len(str(expr))} characters)"


def _finite(x):
    """``x`` if it is a finite number: NaN or inf reaching int() raised a ValueError or an
    OverflowError past every caller's except clause."""
    if isinstance(x, float) and not math.isfinite(x):
        raise ExprError(f"{x} is not a finite number")
    return x


_INT_FUNCS: dict[str, Callable] = {
    "min": min, "max": max, "abs": abs, "int": lambda x: int(_finite(x)), "float": float,
    "ceil": lambda x: int(math.ceil(_finite(x))), "floor": lambda x: int(math.floor(_finite(x))),
    "cdiv": lambda a, b: -(-a // b),  # ceil division, for grids
}
_NUMPY_FUNCS = frozenset("""
    abs absolute add all any arange argmax argmin array astype bincount ceil clip concatenate
    cos cumprod cumsum diff divide dot einsum exp expm1 floor float16 float32 float64 full
    histogram int8 int16 int32 int64 isclose isfinite log log1p log2 matmul maximum mean
    minimum multiply ones outer prod reshape round sign sin sort sqrt square stack subtract sum
    tanh tile where zeros uint8 uint16 uint32 uint64 repeat linspace fma float_power power
""".split())
_ARRAY_METHODS = frozenset("""
    astype sum mean max min cumsum prod reshape ravel flatten copy view any all
""".split())
_MAX_POW = 4096  # guard against 10**10**10 in a workload file
# Bounds on what an expression may cost, whoever wrote the file. Workload values end up in
# 64-bit kernel arguments, so 512 bits leaves room for any intermediate while keeping each
# operation instant: the exponent bound alone let ((10**4096)**4096)**4096 compute for
# minutes. An int of 512 bits also still converts to a float and prints.
MAX_INT_BITS = 512
MAX_EXPR_CHARS = 2000  # Python's own parser gives up (RecursionError) near 4,000 operators
MAX_EXPR_DEPTH = 100  # nested operations; 100,000 chained + overflowed the evaluator's stack


class ExprError(ValueError):
    pass


def _check_int(v):
    """``v``, if it is not an integer of more than ``MAX_INT_BITS`` bits."""
    if isinstance(v, int) and v.bit_length() > MAX_INT_BITS:
        raise ExprError(f"a value exceeds 2**{MAX_INT_BITS} (the limit on integers in an "
                        "expression)")
    return v


def _bits(v) -> int:
    return abs(v).bit_length() if isinstance(v, int) else 0


def _check_binop(op: ast.operator, left, right) -> None:
    """Refuse, before computing it, an integer result that would exceed ``MAX_INT_BITS``:
    a pow's or a product's size is known from its operands' sizes."""
    if isinstance(op, ast.Pow) and isinstance(right, (int, float)) and abs(right) > _MAX_POW:
        raise ExprError("exponent too large")
    if isinstance(op, ast.LShift) and isinstance(right, int) and right > 64:
        raise ExprError("shift too large")
    if isinstance(left, tuple) or isinstance(right, tuple):
        # (1,) * 10**9 repeats a tuple; a + a over a chain of parameters doubles one each time
        raise ExprError("arithmetic on a tuple is not allowed")
    if not (isinstance(left, int) and isinstance(right, int)):
        return
    if isinstance(op, ast.Pow) and right > 0 and abs(left) > 1:
        grows = (_bits(left) - 1) * right
    elif isinstance(op, ast.Mult):
        grows = _bits(left) + _bits(right) - 1
    elif isinstance(op, ast.LShift) and right > 0:
        grows = _bits(left) + right
    else:
        return
    if grows > MAX_INT_BITS:
        raise ExprError(f"a value exceeds 2**{MAX_INT_BITS} (the limit on integers in an "
                        "expression)")


def _depth(tree: ast.AST) -> int:
    """How deeply ``tree`` nests, walked without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > MAX_EXPR_DEPTH:
            return deepest
        stack.extend((c, d + 1) for c in ast.iter_child_nodes(node))
    return deepest


def _eval(node: ast.AST, names: Mapping[str, Any], *, numpy_mod=None) -> Any:
    """Evaluate a restricted expression tree. ``numpy_mod``: allow ``np.f(...)`` and methods."""
    value = _eval_node(node, names, numpy_mod=numpy_mod)
    if isinstance(value, complex):  # (-8) ** 0.5
        raise ExprError("the result is not a real number")
    return _check_int(value)


def _eval_node(node: ast.AST, names: Mapping[str, Any], *, numpy_mod=None) -> Any:
    rec = lambda n: _eval(n, names, numpy_mod=numpy_mod)  # noqa: E731
    if isinstance(node, ast.Expression):
        return rec(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in names:
            return names[node.id]
        raise ExprError(f"unknown name {node.id!r}")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = rec(node.left), rec(node.right)
        _check_binop(node.op, left, right)
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNOPS:
        return _UNOPS[type(node.op)](rec(node.operand))
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
        return _CMPOPS[type(node.ops[0])](rec(node.left), rec(node.comparators[0]))
    if isinstance(node, ast.IfExp):
        return rec(node.body) if rec(node.test) else rec(node.orelse)
    if isinstance(node, (ast.Tuple, ast.List)):
        return tuple(rec(e) for e in node.elts)
    if isinstance(node, ast.Slice):
        return slice(*(rec(p) if p is not None else None
                       for p in (node.lower, node.upper, node.step)))
    if isinstance(node, ast.Subscript) and numpy_mod is not None:
        return rec(node.value)[rec(node.slice)]
    if isinstance(node, ast.Attribute) and numpy_mod is not None:
        if isinstance(node.value, ast.Name) and node.value.id in ("np", "numpy"):
            if node.attr in _NUMPY_FUNCS:
                return getattr(numpy_mod, node.attr)
            if node.attr in ("pi", "e"):
                return getattr(numpy_mod, node.attr)
            raise ExprError(f"np.{node.attr} is not allowed in a check")
        if node.attr in ("T", "size", "shape", "dtype"):
            return getattr(rec(node.value), node.attr)
        raise ExprError(f"attribute .{node.attr} is not allowed")
    if isinstance(node, ast.Call):
        kwargs = {k.arg: rec(k.value) for k in node.keywords if k.arg is not None}
        if len(kwargs) != len(node.keywords):
            raise ExprError("**kwargs are not allowed")
        args = [rec(a) for a in node.args]
        f = node.func
        if isinstance(f, ast.Name) and f.id in _INT_FUNCS and numpy_mod is None:
            return _INT_FUNCS[f.id](*args, **kwargs)
        if isinstance(f, ast.Name) and numpy_mod is not None and f.id in ("abs", "min", "max"):
            return {"abs": abs, "min": min, "max": max}[f.id](*args, **kwargs)
        if numpy_mod is not None and isinstance(f, ast.Attribute):
            if isinstance(f.value, ast.Name) and f.value.id in ("np", "numpy"):
                return rec(f)(*args, **kwargs)
            if f.attr in _ARRAY_METHODS:
                return getattr(rec(f.value), f.attr)(*args, **kwargs)
            raise ExprError(f"method .{f.attr}() is not allowed")
        raise ExprError("only a few functions may be called here")
    raise ExprError(f"{type(node).__name__} is not allowed in an expression")


def _parse(text: str) -> ast.Expression:
    text = text.strip()
    if len(text) > MAX_EXPR_CHARS:
        raise ExprError(f"longer than {MAX_EXPR_CHARS} characters (the limit on an "
                        "expression)")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as e:
        raise ExprError(f"not an expression ({e.msg})") from None
    except (RecursionError, MemoryError):  # the parser's own stack, on deep nesting
        raise ExprError(f"nested more than {MAX_EXPR_DEPTH} levels deep") from None
    if _depth(tree) > MAX_EXPR_DEPTH:
        raise ExprError(f"nested more than {MAX_EXPR_DEPTH} levels deep (the limit on an "
                        "expression)")
    return tree


def eval_int_expr(expr: str | int | float, names: Mapping[str, Any]) -> Any:
    """A number from an expression over named parameters (``"(n + 255) / 256"``).

    ``/`` between integers that divide exactly stays an int; use ``cdiv(a, b)`` or ``//``
    for rounding.
    """
    if isinstance(expr, bool):
        raise ExprError("a boolean is not a number")
    if isinstance(expr, (int, float)):
        return _check_int(expr)
    if not isinstance(expr, str):
        raise ExprError(f"expected a number or an expression string, not {type(expr).__name__}")
    try:
        value = _eval(_parse(expr), names)
    except ExprError:
        raise
    except ValueError as e:  # 1 << -1, math domain errors: the expression's fault
        raise ExprError(str(e)) from None
    if isinstance(value, float) and value.is_integer() and "/" in expr:
        value = int(value)
    return value


def eval_array_expr(expr: str, names: Mapping[str, Any]):
    """A numpy value from an expression over buffers and parameters (checks)."""
    import numpy as np

    return _eval(_parse(expr), {**names, "np": np, "numpy": np}, numpy_mod=np)




# ---------------------------------------------------------------------------------------
# The records
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CodeSpec:
    """Where the device code comes from: one of a .cu source, a cubin, a fatbin or PTX."""

    kind: str  # "source" | "cubin" | "fatbin" | "ptx"
    path: str  # absolute
    ptx: str | None = None  # optional PTX for validating a packaged cubin/fatbin
    stop: str = "cubin"  # for a source: compile to "cubin" or "fatbin"
    defines: tuple[str, ...] = ()
    include_dirs: tuple[str, ...] = ()


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
    from nvstage.hw.gpus import ARCHS

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
        return _where(self.file, table, key)

    # -- construction -------------------------------------------------------------------
    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> Workload:
        p = Path(path)
        return cls.from_dict(read_toml(p), base=p.resolve().parent, file=str(path),
                             name=p.stem)

    @classmethod
    def from_dict(cls, data: Mapping, *, base: str | os.PathLike | None = None,
                  file: str | None = None, name: str = "workload") -> Workload:
        return _Reader(data, Path(base or os.getcwd()), file).read(name)


# ---------------------------------------------------------------------------------------
# Reading TOML-shaped data
# ---------------------------------------------------------------------------------------


def read_toml(path: str | os.PathLike, what: str = "workload",
              error: type[WorkloadError] = WorkloadError) -> dict:
    """A TOML file as a dict: a missing file is ``InputNotFound``; a folder, a binary file or
    bad TOML is ``error``."""
    from nvstage.documents import load_toml_doc

    return load_toml_doc(path, what, error)


def _where(file: str | None, table: str, key: str | None = None) -> str:
    """Where in a workload a value sits: ``saxpy.toml: [launch] grid``."""
    loc = f"[{table}]" + (f" {key}" if key else "")
    return f"{file}: {loc}" if file else loc


class _Reader:
    def __init__(self, data: Mapping, base: Path, file: str | None):
        self.data, self.base, self.file = data, base, file

    def where(self, table: str, key: str | None = None) -> str:
        return _where(self.file, table, key)

    def err(self, msg: str, table: str, key: str | None = None, hint: str | None = None):
        return WorkloadError(msg, where=self.where(table, key), hint=hint)

    def table(self, name: str, required: bool = False) -> Mapping:
        t = self.data.get(name)
        if t is None:
            if required:
                raise WorkloadError(f"missing [{name}] table", where=self.file or "workload")
            return {}
        if not isinstance(t, Mapping):
            raise self.err("must be a table", name)
        return t

    def unknown(self, table: str, t: Mapping, allowed: tuple[str, ...]) -> None:
        for k in t:
            if k not in allowed:
                raise self.err(f"unknown key {k!r}", table, k,
                               hint=f"allowed here: {', '.join(allowed)}")

    def path(self, value, table: str, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.err("must be a file path (a string)", table, key)
        p = (self.base / value).resolve()
        if p.exists() and not p.is_file():  # a FIFO or device would block or never end
            raise self.err(f"{value} is not a regular file ({p})", table, key,
                           hint="a workload names regular files only")
        if not p.is_file():
            raise self.err(f"no such file: {value} (looked in {p.parent})", table, key)
        return str(p)

    def read(self, name: str) -> Workload:
        for k in self.data:
            if k not in SCHEMA_KEYS and k not in FOREIGN_KEYS:
                raise WorkloadError(f"unknown table [{k}]", where=self.file or "workload",
                                    hint=f"the tables are: {', '.join(SCHEMA_KEYS)}")
        code = self.code()
        params = self.params()
        buffers = self.buffers()
        names = {b.name for b in buffers}
        transfer = self.table("transfer")
        self.unknown("transfer", transfer, ("to_device", "from_device"))
        to_dev = self.name_list(transfer.get("to_device", sorted(names)), "transfer",
                                "to_device", names)
        from_dev = self.name_list(transfer.get("from_device", []), "transfer", "from_device",
                                  names)
        launches = self.launches(names, {p for p, _ in params})
        run = self.table("run")
        self.unknown("run", run, ("reps", "warmup"))
        reps = self.positive_int(run.get("reps", 10), "run", "reps")
        warmup = self.positive_int(run.get("warmup", 2), "run", "warmup", allow_zero=True)
        check = self.check(names, set(from_dev))
        return Workload(name=name, code=code, params=params, buffers=buffers,
                        to_device=to_dev, from_device=from_dev, launches=launches, reps=reps,
                        warmup=warmup, check=check, file=self.file)

    def code(self) -> CodeSpec:
        t = self.table("kernel", required=True)
        self.unknown("kernel", t, (*CODE_KINDS, "stop", "defines", "include_dirs"))
        given = [k for k in CODE_KINDS if k in t]
        packaged = [k for k in given if k != "ptx"]
        if not given:
            raise self.err("say where the device code is: source, cubin, fatbin or ptx",
                           "kernel")
        if len(packaged) > 1:
            raise self.err(f"give one of source, cubin or fatbin, not {' and '.join(packaged)}",
                           "kernel")
        kind = packaged[0] if packaged else "ptx"
        ptx = self.path(t["ptx"], "kernel", "ptx") if "ptx" in t else None
        path = ptx if kind == "ptx" else self.path(t[kind], "kernel", kind)
        stop = t.get("stop", "cubin")
        if stop not in ("cubin", "fatbin"):
            raise self.err(f"stop must be cubin or fatbin, not {stop!r}", "kernel", "stop")
        if kind == "source" and ptx:
            raise self.err("a source is compiled to PTX by nvstage; drop the ptx key",
                           "kernel", "ptx")
        defines = self.str_list(t.get("defines", []), "kernel", "defines")
        incs = tuple(str((self.base / d).resolve())
                     for d in self.str_list(t.get("include_dirs", []), "kernel",
                                            "include_dirs"))
        return CodeSpec(kind, path, ptx if kind != "ptx" else None, stop, defines, incs)

    def params(self) -> tuple[tuple[str, Any], ...]:
        t = self.table("params")
        out = []
        for k, v in t.items():
            if not k.isidentifier():
                raise self.err("a parameter name must be an identifier", "params", k)
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise self.err("must be a number or an expression string", "params", k)
            out.append((k, v))
        return tuple(out)

    def buffers(self) -> tuple[BufferSpec, ...]:
        t = self.table("buffers")
        out = []
        for bname, spec in t.items():
            table = f"buffers.{bname}"
            if not bname.isidentifier() or bname in ("np", "numpy"):
                raise self.err("a buffer name must be an identifier (not np)", table)
            if not isinstance(spec, Mapping):
                raise self.err("must be a table with dtype and count", table)
            self.unknown(table, spec, ("dtype", "count", "init"))
            dtype = spec.get("dtype")
            if dtype not in DTYPES:
                raise self.err(f"unknown dtype {dtype!r}", table, "dtype",
                               hint=f"one of: {', '.join(DTYPES)}")
            if "count" not in spec:
                raise self.err("missing element count", table, "count")
            count = spec["count"]
            if isinstance(count, bool) or not isinstance(count, (int, str)):
                raise self.err("must be an integer or an expression string", table, "count")
            out.append(BufferSpec(bname, dtype, count, self.init(spec.get("init", "zeros"),
                                                                 table, dtype)))
        return tuple(out)

    def init(self, v, table: str, dtype: str = "float32") -> Init:
        if v == "zeros":
            return Init("zeros")
        if not isinstance(v, Mapping) or len(v) != 1:
            raise self.err('must be "zeros" or one of {random = {...}}, {range = {...}}, '
                           '{fill = V}, {npy = "file.npy"}', table, "init")
        (kind, arg), = v.items()
        if kind == "fill":
            if isinstance(arg, bool) or not isinstance(arg, (int, float)):
                raise self.err("fill takes a number", table, "init.fill")
            try:
                value = float(arg)
            except OverflowError:
                raise self.err("fill is too large for any dtype", table, "init.fill") from None
            # NaN and inf are values a float buffer can hold; an integer one cannot.
            if not dtype.startswith("float") and not math.isfinite(value):
                raise self.err(f"fill is {value}: a {dtype} buffer holds finite integers",
                               table, "init.fill")
            return Init("fill", value=value)
        if kind == "npy":
            return Init("npy", path=self.path(arg, table, "init.npy"))
        if kind in ("random", "range"):
            arg = arg if isinstance(arg, Mapping) else {}
            allowed = ("seed", "low", "high") if kind == "random" else ("start", "step")
            self.unknown(f"{table}.init.{kind}", arg, allowed)
            nums = {}
            for k, val in arg.items():
                if isinstance(val, bool) or not isinstance(val, (int, float)):
                    raise self.err("must be a number", f"{table}.init.{kind}", k)
                if k == "seed":
                    if not isinstance(val, int) or not 0 <= val < 2**64:
                        raise self.err("a seed is an integer from 0 to 2**64 - 1",
                                       f"{table}.init.{kind}", k)
                    nums[k] = val
                    continue
                # inf or nan here reached int() or numpy's generator when the run started
                if isinstance(val, int) and val.bit_length() > 1000 or \
                        not math.isfinite(float(val)):
                    raise self.err("must be a finite number", f"{table}.init.{kind}", k)
                nums[k] = float(val)
                if kind == "random" and not dtype.startswith("float"):
                    import numpy as np

                    info = np.iinfo(dtype)
                    if not info.min <= nums[k] <= info.max:
                        raise self.err(f"{val} does not fit in {dtype}",
                                       f"{table}.init.{kind}", k)
            return Init(kind, **nums)
        raise self.err(f"unknown initial contents {kind!r}", table, "init",
                       hint="zeros, random, range, fill or npy")

    def name_list(self, v, table, key, names: set[str]) -> tuple[str, ...]:
        items = self.str_list(v, table, key)
        for n in items:
            if n not in names:
                raise self.err(f"no buffer named {n!r}", table, key,
                               hint=f"buffers: {', '.join(sorted(names)) or '(none)'}")
        return items

    def str_list(self, v, table, key) -> tuple[str, ...]:
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.err("must be a list of strings", table, key)
        return tuple(v)

    def positive_int(self, v, table, key, allow_zero=False) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v < (0 if allow_zero else 1) \
                or v > MAX_REPS:
            raise self.err(f"must be an integer {'>= 0' if allow_zero else '>= 1'} and at "
                           f"most {MAX_REPS}", table, key)
        return v

    def dims(self, v, table, key) -> tuple[str | int, ...]:
        items = v if isinstance(v, list) else [v]
        if not 1 <= len(items) <= 3:
            raise self.err("give 1 to 3 dimensions", table, key)
        for x in items:
            if isinstance(x, bool) or not isinstance(x, (int, str)):
                raise self.err("each dimension is an integer or an expression", table, key)
        return tuple(items)

    def launches(self, buffers: set[str], params: set[str]) -> tuple[Launch, ...]:
        raw = self.data.get("launch")
        if raw is None:
            raise WorkloadError("no [[launch]] entries: nothing to run",
                                where=self.file or "workload")
        if not isinstance(raw, list):
            raise WorkloadError("launch must be an array of tables ([[launch]])",
                                where=self.file or "workload")
        out = []
        for i, t in enumerate(raw):
            table = f"launch[{i}]"
            if not isinstance(t, Mapping):
                raise self.err("must be a table", table)
            self.unknown(table, t, ("kernel", "grid", "block", "shared", "args", "repeat"))
            for req in ("kernel", "grid", "block"):
                if req not in t:
                    raise self.err(f"missing {req}", table, req)
            if not isinstance(t["kernel"], str):
                raise self.err("must be a kernel name", table, "kernel")
            shared = t.get("shared", 0)
            if isinstance(shared, bool) or not isinstance(shared, (int, str)):
                raise self.err("must be an integer or an expression", table, "shared")
            args = t.get("args", [])
            if not isinstance(args, list):
                raise self.err("must be a list", table, "args")
            out.append(Launch(
                kernel=t["kernel"], grid=self.dims(t["grid"], table, "grid"),
                block=self.dims(t["block"], table, "block"),
                args=tuple(self.arg(a, table, j, buffers) for j, a in enumerate(args)),
                shared=shared,
                repeat=self.positive_int(t.get("repeat", 1), table, "repeat"),
            ))
        return tuple(out)

    def arg(self, a, table: str, j: int, buffers: set[str]) -> Arg:
        key = f"args[{j}]"
        if isinstance(a, str):
            if a not in buffers:
                raise self.err(f"no buffer named {a!r} (a scalar is written {{i32 = \"n\"}})",
                               table, key)
            return BufferArg(a)
        if isinstance(a, Mapping):
            tags = [k for k in a if k in SCALARS]
            extra = [k for k in a if k not in SCALARS and k != "counts"]
            if len(tags) != 1 or extra:
                raise self.err("a scalar is one typed value, e.g. {i32 = \"n\"} or "
                               "{f32 = 2.0}", table, key,
                               hint=f"types: {', '.join(SCALARS)}")
            tag = tags[0]
            expr = a[tag]
            if isinstance(expr, bool) or not isinstance(expr, (int, float, str)):
                raise self.err("must be a number or an expression", table, f"{key}.{tag}")
            counts = None
            if "counts" in a:
                counts = self.name_list(a["counts"], table, f"{key}.counts", buffers)
            return Scalar(tag, expr, counts)
        raise self.err("an argument is a buffer name or a typed scalar", table, key)

    def check(self, buffers: set[str], returned: set[str]) -> CheckSpec:
        t = self.table("check")
        self.unknown("check", t, ("expect", "rtol", "atol"))
        expect = t.get("expect", {})
        if not isinstance(expect, Mapping):
            raise self.err("must be a table of buffer = expression", "check", "expect")
        pairs = []
        for b, e in expect.items():
            if b not in buffers:
                raise self.err(f"no buffer named {b!r}", "check.expect", b)
            if b not in returned:
                raise self.err(f"{b} is not copied back; add it to [transfer] from_device",
                               "check.expect", b)
            if not isinstance(e, str):
                raise self.err("must be an expression string", "check.expect", b)
            try:
                _parse(e)
            except ExprError as err:
                raise self.err(str(err), "check.expect", b) from None
            pairs.append((b, e))
        tol = {}
        for k in ("rtol", "atol"):
            if k in t:
                v = t[k]
                if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                    raise self.err("must be a non-negative number", "check", k)
                tol[k] = float(v)
        return CheckSpec(tuple(pairs), **tol)


# ---------------------------------------------------------------------------------------
# Kernel signatures and validation
# ---------------------------------------------------------------------------------------

# Demangled C type -> (bytes, kind) where kind is "int" | "float" | "bool"
_C_TYPES = {
    "float": (4, "float"), "double": (8, "float"), "__half": (2, "float"),
    "half": (2, "float"), "int": (4, "int"), "unsigned int": (4, "int"),
    "unsigned": (4, "int"), "short": (2, "int"), "unsigned short": (2, "int"),
    "char": (1, "int"), "signed char": (1, "int"), "unsigned char": (1, "int"),
    "long": (8, "int"), "unsigned long": (8, "int"), "long long": (8, "int"),
    "unsigned long long": (8, "int"), "bool": (1, "bool"),
}
# Pointee C type -> compatible buffer dtypes
_POINTEES = {
    "float": {"float32"}, "double": {"float64"}, "__half": {"float16"}, "half": {"float16"},
    "int": {"int32"}, "unsigned int": {"uint32"}, "unsigned": {"uint32"},
    "short": {"int16"}, "unsigned short": {"uint16"}, "char": {"int8", "uint8"},
    "signed char": {"int8"}, "unsigned char": {"uint8"}, "long": {"int64"},
    "unsigned long": {"uint64"}, "long long": {"int64"}, "unsigned long long": {"uint64"},
}


@dataclass(frozen=True)
class ParamSig:
    index: int
    size: int  # bytes, from the PTX
    ptx_type: str
    c_type: str | None = None  # from the demangled name ("float const*"), None if unmangled

    @property
    def is_pointer(self) -> bool | None:
        if self.c_type is not None:
            return self.c_type.rstrip().endswith("*")
        return None  # an unmangled .u64 could be a pointer or a 64-bit integer

    @property
    def pointee(self) -> str | None:
        if not self.is_pointer:
            return None
        base = self.c_type.rstrip().rstrip("*").replace("__restrict__", "")
        words = [w for w in base.split() if w not in ("const", "volatile")]
        return " ".join(words)

    def describe(self) -> str:
        return self.c_type or f".{self.ptx_type} ({self.size} bytes)"


@dataclass(frozen=True)
class KernelSig:
    name: str  # as the workload wrote it
    mangled: str
    demangled: str
    params: tuple[ParamSig, ...]


def split_c_args(demangled: str) -> list[str] | None:
    """``void scale<float>(float*, float, int)`` -> ["float*", "float", "int"]."""
    if "(" not in demangled or not demangled.endswith(")"):
        return None
    depth, start = 0, None
    for i, c in enumerate(demangled):
        if c == "(" and depth == 0 and start is None:
            start = i + 1
        if c in "(<":
            depth += 1
        elif c in ")>":
            depth -= 1
    inner = demangled[start:-1] if start else ""
    if not inner.strip() or inner.strip() == "void":
        return []
    parts, depth, cur = [], 0, ""
    for c in inner:
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += c
    parts.append(cur.strip())
    return parts



def kernel_signatures(ptx_text: str) -> dict[str, KernelSig]:
    """Every entry in a PTX module, keyed by mangled name, short name and demangled name."""
    from nvstage.inspect.ptx import parse_ptx
    from nvstage.inspect.records import qualified_name

    module = parse_ptx(ptx_text)
    out: dict[str, KernelSig] = {}
    for e in module.entries:
        c_args = split_c_args(e.demangled) if e.demangled != e.name else None
        if c_args is not None and len(c_args) != len(e.params):
            c_args = None  # an aggregate split across params: trust the PTX alone
        params = tuple(ParamSig(i, p.size, p.ptx_type, c_args[i] if c_args else None)
                       for i, p in enumerate(e.params))
        sig = KernelSig(e.name, e.name, e.demangled, params)
        for key in (e.name, e.demangled, qualified_name(e.demangled)):
            out.setdefault(key, sig)
    return out



@dataclass(frozen=True)
class Finding:
    """A validation result: an error stops the run, a note is printed and the run goes on."""

    level: str  # "error" | "note"
    message: str
    where: str = ""


class ValidationError(WorkloadError):
    def __init__(self, findings: list[Finding]):
        self.findings = findings
        errors = [f for f in findings if f.level == "error"]
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(first.message + more, where=first.where,
                         hint="\n".join(f"{f.where}: {f.message}" for f in errors[1:]) or None)


def validate(w: Workload, sigs: Mapping[str, KernelSig] | None) -> list[Finding]:
    """Check every launch against the kernels' parameter lists and every buffer's size.

    ``sigs`` None means no PTX was available (a cubin without a ptx key): names and
    arguments are then checked after the module is loaded, from the driver's own lists.
    """
    findings: list[Finding] = []
    values = w.param_values()
    counts = {b.name: w.element_count(b, values) for b in w.buffers}
    for i, lz in enumerate(w.launches):
        where = w._where(f"launch[{i}]")
        w.dims(i, values)
        scalar_values = {}
        for j, a in enumerate(lz.args):
            if isinstance(a, Scalar):
                scalar_values[j] = w.scalar_value(a, values, w._where(f"launch[{i}]",
                                                                     f"args[{j}]"))
        if sigs is None:
            findings.append(Finding("note", f"no PTX for {lz.kernel}: arguments are checked "
                                    "against the loaded module instead", where))
        else:
            sig = sigs.get(lz.kernel)
            if sig is None:
                known = sorted({s.demangled if s.demangled != s.mangled else s.mangled
                                for s in sigs.values()})
                findings.append(Finding("error", f"no kernel named {lz.kernel!r} in the "
                                        f"module (it has: {', '.join(known) or 'none'})",
                                        w._where(f"launch[{i}]", "kernel")))
                continue
            findings += _check_args(w, i, lz, sig, scalar_values, counts)
        findings += _check_counts(w, i, lz, scalar_values, counts)
    return findings


def _check_args(w, i, lz, sig: KernelSig, scalar_values, counts) -> list[Finding]:
    out = []
    kname = sig.demangled if sig.demangled != sig.mangled else sig.mangled
    if len(lz.args) != len(sig.params):
        out.append(Finding("error", f"kernel {kname} takes {len(sig.params)} argument(s), "
                           f"the workload passes {len(lz.args)}",
                           w._where(f"launch[{i}]", "args")))
        return out
    for j, (a, p) in enumerate(zip(lz.args, sig.params)):
        where = w._where(f"launch[{i}]", f"args[{j}]")
        label = f"kernel {kname} argument {j} ({p.describe()})"
        if isinstance(a, BufferArg):
            if p.size != 8 or p.is_pointer is False:
                out.append(Finding("error", f"{label} is not a pointer, but the workload "
                                   f"passes buffer {a.buffer}", where))
                continue
            b = w.buffer(a.buffer)
            pointee = p.pointee
            if pointee and pointee in _POINTEES and b.dtype not in _POINTEES[pointee]:
                out.append(Finding("error", f"{label} points to {pointee}, but buffer "
                                   f"{b.name} is {b.dtype}", where))
        else:
            if p.is_pointer:
                out.append(Finding("error", f"{label} is a pointer, but the workload passes "
                                   f"a scalar {a.tag}", where))
                continue
            if a.size != p.size:
                out.append(Finding("error", f"{label} is {p.size} bytes wide, but the "
                                   f"workload passes {a.tag} ({a.size} bytes)", where))
                continue
            kind = _param_kind(p)
            if kind and (kind == "float") != a.is_float:
                what = "a floating-point" if kind == "float" else "an integer"
                out.append(Finding("error", f"{label} is {what} parameter, but the workload "
                                   f"passes {a.tag}", where))
            elif p.c_type and p.c_type in _C_TYPES and a.tag.startswith("u") != \
                    p.c_type.startswith("unsigned") and _C_TYPES[p.c_type][1] == "int":
                out.append(Finding("note", f"{label}: signedness differs from {a.tag} "
                                   "(same width, passed as is)", where))
    return out


def _param_kind(p: ParamSig) -> str | None:
    if p.c_type and p.c_type in _C_TYPES:
        return _C_TYPES[p.c_type][1]
    if p.ptx_type.startswith("f"):
        return "float"
    if p.ptx_type.startswith(("s", "u")):
        return "int"
    return None  # .b32 and friends say nothing about the kind


def _check_counts(w, i, lz, scalar_values, counts) -> list[Finding]:
    """An integer scalar counts the elements of the buffers passed with it.

    By default a bare parameter name (``{i32 = "n"}``) counts every buffer in the launch;
    ``counts = [...]`` names the buffers it counts when that is not so (a reduction's output,
    a histogram's bins).
    """
    out = []
    buffers = [a.buffer for a in lz.args if isinstance(a, BufferArg)]
    for j, a in enumerate(lz.args):
        if not isinstance(a, Scalar) or a.is_float:
            continue
        if a.counts is not None:
            targets = a.counts
        elif isinstance(a.expr, str) and a.expr.strip().isidentifier():
            targets = tuple(buffers)
        else:
            continue
        value = scalar_values[j]
        for bname in targets:
            if bname not in buffers:
                out.append(Finding("error", f"counts names {bname}, which is not passed to "
                                   f"this launch", w._where(f"launch[{i}]", f"args[{j}]")))
            elif value > counts[bname]:
                out.append(Finding(
                    "error",
                    f"kernel {lz.kernel} argument {j} ({a.tag} {a.expr} = {value}) exceeds "
                    f"the {counts[bname]} elements of buffer {bname}",
                    w._where(f"launch[{i}]", f"args[{j}]")))
    return out


def raise_on_errors(findings: list[Finding]) -> list[Finding]:
    """Raise ``ValidationError`` if any finding is an error; return the notes."""
    if any(f.level == "error" for f in findings):
        raise ValidationError(findings)
    return [f for f in findings if f.level != "error"]


# ---------------------------------------------------------------------------------------
# Host data and the check
# ---------------------------------------------------------------------------------------


def initial_contents(w: Workload, values: Mapping[str, Any] | None = None) -> dict:
    """numpy arrays with each buffer's initial contents."""
    import numpy as np

    values = w.param_values() if values is None else values
    out = {}
    for b in w.buffers:
        n = w.element_count(b, values)
        dt = np.dtype(b.dtype)
        it = b.init
        if it.kind == "zeros":
            arr = np.zeros(n, dt)
        elif it.kind == "fill":
            arr = np.full(n, it.value, dt)
        elif it.kind == "range":
            arr = (it.start + it.step * np.arange(n, dtype=np.float64)).astype(dt)
        elif it.kind == "random":
            rng = np.random.default_rng(it.seed)
            if dt.kind == "f":
                arr = rng.uniform(it.low, it.high, n).astype(dt)
            else:
                hi = it.high if it.high > it.low + 1 else np.iinfo(dt).max
                arr = rng.integers(int(it.low), int(hi), n, dtype=dt, endpoint=True)
        else:  # npy
            arr = _load_npy(it.path, n, w._where(f"buffers.{b.name}", "init.npy"))
            arr = arr.astype(dt, copy=False)
        out[b.name] = np.ascontiguousarray(arr)
    return out


def _load_npy(path: str, n: int, where: str):
    """A .npy file a workload names, of exactly ``n`` elements. Mapped, not read, until its
    header has been checked: a header claiming more than the file holds, or a file far
    larger than the buffer, is one error, not a MemoryError or numpy's ValueError."""
    import numpy as np

    from nvstage.artifacts import open_regular

    try:
        with open_regular(path):  # a FIFO or device: refused unread
            pass
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
    except NvstageError as e:
        raise WorkloadError(e.message, where=where) from None
    except Exception as e:  # numpy's header parser raises ValueError, SyntaxError,
        # tokenize.TokenError, EOFError, ... on a damaged file: all of them mean "not .npy"
        raise WorkloadError(f"cannot read {path} as .npy: {type(e).__name__}: {e}",
                            where=where) from None
    if arr.size != n:
        raise WorkloadError(f"{path} holds {arr.size} elements, the buffer {n}", where=where)
    return np.array(arr).reshape(-1)


@dataclass(frozen=True)
class CheckResult:
    buffer: str
    ok: bool
    max_abs_err: float | None
    mismatches: int
    elements: int
    message: str = ""

    def to_json(self) -> dict:
        return {"buffer": self.buffer, "ok": self.ok, "max_abs_err": self.max_abs_err,
                "mismatches": self.mismatches, "elements": self.elements,
                "message": self.message}


def run_check(w: Workload, initial: Mapping, results: Mapping,
              values: Mapping[str, Any] | None = None) -> list[CheckResult]:
    """Compare each returned buffer with its expected expression over the initial contents."""
    import numpy as np

    values = w.param_values() if values is None else values
    names = {**values, **initial}
    out = []
    for bname, expr in w.check.expect:
        got = np.asarray(results[bname])
        try:
            want = np.asarray(eval_array_expr(expr, names))
            want = np.broadcast_to(want, got.shape)
        except Exception as e:  # a user expression: report it, keep the run's figures
            out.append(CheckResult(bname, False, None, got.size, got.size,
                                   f"cannot evaluate {quote_expr(expr)}: "
                                   f"{type(e).__name__}: {e}"))
            continue
        close = np.isclose(got.astype(np.float64), want.astype(np.float64),
                           rtol=w.check.rtol, atol=w.check.atol)
        bad = int(got.size - np.count_nonzero(close))
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) \
            if got.size else 0.0
        msg = "" if bad == 0 else (f"first mismatch at index {int(np.argmin(close))}: got "
                                   f"{got.reshape(-1)[int(np.argmin(close))]!r}, want "
                                   f"{want.reshape(-1)[int(np.argmin(close))]!r}")
        out.append(CheckResult(bname, bad == 0, err, bad, int(got.size), msg))
    return out


def plan(w: Workload) -> dict:
    """The operations one repetition runs, evaluated (``--dry-run``; ``--json`` prints it)."""
    values = w.param_values()
    doc: dict = {"workload": w.name, "code": {"kind": w.code.kind, "path": str(w.code.path)},
                 "reps": w.reps, "warmup": w.warmup, "buffers": [], "operations": [],
                 "check": [{"buffer": b, "expect": e, "rtol": w.check.rtol,
                            "atol": w.check.atol} for b, e in w.check.expect]}
    for b in w.buffers:
        n = w.element_count(b, values)
        doc["buffers"].append({"name": b.name, "elements": n, "dtype": b.dtype,
                               "bytes": n * DTYPES[b.dtype], "init": b.init.kind})
    for kind, name, li in w.operations():
        if kind == "launch":
            lz = w.launches[li]
            args = [{"buffer": a.buffer} if isinstance(a, BufferArg)
                    else {"type": a.tag, "value": w.scalar_value(a, values, "")}
                    for a in lz.args]
            doc["operations"].append({"op": "launch", "kernel": name, **w.dims(li, values),
                                      "args": args})
        else:
            doc["operations"].append({"op": kind, "buffer": name,
                                      "bytes": w.nbytes(w.buffer(name), values),
                                      "host_memory": "pinned"})
    return doc


def plan_lines(w: Workload) -> list[str]:
    """``plan`` as text, one line per buffer, operation and check."""
    p = plan(w)
    lines = [f"workload {p['workload']}: {p['code']['kind']} {p['code']['path']}",
             f"repetitions {p['reps']} after {p['warmup']} warm-up"]
    lines += [f"buffer {b['name']}: {b['elements']} x {b['dtype']} = {b['bytes']} bytes, "
              f"init {b['init']}" for b in p["buffers"]]
    for step, op in enumerate(p["operations"], 1):
        if op["op"] == "launch":
            args = ", ".join(a["buffer"] if "buffer" in a else f"{a['type']}({a['value']})"
                             for a in op["args"])
            lines.append(f"{step:4d}. launch {op['kernel']} grid={op['grid']} "
                         f"block={op['block']} shared={op['shared']} ({args})")
        else:
            arrow = "host -> device" if op["op"] == "h2d" else "device -> host"
            lines.append(f"{step:4d}. copy {op['buffer']} {arrow}, {op['bytes']} bytes "
                         f"({op['host_memory']})")
    lines += [f"check {c['buffer']} == {c['expect']} (rtol {c['rtol']}, atol {c['atol']})"
              for c in p["check"]]
    return lines


# ---------------------------------------------------------------------------------------
# Getting the code and its signatures (compile when needed; no GPU)
# ---------------------------------------------------------------------------------------


@dataclass
class Prepared:
    """The device code to load and what validation learnt from it."""

    kind: str  # what gets loaded: "cubin" | "fatbin" | "ptx"
    image: bytes
    arch: str
    sigs: dict[str, KernelSig] | None  # None: no PTX to read parameter lists from
    compile_seconds: float | None = None
    build: dict | None = None  # a short summary of the nvstage build, when one ran

    def mangled(self) -> dict[str, str]:
        return {k: s.mangled for k, s in (self.sigs or {}).items()}


def prepare(w: Workload, arch: str, *, toolkit=None) -> Prepared:
    """Compile a source workload for ``arch`` (cubin or fatbin, PTX kept for validation), or
    read a packaged one. Nothing here needs a GPU."""
    import tempfile
    import time

    from nvstage.artifacts import read_regular

    code = w.code
    if code.kind == "source":
        from nvstage.errors import StageFailed
        from nvstage.compiler.options import CompileOptions
        from nvstage.compiler.driver import compile as run_compile

        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="nvstage-run-") as tmp:
            # -o into the temporary folder: nvcc would leave NAME.cubin beside the source.
            opts = CompileOptions(archs=(arch,), stop=code.stop, defines=code.defines,
                                  include_dirs=code.include_dirs,
                                  output=str(Path(tmp, f"{Path(code.path).stem}.{code.stop}")))
            try:
                build = run_compile(code.path, opts, toolkit=toolkit, keep=Path(tmp, "keep"),
                                    cwd=Path(code.path).parent)
            except StageFailed as e:
                raise without_temp_keep(e, code, arch) from None
            image_art = build.artifact(code.stop)
            ptx_art = build.artifact("ptx")
            if image_art is None:
                from nvstage.errors import ArtifactError

                raise ArtifactError(f"compiling {code.path} for {arch} left no {code.stop}")
            image = read_regular(image_art.path)
            ptx = read_regular(ptx_art.path).decode(errors="replace") if ptx_art else None
        summary = {"source": code.path, "options": opts.to_json(),
                   "stages": len(build.runs), "wall_seconds": build.wall_seconds,
                   "toolkit": build.toolkit.to_json()}
        return Prepared(code.stop, image, arch, _signatures(ptx, code.path) if ptx else None,
                        time.perf_counter() - t0, summary)
    # Packaged code a workload names: regular files only, read with a bound.
    image = read_regular(code.path, what=code.kind)
    ptx_text, ptx_path = None, code.path
    if code.kind == "ptx":
        ptx_text = image.decode(errors="replace")
    elif code.ptx:
        ptx_path = code.ptx
        ptx_text = read_regular(code.ptx, what="PTX file").decode(errors="replace")
    return Prepared(code.kind, image, arch,
                    _signatures(ptx_text, ptx_path) if ptx_text else None)


def _signatures(ptx_text: str, path: str) -> dict[str, KernelSig]:
    from nvstage.errors import ArtifactError

    try:
        return kernel_signatures(ptx_text)
    except ArtifactError as e:  # the PTX parser knows no file name
        raise ArtifactError(f"{path}: {e.message}", hint=e.hint) from None


def without_temp_keep(e, code: CodeSpec, arch: str):
    """A stage failed while compiling a workload's source: its keep folder was temporary and
    is deleted on the way out, so the error must not send the user there. Say instead how
    to compile the same thing with the files kept."""
    import shlex

    argv = ["nvstage", "compile", code.path, "--arch", arch, f"--{code.stop}"]
    argv += [f"-D{d}" for d in code.defines] + [f"-I{i}" for i in code.include_dirs]
    e.keep_dir = None
    e.hint = ("the workload's build ran in a temporary folder, now removed; to keep what "
              f"the earlier stages produced: {shlex.join(argv)} --keep-dir DIR")
    return e


def load_and_validate(path_or_workload, arch: str, *, toolkit=None):
    """(workload, prepared, notes): parse, compile and validate; raises on any error."""
    w = (path_or_workload if isinstance(path_or_workload, Workload)
         else Workload.from_toml(path_or_workload))
    w.param_values()  # parameter errors first: they name the [params] key
    prep = prepare(w, arch, toolkit=toolkit)
    notes = raise_on_errors(validate(w, prep.sigs))
    return w, prep, notes
