"""A ``@triton.jit`` kernel read from its Python file without running the file: what the kernel
needs from its module, found in the module's AST.

Triton's published tutorials import torch and ask the GPU driver at import time (``DEVICE =
triton.runtime.driver.active.get_active_torch_device()``), then run benchmarks: importing the
file to find a kernel fails on a machine without torch or a GPU, and runs code that has nothing
to do with the kernel. Here the kernel is read as text, with what it refers to:

- imports at the module's top level that bind a name it uses (``import triton.language as
  tl``, ``from triton import jit``);
- module-level constants it uses, when their value is built from literals, operators, other
  such constants and calls of ``tl.constexpr`` (``BLOCK = tl.constexpr(128)``);
- other ``@triton.jit`` functions of the module it calls, with what they need in turn.

A name it uses that none of these provides (a value computed by other code at import time, a
name bound inside ``if``/``try``) is said in one line: that kernel needs the module run.

``load_extracted`` runs only those statements (the user's own code, as Triton would run it),
in a fresh namespace, compiled with the file's name and each statement at its own line: Triton
reads the function's text and line numbers from the file itself (``inspect.getsourcelines``),
so the kernel's IR, PTX and line table are what importing the whole module gives. Decorators
other than ``jit`` (``autotune``, ``heuristics``) are left out: the options come from the
command line.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import sys
from dataclasses import dataclass
from pathlib import Path

from nvstage.errors import UsageError

_BUILTINS = frozenset(dir(builtins))
_CONSTEXPR_CALLS = {"constexpr"}  # tl.constexpr(...), triton.language.constexpr(...)


@dataclass(frozen=True)
class Extracted:
    """The statements of a file a kernel needs, by line range, and the text that runs them."""

    path: Path
    kernel: str
    kept: tuple[tuple[int, int], ...]  # (first line, last line), 1-based, in file order
    helpers: tuple[str, ...]  # other @triton.jit functions it calls
    text: str  # the file with every other line blank


def _is_jit(dec: ast.expr) -> bool:
    """``@triton.jit``, ``@jit``, ``@triton.jit(...)``, ``@tl.core.jit``..."""
    target = dec.func if isinstance(dec, ast.Call) else dec
    return (isinstance(target, ast.Attribute) and target.attr == "jit") or \
        (isinstance(target, ast.Name) and target.id == "jit")


def _jit_functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)
            and any(_is_jit(d) for d in n.decorator_list)}


def jit_function_names(path: Path) -> list[str]:
    """The ``@triton.jit`` functions a file defines at its top level, read from its AST."""
    return sorted(_jit_functions(_parse(path)[0]))


def jit_functions(path: Path) -> dict[str, ast.FunctionDef]:
    """The ``@triton.jit`` functions a file defines at its top level, by name, as its AST
    holds them (nothing run: ``model --init`` reads a kernel's parameters from them)."""
    return _jit_functions(_parse(path)[0])


def _parse(path: Path) -> tuple[ast.Module, str]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"{path.name} cannot be read as Python text: {e}") from None
    try:
        return ast.parse(text, filename=str(path)), text
    except SyntaxError as e:
        raise UsageError(f"{path.name} is not valid Python: line {e.lineno}: {e.msg}") from None


def _used_names(node: ast.AST, bound: set[str]) -> list[str]:
    """Names ``node`` reads that it does not bind itself, in order of first use."""
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in bound:
            out.append(n.id)
    return list(dict.fromkeys(out))


def _bound_in_function(fn: ast.FunctionDef) -> set[str]:
    a = fn.args
    bound = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
    bound |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            bound.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.Lambda)) and n is not fn:
            if isinstance(n, ast.FunctionDef):
                bound.add(n.name)
    return bound


def _bound_at_module_level(tree: ast.Module) -> set[str]:
    """Every name the module's own code binds, in nested statements too (``if``, ``try``,
    ``with``, ``for``), not inside functions or classes."""
    out: set[str] = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(a.asname or a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        todo.extend(ast.iter_child_nodes(node))
    return out


def _constant_ok(value: ast.expr) -> bool:
    """A constant built from literals, names, operators and ``constexpr(...)`` calls."""
    for n in ast.walk(value):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name not in _CONSTEXPR_CALLS:
                return False
        elif not isinstance(n, (ast.Constant, ast.Name, ast.Attribute, ast.BinOp, ast.UnaryOp,
                                ast.BoolOp, ast.Compare, ast.Tuple, ast.List, ast.Load,
                                ast.operator, ast.unaryop, ast.boolop, ast.cmpop,
                                ast.keyword)):
            return False
    return True


def extract(path: str | Path, kernel: str) -> Extracted:
    """What ``kernel`` (a ``@triton.jit`` function of ``path``) needs from its module, read
    from the AST; ``UsageError`` naming the first name that only running the module gives."""
    path = Path(path)
    tree, text = _parse(path)
    jits = _jit_functions(tree)
    if kernel not in jits:
        raise UsageError(f"{path.name} defines no @triton.jit function named {kernel!r}",
                         hint=f"its Triton kernels: {', '.join(sorted(jits)) or 'none'}")
    # What each module-level statement binds: imports, simple assignments, functions.
    binders: dict[str, ast.stmt] = {}
    # Every import binding a name is kept (`import triton` and `import triton.language` both
    # bind triton, the second loading a submodule), with only the names needed from it.
    importers: dict[str, list[ast.stmt]] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.ImportFrom) and stmt.module == "__future__":
            continue  # kept whole below: it changes how the rest compiles
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if alias.name == "*":
                    continue
                bound = alias.asname or alias.name.split(".")[0]
                binders[bound] = stmt
                importers.setdefault(bound, []).append(stmt)
        elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name)
                                                  for t in stmt.targets):
            for t in stmt.targets:
                binders[t.id] = stmt
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                and stmt.value is not None:
            binders[stmt.target.id] = stmt
        elif isinstance(stmt, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            binders[stmt.name] = stmt
    kept: dict[int, ast.stmt] = {id(st): st for st in tree.body if isinstance(st, ast.ImportFrom)
                                 and st.module == "__future__"}
    imported: dict[int, set[str]] = {}  # an import kept: the names it must still bind
    # A `from m import *` may bind anything: kept, and a name found nowhere left to Triton.
    stars = [st for st in tree.body if isinstance(st, ast.ImportFrom)
             and any(a.name == "*" for a in st.names)]
    kept.update((id(st), st) for st in stars)
    elsewhere = _bound_at_module_level(tree)
    helpers: list[str] = []
    todo: list[tuple[str, str]] = []  # (name, who uses it)

    def need(node: ast.AST, bound: set[str], who: str) -> None:
        todo.extend((n, who) for n in _used_names(node, bound))

    def keep_function(fn: ast.FunctionDef) -> None:
        kept[id(fn)] = fn
        bound = _bound_in_function(fn)
        for dec in fn.decorator_list:
            if _is_jit(dec):
                need(dec, set(), fn.name)
        a = fn.args
        for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
            if x.annotation is not None:
                need(x.annotation, set(), fn.name)
        for d in [*a.defaults, *a.kw_defaults]:
            if d is not None:
                need(d, set(), fn.name)
        for stmt in fn.body:
            need(stmt, bound, fn.name)

    keep_function(jits[kernel])
    while todo:
        name, who = todo.pop(0)
        stmt = binders.get(name)
        if stmt is not None and id(stmt) in kept and name not in importers:
            continue
        if stmt is None:
            if name in _BUILTINS or stars or name not in elsewhere:
                continue  # a builtin, or bound nowhere: Triton's own error names it
            raise UsageError(f"{kernel} needs its module run: {who} uses {name!r}, which "
                             f"{path.name} binds only by running code (not a top-level "
                             "import, constant or @triton.jit function)",
                             hint="move the name into a top-level import or constant, or "
                                  "pass it to the kernel as a parameter")
        if isinstance(stmt, ast.FunctionDef) and stmt.name in jits:
            helpers.append(stmt.name)
            keep_function(stmt)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for st in importers[name]:
                kept[id(st)] = st
                imported.setdefault(id(st), set()).add(name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and _constant_ok(stmt.value):
            kept[id(stmt)] = stmt
            need(stmt.value, set(), name)
        else:
            raise UsageError(f"{kernel} needs its module run: {who} uses {name!r}, which "
                             f"{path.name} computes at line {stmt.lineno} by running code",
                             hint="make it a literal or tl.constexpr(...) constant, or pass "
                                  "it to the kernel as a parameter")
    ranges, lines = [], text.splitlines(keepends=True)
    for stmt in tree.body:
        if id(stmt) not in kept:
            continue
        if id(stmt) in imported:  # `import torch, triton`: only what is needed, same line
            lines[stmt.lineno - 1] = _only(stmt, imported[id(stmt)]) + "\n"
            ranges.append((stmt.lineno, stmt.lineno))
        elif isinstance(stmt, ast.FunctionDef):  # its jit decorator and the def on; no other
            ranges += [(d.lineno, d.end_lineno) for d in stmt.decorator_list if _is_jit(d)]
            ranges.append((stmt.lineno, stmt.end_lineno))  # lineno: the def line itself
        else:
            ranges.append((stmt.lineno, stmt.end_lineno))
    out = ["\n" if not line.endswith("\r\n") else "\r\n" for line in lines]
    for a, b in ranges:
        out[a - 1:b] = lines[a - 1:b]
    return Extracted(path, kernel, tuple(ranges), tuple(helpers), "".join(out))


def _only(stmt: ast.Import | ast.ImportFrom, names: set[str]) -> str:
    """The import statement binding only ``names``, on one line."""
    import copy

    st = copy.copy(stmt)
    st.names = [a for a in stmt.names if (a.asname or a.name.split(".")[0]) in names]
    return ast.unparse(st)


def load_extracted(ex: Extracted, module_name: str):
    """Run the kept statements in a fresh namespace and return the ``JITFunction``."""
    import types

    from triton.runtime.jit import JITFunction

    module = types.ModuleType(module_name)
    module.__file__ = str(ex.path)
    sys.modules[module_name] = module  # Triton resolves the kernel's globals through it
    sys.path.insert(0, str(ex.path.parent))  # as `python FILE` would: siblings import
    try:
        code = compile(ex.text, str(ex.path), "exec")
        exec(code, module.__dict__)  # noqa: S102  (the user's own kernel, as Triton runs it)
    except BaseException as e:
        sys.modules.pop(module_name, None)
        if isinstance(e, KeyboardInterrupt):
            raise
        first = (str(e).strip().splitlines() or [""])[0][:300]
        raise UsageError(f"{ex.path.name}: what {ex.kernel} needs failed to run: "
                         f"{type(e).__name__}: {first}",
                         hint="only the kernel, its @triton.jit helpers and the imports and "
                              "constants they use are run") from None
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(str(ex.path.parent))
    fn = module.__dict__.get(ex.kernel)
    if not isinstance(fn, JITFunction):
        raise UsageError(f"{ex.path.name}: {ex.kernel} is not a @triton.jit function once "
                         "defined", hint="decorate it with @triton.jit")
    return fn
