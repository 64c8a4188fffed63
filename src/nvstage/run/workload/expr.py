"""The bounded evaluator behind every expression in a workload or cost file.

``"(n + 255) / 256"`` and ``"a * x + y"`` are parsed with ``ast`` and walked over a small set of
operators, functions and (in checks) numpy calls, never ``eval``. What an expression may cost
is bounded whoever wrote the file: its length, its depth, the size of its integers.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

from nvstage.errors import ExprError

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


def parse_expr(text: str) -> ast.Expression:
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
        value = _eval(parse_expr(expr), names)
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

    return _eval(parse_expr(expr), {**names, "np": np, "numpy": np}, numpy_mod=np)
