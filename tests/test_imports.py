"""No import runs against the flow (compile, inspect, run, model, check, report, cli), read from
the source: a lazy import inside a function counts as much as one at the top."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import nvstage

SRC = Path(nvstage.__file__).parent

# package -> the packages (and outside libraries) it must never import, lazily or not.
FORBIDDEN = {
    "compiler": ("run", "model", "check", "report", "cli"),
    "inspect": ("run", "model", "check", "report", "cli"),
    "hw": ("compiler", "inspect", "run", "model", "check", "report", "cli"),
    "run": ("model", "check", "report", "cli"),
    "model": ("check", "report", "cli"),
    "check": ("model", "report", "cli"),
    "report": ("cli",),
}


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return names


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _breaches(files, forbidden) -> list[str]:
    return sorted({f"{p.relative_to(SRC)}: {name}" for p in files for name in imported(p)
                   if any(_under(name, m) for m in forbidden)})


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_no_package_imports_a_later_stage(package):
    files = (SRC / package).rglob("*.py")
    assert not _breaches(files, [f"nvstage.{m}" for m in FORBIDDEN[package]])


def test_nothing_below_the_cli_imports_it():
    files = [p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] not in ("cli",)
             and p.name != "__main__.py"]
    assert not _breaches(files, ["nvstage.cli"])


def test_the_cli_draws_nothing_itself():
    # Tables, consoles and progress bars are report.terminal's: a command parses its options,
    # calls the library and hands the result to a renderer.
    assert not _breaches((SRC / "cli").rglob("*.py"), ["rich"])


def test_the_rules_read_real_imports():
    # The reader itself: a lazy import inside a function is found.
    assert "nvstage.report.terminal.console" in imported(SRC / "cli" / "common.py")
    assert "nvstage.compiler.record" in imported(SRC / "inspect" / "gather.py")
