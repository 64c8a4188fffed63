"""The checkout itself: no build record or keep folder committed, and what the walkthroughs of
README and the manual make when run in it (outputs, keep folders, reports, the build record)
ignored by git, with no tracked file caught by those patterns."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# What the walkthroughs make in the checkout's root (and the Triton build script beside it).
MADE = ["vadd", "a.out", "multi.o", "a.o", "saxpy.cubin", "chain.cubin", "vadd.nvstage/stages.json",
        "chain.nvstage/stages.json", "fused.triton/stages.json",
        ".nvstage-build/NVSTAGE_BUILD_RECORD", "build/build.ninja", "nvstage.cmake",
        "build.html", "report.html", "build.trace.json", "saxpy.trace.json",
        "saxpy.plan.json", "chain.svg", "examples/triton/build/fused.triton/fused.cubin",
        "tests/data/cuproject/.nvstage-build/tu/1.json"]


def _git(*args: str) -> subprocess.CompletedProcess:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)


def test_no_build_record_or_keep_folder_is_committed():
    tracked = _git("ls-files").stdout.splitlines()
    stray = [p for p in tracked if ".nvstage-build/" in p or ".nvstage/" in p]
    assert not stray, stray[:10]


def test_what_the_walkthroughs_make_is_ignored_and_nothing_tracked_is():
    ignored = _git("check-ignore", "--no-index", "--", *MADE).stdout.splitlines()
    assert sorted(set(MADE) - set(ignored)) == []
    caught = _git("ls-files", "--cached", "--ignored", "--exclude-standard").stdout.split()
    assert caught == []
