"""The test project (tests/data/cuproject) built once a session through nvstage as CMake's
compiler launcher (as tests/compiler/test_launcher_builds.py builds it, with its helpers): the
build record the whole-build tests (report, check, show of a build record) read.

Loaded by path under one module name (the tests run in importlib mode), so the conftests of
every folder that uses ``cuproject_record`` share one build.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
_BUILT: dict[str, tuple[Path, Path]] = {}


def load(name: str, path: Path):
    """A module of the test tree, loaded once by path."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def launcher_builds():
    return load("_nvstage_test_launcher_builds", HERE / "compiler" / "test_launcher_builds.py")


@pytest.fixture(scope="session", name="cuproject_record")
def cuproject_record(toolkit, tmp_path_factory) -> tuple[Path, Path]:
    """(source folder, build folder): the project built with CMake + Ninja (-j2) through the
    launcher, with a cache of its own (cold: every stage runs). Its record is
    BUILD/.nvstage-build; tests that change a record work on a copy."""
    lb = launcher_builds()
    if not (lb.BIN / "cmake").exists() or not (lb.BIN / "ninja").exists():
        pytest.skip("cmake and ninja come from the test extra's wheels")
    if "cmake" not in _BUILT:
        root = tmp_path_factory.mktemp("cuproject-record")
        env = lb._env(NVSTAGE_CACHE_DIR=str(root / "cache"))
        src = root / "src"
        shutil.copytree(lb.PROJECT, src)
        lb._cmake_build(toolkit, src, root / "build", True, env)
        _BUILT["cmake"] = (src, root / "build")
    return _BUILT["cmake"]
