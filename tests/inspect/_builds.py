"""Builds shared by the inspect, show and diff tests: each kernel compiled once a session.

Imported by tests/inspect/conftest.py and by the CLI tests (through sys.path), with one cache,
so the builds happen once however the tests are selected.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

CAPTURED = Path(__file__).resolve().parent.parent / "data" / "captured"


def tool(toolkit, name: str, *args, cwd=None) -> str:
    """Run one of the toolkit's own tools, as the reference the readers are checked against."""
    cp = subprocess.run([toolkit.tool(name), *map(str, args)], capture_output=True, text=True,
                        cwd=cwd)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout + cp.stderr


_CACHE: dict = {}


def get_built(toolkit, kernels, tmp_path_factory):
    if "built" not in _CACHE:
        _CACHE["built"] = _build(toolkit, kernels, tmp_path_factory)
    return _CACHE["built"]


def _build(toolkit, kernels, tmp_path_factory):
    """multi.o (sm_80 + sm_90 + PTX) by plain nvcc with -Xptxas -v, and two kept nvstage
    builds of spill.cu (plain, and -maxrregcount=16) and one of vadd.cu."""
    import nvstage
    from nvstage.options import CompileOptions

    root = tmp_path_factory.mktemp("built")
    for k in ("multi.cu", "spill.cu", "vadd.cu", "saxpy.cu"):
        shutil.copy(kernels / k, root)
    cp = subprocess.run(
        [toolkit.nvcc, "-c", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
         "arch=compute_90,code=[sm_90,compute_90]", "-Xptxas", "-v", "multi.cu", "-o",
         "multi.o"], cwd=root, capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    (root / "multi_ptxas.txt").write_text(cp.stderr)
    cp = subprocess.run([toolkit.nvcc, "--cubin", "-arch=sm_90", "-lineinfo", "saxpy.cu", "-o",
                         "saxpy.sm_90.cubin"], cwd=root, capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    spill_opts = dict(archs=("sm_90",), stop="cubin", resource_usage=True)
    builds = {
        "spill": nvstage.compile("spill.cu", CompileOptions(**spill_opts, output="spill.cubin"),
                                 toolkit=toolkit, keep="spill.keep", cwd=root),
        "spill16": nvstage.compile("spill.cu", CompileOptions(**spill_opts, maxrregcount=16,
                                                              output="spill16.cubin"),
                                   toolkit=toolkit, keep="spill16.keep", cwd=root),
        "vadd": nvstage.compile("vadd.cu", CompileOptions(archs=("sm_90",), output="vadd"),
                                toolkit=toolkit, keep="vadd.keep", cwd=root),
    }
    return root, builds
