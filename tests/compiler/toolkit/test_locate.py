"""Finding the toolkit: the wheels by default, an explicit nvcc on request, never a mix."""

import os
import stat
import subprocess
from pathlib import Path

import pytest

from nvstage.errors import ToolkitError, ToolTimeout
from nvstage.compiler.toolkit.locate import find_toolkit, host_compiler


def test_default_toolkit_is_the_pip_wheels_and_complete(toolkit):
    assert toolkit.source == "pip wheels"
    assert "site-packages" in toolkit.nvcc
    assert toolkit.major == 13
    for name in ("nvcc", "cudafe++", "cicc", "ptxas", "fatbinary", "nvlink", "cuobjdump",
                 "nvdisasm"):
        path = toolkit.tool(name)
        assert Path(path).is_file(), name
    out = subprocess.run([toolkit.tool("ptxas"), "--version"], capture_output=True,
                         text=True).stdout
    assert f"V{toolkit.version}" in out


def _fake_tool(path: Path, version: str) -> None:
    # A stand-in that only answers --version: enough to exercise the mixed-toolkit check.
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release "
                    f"{version.rsplit('.', 1)[0]}, V{version}'\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_a_mixed_toolkit_is_refused_with_names_and_versions(tmp_path):
    root = tmp_path / "cuda"
    _fake_tool(root / "bin/nvcc", "13.5.37")
    for tool in ("cudafe++", "fatbinary", "nvlink", "cuobjdump", "nvdisasm"):
        _fake_tool(root / "bin" / tool, "13.5.37")
    _fake_tool(root / "bin/ptxas", "13.0.88")
    with pytest.raises(ToolkitError, match=r"mixed CUDA toolkit: nvcc is 13\.5\.37 but ptxas "
                                           r"13\.0\.88"):
        find_toolkit(str(root / "bin/nvcc"))


def test_one_release_with_differing_patch_numbers_is_one_toolkit(tmp_path):
    # As shipped: CUDA 13.0 update 2 has nvcc 13.0.88 beside cuobjdump and nvdisasm 13.0.85
    # (seen on an H200 machine's /usr/local/cuda-13.0).
    root = tmp_path / "cuda"
    for tool in ("nvcc", "cudafe++", "ptxas", "fatbinary", "nvlink"):
        _fake_tool(root / "bin" / tool, "13.0.88")
    for tool in ("cuobjdump", "nvdisasm"):
        _fake_tool(root / "bin" / tool, "13.0.85")
    tk = find_toolkit(str(root / "bin/nvcc"))
    assert tk.version == "13.0.88" and tk.release == "13.0"
    assert tk.tool("cuobjdump") == str(root / "bin/cuobjdump")


def test_explicit_nvcc_wins_and_missing_one_is_clear(tmp_path, monkeypatch):
    with pytest.raises(ToolkitError, match="nvcc not found"):
        find_toolkit(str(tmp_path / "nope/nvcc"))
    monkeypatch.setenv("NVSTAGE_NVCC", str(tmp_path / "env/nvcc"))
    with pytest.raises(ToolkitError, match=r"\$NVSTAGE_NVCC"):
        find_toolkit()


@pytest.mark.skipif(not os.path.isfile("/usr/local/cuda/bin/nvcc"),
                    reason="no system CUDA toolkit on this machine")
def test_a_system_toolkit_can_be_chosen():
    tk = find_toolkit("/usr/local/cuda/bin/nvcc")
    assert tk.source == "--nvcc" and tk.root.startswith("/usr/local/cuda")
    assert tk.tool("ptxas").startswith(tk.root)
    # An inspection tool found elsewhere reads this build when it is of the same or a newer
    # release (an older one is refused: see the test below).
    other = tk.tools["cuobjdump"]
    if other.found:
        assert tk.tool("cuobjdump") == other.path


def test_an_older_inspection_tool_is_refused(tmp_path):
    root = tmp_path / "cuda"
    for tool in ("nvcc", "cudafe++", "ptxas", "fatbinary", "nvlink"):
        _fake_tool(root / "bin" / tool, "13.5.37")
    old = tmp_path / "old" / "bin"
    _fake_tool(old / "cuobjdump", "13.0.85")
    tk = find_toolkit(str(root / "bin/nvcc"))
    from nvstage.compiler.toolkit.locate import ToolInfo

    tk.tools["cuobjdump"] = ToolInfo("cuobjdump", str(old / "cuobjdump"), "13.0.85")
    with pytest.raises(ToolkitError, match="mixed CUDA toolkit"):
        tk.tool("cuobjdump")


def test_host_compiler_is_found():
    gcc = host_compiler()
    assert gcc.found and gcc.version


@pytest.mark.parametrize("how", ["rename", "copy keeping mtime"])
def test_version_cache_asks_again_for_a_tool_replaced_with_same_size_and_mtime(
        tmp_path, monkeypatch, how):
    from nvstage.compiler.toolkit.locate import _cached_version

    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    tool = tmp_path / "bin/ptxas"
    _fake_tool(tool, "13.5.37")
    st = tool.stat()
    assert _cached_version(str(tool)) == "13.5.37"
    new = tmp_path / "new-ptxas"
    _fake_tool(new, "13.0.88")  # same length: same size
    if how == "rename":
        os.replace(new, tool)
    else:
        tool.write_bytes(new.read_bytes())
    os.utime(tool, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert tool.stat().st_size == st.st_size and tool.stat().st_mtime_ns == st.st_mtime_ns
    assert _cached_version(str(tool)) == "13.0.88"


def test_a_hung_host_compiler_gives_no_version_not_a_traceback(tmp_path, monkeypatch):
    from nvstage import proc

    def hang(argv, **kw):
        raise ToolTimeout(f"{argv[0]!r} did not finish within 30 s")

    monkeypatch.setattr(proc, "output", hang)
    gcc = host_compiler()
    assert gcc.found and gcc.version is None


def test_a_missing_header_a_wheel_ships_names_its_extra(toolkit, tmp_path):
    from nvstage.compiler.pipeline.driver import compile
    from nvstage.compiler.nvcc.options import CompileOptions
    from nvstage.errors import StageFailed

    (tmp_path / "p.cu").write_text("#include <cuda_profiler_api.h>\n__global__ void k() {}\n")
    with pytest.raises(StageFailed) as e:
        compile("p.cu", CompileOptions(archs=("sm_90",), compile_only=True), cwd=tmp_path,
                cache=False, toolkit=toolkit)
    assert e.value.hint == (f"cuda_profiler_api.h comes with the cuda-toolkit wheel's "
                            f"'profiler' extra: pip install 'cuda-toolkit[profiler]=="
                            f"{toolkit.release}.*'")
