"""Issue 12, cause 1: no document runs a program. A keep folder may be someone else's (a CI
artifact of a pull request); show, report, diff and check read it with the toolkit nvstage finds
and never run what its stages.json names. What those readers used to rerun ptxas -v for is now
kept when the stage runs. Real nvcc throughout."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from nvstage.compiler.nvcc.ptxas_report import split_ptxas_stderr
from nvstage.inspect.resources import parse_ptxas_verbose
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.nvcc.plan import StageKind

BUDGETS = """
[tool.nvstage.budgets]
max_registers = 128
no_spills = true
"""


@pytest.fixture(scope="module")
def honest(toolkit, kernels, tmp_path_factory):
    """A kept build of multi.cu for sm_90 (two ptxas-free readers' inputs: cubin, fatbin)."""
    from nvstage.compiler.pipeline.driver import compile

    root = tmp_path_factory.mktemp("honest")
    shutil.copy(kernels / "multi.cu", root)
    compile("multi.cu", CompileOptions(archs=("sm_90",), stop="fatbin",
                                       output=str(root / "multi.keep" / "multi.fatbin")),
            toolkit=toolkit, keep="multi.keep", cwd=root, cache=False)
    return root / "multi.keep"


def _script(path, marker):
    path.write_text(f"#!/bin/sh\ntouch {marker}\n")
    path.chmod(0o755)
    return path


@pytest.fixture
def crafted(honest, toolkit, tmp_path):
    """The same build, its manifest edited as an attacker would: every ptxas stage's argv is
    ``/bin/sh -c 'touch X'`` (with the ``-o`` the old rerun looked for) and its stderr holds no
    resource lines; the recorded toolkit's cuobjdump and nvdisasm, and its root, are scripts
    that touch a marker. Returns (keep folder, markers)."""
    keep = tmp_path / "evil.keep"
    shutil.copytree(honest, keep)
    markers = [tmp_path / f"ran-{n}" for n in ("ptxas", "cuobjdump", "nvdisasm", "root")]
    fake_root = tmp_path / "fake-cuda"
    (fake_root / "bin").mkdir(parents=True)
    for tool in ("cuobjdump", "nvdisasm", "ptxas", "nvcc"):
        _script(fake_root / "bin" / tool, markers[3])
    doc = json.loads((keep / "stages.json").read_text())
    for s in doc["stages"]:
        if s["kind"] == "ptxas":
            s["argv"] = ["/bin/sh", "-c", f"touch {markers[0]}", "-o", "out.cubin"]
            s["inputs"] = []
            s["stderr"] = ""
            s.pop("resources", None)  # as a manifest written before it existed
    tk = doc["toolkit"]
    tk["root"] = str(fake_root)
    tk["nvcc"] = str(fake_root / "bin" / "nvcc")
    tk["tools"]["cuobjdump"] = {"path": str(_script(tmp_path / "cuobjdump", markers[1])),
                                "version": toolkit.version}
    tk["tools"]["nvdisasm"] = {"path": str(_script(tmp_path / "nvdisasm", markers[2])),
                               "version": toolkit.version}
    (keep / "stages.json").write_text(json.dumps(doc))
    return keep, markers


def _nothing_ran(markers):
    ran = [m.name for m in markers if m.exists()]
    assert not ran, f"a program named in the manifest ran: {ran}"


def test_show_runs_nothing_the_manifest_names(cli, crafted):
    keep, markers = crafted
    r = cli("show", keep, "--json")
    assert r.exit_code == 0, r.output
    _nothing_ran(markers)
    doc = json.loads(r.stdout)
    # Resources still come from the kept cubin, read by the toolkit nvstage found.
    assert {row["kernel"] for row in doc["resources"]} >= {"histogram", "_Z9block_sumPKfPfi"}
    assert doc["sass"]


def test_report_runs_nothing_the_manifest_names(cli, crafted, tmp_path):
    keep, markers = crafted
    out = tmp_path / "page.html"
    r = cli("report", keep, "-o", out)
    assert r.exit_code == 0, r.output
    _nothing_ran(markers)
    page = out.read_text()
    assert "histogram" in page and "recorded toolkit" not in r.stderr


def test_diff_runs_nothing_the_manifest_names(cli, crafted, honest):
    keep, markers = crafted
    r = cli("diff", honest, keep, "--json")
    assert r.exit_code == 0, r.output
    _nothing_ran(markers)
    rows = json.loads(r.stdout)["kernels"]
    assert rows and all(row["a"].get("registers") == row["b"].get("registers") for row in rows)


def test_check_with_a_crafted_baseline_runs_nothing(cli, crafted, honest, tmp_path):
    keep, markers = crafted
    cfg = tmp_path / "budgets.toml"
    cfg.write_text(BUDGETS)
    r = cli("check", honest, "--config", cfg, "--baseline", keep / "stages.json")
    assert r.exit_code == 0, r.output
    _nothing_ran(markers)
    r = cli("check", keep, "--config", cfg)  # and as the build checked
    assert r.exit_code == 0, r.output
    _nothing_ran(markers)


def test_a_library_caller_without_a_toolkit_never_gets_the_recorded_one(crafted):
    """``build_resources(load_build(...))`` with no toolkit finds one; the recorded toolkit
    refuses to hand out a program."""
    from nvstage.errors import ToolkitError
    from nvstage.compiler.manifest.model import load_build
    from nvstage.inspect.resources import build_resources

    keep, markers = crafted
    build = load_build(keep)
    assert build_resources(build)
    with pytest.raises(ToolkitError, match="never chooses a program"):
        build.toolkit.tool("cuobjdump")
    _nothing_ran(markers)


def test_a_recorded_toolkit_of_another_release_is_named(cli, honest, tmp_path):
    keep = tmp_path / "old.keep"
    shutil.copytree(honest, keep)
    doc = json.loads((keep / "stages.json").read_text())
    doc["toolkit"].update(version="12.4.131", release="12.4")
    (keep / "stages.json").write_text(json.dumps(doc))
    r = cli("show", keep, "--sections", "resources")
    assert r.exit_code == 0, r.output
    assert "note: this build was made with CUDA 12.4.131; its files are read with CUDA" \
        in r.stderr


def test_artifacts_outside_the_folder_are_used_only_when_unchanged(cli, honest, tmp_path):
    """A manifest naming another file (here /etc/hostname, as a PTX) gets nothing from it: its
    recorded size and hash do not match, so it is left out, never read into the output."""
    keep = tmp_path / "named.keep"
    shutil.copytree(honest, keep)
    doc = json.loads((keep / "stages.json").read_text())
    target = "/etc/hostname"
    for s in doc["stages"]:
        for a in s["artifacts"]:
            if a["kind"] == "ptx":
                a["path"] = target
    (keep / "stages.json").write_text(json.dumps(doc))
    r = cli("show", keep, "--sections", "ptx", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["ptx"] == []
    assert f"note: {target} is gone or was rewritten" in r.stderr


# --- what the build keeps instead: what ptxas wrote into its cubins, read at build time ------

def _ptxas_runs(build):
    return [r for r in build.runs if r.stage.kind is StageKind.PTXAS]


def _without_times(text: str) -> list[str]:
    return [line for line in text.splitlines() if "Compile time" not in line]


def test_recorded_resources_are_what_ptxas_v_prints(toolkit, kernels, workdir):
    """The figures kept for a build without --resource-usage (ptxas ran as nvcc runs it,
    without -v) are what plain nvcc -Xptxas -v prints for the same source and arches."""
    import nvstage
    from nvstage.inspect.resources import from_figures

    shutil.copy(kernels / "multi.cu", workdir)
    b = nvstage.compile("multi.cu", CompileOptions(gencodes=(
        "arch=compute_80,code=sm_80", "arch=compute_90,code=sm_90"), compile_only=True,
        output="mine.o"), toolkit=toolkit, cache=False)
    runs = _ptxas_runs(b)
    assert len(runs) == 2 and all(r.figures and not r.resources for r in runs)
    assert not any("-v" in r.stage.argv for r in runs)
    plain = subprocess.run([toolkit.nvcc, "-c", "-gencode", "arch=compute_80,code=sm_80",
                            "-gencode", "arch=compute_90,code=sm_90", "-Xptxas", "-v",
                            "multi.cu", "-o", "ref.o"], cwd=workdir, capture_output=True,
                           text=True, check=True).stderr

    def figures(rows):
        return sorted((r.kernel, r.arch, r.registers, r.spill_stores, r.spill_loads,
                       r.stack_frame, r.shared_bytes, r.barriers) for r in rows)

    mine = [k for r in runs for k in from_figures(r.figures, arch=r.stage.arch)]
    assert figures(mine) == figures(parse_ptxas_verbose(plain)) and len(mine) == 10


def test_stderr_without_user_v_is_plain_nvccs(toolkit, kernels, workdir):
    """-maxrregcount=16 makes ptxas warn; the user sees that warning, as with plain nvcc (no
    -v lines: nvstage adds no -v). With --resource-usage they see those too, as nvcc
    --resource-usage shows them, and the build record keeps that report."""
    import nvstage

    shutil.copy(kernels / "multi.cu", workdir)
    for verbose in (False, True):
        b = nvstage.compile("multi.cu", CompileOptions(
            archs=("sm_90",), stop="cubin", maxrregcount=16, resource_usage=verbose,
            output=f"mine{verbose}.cubin"), toolkit=toolkit, cache=False)
        (run,) = _ptxas_runs(b)
        plain = subprocess.run([toolkit.nvcc, "--cubin", "-arch=sm_90", "-maxrregcount=16",
                                *(["--resource-usage"] if verbose else []), "multi.cu",
                                "-o", f"ref{verbose}.cubin"], cwd=workdir,
                               capture_output=True, text=True, check=True).stderr
        assert "adjusting per thread register count of 16" in run.stderr
        assert _without_times(run.stderr) == _without_times(plain)
        assert ("Used " in run.stderr) is verbose
        assert ("Overriding maximum register limit" in run.resources) is verbose
        assert run.figures and run.figures[0].max_registers == 24  # ptxas raised the 16


def test_a_cached_ptxas_stage_gives_the_same_record(toolkit, kernels, workdir, tmp_path):
    import nvstage

    shutil.copy(kernels / "spill.cu", workdir)
    opts = CompileOptions(archs=("sm_90",), stop="cubin", maxrregcount=16, output="s.cubin")
    cache = tmp_path / "cache"
    first = nvstage.compile("spill.cu", opts, toolkit=toolkit, cache=cache)
    again = nvstage.compile("spill.cu", opts, toolkit=toolkit, cache=cache)
    (a,), (b,) = _ptxas_runs(first), _ptxas_runs(again)
    assert not a.cached and b.cached
    assert (b.stderr, b.resources, b.figures) == (a.stderr, a.resources, a.figures)
    assert b.figures[0].spill_stores > 0 and "Used " not in b.stderr


def test_the_manifest_keeps_the_report_and_reads_it_back(toolkit, kernels, workdir):
    import nvstage
    from nvstage.compiler.manifest.model import load_build

    shutil.copy(kernels / "vadd.cu", workdir)
    b = nvstage.compile("vadd.cu", CompileOptions(archs=("sm_90",), stop="cubin"),
                        toolkit=toolkit, keep="k", cache=False)
    doc = json.loads((workdir / "k" / "stages.json").read_text())
    (ptxas,) = [s for s in doc["stages"] if s["kind"] == "ptxas"]
    assert ptxas["resources"] == "" and "Used " not in ptxas["stderr"]
    assert [f["kernel"] for f in ptxas["cubin_figures"]] == ["_Z4vaddPKfS0_Pfi"]
    (back,) = _ptxas_runs(load_build(workdir / "k"))
    (made,) = _ptxas_runs(b)
    assert (back.stderr, back.resources, back.figures) == (made.stderr, made.resources,
                                                           made.figures)


# --- the split itself, on captured text ---------------------------------------------------------

def test_split_takes_out_only_the_v_lines(captured):
    report = (captured / "cuda13.5-spill-sm80-ptxas-v.txt").read_text()
    warning = "ptxas warning : For profile sm_80 adjusting per thread register count of 16 " \
              "to lower bound of 24\n"
    advisory = "ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async " \
               "instructions are serialized due to ill formed pipeline stage in the " \
               "function 'k'\n"
    assert report.startswith(warning)  # ptxas warns first, then reports
    raw = report + advisory
    shown, kept = split_ptxas_stderr(raw, user_verbose=False)
    assert shown == warning + advisory
    assert kept == report[len(warning):]
    assert parse_ptxas_verbose(kept) == parse_ptxas_verbose(report)
    assert split_ptxas_stderr(raw, user_verbose=True) == (raw, kept)
    # Pure: splitting what the cache keeps (the report, then what was shown) gives it back.
    assert split_ptxas_stderr(kept + shown, user_verbose=False) == (shown, kept)


def test_nvrtc_keep_folders_feed_the_same_readers(toolkit, kernels, workdir):
    """NVRTC and nvJitLink stages run in-process (nothing to rerun): their cubins give the
    figures, and with --resource-usage their logs' ptxas report gives the spills too, read
    back from the manifest as for nvcc builds."""
    from nvstage.compiler.manifest.model import load_build
    from nvstage.inspect.resources import build_resources
    from nvstage.compiler.nvrtc import compile_nvrtc

    shutil.copy(kernels / "spill.cu", workdir)
    for verbose in (False, True):
        keep = f"nvrtc{verbose}"
        compile_nvrtc("spill.cu", CompileOptions(archs=("sm_90",), resource_usage=verbose),
                      toolkit=toolkit, keep=keep)
        rows = build_resources(load_build(workdir / keep), toolkit)
        assert [r.kernel for r in rows] == ["spill", "spill"]  # NVRTC's cubin, nvJitLink's
        assert all((r.spill_stores is not None) is verbose for r in rows)
        assert all(r.registers > 0 and "cuobjdump -res-usage" in r.source for r in rows)


def test_nvrtc_log_frame_lines_are_read():
    """NVRTC prints the frame line behind "ptxas         ." (CUDA 13.5)."""
    log = ("ptxas info    : 0 bytes gmem\n"
           "ptxas info    : Compiling entry function 'spill' for 'sm_90'\n"
           "ptxas info    : Function properties for spill\n"
           "ptxas         .     8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
           "ptxas info    : Used 24 registers, used 0 barriers, 8 bytes cumulative stack size\n")
    (r,) = parse_ptxas_verbose(log)
    assert (r.spill_stores, r.spill_loads, r.stack_frame) == (4, 12, 8)
    assert split_ptxas_stderr(log, user_verbose=False) == ("", log)


# --- found while hunting: text from a document is text, and a big trace is cut ----------------

def test_markup_in_a_manifest_is_printed_not_interpreted(cli, honest, tmp_path):
    """A kernel named "[/x]" in a recorded ptxas report ended show, diff and check with rich's
    MarkupError (a traceback), and "[red]" restyled their tables."""
    cfg = tmp_path / "b.toml"
    cfg.write_text(BUDGETS)
    for figures in (True, False):  # the name in the cubin's figures, or in an old -v report
        keep = tmp_path / f"markup{figures}.keep"
        shutil.copytree(honest, keep)
        doc = json.loads((keep / "stages.json").read_text())
        (ptxas,) = [s for s in doc["stages"] if s["kind"] == "ptxas"]
        if figures:
            ptxas["cubin_figures"][0].update(kernel="[/x][red]k", spill_stores=8,
                                             spill_loads=8)
        else:
            ptxas.pop("cubin_figures")
            ptxas["resources"] = (
                "ptxas info    : Compiling entry function '[/x][red]k' for 'sm_90'\n"
                "ptxas info    : Function properties for [/x][red]k\n"
                "    0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
                "ptxas info    : Used 3 registers, used 0 barriers\n")
        (keep / "stages.json").write_text(json.dumps(doc))
        for args in (["show", keep, "--sections", "resources"], ["diff", honest, keep],
                     ["check", keep, "--config", cfg]):
            r = cli(*args)
            assert r.exit_code in (0, 1), (args, r.output)  # check fails: the kernel spills
            assert "[/x][red]k" in r.stdout + r.stderr and "Traceback" not in r.output


def test_a_trace_of_many_lanes_is_drawn_in_bounded_time(honest, toolkit):
    """Each span looked its lane up in a list: 100,000 events on as many lanes took minutes."""
    import time

    from nvstage.compiler.manifest.model import load_build
    from nvstage.report.html import gather, render
    from nvstage.report.run_charts import MAX_TRACE_LANES

    events = [{"ph": "X", "pid": i, "tid": [i], "ts": i, "dur": 1.0, "name": f"k{i}",
               "cat": ["kernel"], "args": [1]} for i in range(100_000)]
    events += [{"ph": "M", "name": "thread_name", "pid": [1], "tid": 2, "args": "x"},
               {"ph": "X", "ts": 10**400, "dur": 1, "pid": 0, "tid": 0}]
    t = time.perf_counter()
    page = render(gather(load_build(honest), toolkit=toolkit, sass=False,
                         trace={"traceEvents": events}))
    assert time.perf_counter() - t < 30
    assert page.count('class="trace-span"') <= 20_000 and "more spans not drawn" in page
    assert page.count("<title>") <= MAX_TRACE_LANES + 50
