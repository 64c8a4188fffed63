"""A traced unit's trace as its build log entry names it (compiler/buildlog/traces.py): nvstage's
own traces pruned with the builds ``prune`` drops (never a file outside ``traces/``, never a
trace a command running now has just written), an entry never pointing a reader outside that
folder, and the summary an entry keeps standing in for a trace gone or replaced
(inspect/compile_time.summarize_path); a damaged summary is a note, never a traceback."""

from __future__ import annotations

import json
import os
import zlib

from nvstage.compiler.buildlog import log as buildlog
from nvstage.compiler.nvcc.trace_summary import unit_summary
from nvstage.inspect.compile_time import summarize_path

from tests.conftest import DATA

CAPTURED = DATA / "compile_time" / "templates_two_archs.json"  # nvcc 13.5, two archs
OLD, NEW = 1_000_000.0, 2_000_000.0  # the two builds' start (Unix time)


def _record(tmp_path):
    rec = tmp_path / buildlog.FOLDER
    (rec / "tu").mkdir(parents=True)
    (rec / "traces").mkdir()
    (rec / buildlog.MARK).write_text("x")
    return rec


def _trace_record(file: str, where: str = "build-log", data: bytes = b"{}",
                  summary: dict | None = None) -> dict:
    rec = {"file": file, "in": where, "bytes": len(data), "crc32": zlib.crc32(data)}
    return rec if summary is None else {**rec, "summary": summary}


def _add(rec, n: int, started: float, build_id: str, out: str, trace: dict | None) -> None:
    build = {"output": out, "source": out[:-2] + ".cu"}
    if trace is not None:
        build["time_trace"] = trace
    entry = buildlog.Entry(["/usr/bin/nvcc", "-c", out[:-2] + ".cu", "-o", out],
                           str(rec.parent), started, 1.0, "ok", 0, 1, build=build,
                           build_id=build_id)
    (rec / "tu" / f"{int(started * 1e6):017d}-1-{n}.json").write_text(
        json.dumps(entry.to_json()))


def _trace(rec, name: str, mtime: float) -> None:
    path = rec / "traces" / name
    path.write_text("{}")
    os.utime(path, (mtime, mtime))


def test_prune_removes_the_traces_of_the_builds_it_drops(tmp_path):
    rec = _record(tmp_path)
    a, c, d, racing = "a" * 20 + ".json", "c" * 20 + ".json", "d" * 20 + ".json", \
        "e" * 20 + ".json"
    for name in (a, c, d):
        _trace(rec, name, OLD + 5)
    _trace(rec, racing, NEW + 100)  # a command of the build running now: its entry to come
    (rec / "traces" / "notes.txt").write_text("not a trace")
    victim = tmp_path / ("f" * 20 + ".json")  # outside traces/: named by a hostile entry
    victim.write_text("{}")
    os.utime(victim, (OLD, OLD))
    # Build 1 traced a.o, c.o and d.o; build 2 a.o traced again and c.o untraced.
    _add(rec, 0, OLD, "ninja:1:1", "a.o", _trace_record(f"traces/{a}"))
    _add(rec, 1, OLD + 1, "ninja:1:1", "c.o", _trace_record(f"traces/{c}"))
    _add(rec, 2, OLD + 2, "ninja:1:1", "d.o", _trace_record(f"traces/{d}"))
    _add(rec, 3, NEW, "ninja:2:2", "a.o", _trace_record(f"traces/{a}"))
    _add(rec, 4, NEW + 1, "ninja:2:2", "c.o", None)
    _add(rec, 5, NEW + 2, "ninja:2:2", "x.o", _trace_record(f"traces/../../{victim.name}"))
    _add(rec, 6, NEW + 3, "ninja:2:2", "y.o", _trace_record(str(victim), "build-log"))
    # d.o's entry is its latest: kept, and its trace with it. Its older copy of c.o goes.
    assert buildlog.prune(tmp_path, keep=1) == 2
    left = sorted(p.name for p in (rec / "traces").iterdir())
    assert left == sorted([a, d, racing, "notes.txt"])
    assert victim.exists()


def test_prune_never_follows_a_traces_folder_that_is_a_link(tmp_path):
    rec = _record(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (rec / "traces").rmdir()
    (rec / "traces").symlink_to(elsewhere)
    _trace(rec, "b" * 20 + ".json", OLD)  # written through the link, into elsewhere/
    _add(rec, 0, OLD, "ninja:1:1", "a.o", None)
    _add(rec, 1, NEW, "ninja:2:2", "a.o", None)
    assert buildlog.prune(tmp_path, keep=1) == 1
    assert [p.name for p in elsewhere.iterdir()] == ["b" * 20 + ".json"]


def test_an_entry_names_a_trace_only_in_its_folder_or_from_its_command(tmp_path):
    rec = _record(tmp_path)
    names = {"traces/" + "a" * 20 + ".json": ("a" * 20 + ".json", True),
             "traces/../etc/passwd": None, "/etc/passwd": None, "traces/x/../y.json": None,
             "traces/" + "A" * 20 + ".json": None, "notraces/" + "a" * 20 + ".json": None}
    for n, file in enumerate(names):
        _add(rec, n, OLD + n, "ninja:1:1", f"u{n}.o", _trace_record(file))
    _add(rec, 9, OLD + 9, "ninja:1:1", "v.o", _trace_record("v.o.json", "cwd"))
    _add(rec, 10, OLD + 10, "ninja:1:1", "w.o", _trace_record("w.o.json", "elsewhere"))
    found = {e.output.rsplit("/", 1)[1]: e.trace_file
             for e in buildlog.load_build_log(tmp_path).entries}
    for n, want in enumerate(names.values()):
        f = found[f"u{n}.o"]
        assert (f.path, f.in_log) == want if want else f is None
    assert (found["v.o"].path, found["v.o"].in_log) == ("v.o.json", False)
    assert found["w.o"] is None


def test_a_trace_gone_or_replaced_counts_by_its_entrys_summary(tmp_path):
    rec = _record(tmp_path)
    data = CAPTURED.read_bytes()
    summary = unit_summary(json.loads(data), str(CAPTURED))
    name = "a" * 20 + ".json"
    _add(rec, 0, OLD, "ninja:1:1", "k.o", _trace_record(f"traces/{name}", data=data,
                                                         summary=summary))
    (rec / "traces" / name).write_bytes(data)
    whole = summarize_path(tmp_path).to_json(10)
    assert whole["from_summaries"] == 0 and whole["units"][0]["from"] == "trace"
    # Gone: the entry's summary has the unit's figures.
    (rec / "traces" / name).unlink()
    kept = summarize_path(tmp_path).to_json(10)
    assert kept["from_summaries"] == 1 and kept["work"] == whole["work"]
    assert [h["path"] for h in kept["headers"]] == [h["path"] for h in whole["headers"]]
    assert [t["name"] for t in kept["template_sets"]] == \
        [t["name"] for t in whole["template_sets"]]
    # Replaced (another build of the unit wrote it; this entry answered from the cache): the
    # file is not this entry's build, and is not read.
    other = json.loads(data)
    other["otherData"]["inputFiles"] = ["other.cu"]
    (rec / "traces" / name).write_text(json.dumps(other))
    replaced = summarize_path(tmp_path).to_json(10)
    assert [u["unit"] for u in replaced["units"]] == ["templates.cu"]
    assert replaced["from_summaries"] == 1


def test_a_damaged_summary_is_a_note_and_the_others_still_count(tmp_path, cli):
    rec = _record(tmp_path)
    good = unit_summary(json.loads(CAPTURED.read_bytes()), str(CAPTURED))
    bad = {**good, "template_sets": [{"name": "x", "seconds": float("nan"), "count": 1}]}
    _add(rec, 0, OLD, "ninja:1:1", "a.o", _trace_record("traces/" + "a" * 20 + ".json",
                                                         summary=good))
    _add(rec, 1, OLD + 1, "ninja:1:1", "b.o", _trace_record("traces/" + "b" * 20 + ".json",
                                                             summary=bad))
    _add(rec, 2, OLD + 2, "ninja:1:1", "c.o", _trace_record("traces/" + "c" * 20 + ".json"))
    r = cli("show", tmp_path, "--time", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["from_summaries"] == 1 and [u["unit"] for u in doc["units"]] == ["templates.cu"]
    assert len(doc["notes"]) == 2 and "Traceback" not in r.stderr
    assert "the time summary's template_sets seconds must be a number" in doc["notes"][0]
    assert "its time trace has no summary" in doc["notes"][1]
    assert "note: " in r.stderr


def test_no_file_outside_the_folders_read_is_read_for_an_entry(tmp_path):
    """A user's trace outside the build folder (-fdevice-time-trace /elsewhere/t.json), and an
    own trace that is a link: counted by the entry's summary, the file never read."""
    rec = _record(tmp_path / "build")
    data = CAPTURED.read_bytes()
    summary = unit_summary(json.loads(data), str(CAPTURED))
    other = json.loads(data)
    other["otherData"]["inputFiles"] = ["outside.cu"]
    outside = tmp_path / "elsewhere" / "t.json"
    outside.parent.mkdir()
    outside.write_text(json.dumps(other))
    out_bytes = outside.read_bytes()
    _add(rec, 0, OLD, "ninja:1:1", "k.o", _trace_record(str(outside), "cwd", out_bytes,
                                                         summary))
    name = "a" * 20 + ".json"
    (rec / "traces" / name).symlink_to(outside)
    _add(rec, 1, OLD + 1, "ninja:1:1", "l.o", _trace_record(f"traces/{name}",
                                                             data=out_bytes, summary=summary))
    doc = summarize_path(tmp_path / "build").to_json(10)
    assert [u["unit"] for u in doc["units"]] == ["templates.cu", "templates.cu"]
    assert doc["from_summaries"] == 2
