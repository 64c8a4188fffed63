"""Builds in the build record (compiler/buildlog/log.py): each entry names the run of the build tool
it was part of (buildlog/current.build_identity, from /proc), entries group into builds (by
that, else by pauses: older records and scripts), the record keeps the last builds whole, and
the step kinds (compiler/nvcc/step_kind.py) read from a command's words."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from nvstage.compiler.buildlog import log as buildlog
from nvstage.compiler.nvcc import step_kind as steps
from nvstage.compiler.buildlog import current as build_record


def _entry(started: float, build_id: str | None, out: str, seconds: float = 1.0,
           argv0: str = "/usr/bin/nvcc") -> buildlog.Entry:
    return buildlog.Entry([argv0, "-c", out[:-2] + ".cu", "-o", out], "/b", started, seconds,
                          "ok", 0, 1, build_id=build_id)


def test_entries_group_by_build_tool_run_else_by_pauses():
    entries = [_entry(100, "ninja:1:5", "a.o"), _entry(101, "ninja:1:5", "b.o"),
               _entry(300, "ninja:2:9", "a.o"),
               # No build tool named: an older record's entries, split where they pause.
               _entry(1000, None, "a.o"), _entry(1004, None, "b.o", seconds=20),
               _entry(1030, None, "c.o"),  # 6 s after b.o ended: the same build
               _entry(2000, None, "a.o"),
               _entry(2100, "process:7:1", "a.o"), _entry(2102, "process:7:1", "b.o")]
    runs = buildlog.builds_of(entries)
    assert [(r.number, r.tool, len(r.entries)) for r in runs] == [
        (1, "ninja", 2), (2, "ninja", 1), (3, None, 3), (4, None, 1), (5, None, 2)]
    assert runs[0].wall_seconds == pytest.approx(2.0) and runs[0].step_seconds == 2.0
    assert runs[0].parallelism == pytest.approx(1.0)
    doc = runs[2].to_json()
    assert doc["told_apart_by"] == "time" and doc["steps"] == 3
    assert runs[0].to_json()["told_apart_by"] == "build tool"
    assert buildlog.builds_of([]) == []


def test_an_old_record_without_build_ids_still_reads(tmp_path):
    rec = tmp_path / buildlog.FOLDER
    (rec / "tu").mkdir(parents=True)
    (rec / buildlog.MARK).write_text("x")
    for n, started in enumerate((100.0, 101.0, 500.0)):
        doc = _entry(started, None, f"k{n}.o").to_json()
        del doc["build_id"]  # as nvstage wrote entries before builds were told apart
        (rec / "tu" / f"{int(started * 1e6):017d}-1-{n}.json").write_text(json.dumps(doc))
    r = buildlog.load_build_log(tmp_path)
    assert [e.build_id for e in r.entries] == [None] * 3 and not r.skipped
    assert [len(b.entries) for b in buildlog.builds_of(r.entries)] == [2, 1]


def test_the_record_keeps_the_last_builds_whole(tmp_path):
    env = {buildlog.ENV: str(tmp_path / "rec")}
    for n in range(buildlog.KEEP_BUILDS + 3):
        for out in ("a.o", "b.o") if n < 3 else ("a.o",):
            e = _entry(1000.0 + 100 * n, f"ninja:{n + 10}:1", out)
            assert buildlog.add(e, str(tmp_path), env) is not None
    rec = tmp_path / "rec"
    gone = buildlog.prune(rec)
    r = buildlog.load_build_log(rec)
    runs = buildlog.builds_of(r.entries)
    # The last KEEP_BUILDS builds whole; of the three before, b.o's latest entry (the
    # project still has it) and nothing else: a.o and b.o of builds 1 and 2, a.o of build 3.
    assert len(runs) == buildlog.KEEP_BUILDS + 1 and gone == 5
    assert [len(x.entries) for x in runs][:1] == [1] and runs[0].entries[0].output.endswith("b.o")
    assert buildlog.prune(rec) == 0
    marks = set(os.listdir(rec / "builds"))
    assert marks == {f"ninja_{n + 10}_1" for n in range(2, buildlog.KEEP_BUILDS + 3)}


def test_a_new_build_past_the_limit_prunes_the_record(tmp_path):
    env = {buildlog.ENV: str(tmp_path / "rec")}
    limit = buildlog.KEEP_BUILDS + buildlog.PRUNE_AFTER
    for n in range(limit + 1):
        buildlog.add(_entry(1000.0 + 10 * n, f"make:{n + 1}:1", "a.o"), str(tmp_path), env)
    # The first command of build limit + 1 pruned: KEEP_BUILDS builds are left.
    r = buildlog.load_build_log(tmp_path / "rec")
    assert len(buildlog.builds_of(r.entries)) == buildlog.KEEP_BUILDS


def test_prune_removes_only_entries(tmp_path):
    env = {buildlog.ENV: str(tmp_path / "rec")}
    for n in range(buildlog.KEEP_BUILDS + 2):
        buildlog.add(_entry(1000.0 + 10 * n, f"ninja:{n + 1}:1", "a.o"), str(tmp_path), env)
    rec = tmp_path / "rec"
    (rec / "tu" / "notes.txt").write_text("mine")
    (rec / "tu" / "../../elsewhere.json").write_text("{}")
    assert buildlog.prune(rec) == 2
    assert (rec / "tu" / "notes.txt").exists() and (tmp_path / "elsewhere.json").exists()


def test_the_build_identity_is_the_build_tools_run(tmp_path):
    # A child of a "make" process (a shell script named make): the identity names it; two
    # runs of it are two builds.
    make = tmp_path / "make"
    make.write_text("#!/bin/sh\n\"$@\"\n")
    make.chmod(0o755)
    code = ("from nvstage.compiler.buildlog.current import build_identity\n"
            "print(build_identity())\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    ids = [subprocess.run([str(make), sys.executable, "-c", code], capture_output=True,
                          text=True, env=env, timeout=60).stdout.strip() for _ in range(2)]
    assert all(i.startswith("make:") for i in ids) and ids[0] != ids[1], ids
    # No build tool above: the nearest process that is no shell, for the reader to split by
    # time.
    plain = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, timeout=60).stdout.strip()
    assert plain.startswith("process:") and plain.split(":")[1] == str(os.getpid())
    assert build_record._stat_of(os.getpid())[1] == os.getppid()


def test_a_parents_build_is_looked_up_once_while_that_process_lives(monkeypatch):
    # A resident nvstage asks for the build of each hit's parent: the same parent (its pid and
    # start time) is one read of /proc, not a walk up its ancestors each time.
    monkeypatch.setattr(build_record, "_by_parent", {})
    reads = []
    real = build_record._stat_of
    monkeypatch.setattr(build_record, "_stat_of", lambda pid: reads.append(pid) or real(pid))
    first = build_record.build_identity(os.getpid())
    walked = len(reads)
    assert build_record.build_identity(os.getpid()) == first and len(reads) == walked + 1
    # Another process at that pid (another start time): walked again.
    build_record._by_parent[os.getpid()] = (-1, "make:1:1")
    assert build_record.build_identity(os.getpid()) == first and len(reads) == 2 * walked + 1


def test_an_entry_is_written_after_its_record_folder_was_removed(tmp_path, monkeypatch):
    # A process that writes entries (a resident nvstage) remembers a record folder it made
    # ready; the folder removed since (a clean of the build folder): made again, not lost.
    monkeypatch.setattr(build_record, "_ready", set())
    env = {"NVSTAGE_BUILD_RECORD": str(tmp_path / "rec")}
    build_record.write_entry(str(tmp_path), env, 1.0, "h", b"{}", pid=1)
    import shutil

    shutil.rmtree(tmp_path / "rec")
    build_record.write_entry(str(tmp_path), env, 2.0, "h", b"{}", pid=1)
    assert len(list((tmp_path / "rec" / "tu").iterdir())) == 1
    assert (tmp_path / "rec" / build_record.MARK).is_file()


@pytest.mark.parametrize("argv, kind, out", [
    (["/cuda/bin/nvcc", "-c", "a.cu", "-o", "a.o"], "cuda-compile", "a.o"),
    (["/cuda/bin/nvcc", "-dc", "a.cu", "-o", "a.o"], "cuda-compile", "a.o"),
    (["/cuda/bin/nvcc", "-shared", "-dlink", "a.o", "-o", "d.o"], "device-link", "d.o"),
    (["/cuda/bin/nvcc", "a.o", "d.o", "-o", "app"], "link", "app"),
    (["/cuda/bin/nvcc", "-lib", "a.o", "-o", "liba.a"], "archive", "liba.a"),
    (["/usr/bin/c++", "-MD", "-c", "/s/m.cpp", "-o", "m.o"], "cxx-compile", "m.o"),
    (["x86_64-linux-gnu-g++-12", "-c", "m.cc", "-o", "m.o"], "cxx-compile", "m.o"),
    (["/usr/bin/ccache", "/usr/bin/gcc", "-c", "m.c", "-o", "m.o"], "cxx-compile", "m.o"),
    (["/usr/bin/c++", "m.o", "-o", "app", "-lcudart"], "link", "app"),
    (["/usr/bin/ar", "qc", "liba.a", "a.o", "b.o"], "archive", "liba.a"),
    (["/usr/bin/ranlib", "liba.a"], "archive", "liba.a"),
    (["/usr/bin/ld.lld", "a.o", "-o", "app"], "link", "app"),
    (["/cmake/bin/cmake", "-E", "rm", "-f", "liba.a"], "other", None),
])
def test_step_kinds_and_outputs(argv, kind, out):
    e = buildlog.Entry(argv, "/b", 1.0, 0.1, "ran", 0)
    assert steps.kind_of(argv) == kind and e.kind == kind
    assert e.output == (None if out is None else f"/b/{out}")
