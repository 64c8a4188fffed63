"""nvstage run --dry-run with the options that write files: the plan goes to --json FILE;
--trace and --svg draw measurements a dry run never makes, so they are refused in one line
naming the option. Never exit 0 having written nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "run"


def test_dry_run_json_file_holds_the_plan(cli, workdir, monkeypatch):
    monkeypatch.setenv("NVSTAGE_NO_GPU", "1")
    r = cli("run", EXAMPLES / "saxpy.toml", "--dry-run", "--json", "plan.json")
    assert r.exit_code == 0, r.output
    plan = json.loads((workdir / "plan.json").read_text())
    assert plan["schema"] == "nvstage.run-plan/1" and plan["workload"] == "saxpy"
    assert "wrote plan.json" in r.stderr
    # the same document as --json - prints
    r2 = cli("run", EXAMPLES / "saxpy.toml", "--dry-run", "--json", "-")
    assert json.loads(r2.stdout) == plan


@pytest.mark.parametrize("option", ["--trace", "--svg"])
def test_dry_run_refuses_what_needs_measurements(cli, workdir, monkeypatch, option):
    monkeypatch.setenv("NVSTAGE_NO_GPU", "1")
    for extra in ((), ("--profile",)):
        r = cli("run", EXAMPLES / "saxpy.toml", "--dry-run", *extra, option, "out.file")
        assert r.exit_code == 2, r.output
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: {option} ")
        assert "--dry-run" in lines[0] and "--profile" in lines[0]
        assert not (workdir / "out.file").exists() and r.stdout == ""
