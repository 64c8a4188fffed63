"""The test project (tests/data/cuproject) built once a session through nvstage, configured
with only the toolchain file ``nvstage doctor --cmake-toolchain --launcher`` writes, twice
(an edited header between): the build record the whole-build tests (report, check, show and
diff of a build record) read.

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
    return load("_nvstage_test_launcher_builds", HERE / "compiler" / "launcher" / "test_launcher_builds.py")


# The edit between the record's two builds: block_sum's shared array doubles.
HEADER_EDIT = ("#define CUPROJECT_BLOCK 128", "#define CUPROJECT_BLOCK 256")


@pytest.fixture(scope="session", name="cuproject_record")
def cuproject_record(toolkit, tmp_path_factory) -> tuple[Path, Path]:
    """(source folder, build folder): the project configured with nothing but the toolchain
    file ``nvstage doctor --cmake-toolchain FILE --launcher`` writes, and built twice with
    CMake + Ninja (-j2) with a cache of its own: cold, then again after an edit of its shared
    header (``HEADER_EDIT``: scale.cu and reduce.cu, the device link and the link run again).
    Every compile, the device link, the archive and the link went through nvstage: its record
    BUILD/.nvstage-build holds both builds. Tests that change a record work on a copy."""
    from nvstage import proc
    from nvstage.compiler.toolkit.cmake_toolchain import write_cmake_toolchain

    lb = launcher_builds()
    if not (lb.BIN / "cmake").exists() or not (lb.BIN / "ninja").exists():
        pytest.skip("cmake and ninja come from the test extra's wheels")
    if "cmake" not in _BUILT:
        root = tmp_path_factory.mktemp("cuproject-record")
        env = lb._env(NVSTAGE_CACHE_DIR=str(root / "cache"))
        src, build = root / "src", root / "build"
        shutil.copytree(lb.PROJECT, src)
        toolchain = write_cmake_toolchain(root / "nvstage.cmake", launcher=True,
                                          toolkit=toolkit)
        cp = proc.run(["cmake", "-S", str(src), "-B", str(build), "-G", "Ninja",
                       f"-DCMAKE_TOOLCHAIN_FILE={toolchain.path}"], env=env, timeout=600)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        for n in (1, 2):
            if n == 2:
                header = src / "include" / "common.h"
                header.write_text(header.read_text().replace(*HEADER_EDIT))
            cp = proc.run(["ninja", "-C", str(build), "-j2"], env=env, timeout=1200)
            assert cp.returncode == 0, cp.stdout + cp.stderr
        _BUILT["cmake"] = (src, build)
    return _BUILT["cmake"]
