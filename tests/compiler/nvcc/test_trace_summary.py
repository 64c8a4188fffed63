"""One unit's compile-time summary, as a build log entry keeps it (compiler/nvcc/trace_summary.py):
it keeps a trace's figures (the top rows of each table, the work whole), it is bounded however
big the trace, and read back strictly: anything else is one line, never a traceback."""

from __future__ import annotations

import copy
import json

import pytest

from nvstage.compiler.nvcc.trace_summary import (
    MAX_CHAIN,
    SUMMARY_NAME,
    TOP_ROWS,
    add_summary,
    read_summary,
    unit_summary,
)
from nvstage.errors import ArtifactError
from nvstage.inspect.compile_time import CompileTime, summarize

from tests.conftest import DATA

CAPTURED = DATA / "compile_time" / "templates_two_archs.json"  # nvcc 13.5, two archs


def _through_json(doc: dict) -> dict:
    return json.loads(json.dumps(doc))


def test_a_summary_keeps_the_traces_figures():
    whole = summarize([CAPTURED]).to_json(TOP_ROWS)
    summary = read_summary(_through_json(unit_summary(json.loads(CAPTURED.read_text()),
                                                      str(CAPTURED))), "entry")
    kept = CompileTime()
    add_summary(kept, summary, "entry.json")
    mine = kept.to_json(TOP_ROWS)
    assert mine["work"] == whole["work"]  # the work whole, though only the top rows are kept
    assert mine["arch_passes"] == whole["arch_passes"] == 2
    assert mine["units"][0]["from"] == "summary" and whole["units"][0]["from"] == "trace"
    for key in ("units",):
        a, b = mine[key][0], whole[key][0]
        assert (a["unit"], a["archs"], a["work"]) == (b["unit"], b["archs"], b["work"])
        assert a["front_end_seconds"] == pytest.approx(b["front_end_seconds"], abs=1e-6)
    for key, name in (("headers", "path"), ("template_sets", "name"), ("templates", "name"),
                      ("functions_nvvm", "name"), ("functions_ptxas", "name")):
        assert [r[name] for r in mine[key]] == [r[name] for r in whole[key]], key
        for a, b in zip(mine[key], whole[key]):
            secs = "inclusive_seconds" if key == "headers" else "seconds"
            assert a[secs] == pytest.approx(b[secs], abs=1e-6)
    assert [h["chain"] for h in mine["headers"]] == [h["chain"] for h in whole["headers"]]
    assert [a["rule"] for a in mine["advice"]] == [a["rule"] for a in whole["advice"]]


def _big_trace() -> dict:
    """A unit of 60 template sets with 3,000-character names and headers nested 40 deep."""
    events = [{"name": "process_name", "ph": "M", "pid": 7, "args": {"name": "cicc"}},
              {"name": "thread_name", "ph": "M", "pid": 7, "tid": 0,
               "args": {"name": "big.cu [compute_90]"}},
              {"name": "CUDA C++ Front-End", "ph": "X", "pid": 7, "tid": 0, "ts": 0,
               "dur": 10_000_000}]
    for depth in range(40):
        events.append({"name": "Processing Header File", "ph": "X", "pid": 7, "tid": 0,
                       "ts": 1 + depth, "dur": 1_000_000 - 2 * depth,
                       "args": {"detail": f"/inc/{'d' * 600}/h{depth}.h"}})
    for i in range(60):
        name = f"set{i:02d}" + "x" * 3000
        events.append({"name": "Instantiating Template Function", "ph": "X", "pid": 7,
                       "tid": 0, "ts": 2_000_000 + i * 100, "dur": 50 + i,
                       "args": {"detail": f"{name} [{name}<int>]"}})
        events.append({"name": "OptFunction", "ph": "X", "pid": 7, "tid": 0,
                       "ts": 3_000_000 + i * 100, "dur": 50, "args": {"detail": f"_Z{i}f"}})
    return {"otherData": {"inputFiles": ["big.cu"]}, "traceEvents": events}


def test_a_summary_is_bounded_however_big_the_trace():
    summary = unit_summary(_big_trace(), "big.json")
    assert len(json.dumps(summary)) < 60_000
    for key in ("headers", "template_sets", "templates", "functions_nvvm"):
        assert len(summary[key]) == TOP_ROWS, key
    names = [r["name"] for k in ("template_sets", "templates") for r in summary[k]]
    assert max(map(len, names)) == SUMMARY_NAME
    assert all(len(h["chain"]) <= MAX_CHAIN for h in summary["headers"])
    assert all(len(p) <= SUMMARY_NAME for h in summary["headers"] for p in h["chain"])
    # The work stays whole: 40 headers, 60 instantiations and 60 functions.
    assert summary["work"] == {"headers": 40, "distinct_headers": 40, "instantiations": 60,
                               "functions": 60, "entries": 0}
    read_summary(_through_json(summary), "entry")  # what is written reads back


def _good() -> dict:
    return _through_json(unit_summary(json.loads(CAPTURED.read_text()), str(CAPTURED)))


def _set(path, value):
    def change(d):
        *head, last = path
        for k in head:
            d = d[k]
        d[last] = value
    return change


HOSTILE = [
    ("not an object", lambda d: ["a list"]),
    ("another schema", _set(["schema"], "nvstage.unit-time/99")),
    ("a name past the bound", _set(["unit"], "u" * (SUMMARY_NAME + 1))),
    ("a NUL in a name", _set(["headers", 0, "path"], "/a\0b")),
    ("eleven rows", lambda d: {**d, "templates": d["templates"] + d["templates"][:1]}),
    ("NaN seconds", _set(["template_sets", 0, "seconds"], float("nan"))),
    ("infinite seconds", _set(["front_end_seconds"], float("inf"))),
    ("a huge number", _set(["wall_seconds"], 10 ** 400)),
    ("a count that is true", _set(["functions_nvvm", 0, "count"], True)),
    ("a negative count", _set(["work", "instantiations"], -1)),
    ("a count past 2**53", _set(["events"], 2 ** 80)),
    ("a chain too long", _set(["headers", 0, "chain"], ["h.h"] * (MAX_CHAIN + 1))),
    ("too many tools", _set(["tools"], {f"t{i}": 1.0 for i in range(40)})),
    ("a tool's time a string", _set(["tools", "cicc"], "1.0")),
    ("a row not an object", _set(["functions_ptxas"], [[1, 2, 3]])),
    ("rows an object", _set(["headers"], {"path": "x"})),
    ("work missing", lambda d: {k: v for k, v in d.items() if k != "work"}),
    ("nested deep", _set(["archs"], [[[[["compute_90"]]]]])),
    ("a million rows", _set(["template_sets"], [{"name": "x", "seconds": 0, "count": 0}]
                            * 1_000_000)),
]


@pytest.mark.parametrize("change", [c for _, c in HOSTILE], ids=[n for n, _ in HOSTILE])
def test_a_hostile_summary_is_one_line(change):
    doc = copy.deepcopy(_good())
    changed = change(doc)
    doc = doc if changed is None else changed
    with pytest.raises(ArtifactError) as e:
        read_summary(doc, "tu/entry.json")
    assert e.value.message.startswith("tu/entry.json: the time summary's ")
    assert "\n" not in e.value.message and len(e.value.message) < 200


def test_an_own_trace_past_the_bound_is_not_kept_its_summary_is(tmp_path, monkeypatch):
    from nvstage.compiler.nvcc import time_trace
    from nvstage.compiler.nvcc.time_trace import Tracer, TraceRequest

    traces = tmp_path / "log" / time_trace.TRACES
    traces.mkdir(parents=True)
    (traces / "ab.json").write_text("{}")  # the unit's trace of an earlier build
    tracer = Tracer(TraceRequest(str(traces / "ab.json"), own=True), str(tmp_path), [])
    monkeypatch.setattr(time_trace, "MAX_OWN_BYTES", 10)
    written = tracer.write([], str(tmp_path))
    assert written.size > 10 and not (traces / "ab.json").exists()
    record = tracer.record(written)
    assert record["file"] == "traces/ab.json" and record["in"] == "build-log"
    assert read_summary(record["summary"], "entry")["events"] == 0
    monkeypatch.setattr(time_trace, "MAX_OWN_BYTES", 1 << 20)
    assert tracer.write([], str(tmp_path)).size == (traces / "ab.json").stat().st_size
