"""The compiler package stands before running, modelling and checking in the flow: it imports
none of them (nor the CLI or the renderers), lazily or not."""

from __future__ import annotations

import ast
from pathlib import Path

import nvstage.compiler

LATER = ("nvstage.run", "nvstage.model", "nvstage.check", "nvstage.report", "nvstage.cli")


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def test_the_compiler_imports_nothing_from_later_stages():
    root = Path(nvstage.compiler.__file__).parent
    wrong = {f"{p.relative_to(root)}: {name}"
             for p in root.rglob("*.py") for name in imported(p)
             if any(name == m or name.startswith(m + ".") for m in LATER)}
    assert not wrong, sorted(wrong)
