"""nvstage.model.compare: the difference term by term, and verdicts that respect noise."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvstage.model.compare import (Verdict, compare, estimate_verdict, explain,  # noqa: F401
                             measured_verdict)
from nvstage.hw.gpus import GPUS

MODEL = Path(__file__).resolve().parents[2] / "examples" / "model"
H200 = GPUS["h200"]
N = 1 << 24


@pytest.fixture(scope="module")
def unfused_vs_fused(toolkit):
    return compare(MODEL / "chain_unfused.toml", MODEL / "chain_fused.toml", H200,
                   toolkit=toolkit)


@pytest.fixture(scope="module")
def fused_vs_wide(toolkit):
    return compare(MODEL / "chain_fused.toml", MODEL / "chain_fused_wide.toml", H200,
                   toolkit=toolkit)


def test_terms_add_up_to_the_difference(unfused_vs_fused, fused_vs_wide):
    for c in (unfused_vs_fused, fused_vs_wide):
        assert sum(t.seconds for t in c.terms) == pytest.approx(c.b.total_s - c.a.total_s,
                                                                 rel=1e-9, abs=1e-15)
        assert [t.name for t in c.terms] == ["launches", "DRAM bytes", "memory latency",
                                            "SM work and floor", "transfers"]


def test_fusion_saves_launches_and_intermediate_bytes(unfused_vs_fused):
    c = unfused_vs_fused
    terms = {t.name: t for t in c.terms}
    assert terms["launches"].seconds == pytest.approx(-2 * c.a.presets.launch_cost_s)
    assert "2 launches removed x 3.90 us" in terms["launches"].detail
    bw = 4.8e12 * c.a.presets.dram_efficiency
    # the two intermediates, written once and read once: 4 passes over n floats fewer
    assert terms["DRAM bytes"].seconds == pytest.approx(-4 * N * 4 / bw)
    # two kernels' latency removed: each of the 63 waves of resident blocks waits one trip
    assert terms["memory latency"].seconds == pytest.approx(-2 * 63 * 375e-9)
    assert terms["SM work and floor"].seconds == 0 and terms["transfers"].seconds == 0
    # the copies dwarf the kernels: on T the estimates are too close to call...
    assert c.verdict.word == "too close to call" and c.verdict.basis == "estimate"
    # ...but on the device side the fused chain is faster
    assert c.device_verdict.word == "faster" and c.device_verdict.on == "launch + kernel"
    assert c.measured is None and "not measured" in c.measure_note


def test_loads_in_flight_outweigh_the_occupancy_lost(fused_vs_wide):
    """The seed's trade-off: fused_wide has a quarter of the warps (88 registers) but 32 times
    the loads in flight per warp, so its round trips hide better: the model finds it faster,
    as the H200 measured it (about 57 against 64 us)."""
    c = fused_vs_wide
    terms = {t.name: t for t in c.terms}
    assert terms["launches"].seconds == 0 and terms["DRAM bytes"].seconds == 0
    assert terms["memory latency"].seconds == pytest.approx((8 - 63) * 375e-9)
    assert "fused 2 x 64 warps (14 regs, 100%)" in terms["memory latency"].detail
    assert "fused_wide 64 x 16 warps (88 regs, 25%)" in terms["memory latency"].detail
    assert c.device_verdict.word == "faster"
    d = c.to_json()
    assert d["b"]["resources"][0]["registers"] > d["a"]["resources"][0]["registers"]
    assert d["b"]["resources"][0]["occupancy"] < d["a"]["resources"][0]["occupancy"]
    a, b = d["a"]["kernels_explained"][0], d["b"]["kernels_explained"][0]
    assert (a["loads_in_flight_per_warp"], b["loads_in_flight_per_warp"]) == (2, 64)
    assert a["limiter"] == b["limiter"] == "DRAM bandwidth"
    assert "memory latency 23.62 us" in a["detail"] and "memory latency 3.00 us" in b["detail"]


def test_same_workload_is_same(toolkit):
    c = compare(MODEL / "reduce.toml", MODEL / "reduce.toml", H200, toolkit=toolkit)
    assert c.verdict.word == "same" and "same workload" in c.notes[0]


def test_measure_without_a_driver_says_why(monkeypatch, toolkit):
    from nvstage.run import probe as driver

    monkeypatch.setenv("NVSTAGE_NO_GPU", "1")
    driver.probe.cache_clear()
    try:
        c = compare(MODEL / "transfer.toml", MODEL / "transfer.toml", H200, measure=True,
                    toolkit=toolkit)
    finally:
        driver.probe.cache_clear()
    assert c.measured is None and c.measured_verdict is None
    assert c.measure_note == "not measured: NVSTAGE_NO_GPU is set: GPU use is turned off"


@pytest.mark.parametrize("ta,tb,word", [
    (100.0, 100.5, "same"), (100.0, 95.0, "too close to call"), (100.0, 109.0,
                                                                 "too close to call"),
    (100.0, 80.0, "faster"), (100.0, 111.0, "slower"),
])
def test_estimate_verdict_thresholds(ta, tb, word):
    assert estimate_verdict(ta, tb).word == word


@pytest.mark.parametrize("a,ia,b,ib,word", [
    (100.0, 1.0, 90.0, 2.0, "faster"),  # 10 apart, noise 2: more than two IQRs
    (100.0, 1.0, 103.0, 2.0, "too close to call"),  # 3 apart with IQR 2
    (100.0, 1.0, 100.5, 1.0, "same"),  # within one IQR and 1%
    (100.0, 0.1, 110.0, 0.1, "slower"),
    (100.0, 10.0, 100.5, 10.0, "same"),
    (100.0, 0.0, 100.0, 0.0, "same"),
])
def test_measured_verdict_uses_the_spread(a, ia, b, ib, word):
    v = measured_verdict(a, ia, b, ib)
    assert v.word == word and v.basis == "measured"


def test_each_kernel_beside_its_measurement(unfused_vs_fused):
    """With --measure, each launch's estimate beside its measured median, in launch order."""
    from nvstage.model.compare import kernels_measured
    from nvstage.run.decompose import NoiseFloor, OpSamples, decompose

    e = unfused_vs_fused.a
    ops = [OpSamples(0, "h2d", "x", [1000.0] * 3, [5e5] * 3, nbytes=4 * N),
           OpSamples(1, "h2d", "b", [1000.0] * 3, [5e5] * 3, nbytes=4 * N)]
    ops += [OpSamples(2 + k, "launch", name, [4000.0] * 3, [t] * 3)
            for k, (name, t) in enumerate((("scale", 50e3), ("add_bias", 70e3),
                                           ("gelu_act", 60e3)))]
    ops.append(OpSamples(5, "d2h", "y", [1000.0] * 3, [5e5] * 3, nbytes=4 * N))
    dec = decompose(ops, [2e6] * 3, NoiseFloor(500.0, 2000.0, 1500.0, 50.0), "serialized")
    got = kernels_measured(e, dec)
    assert [k["kernel"] for k in got] == ["scale", "add_bias", "gelu_act"]
    assert [k["measured_s"] for k in got] == pytest.approx([50e-6, 70e-6, 60e-6])
    assert got[0]["error"] == pytest.approx(e.launches[0].t_kernel_s / 50e-6 - 1)
    assert got[1]["limiter"] == "DRAM bandwidth"


def test_which_limiter_moved(unfused_vs_fused, toolkit):
    from nvstage.model.compare import limiter_shift

    assert limiter_shift(unfused_vs_fused.a, unfused_vs_fused.b).endswith(
        "the main limiter unchanged")
    c = compare(MODEL / "reduce.toml", MODEL / "chain_fused.toml", H200, toolkit=toolkit)
    shift = limiter_shift(c.a, c.b)
    assert shift.startswith("A [memory latency 93%, launch floor 7%] -> B [DRAM bandwidth 100%]")
    assert shift.endswith("moved from memory latency to DRAM bandwidth")
    assert c.to_json()["limiter_shift"] == shift
