"""A resident nvstage's memory between hits (``answer.Memory``): an entry's document kept
under its file's identity, and a changed watched folder's look skipped only where its listing
alone settled it and its stat had settled. Never a hit that a fresh process would not give."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from nvstage.cli.main import run
from nvstage.compiler.cache.command import answer
from nvstage.compiler.buildlog import current as build_record
from nvstage.compiler.nvcc import environment as nvcc_env
from nvstage.compiler.store.presence import Presence


@pytest.fixture
def warm(tmp_path, monkeypatch, toolkit):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(nvcc_env, "_memo", {})
    (tmp_path / "inc").mkdir()
    (tmp_path / "first").mkdir()
    (tmp_path / "inc" / "coef.h").write_text("#define COEF 2.0f\n")
    (tmp_path / "k.cu").write_text(
        '#include "coef.h"\n__global__ void k(float* x) { x[threadIdx.x] *= COEF; }\n')
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-Ifirst", "-Iinc", "-arch=sm_90"]
    return tmp_path, argv


def _hit(argv, folder, memory):
    return answer.answer(argv, str(folder), dict(os.environ), memory)


def _counting(monkeypatch) -> list:
    looks = []
    real = Presence.under

    def under(self, folder, names):
        looks.append(folder)
        return real(self, folder, names)

    monkeypatch.setattr(Presence, "under", under)
    return looks


def test_a_settled_folder_judged_by_its_listing_is_not_looked_at_again(warm, monkeypatch,
                                                                        capfd):
    folder, argv = warm
    assert run(argv) == 0
    capfd.readouterr()
    cold = (folder / "k.o").read_bytes()
    (folder / "first" / "notes.txt").write_text("")  # the watched folder changed
    (folder / "first" / "crt").mkdir()  # and holds a folder a hiding place is under
    memory = answer.Memory()
    looks = _counting(monkeypatch)
    assert _hit(argv, folder, memory) is not None  # changed, not settled: looked at
    assert _hit(argv, folder, memory) is not None
    assert looks.count(str(folder / "first")) == 2
    time.sleep(2.2)  # settled now
    looks.clear()
    assert _hit(argv, folder, memory) is not None
    # first/crt is there: a header could appear under it without first's stat moving, so
    # first is looked at every time; the folder of the source (k.cu), judged by its listing
    # alone, is kept.
    assert _hit(argv, folder, memory) is not None
    assert looks.count(str(folder / "first")) == 2
    assert looks.count(str(folder)) <= 1
    assert (folder / "k.o").read_bytes() == cold
    # A header made under first/crt hides the toolkit's: no hit, memory or not.
    (folder / "first" / "crt" / "host_config.h").write_text("#error hidden\n")
    assert _hit(argv, folder, memory) is None
    assert _hit(argv, folder, None) is None


def test_a_new_hiding_header_is_seen_after_the_folder_was_kept(warm, monkeypatch, capfd):
    folder, argv = warm
    assert run(argv) == 0
    capfd.readouterr()
    (folder / "first" / "notes.txt").write_text("")
    time.sleep(2.2)
    memory = answer.Memory()
    assert _hit(argv, folder, memory) is not None  # looked at, and kept
    looks = _counting(monkeypatch)
    assert _hit(argv, folder, memory) is not None
    assert str(folder / "first") not in looks
    (folder / "first" / "coef.h").write_text("#define COEF 4.0f\n")  # found before inc's now
    assert _hit(argv, folder, memory) is None


def test_a_folder_looked_at_for_one_command_is_not_looked_at_again_for_another(
        warm, monkeypatch, capfd):
    # Two commands (two entries) with the same search folders and headers: a watched folder
    # changed since both were recorded (a build folder does each build) is listed once.
    folder, argv = warm
    other = [*argv[:-1], "-arch=sm_80"]
    assert run(argv) == 0 and run(other) == 0
    capfd.readouterr()
    (folder / "first" / "notes.txt").write_text("")
    time.sleep(2.2)
    memory = answer.Memory()
    looks = _counting(monkeypatch)
    assert _hit(argv, folder, memory) is not None and _hit(other, folder, memory) is not None
    assert looks.count(str(folder / "first")) == 1
    # And what the list names is still looked at once the folder changes again.
    (folder / "first" / "coef.h").write_text("#define COEF 4.0f\n")
    assert _hit(other, folder, memory) is None and _hit(argv, folder, memory) is None


def test_an_entry_rewritten_is_read_again(warm, capfd):
    folder, argv = warm
    assert run(argv) == 0
    memory = answer.Memory()
    assert _hit(argv, folder, memory) is not None
    assert len(memory.metas) == 1
    # The header edited: a miss; the pipeline (a launcher process of its own, as in a build)
    # stores a second result under the same key.
    (folder / "inc" / "coef.h").write_text("#define COEF 3.0f\n")
    assert _hit(argv, folder, memory) is None
    subprocess.run([sys.executable, "-m", "nvstage", *argv], check=True, capture_output=True)
    new = (folder / "k.o").read_bytes()
    (folder / "k.o").unlink()
    got = _hit(argv, folder, memory)
    assert got is not None and (folder / "k.o").read_bytes() == new


def test_the_documents_kept_are_bounded_by_their_bytes(warm, capfd, monkeypatch):
    folder, argv = warm
    other = [*argv[:-1], "-arch=sm_80"]  # another command: another entry
    assert run(argv) == 0 and run(other) == 0
    memory = answer.Memory()
    assert _hit(argv, folder, memory) is not None and _hit(other, folder, memory) is not None
    assert len(memory.metas) == 2
    # Room for one document: the next one read lets the first go, and each still hits.
    monkeypatch.setattr(answer.Memory, "META_BYTES", 1)
    memory = answer.Memory()
    assert _hit(argv, folder, memory) is not None and len(memory.metas) == 1
    assert _hit(other, folder, memory) is not None and len(memory.metas) == 1
    assert _hit(argv, folder, memory) is not None and len(memory.metas) == 1


def test_hiding_places_shared_by_commands_are_read_once(warm, capfd, monkeypatch):
    folder, argv = warm
    other = [*argv[:-1], "-arch=sm_80"]  # another entry, the same headers and search folders
    assert run(argv) == 0 and run(other) == 0
    capfd.readouterr()
    (folder / "first" / "notes.txt").write_text("")  # a watched folder changed: looked at
    reads = []
    real = answer._shadow_bytes
    monkeypatch.setattr(answer, "_shadow_bytes", lambda path, sha: reads.append(path) or
                        real(path, sha))
    memory = answer.Memory()
    assert _hit(argv, folder, memory) is not None and _hit(other, folder, memory) is not None
    assert len(reads) == 1 and len(memory.shadows) == 1
    # What the list names is still looked at each time: a header made there hides inc's.
    (folder / "first" / "coef.h").write_text("#define COEF 4.0f\n")
    assert _hit(other, folder, memory) is None
    assert _hit(argv, folder, memory) is None


def test_a_build_manifest_is_read_once_and_each_hits_entry_carries_it(warm, capfd,
                                                                     monkeypatch):
    folder, argv = warm
    assert run(argv) == 0
    capfd.readouterr()
    reads = []
    real = build_record.manifest
    monkeypatch.setattr(build_record, "manifest", lambda path, sha: reads.append(path) or
                        real(path, sha))
    memory = answer.Memory()
    record = folder / build_record.FOLDER / "tu"
    before = set(record.iterdir())
    for _ in range(2):
        served = _hit(argv, folder, memory)
        build_record.add_hit(served, memory.manifests)
    assert len(reads) == 1 and len(memory.manifests) == 1
    entries = [json.loads(p.read_text()) for p in set(record.iterdir()) - before]
    assert len(entries) == 2 and all(e["hit"] and e["build"] for e in entries)
    assert entries[0]["build"] == entries[1]["build"]
