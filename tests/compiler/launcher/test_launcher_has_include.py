"""A header that ``__has_include`` looked for and did not find, created later: the next build
must see it, as plain nvcc does (gcc records no dependency on a file it did not find)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from nvstage import proc

SOURCE = """
#if __has_include("tuning.h")
#include "tuning.h"
#endif
#ifndef SCALE
#define SCALE 1.0f
#endif
__global__ void k(float* p) { p[threadIdx.x] *= SCALE; }
"""


def _mask(data: bytes) -> bytes:
    """nvcc's pid in its temporary names masked (test_launcher_bytes.py's rule)."""
    return re.sub(rb"tmpxft_[0-9a-f]{8}_", b"<run>", data)


def _launcher() -> list[str]:
    script = Path(sys.executable).parent / "nvstage"
    return [str(script)] if script.exists() else [sys.executable, "-m", "nvstage"]


def test_a_header_has_include_missed_then_created_is_seen(toolkit, tmp_path):
    (tmp_path / "k.cu").write_text(SOURCE)
    env = dict(os.environ, NVSTAGE_CACHE_DIR=str(tmp_path / "cache"),
               NVSTAGE_BUILD_RECORD=str(tmp_path / "record"))

    def build(*front: str) -> bytes:
        cp = proc.run([*front, toolkit.nvcc, "-c", "-arch=sm_90", "k.cu", "-o", "k.o"],
                      cwd=tmp_path, env=env, timeout=600)
        assert cp.returncode == 0, cp.stderr
        return (tmp_path / "k.o").read_bytes()

    build(*_launcher())
    (tmp_path / "tuning.h").write_text("#define SCALE 3.0f\n")
    stale_or_not = build(*_launcher())  # SCALE 3 in plain nvcc's
    plain = build()
    assert _mask(stale_or_not) == _mask(plain)
