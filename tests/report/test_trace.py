"""The Chrome trace: valid JSON, the lanes, flow arrows that pair up, the baseline lane."""

import json

from nvstage.run.decompose import NoiseFloor, OpSamples, decompose
from nvstage.report.trace import chrome_trace
from nvstage.run.results import Span, Timeline


def _timeline():
    tl = Timeline(title="t")
    tl.host = [Span(0, "h2d", "copy x", 0, 4000), Span(1, "launch", "k", 5000, 3000),
               Span(2, "launch", "k", 9000, 3000), Span(3, "d2h", "copy y", 13000, 4000)]
    tl.gpu = [Span(0, "h2d", "x", 1000, 100_000, {"bytes": 4096}),
              Span(1, "launch", "k", 101_000, 20_000), Span(2, "launch", "k", 121_000, 20_000),
              Span(3, "d2h", "y", 141_000, 50_000)]
    return tl


def _decomp():
    ops = [OpSamples(0, "h2d", "x", [4000], [100_000], 4096),
           OpSamples(1, "launch", "k", [3000], [20_000]),
           OpSamples(2, "launch", "k", [3000], [20_000]),
           OpSamples(3, "d2h", "y", [4000], [50_000], 4096)]
    return decompose(ops, [191_000], NoiseFloor(500, 2000, 1500, 50), "pipelined")


def test_trace_is_valid_chrome_json():
    doc = json.loads(json.dumps(chrome_trace(_timeline(), _decomp(), {"workload": "w"})))
    assert doc["displayTimeUnit"] == "ms"
    events = doc["traceEvents"]
    for ev in events:
        assert {"name", "ph", "pid"} <= set(ev)
        assert ev["ph"] in ("X", "M", "s", "f", "i", "C")
        if ev["ph"] in ("X", "s", "f"):
            assert isinstance(ev["ts"], (int, float)) and "tid" in ev
        if ev["ph"] == "X":
            assert ev["dur"] >= 0
    assert doc["otherData"]["workload"] == "w"


def test_lanes_are_named():
    events = chrome_trace(_timeline(), _decomp())["traceEvents"]
    names = {(e["pid"], e.get("tid"), e["args"]["name"]) for e in events if e["ph"] == "M"}
    labels = {n for _, _, n in names}
    assert {"host", "launch calls", "copy calls", "GPU", "kernels", "copies", "T"} <= labels
    kernel_lane = [e for e in events if e["ph"] == "X" and e["cat"] == "kernel"]
    copy_lane = [e for e in events if e["ph"] == "X" and e["cat"] == "copy"]
    assert len(kernel_lane) == 2 and len(copy_lane) == 2
    assert {e["tid"] for e in kernel_lane} != {e["tid"] for e in copy_lane}
    # microseconds: the 100 us copy
    assert copy_lane[0]["dur"] == 100.0 and copy_lane[0]["args"]["bytes"] == 4096


def test_flow_ids_pair_up_launch_to_kernel():
    events = chrome_trace(_timeline())["traceEvents"]
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    finishes = {e["id"]: e for e in events if e["ph"] == "f"}
    assert len(starts) == 2 and starts.keys() == finishes.keys()
    for fid, s in starts.items():
        f = finishes[fid]
        assert s["pid"] != f["pid"]  # host to GPU
        assert f["ts"] >= s["ts"]
        assert f["bp"] == "e"


def test_baseline_lane_lays_terms_end_to_end():
    events = chrome_trace(_timeline(), _decomp())["traceEvents"]
    base = [e for e in events if e["ph"] == "X" and e["cat"] == "baseline"]
    assert [e["args"]["term"] for e in base] == [
        "t_transfer", "t_launch", "t_kernel", "t_launch", "t_kernel", "t_transfer"]
    for a, b in zip(base, base[1:]):
        assert abs(a["ts"] + a["dur"] - b["ts"]) < 1e-6
    total = base[-1]["ts"] + base[-1]["dur"]
    assert total == (100_000 + 3000 + 20_000 + 3000 + 20_000 + 50_000) / 1000


def test_no_baseline_without_decomposition():
    events = chrome_trace(_timeline())["traceEvents"]
    assert not [e for e in events if e.get("cat") == "baseline"]
