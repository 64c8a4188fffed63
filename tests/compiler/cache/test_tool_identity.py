"""A toolkit's tools are keyed by what they are, not by when pip wrote them."""

import os
import stat
from pathlib import Path

from nvstage.compiler.cache.stage.stage_key import ToolVersions, tool_identity
from nvstage.compiler.toolkit.locate import _load, find_toolkit


def _fake_tool(path: Path, version: str, pad: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release "
                    f"{version.rsplit('.', 1)[0]}, V{version}'\n# {pad}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _toolkit(root: Path):
    _load.cache_clear()
    try:
        return find_toolkit(str(root / "bin" / "nvcc"))
    finally:
        _load.cache_clear()


def test_a_reinstalled_toolkit_keys_its_tools_alike(tmp_path, monkeypatch):
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "tk"
    for name in ("nvcc", "ptxas"):
        _fake_tool(root / "bin" / name, "13.5.37")
    ptxas = str(root / "bin" / "ptxas")
    before = tool_identity(ptxas, ToolVersions.of(_toolkit(root)))
    # What a fresh pip install does: the same files, written at another time.
    for name in ("nvcc", "ptxas"):
        _fake_tool(root / "bin" / name, "13.5.37")
        os.utime(root / "bin" / name, ns=(1, 1))
    assert tool_identity(ptxas, ToolVersions.of(_toolkit(root))) == before
    # Another release at the same size, or the same release at another size, is another tool.
    for name in ("nvcc", "ptxas"):
        _fake_tool(root / "bin" / name, "13.6.37")
    assert tool_identity(ptxas, ToolVersions.of(_toolkit(root))) != before
    for name in ("nvcc", "ptxas"):
        _fake_tool(root / "bin" / name, "13.5.37")
    _fake_tool(root / "bin" / "ptxas", "13.5.37", pad="x")
    assert tool_identity(ptxas, ToolVersions.of(_toolkit(root))) != before


def test_a_tool_outside_the_toolkit_keeps_its_mtime(tmp_path, monkeypatch):
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "tk"
    _fake_tool(root / "bin" / "nvcc", "13.5.37")
    gcc = tmp_path / "host" / "gcc"
    _fake_tool(gcc, "13.5.37")
    tools = ToolVersions.of(_toolkit(root))
    before = tool_identity(str(gcc), tools)
    os.utime(gcc, ns=(1, 1))
    assert tool_identity(str(gcc), tools) != before
