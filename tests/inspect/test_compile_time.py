"""Reading nvcc's -fdevice-time-trace files (inspect/compile_time.py): a trace captured from
nvcc 13.5 on kernels/templates.cu for two archs, and traces written here in cicc's shape
(nesting, inclusive and exclusive times, hostile documents)."""

from __future__ import annotations

import json
import shutil

import pytest

from nvstage.errors import ArtifactError
from nvstage.inspect import compile_time
from nvstage.inspect.compile_time import summarize

from tests.conftest import DATA

# nvcc -c templates.cu -gencode arch=compute_80,code=sm_80
#      -gencode 'arch=compute_90,code=[sm_90,compute_90]'
#      -fdevice-time-trace - -fdevice-time-trace-granularity 300
# (the toolkit's include folder written /opt/cuda/include, nvcc's pid 00000000)
TWO_ARCHS = DATA / "compile_time" / "templates_two_archs.json"
RUNTIME_H = "/opt/cuda/include/cuda_runtime.h"


def _write(path, events, other=None):
    path.write_text(json.dumps({"otherData": other or {"inputFiles": ["k.cu"]},
                                "traceEvents": events}))
    return path


def _x(name, ts, dur, detail=None, pid=7):
    e = {"name": name, "ph": "X", "ts": ts, "dur": dur, "pid": pid, "tid": 0}
    if detail is not None:
        e["args"] = {"detail": detail}
    return e


def test_captured_two_archs():
    s = summarize([TWO_ARCHS])
    (unit,) = s.units
    assert unit.unit == "templates.cu"
    assert sorted(unit.archs) == ["compute_80", "compute_90"]
    assert s.passes == 2
    # A header is parsed once per arch pass, by one unit.
    h = s.headers[RUNTIME_H]
    assert (h.count, len(h.units)) == (2, 1)
    assert h.inclusive >= h.exclusive > 0
    assert h.chain == ("templates.cu", RUNTIME_H)
    # The tools with only a total, and cicc and ptxas from their insides.
    assert {"cudafe++", "gcc (preprocessing 4)", "gcc (compiling)", "fatbinary", "cicc",
            "ptxas"} <= set(unit.tools)
    assert unit.front_end > 0
    # ptxas assembled each entry once per arch; NVVM generated each function once per arch.
    assert s.ptxas["_Z9block_sumPKfPfi"].count == 2
    assert s.nvvm["_Z9block_sumPKfPfi"].count == 2
    # Templates: the set is the name without arguments.
    full = next(k for k in s.templates if k.startswith("std::__detail::__hyperg<float>"))
    assert "std::__detail::__hyperg" in s.template_sets
    assert s.templates[full].count == 2
    doc = s.to_json(top=3)
    assert doc["arch_passes"] == 2 and len(doc["headers"]) == 3
    assert doc["headers"][0]["path"] == RUNTIME_H  # everything is under it
    assert doc["work"]["headers_parsed"] == sum(h.count for h in s.headers.values())


def test_nesting_inclusive_exclusive_and_chain(tmp_path):
    # a.h (0-100) includes b.h (10-40), which includes c.h (15-25); a template instantiated
    # while a.h is parsed counts to a.h's own time.
    t = _write(tmp_path / "t.json", [
        _x(compile_time.FRONT_END, 0, 200, "k.cpp1.ii"),
        _x("Processing Header File", 0, 100, "a.h"),
        _x("Processing Header File", 10, 30, "b.h"),
        _x("Processing Header File", 15, 10, "c.h"),
        _x("Instantiating Template Class", 50, 20, "S [S<int>]"),
        _x("Processing Header File", 120, 30, "c.h"),  # again, from the source itself
    ])
    s = summarize([t])
    a, b, c = (s.headers[n] for n in ("a.h", "b.h", "c.h"))
    assert (a.inclusive, a.exclusive) == pytest.approx((100e-6, 70e-6))
    assert (b.inclusive, b.exclusive) == pytest.approx((30e-6, 20e-6))
    assert (c.inclusive, c.count) == (pytest.approx(40e-6), 2)
    assert c.chain == ("k.cu", "c.h")  # its costliest parse: the one from the source
    assert s.template_sets["S"].count == 1 and "S<int>" in s.templates
    assert s.units[0].front_end == pytest.approx(200e-6)


def test_overlapping_events_are_siblings(tmp_path):
    # A broken trace: b starts inside a and ends after it. Neither is the other's parent.
    t = _write(tmp_path / "t.json", [_x("Processing Header File", 0, 100, "a.h"),
                                     _x("Processing Header File", 50, 100, "b.h")])
    s = summarize([t])
    assert s.headers["a.h"].exclusive == pytest.approx(100e-6)
    assert s.headers["b.h"].chain == ("k.cu", "b.h")


def test_hostile_events_are_skipped(tmp_path):
    t = _write(tmp_path / "t.json", [
        "not an event", {"ph": "X"}, _x("Processing Header File", "0", 5, "a.h"),
        _x("Processing Header File", 0, float("nan"), "b.h"),
        _x("Processing Header File", 0, -1, "c.h"),
        _x("Processing Header File", 0, 5, {"not": "text"}),
        {**_x("Processing Header File", 0, 7, "ok.h"), "pid": True},
        _x(["list"], 0, 5, "x.h"),
    ])
    s = summarize([t])
    assert set(s.headers) == {"ok.h"}


@pytest.mark.parametrize("text, said", [
    ("{\"traceEvents\": [", "not JSON"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ("{\"otherData\": {}}", "no traceEvents list"),
    ("\x00\x01binary", "not"),
])
def test_bad_trace_is_one_line(tmp_path, text, said):
    p = tmp_path / "bad.json"
    p.write_text(text)
    with pytest.raises(ArtifactError) as e:
        summarize([p])
    assert said in e.value.message and "\n" not in e.value.message


def test_truncated_capture_is_one_line(tmp_path):
    p = tmp_path / "cut.json"
    p.write_bytes(TWO_ARCHS.read_bytes()[:20_000])
    with pytest.raises(ArtifactError, match="not JSON"):
        summarize([p])


def test_too_many_events(tmp_path, monkeypatch):
    monkeypatch.setattr(compile_time, "MAX_EVENTS", 100)
    with pytest.raises(ArtifactError, match="MAX_EVENTS") as e:
        summarize([TWO_ARCHS])
    assert "granularity" in e.value.hint


def test_folder_reads_traces_and_skips_other_json(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    shutil.copy(TWO_ARCHS, tmp_path / "a" / "b" / "k.o.json")
    shutil.copy(TWO_ARCHS, tmp_path / "k2.o.json")
    (tmp_path / "compile_commands.json").write_text("[]")
    s = summarize([tmp_path])
    assert len(s.units) == 2
    assert len(s.headers[RUNTIME_H].units) == 2  # two units parsed it
    assert s.skipped == [str(tmp_path / "compile_commands.json")]


def test_show_time_cli(cli, tmp_path):
    shutil.copy(TWO_ARCHS, tmp_path / "k.o.json")
    r = cli("show", tmp_path, "--time", "--top", "2", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "nvstage.compile-time/1" and len(doc["headers"]) == 2
    # Function names demangled beside the mangled ones.
    assert doc["functions_ptxas"][0]["demangled"].startswith(("block_sum", "scale"))
    r = cli("show", tmp_path / "k.o.json", "--time", "--top", "3")
    assert r.exit_code == 0, r.stderr
    assert "headers by inclusive parse time" in r.stdout and "cuda_runtime.h" in r.stdout
    assert "2 arch passes" in r.stdout


@pytest.mark.parametrize("args, said", [
    (("--top", "0"), "--top"),
    (("--kernel", "x"), "--time"),
])
def test_show_time_usage(cli, args, said):
    r = cli("show", TWO_ARCHS, "--time", *args)
    assert r.exit_code != 0 and said in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2  # the error and its hint


def test_show_time_no_trace(cli, tmp_path):
    r = cli("show", tmp_path, "--time")
    assert r.exit_code != 0
    assert "no nvcc time trace" in r.stderr


def test_a_long_instantiation_keeps_its_set(tmp_path):
    # cub's AgentReduceImpl<...>::ConsumeRange<...> runs past MAX_NAME: cut, its "]" lost.
    args = "x" * (compile_time.MAX_NAME + 100)
    t = _write(tmp_path / "t.json", [_x("Instantiating Template Function", 0, 5,
                                        f"ns::A::run [ns::A<{args}>::run<false>]")])
    s = summarize([t])
    assert list(s.template_sets) == ["ns::A::run"]


def test_too_large_is_one_line(monkeypatch):
    # nvcc's trace of a failed compile is cut short (seen): any trace past the bound is
    # refused before it is parsed.
    monkeypatch.setattr(compile_time, "MAX_TRACE_BYTES", 1000)
    with pytest.raises(ArtifactError, match="MAX_TRACE_BYTES") as e:
        summarize([TWO_ARCHS])
    assert "granularity" in e.value.hint and "\n" not in e.value.message


def test_folder_skips_hidden_folders_and_names_a_link_by_its_trace(tmp_path):
    (tmp_path / ".nvstage-build").mkdir()
    shutil.copy(TWO_ARCHS, tmp_path / ".nvstage-build" / "k.o.json")
    _write(tmp_path / "dlink.o.json", [
        {"name": "process_name", "ph": "M", "pid": 3, "args": {"name": "nvlink"}},
        _x("nvlink", 0, 5, "nvlink", pid=3)], {"inputFiles": ["a.o", "b.o"]})
    # CMake's probe of the compiler, traced by the flags it was given: not the project's.
    (tmp_path / "CMakeFiles" / "4.4.5" / "CompilerIdCUDA").mkdir(parents=True)
    shutil.copy(TWO_ARCHS, tmp_path / "CMakeFiles" / "4.4.5" / "CompilerIdCUDA" / "trace.json")
    s = summarize([tmp_path])
    assert [u.unit for u in s.units] == ["dlink.o"] and s.skipped == []
    assert s.tools["nvlink"].seconds == pytest.approx(5e-6)


def test_advice_with_its_evidence(tmp_path):
    for n in (1, 2):
        shutil.copy(TWO_ARCHS, tmp_path / f"k{n}.o.json")
    rules = {a.rule: a for a in compile_time.advice(summarize([tmp_path]))}
    # cuda_runtime.h, parsed by both units, is most of the front end; the headers inside it
    # are not named again.
    head = rules["shared-header"]
    assert head.subject == RUNTIME_H and "parsed by 2 of 2 units (4 parses)" in head.evidence
    assert "2 units" == rules["serial-archs"].subject
    assert "template-set" not in rules and "one-function" not in rules


def test_advice_rules_on_hand_traces(tmp_path):
    t = _write(tmp_path / "t.json", [
        _x(compile_time.FRONT_END, 0, 1_000_000, "k.cpp1.ii"),
        _x("Instantiating Template Function", 10, 600_000, "big [big<int>]"),
        _x("Generating Function IR", 2_000_000, 900_000, "_Z4hugev"),
        _x("Generating Function IR", 3_000_000, 100_000, "_Z5smallv"),
    ], {"inputFiles": ["k.cu"], "numThreads": 4})
    rules = {a.rule: a for a in compile_time.advice(summarize([t]))}
    assert rules["template-set"].subject == "big" and "60% of the front end" in \
        rules["template-set"].evidence
    assert rules["one-function"].subject == "_Z4hugev"
    assert "90%" in rules["one-function"].evidence
    assert "serial-archs" not in rules  # one arch (and --threads 4)


def test_threads_given_is_not_serial(tmp_path):
    doc = json.loads(TWO_ARCHS.read_text())
    doc["otherData"]["numThreads"] = 2
    (tmp_path / "t.json").write_text(json.dumps(doc))
    assert "serial-archs" not in {a.rule for a in compile_time.advice(
        summarize([tmp_path / "t.json"]))}
