"""Fixtures for the inspect tests: the shared builds and the captured tool output."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _builds import CAPTURED, get_built, tool  # noqa: E402


@pytest.fixture(scope="session")
def built(toolkit, kernels, tmp_path_factory):
    return get_built(toolkit, kernels, tmp_path_factory)


@pytest.fixture(scope="session")
def captured() -> Path:
    return CAPTURED


@pytest.fixture(scope="session")
def reference(toolkit):
    """Run a toolkit tool (cuobjdump, nvdisasm, ptxas) and return its output."""
    return lambda name, *args, cwd=None: tool(toolkit, name, *args, cwd=cwd)
