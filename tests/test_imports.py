"""No import runs against the flow (compile, inspect, run, model, check, report, cli), no two
modules import each other (through any chain), the warm path imports only the base, and no
module outgrows one reader: read from the source, where a lazy import inside a function
counts as much as one at the top."""

from __future__ import annotations

import ast
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import nvstage

SRC = Path(nvstage.__file__).parent


def _script(name: str):
    # The rules read the imports as the project's own script does (scripts/import_graph.py).
    path = SRC.parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_graph = _script("import_graph")
imported, module_graph, circles = _graph.imported, _graph.module_graph, _graph.circles

# package -> the packages (and outside libraries) it must never import, lazily or not.
FORBIDDEN = {
    "compiler": ("inspect", "run", "model", "check", "report", "cli"),
    "inspect": ("run", "model", "check", "report", "cli"),
    "hw": ("compiler", "inspect", "run", "model", "check", "report", "cli"),
    "run": ("model", "check", "report", "cli"),
    "model": ("check", "report", "cli"),
    "check": ("model", "report", "cli"),
    "report": ("cli",),
}

# The only import circles allowed: a named constructor that must import its reader lazily,
# since the reader imports the constructor's own module (importer -> imported: the reason).
LAZY_CONSTRUCTORS = {
    ("nvstage.run.workload.spec", "nvstage.run.workload.reader"):
        "Workload.from_toml/from_dict build a Workload with the reader, which makes the "
        "spec's records",
    ("nvstage.model.estimate", "nvstage.model.calibrate"):
        "estimate's fitted() calibrates from a run report; calibrate fits the estimate's "
        "presets",
}

# The hit path (a whole command answered from the cache) by name: these modules, and every
# package __init__ on their way (each importing nothing), may import of nvstage only the base.
HIT_PATH = (
    "nvstage.compiler.store.zstd",
    "nvstage.compiler.store.presence",
    "nvstage.compiler.store.layout",
    "nvstage.compiler.nvcc.environment",
    "nvstage.compiler.nvcc.host_flags",
    "nvstage.compiler.toolkit.nvcc_lookup",
    "nvstage.compiler.buildlog.current",
    "nvstage.compiler.cache.command.command_key",
    "nvstage.compiler.cache.command.entry",
    "nvstage.compiler.cache.command.answer",
    "nvstage.compiler.cache.command.compile_answer",
    "nvstage.compiler.pipeline.leftovers",
    "nvstage.compiler.launcher.resident.ask",
    "nvstage.compiler.launcher.resident.handover",
)
HIT_PACKAGES = (
    "nvstage.compiler",
    "nvstage.compiler.buildlog",
    "nvstage.compiler.cache",
    "nvstage.compiler.cache.command",
    "nvstage.compiler.launcher",
    "nvstage.compiler.launcher.resident",
    "nvstage.compiler.nvcc",
    "nvstage.compiler.pipeline",
    "nvstage.compiler.store",
    "nvstage.compiler.toolkit",
)
BASE = ("nvstage.fsio", "nvstage.paths")

MAX_LINES = 700
# Modules allowed past MAX_LINES, each with its reason; an entry that no longer needs to be
# here fails the test too, so the list only shrinks.
OVER_MAX: dict[str, str] = {}


def _under(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _breaches(files, forbidden) -> list[str]:
    return sorted({f"{p.relative_to(SRC)}: {name}" for p in files for name in imported(p)
                   if any(_under(name, m) for m in forbidden)})


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of nvstage it imports (lazily or not)."""
    return module_graph(SRC)



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


def test_no_two_modules_import_each_other():
    graph = import_graph()
    for importer, target in LAZY_CONSTRUCTORS:
        assert target in graph[importer], f"{importer} -> {target} is no edge: drop it"
        graph[importer].discard(target)
    assert circles(graph) == []
    assert len(LAZY_CONSTRUCTORS) <= 2


def _file(module: str, package: bool = False) -> Path:
    rel = Path(*module.split(".")[1:])
    return SRC / rel / "__init__.py" if package else (SRC / rel).with_suffix(".py")


def _hit_path_allows(name: str) -> bool:
    return (name in ("nvstage", "nvstage.__version__") or any(_under(name, m) for m in BASE)
            or name in HIT_PACKAGES or any(_under(name, m) for m in HIT_PATH))


def test_the_hit_path_imports_the_base_only():
    found = {name for m in HIT_PATH for name in imported(_file(m)) if _under(name, "nvstage")}
    assert sorted(n for n in found if not _hit_path_allows(n)) == []
    # Every package on the way is a docstring and nothing else.
    for package in HIT_PACKAGES:
        assert imported(_file(package, package=True)) == set(), package
    # The base imports no more of nvstage than itself (paths: errors, for its one raise).
    assert {n for n in imported(SRC / "fsio.py") if _under(n, "nvstage")} == set()
    assert {n for n in imported(SRC / "paths.py") if _under(n, "nvstage")} == \
        {"nvstage.errors", "nvstage.errors.CacheError"}


def test_a_step_that_is_not_nvcc_imports_the_base_only():
    # A link of a big project goes through the launcher's tool_step: as light as a hit.
    found = {n for n in imported(SRC / "compiler" / "launcher" / "tool_step.py")
             if _under(n, "nvstage")}
    assert sorted(n for n in found if not _hit_path_allows(n)) == []


def test_no_module_outgrows_one_reader():
    sizes = {str(p.relative_to(SRC)): len(p.read_text().splitlines())
             for p in SRC.rglob("*.py")}
    assert sorted(m for m, n in sizes.items() if n > MAX_LINES and m not in OVER_MAX) == []
    assert sorted(m for m in OVER_MAX if sizes.get(m, 0) <= MAX_LINES) == []


def test_every_cli_module_is_thin():
    # Options, one library call, one renderer.
    assert sorted(p.name for p in (SRC / "cli").glob("*.py")
                  if len(p.read_text().splitlines()) > 150) == []


def test_the_rules_read_real_imports():
    # The reader itself: a lazy import inside a function is found.
    assert "nvstage.report.terminal.console" in imported(SRC / "cli" / "common.py")
    assert "nvstage.compiler.manifest.model" in imported(SRC / "inspect" / "gather.py")
    # And the circle finder finds a circle through a lazy import.
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# The compiler package's rooms (scripts/import_graph.py), floor by floor from the ground: a
# room imports only rooms on lower floors. A new arrow that climbs, or a room moved, fails here
# and is decided in docs/architecture.md.
COMPILER_FLOORS = {
    "store": 1, "cache": 1,
    "cache/local": 2,
    "nvcc": 3, "toolkit": 3,
    "manifest": 4,
    "buildlog": 5,
    "cache/command": 6, "cache/remote": 6,
    "cache/stage": 7, "dist": 7,
    "pipeline": 8,
    "launcher": 9, "nvrtc": 9, "triton": 9,
}


def test_the_compiler_rooms_keep_their_floors():
    rooms = _graph.rooms(SRC)
    assert _graph.circles(rooms) == []
    assert _graph.floors(rooms) == COMPILER_FLOORS


def test_a_lazy_import_defers_a_load():
    # An import stands at a module's top unless importing it there would load what importing
    # the module does not (a start-up path, an optional feature): a lazy import of a module
    # that is loaded anyway defers nothing and hides what the module uses.
    assert _graph.needless_lazy_imports(SRC) == []


def test_an_import_for_annotations_only_loads_nothing(tmp_path):
    # ``if TYPE_CHECKING:`` never runs: what it names is no load, and a lazy import of it
    # elsewhere defers one (``pipeline/request.py`` names ``time_trace.TraceRequest`` so).
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "heavy.py").write_text("X = 1\n")
    (pkg / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                  "    from pkg.heavy import X\n")
    (pkg / "user.py").write_text("import pkg.typed\n\n\ndef f():\n    from pkg.heavy import X\n"
                                 "    return X\n")
    assert _graph.eager_graph(pkg)["pkg.typed"] == {"pkg"}
    assert _graph.needless_lazy_imports(pkg) == []


# What a cold command (a launcher's miss) loads only for a feature it was asked for: the remote
# tiers (NVSTAGE_REMOTE_CACHE: all of cache/remote/ but its __init__, which says whether one is
# named) and the time trace (-fdevice-time-trace, NVSTAGE_TIME_TRACE=1). Together 13 ms.
FEATURE_ONLY = ("nvstage.compiler.cache.remote.", "nvstage.compiler.nvcc.time_trace",
                "nvstage.compiler.nvcc.trace_summary", "nvstage.compiler.buildlog.traces")
_FEATURES = ("NVSTAGE_REMOTE_CACHE", "NVSTAGE_TIME_TRACE", "NVSTAGE_DIST", "NVSTAGE_SERVER",
             "NVSTAGE_BUILD_RECORD")


def _cold_miss(folder: Path, kernels: Path, nvcc: str, **env: str) -> list[str]:
    """The modules ``nvstage NVCC -c vadd.cu`` loads on an empty cache, run as a build's
    launcher runs it (``cli/bare.py``, ``python -S -P``): ``-X importtime`` names each. In
    its own process, the resident nvstage refused: none is started to outlive the test."""
    shutil.copy(kernels / "vadd.cu", folder)
    plain = {k: v for k, v in os.environ.items() if k not in _FEATURES}
    cp = subprocess.run([sys.executable, "-X", "importtime", "-S", "-P",
                         str(SRC / "cli" / "bare.py"), nvcc, "-c", "vadd.cu", "-o", "vadd.o",
                         "-arch=sm_90"], cwd=folder, capture_output=True, text=True,
                        timeout=300, env={**plain, "NVSTAGE_CACHE_DIR": str(folder / "cache"),
                                          "NVSTAGE_SERVER": "0", **env})
    assert cp.returncode == 0 and (folder / "vadd.o").is_file(), cp.stderr[-3000:]
    return [line.rpartition("|")[2].strip() for line in cp.stderr.splitlines()
            if line.startswith("import time:")]


def _tier_stats(folder: Path) -> dict:
    return json.loads((folder / "cache" / "tiers.json").read_text())["stats"]


def test_a_cold_miss_loads_no_feature_it_was_not_asked_for(tmp_path, kernels, toolkit):
    loaded = _cold_miss(tmp_path, kernels, toolkit.nvcc)
    assert "nvstage.compiler.pipeline.driver" in loaded  # staged: a miss, not a hit
    assert [m for m in loaded if m.startswith(FEATURE_ONLY)] == []
    # The local folder's figures are kept all the same (``nvstage cache``).
    stats = _tier_stats(tmp_path)
    assert list(stats) == ["local"] and stats["local"]["builds"] == 1
    assert stats["local"]["misses"] > 0 and stats["local"]["stored"] > 0


def test_a_cold_miss_asked_for_a_tier_and_a_trace_loads_them(tmp_path, kernels, toolkit):
    # A tier nothing listens on (loopback's port 1: refused at once) and nvstage's own trace.
    loaded = _cold_miss(tmp_path, kernels, toolkit.nvcc, NVSTAGE_TIME_TRACE="1",
                        NVSTAGE_REMOTE_CACHE="redis://127.0.0.1:1|connect-timeout=200")
    assert {"nvstage.compiler.cache.remote.tiers", "nvstage.compiler.nvcc.time_trace"} <= \
        set(loaded)
    assert set(_tier_stats(tmp_path)) == {"local", "redis://127.0.0.1:1/0"}
    assert [p.suffix for p in (tmp_path / ".nvstage-build" / "traces").iterdir()] == [".json"]


# Off every start-up path and off the compile's: these packages' modules import nvstage's own
# at their top, but for the named lazy constructors.
OFF_STARTUP = ("inspect", "run", "check", "model", "hw")


def test_off_the_start_up_paths_imports_stand_at_the_top():
    lazy = []
    for package in OFF_STARTUP:
        for path in (SRC / package).rglob("*.py"):
            me = _graph.module_name(SRC, path)
            for fn in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                for node in ast.walk(fn):
                    name = node.module if isinstance(node, ast.ImportFrom) else (
                        node.names[0].name if isinstance(node, ast.Import) else None)
                    if name and _under(name, "nvstage") and (me, name) not in LAZY_CONSTRUCTORS:
                        lazy.append(f"{path.relative_to(SRC)}:{node.lineno} {name}")
    assert sorted(set(lazy)) == []
