"""nvstage.model.estimate: exact counts, the roofline arithmetic, real resources, calibration.

Kernels are compiled for real (the pipeline, ptxas -v, cuobjdump); each source once per
session thanks to the session fixtures and the model's memo.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from nvstage.hw.gpus import GPUS, lookup_gpu
from nvstage.errors import CalibrationError, CostSpecError, MissingCounts, ModelError
from nvstage.model.calibrate import calibrate
from nvstage.model.costfile import load_model_input
from nvstage.model.estimate import DEFAULT_PRESETS, Presets, estimate

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "model"
EXAMPLES = sorted(p for p in MODEL.glob("*.toml") if not p.name.endswith(".cost.toml"))
N = 1 << 24
F32 = 4
H200 = GPUS["h200"]


@pytest.fixture(scope="session")
def estimates(toolkit):
    return {p.stem: estimate(p, H200, toolkit=toolkit) for p in EXAMPLES}


def test_every_example_is_a_valid_workload_with_counts(toolkit):
    from nvstage.model.compiled import kernel_resources

    assert {p.stem for p in EXAMPLES} == {"chain_unfused", "chain_fused", "chain_fused_wide",
                                          "reduce", "matmul_tiled", "transfer", "fma_chain",
                                          "gather_chain", "matmul_forward4"}
    for p in EXAMPLES:
        w, spec = load_model_input(p)
        assert spec.file.endswith(f"{p.stem}.cost.toml")
        # validates every launch against the compiled kernels' parameter lists
        res = kernel_resources(w, "sm_90", toolkit=toolkit)
        assert set(res) == {lz.kernel for lz in w.launches}


def _emulate(name, w, init):
    """What each kernel computes, in numpy: the workload's check must accept it."""
    import numpy as np

    v = w.param_values()
    out = dict(init)
    if name.startswith("chain"):
        a = np.float32(v["a"])
        t = a * init["x"] + init["b"]
        out["y"] = (0.5 * t * (1 + np.tanh(0.7978845608 * (t + 0.044715 * t ** 3)))).astype(
            np.float32)
    elif name == "reduce":
        d = init["data"].astype(np.float64)
        out["partial"] = d.reshape(-1, v["blocks"], v["block"]).sum(axis=(0, 2)).astype(
            np.float32)
        out["total"] = np.array([out["partial"].sum()], np.float32)
    elif name == "matmul_tiled":
        m, n, k = v["m"], v["n"], v["k"]
        out["c"] = (init["a"].reshape(m, k) @ init["b"].reshape(k, n)).reshape(-1)
    elif name == "matmul_forward4":
        bt, c, oc = v["BT"], v["C"], v["OC"]
        out["out"] = (init["inp"].reshape(bt, c) @ init["weight"].reshape(oc, c).T
                      + init["bias"]).reshape(-1)
    elif name == "transfer":
        d = init["data"].copy()
        d[:v["m"]] += 1
        out["data"] = d
    elif name == "fma_chain":
        y = init["x"].copy()
        for _ in range(v["iters"]):
            y = (y * np.float32(v["a"]) + np.float32(v["b"])).astype(np.float32)
        out["y"] = y
    elif name == "gather_chain":
        mask = v["n"] - 1
        i = np.arange(v["blocks"] * v["block"]) & mask
        for _ in range(v["steps"]):
            i = init["next"][i] & mask
        out["out"] = i.astype(np.int32)
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_each_check_accepts_the_right_answer_and_rejects_a_wrong_one(path):
    from nvstage.run.workload.data import initial_contents, run_check

    w, _ = load_model_input(path)
    small = {"n": {"transfer": 1 << 12, "reduce": 1 << 19}.get(path.stem, 1 << 16)}
    if path.stem == "fma_chain":
        small["iters"] = 64
    if path.stem == "matmul_tiled":
        small = {"m": 64, "n": 96, "k": 128}
    if path.stem == "matmul_forward4":
        small = {"BT": 128, "C": 64}
    w = dataclasses.replace(w, params=tuple((k, small.get(k, v)) for k, v in w.params))
    init = initial_contents(w)
    got = _emulate(path.stem, w, init)
    results = run_check(w, init, got)
    assert results and all(r.ok for r in results), [r.message for r in results]
    bad = {k: v.copy() for k, v in got.items()}
    bad[w.check.expect[0][0]][0] += 1.0
    assert not all(r.ok for r in run_check(w, init, bad))


def test_chain_counts_are_exact(estimates):
    u, f, wide = estimates["chain_unfused"], estimates["chain_fused"], estimates["chain_fused_wide"]
    assert (u.n_launches, f.n_launches, wide.n_launches) == (3, 1, 1)
    assert u.kernels == ("scale", "add_bias", "gelu_act") and f.kernels == ("fused",)
    # scale: x -> t1; add_bias: t1, b -> t2; gelu_act: t2 -> y: 7 full passes over n floats
    assert [e.counts.bytes_read for e in u.launches] == [N * F32, 2 * N * F32, N * F32]
    assert [e.counts.bytes_written for e in u.launches] == [N * F32] * 3
    assert u.kernel_bytes == 7 * N * F32 == 469_762_048
    assert f.kernel_bytes == wide.kernel_bytes == 3 * N * F32 == 201_326_592
    assert u.intermediates == ("t1", "t2") and f.intermediates == ()
    assert u.intermediate_bytes_written == u.intermediate_bytes_read == 2 * N * F32
    assert f.intermediate_bytes_written == f.intermediate_bytes_read == 0
    assert u.flops == f.flops == 10 * N
    # same copies both ways: x and b in, y out
    for e in (u, f):
        assert [(t.kind, t.buffer, t.nbytes) for t in e.transfers] == [
            ("h2d", "x", N * F32), ("h2d", "b", N * F32), ("d2h", "y", N * F32)]


def test_register_heavy_fused_kernel_has_more_registers_and_lower_occupancy(estimates):
    from nvstage.hw.occupancy import occupancy

    fused = estimates["chain_fused"].launches[0].facts
    wide = estimates["chain_fused_wide"].launches[0].facts
    assert "ptxas -v" in fused.resource_source and "ptxas -v" in wide.resource_source
    assert wide.registers >= 64 > 32 >= fused.registers  # 88 and 14 with CUDA 13.5
    assert (wide.spill_stores, fused.spill_stores) == (0, 0)
    assert fused.occupancy == 1.0
    assert wide.occupancy <= 0.5 and "registers" in wide.limiters
    assert wide.occupancy == occupancy("sm_90", block_size=256, registers=wide.registers).occupancy
    # ...yet each warp keeps 32 times the loads in flight, so fewer round trips wait
    e, f = estimates["chain_fused_wide"].launches[0], estimates["chain_fused"].launches[0]
    assert (e.code.loads_per_trip, f.code.loads_per_trip) == (64, 2)
    assert e.bounds.time("memory latency") < f.bounds.time("memory latency")
    assert e.t_kernel_s < f.t_kernel_s


def test_bounds_and_transfer_arithmetic(estimates):
    """Each figure hand-checked from the H200's table row and the kernels' SASS."""
    p = DEFAULT_PRESETS
    f = estimates["chain_fused"].launches[0]
    bw = 4.8e12 * p.dram_efficiency  # 3.898 TB/s
    # 65536 blocks over 132 SMs x 8 resident: 63 waves, one round trip (2 loads) each
    assert f.bounds.time("DRAM bandwidth") == pytest.approx(3 * N * F32 / bw, rel=1e-12)
    assert f.bounds.time("memory latency") == pytest.approx(63 * 375e-9, rel=1e-12)
    assert f.t_kernel_s == pytest.approx(3 * N * F32 / bw + 63 * 375e-9, rel=1e-12)
    assert f.limiter == "DRAM bandwidth"
    est = estimates["chain_fused"]
    link = H200.pcie_bandwidth * p.pcie_pinned_efficiency
    assert link == pytest.approx(55.393e9, rel=1e-4)
    assert est.transfers[0].t_s == pytest.approx(p.copy_latency_s + N * F32 / link, rel=1e-12)
    assert est.launch_s == pytest.approx(3.901e-6)
    assert est.total_s == pytest.approx(est.launch_s + est.kernel_s + est.transfer_s)
    mm = estimates["matmul_tiled"].launches[0]
    # per warp and tile: 32 LDS (128 B each), 8 LDS.128 (512 B), 2 STS (128 B) = 8448 B, 32
    # tiles; 8 blocks of 32 warps on the busiest SM; 128 B per clock at 1980 MHz
    assert mm.limiter == "shared memory"
    assert mm.code.trips == (32.0,) and mm.code.shared_bytes * 32 == 8448 * 32
    assert mm.t_kernel_s == pytest.approx(8 * 32 * 8448 * 32 / (128 * 1.98e9), rel=1e-12)
    assert mm.facts.shared_static >= 2 * 32 * 32 * 4 and mm.facts.barriers >= 1
    red = estimates["reduce"].launches
    # the grid-stride loop: 64 dependent round trips per thread, one wave
    assert red[0].code.round_trips == 64 and red[0].limiter == "memory latency"
    assert red[0].bounds.time("memory latency") == pytest.approx(64 * 375e-9, rel=1e-12)
    assert red[1].limiter == "launch floor" and red[1].t_kernel_s == p.kernel_floor_s
    tr = estimates["transfer"]
    assert tr.launches[0].counts.bytes == 2 * 256 * F32  # only m elements read and written
    assert tr.transfer_s / tr.total_s > 0.99


def test_pipelined_is_at_most_sequential(estimates):
    for name, e in estimates.items():
        assert e.overlapped_bound_s <= e.pipelined_s <= e.total_s + 1e-15, name
        assert e.label == "estimate" and e.to_json()["label"] == "estimate"
    u = estimates["chain_unfused"]
    # the host issues the three launches while the copies in run: all three costs are hidden
    assert u.total_s - u.pipelined_s == pytest.approx(3 * DEFAULT_PRESETS.launch_cost_s)


def test_json_shows_inputs_and_sources(estimates):
    d = json.loads(json.dumps(estimates["chain_unfused"].to_json()))
    assert d["schema"] == "nvstage.model/1" and d["label"] == "estimate"
    assert set(d["presets"]) == set(Presets().names())
    assert all(v["source"] for v in d["presets"].values())
    assert "4.8 TB/s" in d["gpu"]["sources"]["memory_bandwidth"]
    assert d["per_launch"][0]["resources"]["registers"] > 0
    assert d["intermediate_bytes_written"] == 2 * N * F32


@pytest.mark.parametrize("gpu", ["a100", "l4", "b200"])
def test_other_gpus(gpu, toolkit):
    import math

    g = GPUS[gpu]
    e = estimate(MODEL / "chain_fused.toml", g, toolkit=toolkit)
    x = e.launches[0]
    assert x.facts.registers > 0 and e.gpu.arch == g.arch
    waves = math.ceil(65536 / (g.sm_count * x.facts.active_blocks_per_sm))
    assert x.t_kernel_s == pytest.approx(
        3 * N * F32 / (g.memory_bandwidth * DEFAULT_PRESETS.dram_efficiency)
        + waves * g.memory_latency_s)
    # no published clock for the B200: no per-SM bound, and a note says so
    assert (x.bounds.bound("instruction issue") is None) == (gpu == "b200")


def test_arch_only_gpu_has_not_the_figures():
    with pytest.raises(ModelError, match="has no sm_count, memory_bandwidth, fp32_flops"):
        estimate(MODEL / "chain_fused.toml", lookup_gpu("sm_90"))


# -- counts: missing and malformed --------------------------------------------------------

def _copy(tmp_path, name, cost: str | None):
    text = (MODEL / f"{name}.toml").read_text().replace("../../kernels/",
                                                          str(ROOT / "kernels") + "/")
    p = tmp_path / f"{name}.toml"
    p.write_text(text)
    if cost is not None:
        (tmp_path / f"{name}.cost.toml").write_text(cost)
    return p


def test_workload_without_counts_is_one_clear_error(tmp_path):
    p = _copy(tmp_path, "chain_fused", None)
    with pytest.raises(MissingCounts) as e:
        estimate(p, H200)
    assert "no reads, writes and FLOPs per launch" in e.value.message
    assert "chain_fused.cost.toml" in e.value.hint


@pytest.mark.parametrize("cost,message", [
    ('host_memory = "pinned"\n', "no [[launch]] entries"),
    ('[[launch]]\nreads = ["x"]\nwrites = ["y"]\n', "missing flops for kernel fused"),
    ('[[launch]]\nreads = ["x"]\nwrites = ["y"]\nflops = 1\n[[launch]]\nreads = []\n'
     'writes = []\nflops = 0\n', "2 [[launch]] entries for the workload's 1"),
    ('[[launch]]\nreads = ["q"]\nwrites = ["y"]\nflops = 1\n', "no buffer named 'q'"),
    ('[[launch]]\nkernel = "scale"\nreads = ["x"]\nwrites = ["y"]\nflops = 1\n',
     "kernel 'scale' but the workload's launch[0] is 'fused'"),
    ('[[launch]]\nreads = ["x"]\nwrites = ["y"]\nflops = "n * zz"\n', "cannot evaluate"),
    ('host_memory = "paged"\n[[launch]]\nreads = ["x"]\nwrites = ["y"]\nflops = 1\n',
     "pinned or pageable"),
    ('[[launch]]\nreads = ["x"]\nwrites = ["y"]\nflops = 1\ntrips = -1\n',
     "a trip count cannot be negative"),
    ('[[launch]]\nreads = ["x"]\nwrites = ["y"]\nflops = 1\ntrips = []\n',
     "a list of 1 to 64 trip counts, not 0"),
    ('[[launch]]\nreads = ["x"]\nwrites = ["y"]\nflops = 1\ntrips = true\n',
     "a trip count is a number or an expression"),
    ('[[launch]]\nreads = ["x"]\nwrites = ["y"]\nflops = 1\ninstructions = 3\n',
     "a table of instruction classes"),
    ('[[launch]]\nreads = ["x"]\nwrites = ["y"]\nflops = 1\ninstructions = { fp99 = 1 }\n',
     "no instruction class 'fp99'"),
    ('[[launch]]\nreads = ["x"]\nwrites = ["y"]\nflops = 1\ninstructions = { fp32 = -2 }\n',
     "a count cannot be negative"),
])
def test_malformed_counts(tmp_path, cost, message):
    p = _copy(tmp_path, "chain_fused", cost)
    with pytest.raises(CostSpecError) as e:
        load_model_input(p)
    assert message in e.value.message and str(tmp_path) in e.value.message


def test_declared_instructions_replace_the_sass_counts(tmp_path, toolkit):
    base = estimate(MODEL / "chain_fused.toml", H200, toolkit=toolkit).launches[0]
    p = _copy(tmp_path, "chain_fused", '[[launch]]\nreads = ["x", "b"]\nwrites = ["y"]\n'
                                       'flops = "10 * n"\ninstructions = { fp32 = 4000 }\n')
    x = estimate(p, H200, toolkit=toolkit).launches[0]
    assert x.code.classes["fp32"] == 4000 and "fp32 declared" in x.code.trips_source
    assert x.code.instructions == base.code.instructions - base.code.pipes["fp32"] + 4000
    # 497 blocks of 8 warps on the busiest SM x about 4,000 instructions / 4 per clock: about
    # 2 ms at 1980 MHz, far past memory's 75 us
    assert x.limiter == "instruction issue"
    assert x.t_kernel_s == pytest.approx(497 * 8 * x.code.instructions / (4 * 1.98e9))


def test_trips_that_do_not_fit_the_loops(tmp_path, toolkit):
    text = (MODEL / "matmul_tiled.cost.toml").read_text().replace('trips = "k / 32"',
                                                                   "trips = [32, 8]")
    p = _copy(tmp_path, "matmul_tiled", text)
    with pytest.raises(ModelError, match="2 trip counts for 1 loop in its SASS"):
        estimate(p, H200, toolkit=toolkit)


def test_inline_model_table_and_pageable(tmp_path, toolkit):
    p = _copy(tmp_path, "chain_fused", None)
    p.write_text(p.read_text() + '\n[model]\nhost_memory = "pageable"\n[[model.launch]]\n'
                 'reads = ["x", "b"]\nwrites = ["y"]\nflops = "10 * n"\n')
    e = estimate(p, H200, toolkit=toolkit)
    assert e.kernel_bytes == 3 * N * F32
    assert e.transfers[0].host_memory == "pageable"
    assert e.transfers[0].bandwidth == pytest.approx(
        H200.pcie_bandwidth * DEFAULT_PRESETS.pcie_pageable_efficiency)


# -- calibration -------------------------------------------------------------------------

def synthetic_report(workload: Path, toolkit, *, launch_ns=5000.0, dram_eff=0.8,
                     link_Bps=40e9, floor_ns=2000.0, copy_ns=1500.0, reps=5) -> dict:
    """A schema-valid nvstage.run/1 report MADE UP FOR THIS TEST (not a measurement): every
    kernel its latency bound plus its bytes at ``dram_eff`` of the H200's datasheet bandwidth,
    every copy at ``link_Bps`` after ``copy_ns`` of latency, every launch costing the host
    ``launch_ns``."""
    from nvstage.run.decompose import NoiseFloor, OpSamples, decompose

    w, _ = load_model_input(workload)
    est = {e.index: e for e in estimate(workload, H200, toolkit=toolkit).launches}
    ops, values = [], w.param_values()
    for i, (kind, name, li) in enumerate(w.operations()):
        if kind == "launch":
            e = est[li]
            t = (e.bounds.time("memory latency") + e.counts.bytes / (4.8e12 * dram_eff)) * 1e9
            ops.append(OpSamples(i, "launch", name, [launch_ns] * reps, [t] * reps))
        else:
            b = w.buffer(name)
            nbytes = w.nbytes(b, values)
            t = copy_ns + nbytes / link_Bps * 1e9
            ops.append(OpSamples(i, kind, name, [1000.0] * reps, [t] * reps, nbytes=nbytes))
    walls = [sum(o.gpu_ns[0] for o in ops)] * reps
    d = decompose(ops, walls, NoiseFloor(500.0, floor_ns, copy_ns, 50.0), "serialized")
    return {"schema": "nvstage.run/1", "workload": {"name": w.name, "file": str(workload)},
            "device": {"name": "synthetic test fixture"}, "status": "ok",
            "decomposition": d.to_json()}


def test_calibration_recovers_the_synthetic_parameters(tmp_path, toolkit):
    doc = synthetic_report(MODEL / "chain_unfused.toml", toolkit)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(doc))
    cal = calibrate(path, H200, toolkit=toolkit)
    p = cal.presets
    assert p.launch_cost_s == pytest.approx(5e-6)
    assert p.kernel_floor_s == pytest.approx(2e-6) and p.copy_latency_s == pytest.approx(1.5e-6)
    assert p.dram_efficiency == pytest.approx(0.8, rel=1e-9)
    assert p.pcie_pinned_efficiency == pytest.approx(40e9 / H200.pcie_bandwidth, rel=1e-9)
    changes = {c.name: c for c in cal.changes}
    assert changes["launch_cost_s"].relative == pytest.approx(5 / 3.901 - 1)
    assert changes["dram_efficiency"].samples == 3
    assert "fitted from" in p.source("dram_efficiency")
    assert any("compute_efficiency: not fitted" in n for n in cal.notes)
    # the calibrated model reproduces the fixture on a workload it was not fitted on
    e = estimate(MODEL / "chain_fused.toml", H200, calibration=cal, toolkit=toolkit)
    fixture = synthetic_report(MODEL / "chain_fused.toml", toolkit)["decomposition"]
    assert e.kernel_s == pytest.approx(fixture["kernel_ns"]["median"] * 1e-9, rel=1e-9)
    assert e.transfer_s == pytest.approx(fixture["transfer_ns"]["median"] * 1e-9, rel=1e-9)
    assert e.launch_s == pytest.approx(fixture["launch_ns"]["median"] * 1e-9, rel=1e-9)


def test_calibration_rejects_other_documents(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"schema": "nvstage.compile/1"}')
    # One reader for every user document (nvstage.documents): its wording.
    with pytest.raises(CalibrationError, match="is not a run report: schema 'nvstage.compile/1'"):
        calibrate(bad, H200)
    bad.write_text("{not json")
    with pytest.raises(CalibrationError, match="not JSON"):
        calibrate(bad, H200)
    bad.write_text('{"schema": "nvstage.run/1", "decomposition": null}')
    with pytest.raises(CalibrationError, match="no decomposition"):
        calibrate(bad, H200)


def test_calibration_with_the_wrong_workload(tmp_path, toolkit):
    doc = synthetic_report(MODEL / "chain_unfused.toml", toolkit)
    with pytest.raises(CalibrationError, match="3 launches measured"):
        calibrate(doc, H200, workload=MODEL / "chain_fused.toml", toolkit=toolkit)


def test_relative_errors_against_a_report(toolkit):
    from nvstage.model.calibrate import relative_errors

    doc = synthetic_report(MODEL / "chain_fused.toml", toolkit)
    cal = calibrate(doc, H200, toolkit=toolkit)
    errs = relative_errors(estimate(MODEL / "chain_fused.toml", H200, calibration=cal,
                                    toolkit=toolkit), doc)
    assert errs["launch"] == pytest.approx(0, abs=1e-9)
    assert errs["kernel"] == pytest.approx(0, abs=1e-9)
    assert errs["total"] == pytest.approx(0, abs=1e-9)
    assert set(errs) == {"launch", "kernel", "transfer", "total", "pipelined_vs_wall"}


def test_the_compile_memo_is_bounded(monkeypatch):
    """Resources come from ONE compile path (nvstage.run.prepare), remembered for the last few
    (code, arch, toolkit) only: a long-lived process does not keep every image."""
    import nvstage.model.compiled as est
    from nvstage.run.prepare import Prepared

    calls = []

    def fake_prepare(w, arch, *, toolkit=None, resources=False):
        calls.append((arch, resources))
        return Prepared("cubin", b"", arch, None, resources=[])

    monkeypatch.setattr(est, "prepare", fake_prepare)
    monkeypatch.setattr(est, "_memo", type(est._memo)())
    w, _ = load_model_input(EXAMPLES[0])
    for i in range(est._KEPT + 8):
        est._prepared(w, f"sm_{i}", None)
    assert len(est._memo) == est._KEPT
    assert all(resources for _, resources in calls)
    est._prepared(w, f"sm_{est._KEPT + 7}", None)  # the latest: remembered
    assert len(calls) == est._KEPT + 8
    est._prepared(w, "sm_0", None)  # the oldest: compiled again
    assert len(calls) == est._KEPT + 9
