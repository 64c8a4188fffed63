"""Adversarial cases for the launcher's caches: after each change to what a compile reads, the
launcher's object (``nvstage NVCC ARGS``, as a build runs it) must be what plain nvcc builds
now, nvcc's per-run tokens masked (test_launcher_bytes.py's rule). Each test has its own cache
folder and build record; the resident server stays off (conftest) unless a test says so."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from nvstage import proc

SOURCE = '#include "coef.h"\n__global__ void k(float* p) { p[threadIdx.x] *= COEF; }\n'


def _mask(data: bytes) -> bytes:
    return re.sub(rb"tmpxft_[0-9a-f]{8}_", b"<run>", data)


def _launcher() -> list[str]:
    script = Path(sys.executable).parent / "nvstage"
    return [str(script)] if script.exists() else [sys.executable, "-m", "nvstage"]


class Build:
    """``nvstage nvcc -c k.cu -o k.o FLAGS`` in ``root`` and plain nvcc's object beside it."""

    def __init__(self, toolkit, root: Path, *flags: str, source: str = "k.cu", **env: str):
        self.root, self.flags, self.source = root, flags, source
        self.nvcc = toolkit.nvcc
        self.env = dict(os.environ, NVSTAGE_CACHE_DIR=str(root / "cache"),
                        NVSTAGE_BUILD_RECORD=str(root / "record"), **env)

    def run(self, *front: str) -> bytes:
        cp = proc.run([*front, self.nvcc, "-c", "-arch=sm_90", self.source, "-o", "k.o",
                       *self.flags], cwd=self.root, env=self.env, timeout=600)
        assert cp.returncode == 0, cp.stderr
        return _mask((self.root / "k.o").read_bytes())

    def launcher(self) -> bytes:
        return self.run(*_launcher())

    def plain(self) -> bytes:
        return self.run()

    def hits(self) -> list[bool]:
        from nvstage.compiler.buildlog import load_build_record

        return [e.hit for e in load_build_record(self.root / "record").entries]


def test_a_dangling_link_earlier_in_the_path_that_comes_to_resolve(toolkit, tmp_path):
    # first/coef.h is a link to a file not made yet (a generated header): gcc skips it and
    # finds inc/coef.h. Making the target changes nothing in first/, whose stat the
    # whole-command entry trusted for "no new hiding file".
    for d in ("first", "inc", "gen"):
        (tmp_path / d).mkdir()
    (tmp_path / "k.cu").write_text(SOURCE)
    (tmp_path / "inc" / "coef.h").write_text("#define COEF 2.0f\n")
    os.symlink("../gen/coef.h", tmp_path / "first" / "coef.h")
    b = Build(toolkit, tmp_path, "-Ifirst", "-Iinc")
    b.launcher()
    (tmp_path / "gen" / "coef.h").write_text("#define COEF 5.0f\n")
    got = b.launcher()
    assert got == b.plain(), b.hits()


def test_a_folder_named_as_the_header_earlier_in_the_path_becomes_a_file(toolkit, tmp_path):
    # gcc skips a folder named coef.h; a file of that name, made in its place, hides inc/'s.
    for d in ("first", "inc", "first/coef.h"):
        (tmp_path / d).mkdir()
    (tmp_path / "k.cu").write_text(SOURCE)
    (tmp_path / "inc" / "coef.h").write_text("#define COEF 2.0f\n")
    b = Build(toolkit, tmp_path, "-Ifirst", "-Iinc")
    b.launcher()
    (tmp_path / "first" / "coef.h").rmdir()
    (tmp_path / "first" / "coef.h").write_text("#define COEF 5.0f\n")
    got = b.launcher()
    assert got == b.plain(), b.hits()


def test_a_header_edited_reverted_and_edited_again(toolkit, tmp_path):
    # Several results per command: each state answered by its own, a third state by none.
    (tmp_path / "k.cu").write_text(SOURCE)
    header = tmp_path / "coef.h"
    b = Build(toolkit, tmp_path)
    objects = []
    for text in ("2.0f", "3.0f", "2.0f", "4.0f", "3.0f"):
        header.write_text(f"#define COEF {text}\n")  # the same size every time
        objects.append(b.launcher())
    assert b.hits() == [False, False, True, False, True]
    assert objects[0] == objects[2] != objects[1] == objects[4] != objects[3]
    assert objects[4] == b.plain()  # 3.0f, as the header is now


def test_a_parent_reference_through_a_linked_source_folder(toolkit, tmp_path):
    # src is a link to deep/a/src: "../inc/coef.h" beside it is deep/a/inc/coef.h for gcc
    # (the system resolves .. after the link), not ./inc/coef.h, which a lexical clean names.
    for d in ("inc", "deep/a/src", "deep/a/inc"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "deep/a/src/k.cu").write_text(SOURCE.replace('"coef.h"', '"../inc/coef.h"'))
    os.symlink("deep/a/src", tmp_path / "src")
    (tmp_path / "inc/coef.h").write_text("#define COEF 2.0f\n")
    (tmp_path / "deep/a/inc/coef.h").write_text("#define COEF 3.0f\n")
    b = Build(toolkit, tmp_path, source="src/k.cu")
    b.launcher()
    (tmp_path / "deep/a/inc/coef.h").write_text("#define COEF 5.0f\n")
    got = b.launcher()
    assert got == b.plain(), b.hits()
