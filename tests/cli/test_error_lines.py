"""An error with several problems prints each as an error line: the second problem is never
labelled as the hint."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _bad_workload(tmp_path) -> Path:
    bad = tmp_path / "bad.toml"
    bad.write_text((ROOT / "examples" / "run" / "saxpy.toml").read_text()
                   .replace("../../kernels/saxpy.cu", str(ROOT / "kernels" / "saxpy.cu"))
                   .replace('{ i32 = "n" }, { f32 = "a" }', '{ i64 = "n" }, { f64 = "a" }'))
    return bad


def test_each_problem_is_an_error_line(cli, workdir, monkeypatch):
    monkeypatch.setenv("NVSTAGE_NO_GPU", "1")
    bad = _bad_workload(workdir)
    r = cli("run", bad, "--dry-run")
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2, r.stderr
    assert all(line.startswith(f"error: {bad}: [launch[0]] args[") for line in lines)
    assert "argument 0" in lines[0] and "(and 1 more)" in lines[0]
    assert "argument 1" in lines[1] and "f64" in lines[1]
    assert "hint:" not in r.stderr
    # --json - carries them too, apart from the hint
    r = cli("run", bad, "--dry-run", "--json", "-")
    doc = json.loads(r.stdout)
    assert doc["error"] == "ValidationError" and doc["hint"] is None
    assert len(doc["more"]) == 1 and "argument 1" in doc["more"][0]


def test_printing_order_and_plain_lines(capsys):
    from nvstage.errors import UsageError
    from nvstage.report.terminal.console import print_error, print_plain_error

    e = UsageError("first", hint="how to fix it")
    e.more = ("second", "third")
    assert e.explain() == "first\n  error: second\n  error: third\n  hint: how to fix it"
    print_error(e.message, e.hint, e.more)
    print_plain_error(e.message, e.hint, e.more)
    err = capsys.readouterr().err.splitlines()
    want = ["error: first", "error: second", "error: third", "hint: how to fix it"]
    assert err == want + want
    assert "more" not in UsageError("x").to_json()


def test_with_json_an_error_is_said_once(cli, workdir, kernels):
    """--json: the whole error is the JSON document on stdout, and stderr has one line, its
    first (it used to repeat the message, the tool's output, the reproduce line and the
    hint there); without --json, all of it is on stderr and stdout is empty."""
    (workdir / "bad.cu").write_text("__global__ void k(float* x) { x[0] = 1 }\n")
    cases = [("compile", "bad.cu", "-arch=sm_90", "-c"),  # StageFailed: many lines
             ("show", "missing.cubin"),  # InputNotFound, with a hint
             ("diff", "a.nvstage", "b.nvstage"),
             ("run", "missing.toml")]
    for args in cases:
        json_args = ("--json", "-") if args[0] == "run" else ("--json",)
        r = cli(*args, *json_args)
        assert r.exit_code != 0, args
        doc = json.loads(r.stdout)
        assert set(doc) >= {"error", "message", "hint"}, (args, doc)
        assert r.stderr.splitlines() == [f"error: {doc['message'].splitlines()[0]}"], \
            (args, r.stderr)
        plain = cli(*args)
        assert plain.exit_code == r.exit_code and plain.stdout == ""
        assert plain.stderr.startswith(f"error: {doc['message'].splitlines()[0]}")
        if doc["hint"]:
            assert f"hint: {doc['hint']}" in " ".join(plain.stderr.split()) or \
                "hint:" in plain.stderr
