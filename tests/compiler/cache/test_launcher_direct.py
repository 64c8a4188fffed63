"""The launcher keeps the headers a compile read in the whole command's entry alone: no header
set per preprocessing stage (``StageCache(direct=False)``), yet a rebuild is answered whole,
and what the stage cache would not have stored (a time macro) is not answered either."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import nvstage
from nvstage.cli.main import run
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.cache.command import answer
from nvstage.compiler.nvcc import environment as nvcc_env


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(nvcc_env, "_memo", {})
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "coef.h").write_text("#define COEF 2.0f\n")
    return tmp_path


def _header_sets(root: Path) -> list[str]:
    return [f for _, _, files in os.walk(root / "direct") for f in files]


def _source(folder: Path, body: str = "x[threadIdx.x] *= COEF;") -> None:
    (folder / "k.cu").write_text(
        f'#include "coef.h"\n__global__ void k(float* x) {{ {body} }}\n')


def test_a_launcher_build_keeps_no_header_set_and_is_answered_whole(folder, toolkit, capfd):
    _source(folder)
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-Iinc", "-arch=sm_90"]
    assert run(argv) == 0
    assert _header_sets(folder / "cache") == []
    cold = (folder / "k.o").read_bytes()
    (folder / "k.o").unlink()
    assert answer.answer(argv, str(folder), dict(os.environ)) is not None
    assert (folder / "k.o").read_bytes() == cold
    # The header edited: not answered; built again, then answered with the new object.
    (folder / "inc" / "coef.h").write_text("#define COEF 3.0f\n")
    assert answer.answer(argv, str(folder), dict(os.environ)) is None
    # (a launcher process of its own, as in a build)
    subprocess.run([sys.executable, "-m", "nvstage", *argv], check=True, capture_output=True)
    edited = (folder / "k.o").read_bytes()
    assert edited != cold
    (folder / "k.o").unlink()
    assert answer.answer(argv, str(folder), dict(os.environ)) is not None
    assert (folder / "k.o").read_bytes() == edited


def test_a_time_macro_is_never_answered_whole(folder, toolkit, capfd):
    _source(folder, 'const char* t = __TIME__; x[threadIdx.x] *= COEF + t[0];')
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-Iinc", "-arch=sm_90"]
    assert run(argv) == 0
    assert answer.answer(argv, str(folder), dict(os.environ)) is None


def test_nvstage_compile_still_keeps_header_sets(folder, toolkit):
    _source(folder)
    nvstage.compile("k.cu", CompileOptions(compile_only=True, output="k.o",
                                           extra=("-Iinc", "-arch=sm_90")))
    assert _header_sets(folder / "cache") != []
