"""The unit's merged trace (compiler/nvcc/time_trace.py) opens in Perfetto, as the build trace
does (tests/report/test_build_html.py's test_the_trace_nests_for_perfetto): held here to what
Perfetto's JSON importer (and chrome://tracing) needs of the Chrome trace-event format. The
perfetto PyPI package's trace_processor downloads its shell from get.perfetto.dev on first use:
no test here may reach the network, so the format's rules are checked instead.

- a ``traceEvents`` list of objects (nvcc writes an empty object first: ignored by importers,
  which skip an event with no phase); ``otherData`` an object;
- every value a JSON value (no NaN or Infinity, which JSON.parse rejects);
- a complete event (``X``): a string name, ``ts`` and ``dur`` finite numbers, ``dur`` >= 0,
  integer ``pid`` and ``tid``; its ``args`` an object;
- metadata (``M``): ``process_name``/``thread_name`` with a string ``args.name``,
  ``process_sort_index`` with an integer ``args.sort_index``;
- ``B``/``E`` balanced on each thread (nvcc writes none);
- on each thread, any two complete events either disjoint or one inside the other: Perfetto
  drops a slice that overlaps its parent's end.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.conftest import DATA

CAPTURED = DATA / "compile_time" / "templates_two_archs.json"  # nvstage's, nvcc 13.5
METADATA = {"process_name": "name", "thread_name": "name", "process_sort_index": "sort_index",
            "thread_sort_index": "sort_index", "process_labels": "labels"}


def _no_constant(word: str):
    raise ValueError(f"{word} is not JSON")


def perfetto_problems(text: str) -> list[str]:
    """What keeps ``text`` (a Chrome trace) from opening whole in Perfetto; [] when nothing."""
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except ValueError as e:
        return [str(e)]
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["no traceEvents list"]
    problems = [] if isinstance(doc.get("otherData", {}), dict) else ["otherData not an object"]
    threads: dict[tuple, list[tuple[float, float, str]]] = {}
    open_b: dict[tuple, int] = {}
    for i, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict):
            problems.append(f"event {i} is not an object")
            continue
        ph = e.get("ph")
        if ph is None:
            if e:
                problems.append(f"event {i} has no phase")
            continue
        pid, tid = e.get("pid"), e.get("tid", 0)
        if type(pid) is not int or type(tid) is not int:
            problems.append(f"event {i}: pid and tid must be integers")
            continue
        if "args" in e and not isinstance(e["args"], dict):
            problems.append(f"event {i}: args must be an object")
        if ph == "M":
            key = METADATA.get(e.get("name"))
            value = (e.get("args") or {}).get(key) if key else None
            ok = isinstance(value, int) if key == "sort_index" else isinstance(value, str)
            if not ok:
                problems.append(f"event {i}: metadata {e.get('name')!r} without its {key}")
        elif ph == "X":
            ts, dur, name = e.get("ts"), e.get("dur"), e.get("name")
            if not (isinstance(name, str) and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                    for v in (ts, dur)) and dur >= 0):
                problems.append(f"event {i}: a complete event needs a name, ts and dur >= 0")
                continue
            threads.setdefault((pid, tid), []).append((ts, ts + dur, name))
        elif ph in ("B", "E"):
            open_b[(pid, tid)] = open_b.get((pid, tid), 0) + (1 if ph == "B" else -1)
            if open_b[(pid, tid)] < 0:
                problems.append(f"event {i}: an end with no begin")
        else:
            problems.append(f"event {i}: phase {ph!r} is not one nvcc or nvstage writes")
    problems += [f"thread {k}: {n} begin events never end" for k, n in open_b.items() if n]
    for key, spans in threads.items():
        stack: list[tuple[float, float, str]] = []
        for start, end, name in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                problems.append(f"thread {key}: {name!r} overlaps the end of {stack[-1][2]!r}")
            stack.append((start, end, name))
    return problems


def test_the_captured_merged_trace_opens_in_perfetto():
    assert perfetto_problems(CAPTURED.read_text()) == []


@pytest.mark.parametrize("change, said", [
    (lambda d: d["traceEvents"].append({"ph": "X", "name": "n", "ts": float("nan"), "dur": 1,
                                        "pid": 1, "tid": 0}), "is not JSON"),
    (lambda d: d["traceEvents"].append({"ph": "X", "name": "n", "ts": 0, "dur": -1,
                                        "pid": 1, "tid": 0}), "dur >= 0"),
    (lambda d: d["traceEvents"].extend([
        {"ph": "X", "name": "a", "ts": 0, "dur": 10, "pid": 99, "tid": 0},
        {"ph": "X", "name": "b", "ts": 5, "dur": 10, "pid": 99, "tid": 0}]), "overlaps"),
    (lambda d: d["traceEvents"].append({"ph": "B", "name": "a", "ts": 0, "pid": 99, "tid": 0}),
     "never end"),
    (lambda d: d["traceEvents"].append({"ph": "M", "name": "thread_name", "pid": 99, "tid": 0,
                                        "args": {}}), "without its name"),
])
def test_the_checker_finds_what_perfetto_would_drop(change, said):
    doc = json.loads(CAPTURED.read_text())
    change(doc)
    problems = perfetto_problems(json.dumps(doc))
    assert len(problems) == 1 and said in problems[0]


def test_a_merged_trace_with_restored_stages_opens_in_perfetto():
    """``Tracer.merged`` for a build whose cicc and ptxas were restored from the cache: their
    spans are nvstage's own (``restored, not traced``), made from the stage runs."""
    from nvstage.compiler.nvcc.plan import Stage, StageKind
    from nvstage.compiler.nvcc.time_trace import Tracer, TraceRequest
    from nvstage.compiler.manifest.model import StageRun

    stages = [Stage(0, StageKind.CICC, "cicc", ["cicc"], "compute_90", ["k.ii"], ["k.ptx"]),
              Stage(1, StageKind.PTXAS, "ptxas", ["ptxas"], "sm_90", ["k.ptx"], ["k.cubin"])]
    tracer = Tracer(TraceRequest("t.json", "0", ("k.cu",)), "/nonexistent", stages)
    runs = [StageRun(s, 0.5, 0, started=1.0 + s.index, cached=True) for s in stages]
    doc = tracer.merged(runs)
    assert perfetto_problems(json.dumps(doc)) == []
    assert sum(1 for e in doc["traceEvents"] if e.get("ph") == "X") == 2


def check_file(path: Path) -> list[str]:
    """For tests that build a traced unit: the problems of the trace at ``path``."""
    return perfetto_problems(Path(path).read_text())
