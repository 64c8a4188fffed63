"""nvstage compare through the CLI: every example pair, JSON, SVG, no-GPU measurement."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "model"
EXAMPLES = sorted(p for p in MODEL.glob("*.toml") if not p.name.endswith(".cost.toml"))


def test_unfused_vs_fused(cli):
    r = cli("compare", MODEL / "chain_unfused.toml", MODEL / "chain_fused.toml")
    assert r.exit_code == 0, r.output
    out = r.stdout
    rows: dict[str, list[str]] = {}
    for ln in out.splitlines():  # the table's rows come before the explanation's
        if ln.startswith(("  launches", "  intermediate bytes")):
            rows.setdefault(ln.split("  ")[1].strip(), ln.split())
    assert rows["launches"][-3:] == ["3", "1", "-2"]
    assert rows["intermediate bytes written"][-3:] == ["134217728", "0", "-134217728"]
    assert rows["intermediate bytes read"][-3:] == ["134217728", "0", "-134217728"]
    assert "2 launches removed x 3.90 us launch cost" in out
    assert "verdict: chain_fused vs chain_unfused: too close to call" in out
    assert "verdict without transfers (launch + kernel): chain_fused is faster" in out
    assert "not measured (pass --measure on a machine with a GPU)" in out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_against_the_fused_chain(cli, path):
    r = cli("compare", path, MODEL / "chain_fused.toml", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["verdict"]["basis"] == "estimate"
    assert sum(t["delta_s"] for t in d["difference"]) == pytest.approx(d["delta_total_s"],
                                                                       abs=1e-12)


def test_wide_kernel_registers_and_occupancy(cli, tmp_path):
    svg = tmp_path / "c.svg"
    r = cli("compare", MODEL / "chain_fused.toml", MODEL / "chain_fused_wide.toml", "--svg", svg)
    assert r.exit_code == 0, r.output
    rows = [ln.split() for ln in r.stdout.splitlines() if ln.startswith(("  A ", "  B "))]
    a = next(x for x in rows if x[1] == "fused")
    b = next(x for x in rows if x[1] == "fused_wide")
    assert int(b[2]) > int(a[2]) and a[6] == "100%" and int(b[6].rstrip("%")) <= 50
    assert "registers" in " ".join(b)
    root = ET.fromstring(svg.read_text())
    title = root.find("{http://www.w3.org/2000/svg}title").text
    assert title == "chain_fused vs chain_fused_wide on h200 (estimate)"


def test_measure_without_gpu_is_skipped_with_the_reason(cli, monkeypatch):
    from nvstage.run import probe as driver

    monkeypatch.setenv("NVSTAGE_NO_GPU", "1")
    driver.probe.cache_clear()
    try:
        r = cli("compare", MODEL / "reduce.toml", MODEL / "reduce.toml", "--measure", "--json")
    finally:
        driver.probe.cache_clear()
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["measured"] is None
    assert d["measure_note"] == "not measured: NVSTAGE_NO_GPU is set: GPU use is turned off"


def test_bad_inputs(cli, tmp_path):
    r = cli("compare", MODEL / "chain_fused.toml", tmp_path / "missing.toml")
    assert r.exit_code == 2 and r.stderr.startswith("error: no such workload file")
    r = cli("compare", MODEL / "chain_fused.toml", MODEL / "reduce.toml", "--gpu", "x100")
    assert r.exit_code == 2 and r.stderr.startswith("error: unknown GPU 'x100'")
