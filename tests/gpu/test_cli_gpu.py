"""On a GPU: the CLI end to end with --json and --trace."""

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "run"


def test_run_profile_writes_json_and_trace(cli, tmp_path):
    j, t = tmp_path / "run.json", tmp_path / "trace.json"
    r = cli("run", EXAMPLES / "vadd.toml", "--profile", "--reps", "3", "--json", j,
            "--trace", t)
    assert r.exit_code == 0, r.stdout + r.stderr
    assert "check c: pass" in r.stdout and "overlap = T - wall" in r.stdout
    doc = json.loads(j.read_text())
    assert doc["schema"] == "nvstage.run/1" and doc["status"] == "ok"
    assert doc["device"]["sm_count"] and doc["driver"]["available"]
    assert doc["decomposition"]["total_ns"]["median"] > 0
    trace = json.loads(t.read_text())
    assert trace["traceEvents"]
