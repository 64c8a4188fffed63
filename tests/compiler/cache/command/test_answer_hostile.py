"""The whole-command hit against what a build can do between two runs of one command: every
file nvcc or gcc reads that the key or the entry must see, every file they write that the entry
must restore, and a hit that cannot finish cleanly."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from nvstage import proc
from nvstage.cli.main import run
from nvstage.compiler.buildlog import current as build_record
from nvstage.compiler.nvcc import host_flags

_ID = re.compile(r"(_[0-9a-f]{8}_[0-9a-f]{2,}_[A-Za-z0-9_]+?_[0-9a-f]{8}|__nv_module_id_\w+|"
                 r"_GLOBAL__N__[0-9a-f_]+\w*|tmpxft_[0-9a-f_]+|/tmp/[\w.-]+)")
KERNEL = "__global__ void k(float* x) { x[threadIdx.x] *= COEF; }\n"


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "DEPENDENCIES_OUTPUT",
                 "SUNPRO_DEPENDENCIES"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "k.cu").write_text(KERNEL)
    return tmp_path


def _hits(folder) -> list[bool]:
    from nvstage.compiler.buildlog.log import load_build_log

    return [e.hit for e in load_build_log(folder).entries]


def _run(argv, capfd) -> int:
    code = run([str(a) for a in argv])
    capfd.readouterr()
    return code


def _sass(toolkit, obj) -> str:
    return _ID.sub("<id>", proc.run([toolkit.tool("cuobjdump"), "-sass", str(obj)]).stdout)


def _same_as_plain(toolkit, folder, argv, env=None):
    """The launcher's object is the one plain nvcc makes of the same command now."""
    plain = [a if a != "k.o" else "plain.o" for a in argv]
    cp = subprocess.run(plain, cwd=folder, capture_output=True, text=True,
                        env={**os.environ, **(env or {})})
    assert cp.returncode == 0, cp.stderr
    assert _sass(toolkit, folder / "k.o") == _sass(toolkit, folder / "plain.o")


def test_an_options_file_named_by_nvcc_append_flags_is_read_for_the_key(folder, toolkit, capfd,
                                                                          monkeypatch):
    (folder / "flags.txt").write_text("-DCOEF=2.0f\n")
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-optf flags.txt")
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90"]
    assert _run(argv, capfd) == 0 and _run(argv, capfd) == 0
    assert _hits(folder) == [False, True]
    (folder / "flags.txt").write_text("-DCOEF=3.0f\n")  # was answered with COEF 2 before
    assert _run(argv, capfd) == 0
    assert _hits(folder) == [False, True, False]
    _same_as_plain(toolkit, folder, argv, {"NVCC_APPEND_FLAGS": "-optf flags.txt"})


def test_a_host_compiler_response_file_is_never_answered_whole(folder, toolkit, capfd):
    (folder / "rsp").write_text("-DCOEF=2.0f\n")
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90", "-Xcompiler", "@rsp"]
    assert _run(argv, capfd) == 0 and _run(argv, capfd) == 0
    (folder / "rsp").write_text("-DCOEF=3.0f\n")  # gcc reads it; nothing keyed it
    assert _run(argv, capfd) == 0
    assert _hits(folder) == [False, False, False]
    _same_as_plain(toolkit, folder, argv)


def test_files_gcc_writes_beside_the_object_are_written_every_time(folder, toolkit, capfd):
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90", "-DCOEF=2",
            "-Xcompiler", "--coverage,-fstack-usage"]
    for _ in range(3):  # neither a whole answer nor the stage cache would write them
        for side in ("k.gcno", "k.su"):
            (folder / side).unlink(missing_ok=True)
        assert _run(argv, capfd) == 0
        assert (folder / "k.gcno").is_file() and (folder / "k.su").is_file()
    from nvstage.compiler.buildlog.log import load_build_log

    entries = load_build_log(folder).entries
    assert [(e.hit, e.status) for e in entries] == [(False, "fallback")] * 3
    assert "--coverage" in entries[0].reason


def test_which_host_compiler_words_no_cache_follows():
    harmless = ["-O2", "-Wp,-D_FORTIFY_SOURCE=2", "-Wa,--noexecstack"]
    assert host_flags.unwatched_word(harmless) is None
    for word in ("@rsp", "--coverage", "-fprofile-use=p", "-Wp,-MD,k.d", "-Wa,-adhln=k.lst",
                 "-fdump-tree-all", "-gsplit-dwarf", "-specs=x.specs"):
        assert host_flags.unwatched_word(["-O2", word]) == word


def test_gccs_dependencies_output_is_never_answered_whole(folder, toolkit, capfd, monkeypatch):
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90", "-DCOEF=2"]
    assert _run(argv, capfd) == 0 and _run(argv, capfd) == 0
    monkeypatch.setenv("DEPENDENCIES_OUTPUT", "dep.d")
    assert _run(argv, capfd) == 0
    assert _hits(folder) == [False, True, False]
    assert "k.o: k.cu" in (folder / "dep.d").read_text()  # as plain nvcc's gcc writes it


def test_device_time_trace_is_staged_and_its_file_answered(folder, toolkit, capfd):
    # nvcc's trace file is one of the command's outputs (compiler/nvcc/time_trace.py): the
    # command is staged, and answered whole with the trace restored.
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90", "-DCOEF=2",
            "-fdevice-time-trace", "t.json"]
    assert _run(argv, capfd) == 0
    (folder / "t.json").unlink()
    assert _run(argv, capfd) == 0
    assert (folder / "t.json").is_file()
    from nvstage.compiler.buildlog.log import load_build_log

    assert [e.status for e in load_build_log(folder).entries][0] == "ok"
    assert _hits(folder) == [False, True]


def test_a_host_compiler_chosen_by_nvcc_prepend_flags_is_keyed(folder, toolkit, capfd,
                                                               monkeypatch):
    import shutil

    bindir = folder / "cc"
    bindir.mkdir()
    gcc = bindir / "gcc"
    gcc.write_text(f"#!/bin/sh\nexec {shutil.which('gcc')} \"$@\"\n")
    gcc.chmod(0o755)
    monkeypatch.setenv("NVCC_PREPEND_FLAGS", f"-ccbin {bindir}")
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90", "-DCOEF=2"]
    assert _run(argv, capfd) == 0 and _run(argv, capfd) == 0
    gcc.write_text(gcc.read_text() + "# another compiler now\n")
    assert _run(argv, capfd) == 0
    assert _hits(folder) == [False, True, False]


def test_a_hit_that_cannot_write_its_output_leaves_no_half_file(folder, toolkit, capfd):
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90", "-DCOEF=2"]
    assert _run(argv, capfd) == 0 and _run(argv, capfd) == 0
    (folder / "k.o").unlink()
    # A disk that fills up: no file may grow past 4 KiB (the object is larger).
    code = ("import resource, sys; resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096));"
            "from nvstage.compiler.cache.command.answer import serve; import os;"
            "sys.exit(7 if serve(sys.argv[1:], os.getcwd(), os.environ) is None else 0)")
    cp = subprocess.run([sys.executable, "-c", code, *argv], cwd=folder, capture_output=True,
                        text=True)
    assert cp.returncode == 7, cp.stderr
    assert sorted(p.name for p in folder.iterdir() if p.name.startswith("k.o")) == []


def test_a_build_record_that_fails_after_a_hit_does_not_run_the_command_again(folder, toolkit,
                                                                              capfd,
                                                                              monkeypatch):
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90", "-DCOEF=2",
            "-Xptxas", "-v"]
    assert _run(argv, capfd) == 0 and _run(argv, capfd) == 0

    def broken(served):
        raise RuntimeError("a build record that cannot be written")

    def no(*a, **k):
        raise AssertionError("a process was started after a hit")

    monkeypatch.setattr(build_record, "add_hit", broken)
    monkeypatch.setattr(subprocess.Popen, "__init__", no)
    assert run([str(a) for a in argv]) == 0
    monkeypatch.undo()
    err = capfd.readouterr().err
    assert err.count("Compiling entry function") == 1  # ptxas' report, printed once


def test_a_manifest_planted_beside_an_entry_is_not_copied_into_the_record(folder, toolkit,
                                                                         capfd):
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90", "-DCOEF=2"]
    assert _run(argv, capfd) == 0
    planted = list((folder / "cache" / "inv").glob("*/*/*.build"))
    assert len(planted) == 1
    planted[0].write_text('{"source": "<script>alert(1)</script>.cu"}')
    assert _run(argv, capfd) == 0
    from nvstage.compiler.buildlog.log import load_build_log

    entries = load_build_log(folder).entries
    assert [e.hit for e in entries] == [False, True]
    assert entries[1].build is None  # not the planted one
    assert entries[0].build is not None


def test_an_entry_interrupted_while_stored_leaves_no_half_file(folder, toolkit, capfd,
                                                               monkeypatch):
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90", "-DCOEF=2"]
    real = os.replace

    def interrupted(src, dst, *a, **k):
        if os.fspath(dst).endswith("/meta"):  # the entry's document, written last
            raise KeyboardInterrupt
        return real(src, dst, *a, **k)

    monkeypatch.setattr(os, "replace", interrupted)
    assert _run(argv, capfd) == 130  # as a shell says an interrupted command
    monkeypatch.setattr(os, "replace", real)
    inv = folder / "cache" / "inv"
    assert [p.name for p in inv.glob("*/*/*") if p.name.startswith(".")] == []
    assert list(inv.glob("*/*/meta")) == []  # no result named: the next run is a miss
    assert _run(argv, capfd) == 0 and list(inv.glob("*/*/meta"))
