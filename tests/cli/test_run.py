"""nvstage run without a GPU: validation first, then one line and a non-zero exit, fast."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "run"


def _nvstage(*args, timeout=120, env_extra=None):
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200", NVSTAGE_NO_GPU="1", **(env_extra or {}))
    t0 = time.monotonic()
    cp = subprocess.run([sys.executable, "-m", "nvstage", *map(str, args)], capture_output=True,
                        text=True, timeout=timeout, env=env, cwd=ROOT)
    return cp, time.monotonic() - t0


def test_no_driver_is_one_line_and_exit_7_and_cannot_hang():
    # The subprocess timeout is the proof: a hang fails the test instead of stalling it.
    cp, seconds = _nvstage("run", EXAMPLES / "saxpy.toml", "--profile", timeout=90)
    assert cp.returncode == 7
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1, cp.stderr
    assert lines[0].startswith("error: cannot run on a GPU:")
    assert "compile, show and the offline tools still work" in lines[0]
    assert cp.stdout == ""
    assert seconds < 60  # one nvcc build of saxpy.cu, then the probe


def test_real_probe_without_driver_also_exits_7():
    from nvstage.run.probe import probe

    if probe().available:
        pytest.skip("this machine has a GPU")
    env = {k: v for k, v in os.environ.items() if k != "NVSTAGE_NO_GPU"}
    cp = subprocess.run([sys.executable, "-m", "nvstage", "run", str(EXAMPLES / "vadd.toml")],
                        capture_output=True, text=True, timeout=90, env=env, cwd=ROOT)
    assert cp.returncode == 7 and len(cp.stderr.strip().splitlines()) == 1
    assert "libcuda" in cp.stderr or "driver" in cp.stderr


def test_validation_errors_come_before_the_driver_check(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text((EXAMPLES / "saxpy.toml").read_text()
                   .replace("../../kernels/saxpy.cu", str(ROOT / "kernels" / "saxpy.cu"))
                   .replace('{ f32 = "a" }', '{ f64 = "a" }'))
    cp, _ = _nvstage("run", bad, "--profile")
    assert cp.returncode == 2, cp.stderr
    assert "kernel saxpy argument 1" in cp.stderr and "8 bytes" in cp.stderr
    assert str(bad) in cp.stderr


def test_malformed_workload_names_file_table_key(tmp_path):
    bad = tmp_path / "w.toml"
    bad.write_text('[kernel]\nsource = "x.cu"\n')
    cp, _ = _nvstage("run", bad)
    assert cp.returncode == 2
    assert f"{bad}: [kernel] source: no such file" in cp.stderr


def test_dry_run_prints_the_plan_without_a_gpu():
    cp, _ = _nvstage("run", EXAMPLES / "multi.toml", "--dry-run")
    assert cp.returncode == 0, cp.stderr
    out = cp.stdout
    assert "launch scale<float> grid=(16384,) block=(256,)" in out
    assert "launch histogram grid=(528,) block=(256,)" in out
    assert "copy bins device -> host, 1024 bytes (pinned)" in out
    assert "valid: 3 launch entries, 9 operations per repetition (no GPU used)" in cp.stderr
    assert "validated for sm_90" in cp.stderr


def test_validate_only_alias_and_bad_mode(cli):
    r = cli("run", EXAMPLES / "saxpy.toml", "--validate-only", "--arch", "sm_80")
    assert r.exit_code == 0 and "launch saxpy" in r.stdout
    r = cli("run", EXAMPLES / "saxpy.toml", "--mode", "eager")
    assert r.exit_code == 2 and "unknown --mode" in r.stderr


def test_help_lists_run(cli):
    r = cli("--help")
    assert r.exit_code == 0 and "run" in r.stdout


def test_json_to_stdout_carries_one_document_plan_or_error():
    import json

    cp, _ = _nvstage("run", EXAMPLES / "multi.toml", "--dry-run", "--json", "-")
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout)  # the whole of stdout: one document, the text went to stderr
    assert doc["schema"] == "nvstage.run-plan/1" and doc["arch"] == "sm_90"
    launches = [op for op in doc["operations"] if op["op"] == "launch"]
    assert [op["kernel"] for op in launches] == ["scale<float>", "block_sum", "histogram"]
    assert launches[0]["args"][1] == {"type": "f32", "value": 3.0}
    assert {"op": "d2h", "buffer": "bins", "bytes": 1024, "host_memory": "pinned"} in \
        doc["operations"]
    assert "launch histogram grid=(528,)" in cp.stderr
    # Without a driver: the error as the document, and still the one line on stderr.
    cp, _ = _nvstage("run", EXAMPLES / "saxpy.toml", "--profile", "--json", "-")
    assert cp.returncode == 7
    assert json.loads(cp.stdout)["error"] == "NoDriver"
    assert len(cp.stderr.strip().splitlines()) == 1
