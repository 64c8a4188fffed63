"""The model against measurements, offline: the frozen H200 figures of 2026-11-30 today, and
every raw run report a device session saved under docs/measured/ (none yet: that session kept
a summary only). The issue's targets (25): the kernel term within 30% with the default presets,
within 25% after fitting on chain_unfused alone; compare picks the measured winners."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvstage.hw.gpus import GPUS
from nvstage.model.measured import load_frozen, load_profiles, validate

ROOT = Path(__file__).resolve().parents[2]
FROZEN = ROOT / "tests" / "data" / "measured" / "h200-2026-11-30.json"
MEASURED = ROOT / "docs" / "measured"
MODEL = ROOT / "examples" / "model"
WORKLOADS = {p.stem: p for p in MODEL.glob("*.toml") if not p.stem.endswith(".cost")}


@pytest.fixture(scope="module")
def frozen_rows(toolkit):
    measured, fitted = load_frozen(FROZEN)
    return validate(measured, WORKLOADS, GPUS["h200"], fit_on="chain_unfused", fitted=fitted,
                    toolkit=toolkit)


def test_the_frozen_build_is_the_one_estimated(frozen_rows):
    """The H200 session built with CUDA 13.0.88; the fixture keeps its registers. The build
    here must have the same, or the estimates are not of the measured code."""
    import json

    doc = json.loads(FROZEN.read_text())
    for r in frozen_rows:
        kept = [k["registers"] for k in doc["workloads"][r.workload]["kernels"]]
        assert [x.facts.registers for x in r.estimate.launches] == kept, r.workload


def test_default_presets_within_30_percent_on_the_kernel_term(frozen_rows):
    errs = {r.workload: r.errors["kernel"] for r in frozen_rows if r.presets == "default"}
    assert set(errs) == {"chain_unfused", "chain_fused", "chain_fused_wide", "reduce",
                         "matmul_tiled", "transfer"}
    bad = {n: f"{e:+.1%}" for n, e in errs.items() if abs(e) > 0.30}
    assert not bad


def test_fitted_on_chain_unfused_the_others_within_25_percent(frozen_rows):
    errs = {r.workload: r.errors["kernel"] for r in frozen_rows
            if r.presets == "fit:chain_unfused" and r.workload != "chain_unfused"}
    assert len(errs) == 5
    bad = {n: f"{e:+.1%}" for n, e in errs.items() if abs(e) > 0.25}
    assert not bad
    fit = next(r for r in frozen_rows if r.presets == "fit:chain_unfused")
    assert "kernel sum" in fit.estimate.presets.source("dram_efficiency")


def test_the_limiters_named(frozen_rows):
    lim = {r.workload: [x.limiter for x in r.estimate.launches] for r in frozen_rows
           if r.presets == "default"}
    assert lim == {"chain_unfused": ["DRAM bandwidth"] * 3, "chain_fused": ["DRAM bandwidth"],
                   "chain_fused_wide": ["DRAM bandwidth"],
                   "reduce": ["memory latency", "launch floor"],
                   "matmul_tiled": ["shared memory"], "transfer": ["launch floor"]}


@pytest.mark.parametrize("presets", ["default", "fit:chain_unfused"])
def test_compare_picks_the_measured_winners(toolkit, presets, frozen_rows):
    """chain_fused_wide beat chain_fused (about 57 against 64 us) and chain_fused beat
    chain_unfused: compare says so, decisively, and names each kernel's limiter."""
    from nvstage.model.compare import compare

    p = next(r for r in frozen_rows if r.presets == presets).estimate.presets
    wide = compare(MODEL / "chain_fused.toml", MODEL / "chain_fused_wide.toml", GPUS["h200"],
                   calibration=p, toolkit=toolkit)
    assert wide.device_verdict.word == "faster"
    fused = compare(MODEL / "chain_unfused.toml", MODEL / "chain_fused.toml", GPUS["h200"],
                    calibration=p, toolkit=toolkit)
    assert fused.device_verdict.word == "faster"
    names = [k["limiter"] for side in ("a", "b") for k in wide.to_json()[side][
        "kernels_explained"]]
    assert names == ["DRAM bandwidth", "DRAM bandwidth"]


def _profiles():
    found = load_profiles(MEASURED) if MEASURED.is_dir() else {}
    return sorted(n for n in found if n in WORKLOADS)


@pytest.mark.parametrize("name", _profiles() or [None])
def test_raw_profiles_saved_under_docs_measured(name, toolkit):
    """Per workload and per kernel, against what a device session saved
    (scripts/device_session.sh packs every run --profile report as
    docs/measured/GPU-DATE/NAME.run.json)."""
    if name is None:
        pytest.skip("no raw run --profile reports under docs/measured/ yet: the frozen "
                    "figures above stand in for them")
    from nvstage.model.estimate import estimate
    from nvstage.model.measured import term_errors

    m = load_profiles(MEASURED)[name]
    gpu = m.gpu()
    if gpu is None:
        pytest.skip(f"{m.source}: measured on {m.device!r}, no preset of that name")
    e = estimate(WORKLOADS[name], gpu, toolkit=toolkit)
    assert abs(term_errors(e, m)["kernel"]) <= 0.30, (name, term_errors(e, m))
    if m.launches_s:  # per kernel too, where the report lists its launches
        order = [li for kind, _, li in e_operations(WORKLOADS[name]) if kind == "launch"]
        by_index = {x.index: x for x in e.launches}
        for k, t in m.launches_s.items():
            x = by_index[order[k]]
            assert abs(x.t_kernel_s / t - 1) <= 0.30 or t < 2 * x.bounds.time("launch floor"), (
                name, x.kernel, x.t_kernel_s, t)


def e_operations(path):
    from nvstage.model.costfile import load_model_input

    return load_model_input(path)[0].operations()


def test_fitting_on_a_workload_not_measured_is_one_error(toolkit):
    from nvstage.errors import CalibrationError

    measured, fitted = load_frozen(FROZEN)
    with pytest.raises(CalibrationError, match="no measurement of fma_chain to fit on"):
        validate(measured, WORKLOADS, GPUS["h200"], fit_on="fma_chain", fitted=fitted,
                 toolkit=toolkit)


def _fixture(tmp_path, workloads) -> Path:
    import json

    p = tmp_path / "frozen.json"
    p.write_text(json.dumps({"schema": "nvstage.measured-fixture/1", "workloads": workloads}))
    return p


def test_a_fixture_whose_workloads_are_no_table_is_one_error(tmp_path):
    """``"workloads": [1, 2]`` was an AttributeError traceback."""
    from nvstage.errors import CalibrationError

    with pytest.raises(CalibrationError, match="workloads are a JSON list"):
        load_frozen(_fixture(tmp_path, [1, 2]))


def test_a_figure_that_is_zero_seconds_is_no_figure(tmp_path):
    """1e-320 us is positive, but 0.0 s once scaled: the errors then divided by zero."""
    measured, _ = load_frozen(_fixture(tmp_path, {"x": {"measured_us": {"kernel": 1e-320,
                                                                        "launch": 2.0}}}))
    assert measured["x"].terms_s == {"launch": 2e-6}


def test_a_report_linked_from_outside_the_folder_is_refused(tmp_path):
    """A measured folder is a document: a ``*.run.json`` link to a file elsewhere (here the
    frozen fixture) was read as if it were one of its reports."""
    from nvstage.errors import CalibrationError

    folder = tmp_path / "measured"
    folder.mkdir()
    (folder / "x.run.json").symlink_to(FROZEN)
    with pytest.raises(CalibrationError, match="leads out of"):
        load_profiles(folder)
