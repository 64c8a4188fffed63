"""nvcc's -fdevice-time-trace through nvstage (compiler/nvcc/time_trace.py, the driver): the
trace nvcc writes, where nvcc writes it, made from the words nvcc gives cicc and ptxas, held
to nvcc's own trace of the same command; the object stays plain nvcc's."""

from __future__ import annotations

import collections
import json
import os
import re
import shutil

import pytest

from nvstage import proc
from nvstage.compiler.nvcc.grammar import grammar_for
from nvstage.compiler.nvcc.plan import parse_dryrun
from nvstage.compiler.nvcc.time_trace import RESTORED, _pids, request_from_args, trace_path

from tests.compiler.launcher.test_launcher_bytes import _launcher, _mask

TWO = ("-gencode", "arch=compute_80,code=sm_80",
       "-gencode", "arch=compute_90,code=[sm_90,compute_90]")


@pytest.mark.parametrize("value, output, path", [
    ("-", "c.o", "c.o.json"), ("-", None, "trace.json"), ("t", "c.o", "t.json"),
    ("t.json", "c.o", "t.json"), ("d/x", None, "d/x.json"),
])
def test_trace_path_is_nvccs(value, output, path):
    # Seen with nvcc 13.5: "-" names the file after -o; another name gains .json.
    assert trace_path(value, output) == path


@pytest.mark.parametrize("words, path, gran", [
    (["-fdevice-time-trace", "-"], "c.o.json", "0"),
    (["--fdevice-time-trace=-"], "c.o.json", "0"),
    (["-fdevice-time-trace=t", "--fdevice-time-trace-granularity", "100"], "t.json", "100"),
    (["--fdevice-time-trace", "x", "-fdevice-time-trace-granularity=7"], "x.json", "7"),
])
def test_every_spelling(toolkit, words, path, gran):
    args = grammar_for(toolkit.nvcc).parse(["-c", "k.cu", "-o", "c.o", *words])
    req = request_from_args(args, "c.o")
    assert (req.path, req.granularity, req.inputs) == (path, gran, ("k.cu",))


def test_no_trace_asked(toolkit):
    args = grammar_for(toolkit.nvcc).parse(["-c", "k.cu", "-o", "c.o"])
    assert request_from_args(args, "c.o") is None


# nvcc's own numbers for its steps, read from its traces (13.5): kind -> pid, per arch in the
# plan's order.
PIDS = {
    ("-c", "-arch=sm_90"): {"fatbinary": [3], "device-preprocess": [5], "host-preprocess": [6],
                            "cicc": [7], "ptxas": [9], "cudafe++": [10], "host-compile": [13]},
    ("-c", *TWO): {"device-preprocess": [12, 5], "cicc": [13, 7], "ptxas": [14, 9],
                   "cudafe++": [10], "host-compile": [18]},
    ("-c", "-gencode", "arch=compute_75,code=sm_75", "-gencode", "arch=compute_80,code=sm_80",
     "-gencode", "arch=compute_90,code=sm_90"): {
        "device-preprocess": [15, 11, 5], "cicc": [16, 12, 7], "ptxas": [17, 13, 8],
        "cudafe++": [9], "host-compile": [22]},
    ("-ptx", "-arch=sm_90"): {"device-preprocess": [5], "cicc": [7], "ptxas": [8]},
    ("-cubin", "-arch=sm_90"): {"device-preprocess": [5], "cicc": [7], "ptxas": [8]},
}


@pytest.mark.parametrize("words", list(PIDS), ids=lambda w: " ".join(w)[:40])
def test_step_numbers_are_nvccs(toolkit, kernels, tmp_path, words):
    shutil.copy(kernels / "templates.cu", tmp_path)
    cp = proc.run([toolkit.nvcc, "--dryrun", *words, "templates.cu"], cwd=tmp_path)
    stages = parse_dryrun(cp.stderr).runnable
    pids = _pids(stages)
    got: dict[str, list[int]] = {}
    for s in stages:
        if s.index in pids:
            got.setdefault(s.kind.value, []).append(pids[s.index])
    assert {k: v for k, v in got.items() if k in PIDS[words]} == PIDS[words]


def _norm(text: str) -> str:
    """An event's words without nvcc's per-run temporary names."""
    text = re.sub(r"/\S*?tmpxft_[0-9a-f]+_[0-9a-f]+-\d+_", "TMP_", text)
    return re.sub(r"-[0-9a-f]{6}\.\.lgenfe", "-H..lgenfe", text)


def _shape(path):
    """What two traces of one command share: otherData, every metadata event, and every
    event's tool, name and words (not its times)."""
    doc = json.loads(path.read_text())
    events = collections.Counter(
        (e.get("ph"), e.get("name"), e.get("pid"),
         _norm(json.dumps(e.get("args"), sort_keys=True))) for e in doc["traceEvents"] if e)
    return doc["otherData"], events


@pytest.fixture(scope="module")
def traced(toolkit, kernels, tmp_path_factory):
    """Each case built by plain nvcc traced and untraced, and by nvstage compile traced."""
    root = tmp_path_factory.mktemp("traced")
    shutil.copy(kernels / "templates.cu", root)
    cases = {"one": ("-c", "-arch=sm_90"), "two-dc": ("-dc", *TWO)}
    for name, words in cases.items():
        for who in ("nvcc", "plain", "nvstage"):
            argv = [*words, "templates.cu", "-o", f"{name}.{who}.o"]
            if who != "plain":
                argv += ["--fdevice-time-trace=-" if name == "one" else "-fdevice-time-trace",
                         *([] if name == "one" else [f"{name}.{who}"])]
            argv = [toolkit.nvcc, *argv] if who != "nvstage" else \
                [*_launcher(), "compile", *argv, "--no-cache"]
            cp = proc.run(argv, cwd=root, timeout=600)
            assert cp.returncode == 0, cp.stderr
    return root


@pytest.mark.parametrize("case, trace", [("one", "{}.o.json"), ("two-dc", "{}.json")])
def test_compile_writes_nvccs_trace(traced, case, trace):
    mine = traced / trace.format(f"{case}.nvstage")
    theirs = traced / trace.format(f"{case}.nvcc")
    assert mine.is_file()
    assert _shape(mine) == _shape(theirs)
    events = json.loads(mine.read_text())["traceEvents"]
    # cicc's events start where the build had got to: inside its own span of the build.
    fe = next(e for e in events if e.get("name") == "CUDA C++ Front-End")
    pre1 = [e for e in events if e.get("name") == "gcc (preprocessing 1)"]
    assert fe["ts"] >= min(e["ts"] + e["dur"] for e in pre1) - 1000


@pytest.mark.parametrize("case", ["one", "two-dc"])
def test_traced_object_is_plain_nvccs(traced, case):
    plain = (traced / f"{case}.plain.o").read_bytes()
    mine = (traced / f"{case}.nvstage.o").read_bytes()
    assert _mask(plain) == _mask(mine)


def test_restored_stages_say_so(toolkit, kernels, workdir):
    shutil.copy(kernels / "templates.cu", workdir)
    base = [*_launcher(), "compile", "-c", "templates.cu", "-arch=sm_90",
            "-fdevice-time-trace", "-"]
    for out in ("a.o", "b.o"):  # b.o: another command, its stages from the stage cache
        cp = proc.run([*base, "-o", out], cwd=workdir, timeout=600)
        assert cp.returncode == 0, cp.stderr
    spans = {e["name"]: e.get("args", {}) for e in
             json.loads((workdir / "b.o.json").read_text())["traceEvents"]
             if e.get("ph") == "X" and e["pid"] in (7, 9)}
    assert spans["cicc"]["nvstage"] == spans["ptxas"]["nvstage"] == RESTORED
    assert "CUDA C++ Front-End" not in spans


def test_untraced_stages_never_answer_a_traced_build(toolkit, kernels, workdir):
    # cicc under -fdevice-time-trace can write other code (CUB's merge sort): an untraced
    # build's stages are not a traced build's, and the other way round.
    shutil.copy(kernels / "templates.cu", workdir)
    base = [*_launcher(), "compile", "-c", "templates.cu", "-arch=sm_90"]
    assert proc.run([*base, "-o", "u.o"], cwd=workdir, timeout=600).returncode == 0
    cp = proc.run([*base, "-o", "t.o", "-fdevice-time-trace", "-"], cwd=workdir, timeout=600)
    assert cp.returncode == 0, cp.stderr
    # cicc ran, traced (a restored stage brings no front end's events)
    assert "CUDA C++ Front-End" in {e.get("name") for e in json.loads(
        (workdir / "t.o.json").read_text())["traceEvents"]}


def test_unwritable_trace_is_one_line(toolkit, kernels, workdir):
    shutil.copy(kernels / "templates.cu", workdir)
    cp = proc.run([*_launcher(), "compile", "-c", "templates.cu", "-arch=sm_90", "-o", "c.o",
                   "-fdevice-time-trace", "no/such/t.json", "--no-cache"], cwd=workdir,
                  timeout=600)
    assert cp.returncode != 0
    assert "cannot write the trace file no/such/t.json" in cp.stderr
    assert "Traceback" not in cp.stderr


def test_launcher_stages_and_answers_a_traced_command(toolkit, kernels, workdir):
    shutil.copy(kernels / "templates.cu", workdir)
    argv = [*_launcher(), toolkit.nvcc, "-c", "templates.cu", "-o", "k.o", "-arch=sm_90",
            "-fdevice-time-trace", "-"]
    env = {"NVSTAGE_LAUNCHER_VERBOSE": "1"}
    said = []
    for _ in range(2):
        (workdir / "k.o.json").unlink(missing_ok=True)
        cp = proc.run(argv, cwd=workdir, timeout=600, env={**os.environ, **env})
        assert cp.returncode == 0, cp.stderr
        assert json.loads((workdir / "k.o.json").read_text())["otherData"]["inputFiles"] == \
            ["templates.cu"]
        said.append(cp.stderr)
    assert ": staged" in said[0] and "answered whole" in said[1]
    # Without the option, a traced command's entry does not answer: no trace is written.
    (workdir / "k.o.json").unlink()
    cp = proc.run(argv[:-2], cwd=workdir, timeout=600, env={**os.environ, **env})
    assert cp.returncode == 0 and "answered whole" not in cp.stderr
    assert not (workdir / "k.o.json").exists()


@pytest.mark.slow
def test_a_cub_unit(toolkit, workdir, cli):
    """tests/data/compile_time/cub_reduce.cu (ours, in the shape of CCCL's
    example_device_reduce.cu: cub::DeviceReduce and thrust::sort): about 80 s a build here,
    a 52 MB trace of 23,543 events."""
    from tests.conftest import DATA

    shutil.copy(DATA / "compile_time" / "cub_reduce.cu", workdir)
    for who in ("nvcc", "nvstage"):
        argv = ["cub_reduce.cu", "-c", "-arch=sm_90", "-o", f"{who}.o", "-fdevice-time-trace", "-"]
        argv = [toolkit.nvcc, *argv] if who == "nvcc" else \
            [*_launcher(), "compile", *argv, "--no-cache"]
        cp = proc.run(argv, cwd=workdir, timeout=900)
        assert cp.returncode == 0, cp.stderr
    assert _shape(workdir / "nvstage.o.json") == _shape(workdir / "nvcc.o.json")
    assert _mask((workdir / "nvcc.o").read_bytes()) == _mask((workdir / "nvstage.o").read_bytes())
    r = cli("show", workdir / "nvstage.o.json", "--time", "--top", "3", "--json")
    doc = json.loads(r.stdout)
    # The top template set, against a sum by hand over the raw events.
    top = doc["template_sets"][0]
    raw = json.loads((workdir / "nvstage.o.json").read_text())["traceEvents"]
    by_hand = [e["dur"] for e in raw if e.get("name", "").startswith("Instantiating Template")
               and e["args"]["detail"].startswith(top["name"] + " [")]
    assert top["count"] == len(by_hand)
    assert top["seconds"] == pytest.approx(sum(by_hand) / 1e6)
    assert any("cub/device/device_reduce.cuh" in h["path"] for h in doc["headers"])


def test_a_whole_build_traced_by_the_setting(toolkit, kernels, workdir, cli):
    # NVSTAGE_TIME_TRACE=1: the command's words untouched (no .json beside the object, the
    # object plain nvcc's), nvstage's own trace of the unit in the build log's folder.
    shutil.copy(kernels / "templates.cu", workdir)
    words = ["-c", "templates.cu", "-arch=sm_90"]
    env = {**os.environ, "NVSTAGE_TIME_TRACE": "1"}
    cp = proc.run([*_launcher(), toolkit.nvcc, *words, "-o", "k.o"], cwd=workdir, env=env,
                  timeout=600)
    assert cp.returncode == 0, cp.stderr
    assert proc.run([toolkit.nvcc, *words, "-o", "plain.o"], cwd=workdir).returncode == 0
    assert _mask((workdir / "k.o").read_bytes()) == _mask((workdir / "plain.o").read_bytes())
    assert sorted(p.name for p in workdir.iterdir() if p.suffix == ".json") == []
    # Its entry answers the traced build's next command, never an untraced one (traced code).
    verbose = {"NVSTAGE_LAUNCHER_VERBOSE": "1"}
    cp = proc.run([*_launcher(), toolkit.nvcc, *words, "-o", "k.o"], cwd=workdir,
                  env={**os.environ, **verbose}, timeout=600)
    assert cp.returncode == 0 and "answered whole" not in cp.stderr, cp.stderr
    (trace,) = (workdir / ".nvstage-build" / "traces").iterdir()
    assert json.loads(trace.read_text())["otherData"]["inputFiles"] == ["templates.cu"]
    r = cli("show", workdir, "--time", "--json")
    assert r.exit_code == 0, r.stderr
    assert [u["unit"] for u in json.loads(r.stdout)["units"]] == ["templates.cu"]
    # and check holds the build folder's own traces to its compile-time budgets
    (workdir / "b.toml").write_text("[budgets.compile_time]\nmax_header_seconds = 0.000001\n")
    r = cli("check", workdir, "--config", workdir / "b.toml")
    assert r.exit_code == 1 and "cuda_runtime.h took" in r.stdout


CUDA_13_0 = "/usr/local/cuda-13.0/bin/nvcc"


def test_words_without_granularity_for_an_nvcc_that_has_none(toolkit):
    # CUDA 13.0's nvcc has no -fdevice-time-trace-granularity and gives cicc no such word;
    # its cicc fails on one (seen).
    from nvstage.compiler.nvcc.plan import Stage, StageKind
    from nvstage.compiler.nvcc.time_trace import TraceRequest, Tracer

    cicc = Stage(1, StageKind.CICC, "cicc", ["cicc", "k.ii", "-o", "k.ptx"], "compute_90",
                 ["k.ii"], ["k.ptx"])
    words, env = Tracer(TraceRequest("t.json", None), "/w", [cicc]).words(cicc, 1.5)
    assert "--device-time-trace-granularity" not in words
    assert words[:2] == ("--device-time-trace", "/w/nvstage-trace-1.part")
    assert env == {"_NVCC_TRACE_TS_7": "1500"}


@pytest.mark.skipif(not os.path.exists(CUDA_13_0), reason="no CUDA 13.0 nvcc here")
def test_cuda_13_0_traced_through_the_launcher(kernels, workdir):
    shutil.copy(kernels / "templates.cu", workdir)
    words = ["-c", "templates.cu", "-arch=sm_90", "-fdevice-time-trace", "-"]
    env = {**os.environ, "NVSTAGE_LAUNCHER_VERBOSE": "1"}
    cp = proc.run([*_launcher(), CUDA_13_0, *words, "-o", "k.o"], cwd=workdir, env=env,
                  timeout=600)
    assert cp.returncode == 0 and ": staged" in cp.stderr, cp.stderr
    assert proc.run([CUDA_13_0, *words, "-o", "p.o"], cwd=workdir).returncode == 0
    assert _shape(workdir / "k.o.json") == _shape(workdir / "p.o.json")
