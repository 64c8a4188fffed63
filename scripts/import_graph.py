"""The compiler package's rooms, floors, arrows and circles, read from its imports.

    python scripts/import_graph.py [SRC_FOLDER]     (default: src/nvstage of this checkout)

A room is a folder directly under ``compiler/`` (under ``cache/``, each of its folders) or a
module alone at the top. An arrow is a room importing another, at the top of a module or inside
a function alike. A room's floor is one above the highest room it imports (floor 1 imports no
other room); a circle is rooms that import each other, and then has no floor.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SPLIT = ("cache",)  # folders whose own folders are rooms


def room_of(base: Path, rel: tuple[str, ...]) -> str | None:
    """The room of a module or package given by its parts under ``compiler/``, e.g.
    ('cache', 'stage', 'lookup') -> 'cache/stage'."""
    if not rel:
        return None
    if rel[0] in SPLIT and len(rel) > 1 and (base / rel[0] / rel[1]).is_dir():
        return f"{rel[0]}/{rel[1]}"
    return rel[0]


def rooms(src: Path) -> dict[str, set[str]]:
    """room -> the rooms it imports."""
    base = src / "compiler"
    graph: dict[str, set[str]] = {}
    for path in sorted(base.rglob("*.py")):
        rel = path.relative_to(base).with_suffix("").parts
        me = room_of(base, rel if rel[-1] != "__init__" else rel[:-1])
        if me is None:
            continue
        graph.setdefault(me, set())
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                parts = name.split(".")
                if parts[:2] != ["nvstage", "compiler"] or len(parts) < 3:
                    continue
                rest = tuple(parts[2:])
                # a name imported from a module is not a module: keep the longest file that exists
                while rest and not ((base / Path(*rest)).with_suffix(".py").exists()
                                    or (base / Path(*rest)).is_dir()):
                    rest = rest[:-1]
                other = room_of(base, rest)
                if other and other != me:
                    graph[me].add(other)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one room (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
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
