"""nvstage as the CUDA compiler launcher of real builds: CMake + Ninja, and Make with -j2.

The same project (tests/data/cuproject) is built with plain nvcc and with nvstage in front of
it; the objects' PTX and SASS, the dependencies the build system records and the program's
output must be the same (up to nvcc's per-run module id), and touching the shared header
rebuilds exactly the translation units that include it.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from nvstage import proc

PROJECT = Path(__file__).parents[2] / "data" / "cuproject"
BIN = Path(sys.executable).parent

needs_cmake = pytest.mark.skipif(not (BIN / "cmake").exists() or not (BIN / "ninja").exists(),
                                 reason="cmake and ninja come from the test extra's wheels")


def _env(**extra) -> dict[str, str]:
    env = dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '')}")
    env.update(extra)
    return env


def _launcher() -> list[str]:
    return [sys.executable, "-m", "nvstage"]


def _ninja_deps(build: Path, env) -> dict[str, list[str]]:
    """``ninja -t deps`` as target -> dependencies (its order follows when each finished)."""
    out: dict[str, list[str]] = {}
    target = None
    for line in proc.run(["ninja", "-C", str(build), "-t", "deps"], env=env).stdout.splitlines():
        if line and not line.startswith(" "):
            target = line.split(":", 1)[0]
            out[target] = []
        elif line.strip() and target is not None:
            out[target].append(line.strip())
    return out


def _cmake_build(toolkit, src: Path, build: Path, launcher: bool, env) -> None:
    args = ["cmake", "-S", str(src), "-B", str(build), "-G", "Ninja",
            f"-DCMAKE_CUDA_COMPILER={toolkit.nvcc}"]
    if launcher:
        # CMake takes a list: the interpreter, then its arguments.
        args.append("-DCMAKE_CUDA_COMPILER_LAUNCHER=" + ";".join(_launcher()))
    cp = proc.run(args, env=env, timeout=600)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    cp = proc.run(["ninja", "-C", str(build), "-j2"], env=env, timeout=1200)
    assert cp.returncode == 0, cp.stdout + cp.stderr


@pytest.fixture(scope="module")
def cmake_builds(toolkit, tmp_path_factory):
    root = tmp_path_factory.mktemp("cmake")
    env = _env(NVSTAGE_CACHE_DIR=str(root / "cache"))
    out = {}
    src = root / "src"  # one source folder: -lineinfo and #line name the sources' paths
    shutil.copytree(PROJECT, src)
    for name, launcher in (("plain", False), ("nvstage", True)):
        _cmake_build(toolkit, src, root / f"build-{name}", launcher, env)
        out[name] = (src, root / f"build-{name}")
    return out, env


@needs_cmake
def test_cmake_ninja_objects_deps_and_program_are_nvccs(toolkit, cmake_builds, dump):
    builds, env = cmake_builds
    (_, plain), (_, ours) = builds["plain"], builds["nvstage"]
    objs = sorted(p.relative_to(plain) for p in plain.rglob("*.cu.o"))
    assert len(objs) == 5
    for rel in objs:
        assert dump(plain / rel) == dump(ours / rel), rel
    deps = [_ninja_deps(b, env) for b in (plain, ours)]
    assert deps[0] == deps[1] and any("common.h" in " ".join(d) for d in deps[0].values())
    runs = [proc.run([str(b / "app")]).stdout for b in (plain, ours)]
    assert runs[0] == runs[1] and "scale_on_host(21) = 42" in runs[0]
    # Every compile went through nvstage, and each says how: staged, or plain nvcc and why.
    from nvstage.compiler.buildlog.log import load_build_log

    rec = load_build_log(ours)
    # CMake puts the launcher in front of compiles only (its device link runs nvcc itself).
    assert [e.status for e in rec.entries] == ["ok"] * 5, [(e.status, e.reason)
                                                           for e in rec.entries]
    assert not rec.skipped
    # One run of ninja; and the report says which kinds of step it never saw.
    from nvstage.inspect.build_view import load_build_view

    view = load_build_view(ours)
    assert [b.tool for b in view.builds] == ["ninja"]
    assert view.not_seen() == ["cxx-compile", "device-link", "link", "archive"]


@needs_cmake
def test_touching_the_shared_header_rebuilds_exactly_its_includers(toolkit, cmake_builds):
    builds, env = cmake_builds
    src, build = builds["nvstage"]
    header = src / "include" / "common.h"
    text = header.read_text()
    header.write_text(text + "// touched\n")
    try:
        cp = proc.run(["ninja", "-C", str(build), "-n", "-v"], env=env)
    finally:
        header.write_text(text)
    rebuilt = set(re.findall(r"-c \S+/(\w+)\.cu ", cp.stdout))
    assert rebuilt == {"scale", "reduce"}, cp.stdout


@pytest.mark.skipif(not shutil.which("make"), reason="GNU make is not installed")
def test_make_j2_through_the_launcher(toolkit, tmp_path, dump):
    env = _env(NVSTAGE_CACHE_DIR=str(tmp_path / "cache"))
    outs = {}
    launcher = " ".join(_launcher())
    # Through nvstage: nvcc, and the C++ compiles and the link (CXX) too.
    for name, nvcc, cxx in (("plain", toolkit.nvcc, "c++"),
                            ("nvstage", f"{launcher} {toolkit.nvcc}", f"{launcher} c++")):
        src = tmp_path / name
        shutil.copytree(PROJECT, src)
        cp = proc.run(["make", "-j2", f"NVCC={nvcc}", f"CXX={cxx}"], cwd=src, env=env,
                      timeout=1200)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        outs[name] = src
    for obj in ("scale", "reduce", "other", "devlib", "devuse"):
        a, b = (outs[n] / "out" / f"{obj}.o" for n in ("plain", "nvstage"))
        assert dump(a) == dump(b), obj
        assert (outs["plain"] / f"out/{obj}.o.d").read_text() == \
            (outs["nvstage"] / f"out/{obj}.o.d").read_text().replace(
                str(outs["nvstage"]), str(outs["plain"]))
    runs = [proc.run([str(outs[n] / "out" / "app")]).stdout for n in ("plain", "nvstage")]
    assert runs[0] == runs[1]
    for obj in ("host", "main"):  # the C++ compiles through nvstage: the same objects
        assert (outs["plain"] / f"out/{obj}.o").read_bytes() == \
            (outs["nvstage"] / f"out/{obj}.o").read_bytes(), obj
    # The device link is a command nvstage does not stage: plain nvcc ran it, and said why;
    # the C++ compiles and the link ran unchanged. One build: one run of make.
    from nvstage.compiler.buildlog.log import builds_of, load_build_log

    rec = load_build_log(outs["nvstage"])
    assert sorted((e.kind, e.status) for e in rec.entries) == sorted(
        [("cuda-compile", "ok")] * 5 + [("device-link", "ran"), ("cxx-compile", "ran"),
                                        ("cxx-compile", "ran"), ("link", "ran")])
    assert "-dlink" in next(e.reason for e in rec.entries if e.kind == "device-link")
    assert [b.tool for b in builds_of(rec.entries)] == ["make"]
