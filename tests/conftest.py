"""Shared fixtures: the real toolkit, the bundled kernels, a CLI runner, the gpu marker."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def toolkit():
    from nvstage.toolkit import find_toolkit

    return find_toolkit()


@pytest.fixture(scope="session")
def kernels() -> Path:
    return KERNELS


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """A fresh current folder for a build."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def cli(monkeypatch):
    """Invoke the nvstage CLI in-process with a fixed width and no colour."""
    from typer.testing import CliRunner

    from nvstage.cli.app import app

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "160")
    runner = CliRunner()

    def invoke(*args: str):
        return runner.invoke(app, [str(a) for a in args], catch_exceptions=False)

    return invoke


def pytest_configure(config):
    # Tests never read or fill the user's cache: one fresh cache folder per test session.
    import tempfile

    if "NVSTAGE_CACHE_DIR" not in os.environ or os.environ.get("NVSTAGE_TEST_KEEP_CACHE") != "1":
        os.environ["NVSTAGE_CACHE_DIR"] = tempfile.mkdtemp(prefix="nvstage-test-cache-")


def pytest_collection_modifyitems(config, items):
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    from nvstage.runtime.driver import probe

    p = probe()
    if p.available:
        return
    skip = pytest.mark.skip(reason=f"needs a GPU: {p.reason}")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


def has_system_toolkit() -> bool:
    return os.path.isfile("/usr/local/cuda/bin/nvcc")
