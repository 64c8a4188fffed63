"""The run document read back (nvstage.run.document): what the writer wrote, typed; anything
else read as absent, never a crash; what is not a run document refused."""

import json
import math
from pathlib import Path

import pytest

from nvstage.errors import ArtifactError, CalibrationError
from nvstage.run.decompose import NoiseFloor, OpSamples, decompose
from nvstage.run.document import RunReport, load_run_report, run_document
from nvstage.run.prepare import Prepared
from nvstage.run.probe import DriverProbe
from nvstage.run.results import RunResult
from nvstage.run.workload import Workload

ROOT = Path(__file__).resolve().parents[2]


def _written() -> tuple[dict, object]:
    """A document as nvstage run --profile --json writes it, from fixed samples (no GPU)."""
    ops = [OpSamples(0, "h2d", "x", host_ns=[900.0, 950.0], gpu_ns=[4000.0, 4200.0],
                     nbytes=1 << 20),
           OpSamples(1, "launch", "vadd", host_ns=[3000.0, 3100.0],
                     gpu_ns=[12000.0, 12500.0]),
           OpSamples(2, "d2h", "c", host_ns=[800.0, 820.0], gpu_ns=[4100.0, 4000.0],
                     nbytes=1 << 20, pinned=False)]
    dec = decompose(ops, [25000.0, 26000.0], NoiseFloor(500.0, 2500.0, 1500.0, 40.0),
                    "serialized")
    w = Workload.from_toml(ROOT / "examples/run/vadd.toml")
    result = RunResult("vadd", "serialized", "sm_90", device={"name": "test device"},
                       decomposition=dec)
    doc = run_document(result, w, Prepared("cubin", b"", "sm_90", None),
                       probe=DriverProbe(False, "none"))
    return json.loads(json.dumps(doc)), dec


def test_reads_back_what_the_writer_wrote():
    doc, dec = _written()
    r = RunReport.from_json(doc)
    assert (r.schema, r.workload, r.arch, r.mode, r.status, r.device) == \
        ("nvstage.run/1", "vadd", "sm_90", "serialized", "ok", "test device")
    assert r.workload_file == str(ROOT / "examples/run/vadd.toml")
    d = r.decomposition
    assert d.medians_ns["launch"] == dec.launch.median
    assert d.medians_ns["total"] == dec.total.median and d.medians_ns["wall"] == dec.wall.median
    assert (d.empty_kernel_ns, d.smallest_copy_ns) == (2500.0, 1500.0)
    assert [(o.index, o.kind, o.name, o.nbytes, o.pinned) for o in d.operations] == [
        (0, "h2d", "x", 1 << 20, True), (1, "launch", "vadd", 0, True),
        (2, "d2h", "c", 1 << 20, False)]
    assert d.operations[1].gpu_ns == dec.ops[1].gpu.median
    assert d.operations[1].host_ns == dec.ops[1].host.median


def test_a_failed_run_without_figures():
    w = Workload.from_toml(ROOT / "examples/run/vadd.toml")
    doc = run_document(None, w, Prepared("cubin", b"", "sm_90", None),
                       probe=DriverProbe(False, "none"), error={"op": "kernel vadd"})
    r = RunReport.from_json(json.loads(json.dumps(doc)))
    assert r.status == "failed" and r.decomposition is None and r.device is None


@pytest.mark.parametrize("bad", [
    None, 7, "x", [1], {"median": "1"}, {"median": True}, {"median": float("nan")},
    {"median": float("inf")}, {"median": 10**400},
])
def test_every_wrong_field_reads_as_absent(bad):
    op = {k: bad for k in ("index", "kind", "name", "host_ns", "gpu_ns", "bytes", "pinned",
                           "flags")}
    doc = {"schema": "nvstage.run/1", "workload": bad, "arch": bad, "mode": bad,
           "status": bad, "device": bad, "decomposition": {
               "launch_ns": bad, "wall_ns": bad, "noise_floor": bad, "flags": bad,
               "operations": [None, 7, "x", [1], op]}}
    r = RunReport.from_json(doc)
    assert r.workload in (None, "x") and r.device is None
    d = r.decomposition
    assert d.medians_ns == {} and d.empty_kernel_ns is None
    (op,) = d.operations  # the entries that are not tables are dropped
    assert op.host_ns is None and op.gpu_ns is None and op.pinned is True
    assert op.nbytes == (7 if bad == 7 else 0)
    assert all(isinstance(f, str) for f in d.flags + op.flags)
    assert op.index == (7 if bad == 7 else None) and op.kind in (None, "x")


def test_a_negative_time_reads_as_absent_and_the_chart_still_draws():
    """A crafted report's negative kernel median (hypothesis found it) failed the HTML page's
    bar chart; a time below zero is no time, while the overlap credit may be negative."""
    from nvstage.report.run_charts import decomposition_svg

    doc, _ = _written()
    doc["decomposition"]["kernel_ns"]["median"] = -5.0
    doc["decomposition"]["overlap_ns"] = {"median": -300.0}
    d = RunReport.from_json(doc).decomposition
    assert "kernel" not in d.medians_ns and d.medians_ns["overlap"] == -300.0
    assert decomposition_svg(doc).startswith("<svg")


def test_the_early_nested_layout_reads_the_same():
    doc, _ = _written()
    nested = {"schema": doc["schema"], "run": {"decomposition": doc["decomposition"],
                                               "device": doc["device"]}}
    a, b = RunReport.from_json(doc), RunReport.from_json(nested)
    assert a.decomposition == b.decomposition and a.device == b.device


def test_load_refuses_what_is_not_a_run_document(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"schema": "nvstage.check/1"}')
    with pytest.raises(ArtifactError, match="is not a run report: schema 'nvstage.check/1'"):
        load_run_report(p)
    with pytest.raises(CalibrationError, match="is not a run document"):
        load_run_report(p, "run document", CalibrationError)
    doc, _ = _written()
    p.write_text(json.dumps(doc))
    r = load_run_report(p)
    assert r.decomposition.medians_ns["kernel"] > 0 and load_run_report(r) is r
    assert all(math.isfinite(v) for v in r.decomposition.medians_ns.values())
