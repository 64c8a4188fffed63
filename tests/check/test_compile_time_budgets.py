"""Compile-time budgets ([budgets.compile_time], check/compile_time.py): read from the budgets
file, held against nvcc's -fdevice-time-trace files (a trace captured from nvcc 13.5 on
templates.cu for two archs, and one made while check builds a .cu)."""

from __future__ import annotations

import json
import shutil

import pytest

from nvstage.check.budgets import parse_budgets
from nvstage.check.compile_time import KEYS, over_budget
from nvstage.errors import BudgetConfigError
from nvstage.inspect.compile_time import summarize

from tests.conftest import DATA

TRACE = DATA / "compile_time" / "templates_two_archs.json"


def test_keys_are_read():
    b = parse_budgets({"budgets": {"compile_time": {"max_header_seconds": 0.5,
                                                    "max_template_set_count": 10}}})
    assert b.compile_time == {"max_header_seconds": 0.5, "max_template_set_count": 10}
    assert parse_budgets({"budgets": {}}).compile_time == {}


@pytest.mark.parametrize("table, said", [
    ({"max_headers": 1}, "compile_time.max_headers: unknown key"),
    ({"max_template_set_count": 1.5}, "a whole number"),
    ({"max_header_seconds": -1}, "from 0 to 1e18"),
    ({"max_header_seconds": "1"}, "a number"),
])
def test_bad_keys_are_one_line(table, said):
    with pytest.raises(BudgetConfigError) as e:
        parse_budgets({"budgets": {"compile_time": table}}, path="b.toml")
    assert said in e.value.message and "\n" not in e.value.message


def test_compile_time_must_be_a_table():
    with pytest.raises(BudgetConfigError, match="compile_time must be a table"):
        parse_budgets({"budgets": {"compile_time": 3}})


def test_every_key_is_held():
    s = summarize([TRACE])
    limits = {k: 0 for k in KEYS}
    broken, checked = over_budget(s, limits)
    assert {o.metric for o in broken} == {
        "unit_seconds", "front_end_seconds", "header_seconds", "template_set_seconds",
        "template_set_count", "function_seconds"}
    assert checked == 2 + len(s.headers) + 2 * len(s.template_sets) + len(s.nvvm)
    # A header's verdict: measured, summed over the arch passes, with its include chain.
    head = next(o for o in broken if o.what.endswith("/cuda_runtime.h"))
    assert "measured by this build's traces" in head.message
    assert "2 parse(s) by 1 unit(s) over 2 arch passes" in head.message
    assert "included from templates.cu" in head.message and head.file == "templates.cu"
    # A template set's verdict names the unit that instantiated it most, for --format github.
    tset = next(o for o in broken if o.metric == "template_set_count")
    assert tset.file == "templates.cu" and "most in templates.cu" in tset.message


def test_within_budget_passes():
    broken, checked = over_budget(summarize([TRACE]), {"max_header_seconds": 1e6,
                                                       "max_template_set_count": 10**6})
    assert broken == [] and checked > 0


def test_check_traces_the_cu_it_builds(cli, kernels, tmp_path):
    shutil.copy(kernels / "templates.cu", tmp_path)
    cfg = tmp_path / "b.toml"
    cfg.write_text("[budgets.compile_time]\nmax_header_seconds = 0.000001\n")
    r = cli("check", tmp_path / "templates.cu", "--config", cfg, "--format", "github")
    assert r.exit_code == 1
    assert "title=nvstage check%3A header_seconds::header " in r.stdout
    assert "cuda_runtime.h took" in r.stdout


def test_check_reads_given_traces(cli, kernels, tmp_path):
    shutil.copy(kernels / "templates.cu", tmp_path)
    cfg = tmp_path / "b.toml"
    cfg.write_text("[budgets]\nmax_registers = 255\n[budgets.compile_time]\n"
                   "max_template_set_count = 100000\n")
    r = cli("check", tmp_path / "templates.cu", "--config", cfg, "--time-trace", TRACE)
    assert r.exit_code == 0, r.output
    r = cli("check", tmp_path / "templates.cu", "--config", cfg, "--time-trace",
            tmp_path / "empty")
    assert r.exit_code == 0
    assert "compile-time budgets not checked: no nvcc time trace" in r.output


def test_regressions_against_a_baseline(cli, kernels, tmp_path):
    # An earlier build's traces as the baseline: a header edit that adds 200 instantiations
    # fails (the set added, the header's work and time grown beyond the noise the two
    # unchanged units show); the same traces again pass.
    from tests.inspect.test_compile_time_diff import _build, _in_header

    _build(tmp_path / "before", extra={"a": _in_header(10**8, 100, 0)})
    _build(tmp_path / "after", scale={"b": 1.05},
           extra={"a": _in_header(10**8, 4_000_000, 200)})  # after every other event
    shutil.copy(kernels / "templates.cu", tmp_path)
    cfg = tmp_path / "b.toml"
    cfg.write_text("[budgets]\nmax_registers = 255\n")
    base = ("check", tmp_path / "templates.cu", "--config", cfg, "--time-baseline",
            tmp_path / "before", "--time-trace")
    r = cli(*base, tmp_path / "after", "--json")
    assert r.exit_code == 1, r.output
    broken = {v["metric"]: v for v in json.loads(r.stdout)["violations"]}
    # (the unit's front end did not grow: the header was put outside its span)
    assert {"template-set_regression", "header_regression"} == set(broken)
    head = broken["header_regression"]
    assert head["against"] == "baseline" and "work inst 0->200" in head["message"]
    assert "measured from 2 units that did the same work" in head["message"]
    r = cli(*base, tmp_path / "before")
    assert r.exit_code == 0, r.output
