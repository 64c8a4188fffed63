"""nvstage model through the CLI: every example, JSON, SVG, calibration, bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "model"
EXAMPLES = sorted(p for p in MODEL.glob("*.toml") if not p.name.endswith(".cost.toml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_table_and_json(cli, path):
    r = cli("model", path, "--gpu", "h200")
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith(f"ESTIMATE for {path.stem} on NVIDIA H200")
    assert "T (sequential)" in r.stdout
    assert "decomposition, one repetition (us, estimate)" in r.stdout
    assert "launch_cost_s = 3.901e-06  [host time of one launch through nvstage's engine" \
        in r.stdout
    assert "docs/measured/h200-2026-11-30.txt" in r.stdout and "shared/" not in r.stdout
    assert "bounds per launch (us, estimate)" in r.stdout and "<- limiter" in r.stdout
    r = cli("model", path, "--gpu", "h200", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["label"] == "estimate" and d["total_s"] > 0
    assert d["total_s"] == pytest.approx(d["launch_s"] + d["kernel_s"] + d["transfer_s"])


def test_chain_counts_in_json(cli):
    d = json.loads(cli("model", MODEL / "chain_unfused.toml", "--json").stdout)
    assert d["gpu"]["name"] == "h200"  # the default
    assert (d["launches"], d["kernel_bytes"], d["intermediate_bytes_written"],
            d["intermediate_bytes_read"]) == (3, 469_762_048, 134_217_728, 134_217_728)
    d = json.loads(cli("model", MODEL / "chain_fused_wide.toml", "--json").stdout)
    res = d["per_launch"][0]["resources"]
    assert res["registers"] >= 64 and res["occupancy"] <= 0.5


def test_svg_and_other_gpu(cli, tmp_path):
    out = tmp_path / "m.svg"
    r = cli("model", MODEL / "chain_fused.toml", "--gpu", "l40s", "--svg", out)
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.stderr and "NVIDIA L40S" in r.stdout
    svg = out.read_text()
    assert svg.startswith("<svg") and "chain_fused on l40s (estimate)" in svg


def test_gpu_spec_file(cli, tmp_path):
    spec = tmp_path / "mine.toml"
    spec.write_text('base = "h100"\nname = "h100-slow"\nmemory_bandwidth = 1.0e12\n')
    d = json.loads(cli("model", MODEL / "chain_fused.toml", "--gpu-spec", spec, "--json").stdout)
    assert d["gpu"]["name"] == "h100-slow" and d["gpu"]["memory_bandwidth_Bps"] == 1e12


def test_calibrate_from_a_report(cli, tmp_path, toolkit):
    import importlib.util

    # The made-up report lives with the model's own tests (tests/model/test_estimate.py).
    spec = importlib.util.spec_from_file_location("estimate_tests",
                                                  ROOT / "tests/model/test_estimate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    synthetic_report = mod.synthetic_report

    report = tmp_path / "run.json"
    report.write_text(json.dumps(synthetic_report(MODEL / "chain_unfused.toml", toolkit)))
    r = cli("model", MODEL / "chain_fused.toml", "--calibrate", report)
    assert r.exit_code == 0, r.output
    assert f"calibration from {report}:" in r.stdout
    assert "launch_cost_s: 3.901e-06 -> 5e-06 (+28.2%" in r.stdout
    d = json.loads(cli("model", MODEL / "chain_fused.toml", "--calibrate", report,
                       "--json").stdout)
    ch = {c["name"]: c for c in d["calibration"]["changes"]}
    assert ch["dram_efficiency"]["after"] == pytest.approx(0.8)


def _one_error(r, code=2):
    assert r.exit_code == code, r.output
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("error: ")
    assert len([ln for ln in lines if ln.startswith("error: ")]) == 1
    assert "Traceback" not in r.output
    return lines[0]


def test_unknown_gpu(cli):
    line = _one_error(cli("model", MODEL / "chain_fused.toml", "--gpu", "h300"))
    assert line == "error: unknown GPU 'h300'"


def test_malformed_gpu_spec(cli, tmp_path):
    spec = tmp_path / "bad.json"
    spec.write_text('{"name": "x", "arch": "sm_90", "sm_count": "many"}')
    line = _one_error(cli("model", MODEL / "chain_fused.toml", "--gpu-spec", spec))
    assert "must be an integer" in line or "missing required field" in line
    spec.write_text("{oops")
    assert "not valid JSON" in _one_error(cli("model", MODEL / "chain_fused.toml",
                                              "--gpu-spec", spec))


def test_gpu_without_figures(cli):
    line = _one_error(cli("model", MODEL / "chain_fused.toml", "--gpu", "sm_90"))
    assert "has no sm_count, memory_bandwidth, fp32_flops" in line


def test_workload_without_counts(cli, tmp_path):
    w = tmp_path / "w.toml"
    w.write_text((ROOT / "examples" / "run" / "vadd.toml").read_text().replace(
        "../../kernels/", str(ROOT / "kernels") + "/"))
    r = cli("model", w)
    line = _one_error(r)
    assert "no reads, writes and FLOPs per launch" in line
    assert "w.cost.toml" in r.stderr
    r = cli("model", w, "--json")
    assert r.exit_code == 2 and json.loads(r.stdout)["error"] == "MissingCounts"


def test_both_gpu_options(cli, tmp_path):
    assert "not both" in _one_error(cli("model", MODEL / "chain_fused.toml", "--gpu", "h200",
                                        "--gpu-spec", tmp_path / "x.toml"))
