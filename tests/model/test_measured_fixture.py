"""The frozen H200 figures (tests/data/measured/h200-2026-11-30.json): the arithmetic that backs
them out of the saved percentages holds, and the two back-outs of each term agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "measured" / "h200-2026-11-30.json"
SUMMARY = Path(__file__).resolve().parents[2] / "docs" / "measured" / "h200-2026-11-30.txt"


@pytest.fixture(scope="module")
def frozen() -> dict:
    return json.loads(FIXTURE.read_text())


def test_every_figure_is_the_estimate_over_one_plus_the_saved_error(frozen):
    for name, w in frozen["workloads"].items():
        for term, rows in w["terms"].items():
            for label, r in rows.items():
                backed = r["estimate_us"] / (1 + r["error_pct"] / 100)
                assert r["measured_us"] == pytest.approx(backed, abs=0.006), (name, term, label)
            assert w["measured_us"][term] == rows["default"]["measured_us"]


def test_the_default_and_fitted_back_outs_agree_within_the_rounding(frozen):
    # error_pct is printed to 0.1: each back-out is good to 0.05 / (100 + error) relative
    for name, w in frozen["workloads"].items():
        for term, rows in w["terms"].items():
            d, f = rows["default"], rows["fit"]
            tol = sum(0.05 / (100 + r["error_pct"]) for r in (d, f)) + 0.01 / d["measured_us"]
            assert abs(d["measured_us"] - f["measured_us"]) / d["measured_us"] <= tol, (
                name, term, d, f)


def test_the_errors_are_the_saved_summary_table(frozen):
    rows = {}
    for line in SUMMARY.read_text().splitlines():
        parts = line.split()
        if len(parts) == 7 and parts[0] in frozen["workloads"]:
            rows[(parts[0], "default" if parts[1] == "default" else "fit")] = [
                float(p.rstrip("%")) for p in parts[2:6]]
    assert len(rows) == 2 * len(frozen["workloads"]) == 12
    for name, w in frozen["workloads"].items():
        for label in ("default", "fit"):
            got = [w["terms"][t][label]["error_pct"] for t in ("launch", "kernel", "transfer",
                                                                "total")]
            assert got == rows[(name, label)], (name, label)


def test_the_kernel_sums_are_the_issues_figures(frozen):
    # issue 25: "about: chain_unfused 171 us, chain_fused 64 us, chain_fused_wide 57 us,
    # reduce 35 us, matmul_tiled 243 us"
    got = {n: round(w["measured_us"]["kernel"]) for n, w in frozen["workloads"].items()}
    assert got == {"chain_unfused": 171, "chain_fused": 64, "chain_fused_wide": 57,
                   "reduce": 35, "matmul_tiled": 243, "transfer": 3}
