"""nvstage diff through the CLI."""

from __future__ import annotations

import json
from pathlib import Path


def test_diff_two_builds(cli, built):
    _, b = built
    r = cli("diff", b["spill"].keep_dir, Path(b["spill16"].keep_dir) / "stages.json", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    (k,) = doc["kernels"]
    assert k["key"] == "spill (sm_90)"
    assert k["delta"]["registers"] < 0 and k["delta"]["spill_stores"] > 0
    assert k["a"]["instructions"] > 0 and k["b"]["cubin_size"] > 0
    assert {s["key"] for s in doc["stages"]} >= {"cicc (compute_90)", "ptxas (sm_90)"}
    text = cli("diff", b["spill"].keep_dir, b["spill16"].keep_dir).stdout
    assert "spill (sm_90)" in text and "ptxas (sm_90)" in text


def test_diff_usage_errors(cli, built, tmp_path):
    _, b = built
    r = cli("diff", b["spill"].keep_dir)
    assert r.exit_code == 2 and "two builds" in r.stderr
    r = cli("diff", "x.cu", "--via", "nvcc,clang", "--arch", "sm_90")
    assert r.exit_code == 2 and "nvcc,nvrtc" in r.stderr
    r = cli("diff", "x.cu", "--via", "nvcc,nvrtc")
    assert r.exit_code == 2 and "--arch" in r.stderr
    r = cli("diff", tmp_path, b["spill"].keep_dir)
    assert r.exit_code == 2 and "no build manifest" in r.stderr and "Traceback" not in r.output


def test_diff_via_two_sources_shows_lto_cutting_registers(cli, kernels, workdir):
    r = cli("diff", kernels / "lto_a.cu", kernels / "lto_b.cu", "--via", "nvcc,nvrtc",
            "--arch", "sm_90", "--lto", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    regs = {p["name"]: p["kernels"][0]["registers"] for p in doc["paths"]}
    assert regs["nvrtc+lto"] < regs["nvrtc+nvjitlink"]
    assert any("lto_apply" in d for d in doc["resource_differences"])
