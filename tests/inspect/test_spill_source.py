"""A spill figure labelled ptxas's is ptxas's (issue 44, item 4): show, its --json and check.

tests/data/spill_subroutines.cu's online_max_sum (in the shape of llm.c's
softmax_forward_online_kernel1) at -maxrregcount=24 on sm_90: ptxas -v says 56 bytes of spill
stores and 44 of loads; its fp64 division routine, placed after the kernel in its section,
spills 8 and 12 more, which ptxas -v leaves out (show said 64/56 and check 120 before).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

SOURCE = Path(__file__).parents[1] / "data" / "spill_subroutines.cu"
KERNEL = "online_max_sum"


@pytest.fixture(scope="module")
def builds(toolkit, tmp_path_factory):
    """Two keep folders of one build: plain, and with the user's own -Xptxas -v."""
    from nvstage.compiler.nvcc.options import CompileOptions
    from nvstage.compiler.pipeline.driver import compile

    out = {}
    for name, extra in (("plain", ()), ("verbose", ("-Xptxas", "-v"))):
        keep = tmp_path_factory.mktemp(name)
        out[name] = compile(SOURCE, CompileOptions(
            archs=("sm_90",), maxrregcount=24, stop="cubin", extra=extra,
            output=str(keep / "spills.cubin")), toolkit=toolkit, keep=keep, jobs=1)
    return out


def _row(cli, build) -> dict:
    r = cli("show", build.keep_dir, "--sections", "resources", "--json")
    assert r.exit_code == 0, r.output
    rows = json.loads(r.stdout)["resources"]
    return next(x for x in rows if KERNEL in x["demangled"])


def test_show_gives_ptxas_figures_from_the_cubin(cli, builds):
    row = _row(cli, builds["plain"])
    assert (row["spill_stores"], row["spill_loads"]) == (56, 44)
    assert row["spill_source"] == "cubin"
    assert (row["subroutine_spill_stores"], row["subroutine_spill_loads"]) == (8, 12)


def test_the_builds_own_report_is_the_figure(cli, builds):
    row = _row(cli, builds["verbose"])
    assert (row["spill_stores"], row["spill_loads"]) == (56, 44)
    assert row["spill_source"] == "ptxas -v"


def test_the_table_says_where_spills_come_from(cli, builds):
    r = cli("show", builds["plain"].keep_dir, "--sections", "resources")
    assert r.exit_code == 0, r.output
    assert "56/44 SPILLS" in r.stdout
    assert "spill st/ld (cubin): ptxas -v's figures" in r.stdout
    assert "spill 8 bytes stored, 12 loaded more" in " ".join(r.stderr.split())


def test_check_no_spills_counts_ptxas_bytes(cli, builds, workdir):
    cfg = workdir / "budgets.toml"
    cfg.write_text("[budgets]\nno_spills = true\n")
    r = cli("check", builds["plain"].keep_dir, "--config", cfg, "--json")
    assert r.exit_code == 1
    (v,) = [v for v in json.loads(r.stdout)["violations"] if KERNEL in v["kernel"]]
    assert v["value"] == 100  # 56 + 44, not 120
    assert "spills 100 bytes (stores + loads, ptxas -v's figures)" in v["message"]
