"""Stages run at once (bounded by -j) give exactly what they give one at a time, and what nvcc
gives; the build still stops cleanly at a failure."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading

import pytest

import nvstage
from nvstage.errors import StageFailed, UsageError
from nvstage.compiler.nvcc.graph import build_graph
from nvstage.compiler.pipeline.observer import Observer
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.nvcc.plan import StageKind as K

GENCODES = ("arch=compute_75,code=sm_75", "arch=compute_80,code=sm_80",
            "arch=compute_90,code=[sm_90,compute_90]")


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def sass(toolkit, path) -> str:
    out = subprocess.run([toolkit.tool("cuobjdump"), "-sass", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return "\n".join(line for line in out.splitlines()
                     if not line.startswith(("Fatbin", "\tcode for")))


def device_files(folder):
    """Every kept file that does not name its own folder, by name: .ii, PTX, cubins, fatbin."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())
            if p.name != "stages.json" and not p.name.endswith(".stub.c")}


def test_serial_parallel_and_cached_builds_are_identical_and_match_nvcc(toolkit, kernels,
                                                                         workdir):
    shutil.copy(kernels / "multi.cu", workdir)
    builds = {}
    for name, jobs, cache in (("serial", 1, False), ("parallel", 4, False),
                              ("cold", 2, workdir / "c"), ("warm", 2, workdir / "c")):
        opts = CompileOptions(gencodes=GENCODES, compile_only=True, output=f"{name}.o")
        builds[name] = nvstage.compile("multi.cu", opts, toolkit=toolkit, keep=name, jobs=jobs,
                                       cache=cache)
    assert not any(r.cached for r in builds["cold"].runs)
    assert all(r.cached for r in builds["warm"].runs)
    ref = device_files(workdir / "serial")
    assert sum(n.endswith(".cubin") for n in ref) == 3 and sum(n.endswith(".ptx") for n in ref) == 3
    for name in ("parallel", "cold", "warm"):
        assert device_files(workdir / name) == ref, name
        # The stub names its own path in #line markers: equal once the folder is swapped.
        for stub in (workdir / "serial").glob("*.stub.c"):
            mine = (workdir / name / stub.name).read_text()
            assert mine.replace(f"/{name}/", "/serial/") == stub.read_text()
        assert (workdir / f"{name}.o").read_bytes() == (workdir / "serial.o").read_bytes()
    (workdir / "ref").mkdir()
    cp = subprocess.run([toolkit.nvcc, *sum((["-gencode", g] for g in GENCODES), []), "-c",
                         "-keep", "-keep-dir", "ref", "multi.cu", "-o", "ref/multi.o"],
                        cwd=workdir, capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    for name in (n for n in ref if n.endswith(".ptx")):
        assert ref[name] == (workdir / "ref" / name).read_bytes()
    assert sass(toolkit, workdir / "warm.o") == sass(toolkit, workdir / "ref/multi.o")
    # Each stage still reports its own time; the manifest says how it was scheduled.
    manifest = json.loads((workdir / "parallel/stages.json").read_text())
    assert manifest["jobs"] == 4 and manifest["status"] == "ok"
    kinds = {s["index"]: s["kind"] for s in manifest["stages"]}
    path = manifest["critical_path"]
    assert kinds[path[0]] in ("host-preprocess", "device-preprocess")
    assert kinds[path[-1]] == "host-compile"
    assert 0 < manifest["critical_path_seconds"] <= manifest["stage_seconds"]
    assert manifest["cache"] is None
    assert json.loads((workdir / "warm/stages.json").read_text())["cache"]["hits"] == \
        len(builds["warm"].runs) == 13


def test_stages_overlap_and_respect_their_dependencies(toolkit, kernels, workdir):
    shutil.copy(kernels / "multi.cu", workdir)
    build = nvstage.compile("multi.cu", CompileOptions(gencodes=GENCODES, compile_only=True),
                            toolkit=toolkit, jobs=3, cache=False)
    graph = build_graph(build.plan)
    runs = {r.stage.index: r for r in build.runs}
    for i, deps in graph.deps.items():
        for d in deps:  # started after each stage it waits for had finished
            assert runs[i].started >= runs[d].started + runs[d].seconds - 1e-3, (i, d)
    spans = sorted((r.started, r.started + r.seconds) for r in build.runs)
    assert any(b0 < a1 for (a0, a1), (b0, _) in zip(spans, spans[1:])), "nothing overlapped"
    assert build.wall_seconds < build.stage_seconds


def test_jobs_bound_is_respected_and_observer_hears_every_stage(toolkit, kernels, workdir):
    shutil.copy(kernels / "multi.cu", workdir)

    class Watch(Observer):
        def __init__(self):
            self.lock = threading.Lock()
            self.now = self.most = 0
            self.started, self.ended, self.threads = [], [], set()

        def on_stage_start(self, stage):
            with self.lock:
                self.now += 1
                self.most = max(self.most, self.now)
                self.started.append(stage.index)
                self.threads.add(threading.current_thread().name)

        def on_stage_end(self, run):
            with self.lock:
                self.now -= 1
                self.ended.append(run.stage.index)

    w = Watch()
    build = nvstage.compile("multi.cu", CompileOptions(gencodes=GENCODES, compile_only=True),
                            toolkit=toolkit, jobs=2, observer=w, cache=False)
    assert w.most == 2
    assert w.threads == {threading.current_thread().name}  # one caller: no lock needed
    assert sorted(w.started) == sorted(w.ended) == [r.stage.index for r in build.runs]
    serial = Watch()
    nvstage.compile("multi.cu", CompileOptions(gencodes=GENCODES, compile_only=True),
                    toolkit=toolkit, jobs=1, observer=serial, cache=False)
    assert serial.most == 1 and serial.started == sorted(serial.started)  # nvcc's order


def test_a_failure_stops_the_build_waits_and_keeps_a_partial_manifest(toolkit, workdir):
    # Only the sm_80 device side fails; the other arch and the host side are fine.
    (workdir / "dev.cu").write_text(
        "__global__ void k(float* p) {\n#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 800\n"
        " p[0] = undefined_name;\n#endif\n}\n")
    opts = CompileOptions(gencodes=GENCODES, compile_only=True)
    with pytest.raises(StageFailed) as info:
        nvstage.compile("dev.cu", opts, toolkit=toolkit, keep="k", jobs=4, cache=False)
    err = info.value
    assert err.tool == "cicc" and "undefined_name" in err.stderr
    manifest = json.loads((workdir / "k/stages.json").read_text())
    assert manifest["status"] == "failed" and manifest["error"]["stage_index"] == err.stage_index
    ran = {s["index"]: s for s in manifest["stages"]}
    assert ran[err.stage_index]["returncode"] != 0
    assert all(s["kind"] not in ("fatbinary", "host-compile") for s in ran.values())
    assert not (workdir / "dev.o").exists()


def test_bad_jobs_is_a_usage_error(toolkit, kernels, workdir):
    shutil.copy(kernels / "saxpy.cu", workdir)
    with pytest.raises(UsageError, match="-j 0"):
        nvstage.compile("saxpy.cu", toolkit=toolkit, jobs=0)


def test_whole_program_in_parallel_links_and_runs_like_nvcc(toolkit, kernels, workdir):
    shutil.copy(kernels / "vadd.cu", workdir)
    opts = CompileOptions(gencodes=GENCODES[1:], output="v_par")
    build = nvstage.compile("vadd.cu", opts, toolkit=toolkit, jobs=4, cache=False)
    assert [r.stage.kind for r in build.runs][-1] is K.LINK
    cp = subprocess.run([toolkit.nvcc, *sum((["-gencode", g] for g in GENCODES[1:]), []),
                         "vadd.cu", "-o", "v_ref"], cwd=workdir, capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    assert sass(toolkit, workdir / "v_par") == sass(toolkit, workdir / "v_ref")
    a = subprocess.run([str(workdir / "v_par")], capture_output=True, text=True, timeout=60)
    b = subprocess.run([str(workdir / "v_ref")], capture_output=True, text=True, timeout=60)
    assert (a.returncode, a.stdout) == (b.returncode, b.stdout)
