"""bench/time_trace.py's arithmetic: each side's traced/untraced ratio per round, the medians
over the rounds and nvstage's excess over nvcc's."""

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "bench_time_trace", Path(__file__).resolve().parents[1] / "bench" / "time_trace.py")
tt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tt)


def test_ratios_are_medians_of_each_rounds_pair():
    rounds = [
        {"nvcc": 1.0, "nvcc traced": 1.10, "nvstage": 2.0, "nvstage traced": 2.30},
        {"nvcc": 2.0, "nvcc traced": 2.40, "nvstage": 1.0, "nvstage traced": 1.10},
        {"nvcc": 1.0, "nvcc traced": 1.20, "nvstage": 1.0, "nvstage traced": 1.25},
    ]
    got = tt.ratios(rounds)
    # per round: nvcc 1.10, 1.20, 1.20; nvstage 1.15, 1.10, 1.25 (a slow round of one side
    # does not move the other side's ratio)
    assert got["nvcc"] == pytest.approx(1.20)
    assert got["nvstage"] == pytest.approx(1.15)
    assert got["excess"] == pytest.approx(-0.05)


def test_each_leg_is_one_unit_for_sm_90_traced_or_not():
    argvs = tt.legs("/x/nvcc", "k.cu")
    assert set(argvs) == set(tt.LEGS)
    for name, argv in argvs.items():
        assert ("-fdevice-time-trace" in argv) == name.endswith("traced")
        assert argv[argv.index("-o") + 1].startswith("out/")
    assert "--no-cache" in argvs["nvstage traced"] and argvs["nvcc"][0] == "/x/nvcc"
