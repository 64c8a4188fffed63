"""report.bars: a valid, labelled SVG of the decomposition as stacked bars."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from nvstage.report.bars import Bar, bar_from_decomposition, bars_svg
from nvstage.report.units import fmt_time

NS = "{http://www.w3.org/2000/svg}"


def _texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return ["".join(t.itertext()) for t in root.iter(f"{NS}text")]


def test_valid_svg_with_title_legend_labels_and_totals():
    bars = [Bar("unfused", {"launch": 9e-6, "kernel": 110e-6, "transfer": 20e-6},
                marker=130e-6, marker_label="pipelined"),
            Bar("fused", {"launch": 3e-6, "kernel": 47e-6, "transfer": 20e-6})]
    svg = bars_svg(bars, title="chain", subtitle="every figure an estimate")
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    assert root.find(f"{NS}title").text == "chain (estimate)"
    texts = _texts(svg)
    assert "chain (estimate)" in texts
    for label in ("sum launch (host)", "sum kernel (GPU)", "sum transfer (GPU)", "unfused",
                  "fused", "T 139 us", "T 70 us"):
        assert label in texts, label
    assert texts.count("estimate") == 2  # under each bar's name
    assert any("pipelined 130 us" in t for t in texts)
    # 3 legend swatches + 3 + 3 segments, plus the background
    assert len(root.findall(f"{NS}rect")) == 1 + 3 + 6


def test_measured_and_estimated_bars_say_which_they_are():
    from nvstage.run.decompose import NoiseFloor, OpSamples, decompose

    ops = [OpSamples(0, "h2d", "x", [1000.0] * 3, [4000.0, 4100.0, 3900.0], nbytes=1 << 20),
           OpSamples(1, "launch", "k", [3000.0] * 3, [2000.0] * 3)]
    d = decompose(ops, [8000.0] * 3, NoiseFloor(), "serialized")
    svg = bars_svg([Bar("w", {"launch": 3e-6, "kernel": 2e-6, "transfer": 4e-6}),
                    bar_from_decomposition(d, "w")], title="w")
    texts = _texts(svg)
    assert "w (estimate and measured)" in texts
    assert "measured" in texts and "estimate" in texts
    assert any("wall 8 us" in t for t in texts)


def test_a_dominant_term_gets_a_detail_panel():
    bars = [Bar("copy-heavy", {"launch": 3e-6, "kernel": 5e-6, "transfer": 10e-3})]
    texts = _texts(bars_svg(bars, title="t"))
    assert any(t.startswith("without transfer, on its own scale") for t in texts)
    texts = _texts(bars_svg([Bar("even", {"launch": 1e-6, "kernel": 1e-6, "transfer": 1e-6})],
                            title="t"))
    assert not any(t.startswith("without") for t in texts)


def test_text_is_escaped():
    svg = bars_svg([Bar("a<b>&c", {"kernel": 1e-6})], title="x & y")
    ET.fromstring(svg)
    assert "a&lt;b&gt;&amp;c" in svg


def test_bad_bars():
    with pytest.raises(ValueError, match="no bars"):
        bars_svg([], title="t")
    with pytest.raises(ValueError, match="negative"):
        Bar("a", {"kernel": -1.0})
    with pytest.raises(ValueError, match="unknown term"):
        Bar("a", {"wall": 1.0})
    with pytest.raises(ValueError, match="kind"):
        Bar("a", {"kernel": 1.0}, kind="guess")


def test_times_to_three_figures():
    assert [fmt_time(s, significant=3) for s in (0, 5e-9, 3.1e-6, 4.04e-3, 2.5)] == [
        "0", "5 ns", "3.1 us", "4.04 ms", "2.5 s"]


@pytest.mark.skipif(not shutil.which("rsvg-convert"), reason="rsvg-convert not installed")
def test_renders_with_rsvg(tmp_path):
    p = tmp_path / "b.svg"
    p.write_text(bars_svg([Bar("w", {"launch": 3e-6, "kernel": 2e-6, "transfer": 4e-3})],
                          title="w"))
    cp = subprocess.run(["rsvg-convert", str(p), "-o", str(tmp_path / "b.png")],
                        capture_output=True, text=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    assert (tmp_path / "b.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
