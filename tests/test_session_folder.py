"""The test session's own folder (tests/conftest.py: the cache, $TMPDIR) is gone when pytest
ends, however it ends: a ``--collect-only`` runs no test, so no fixture's teardown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_collect_only_leaves_nothing_in_the_temporary_folder(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                        "-p", "no:cacheprovider", "tests/test_fsio.py"],
                       cwd=ROOT, env=dict(os.environ, TMPDIR=str(tmp)), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "collected" in r.stdout
    assert sorted(p.name for p in tmp.iterdir()) == []
