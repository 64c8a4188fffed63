"""Builds with NVSTAGE_DIST=sccache on the loopback farm: cicc and ptxas run on the build
server (sccache's statistics count them), the object equals plain nvcc's (module id aside),
a rerun is all hits, and each fault gives one line and a correct local build."""

from __future__ import annotations

import itertools
import os
import subprocess
from pathlib import Path

import pytest

import nvstage
from nvstage.compiler.cache.remote import tier
from nvstage.compiler.dist import choice, farm_stage as dist_stage
from nvstage.compiler.nvcc.options import CompileOptions

_n = itertools.count()


def source(tag: str) -> str:
    """A kernel of its own per test: the client's cache must miss where a test says so."""
    return (f"namespace {{ __device__ float f(float x) {{ return x * {next(_n)}.5f; }} }}\n"
            f"__global__ void {tag}(float *a) {{ a[threadIdx.x] = f(a[threadIdx.x]); }}\n")


@pytest.fixture
def lines(monkeypatch):
    """The notices nvstage says (each backend and line afresh for every test)."""
    said: list[str] = []
    tier.set_notice_sink(said.append)
    monkeypatch.setattr(choice, "_said", set())
    monkeypatch.setattr(dist_stage, "_backends", {})
    yield said
    tier.set_notice_sink(None)


def use(monkeypatch, client, **extra):
    for k, v in {**client.env, "NVSTAGE_DIST": "sccache",
                 "NVSTAGE_SCCACHE": client.sccache, **extra}.items():
        monkeypatch.setenv(k, v)


def build(toolkit, tag: str):
    Path(f"{tag}.cu").write_text(source(tag))
    return nvstage.compile(f"{tag}.cu", CompileOptions(archs=("sm_90",), compile_only=True,
                                                       output=f"{tag}.o"),
                           toolkit=toolkit, cache=False)


def where(b) -> dict[str, str | None]:
    return {r.stage.kind.value: r.where for r in b.runs
            if r.stage.kind.value in ("cicc", "ptxas")}


def test_cicc_and_ptxas_run_on_the_farm_and_give_plain_nvcc_s_object(
        farm, farm_client, toolkit, workdir, monkeypatch, lines, dump):
    use(monkeypatch, farm_client)
    before = farm_client.stats()["dist_compiles"].get(farm.server_addr, 0)
    b = build(toolkit, "onfarm")
    assert where(b) == {"cicc": "remote", "ptxas": "remote"}, lines
    assert farm_client.stats()["dist_compiles"].get(farm.server_addr, 0) == before + 2
    assert all(r.where is None for r in b.runs if r.stage.kind.value not in ("cicc", "ptxas"))
    plain = subprocess.run([toolkit.nvcc, "-arch=sm_90", "-c", "onfarm.cu", "-o", "plain.o"],
                           capture_output=True, text=True)
    assert plain.returncode == 0, plain.stderr
    assert dump("onfarm.o") == dump("plain.o")
    assert lines == []
    # The record says it, and reads back.
    doc = b.to_json()
    assert [s.get("where") for s in doc["stages"] if s["kind"] in ("cicc", "ptxas")] == \
        ["remote", "remote"]
    # The report's stage graph says it in the stage's box.
    from nvstage.report.stage_charts import stage_graph_svg

    assert stage_graph_svg(b, None).count("ran remote") == 2


def test_a_rerun_is_answered_by_the_client_s_cache(farm_client, toolkit, workdir,
                                                   monkeypatch, lines):
    """Two builds of one source (no internal-linkage names: the module id, new each build,
    is then in no PTX) in one kept folder: the second's cicc and ptxas are the client's
    hits."""
    use(monkeypatch, farm_client)
    Path("again.cu").write_text(f"__global__ void again(float *a) "
                                f"{{ a[threadIdx.x] *= {next(_n)}.25f; }}\n")
    opts = CompileOptions(archs=("sm_90",), compile_only=True, output="again.o")
    nvstage.compile("again.cu", opts, toolkit=toolkit, cache=False, keep="kept")
    b = nvstage.compile("again.cu", opts, toolkit=toolkit, cache=False, keep="kept")
    assert where(b) == {"cicc": "remote-hit", "ptxas": "remote-hit"}, lines


def _faulty(toolkit, monkeypatch, lines, client, tag, **extra):
    use(monkeypatch, client, **extra)
    b = build(toolkit, tag)
    plain = subprocess.run([toolkit.nvcc, "-arch=sm_90", "-c", f"{tag}.cu", "-o", "plain.o"],
                           capture_output=True, text=True)
    assert plain.returncode == 0
    assert b.status == "ok" and Path(f"{tag}.o").is_file()
    assert len(lines) == 1, lines
    return where(b), lines[0]


def test_wrong_token(farm, toolkit, workdir, monkeypatch, lines):
    bad = farm.client(token="not-the-token", name="badtoken")
    placed, line = _faulty(toolkit, monkeypatch, lines, bad, "badtoken")
    # sccache 0.16 fails the compile itself (no local run of its own): nvstage runs it here.
    assert placed == {"cicc": "local-fallback", "ptxas": "local-fallback"}
    assert "401" in line and "token" in line


def test_scheduler_down(farm, toolkit, workdir, monkeypatch, lines):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gone = farm.client(scheduler_port=port, name="noscheduler")
    placed, line = _faulty(toolkit, monkeypatch, lines, gone, "noscheduler")
    assert placed == {"cicc": "local", "ptxas": "local"}, line


def test_build_server_down(farm, farm_client, toolkit, workdir, monkeypatch, lines):
    farm.stop_server()
    try:
        placed, line = _faulty(toolkit, monkeypatch, lines, farm_client, "serverdown")
    finally:
        farm.start_server()
    assert placed == {"cicc": "local", "ptxas": "local"}, line


def test_a_toolchain_upload_that_fails(toolkit, workdir, monkeypatch, lines, farm_factory):
    """A build server that cannot keep any toolchain (its cache holds 1 byte): sccache
    counts a distribution error and compiles here itself."""
    small = farm_factory("toolchain_cache_size = 1\n")
    placed, line = _faulty(toolkit, monkeypatch, lines, small.clients[0], "noupload")
    assert placed == {"cicc": "local", "ptxas": "local"}
    assert "the farm answered with an error" in line


def test_timeout_runs_the_stage_here(farm_client, toolkit, workdir, monkeypatch, lines):
    placed, line = _faulty(toolkit, monkeypatch, lines, farm_client, "slow",
                           NVSTAGE_DIST_TIMEOUT="0.001")
    assert placed == {"cicc": "local-fallback", "ptxas": "local-fallback"}
    assert "NVSTAGE_DIST_TIMEOUT" in line


def test_a_client_that_fails_runs_the_stage_here(farm_client, toolkit, workdir, monkeypatch,
                                                 lines):
    placed, line = _faulty(toolkit, monkeypatch, lines, farm_client, "broken",
                           NVSTAGE_SCCACHE="/bin/false")
    assert placed == {"cicc": "local-fallback", "ptxas": "local-fallback"}
    assert "exited 1" in line


def test_unset_or_unknown_backend_changes_nothing(toolkit, workdir, monkeypatch, lines):
    monkeypatch.setenv("NVSTAGE_DIST", "distcc")
    b = build(toolkit, "unknown")
    assert where(b) == {"cicc": None, "ptxas": None}
    assert lines == ["NVSTAGE_DIST='distcc' is not a known backend (sccache): stages run "
                     "locally"]
    monkeypatch.delenv("NVSTAGE_DIST")
    lines.clear()
    assert where(build(toolkit, "unset")) == {"cicc": None, "ptxas": None} and lines == []


def test_farm_stages_take_no_local_job(farm_client, toolkit, workdir, monkeypatch, lines):
    """With -j 1, the two arches' cicc stages run on the farm at once (each arch's device
    preprocessing, local, goes on meanwhile), and the object is right."""
    use(monkeypatch, farm_client)
    Path("twoarch.cu").write_text(source("twoarch"))
    b = nvstage.compile("twoarch.cu", CompileOptions(archs=("sm_80", "sm_90"),
                                                     compile_only=True, output="twoarch.o"),
                        toolkit=toolkit, cache=False, jobs=1)
    farm_runs = [r for r in b.runs if r.where == "remote"]
    local = [r for r in b.runs if r.where is None and r.stage.kind.value != "cleanup"]
    assert len(farm_runs) == 4, [(r.stage.kind.value, r.where) for r in b.runs]

    def overlap(a, c):
        return a.started < c.started + c.seconds and c.started < a.started + a.seconds

    # Local stages never overlap one another (-j 1); some farm stage overlaps another stage.
    assert not any(overlap(a, c) for a in local for c in local if a is not c)
    assert any(overlap(a, c) for a in farm_runs for c in b.runs if a is not c)


def test_the_compile_table_says_where_stages_ran(cli, farm_client, workdir, monkeypatch,
                                                 lines):
    use(monkeypatch, farm_client)
    Path("table.cu").write_text(source("table"))
    r = cli("compile", "table.cu", "-arch=sm_90", "-c", "-o", "table.o", "--no-cache")
    assert r.exit_code == 0, r.output
    rows = [ln for ln in r.output.splitlines() if " cicc " in ln or " ptxas " in ln]
    assert len(rows) == 2 and all("(remote)" in ln for ln in rows), r.output


def test_the_launcher_s_record_says_where_and_measures_the_round_trip(
        cli, farm_client, toolkit, workdir, monkeypatch, lines):
    """nvstage in front of nvcc: one unit built here, one on the farm; the build record
    holds both, and --what-if-remote reads the round trip from it."""
    import json
    import sys

    from nvstage.inspect.build_view import load_build_view

    base = {**os.environ, **farm_client.env, "NVSTAGE_SCCACHE": farm_client.sccache}
    for name, extra in (("here", {}), ("there", {"NVSTAGE_DIST": "sccache"})):
        Path(f"{name}.cu").write_text(source(name))
        cp = subprocess.run([sys.executable, "-m", "nvstage", toolkit.nvcc, "-arch=sm_90", "-c",
                             f"{name}.cu", "-o", f"{name}.o"], env={**base, **extra},
                            capture_output=True, text=True, timeout=600)
        assert cp.returncode == 0 and cp.stderr == "", cp.stderr
    view = load_build_view(workdir)
    placed = {(u.name, s.kind): s.where for u in view.units for s in u.stages
              if s.kind in ("cicc", "ptxas")}
    assert placed == {("here.cu", "cicc"): None, ("here.cu", "ptxas"): None,
                      ("there.cu", "cicc"): "remote", ("there.cu", "ptxas"): "remote"}
    r = cli("report", workdir, "--what-if-remote", "8", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["round_trip"] == "measured"
