"""Reading a build record is bounded in memory as well as time: the reader keeps of each
entry's manifest only what it shows (``buildlog._Kept``, ``build_view._lean``), and reads at
most the newest ``MAX_ENTRIES`` entries, ``MAX_RECORD_BYTES`` and ``MAX_RECORD_WORDS`` command
words (each entry's parse bounded by ``MAX_ENTRY_VALUES``; an older, longer record
stays readable: its older entries are left unread and said so). Memory is the peak RSS of
``nvstage show`` in a subprocess, over records crafted from one real launcher entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nvstage.compiler.buildlog import log as buildlog

BIN = Path(sys.executable).parent


def _doc(i: int, **kw) -> dict:
    return {"schema": buildlog.SCHEMA, "argv": ["nvcc", "-c", f"k{i}.cu", "-o", f"k{i}.o"],
            "cwd": "/x", "started": 1e9 + i, "seconds": 1.0, "status": "fallback",
            "exit_code": 0, "pid": 1, "reason": "r", "hit": False, "build": None, **kw}


def _record(root: Path, docs) -> Path:
    (root / "tu").mkdir(parents=True)
    (root / buildlog.MARK).write_text("x\n")
    for i, doc in enumerate(docs):
        (root / "tu" / f"{int(doc['started'] * 1e6):017d}-1-{i}.json").write_text(
            json.dumps(doc))
    return root


def test_a_record_past_its_entry_cap_is_read_newest_first(tmp_path, monkeypatch):
    rec = _record(tmp_path / "rec", [_doc(i) for i in range(6)])
    monkeypatch.setattr(buildlog, "MAX_ENTRIES", 3)
    r = buildlog.load_build_log(rec)  # was: an error, the whole record unreadable
    assert [e.argv[2] for e in r.entries] == ["k3.cu", "k4.cu", "k5.cu"]
    assert r.skipped == ["3 older entries: the record holds more than the 3 nvstage reads "
                         "from one (MAX_ENTRIES)"]


def test_a_manifest_is_read_again_from_its_file_and_a_replaced_one_is_none(tmp_path):
    rec = _record(tmp_path / "rec", [_doc(0, status="ok", reason=None, build={
        "output": "k0.o", "source": "k0.cu", "stages": []})])
    (entry,) = buildlog.load_build_log(rec).entries
    assert entry.__dict__["_build"] is None  # not held
    assert entry.output == "/x/k0.o" and entry.source == "/x/k0.cu"  # kept: asked of every one
    assert entry.build["stages"] == []
    (path,) = (rec / "tu").iterdir()
    path.write_text(path.read_text().replace('"k0.cu"', '"k9.cu"'))
    assert entry.build is None  # another entry's bytes now: no manifest rather than its


# -- memory and time, per entry -----------------------------------------------------------------
@pytest.fixture(scope="module")
def real_entry(toolkit, tmp_path_factory) -> dict:
    """One launcher entry of a real nvcc command (its manifest: stages, kernels, plan)."""
    root = tmp_path_factory.mktemp("one-entry")
    (root / "k.cu").write_text("__global__ void k(float* p) { p[threadIdx.x] *= 2.0f; }\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVSTAGE_")}
    env.update(NVSTAGE_SERVER="0", NVSTAGE_CACHE_DIR=str(root / "cache"))
    cp = subprocess.run([str(BIN / "nvstage"), str(toolkit.nvcc), "-arch=sm_80", "-c", "k.cu",
                         "-o", "k.o"], cwd=root, env=env, capture_output=True, text=True,
                        timeout=300)
    assert cp.returncode == 0, cp.stderr
    (path,) = (root / buildlog.FOLDER / "tu").iterdir()
    doc = json.loads(path.read_text())
    assert doc["status"] == "ok" and doc["build"]["stages"]
    return doc


def _crafted(root: Path, doc: dict, n: int) -> Path:
    """``n`` entries of ``doc``'s manifest, each its own unit of one build."""
    out = doc["build"]["output"]
    text = json.dumps({**doc, "build_id": "ninja:1:1"})
    tu = root / buildlog.FOLDER / "tu"
    tu.mkdir(parents=True)
    (root / buildlog.FOLDER / buildlog.MARK).write_text("x\n")
    for i in range(n):
        started = doc["started"] + i * 0.001
        (tu / f"{int(started * 1e6):017d}-1-{i}.json").write_text(
            text.replace(json.dumps(out), json.dumps(f"/p/k{i}.o")).replace(
                json.dumps(doc["started"]), json.dumps(started), 1))
    return root


def _show(record: Path) -> tuple[float, float]:
    """(peak RSS in MiB, seconds) of ``nvstage show RECORD``, in a process of its own."""
    start = time.monotonic()
    child = subprocess.Popen([str(BIN / "nvstage"), "show", str(record)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, "NO_COLOR": "1", "COLUMNS": "160"})
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0
    return usage.ru_maxrss / 1024, time.monotonic() - start


def test_memory_and_time_per_entry_are_bounded(real_entry, tmp_path):
    """A few hundred entries and 1,500: what each entry adds to ``show``'s peak RSS, and to
    its time, stays small enough that a record at its caps (``MAX_ENTRIES``) takes at most a
    few hundred MB. Each entry is a real one (about 30 KB); before, the reader held every
    manifest as Python objects (about 100 KB an entry: 5 GB at the old caps)."""
    small, big = 300, 1500
    rss_small, t_small = _show(_crafted(tmp_path / "small", real_entry, small))
    rss_big, t_big = _show(_crafted(tmp_path / "big", real_entry, big))
    per_entry_kb = (rss_big - rss_small) * 1024 / (big - small)
    assert per_entry_kb < 40, per_entry_kb  # measured: about 16 KB
    # What the entries add at the caps (the process's own start, about 40 MB alone, is left out:
    # ru_maxrss of a child also counts what it waited for, which the suite's state can vary).
    at_caps_mb = per_entry_kb * buildlog.MAX_ENTRIES / 1024
    assert at_caps_mb < 400, at_caps_mb  # measured: about 160 MB
    # Time: a loaded 2-core machine takes 2 to 5 ms an entry; 25 ms would be a regression.
    assert (t_big - t_small) / (big - small) < 0.025, (t_small, t_big)


# -- words, not only bytes (issue 43: a log at its byte cap of tiny argv words took 2.4 GB) -----
def test_a_record_past_its_word_cap_is_read_newest_first(tmp_path, monkeypatch):
    """Each entry's command weighs its words (and its characters, 64 to a word); past
    ``MAX_RECORD_WORDS`` the older entries are left unread, and said so, as past the bytes."""
    long = "x" * (64 * 3)  # weighs 1 + 3
    rec = _record(tmp_path / "rec", [_doc(i, argv=["nvcc", "-c", f"k{i}.cu", long])
                                     for i in range(6)])
    assert buildlog.argv_weight(["nvcc", "-c", "k0.cu", long]) == 4 + 203 // 64
    monkeypatch.setattr(buildlog, "MAX_RECORD_WORDS", 3 * 7 + 6)
    r = buildlog.load_build_log(rec)
    assert [e.argv[2] for e in r.entries] == ["k3.cu", "k4.cu", "k5.cu"]
    assert r.skipped == ["3 older entries: the record holds more than the 27 command words "
                         "nvstage reads from one (MAX_RECORD_WORDS)"]


def test_an_entry_of_more_values_than_any_real_one_is_not_parsed(tmp_path, monkeypatch):
    """What parsing one entry costs at once is bounded before it is parsed: its values are
    counted in its bytes (a crafted 16 MiB entry of tiny words made 3 million strings)."""
    rec = _record(tmp_path / "rec", [_doc(0, argv=["nvcc", *["ab"] * 50]), _doc(1)])
    monkeypatch.setattr(buildlog, "MAX_ENTRY_VALUES", 40)
    r = buildlog.load_build_log(rec)
    assert [e.argv[2] for e in r.entries] == ["k1.cu"]
    (said,) = r.skipped
    assert said.endswith(": more than 40 JSON values, which no entry nvstage writes holds")


def test_an_entry_holds_no_more_than_a_path_and_a_line_of_reason(tmp_path):
    rec = _record(tmp_path / "rec", [_doc(0, cwd="/" + "d" * 5000),
                                     _doc(1, reason="r" * 10_000, build={"output": "o" * 5000,
                                                                         "source": "k1.cu"})])
    r = buildlog.load_build_log(rec)
    (entry,) = r.entries
    assert r.skipped[0].endswith("cwd is longer than any path")
    assert entry.reason == "r" * 2000 + "... (8,000 more characters)"
    assert entry.__dict__["_kept"].slim == {"output": None, "source": "k1.cu"}


def _tiny_words(root: Path, entries: int) -> Path:
    """``entries`` entries of 100,000 two-character words each (the most an entry may hold):
    the adversary's log, which filled the byte cap (536 of them) with 54 million words."""
    doc = _doc(0, argv=["nvcc", *[f"{i % 100:02d}" for i in range(99_999)]])
    return _record(root, [{**doc, "started": 1e9 + i} for i in range(entries)])


def test_memory_at_the_word_cap_is_bounded(tmp_path):
    """60 such entries (6 million words, 30 MB): ``show`` reads the newest up to
    ``MAX_RECORD_WORDS`` (2 million) and holds what they weigh, a few hundred MB at most
    however large the record (measured: 130 MB above a one-entry record at 256 MiB; was 2.4
    GB and 49 s there, about 1 GB here)."""
    rss_one, _ = _show(_tiny_words(tmp_path / "one", 1))
    rss_cap, seconds = _show(_tiny_words(tmp_path / "cap", 60))
    assert rss_cap - rss_one < 250, (rss_one, rss_cap)
    assert seconds < 60, seconds  # measured: 4 s on a loaded 2-core machine
