"""nvcc's plan from the plan cache: the same stages nvcc prints, in the new work folder."""

import os
import shutil

from nvstage.compiler.pipeline.driver import compile
from nvstage.compiler.nvcc.options import CompileOptions


def test_a_remembered_plan_is_nvccs_in_the_new_folder(kernels, tmp_path, monkeypatch):
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    shutil.copy(kernels / "multi.cu", tmp_path)
    opts = CompileOptions(archs=("sm_80", "sm_90"), compile_only=True)
    first = compile("multi.cu", opts, cwd=tmp_path, keep="k1")
    assert list((tmp_path / "cache" / "plans").rglob("*"))
    again = compile("multi.cu", opts, cwd=tmp_path, keep="k2")
    fresh = compile("multi.cu", opts, cwd=tmp_path, keep="k3", cache=False)
    k2, k3 = str(tmp_path / "k2"), str(tmp_path / "k3")
    assert [s.argv for s in again.plan.stages] == [
        [a.replace(k3, k2) for a in s.argv] for s in fresh.plan.stages]
    assert again.plan_seconds < first.plan_seconds
    assert all(os.path.isfile(a.path) for a in again.artifacts)
