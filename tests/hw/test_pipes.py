"""hw.pipes: the guide's per-SM throughput per instruction class, one row per known arch."""

from __future__ import annotations

import pytest

from nvstage.hw.archs import ARCHS
from nvstage.hw.pipes import PIPES, sm_throughput
from nvstage.inspect.mix import CLASSES


def test_every_arch_has_a_row_and_every_class_is_the_mix_tables():
    assert set(PIPES) == set(ARCHS)
    for arch, row in PIPES.items():
        assert set(row.results_per_clock) <= set(CLASSES), arch
        src = row.sources["results_per_clock"]
        assert src.startswith("ASSUMPTION: ") or "Programming Guide" in src, arch
        assert "Programming Guide" in row.sources["issue_per_clock"]
        assert "32 banks" in row.sources["shared_bytes_per_clock"]


def test_hopper_per_sm_per_clock():
    h = sm_throughput("sm_90a")
    assert h.arch == "sm_90"
    # 128 FP32 lanes: 4 warp instructions per clock, the issue rate of 4 schedulers
    assert h.warp_instructions_per_clock("fp32") == 4 == h.issue_per_clock
    assert h.warp_instructions_per_clock("int") == 2
    assert h.warp_instructions_per_clock("fp64") == 2
    assert h.warp_instructions_per_clock("sfu") == 0.5
    assert h.warp_instructions_per_clock("fp16") == 4  # 256 results, 64 per HFMA2 warp op
    assert h.warp_instructions_per_clock("global_load") is None  # issue slots only
    assert h.shared_bytes_per_clock == 128


@pytest.mark.parametrize("gpu,tflops", [("h200", 67), ("a100", 19.5), ("l40s", 91.6)])
def test_fp32_rows_agree_with_the_datasheets(gpu, tflops):
    from nvstage.hw.gpus import GPUS

    g = GPUS[gpu]
    peak = g.sm_count * sm_throughput(g.arch).results_per_clock["fp32"] * 2 * \
        g.boost_clock_mhz * 1e6
    assert peak == pytest.approx(tflops * 1e12, rel=0.01)
