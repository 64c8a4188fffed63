"""Every preset of the model, and every figure of the GPU table it reads, says where it comes
from: a datasheet, the Programming Guide, a published measurement, a measurement of ours kept
in docs/measured, a --calibrate fit, or an ASSUMPTION with its reason. No other kind passes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nvstage.hw.gpus import GPUS
from nvstage.model.presets import DEFAULT_PRESETS, KINDS, PRESET_SOURCES, Presets

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", Presets().names())
def test_each_preset_has_a_kind_and_a_followable_source(name):
    kind, text = PRESET_SOURCES[name]
    assert kind in KINDS, name
    assert "shared/" not in text and ".md" not in text, name  # nothing private
    if kind == "assumption":
        assert text.startswith("ASSUMPTION: ") and " because " in text, name
    elif kind == "measured":
        # ours: the file that holds the measurement, and the figure in it
        assert "docs/measured/h200-2026-11-30.txt" in text, name
    elif kind == "published":
        assert re.search(r"github\.com|https?://", text), name
    elif kind == "guide":
        assert "Programming Guide" in text, name
    assert DEFAULT_PRESETS.kind(name) == kind


def test_the_measured_presets_are_the_saved_session_figures():
    saved = (ROOT / "docs" / "measured" / "h200-2026-11-30.txt").read_text()
    assert "fit kernel_floor_s: 1e-06 -> 2.912e-06 (the run's empty-kernel GPU time)" in saved
    assert "fit copy_latency_s: 5e-07 -> 3.232e-06 (the run's 4-byte copy GPU time)" in saved
    assert "nvstage 3901 ns" in saved
    assert "gbs=55.39338491260124" in saved and "peak_gbs=63.01538461538462" in saved
    p = DEFAULT_PRESETS
    assert (p.kernel_floor_s, p.copy_latency_s, p.launch_cost_s) == (2.912e-6, 3.232e-6,
                                                                     3.901e-6)
    assert p.pcie_pinned_efficiency == pytest.approx(55.393 / 63.015)


def test_a_fitted_preset_says_so():
    p = Presets(dram_efficiency=0.5, sources={"dram_efficiency": "fitted from run.json"})
    assert p.kind("dram_efficiency") == "fitted" and p.source("dram_efficiency").startswith(
        "fitted from")
    assert p.to_json()["dram_efficiency"]["kind"] == "fitted"


@pytest.mark.parametrize("gpu", sorted(GPUS))
def test_every_gpu_figure_the_model_reads_has_a_source(gpu):
    g = GPUS[gpu]
    for name in ("sm_count", "memory_bandwidth", "fp32_flops", "pcie_gen", "pcie_width",
                 "boost_clock_mhz", "memory_latency_s"):
        assert g.source(name), (gpu, name)
    lat = g.source("memory_latency_s")
    # measured on this very part, or labelled an assumption
    assert "ASSUMPTION" in lat or {"a100": "A100 80GB"}.get(gpu, "\0") in lat, (gpu, lat)
