"""Every nvcc spelling builds the same through the launcher as with plain nvcc: the same exit
status, the same output files (PTX and SASS of objects up to nvcc's per-run module id; text
outputs byte for byte), the same diagnostics, and what ran it (staged or plain nvcc)."""

from __future__ import annotations

import os
import re
import shutil
import sys

import pytest

from nvstage import proc

_ID = re.compile(r"(_[0-9a-f]{8}_[0-9a-f]{2,}_[A-Za-z0-9_]+?_[0-9a-f]{8}|__nv_module_id_\w+|"
                 r"_GLOBAL__N__[0-9a-f_]+\w*|tmpxft_[0-9a-f_]+|/tmp/[\w.-]+|"
                 r"__nv_static_\w+|\b[0-9a-f]{8}_\d+_\w+)")
SRC = """#include "inc.h"
#include <cstdio>
__global__ void k(float* x, int n) {
  auto f = [] __device__ (float v) { return v * SCALE; };
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = f(x[i]);
}
int host_side() { std::printf("host\\n"); return 0; }
"""

# (id, extra words, expected: "staged" or "plain" or a Fallback reason fragment)
CASES = [
    ("x-cu", ["-x", "cu", "-c", "k.cpp", "-o", "out.o"], "staged"),
    ("c", ["-c", "k.cu", "-o", "out.o"], "staged"),
    ("dc", ["-dc", "k.cu", "-o", "out.o"], "staged"),
    ("rdc", ["-rdc=true", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("generate-code", ["--generate-code=arch=compute_80,code=[compute_80,sm_80]",
                       "--generate-code=arch=compute_90,code=[compute_90,sm_90]", "-c",
                       "k.cu", "-o", "out.o"], "staged"),
    ("arch", ["-arch=sm_90", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("depfile", ["-MD", "-MT", "custom.o", "-MF", "out.d", "-c", "k.cu", "-o", "out.o"],
     "staged"),
    ("mmd-mp", ["-MMD", "-MP", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("M", ["-M", "k.cu"], "-M writes only deps"),
    ("MM", ["-MM", "k.cu", "-o", "out.d"], "-MM"),
    ("E", ["-E", "k.cu", "-o", "out.ii"], "-E only preprocesses"),
    ("Xcompiler=", ["-Xcompiler=-fPIC", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("Xcompiler", ["-Xcompiler", "-fPIC", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("forward-unknown", ["-forward-unknown-to-host-compiler", "-fPIC", "-c", "k.cu", "-o",
                         "out.o"], "staged"),
    ("options-file", ["--options-file", "opts.rsp", "k.cu", "-o", "out.o"], "staged"),
    ("ccbin", ["-ccbin", "gcc", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("isystem", ["-isystem", "sys", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("std", ["-std=c++17", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("relaxed-constexpr", ["--expt-relaxed-constexpr", "-c", "k.cu", "-o", "out.o"],
     "staged"),
    ("G", ["-G", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("lineinfo", ["-lineinfo", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("threads", ["--threads", "2", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
                 "arch=compute_90,code=sm_90", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("split-compile", ["--split-compile", "2", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("Werror", ["-Werror", "all-warnings", "-c", "k.cu", "-o", "out.o"], "staged"),
    ("Werror=", ["-Werror=cross-execution-space-call", "-c", "k.cu", "-o", "out.o"],
     "staged"),
    ("ptx", ["-ptx", "k.cu", "-o", "out.ptx"], "staged"),
    ("cubin", ["-cubin", "-arch=sm_90", "k.cu", "-o", "out.cubin"], "staged"),
    ("fatbin", ["-fatbin", "k.cu", "-o", "out.fatbin"], "staged"),
    ("lib", ["-lib", "k.cu", "-o", "out.a"], "-lib"),
    ("error", ["-c", "bad.cu", "-o", "out.o"], "failed"),
]
COMMON = ["--extended-lambda", "-Iinc"]


def _run(way: str, d, argv: list[str], env):
    """``argv`` (nvcc's words) run plainly or through nvstage, in ``d`` made afresh (one
    folder for both ways: -G and -lineinfo put its path in the objects)."""
    if d.exists():
        shutil.rmtree(d)
    d.mkdir()
    _prepare(d)
    front = [sys.executable, "-m", "nvstage"] if way == "nvstage" else []
    return proc.run([*front, *argv], cwd=d, env=env, timeout=900)


def _prepare(d):
    (d / "inc").mkdir()
    (d / "sys").mkdir()
    (d / "inc" / "inc.h").write_text("#pragma once\n#define SCALE 2.0f\n")
    (d / "k.cu").write_text(SRC)
    (d / "k.cpp").write_text(SRC)
    (d / "bad.cu").write_text("__global__ void k() { return 1 }\n")
    (d / "opts.rsp").write_text("-c -arch=sm_90\n")


def _outputs(d) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in d.iterdir() if p.name.startswith("out")
            or p.name.endswith((".d", ".o"))}


def _dump(toolkit, path) -> str:
    """PTX and SASS, nvcc's per-run names normalised."""
    out = []
    for flag in ("-ptx", "-sass"):
        cp = proc.run([toolkit.tool("cuobjdump"), flag, str(path)], timeout=300)
        out.append(_ID.sub("<id>", cp.stdout.replace(str(path), "<file>")))
    return "\n".join(out)


@pytest.mark.parametrize("name, words, expect", CASES, ids=[c[0] for c in CASES])
def test_a_spelling_through_the_launcher_is_plain_nvccs(toolkit, tmp_path, name, words,
                                                        expect):
    env = dict(os.environ, NVSTAGE_CACHE_DIR=str(tmp_path / "cache"),
               NVSTAGE_BUILD_RECORD=str(tmp_path / "record"))
    if name == "env-flags":
        env["NVCC_APPEND_FLAGS"] = "-lineinfo"
    results = {}
    d = tmp_path / "w"
    for way in ("plain", "nvstage"):
        cp = _run(way, d, [toolkit.nvcc, *COMMON, *words], env)
        saved = tmp_path / way
        saved.mkdir()
        outs = _outputs(d)
        for n, data in outs.items():
            (saved / n).write_bytes(data)
        results[way] = (cp.returncode, _ID.sub("<id>", cp.stderr.replace(str(d), "<d>")),
                        outs, saved)
    (rc0, err0, out0, d0), (rc1, err1, out1, d1) = results["plain"], results["nvstage"]
    assert rc0 == rc1, (err0, err1)
    assert err0 == err1
    assert sorted(out0) == sorted(out1)
    for n in out0:
        if n.endswith((".o", ".cubin", ".fatbin", ".a")):
            assert _dump(toolkit, d0 / n) == _dump(toolkit, d1 / n), n
        else:
            assert out0[n] == out1[n], n
    from nvstage.compiler.buildlog.log import load_build_log

    (entry,) = load_build_log(tmp_path / "record").entries
    if expect == "staged":
        assert entry.status == "ok", entry.reason
    elif expect == "failed":
        assert entry.status == "failed"
    else:
        assert entry.status == "fallback" and expect in entry.reason, entry.reason


def test_nvcc_prepend_and_append_flags(toolkit, tmp_path):
    env = dict(os.environ, NVSTAGE_CACHE_DIR=str(tmp_path / "cache"),
               NVCC_PREPEND_FLAGS="-DSCALE_FROM_ENV=1", NVCC_APPEND_FLAGS="-lineinfo")
    d = tmp_path / "w"
    for way in ("plain", "nvstage"):
        cp = _run(way, d, [toolkit.nvcc, *COMMON, "-c", "k.cu", "-o", "out.o", "-arch=sm_90"],
                  env)
        assert cp.returncode == 0, cp.stderr
        shutil.copy(d / "out.o", tmp_path / f"{way}.o")
    assert _dump(toolkit, tmp_path / "plain.o") == _dump(toolkit, tmp_path / "nvstage.o")
