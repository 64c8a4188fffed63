"""``nvstage doctor --cmake-toolchain FILE [--launcher]`` (compiler/toolkit/cmake_toolchain.py): an
unchanged project that calls find_package(CUDAToolkit) and links CUDA::cudart configures,
builds, links and runs with the pip toolkit and -DCMAKE_TOOLCHAIN_FILE=FILE alone; what the
file says; values it cannot carry; site-packages untouched."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from nvstage import proc
from nvstage.compiler.toolkit.cmake_toolchain import toolchain_text, versioned_only
from nvstage.errors import UsageError

PROJECT = Path(__file__).parents[2] / "data" / "cudatoolkit_project"
BIN = Path(sys.executable).parent
needs_cmake = pytest.mark.skipif(not (BIN / "cmake").exists() or not (BIN / "ninja").exists(),
                                 reason="cmake and ninja come from the test extra's wheels")


def _tree(root: str) -> dict[str, tuple[int, int]]:
    out = {}
    for folder, _, files in os.walk(root):
        for f in files:
            st = os.lstat(os.path.join(folder, f))
            out[os.path.join(folder, f)] = (st.st_size, st.st_mtime_ns)
    return out


@needs_cmake
def test_find_package_cudatoolkit_on_the_pip_wheels(cli, toolkit, tmp_path):
    if "site-packages" not in toolkit.nvcc:
        pytest.skip("the toolkit in use is not the pip wheels")
    before = _tree(toolkit.root)
    r = cli("doctor", "--cmake-toolchain", tmp_path / "nvstage.cmake", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["nvcc"] == toolkit.nvcc and doc["cuda_toolkit_root"] == toolkit.root
    assert {"cudart", "nvrtc", "nvJitLink"} <= set(doc["libraries"])
    assert doc["libraries"]["cudart"].endswith("libcudart.so.13")
    assert doc["missing"] == ["cuda_driver"] and doc["launcher"] is None
    text = (tmp_path / "nvstage.cmake").read_text()
    assert "CUDA::cuda_driver cannot come from this toolkit" in text
    assert "LAUNCHER" not in text
    env = dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '')}")
    build = tmp_path / "build"
    cp = proc.run(["cmake", "-S", str(PROJECT), "-B", str(build), "-G", "Ninja",
                   f"-DCMAKE_TOOLCHAIN_FILE={tmp_path / 'nvstage.cmake'}"], env=env, timeout=600)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert "Found CUDAToolkit" in cp.stdout
    cp = proc.run(["ninja", "-C", str(build)], env=env, timeout=600)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    run = proc.run([str(build / "version")], timeout=60)
    assert run.returncode == 0 and run.stdout.startswith("cudart 13"), run.stdout + run.stderr
    # Nothing was written beside the toolkit.
    assert _tree(toolkit.root) == before


def test_what_the_file_says(toolkit, tmp_path):
    text, missing = toolchain_text("/opt/my cuda/bin/nvcc", "/opt/my cuda", "CUDA 13.5",
                                   launcher=["/my venv/bin/python", "-S", "-P", "bare.py"],
                                   libraries={"cudart": "/opt/my cuda/lib/libcudart.so.13",
                                              "nvrtc": "/opt/my cuda/lib/libnvrtc.so.13"})
    assert 'set(CMAKE_CUDA_COMPILER [==[/opt/my cuda/bin/nvcc]==] CACHE FILEPATH' in text
    assert "set(CUDA_CUDART [==[/opt/my cuda/lib/libcudart.so.13]==]" in text
    assert "set(CUDA_nvrtc_LIBRARY [==[/opt/my cuda/lib/libnvrtc.so.13]==]" in text
    # The launcher: a CMake list (the interpreter, then its arguments), outside try-compiles;
    # RULE_LAUNCH_LINK for the device links, links and archives: shell words, quoted.
    cmd = "[==[/my venv/bin/python;-S;-P;bare.py]==]"
    for line in (f"set(CMAKE_CUDA_COMPILER_LAUNCHER {cmd})",
                 # C and C++: nvstage, then a launcher given to cmake (ccache) if any
                 f"set(CMAKE_${{_nvstage_lang}}_COMPILER_LAUNCHER {cmd} ${{_nvstage_given}})",
                 "foreach(_nvstage_lang IN ITEMS CXX C)",
                 "set_property(GLOBAL PROPERTY RULE_LAUNCH_LINK "
                 "[==['/my venv/bin/python' -S -P bare.py]==])",
                 "get_property(_nvstage_in_try_compile GLOBAL PROPERTY IN_TRY_COMPILE)"):
        assert line in text, line
    assert missing == ["cuda_driver"]  # /opt/my cuda has no libcuda.so
    with pytest.raises(UsageError) as e:
        toolchain_text("/opt/a;b/nvcc", "/opt/a;b", "x", launcher=None, libraries={})
    assert "';'" in e.value.message
    # The wheels: what has only a versioned name is named; what FindCUDAToolkit finds itself
    # (libcudart_static.a) is not.
    found = versioned_only(toolkit.root)
    assert all(Path(p).is_file() and ".so." in Path(p).name for p in found.values())
    assert "cudart_static" not in found


def test_doctor_options_go_together(cli, tmp_path):
    r = cli("doctor", "--launcher")
    assert r.exit_code == 2 and "--launcher goes with --cmake-toolchain" in r.stderr
    r = cli("doctor", "--cmake-toolchain", tmp_path)
    assert r.exit_code == 2 and "is a folder" in r.stderr
    r = cli("doctor", "--cmake-toolchain", tmp_path / "t.cmake", "--launcher")
    assert r.exit_code == 0, r.output
    text = (tmp_path / "t.cmake").read_text()
    assert "RULE_LAUNCH_LINK" in text and "nvstage" in text.split("RULE_LAUNCH_LINK", 1)[1]
    assert f"-DCMAKE_TOOLCHAIN_FILE={tmp_path / 't.cmake'}" in " ".join(r.stderr.split())
    assert r.stdout == ""  # the file is the data; what it says goes to stderr
