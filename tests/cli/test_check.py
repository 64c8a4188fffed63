"""nvstage check through the CLI: real builds, exit codes, every output format, baselines."""

from __future__ import annotations

import json

import pytest

CONFIG = """
[tool.nvstage.compile]
gencodes = ["arch=compute_80,code=sm_80", "arch=compute_90,code=[sm_90,compute_90]"]
defines = ["ACC=4"]

[tool.nvstage.budgets]
max_registers = 32
no_spills = true
required_arches = ["sm_80", "sm_90"]
"""


def _config(path, *, defines="ACC=4", extra=""):
    path.write_text(CONFIG.replace('"ACC=4"', f'"{defines}"') + extra)
    return path


@pytest.fixture(scope="module")
def kept(toolkit, kernels, tmp_path_factory):
    """One build within budget, kept, for the checks that read a keep folder."""
    from nvstage.compiler.nvcc.options import CompileOptions
    from nvstage.compiler.pipeline.driver import compile

    keep = tmp_path_factory.mktemp("kept")
    return compile(kernels / "budget_acc.cu", CompileOptions(
        gencodes=("arch=compute_80,code=sm_80", "arch=compute_90,code=[sm_90,compute_90]"),
        defines=("ACC=4",), stop="fatbin", output=str(keep / "budget_acc.fatbin")),
        toolkit=toolkit, keep=keep, jobs=1)


def test_source_within_budget_passes(cli, workdir, kernels):
    cfg = _config(workdir / "budgets.toml")
    r = cli("check", kernels / "budget_acc.cu", "--config", cfg)
    assert r.exit_code == 0, r.output
    assert "budget_acc" in r.stdout and "sm_80" in r.stdout
    assert "nvstage check passed" in r.stderr
    assert not list(workdir.glob("*.fatbin")), "the build's output stays in its own folder"


def test_more_registers_fail_with_kernel_named(cli, workdir, kernels):
    cfg = _config(workdir / "budgets.toml", defines="ACC=32")
    r = cli("check", kernels / "budget_acc.cu", "--config", cfg)
    assert r.exit_code == 1
    assert "FAIL" in r.stdout and "budget_acc (sm_90) uses" in r.stdout
    assert "registers; the budget is 32" in r.stdout
    assert "nvstage check failed: 2 violations" in r.stderr


def test_spills_fail_in_json(cli, workdir, kernels):
    cfg = workdir / "pyproject.toml"
    cfg.write_text('[project]\nname = "k"\n[tool.nvstage.compile]\narchs = ["sm_90"]\n'
                   "maxrregcount = 16\n[tool.nvstage.budgets]\nno_spills = true\n")
    r = cli("check", kernels / "spill.cu", "--json")  # finds ./pyproject.toml itself
    assert r.exit_code == 1
    doc = json.loads(r.stdout)
    assert doc["schema"] == "nvstage.check/1" and doc["passed"] is False
    (v,) = doc["violations"]
    assert v["kernel"] == "spill" and v["metric"] == "spill_bytes" and v["value"] > 0


def test_dropped_arch_fails_in_github_format(cli, workdir, kept, monkeypatch):
    cfg = _config(workdir / "budgets.toml", extra="")
    cfg.write_text(cfg.read_text().replace('["sm_80", "sm_90"]', '["sm_75", "sm_90"]'))
    summary = workdir / "summary.md"
    summary.write_text("earlier step\n")
    r = cli("check", kept.keep_dir, "--config", cfg, "--format", "github", "--summary",
            summary)
    assert r.exit_code == 1
    assert r.stdout.startswith("::error title=nvstage check%3A required_arch::required arch "
                               "sm_75 is missing")
    text = summary.read_text()
    assert text.startswith("earlier step\n## ❌ nvstage check: failed: 1 violation")


def test_github_annotations_point_at_the_kernel(cli, workdir, kept, kernels, monkeypatch):
    monkeypatch.setenv("GITHUB_WORKSPACE", str(kernels.parent))
    cfg = workdir / "budgets.toml"
    cfg.write_text("[budgets.kernels.budget_acc]\nmax_registers = 8\n")
    r = cli("check", f"{kept.keep_dir}/stages.json", "--config", cfg, "--format", "github")
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert len(lines) == 2
    assert all(line.startswith("::error file=kernels/budget_acc.cu,line=7,title=nvstage "
                               "check%3A registers::budget_acc (sm_") for line in lines)


def test_markdown_and_passing_notice(cli, workdir, kept):
    cfg = _config(workdir / "budgets.toml")
    r = cli("check", kept.keep_dir, "--config", cfg, "--format", "markdown")
    assert r.exit_code == 0
    assert r.stdout.startswith("## ✅ nvstage check: passed: 6 limits checked")
    assert "| `budget_acc` | sm_80 |" in r.stdout
    r = cli("check", kept.keep_dir, "--config", cfg, "--format", "github")
    assert r.stdout.startswith("::notice title=nvstage check::passed")


def test_baseline_round_trip(cli, workdir, kept, kernels):
    cfg = _config(workdir / "budgets.toml")
    base = workdir / "base.json"
    r = cli("check", kept.keep_dir, "--config", cfg, "--write-baseline", base)
    assert r.exit_code == 0 and json.loads(base.read_text())["passed"] is True
    lax = workdir / "lax.toml"
    lax.write_text(CONFIG.replace('"ACC=4"', '"ACC=32"').replace("max_registers = 32", "")
                   + "[tool.nvstage.baseline]\nstage_seconds = 1000.0\n")
    r = cli("check", kernels / "budget_acc.cu", "--config", lax, "--baseline", base)
    assert r.exit_code == 1
    assert "registers grew from" in r.stdout and "the baseline allows 10%" in r.stdout


@pytest.mark.parametrize("content, expected", [
    ("{truncated", "is not a check report or build manifest: not JSON"),
    ('{"schema": "nvstage.run/1"}', "is not an nvstage check report or build manifest"),
])
def test_corrupt_baseline_one_message(cli, workdir, kept, content, expected):
    cfg = _config(workdir / "budgets.toml")
    base = workdir / "base.json"
    base.write_text(content)
    r = cli("check", kept.keep_dir, "--config", cfg, "--baseline", base)
    assert r.exit_code == 6
    assert r.stdout == ""
    err = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert len(err) == 1 and expected in err[0], r.stderr
    assert "Traceback" not in r.stderr


def test_mismatched_baseline_one_message(cli, workdir, kept, kernels, toolkit):
    from nvstage.check.budgets import parse_budgets
    from nvstage.check.gate import check
    from nvstage.compiler.nvcc.options import CompileOptions
    from nvstage.compiler.pipeline.driver import compile

    other = compile(kernels / "saxpy.cu", CompileOptions(
        archs=("sm_90",), stop="fatbin", output=str(workdir / "saxpy.fatbin")),
        toolkit=toolkit, keep=workdir / "saxpy.nvstage", jobs=1)
    base = workdir / "saxpy-check.json"
    base.write_text(json.dumps(check(other, parse_budgets({}), toolkit=toolkit).to_json()))
    cfg = _config(workdir / "budgets.toml")
    r = cli("check", kept.keep_dir, "--config", cfg, "--baseline", base, "--json")
    assert r.exit_code == 6
    doc = json.loads(r.stdout)
    assert doc["error"] == "BaselineError"
    assert "is for a different build: no kernel and arch in common" in doc["message"]
    assert "only in the baseline: saxpy (sm_90)" in doc["message"]
    assert "only in this build: budget_acc (sm_80), budget_acc (sm_90)" in doc["message"]
    assert "--write-baseline" in doc["hint"]


SCALE = """
extern "C" __global__ void scale(int n, float a, float* __restrict__ y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] *= a;
}
"""
ONE_ARCH = """
[tool.nvstage.compile]
archs = ["sm_90"]
[tool.nvstage.budgets]
max_registers = 64
"""
# Where nothing is added, stage times are compared: noise on a shared machine is not the test.
NO_TIMES = ONE_ARCH + "[tool.nvstage.baseline]\nstage_seconds = 1000.0\n"


def _pr(cli, workdir, *, before: str, after: str, config: str = ONE_ARCH):
    """Check saxpy.cu as ``before`` with --write-baseline (main), then as ``after`` against
    that baseline (a pull request changing the file), both as JSON."""
    cfg = workdir / "budgets.toml"
    cfg.write_text(config)
    src = workdir / "saxpy.cu"
    src.write_text(before)
    r = cli("check", src, "--config", cfg, "--write-baseline", "main.json")
    assert r.exit_code == 0, r.output
    src.write_text(after)
    return cli("check", src, "--config", cfg, "--baseline", "main.json", "--json")


def test_a_kernel_added_since_the_baseline_is_a_note(cli, workdir, kernels):
    saxpy = (kernels / "saxpy.cu").read_text()
    r = _pr(cli, workdir, before=saxpy, after=saxpy + SCALE)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["passed"] is True
    assert doc["unmatched"] == [{"kind": "new", "kernel": "scale", "arch": "sm_90",
                                 "message": "scale (sm_90): new, not in the baseline (its "
                                            "budgets still apply)"}]
    assert "note: scale (sm_90): new, not in the baseline" in r.stderr
    assert ("note: sizes not compared with the baseline (kernels or arches were added): the sm_90 "
            "cubin, the fatbin") in r.stderr
    # the source grew, so its stages take longer: not a regression either
    assert ("note: stage times not compared with the baseline (kernels or arches were "
            "added)") in r.stderr
    # saxpy, in both, is still compared with the baseline; scale is held to its budgets
    tight = ONE_ARCH + '[tool.nvstage.budgets.kernels.scale]\nmax_registers = 1\n'
    r = _pr(cli, workdir, before=saxpy, after=saxpy + SCALE, config=tight)
    assert r.exit_code == 1
    (v,) = json.loads(r.stdout)["violations"]
    assert (v["kernel"], v["metric"], v["against"], v["limit"]) == ("scale", "registers",
                                                                    "budget", 1)


def test_a_kernel_removed_since_the_baseline_is_a_note(cli, workdir, kernels):
    saxpy = (kernels / "saxpy.cu").read_text()
    r = _pr(cli, workdir, before=saxpy + SCALE, after=saxpy, config=NO_TIMES)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [(u["kind"], u["kernel"], u["arch"]) for u in doc["unmatched"]] == [
        ("removed", "scale", "sm_90")]
    assert "note: scale (sm_90): removed, only in the baseline" in r.stderr
    # nothing was added: the sizes are compared (they shrank)
    assert "sizes not compared" not in r.stderr
    assert "nvstage check passed" in r.stderr


def test_a_kernel_added_in_text_and_markdown(cli, workdir, kernels):
    saxpy = (kernels / "saxpy.cu").read_text()
    _pr(cli, workdir, before=saxpy, after=saxpy + SCALE)
    cfg = workdir / "budgets.toml"
    r = cli("check", "saxpy.cu", "--config", cfg, "--baseline", "main.json")
    assert r.exit_code == 0
    assert "scale    sm_90" in r.stdout and "FAIL" not in r.stdout
    assert "note: scale (sm_90): new, not in the baseline" in r.stderr
    r = cli("check", "saxpy.cu", "--config", cfg, "--baseline", "main.json", "--format",
            "markdown")
    assert "| `scale` | sm_90 | new, not in the baseline |" in r.stdout


def test_no_config_is_a_usage_error(cli, workdir, kept):
    r = cli("check", kept.keep_dir)
    assert r.exit_code == 2 and "no budgets" in r.stderr


def test_bad_config_is_a_usage_error(cli, workdir, kept):
    cfg = workdir / "b.toml"
    cfg.write_text("[budgets]\nmax_regs = 3\n")
    r = cli("check", kept.keep_dir, "--config", cfg)
    assert r.exit_code == 2 and "unknown key(s) max_regs" in r.stderr


def test_help_shows_the_table_names(cli):
    r = cli("check", "--help")
    assert "[tool.nvstage.budgets]" in r.stdout and "[budgets.kernels." in r.stdout
    assert "with [tool.nvstage])" in " ".join(r.stdout.split())


def test_a_config_that_checks_nothing_fails(cli, workdir, kept):
    cfg = workdir / "empty.toml"
    cfg.write_text("")
    r = cli("check", kept.keep_dir, "--config", cfg, "--json")
    assert r.exit_code == 2
    doc = json.loads(r.stdout)
    assert doc["error"] == "UsageError" and "nothing was checked" in doc["message"]


@pytest.mark.parametrize("args, expected", [
    (("--json", "--format", "github"), "--json and --format github ask for two outputs"),
    (("--summary", "."), "--summary . is a folder"),
    (("--write-baseline", "."), "--write-baseline . is a folder"),
])
def test_conflicting_or_unwritable_options(cli, workdir, kept, args, expected):
    cfg = _config(workdir / "budgets.toml")
    r = cli("check", kept.keep_dir, "--config", cfg, *args)
    assert r.exit_code == 2 and expected in r.stderr, r.output
    assert "Traceback" not in r.output


def test_a_document_that_is_not_a_run_report(cli, workdir, kept):
    cfg = _config(workdir / "budgets.toml")
    (workdir / "other.json").write_text('{"a": 1}')
    r = cli("check", kept.keep_dir, "--config", cfg, "--run-report", "other.json")
    assert r.exit_code == 6 and "other.json is not a run report" in r.stderr


# --- hunt finding 12: kernels x patterns, both from documents, is not quadratic -----------

def _many_kernels(built, tmp_path, n: int):
    """A copy of a real keep folder whose manifest declares ``n`` more kernels (the ptxas
    report a manifest records), as the finding made it."""
    import shutil

    root, _ = built
    keep = tmp_path / "k"
    shutil.copytree(root / "vadd.keep", keep)
    doc = json.loads((keep / "stages.json").read_text())
    res = "".join(
        f"ptxas info    : Compiling entry function '_Z{len(str(i)) + 1}k{i}v' for 'sm_90'\n"
        f"ptxas info    : Function properties for _Z{len(str(i)) + 1}k{i}v\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        f"ptxas info    : Used {8 + i % 200} registers, used 0 barriers\n" for i in range(n))
    for s in doc["stages"]:
        if s["kind"] == "ptxas":  # a manifest from before the cubin's figures were kept
            s["resources"] = res
            s.pop("cubin_figures", None)
    (keep / "stages.json").write_text(json.dumps(doc))
    return keep


def test_thousands_of_kernels_and_patterns_check_in_seconds(cli, built, tmp_path):
    import time

    keep = _many_kernels(built, tmp_path, 4000)  # 81 s before, 4000 x 4000 fnmatch
    cfg = tmp_path / "budgets.toml"
    cfg.write_text("[budgets]\nmax_registers = 64\n" + "".join(
        f'[budgets.kernels."k{i}"]\nmax_registers = {300 if i % 2 else 100}\n'
        for i in range(4000)) + '[budgets.kernels."k1*"]\nmax_registers = 500\n')
    t0 = time.monotonic()
    r = cli("check", keep, "--config", cfg, "--json")
    assert time.monotonic() - t0 < 60
    assert r.exit_code == 1, r.output
    bad = {v["kernel"] for v in json.loads(r.stdout)["violations"]}
    # k{even} allow 100 (a glob k1* lifts k1x.. to 500); registers are 8 + i % 200.
    want = {f"k{i}()" for i in range(4000)
            if i % 2 == 0 and not str(i).startswith("1") and 8 + i % 200 > 100}
    assert bad == want


def test_too_many_kernels_or_kernel_tables_are_one_line(cli, built, tmp_path):
    from nvstage.check.budgets import MAX_GLOB_TABLES, MAX_KERNEL_TABLES
    from nvstage.check.metrics import MAX_KERNELS

    cfg = tmp_path / "budgets.toml"
    cfg.write_text("[budgets]\nmax_registers = 64\n")
    r = cli("check", _many_kernels(built, tmp_path / "a", MAX_KERNELS), "--config", cfg)
    assert r.exit_code == 6 and "MAX_KERNELS" in r.stderr, r.output
    root, _ = built
    cfg.write_text("[budgets]\nmax_registers = 64\n" + "".join(
        f'[budgets.kernels."k{i}"]\nmax_registers = 1\n' for i in range(MAX_KERNEL_TABLES + 1)))
    r = cli("check", root / "vadd.keep", "--config", cfg)
    assert r.exit_code == 2 and "MAX_KERNEL_TABLES" in r.stderr, r.output
    cfg.write_text("[budgets]\nmax_registers = 64\n" + "".join(
        f'[budgets.kernels."k{i}*"]\nmax_registers = 1\n' for i in range(MAX_GLOB_TABLES + 1)))
    r = cli("check", root / "vadd.keep", "--config", cfg)
    assert r.exit_code == 2 and "MAX_GLOB_TABLES" in r.stderr, r.output


def test_a_unit_whose_last_build_failed_is_unchecked_and_fails(cli, workdir, kernels, toolkit):
    """A build record in which one unit's last entry failed (it built once, then an edit
    broke it): that unit is listed as unchecked and the check fails (exit 1); it used to say
    "nothing was checked: the build has no kernels" with a hint about budgets."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    nvstage = Path(__file__).resolve().parents[2] / "bin" / "nvstage"
    env = dict(os.environ, NVSTAGE_BUILD_RECORD=str(workdir / "rec"))

    def launch(source: str, out: str) -> int:
        return subprocess.run([sys.executable, nvstage, toolkit.nvcc, "-c", "-arch=sm_90",
                               source, "-o", out], cwd=workdir, env=env, capture_output=True,
                              timeout=300).returncode

    shutil.copy(kernels / "vadd.cu", workdir / "vadd.cu")
    assert launch("vadd.cu", "vadd.o") == 0
    (workdir / "vadd.cu").write_text("__global__ void vadd(float* x) { x[0] = 1 }\n")
    assert launch("vadd.cu", "vadd.o") != 0  # its last entry: failed
    (workdir / "budgets.toml").write_text("[budgets]\nmax_registers = 64\n")
    r = cli("check", "rec", "--config", "budgets.toml")
    assert r.exit_code == 1, r.output
    assert "nothing was checked" not in r.output and "max_registers" not in r.stderr
    assert "FAIL vadd.cu: not checked: its last build failed" in r.stdout
    assert "1 translation unit not checked: its last build failed" in r.stderr
    doc = json.loads(cli("check", "rec", "--config", "budgets.toml", "--json").stdout)
    assert doc["passed"] is False
    assert [(u["unit"], u["state"]) for u in doc["unchecked"]] == [("vadd.cu", "failed")]
    # Beside a unit that built: its kernels are checked, and the failed one still fails it.
    shutil.copy(kernels / "saxpy.cu", workdir / "saxpy.cu")
    assert launch("saxpy.cu", "saxpy.o") == 0
    r = cli("check", "rec", "--config", "budgets.toml", "--format", "github")
    assert r.exit_code == 1, r.output
    assert "::error file=vadd.cu,title=nvstage check%3A not checked::vadd.cu not checked: " \
        "its last build failed" in r.stdout
    r = cli("check", "rec", "--config", "budgets.toml")
    assert "saxpy" in r.stdout and r.exit_code == 1
