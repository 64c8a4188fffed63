"""Two builds' compile time compared (inspect/compile_time_diff.py, diff A B --time): verdicts
from work figures and from the noise the unchanged units measure, on copies of the trace
captured from nvcc 13.5 (templates.cu, two archs) changed here as a build would change them."""

from __future__ import annotations

import json

import pytest

from nvstage.inspect.compile_time import summarize
from nvstage.inspect.compile_time_diff import compare

from tests.conftest import DATA

TRACE = DATA / "compile_time" / "templates_two_archs.json"


def _build(folder, units=("a", "b", "c"), scale=None, extra=None):
    """A build of ``units``, each the captured trace: ``scale`` unit -> the factor its
    events' times are multiplied by (the machine's noise); ``extra`` unit -> events added."""
    folder.mkdir()
    for u in units:
        doc = json.loads(TRACE.read_text())
        doc["otherData"]["inputFiles"] = [f"{u}.cu"]
        f = (scale or {}).get(u, 1.0)
        for e in doc["traceEvents"]:
            if "dur" in e:
                e["ts"], e["dur"] = int(e["ts"] * f), int(e["dur"] * f)
        doc["traceEvents"] += (extra or {}).get(u, [])
        (folder / f"{u}.o.json").write_text(json.dumps(doc))
    return summarize([folder])


def test_nothing_changed_is_no_change_despite_noise(tmp_path):
    a = _build(tmp_path / "a")
    b = _build(tmp_path / "b", scale={"a": 1.15, "b": 0.9, "c": 1.05})
    d = compare(a, b)
    assert d.noise == pytest.approx(0.15, abs=0.01)  # the largest move of a unit
    assert d.unchanged_units == 3
    assert d.changed == [] and {r.verdict for r in d.rows} <= {"within noise", "small"}


def _in_header(ts: int, dur: int, n: int) -> list[dict]:
    """A header parsed at ``ts`` in which ``n`` instantiations of ``Table`` are made (in
    cicc's shape: pid 7, nested in the header's span)."""
    evs = [{"name": "Processing Header File", "ph": "X", "pid": 7, "tid": 0, "ts": ts,
            "dur": dur, "args": {"detail": "/p/common.h"}}]
    step = dur // (n + 1)
    evs += [{"name": "Instantiating Template Class", "ph": "X", "pid": 7, "tid": 0,
             "ts": ts + 1 + i * step, "dur": step - 1,
             "args": {"detail": f"Table [Table<{i}>]"}} for i in range(n)]
    return evs


def test_a_header_edit_found(tmp_path):
    a = _build(tmp_path / "a", extra={"a": _in_header(10, 100, 0)})
    b = _build(tmp_path / "b", scale={"b": 1.05},
               extra={"a": _in_header(10, 400_000, 200)})
    d = compare(a, b)
    rows = {(r.kind, r.name): r for r in d.changed}
    assert rows["template-set", "Table"].verdict == "added"
    head = rows["header", "/p/common.h"]
    assert head.verdict == "changed" and (head.work_a["inst"], head.work_b["inst"]) == (0, 200)
    assert rows["unit", "a.cu"].verdict == "changed"
    assert d.unchanged_units == 2  # b.cu and c.cu measure the noise
    assert {k for k, _ in rows} == {"template-set", "header", "unit"}


def test_a_slower_row_with_the_same_work(tmp_path):
    # A template set whose instantiations take 40 times as long, the same in number: beyond
    # the noise the unchanged units show, and beyond their moves summed.
    name = "std::__detail::__hyperg"
    a = _build(tmp_path / "a")
    doc = json.loads((tmp_path / "a" / "a.o.json").read_text())
    for e in doc["traceEvents"]:
        if e.get("name", "").startswith("Instantiating") and \
                e["args"]["detail"].startswith(name + " ["):
            e["dur"] *= 40
    (tmp_path / "b").mkdir()
    for u in ("b", "c"):
        (tmp_path / "b" / f"{u}.o.json").write_text((tmp_path / "a" / f"{u}.o.json").read_text())
    (tmp_path / "b" / "a.o.json").write_text(json.dumps(doc))
    d = compare(a, summarize([tmp_path / "b"]))
    row = next(r for r in d.rows if r.kind == "template-set" and r.name == name)
    assert row.verdict == "slower" and row.work_a == row.work_b


def test_noise_unknown_with_one_unit(tmp_path):
    a = _build(tmp_path / "a", units=("a",))
    b = _build(tmp_path / "b", units=("a",), scale={"a": 1.5})
    d = compare(a, b)
    assert d.noise is None
    assert "noise unknown" in {r.verdict for r in d.rows}


def test_diff_time_cli(cli, tmp_path):
    _build(tmp_path / "a")
    _build(tmp_path / "b", extra={"a": _in_header(10, 400_000, 50)})
    r = cli("diff", tmp_path / "a", tmp_path / "b", "--time", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "nvstage.compile-time-diff/1" and doc["noise_from_units"] == 2
    assert {"added"} == {x["verdict"] for x in doc["rows"] if x["name"] == "Table"}
    r = cli("diff", tmp_path / "a", tmp_path / "a", "--time")
    assert r.exit_code == 0 and "no change" in r.stdout
    r = cli("diff", tmp_path / "a", "--time")
    assert r.exit_code != 0 and "give A and B" in r.stderr
