"""Will it run, with the CUDA runtime: real executables built by nvcc from kernels/vadd.cu with
the static runtime (nvcc's default) and ``-cudart shared``, judged against named drivers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nvstage.inspect.cudart import (
    NONE,
    RUN_TIME,
    SHARED,
    STATIC,
    RuntimeNeed,
    runtime_needed,
    runtime_runs,
)


@pytest.fixture(scope="module")
def exes(toolkit, kernels, tmp_path_factory) -> dict[str, Path]:
    """vadd built twice by plain nvcc: static runtime and shared runtime."""
    root = tmp_path_factory.mktemp("cudart")
    shutil.copy(kernels / "vadd.cu", root)
    # The wheels ship libcudart.so.13 without the libcudart.so link -lcudart looks for.
    lib = Path(toolkit.nvcc).resolve().parent.parent / "lib"
    (root / "lib").mkdir()
    os.symlink(lib / "libcudart.so.13", root / "lib" / "libcudart.so")
    for name, extra in (("static", []), ("shared", ["-cudart", "shared", "-L", "lib"])):
        cp = subprocess.run([toolkit.nvcc, "-arch=sm_90", *extra, "vadd.cu", "-o", name],
                            cwd=root, capture_output=True, text=True)
        assert cp.returncode == 0, cp.stderr
    return {"static": root / "static", "shared": root / "shared"}


def _toolkit_cudart(toolkit) -> tuple[int, int]:
    """The toolkit's own CUDART_VERSION, read from its cuda_runtime_api.h."""
    import re

    inc = Path(toolkit.nvcc).resolve().parent.parent / "include"
    text = (inc / "cuda_runtime_api.h").read_text()
    v = int(re.search(r"#define CUDART_VERSION\s+(\d+)", text).group(1))
    return v // 1000, (v % 1000) // 10


def test_reads_the_static_runtime_version(exes, toolkit):
    need = runtime_needed(exes["static"].read_bytes())
    assert need.linkage == STATIC
    assert (need.major, need.minor) == _toolkit_cudart(toolkit)


def test_reads_the_shared_runtime_from_dt_needed(exes):
    need = runtime_needed(exes["shared"].read_bytes())
    assert (need.linkage, need.library, need.major, need.minor) == \
        (SHARED, "libcudart.so.13", 13, None)


def test_stripped_static_keeps_its_version(exes, tmp_path, toolkit):
    stripped = tmp_path / "stripped"
    subprocess.run(["strip", "-o", stripped, exes["static"]], check=True)
    need = runtime_needed(stripped.read_bytes())
    assert (need.major, need.minor) == _toolkit_cudart(toolkit)


def test_no_runtime_and_a_runtime_loaded_at_run_time(tmp_path, cli):
    assert runtime_needed(Path("/bin/true").read_bytes()).linkage == NONE
    # A host program that opens the runtime itself: which one is decided when it runs.
    (tmp_path / "dl.c").write_text(
        '#include <dlfcn.h>\nint main(void) { return dlopen("libcudart.so.13", RTLD_NOW) '
        '== 0; }\n')
    subprocess.run(["gcc", "dl.c", "-o", "dl", "-ldl"], cwd=tmp_path, check=True)
    need = runtime_needed((tmp_path / "dl").read_bytes())
    assert need.linkage == RUN_TIME and need.major is None
    assert runtime_runs(need, (13, 0)).runs is None


@pytest.mark.parametrize("need,driver,runs", [
    (RuntimeNeed(STATIC, 13, 5), (12, 4), False),   # the case
    (RuntimeNeed(STATIC, 13, 5), (13, 0), True),    # minor version compatibility
    (RuntimeNeed(STATIC, 12, 8), (13, 0), True),    # a newer major driver
    (RuntimeNeed(SHARED, 13, None, "libcudart.so.13"), (12, 9), False),
    (RuntimeNeed(SHARED, 10, 2, "libcudart.so.10.2"), (10, 1), False),  # before CUDA 11
    (RuntimeNeed(SHARED, 10, 2, "libcudart.so.10.2"), (10, 2), True),
])
def test_the_compatibility_rules(need, driver, runs):
    assert runtime_runs(need, driver).runs is runs


def test_static_runtime_on_an_older_driver_is_a_no(cli, exes):
    r = cli("show", exes["static"], "--sections", "fatbin", "--gpu", "h100", "--driver", "12.4")
    assert r.exit_code == 1, r.output
    said = " ".join(r.stdout.split())  # the console wraps the sentence
    assert "Will not run on h100 (sm_90) with a 12.4 driver" in said
    assert "static CUDA 13." in said and "cuda-compat-13-" in said
    r = cli("show", exes["static"], "--sections", "fatbin", "--gpu", "h100", "--driver", "13.0",
            "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)["will_it_run"]
    assert doc["runs"] is True and doc["runtime"]["linkage"] == "static"
    assert "minor version compatibility" in doc["runtime"]["why"]


def test_shared_runtime_on_an_older_driver_is_a_no(cli, exes):
    r = cli("show", exes["shared"], "--sections", "fatbin", "--gpu", "h100", "--driver", "12.4",
            "--json")
    assert r.exit_code == 1, r.output
    doc = json.loads(r.stdout)["will_it_run"]
    assert doc["runs"] is False and doc["runtime"]["library"] == "libcudart.so.13"
    r = cli("show", exes["shared"], "--sections", "fatbin", "--gpu", "h100")
    assert r.exit_code == 0 and "a driver of CUDA 13 or newer" in " ".join(r.stdout.split())


def test_a_build_whose_output_is_an_executable(cli, built):
    """A keep folder answers for the executable it built (vadd, static runtime)."""
    root, _ = built
    r = cli("show", root / "vadd.keep", "--sections", "fatbin", "--gpu", "h100", "--driver",
            "12.4", "--json")
    assert r.exit_code == 1, r.output
    assert json.loads(r.stdout)["will_it_run"]["runtime"]["linkage"] == "static"
