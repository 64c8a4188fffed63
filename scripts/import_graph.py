"""The compiler package's rooms, floors, arrows and circles, read from its imports.

    python scripts/import_graph.py [SRC_FOLDER]     (default: src/nvstage of this checkout)

A room is a folder directly under ``compiler/`` (under ``cache/``, each of its folders; ``cache``
alone is its ``__init__``) or a module alone at the top. An arrow is a room importing another, at the top of a module or inside
a function alike. A room's floor is one above the highest room it imports (floor 1 imports no
other room); a circle is rooms that import each other, and then has no floor.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SPLIT = ("cache",)  # folders whose own folders are rooms


def imported(path: Path) -> set[str]:
    """Every name a module imports, at its top or inside a function alike; ``from a import b``
    gives both ``a`` and ``a.b``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def module_name(src: Path, path: Path) -> str:
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(src: Path) -> dict[str, set[str]]:
    """Module -> the modules of the package at ``src`` it imports. ``from a.b import c`` is an
    arrow to ``a.b.c`` when that is a module, else to ``a.b``."""
    paths = {module_name(src, p): p for p in src.rglob("*.py")}
    top = src.name

    def module_of(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for mod, path in paths.items():
        found = {module_of(n) for n in imported(path) if n == top or n.startswith(top + ".")}
        graph[mod] = {m for m in found if m is not None and m != mod}
    return graph


def room_of(module: str) -> str | None:
    """The room of a module of ``nvstage.compiler``: 'nvstage.compiler.cache.stage.stage_cache' ->
    'cache/stage'; None outside the package or for its own ``__init__``."""
    parts = module.split(".")
    if parts[:2] != ["nvstage", "compiler"] or len(parts) < 3:
        return None
    rest = parts[2:]
    if rest[0] in SPLIT and len(rest) > 1:
        return f"{rest[0]}/{rest[1]}"
    return rest[0]


def rooms(src: Path) -> dict[str, set[str]]:
    """Room of ``compiler/`` -> the rooms it imports."""
    graph: dict[str, set[str]] = {}
    for mod, targets in module_graph(src).items():
        me = room_of(mod)
        if me is None:
            continue
        graph.setdefault(me, set()).update(
            r for r in map(room_of, targets) if r is not None and r != me)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one room (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """room -> floor; the rooms of one circle share a floor, as one room would."""
    group = {r: r for r in graph}
    for c in circles(graph):
        for r in c:
            group[r] = c[0]
    up: dict[str, set[str]] = {}
    for r, others in graph.items():
        up.setdefault(group[r], set()).update(group[o] for o in others if group[o] != group[r])
    memo: dict[str, int] = {}

    def floor(g: str) -> int:
        if g not in memo:
            memo[g] = 1 + max((floor(o) for o in up.get(g, ())), default=0)
        return memo[g]

    return {r: floor(group[r]) for r in graph}


def _module_of(paths: dict, name: str) -> str | None:
    while name and name not in paths:
        name = name.rpartition(".")[0]
    return name or None


def _typing_only(stmt: ast.stmt) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``) with no ``else``: for annotations."""
    if not isinstance(stmt, ast.If) or stmt.orelse:
        return False
    test = stmt.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def eager_graph(src: Path) -> dict[str, set[str]]:
    """Module -> the modules of the package its top-level statements import: what importing
    it loads (a module's package ``__init__`` files run too). Imports inside a function or a
    class body are left out, and so are those under ``if TYPE_CHECKING:`` (never run)."""
    paths = {module_name(src, p): p for p in src.rglob("*.py")}
    top = src.name
    graph = {}
    for mod, path in paths.items():
        found = set()
        for stmt in ast.parse(path.read_text(), str(path)).body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or \
                    _typing_only(stmt):
                continue
            for node in ast.walk(stmt):
                if isinstance(node, ast.Import):
                    found.update(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module:
                    found.add(node.module)
                    found.update(f"{node.module}.{a.name}" for a in node.names)
        targets = {_module_of(paths, n) for n in found if n == top or n.startswith(top + ".")}
        parts = mod.split(".")
        targets.update(".".join(parts[:i]) for i in range(1, len(parts)))
        graph[mod] = {t for t in targets if t and t != mod}
    return graph


def loaded_by(eager: dict[str, set[str]], module: str) -> set[str]:
    """Every module importing ``module`` loads, through any chain of top-level imports."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        for other in eager.get(todo.pop(), ()):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


def needless_lazy_imports(src: Path) -> list[str]:
    """``file:line module`` for each import inside a function of a module of the package that
    importing the module loads anyway: it defers nothing, and hides what the module uses."""
    eager = eager_graph(src)
    paths = {module_name(src, p): p for p in src.rglob("*.py")}
    top = src.name
    out = set()
    for mod, path in paths.items():
        loaded = loaded_by(eager, mod)
        tree = ast.parse(path.read_text(), str(path))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [_module_of(paths, f"{node.module}.{a.name}") for a in node.names]
                targets = {_module_of(paths, n) for n in names
                           if n and (n == top or n.startswith(top + "."))}
                if targets and all(t in loaded for t in targets):
                    out.add(f"{path.relative_to(src)}:{node.lineno} "
                            + ", ".join(sorted(t for t in targets if t)))
    return sorted(out)


def main(argv: list[str]) -> int:
    src = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "src" / "nvstage"
    graph = rooms(src)
    level = floors(graph)
    arrows = sum(len(v) for v in graph.values())
    top = max(level.values(), default=0)
    print(f"{len(graph)} rooms on {top} floors, {arrows} arrows, "
          f"{len(circles(graph))} circles")
    for f in range(top, 0, -1):
        print(f"floor {f}: " + ", ".join(sorted(r for r, n in level.items() if n == f)))
    for c in circles(graph):
        print("circle: " + " <-> ".join(c))
    for r in sorted(graph):
        print(f"  {r} -> {', '.join(sorted(graph[r])) or '(nothing)'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
