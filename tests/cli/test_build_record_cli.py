"""report, check and show given a build record (the test project built through the launcher):
the page and its trace, budgets over every kernel with GitHub annotations at the kernel's
line, one kernel found in whichever unit built it, and crafted entries that must not point an
annotation anywhere else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from nvstage.compiler.buildlog import log as buildlog

OVER = """
[budgets]
max_registers = 9
max_shared_bytes = 100
required_arches = ["sm_80", "sm_90"]
"""
WITHIN = """
[budgets]
max_registers = 64
no_spills = true
required_arches = ["sm_80", "sm_90"]
"""


def test_report_writes_the_page_the_trace_and_the_summary(cli, cuproject_record, tmp_path):
    _, build = cuproject_record
    r = cli("report", build, "-o", tmp_path / "build.html", "--build-trace",
            tmp_path / "trace.json", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["output"] == str(tmp_path / "build.html")
    assert doc["build_trace"] == str(tmp_path / "trace.json")
    # The last build's figures (4 steps), the project's units (12) and kernels (8).
    assert doc["schema"] == "nvstage.build-view/1" and doc["counts"]["units"] == 4
    assert len(doc["kernels"]) == 8 and len(doc["units"]) == 12
    assert {k["kind"] for k in doc["stage_kinds"]} >= {"cicc", "ptxas", "cudafe++"}
    # What the last build changed: block_sum's shared memory, in reduce.cu's object.
    since = doc["since_previous"]
    assert [(k["name"], k["delta"]["shared_bytes"]) for k in since["kernels"]
            if k["status"] == "changed"] == [("block_sum", 512), ("block_sum", 512)]
    page = (tmp_path / "build.html").read_text()
    assert "<svg id=\"build-timeline\"" in page and "Since the build before" in page
    assert 'id="kernels-moved"' in page and "Builds in the record" in page
    trace = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert {e["name"] for e in trace if e.get("cat", "").startswith("command")} == \
        {"scale.cu", "reduce.cu", "cmake_device_link.o", "app"}
    # The record folder itself is a record too; without -o the page goes into it.
    r = cli("report", build / buildlog.FOLDER)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == str(build / buildlog.FOLDER / "report.html")
    assert Path(r.stdout.strip()).is_file()


def test_report_options_that_belong_to_one_kind(cli, cuproject_record, built, tmp_path):
    _, build = cuproject_record
    r = cli("report", build, "--run", tmp_path / "run.json")
    assert r.exit_code == 2 and "whole build's record" in r.stderr
    root, builds = built
    r = cli("report", builds["vadd"].keep_dir, "--build-trace", tmp_path / "t.json")
    assert r.exit_code == 2 and "--build-trace" in r.stderr


def test_check_over_budget_annotates_each_kernel_at_its_line(cli, cuproject_record, tmp_path,
                                                             monkeypatch):
    src, build = cuproject_record
    (tmp_path / "budgets.toml").write_text(OVER)
    # Annotations are relative to the build's source folder (CMake's), wherever check runs.
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    monkeypatch.chdir(tmp_path)
    r = cli("check", build, "--config", tmp_path / "budgets.toml", "--format", "github")
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    assert ("::error file=src/reduce.cu,line=3,title=nvstage check%3A shared_bytes::"
            "block_sum(float const*, float*, int) (sm_90) uses 1024 bytes of static shared "
            "memory; the budget is 100") in lines
    assert any(x.startswith("::error file=lib/devuse.cu,line=3,title=nvstage check%3A "
                            "registers::squares(float*, int) (sm_80) uses 24 registers")
               for x in lines), lines
    assert any(x.startswith("::error file=src/other.cu,line=3,") for x in lines), lines
    # -rdc units carry their arches too (as relocatable code): no arch is missing.
    assert not any("required_arch" in x for x in lines)
    assert "failed: 7 violations" in r.stderr
    # ... or to the workspace GitHub checked out, where one is named.
    monkeypatch.setenv("GITHUB_WORKSPACE", str(src.parent))
    r = cli("check", build, "--config", tmp_path / "budgets.toml", "--format", "github")
    assert any(x.startswith("::error file=src/src/reduce.cu,line=3,") for x in
               r.stdout.splitlines()), r.stdout
    monkeypatch.delenv("GITHUB_WORKSPACE")

    monkeypatch.chdir(src)
    r = cli("check", build, "--config", tmp_path / "budgets.toml")
    assert r.exit_code == 1 and "FAIL src/reduce.cu:3: block_sum" in r.stdout
    r = cli("check", build, "--config", tmp_path / "budgets.toml", "--json")
    doc = json.loads(r.stdout)
    assert doc["violation_count"] == 7 and len(doc["measurements"]["kernels"]) == 8
    assert {v["file"] for v in doc["violations"]} == {
        str(src / "src/reduce.cu"), str(src / "lib/devuse.cu"), str(src / "src/other.cu")}


def test_check_within_budget_passes(cli, cuproject_record, tmp_path):
    (tmp_path / "budgets.toml").write_text(WITHIN)
    r = cli("check", cuproject_record[1], "--config", tmp_path / "budgets.toml")
    assert r.exit_code == 0, r.output
    assert "passed" in r.stderr
    r = cli("check", cuproject_record[1], "--config", tmp_path / "budgets.toml",
            "--baseline", tmp_path / "b.json")
    assert r.exit_code == 2 and "--baseline" in r.stderr


def test_check_names_what_it_could_not_check(cli, cuproject_record, tmp_path):
    rec = tmp_path / "rec"
    shutil.copytree(cuproject_record[1] / buildlog.FOLDER, rec)
    entry = buildlog.Entry(["/usr/bin/nvcc", "-c", "d.cu", "-foo", "-o", str(tmp_path / "d.o")],
                           str(tmp_path), buildlog.now(), 0.1, "fallback", 0, 1,
                           reason="nvcc does not know -foo: nvcc says what it thinks of it")
    buildlog.add(entry, str(tmp_path), {buildlog.ENV: str(rec)})
    (tmp_path / "budgets.toml").write_text(WITHIN)
    r = cli("check", rec, "--config", tmp_path / "budgets.toml")
    assert r.exit_code == 0, r.output
    # The steps that build no kernels (links, archives, C++ compiles) are no units to check.
    assert "1 of 6 translation units not checked: d.cu (fallback: nvcc does not know" in \
        " ".join(r.stderr.split())


def test_show_finds_the_kernel_in_the_unit_that_built_it(cli, cuproject_record, tmp_path):
    _, build = cuproject_record
    r = cli("show", build, "--kernel", "block_sum", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["kind"] == "build" and doc["artifact"].endswith("reduce.cu")
    assert {(k["arch"], k["registers"], k["shared_bytes"]) for k in doc["resources"]} == \
        {("sm_80", 10, 1024), ("sm_90", 10, 1024)}
    # The object is still the recorded one: its SASS and images are shown too.
    assert {k["arch"] for k in doc["sass"]} == {"sm_80", "sm_90"}
    assert len(doc["fatbin"]) == 4
    assert "built by" in r.stderr and "reduce.cu.o" in r.stderr
    r = cli("show", build, "--kernel", "scale_kernel", "--sections", "resources")
    assert r.exit_code == 0 and "scale_kernel" in r.stdout
    assert not any(line.lstrip().startswith("SASS") for line in r.stdout.splitlines())
    r = cli("show", build, "--kernel", "blok_sum")
    assert r.exit_code == 2 and "did you mean block_sum" in r.stderr
    r = cli("show", build)  # no kernel: every kernel of the build
    assert r.exit_code == 0 and "fill<int>" in r.stdout and "reduce.cu" in r.stdout


def test_show_lists_the_units_when_several_built_the_kernel(cli, cuproject_record, tmp_path):
    rec = tmp_path / "rec"
    shutil.copytree(cuproject_record[1] / buildlog.FOLDER, rec)
    path = next(p for p in sorted((rec / "tu").glob("*.json"))
                if (json.loads(p.read_text())["build"] or {}).get("source", "")
                .endswith("reduce.cu"))
    doc = json.loads(path.read_text())
    doc["build"]["output"] = str(tmp_path / "reduce-debug.o")
    doc["started"] += 1
    (rec / "tu" / "99999999999999999-1-0.json").write_text(json.dumps(doc))
    r = cli("show", rec, "--kernel", "block_sum")
    assert r.exit_code == 2, r.output
    assert "2 translation units built a kernel named 'block_sum'" in r.stderr
    assert "--tu" in r.stderr
    r = cli("show", rec, "--kernel", "block_sum", "--tu", "reduce-debug.o", "--sections",
            "resources,sass")
    assert r.exit_code == 0, r.output
    # Its object never existed: the figures the record kept, and a note on the rest.
    assert "block_sum" in r.stdout and "reduce-debug.o is gone" in " ".join(r.stderr.split())


def test_a_crafted_source_is_never_an_annotation(cli, cuproject_record, tmp_path, monkeypatch):
    """An entry naming /etc/passwd (or any file that is no source) as its unit's source:
    check never reads it, and points no annotation at it; show and report only print the
    name."""
    rec = tmp_path / "rec"
    shutil.copytree(cuproject_record[1] / buildlog.FOLDER, rec)
    base = next(json.loads(p.read_text()) for p in sorted((rec / "tu").glob("*.json"))
                if (json.loads(p.read_text())["build"] or {}).get("source", "")
                .endswith("reduce.cu"))
    # A file with no source's name that does define the kernel: not read for its line.
    secret = tmp_path / "secret"
    secret.write_text("\n\n__global__ void block_sum(float* x) {}\n")
    for n, source in enumerate(("/etc/passwd", str(secret), "/dev/zero")):
        doc = json.loads(json.dumps(base))
        doc["build"]["source"] = source
        doc["build"]["output"] = str(tmp_path / f"crafted{n}.o")
        doc["argv"] = ["/usr/bin/nvcc", "-c", source, "-o", doc["build"]["output"]]
        doc["started"] += 1 + n
        (rec / "tu" / f"9999999999999999{n}-1-0.json").write_text(json.dumps(doc))
    (tmp_path / "budgets.toml").write_text(OVER)
    monkeypatch.chdir(tmp_path)
    from nvstage.check import metrics

    looked, real = [], metrics.locate_kernel
    monkeypatch.setattr(metrics, "locate_kernel",
                        lambda path, *a, **k: looked.append(str(path)) or real(path, *a, **k))
    r = cli("check", rec, "--config", tmp_path / "budgets.toml", "--format", "github")
    assert looked and not any("passwd" in p or "secret" in p or "/dev/" in p for p in looked)
    assert r.exit_code == 1, r.output
    errors = [x for x in r.stdout.splitlines() if x.startswith("::error")]
    assert errors and not any("passwd" in x or "secret" in x or "/dev/" in x for x in errors)
    assert any(x.startswith("::error title=nvstage check%3A shared_bytes::block_sum")
               for x in errors), errors
    assert "is not read for kernel lines" in " ".join(r.stderr.split())
    r = cli("report", rec, "-o", tmp_path / "r.html")
    assert r.exit_code == 0, r.output
    assert "root:" not in (tmp_path / "r.html").read_text()


def test_what_if_remote_estimates_the_recorded_build(cli, cuproject_record):
    _, build = cuproject_record
    r = cli("report", build, "--what-if-remote", "8", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["estimate"] is True and doc["remote_cores"] == 8 and doc["local_cores"] >= 1
    # No stage of this record ran remotely: the round trip is an assumption, said so.
    assert doc["round_trip"] == "assumed" and doc["wall_seconds"] > 0
    assert doc["wall_seconds"] >= doc["critical_path_seconds"]
    text = cli("report", build, "--what-if-remote", "64", "--round-trip", "0.1")
    assert text.exit_code == 0, text.output
    assert text.stdout.startswith("estimate: wall with 64 remote cores")
    assert "100.0 ms (assumed)" in text.stdout
