"""A header edited and reverted: the revert is answered whole (the whole-command entry keeps one
result per state of the files read, as ccache's manifest does), with the first build's
object and dependency file, and no process started."""

from __future__ import annotations

import os
import subprocess

from nvstage.cli.main import run
from nvstage.compiler.buildlog.log import load_build_log
from nvstage.compiler.nvcc import environment as nvcc_env


def test_a_reverted_header_is_a_whole_hit(tmp_path, monkeypatch, toolkit, capfd):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(nvcc_env, "_memo", {})
    (tmp_path / "inc").mkdir()
    header = tmp_path / "inc" / "coef.h"
    header.write_text("#define COEF 2.0f\n")
    (tmp_path / "k.cu").write_text(
        '#include "coef.h"\n__global__ void k(float* x) { x[threadIdx.x] *= COEF; }\n')
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-Iinc", "-MD", "-MF", "k.d",
            "-arch=sm_90"]

    def build() -> dict[str, bytes]:
        assert run(argv) == 0
        capfd.readouterr()
        return {n: (tmp_path / n).read_bytes() for n in ("k.o", "k.d")}

    first = build()
    header.write_text("#define COEF 3.0f\n")
    edited = build()
    assert edited["k.o"] != first["k.o"]
    header.write_text("#define COEF 2.0f\n")  # reverted: its stat is new, its bytes are not
    os.utime(header, ns=(1, 1))  # an old time, so that its contents are compared, not trusted

    def no(*a, **k):
        raise AssertionError("a process was started on a whole hit")

    monkeypatch.setattr(subprocess.Popen, "__init__", no)
    for name in ("fork", "posix_spawn", "posix_spawnp", "execv", "execve", "system"):
        monkeypatch.setattr(os, name, no)
    reverted = build()
    monkeypatch.undo()
    assert reverted == first
    entries = load_build_log(tmp_path).entries
    assert [e.hit for e in entries] == [False, False, True]


def test_a_depfile_the_build_tool_removes_at_once_still_makes_the_entry(tmp_path, monkeypatch,
                                                                         toolkit, capfd):
    # Ninja reads a -MF dependency file as soon as the command answers, and removes it: the
    # whole-command entry, written after the answer, holds it as it was (it was made from
    # the depfile's absence, so no command run by a resident nvstage was answered whole).
    from nvstage.compiler.launcher import flow as launcher

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(nvcc_env, "_memo", {})
    (tmp_path / "k.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n")
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-MD", "-MF", "k.d", "-arch=sm_90"]
    depfile: list[bytes] = []

    def ninja_reads(code: int) -> None:
        depfile.append((tmp_path / "k.d").read_bytes())
        (tmp_path / "k.d").unlink()

    # Run here, told the answer as the resident's child tells its client (``Hooks.answered``).
    assert launcher.run_staged(launcher.Command.here(argv),
                               launcher.Hooks(answered=ninja_reads)) == 0
    capfd.readouterr()
    (tmp_path / "k.o").unlink()
    assert run(argv) == 0
    capfd.readouterr()
    assert [e.hit for e in load_build_log(tmp_path).entries] == [False, True]
    assert (tmp_path / "k.d").read_bytes() == depfile[0]
