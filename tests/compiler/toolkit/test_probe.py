"""The toolkit's tools are asked their versions together, once per cache folder."""

import stat
from pathlib import Path

import pytest

from nvstage.compiler.toolkit.locate import _cached_versions, _load, find_toolkit
from nvstage.errors import ToolkitError

NAMES = ("nvcc", "cudafe++", "ptxas", "fatbinary", "nvlink")


def _rendezvous_tool(path: Path, version: str, meet: Path, count: int) -> None:
    """A tool that answers --version only once ``count`` tools are running at the same time
    (each leaves a file in ``meet`` and waits for the others'), and otherwise gives up."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "#!/bin/sh\n"
        f"touch '{meet}/{path.name}' || exit 1\n"
        "i=0\n"
        f"while [ $(ls '{meet}' | wc -l) -lt {count} ]; do\n"
        "  i=$((i+1)); [ $i -gt 200 ] && exit 1; sleep 0.05\n"
        "done\n"
        f"echo 'Cuda compilation tools, release {version.rsplit('.', 1)[0]}, V{version}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_the_tools_are_asked_together_and_remembered(tmp_path, monkeypatch):
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    meet = tmp_path / "meet"
    meet.mkdir()
    paths = [str(tmp_path / "bin" / n) for n in NAMES]
    for p in paths:
        _rendezvous_tool(Path(p), "13.5.37", meet, len(paths))
    # Each answers only while all are running: asked one after another, none would.
    assert _cached_versions(paths) == dict.fromkeys(paths, "13.5.37")
    for f in meet.iterdir():
        f.unlink()
    meet.rmdir()  # the tools fail now (the tools themselves unchanged): the notes answer
    assert _cached_versions(paths) == dict.fromkeys(paths, "13.5.37")


def test_one_tool_by_two_spellings_is_asked_once(tmp_path, monkeypatch):
    # nvcc as given (under a linked folder, as /usr/local/cuda) and as found from its root.
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    tool = tmp_path / "cuda-13.5" / "bin" / "nvcc"
    tool.parent.mkdir(parents=True)
    asked = tmp_path / "asked"
    tool.write_text(f"#!/bin/sh\necho x >> '{asked}'\n"
                    "echo 'Cuda compilation tools, release 13.5, V13.5.37'\n")
    tool.chmod(0o755)
    (tmp_path / "cuda").symlink_to(tmp_path / "cuda-13.5")
    both = [str(tmp_path / "cuda" / "bin" / "nvcc"), str(tool)]
    assert _cached_versions(both) == dict.fromkeys(both, "13.5.37")
    assert asked.read_text() == "x\n"


def test_a_mixed_toolkit_is_still_refused_when_asked_together(tmp_path, monkeypatch):
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    meet = tmp_path / "meet"
    meet.mkdir()
    for n in NAMES:
        _rendezvous_tool(tmp_path / "bin" / n, "13.0.88" if n == "ptxas" else "13.5.37",
                         meet, len(NAMES))
    _load.cache_clear()
    with pytest.raises(ToolkitError, match=r"ptxas 13\.0\.88"):
        find_toolkit(str(tmp_path / "bin" / "nvcc"))
    _load.cache_clear()


def test_the_wheels_toolkit_is_the_same_from_a_fresh_cache_folder(toolkit, tmp_path,
                                                                 monkeypatch):
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "fresh"))
    _load.cache_clear()
    try:
        fresh = find_toolkit(toolkit.nvcc)
    finally:
        _load.cache_clear()
    assert fresh.to_json()["tools"] == toolkit.to_json()["tools"]
    assert fresh.version == toolkit.version
