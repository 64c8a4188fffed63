"""On a GPU: the bundled workloads pass their checks; serialized wall ~ T; pipelined wall < T.

Skipped with the probe's reason where there is no GPU (tests/conftest.py).
"""

from pathlib import Path

import pytest

from nvstage.run.prepare import load_and_validate

pytestmark = pytest.mark.gpu
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "run"


def _arch():
    from nvstage.run.devices import nvml_gpus

    gpus, _, _ = nvml_gpus()
    return gpus[0].arch if gpus else "sm_90"


def _run(name, mode, reps=5, **kw):
    from nvstage.run.session import run_prepared

    w, prep, _ = load_and_validate(EXAMPLES / f"{name}.toml", _arch())
    return run_prepared(w, prep, mode=mode, reps=reps, warmup=1, **kw)


@pytest.mark.parametrize("name", ["vadd", "saxpy", "multi", "many_launches"])
@pytest.mark.parametrize("mode", ["serialized", "pipelined"])
def test_bundled_workloads_pass_their_checks(name, mode):
    r = _run(name, mode, reps=3)
    assert r.status == "ok", [c.to_json() for c in r.checks]
    assert r.checks and all(c.ok for c in r.checks)
    assert r.load["seconds"] > 0
    d = r.decomposition
    assert d.total.median > 0 and d.wall.median > 0
    for op in d.ops:
        assert op.gpu.median > 0
        if op.kind != "launch":
            assert op.bandwidth_gbs and op.pinned


def test_serialized_wall_matches_T_within_a_few_percent():
    # 64 MiB copies dominate: per-op latencies the three terms do not hold are small.
    d = _run("saxpy", "serialized", reps=7).decomposition
    gap = abs(d.wall.median - d.total.median) / d.total.median
    assert gap < 0.05, (d.wall.median, d.total.median)


def test_pipelined_many_launches_wall_below_T():
    d = _run("many_launches", "pipelined", reps=7).decomposition
    assert d.wall.median < d.total.median, (d.wall.median, d.total.median)
    assert d.overlap.median > 0


def test_noise_floor_is_measured():
    f = _run("vadd", "serialized", reps=2).decomposition.floor
    assert f.empty_kernel_ns and f.empty_kernel_ns > 0
    assert f.smallest_copy_ns and f.smallest_copy_ns > 0
    assert f.host_timer_ns is not None


def test_trace_from_a_real_run(tmp_path):
    import json

    from nvstage.report.trace import chrome_trace

    r = _run("multi", "pipelined", reps=2, timeline=True)
    doc = json.loads(json.dumps(chrome_trace(r.timeline, r.decomposition)))
    flows = [e for e in doc["traceEvents"] if e["ph"] in ("s", "f")]
    assert len(flows) == 2 * 3  # one arrow per launch


def test_faulting_kernel_is_named_and_partial_report_kept(tmp_path):
    """saxpy told n is far larger than its buffers (bypassing validation) must fault. In a
    process of its own: an illegal address is sticky for the whole context, and would fail
    every GPU test run after it in this one."""
    import json
    import subprocess
    import sys

    src = (EXAMPLES / "saxpy.toml").read_text().replace(
        "../../kernels/saxpy.cu", str(ROOT / "kernels" / "saxpy.cu"))
    src = src.replace('args = [{ i32 = "n" }', 'args = [{ i32 = 2000000000, counts = [] }')
    path = tmp_path / "fault.toml"
    path.write_text(src)
    report = tmp_path / "r.json"
    cp = subprocess.run([sys.executable, "-m", "nvstage", "run", str(path), "--profile",
                         "--reps", "1", "--warmup", "0", "--arch", _arch(), "--json",
                         str(report)], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 8, cp.stderr
    assert "Traceback" not in cp.stderr and "saxpy" in cp.stderr
    doc = json.loads(report.read_text())
    assert doc["status"] == "failed" and "saxpy" in doc["error"]["op"]
    assert doc["completed_ops"] >= 2  # the copies in ran
