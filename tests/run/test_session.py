"""The run path's no-GPU side: NoDriver before any cuda.core import; the run document."""

import json
import subprocess
import sys
from pathlib import Path

from nvstage.run.decompose import NoiseFloor, OpSamples, decompose
from nvstage.errors import GpuRunFailed
from nvstage.run.results import SCHEMA, RunResult

ROOT = Path(__file__).resolve().parents[2]


def test_run_prepared_refuses_before_touching_cuda_core():
    code = f"""
import os, sys
os.environ["NVSTAGE_NO_GPU"] = "1"
from nvstage.errors import NoDriver
from nvstage.run.prepare import Prepared
from nvstage.run.workload import Workload
from nvstage.run.session import run_prepared
w = Workload.from_toml({str(ROOT / 'examples/run/saxpy.toml')!r})
try:
    run_prepared(w, Prepared("cubin", b"", "sm_90", None))
except NoDriver as e:
    print("NoDriver", e.exit_code)
print("cuda.core" in sys.modules)
"""
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        timeout=60)
    assert cp.stdout.split() == ["NoDriver", "7", "False"], cp.stderr


def test_run_document_without_a_result():
    from nvstage.run.probe import DriverProbe
    from nvstage.run.document import run_document
    from nvstage.run.prepare import Prepared
    from nvstage.run.workload import Workload

    w = Workload.from_toml(ROOT / "examples/run/vadd.toml")
    doc = run_document(None, w, Prepared("cubin", b"", "sm_90", None),
                       probe=DriverProbe(False, "none"),
                       error=GpuRunFailed("kernel vadd failed", op="kernel vadd").to_json())
    doc = json.loads(json.dumps(doc))
    assert doc["schema"] == SCHEMA == "nvstage.run/1"
    assert doc["status"] == "failed" and doc["error"]["op"] == "kernel vadd"
    assert doc["driver"]["available"] is False and doc["workload"]["name"] == "vadd"


def test_result_json_keeps_partial_figures():
    r = RunResult("w", "serialized", "sm_90", status="failed", completed_ops=3,
                  walls_ns=[10.0, 12.0])
    r.decomposition = decompose([OpSamples(0, "launch", "k", [1.0, 1.0], [5.0, 6.0])],
                                [10.0, 12.0], NoiseFloor(), "serialized")
    d = json.loads(json.dumps(r.to_json()))
    assert d["completed_ops"] == 3 and d["wall_ns"]["median"] == 11.0
    assert d["decomposition"]["total_ns"]["median"] == 6.5
    assert not r.passed
