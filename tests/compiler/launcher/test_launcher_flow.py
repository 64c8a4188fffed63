"""The launcher is one flow (issue 42): a ``Command`` goes through the resident hit, the hit
here, the hand-over and the staged run, and an ``Outcome`` comes back; the resident's child
runs the same flow with its ``Hooks``. State travels in those values, never in a module's
globals set by another module: read from the source (as tests/test_imports.py reads imports),
no module of nvstage assigns, or changes in place, an attribute of another of its modules."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import nvstage
from nvstage.compiler.launcher import flow

SRC = Path(nvstage.__file__).parent

# Methods that change a list, dict or set in place (``mod.ASKED.append(x)`` sets state too).
_CHANGES = {"append", "extend", "insert", "pop", "remove", "clear", "update", "add", "discard",
            "setdefault", "popitem", "__setitem__", "__delitem__"}


def _is_module(dotted: str, src: Path) -> bool:
    parts = dotted.split(".")
    if parts[0] != "nvstage":
        return False
    path = src.joinpath(*parts[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imported(tree: ast.AST, src: Path) -> tuple[set[str], set[str]]:
    """The names a module binds to nvstage's modules (``import a.b as c``, ``from a import
    b`` where ``a.b`` is a module), and those it binds to what another module of nvstage
    holds (``from a.b import NAME``)."""
    modules, held = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if _is_module(a.name, src):
                    modules.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and \
                node.module.split(".")[0] == "nvstage":
            for a in node.names:
                ours = _is_module(f"{node.module}.{a.name}", src)
                (modules if ours else held).add(a.asname or a.name)
    return modules, held


def _root(node: ast.AST) -> ast.AST:
    """``mod`` of ``mod.a.b[...]``: what an attribute or subscript chain starts from."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _of_module(target: ast.AST, modules: set[str], held: set[str]) -> bool:
    """Whether ``target`` is another module's (``mod.X``, ``mod.X[...]``, or ``NAME`` and
    ``NAME[...]`` imported from it)."""
    root = _root(target)
    if not isinstance(root, ast.Name):
        return False
    if root.id in held:
        return True
    return root.id in modules and any(isinstance(n, ast.Attribute) for n in ast.walk(target))


def module_writes(src: Path) -> list[str]:
    """``file:line: code`` of each place a module of ``src`` sets another module's state."""
    found = []
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        modules, held = _imported(tree, src)
        for node in ast.walk(tree):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                # (A name imported from a module and bound again is this module's own.)
                targets = [t for t in node.targets if not isinstance(t, ast.Name)]
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target] if not isinstance(node.target, ast.Name) else []
            elif isinstance(node, ast.Delete):
                targets = [t for t in node.targets if not isinstance(t, ast.Name)]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    node.func.attr in _CHANGES:
                targets = [node.func.value]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("setattr", "delattr") and node.args and \
                    isinstance(node.args[0], ast.Name) and node.args[0].id in modules:
                targets = [ast.Attribute(value=node.args[0], attr="?")]
            for t in targets:
                if _of_module(t, modules, held):
                    found.append(f"{path.relative_to(src)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_sets_another_modules_state():
    assert module_writes(SRC) == []


def test_the_reader_finds_what_the_launcher_did_before_its_flow(tmp_path):
    # The three ways the launcher was wired before (cli/bare.py, the resident's child):
    # each one is found, and a module's own state and the standard library's are not.
    pkg = tmp_path / "nvstage"
    (pkg / "cli").mkdir(parents=True)
    for name in ("__init__.py", "cli/__init__.py", "cli/launcher.py", "cli/other.py"):
        (pkg / name).write_text("ASKED = []\n_identity = []\non_answered = None\n")
    (pkg / "cli" / "bare.py").write_text(
        "import sys\nfrom nvstage.cli import launcher\nfrom nvstage.cli import other as rec\n"
        "from nvstage.cli.launcher import ASKED\n"
        "launcher.ASKED.append(1)\nlauncher.on_answered = print\n"
        "rec._identity[:] = [2]\nsetattr(rec, 'x', 3)\n"
        "sys.path.append('/')\nASKED.append(4)\nmine = []\nmine.append(5)\n"
        "launcher.is_nvcc('nvcc')\n")
    found = module_writes(pkg)
    assert sorted(f.split(": ", 1)[1] for f in found) == sorted([
        "launcher.ASKED.append(1)", "launcher.on_answered = print", "rec._identity[:] = [2]",
        "setattr(rec, 'x', 3)", "ASKED.append(4)"])


def test_the_flow_is_one_function_through_its_four_steps(tmp_path):
    # The steps a Command takes, told by hooks: a resident hit ends it at once; a resident
    # that looked and found nothing (MISSED) skips the hit here; a hand-over's status is the
    # command's; the child of the resident takes none of the resident's steps.
    from nvstage.compiler.launcher.resident.ask import MISSED

    cmd = flow.Command(["nvcc", "-c", "a.cu"], str(tmp_path), dict(os.environ))
    said = flow.launch(cmd, flow.Hooks(ask=lambda c: True))
    assert (said.code, said.how, said.done) == (0, "resident hit", True)
    steps: list[str] = []
    hooks = flow.Hooks(ask=lambda c: steps.append("ask") or MISSED,
                       hand_over=lambda c: steps.append("hand over") or 3,
                       start_resident=lambda c: steps.append("start"))
    said = flow.launch(cmd, hooks)
    assert (said.code, said.how, said.done, steps) == (3, "handed over", True,
                                                       ["ask", "hand over"])
