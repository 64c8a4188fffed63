"""C++ compiles keep ccache behind nvstage: CMake's ``CMAKE_CXX_COMPILER_LAUNCHER="nvstage;ccache"``
beside ``-DCMAKE_CUDA_COMPILER="$(nvstage doctor --print-nvcc)"``, and the toolchain file of
``nvstage doctor --cmake-toolchain FILE --launcher`` with ``-DCMAKE_CXX_COMPILER_LAUNCHER=ccache``.
A second build's C++ compiles are ccache hits, and the build record still holds them (nvstage
runs ccache as a step: compiler/launcher/tool_step.py); its CUDA compiles are nvstage's whole hits.

Needs ccache (Debian's: apt-get install ccache); skipped where it is missing, a failure where
$NVSTAGE_REQUIRE_CCACHE=1 (.ci/run)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nvstage.compiler.buildlog import log as buildlog
from nvstage.compiler.nvcc import step_kind as steps

BIN = Path(sys.executable).parent
PROJECT = Path(__file__).parents[2] / "data" / "cuproject"
CXX_SOURCES = {"main.cpp", "host.cpp"}  # the project's C++ compiles

needs_cmake = pytest.mark.skipif(not (BIN / "cmake").exists() or not (BIN / "ninja").exists(),
                                 reason="cmake and ninja come from the test extra's wheels")


@pytest.fixture
def ccache() -> str:
    found = shutil.which("ccache")
    if found is None:
        why = "ccache is not installed (apt-get install ccache)"
        if os.environ.get("NVSTAGE_REQUIRE_CCACHE") == "1":
            pytest.fail(f"NVSTAGE_REQUIRE_CCACHE=1 but {why}")
        pytest.skip(why)
    return found


def _run(argv, env, cwd=None) -> str:
    cp = subprocess.run([str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True,
                        timeout=1200)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    return cp.stdout


def _stats(env) -> dict[str, int]:
    out = _run(["ccache", "--print-stats"], env)
    return {k: int(v) for k, v in (line.split("\t") for line in out.splitlines()) if v.isdigit()}


@needs_cmake
@pytest.mark.parametrize("form", ["variables", "toolchain"])
def test_second_builds_cxx_compiles_are_ccache_hits_and_recorded(ccache, form, tmp_path):
    env = dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '')}",
               NVSTAGE_CACHE_DIR=str(tmp_path / "cache"), CCACHE_DIR=str(tmp_path / "ccache"),
               NVSTAGE_SERVER="0")
    for var in ("NVSTAGE_BUILD_RECORD", "CMAKE_CXX_COMPILER_LAUNCHER", "CCACHE_DISABLE"):
        env.pop(var, None)
    src, build = tmp_path / "src", tmp_path / "build"
    shutil.copytree(PROJECT, src)
    configure = [BIN / "cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCUPROJECT_ARCHS=80"]
    if form == "variables":
        nvcc = _run([BIN / "nvstage", "doctor", "--print-nvcc"], env).strip()
        configure += [f"-DCMAKE_CUDA_COMPILER={nvcc}", "-DCMAKE_CUDA_COMPILER_LAUNCHER=nvstage",
                      "-DCMAKE_CXX_COMPILER_LAUNCHER=nvstage;ccache"]
    else:
        _run([BIN / "nvstage", "doctor", "--cmake-toolchain", tmp_path / "nvstage.cmake",
              "--launcher"], env)
        configure += [f"-DCMAKE_TOOLCHAIN_FILE={tmp_path / 'nvstage.cmake'}",
                      "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    _run(configure, env)
    _run([BIN / "ninja", "-C", build, "-j2"], env)
    _run(["ccache", "--zero-stats"], env)
    _run([BIN / "ninja", "-C", build, "-t", "clean"], env)
    _run([BIN / "ninja", "-C", build, "-j2"], env)
    stats = _stats(env)
    assert stats.get("direct_cache_hit", 0) + stats.get("preprocessed_cache_hit", 0) == 2, stats
    assert stats.get("cache_miss", 0) == 0, stats
    record = buildlog.load_build_log(build)
    runs = buildlog.builds_of(record.entries)
    assert len(runs) == 2
    last = runs[-1].entries
    cxx = [e for e in last if e.kind == steps.CXX_COMPILE]
    assert {os.path.basename(e.source or "") for e in cxx} == CXX_SOURCES
    for e in cxx:  # nvstage ran ccache, ccache the compiler
        assert os.path.basename(e.argv[0]) == "ccache" and e.tool in ("c++", "g++")
        assert (e.status, e.exit_code) == ("ran", 0)
    cuda = [e for e in last if e.kind == steps.CUDA_COMPILE]
    assert len(cuda) == 5 and all(e.hit and e.nvcc_from == "command" for e in cuda)
    assert os.path.isfile(build / "app")
