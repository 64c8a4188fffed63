"""The sequential decomposition, by hand-computed examples."""

import json

import pytest

from nvstage.run.decompose import (NoiseFloor, OpSamples, decompose, rep_totals, relative_gap,
                               spread)


def _ops():
    return [
        OpSamples(0, "h2d", "x", host_ns=[5000, 5000, 5000], gpu_ns=[100_000, 110_000, 90_000],
                  nbytes=1_000_000),
        OpSamples(1, "launch", "k", host_ns=[3000, 4000, 5000], gpu_ns=[50_000, 60_000, 40_000]),
        OpSamples(2, "d2h", "y", host_ns=[5000, 5000, 5000], gpu_ns=[20_000, 20_000, 20_000],
                  nbytes=4),
    ]


def test_spread_quartiles_and_extremes():
    s = spread([1, 2, 3, 4, 5])
    assert (s.n, s.median, s.p25, s.p75, s.min, s.max) == (5, 3, 2, 4, 1, 5)
    assert s.iqr == 2
    assert spread([7]).median == 7 and spread([7]).iqr == 0
    assert spread([]) is None


def test_rep_totals_sum_the_three_terms_and_overlap():
    reps = rep_totals(_ops(), [160_000, 190_000, 100_000])
    r0 = reps[0]
    assert (r0.launch_ns, r0.kernel_ns, r0.transfer_ns) == (3000, 50_000, 120_000)
    assert r0.total_ns == 173_000
    assert r0.overlap_ns == 13_000  # T - wall
    assert reps[1].overlap_ns == 4000 + 60_000 + 130_000 - 190_000
    assert reps[2].total_ns == 5000 + 40_000 + 110_000


def test_copy_host_time_is_not_a_term():
    ops = [OpSamples(0, "h2d", "x", host_ns=[10**9], gpu_ns=[10])]
    assert rep_totals(ops, [10])[0].total_ns == 10


def test_decompose_medians_bandwidth_and_json():
    d = decompose(_ops(), [160_000, 190_000, 100_000], NoiseFloor(500, 2000, 1500, 50),
                  "serialized")
    assert d.total.median == 173_000  # per-rep T: 173000, 194000, 155000
    assert d.wall.median == 160_000
    assert d.overlap.median == 13_000  # overlaps: 13000, 4000, 55000
    assert d.overlap.min == 4000 and d.overlap.max == 55_000
    h2d = d.ops[0]
    assert h2d.bandwidth_gbs == pytest.approx(1_000_000 / 100_000)  # 10 GB/s
    assert d.ops[1].bandwidth_gbs is None
    assert d.overlap_fraction == pytest.approx(13_000 / 173_000)
    doc = json.loads(json.dumps(d.to_json()))
    assert doc["total_ns"]["median"] == 173_000
    assert doc["operations"][0]["pinned"] is True and doc["operations"][1]["pinned"] is None
    assert len(doc["repetitions"]) == 3


def test_noise_floor_flags():
    floor = NoiseFloor(event_resolution_ns=500, empty_kernel_ns=2500, smallest_copy_ns=1800,
                       host_timer_ns=60)
    assert floor.kernel_floor() == 5000  # 10 x resolution beats the empty kernel
    assert floor.copy_floor() == 5000
    ops = [OpSamples(0, "launch", "tiny", host_ns=[3000], gpu_ns=[3000]),
           OpSamples(1, "launch", "big", host_ns=[3000], gpu_ns=[50_000]),
           OpSamples(2, "h2d", "b", host_ns=[1000], gpu_ns=[1000], nbytes=4)]
    d = decompose(ops, [60_000], floor, "pipelined")
    assert d.ops[0].flags == ("kernel time below the noise floor",)
    assert d.ops[1].flags == ()
    assert d.ops[2].flags == ("copy time below the noise floor",)
    assert any("2 of 3" in f for f in d.flags)
    assert any("only 1 repetition" in f for f in d.flags)


def test_empty_kernel_above_resolution_sets_the_floor():
    assert NoiseFloor(100, 2500, None, None).kernel_floor() == 2500
    assert NoiseFloor().kernel_floor() == 0


def test_sample_counts_must_match_reps():
    ops = [OpSamples(0, "launch", "k", host_ns=[1, 2], gpu_ns=[1])]
    with pytest.raises(ValueError, match="GPU samples"):
        rep_totals(ops, [1, 2])
    with pytest.raises(ValueError, match="kind"):
        OpSamples(0, "memset", "x")


def test_relative_gap():
    assert relative_gap(103, 100) == pytest.approx(0.03)
    assert relative_gap(1, 0) == float("inf")
