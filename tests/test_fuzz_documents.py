"""Issue 12: fuzzing the document readers (stages.json, run report, baseline, budgets).

Each document may be anyone's file. Fed damaged, retyped, oversized or nonsensical versions of
real documents, a reader and everything downstream of it (show, diff, report, check) end in a
result or one NvstageError of one line: never a traceback, and never a hang (each example runs
under a hard time bound as well as hypothesis' deadline). The bases are real: a kept nvcc build
of vadd.cu, a check report of it, a run document from nvstage's own decomposition code.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import signal
import shutil
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from nvstage.errors import NvstageError

# Each example: hypothesis' deadline for slowness, and an alarm that turns a hang into a failure.
SETTINGS = settings(max_examples=120, deadline=timedelta(seconds=3),
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
HANG_SECONDS = 20

LEAF = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
        | st.sampled_from([0, -1, 2**63, 10**400, 1e300, -0.0])
        | st.floats(allow_nan=True, allow_infinity=True)
        | st.text(max_size=12) | st.sampled_from(["[/x]", "[bold]", "/dev/zero", "\x00",
                                                   "../../etc/passwd", "nvstage.compile/1",
                                                   "ptxas", "sm_90"]))
VALUE = st.recursive(LEAF, lambda kids: st.lists(kids, max_size=4)
                     | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=10)


TEXT = st.text(max_size=30) | st.sampled_from([
    "[/x]", "[bold red]x", "</script><script>alert(1)</script>", "/dev/zero", "..", "-",
    "Used 3 registers", "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
    "ptxas info    : Used 4294967296 registers, used 9 barriers, 99999999999 bytes smem",
    "x" * 5000])
SAME_TYPE = {str: TEXT, int: st.integers(-2**64, 2**64) | st.sampled_from([0, 2**63 - 1]),
             float: st.floats(allow_nan=True, allow_infinity=True) | st.floats(0, 1e7),
             bool: st.booleans()}


class Hang(Exception):
    pass


@contextlib.contextmanager
def bounded(seconds: int = HANG_SECONDS):
    def alarm(*_):
        raise Hang(f"an example ran past {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def outcome(fn):
    """fn()'s result, or None after an NvstageError of one line; anything else fails."""
    try:
        return fn()
    except NvstageError as e:
        assert e.message.strip() and "\n" not in e.message.strip(), e.message
        return None


@st.composite
def mutated(draw, base):
    """``base`` with one to three changes: a value replaced (by any JSON value, or by one of
    another type), a key removed or added, a list emptied or repeated."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        parent, key = None, None
        node = doc
        while isinstance(node, (dict, list)) and node and draw(st.integers(0, 4)):
            key = draw(st.sampled_from(sorted(node) if isinstance(node, dict)
                                       else range(len(node))))
            parent, node = node, node[key]
        if parent is None:
            if isinstance(doc, dict) and draw(st.booleans()):
                doc[draw(st.text(max_size=8))] = draw(VALUE)
            else:
                doc = draw(VALUE)
            continue
        action = draw(st.sampled_from(["replace", "remove", "empty", "repeat", "same"]))
        if action == "same" and type(node) in SAME_TYPE:  # a value that keeps the shape
            parent[key] = draw(SAME_TYPE[type(node)])
        elif action == "remove" and isinstance(parent, dict):
            del parent[key]
        elif action == "empty" and isinstance(node, (list, dict, str)):
            parent[key] = type(node)()
        elif action == "repeat" and isinstance(node, list):
            parent[key] = node * draw(st.integers(2, 50))
        else:
            parent[key] = draw(VALUE)
    return doc


def encoded(doc) -> str:
    return json.dumps(doc, allow_nan=True)  # NaN and Infinity as Python writes them


# --- the bases ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base_build(toolkit, kernels, tmp_path_factory):
    """The manifest of a real whole-program build of vadd.cu (every stage kind up to the host
    link), with its artifact paths moved to a folder that does not exist: the readers get the
    stage records and ptxas' recorded report, and no tool ever runs on a fuzzed example."""
    import nvstage
    from nvstage.compiler.nvcc.options import CompileOptions

    root = tmp_path_factory.mktemp("fuzzbase")
    shutil.copy(kernels / "vadd.cu", root)
    nvstage.compile("vadd.cu", CompileOptions(archs=("sm_90",), output="vadd"),
                    toolkit=toolkit, keep="k", cwd=root, cache=False)
    text = (root / "k" / "stages.json").read_text()
    return json.loads(text.replace(str(root), "/nonexistent-nvstage-fuzz"))


@pytest.fixture(scope="module")
def loaded(base_build, tmp_path_factory):
    from nvstage.compiler.manifest.model import load_build

    folder = tmp_path_factory.mktemp("loaded")
    (folder / "stages.json").write_text(json.dumps(base_build))
    build = load_build(folder)
    assert build.runs and not build.artifacts  # the files are elsewhere: no tool will run
    return build


@pytest.fixture(scope="module")
def base_report(loaded, toolkit):
    from nvstage.check.budgets import parse_budgets
    from nvstage.check.gate import check

    result = check(loaded, parse_budgets({"budgets": {"max_registers": 255}}), toolkit=toolkit)
    assert result.measurements.kernels
    return result.to_json()


def base_run():
    """A run document and trace from nvstage's own decomposition and trace code (fixed
    samples: no GPU here), as nvstage run --profile --json writes it."""
    from nvstage.run.decompose import NoiseFloor, OpSamples, decompose
    from nvstage.report.trace import chrome_trace
    from nvstage.run.results import Span, Timeline

    ops = [OpSamples(0, "h2d", "a", gpu_ns=[4000.0, 4200.0], nbytes=1 << 20),
           OpSamples(1, "launch", "vadd", host_ns=[3000.0, 3100.0], gpu_ns=[12000.0, 12500.0]),
           OpSamples(2, "d2h", "c", gpu_ns=[4100.0, 4000.0], nbytes=1 << 20)]
    dec = decompose(ops, [25000.0, 26000.0], NoiseFloor(500.0, 2500.0, 1500.0, 40.0),
                    "serialized")
    tl = Timeline(host=[Span(1, "launch", "kernel vadd", 5000.0, 3000.0)],
                  gpu=[Span(0, "h2d", "a", 0.0, 4100.0), Span(1, "launch", "vadd", 8000.0,
                                                                 12000.0)], title="fuzz")
    doc = {"schema": "nvstage.run/1", "workload": "fuzz", "mode": "serialized",
           "status": "ok", "device": {"name": "no GPU"}, "decomposition": dec.to_json()}
    return doc, chrome_trace(tl, dec)


BUDGETS = {
    "compile": {"archs": ["sm_90"], "defines": ["N=4"], "maxrregcount": 64, "stop": "fatbin",
                "extra": ["--use_fast_math"]},
    "budgets": {"max_registers": 64, "no_spills": True, "max_shared_bytes": 49152,
                "max_cubin_bytes": 1 << 20, "required_arches": ["sm_90"],
                "max_kernel_us": 50.0, "stage_seconds": {"ptxas": 2.0, "*": 30.0},
                "run": {"max_launch_us": 20.0, "max_wall_us": 100.0},
                "kernels": {"vadd*": {"max_registers": 32, "no_spills": False}}},
    "baseline": {"registers": 0.1, "stage_seconds": 0.5},
}


# --- everything downstream of a loaded build ---------------------------------------------------

def downstream(build, toolkit, *, run=None, trace=None, baseline=None):
    """What show, diff, report and check do with a build, minus writing files."""
    from rich.console import Console

    from nvstage.check.budgets import parse_budgets
    from nvstage.check.gate import check
    from nvstage.report.terminal.diff import render as render_diff
    from nvstage.report.terminal.show import render as render_show
    from nvstage.inspect.build_diff import diff_builds
    from nvstage.inspect.view import SECTIONS, collect_build
    from nvstage.report.html import gather, render

    json.dumps(build.to_json(), allow_nan=False)
    con = Console(file=io.StringIO(), width=120)
    outcome(lambda: render_show(collect_build(build, SECTIONS, toolkit), con))
    outcome(lambda: render_diff(diff_builds(build, build, toolkit), con, all_rows=True))
    page = outcome(lambda: render(gather(build, toolkit=toolkit, run=run, trace=trace)))
    assert page is None or page.endswith("</html>\n")
    budgets = parse_budgets(BUDGETS)
    result = outcome(lambda: check(build, budgets, toolkit=toolkit, run_report=run,
                                   baseline=baseline))
    if result is not None:
        json.dumps(result.to_json(), allow_nan=False)
        from nvstage.report.checks import github_annotations, markdown_summary

        github_annotations(result)
        markdown_summary(result)


# --- stages.json -------------------------------------------------------------------------------

@pytest.fixture
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("doc")


@SETTINGS
@given(data=st.data())
def test_fuzz_stages_json(data, base_build, toolkit, folder):
    from nvstage.compiler.manifest.model import load_build

    doc = data.draw(mutated(base_build))
    (folder / "stages.json").write_text(encoded(doc))
    with bounded():
        build = outcome(lambda: load_build(folder))
        event("read" if build is not None else "refused")
        if build is not None:
            downstream(build, toolkit)


@SETTINGS
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(str.encode),
       cut=st.integers(0, 100_000))
def test_fuzz_stages_json_bytes(raw, cut, base_build, folder):
    """Random bytes, and the real manifest cut short or followed by junk."""
    from nvstage.compiler.manifest.model import load_build

    real = encoded(base_build).encode()
    for blob in (raw, real[:cut], real + raw, b"[" * 100_000, b'{"a":' * 50_000):
        (folder / "stages.json").write_bytes(blob)
        with bounded():
            outcome(lambda: load_build(folder))


@pytest.mark.parametrize("doc, words", [
    ([], "must be an object, not a list"),
    ({"schema": "nvstage.compile/1", "options": []}, "options must be an object, not a list"),
    ({"schema": "nvstage.compile/1", "options": {"archs": "sm_90"}}, "options.archs must be"),
    ({"schema": "nvstage.compile/1", "options": {"maxrregcount": True}}, "whole number"),
])
def test_document_shapes_that_broke_show_diff_report(cli, tmp_path, base_build, doc, words):
    """Issue 12, cause 6: a stages.json that is a list, or whose options is a list, was an
    AttributeError in show, diff and report. Now one line and exit 6, in each."""
    if isinstance(doc, dict):
        doc = {**base_build, **doc}
    keep = tmp_path / "k"
    keep.mkdir()
    (keep / "stages.json").write_text(json.dumps(doc))
    for args in (["show", keep], ["diff", keep, keep], ["report", keep, "-o", tmp_path / "r.html"],
                 ["check", keep, "--config", _budgets_file(tmp_path)]):
        r = cli(*args)
        assert r.exit_code == 6, (args, r.output)
        (line,) = [x for x in r.stderr.splitlines() if x.startswith("error:")]
        assert words in line and "Traceback" not in r.output


def _budgets_file(tmp_path):
    p = tmp_path / "budgets.toml"
    p.write_text("[budgets]\nmax_registers = 64\n")
    return p


@pytest.mark.parametrize("change, words", [
    (lambda d: d["stages"][0].update(seconds=float("nan")), "NaN is not a number"),
    (lambda d: d["stages"][0].update(seconds=1e12), "number of seconds from 0 to 1e+07"),
    (lambda d: d["stages"][0].update(argv="ptxas -v"), "stages[0].argv must be a list"),
    (lambda d: d["stages"][0].update(kind="sh"), "stages[0].kind must be a stage kind"),
    (lambda d: next(s for s in d["stages"] if s["artifacts"])["artifacts"][0].update(path=1),
     "].artifacts[0].path must be a string, not 1"),
    (lambda d: d.update(stages=[d["stages"][0]] * 20_000), "at most 10000"),
    (lambda d: d["toolkit"].update(tools=[]), "toolkit.tools must be an object"),
    (lambda d: d["plan"].update(variables={"PATH": 3}), "plan.variables.PATH must be"),
])
def test_wrong_fields_are_named(tmp_path, base_build, change, words):
    from nvstage.compiler.manifest.model import load_build

    doc = copy.deepcopy(base_build)
    change(doc)
    (tmp_path / "stages.json").write_text(encoded(doc))
    with pytest.raises(NvstageError) as e:
        load_build(tmp_path)
    assert words in e.value.message and "\n" not in e.value.message


def test_special_files_and_sizes(tmp_path, base_build):
    """A manifest that is a FIFO or too large is refused unread; artifacts and a source that
    are FIFOs or devices are left out, never opened for reading (a FIFO would block)."""
    import os

    from nvstage.compiler.manifest.model import MAX_MANIFEST_BYTES, load_build
    from nvstage.check.metrics import locate_kernel

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with bounded(10), pytest.raises(NvstageError, match="not a regular file"):
        load_build(_as_manifest(tmp_path, fifo))
    big = tmp_path / "big" / "stages.json"
    big.parent.mkdir()
    with open(big, "wb") as f:
        f.truncate(MAX_MANIFEST_BYTES + 1)  # sparse: no disk used
    with bounded(10), pytest.raises(NvstageError, match="larger than 64 MiB"):
        load_build(big)
    doc = copy.deepcopy(base_build)
    run = next(s for s in doc["stages"] if s["kind"] == "ptxas")
    empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"  # sha256 of b""
    run["artifacts"] = [{"path": p, "kind": "cubin", "arch": "sm_90", "size": 0,
                         "sha256": empty, "stage": 1}
                        for p in (str(fifo), "/dev/zero", "/dev/null")]
    doc["source"] = str(fifo)
    folder = tmp_path / "special"
    folder.mkdir()
    (folder / "stages.json").write_text(json.dumps(doc))
    with bounded(10):
        build = load_build(folder)
        assert not build.artifacts
        assert {str(fifo), "/dev/zero", "/dev/null"} <= set(build.stale)
        assert locate_kernel(str(fifo), "vadd") is None


def _as_manifest(tmp_path, fifo):
    d = tmp_path / "fifo-keep"
    d.mkdir()
    (d / "stages.json").symlink_to(fifo)
    return d / "stages.json"


# --- run report --------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data())
def test_fuzz_run_report(data, loaded, toolkit, folder):
    from nvstage.check.metrics import run_figures

    run, trace = base_run()
    doc = data.draw(mutated(run))
    path = folder / "run.json"
    path.write_text(encoded(doc))
    with bounded():
        figures = outcome(lambda: run_figures(path))
        event("read" if figures is not None else "refused")
        if figures is not None:
            for d in figures:
                assert all(isinstance(v, float) and math.isfinite(v) for v in d.values())
        if isinstance(doc, dict):
            downstream(loaded, toolkit, run=doc, trace=data.draw(mutated(trace)))


# --- baseline ----------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data())
def test_fuzz_baseline(data, base_report, loaded, toolkit, folder):
    from nvstage.check.budgets import parse_budgets
    from nvstage.check.gate import check, load_baseline

    doc = data.draw(mutated(base_report))
    path = folder / "base.json"
    path.write_text(encoded(doc))
    budgets = parse_budgets(BUDGETS)
    with bounded():
        base = outcome(lambda: load_baseline(path, toolkit=toolkit))
        event("read" if base is not None else "refused")
        result = outcome(lambda: check(loaded, budgets, toolkit=toolkit, baseline=path))
        if result is not None:
            json.dumps(result.to_json(), allow_nan=False)


@pytest.mark.parametrize("change, words", [
    (lambda d: d["measurements"].update(kernels={}), "kernels must be a list"),
    (lambda d: d["measurements"]["kernels"][0].update(registers="12"), "registers must be"),
    (lambda d: d["measurements"]["kernels"][0].update(evil=1), "unknown field"),
    (lambda d: d["measurements"].update(kernel_us={"k": float("inf")}), "finite number"),
    (lambda d: d["measurements"]["stages"].append([]), "must be an object, not a list"),
])
def test_baseline_fields_are_named(tmp_path, base_report, toolkit, change, words):
    from nvstage.check.gate import load_baseline
    from nvstage.errors import BaselineError

    doc = copy.deepcopy(base_report)
    change(doc)
    (tmp_path / "b.json").write_text(encoded(doc))
    with pytest.raises(BaselineError) as e:
        load_baseline(tmp_path / "b.json", toolkit=toolkit)
    assert words in e.value.message and "\n" not in e.value.message


# --- budgets -----------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data())
def test_fuzz_budgets(data, loaded, toolkit):
    from nvstage.check.budgets import parse_budgets
    from nvstage.check.gate import check

    doc = data.draw(mutated(BUDGETS))
    with bounded():
        budgets = outcome(lambda: parse_budgets(doc, path="budgets.toml"))
        event("read" if budgets is not None else "refused")
        if budgets is None:
            return
        budgets.limits_for("_Z4vaddPKfS0_Pfi", "vadd(float const*, float const*, float*, int)")
        outcome(budgets.compile_options)
        result = outcome(lambda: check(loaded, budgets, toolkit=toolkit))
        if result is not None:
            json.dumps(result.to_json(), allow_nan=False)


@SETTINGS
@given(text=st.text(max_size=300) | st.sampled_from([
    "[budgets]\nmax_registers = " + "9" * 5000, "a = " + "[" * 5000,
    "[budgets]\nmax_registers = nan", "[budgets]\nmax_registers = inf",
    "[compile]\nextra = ['-ccbin=/bin/sh']", "[compile]\nrdc = 'yes'",
]))
def test_fuzz_budgets_file(text, tmp_path_factory):
    from nvstage.check.budgets import load_budgets

    path = tmp_path_factory.mktemp("toml") / "budgets.toml"
    path.write_text(text)
    with bounded():
        outcome(lambda: load_budgets(path))


@pytest.mark.parametrize("word", ["-ccbin=/bin/sh", "--compiler-bindir=/tmp", "-Xcompiler",
                                  "-Xcompiler=-wrapper,/bin/sh,-c,touch", "--run",
                                  "--archiver-binary=/bin/sh", "-o", "--keep-dir=/tmp",
                                  "-MF=/tmp/x", "--time=/tmp/t", "-optf=x", "evil.cu",
                                  "-Wl,-rpath,/x", "--forward-unknown-to-host-compiler"])
def test_budgets_extra_never_chooses_a_program_or_a_file(word):
    """A budgets file may be a pull request's: its [compile] extra takes code-generation and
    diagnostic flags only."""
    from nvstage.check.budgets import parse_budgets
    from nvstage.errors import BudgetConfigError

    with pytest.raises(BudgetConfigError, match="could choose a program to run"):
        parse_budgets({"compile": {"extra": [word]}})
    parse_budgets({"compile": {"extra": ["-O3", "--use_fast_math", "-std=c++17",
                                         "-Wno-deprecated-gpu-targets", "-DN=4"]}})


@pytest.mark.parametrize("compile_table, words", [
    ({"rdc": "yes"}, "compile.rdc must be true or false"),
    ({"defines": "N=4"}, "compile.defines must be a list of strings"),
    ({"maxrregcount": "64"}, "maxrregcount must be a whole number"),
    ({"stop": "exe"}, "compile.stop must be"),
    ({"opt_level": 3}, "compile.opt_level must be"),
])
def test_budgets_compile_values_are_typed(compile_table, words):
    from nvstage.check.budgets import parse_budgets
    from nvstage.errors import BudgetConfigError

    with pytest.raises(BudgetConfigError, match=words.replace(".", r"\.")):
        parse_budgets({"compile": compile_table})
