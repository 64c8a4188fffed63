"""Which nvcc ``nvstage nvcc ARGS`` (Make's ``NVCC = nvstage nvcc``) runs, and what says so
(compiler/toolkit/nvcc_lookup.py): the nvcc on PATH when there is one, else the pip wheels'; the
build record's ``nvcc_from``, ``show BUILD``'s headline, ``NVSTAGE_LAUNCHER_VERBOSE``, doctor's
PATH line and ``--print-nvcc``; one line when there is none anywhere. Real toolkits only: the
wheels', and another toolkit's nvcc where the machine has one (/usr/local/bin/nvcc here)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nvstage.compiler.buildlog import log as buildlog
from nvstage.compiler.toolkit.cmake_toolchain import nvstage_command
from nvstage.compiler.toolkit import nvcc_lookup

BIN = Path(sys.executable).parent  # the venv's: nvstage's console script, cmake, make's helpers
PROJECT = Path(__file__).parents[2] / "data" / "cuproject"
# Another toolkit's nvcc, where this machine has one (a CUDA 13.0 wrapper script here).
OTHERS = ("/usr/local/bin/nvcc", "/usr/local/cuda/bin/nvcc")
_TOOLKIT_VARS = ("NVSTAGE_NVCC", "CUDA_PATH", "CUDA_HOME", "CONDA_PREFIX",
                 "NVSTAGE_LAUNCHER_VERBOSE")


def _no_nvcc_path() -> str:
    """PATH with the venv's folder first and no folder that holds an nvcc."""
    dirs = [str(BIN)] + [d for d in os.environ.get("PATH", "").split(os.pathsep)
                         if d and not os.path.exists(os.path.join(d, "nvcc"))]
    path = os.pathsep.join(dict.fromkeys(dirs))
    assert shutil.which("nvcc", path=path) is None
    return path


def _env(tmp_path: Path, path: str, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _TOOLKIT_VARS}
    env.update(PATH=path, NVSTAGE_CACHE_DIR=str(tmp_path / "cache"),
               NVSTAGE_BUILD_RECORD=str(tmp_path / "record"), NVSTAGE_SERVER="0", **extra)
    return env


def _run(argv, cwd, env) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _wheels(toolkit):
    if toolkit.source != "pip wheels":
        pytest.skip(f"the toolkit nvstage uses is not the pip wheels' ({toolkit.describe()})")


def _other_nvcc(toolkit) -> str:
    for cand in OTHERS:
        if os.access(cand, os.X_OK) and os.path.realpath(cand) != os.path.realpath(toolkit.nvcc):
            return cand
    pytest.skip(f"no other CUDA toolkit's nvcc on this machine (looked at {', '.join(OTHERS)})")


def _entries(record: Path) -> list[buildlog.Entry]:
    return buildlog.load_build_log(record).entries


def test_no_nvcc_on_path_runs_the_wheels_nvcc_miss_and_hit(toolkit, kernels, tmp_path, cli):
    _wheels(toolkit)
    (tmp_path / "vadd.cu").write_bytes((kernels / "vadd.cu").read_bytes())
    env = _env(tmp_path, _no_nvcc_path())
    args = ["nvcc", "-c", "-arch=sm_90", "vadd.cu", "-o", "a.o"]
    # A miss, a hit, and a hit under the launcher CMake's toolchain file names (no site):
    # each as plain nvcc would, nothing of nvstage's own printed.
    for argv in ([str(BIN / "nvstage"), *args], [str(BIN / "nvstage"), *args],
                 [*nvstage_command(), *args]):
        cp = _run(argv, tmp_path, env)
        assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", ""), cp.stderr
    assert (tmp_path / "a.o").is_file()
    entries = _entries(tmp_path / "record")
    assert [(e.status, e.hit) for e in entries] == [("ok", False), ("ok", True), ("ok", True)]
    for e in entries:
        assert os.path.realpath(e.argv[0]) == os.path.realpath(toolkit.nvcc)
        assert e.nvcc_from == "pip wheels"
    wheels = entries[0].argv[0]
    # Which nvcc, from where: on stderr only when asked.
    cp = _run([str(BIN / "nvstage"), *args], tmp_path, dict(env, NVSTAGE_LAUNCHER_VERBOSE="1"))
    assert cp.returncode == 0 and cp.stdout == ""
    assert cp.stderr == (f"nvstage: nvcc {wheels} (from the pip wheels: PATH has no nvcc): "
                         "answered whole from the cache\n")
    cp = _run([str(BIN / "nvstage"), *args[:-1], "b.o"], tmp_path,
              dict(env, NVSTAGE_LAUNCHER_VERBOSE="1"))
    assert cp.stderr == f"nvstage: nvcc {wheels} (from the pip wheels: PATH has no nvcc): staged\n"
    # And show BUILD's headline.
    r = cli("show", tmp_path / "record")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[1] == (f"nvcc: {wheels} (CUDA {toolkit.version}, from the pip "
                                        "wheels: PATH has no nvcc)")
    doc = json.loads(cli("show", tmp_path / "record", "--json").stdout)
    assert doc["nvcc"] == [{"nvcc": wheels, "from": "pip wheels", "version": toolkit.version,
                            "commands": 2}]


@pytest.mark.skipif(not shutil.which("make"), reason="GNU make is not installed")
def test_make_nvcc_is_nvstage_nvcc_without_nvcc_on_path(toolkit, tmp_path):
    _wheels(toolkit)
    src = tmp_path / "src"
    shutil.copytree(PROJECT, src)
    env = _env(tmp_path, _no_nvcc_path())
    cp = _run(["make", "-j2", "NVCC=nvstage nvcc", "out/scale.o", "out/devlib.o"], src, env)
    assert cp.returncode == 0, cp.stdout + cp.stderr
    assert (src / "out" / "scale.o").is_file() and (src / "out" / "devlib.o").is_file()
    entries = _entries(tmp_path / "record")
    assert len(entries) == 2 and all(e.status == "ok" for e in entries), entries
    assert {e.nvcc_from for e in entries} == {"pip wheels"}
    assert {os.path.realpath(e.argv[0]) for e in entries} == {os.path.realpath(toolkit.nvcc)}


def test_another_toolkits_nvcc_on_path_is_the_one_that_runs(toolkit, kernels, tmp_path, cli,
                                                            monkeypatch):
    from nvstage.compiler.toolkit.locate import tool_version

    other = _other_nvcc(toolkit)
    version = tool_version(other)
    (tmp_path / "vadd.cu").write_bytes((kernels / "vadd.cu").read_bytes())
    path = os.pathsep.join([os.path.dirname(other), str(BIN), _no_nvcc_path()])
    env = _env(tmp_path, path)
    args = [str(BIN / "nvstage"), "nvcc", "-c", "-arch=sm_90", "vadd.cu", "-o", "a.o"]
    cp = _run(args, tmp_path, env)
    assert (cp.returncode, cp.stdout, cp.stderr) == (0, "", ""), cp.stderr
    (e,) = _entries(tmp_path / "record")
    assert (e.argv[0], e.nvcc_from, e.status) == (other, "PATH", "ok"), e.reason
    # The manifest names the toolkit that ran: the other one, not the wheels'.
    assert e.manifest_build().toolkit.version == version
    cp = _run(args, tmp_path, dict(env, NVSTAGE_LAUNCHER_VERBOSE="1"))
    assert cp.returncode == 0 and cp.stderr.startswith(f"nvstage: nvcc {other} (from PATH): ")
    r = cli("show", tmp_path / "record")
    assert r.stdout.splitlines()[1] == f"nvcc: {other} (CUDA {version}, from PATH)"
    # doctor says PATH's nvcc is another toolkit than the one nvstage uses.
    monkeypatch.setenv("PATH", path)
    r = cli("doctor", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["path_nvcc"]["path"] == other and doc["path_nvcc"]["version"] == version
    assert doc["path_nvcc"]["same_toolkit"] is False
    r = cli("doctor")
    assert f"PATH: {other} is another toolkit's nvcc (CUDA {version}" in " ".join(
        r.stdout.split())


def test_doctor_prints_the_nvcc_nvstage_uses(toolkit, cli, tmp_path, monkeypatch):
    r = cli("doctor", "--print-nvcc")
    assert (r.exit_code, r.stdout, r.stderr) == (0, toolkit.nvcc + "\n", "")
    doc = json.loads(cli("doctor", "--print-nvcc", "--json").stdout)
    assert doc == {"nvcc": toolkit.nvcc, "source": toolkit.source, "version": toolkit.version}
    r = cli("doctor", "--print-nvcc", "--cmake-toolchain", tmp_path / "t.cmake")
    assert r.exit_code == 2 and "--print-nvcc prints a path" in r.stderr
    # Where PATH has no nvcc, doctor says what nvstage nvcc runs instead.
    monkeypatch.setenv("PATH", _no_nvcc_path())
    r = cli("doctor", "--json")
    assert json.loads(r.stdout)["path_nvcc"] is None
    r = cli("doctor")
    assert "PATH: no nvcc; nvstage nvcc ARGS runs the toolkit above" in r.stdout


def test_no_nvcc_anywhere_is_one_line_saying_how_to_fix_it(tmp_path, monkeypatch, capsys):
    from cuda import pathfinder

    from nvstage.compiler.launcher.flow import main

    for var in _TOOLKIT_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    # The wheels hidden from both lookups (the toolkit itself is untouched).
    monkeypatch.setattr(nvcc_lookup, "site_folders", lambda: [])
    monkeypatch.setattr(pathfinder, "find_nvidia_binary_utility", lambda name: None)
    assert main(["nvcc", "-c", "a.cu"]) == 127
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        "nvstage: cannot find the compiler 'nvcc': none on PATH and none in the pip wheels; "
        "install them in nvstage's environment (")
    assert "-m pip install 'cuda-toolkit[nvcc]'), put nvcc on PATH, or name it: nvstage " \
           "/path/to/nvcc ARGS" in err
    monkeypatch.setenv("NVSTAGE_NVCC", str(tmp_path / "gone" / "nvcc"))
    assert main(["nvcc", "-c", "a.cu"]) == 127
    assert "$NVSTAGE_NVCC names no executable file" in capsys.readouterr().err
    assert main([str(tmp_path / "no-such" / "nvcc"), "-c", "a.cu"]) == 127
    err = capsys.readouterr().err
    assert err == (f"nvstage: cannot find the compiler '{tmp_path}/no-such/nvcc': no executable "
                   "file there; name nvcc's path, or write nvstage nvcc ARGS for the nvcc on "
                   "PATH (else the pip wheels')\n")
    assert not (tmp_path / ".nvstage-build").exists()


def test_the_lookup_order_past_path(toolkit, tmp_path):
    _wheels(toolkit)
    site = [p for p in sys.path if p.endswith("site-packages")]
    wheels = nvcc_lookup.toolkit_nvcc({}, site)
    assert wheels is not None and wheels[1] == "pip wheels"
    assert os.path.realpath(wheels[0]) == os.path.realpath(toolkit.nvcc)
    # $NVSTAGE_NVCC first; nothing in an empty folder; $CUDA_PATH hides $CUDA_HOME, as
    # cuda-pathfinder has it.
    assert nvcc_lookup.toolkit_nvcc({"NVSTAGE_NVCC": toolkit.nvcc}, site) == \
        (toolkit.nvcc, "$NVSTAGE_NVCC")
    assert nvcc_lookup.toolkit_nvcc({}, [str(tmp_path)]) is None
    root = str(Path(toolkit.nvcc).parent.parent)
    assert nvcc_lookup.toolkit_nvcc({"CUDA_HOME": root}, []) == \
        (os.path.join(root, "bin", "nvcc"), "$CUDA_HOME")
    assert nvcc_lookup.toolkit_nvcc({"CUDA_PATH": str(tmp_path), "CUDA_HOME": root}, []) is None
    # A name on PATH wins, and a name other than nvcc is looked for there only.
    assert nvcc_lookup.find("nvcc", {"PATH": str(Path(toolkit.nvcc).parent)}) == \
        (str(Path(toolkit.nvcc).parent / "nvcc"), "PATH")
    assert nvcc_lookup.find("nvcc-13", {"PATH": str(tmp_path)}) is None


def test_old_entries_without_nvcc_from_still_read():
    doc = {"schema": buildlog.SCHEMA, "argv": ["/x/nvcc", "-c", "a.cu"], "cwd": "/p",
           "started": 1.0, "seconds": 0.5, "status": "fallback", "exit_code": 0, "pid": 1,
           "reason": "r", "hit": False, "build_id": None, "build": None}
    assert buildlog.Entry.from_json(doc, "old").nvcc_from is None
    e = buildlog.Entry.from_json({**doc, "nvcc_from": "PATH"}, "new")
    assert e.nvcc_from == "PATH" and e.to_json()["nvcc_from"] == "PATH"
    with pytest.raises(Exception):
        buildlog.Entry.from_json({**doc, "nvcc_from": 3}, "bad")


def test_the_wheels_nvcc_is_the_one_cuda_pathfinder_finds(toolkit, tmp_path, monkeypatch):
    # locate.find_toolkit looks in the wheels itself (importing cuda-pathfinder costs 40 to
    # 50 ms and an `ldconfig -p` before nvcc's first process): the same nvcc, in its order.
    from cuda import pathfinder

    found = nvcc_lookup.wheel_nvcc()
    assert found is not None and found == pathfinder.find_nvidia_binary_utility("nvcc")
    # A site-packages folder with CUDA 12's per-component folder only: still pathfinder's
    # order (cu13 in any folder first, then cuda_nvcc), and nothing where neither is.
    import site

    real = list(site.getsitepackages())
    other = tmp_path / "site-packages"
    (other / "nvidia" / "cuda_nvcc" / "bin").mkdir(parents=True)
    fake = other / "nvidia" / "cuda_nvcc" / "bin" / "nvcc"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(other), *real])
    assert nvcc_lookup.wheel_nvcc() == found
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(other)])
    monkeypatch.setattr(site, "ENABLE_USER_SITE", False)
    assert nvcc_lookup.wheel_nvcc() == str(fake)
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(tmp_path)])
    assert nvcc_lookup.wheel_nvcc() is None

