"""Every nvcc spelling a newcomer types, through `nvstage compile` and through plain nvcc, on
the same source in the same folder: the same exit status, and the same device code in what
each wrote (PTX text, or the SASS of every cubin inside; the host side carries nvcc's per-run
module id). Where nvcc's answer is an error, nvstage's is that error too.

The table is issue 14's list of spellings, plus the ones nvstage reads itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NVSTAGE = [sys.executable, str(ROOT / "bin" / "nvstage")]

# (spelling, extra arguments, what is compared: "ptx", "sass" (the output's cubins), "error")
CASES = [
    (["-std=c++17", "-c"], "sass"),
    (["-Xptxas", "-v", "-c"], "sass"),
    (["-Xptxas=-v", "-c"], "sass"),
    (["--ptxas-options=-v", "-c"], "sass"),
    (["-maxrregcount=32", "-c"], "sass"),
    (["-G", "-c"], "sass"),
    (["--use_fast_math", "-c"], "sass"),
    (["-use_fast_math", "-c"], "sass"),
    (["-ptx"], "ptx"),
    (["-cubin"], "sass"),
    (["-fatbin"], "sass"),
    (["-rdc=true", "-c"], "sass"),
    (["--relocatable-device-code=true", "-c"], "sass"),
    (["-dc"], "sass"),
    (["--generate-line-info", "-c"], "sass"),
    (["-lineinfo", "-c"], "sass"),
    (["-res-usage", "-c"], "sass"),
    (["-Xcompiler", "-O2", "-c"], "sass"),
    (["-Xcompiler=-fPIC", "-c"], "sass"),
    (["--threads", "2", "-c"], "sass"),
    (["-O3", "-c"], "sass"),
    (["-DSCALE=3", "-c"], "sass"),
    (["--no-such-option", "-c"], "error"),
]
# Each case's arch, spelled each way nvcc takes it (one per case, in turn).
ARCHS = [["-arch=sm_90"], ["-arch", "sm_90"], ["--gpu-architecture=sm_90"],
         ["--generate-code=arch=compute_90,code=[sm_90,compute_90]"],
         ["-gencode", "arch=compute_90,code=sm_90"]]


def _ids():
    return [" ".join(c[0]) for c in CASES]


def _sass(toolkit, path: Path) -> str:
    """The SASS of every cubin in ``path``, as cuobjdump prints it, without its file names."""
    tool = Path(toolkit.nvcc).with_name("cuobjdump")
    cp = subprocess.run([str(tool), "-sass", str(path)], capture_output=True, text=True,
                        timeout=120)
    assert cp.returncode == 0, cp.stderr
    text = re.sub(r"(?m)^\s*(Fatbin|code for|arch = |host = |compile_size|identifier).*$", "",
                  cp.stdout)
    return re.sub(r"\n\s*\n+", "\n", text)


@pytest.mark.slow
@pytest.mark.parametrize("i", range(len(CASES)), ids=_ids())
def test_a_spelling_through_compile_is_nvccs(toolkit, kernels, tmp_path, i):
    spelling, compare = CASES[i]
    arch = ARCHS[i % len(ARCHS)]
    shutil.copy(kernels / "saxpy.cu", tmp_path / "saxpy.cu")
    suffix = {"ptx": ".ptx", "sass": ".out"}.get(compare, ".out")
    a, b = f"nvstage{suffix}", f"nvcc{suffix}"
    ours = subprocess.run([*NVSTAGE, "compile", "saxpy.cu", *arch, *spelling, "-o", a],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    theirs = subprocess.run([toolkit.nvcc, "saxpy.cu", *arch, *spelling, "-o", b],
                            cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert (ours.returncode == 0) == (theirs.returncode == 0), (
        f"nvstage exited {ours.returncode}, nvcc {theirs.returncode}\n"
        f"nvstage: {ours.stderr[-1500:]}\nnvcc: {theirs.stderr[-1500:]}")
    if compare == "error":
        assert "no-such-option" in ours.stderr and "Traceback" not in ours.stderr
        return
    if compare == "ptx":
        assert (tmp_path / a).read_text() == (tmp_path / b).read_text()
    else:
        sass = _sass(toolkit, tmp_path / a)
        assert "Function : " in sass and sass == _sass(toolkit, tmp_path / b)
    if any("-v" in s or s == "-res-usage" for s in spelling):
        # ptxas's report, as nvcc prints it: the same kernels and the same register counts.
        used = re.compile(r"Used (\d+) registers")
        assert used.findall(ours.stdout + ours.stderr) == used.findall(theirs.stdout +
                                                                          theirs.stderr)
