"""``cli/bare.py``: nvstage under a Python started without ``site``, as a build's launcher
setting names it (``nvstage doctor --cmake-toolchain FILE --launcher``). A hit needs no
``site``; everything else gets it, and behaves as ``nvstage`` does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from nvstage import __version__
from nvstage.compiler.toolkit.cmake_toolchain import nvstage_command


def _run(args, cwd, env=None, **kw):
    return subprocess.run([*nvstage_command(), *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=600, **kw)


def test_the_launcher_command_is_python_without_site_on_bare_py():
    cmd = nvstage_command()
    assert cmd[:3] == [sys.executable, "-S", "-P"] and Path(cmd[3]).name == "bare.py"
    assert Path(cmd[3]).is_file()


def test_the_client_bare_loads_is_the_module_the_launcher_imports():
    # The launcher tells ask.MISSED by identity: bare.py's own load of ask.py must be the
    # module nvstage.compiler.launcher.resident.ask, not a second copy.
    bare = nvstage_command()[3]
    code = ("import runpy, sys\n"
            f"g = runpy.run_path({bare!r}, run_name='not_main')\n"
            "m = g['_ask_module'](g['_paths']())\n"
            "from nvstage.compiler.launcher.resident.ask import MISSED\n"
            "print(m.MISSED is MISSED)\n")
    cp = subprocess.run([sys.executable, "-S", "-P", "-c", code], capture_output=True,
                        text=True, timeout=120)
    assert cp.stdout.strip() == "True", cp.stderr


def test_commands_under_bare_are_nvstages(tmp_path):
    cp = _run(["--version"], tmp_path)
    assert cp.returncode == 0 and cp.stdout == f"nvstage {__version__}\n"
    cp = _run(["no-such-command"], tmp_path)
    assert cp.returncode == 2 and "no such command" in cp.stderr


def test_a_miss_and_a_hit_under_bare_are_the_scripts(toolkit, kernels, tmp_path):
    env = dict(os.environ, NVSTAGE_SERVER="0", NVSTAGE_CACHE_DIR=str(tmp_path / "cache"),
               NVSTAGE_BUILD_RECORD=str(tmp_path / "record"))
    (tmp_path / "vadd.cu").write_bytes((kernels / "vadd.cu").read_bytes())
    argv = [toolkit.nvcc, "-c", "-arch=sm_90", "vadd.cu", "-o", "a.o"]
    cold = _run(argv, tmp_path, env)  # a miss: site, the pipeline, the entry
    assert cold.returncode == 0, cold.stderr
    first = (tmp_path / "a.o").read_bytes()
    (tmp_path / "a.o").unlink()
    # The hit: neither site nor anything of nvstage's pipeline imported.
    cmd = nvstage_command()
    hit = subprocess.run([*cmd[:3], "-X", "importtime", *cmd[3:], *argv], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    assert hit.returncode == 0, hit.stderr
    assert (tmp_path / "a.o").read_bytes() == first
    imported = {line.rsplit("|", 1)[-1].strip() for line in hit.stderr.splitlines()
                if line.startswith("import time:")}
    assert "nvstage.compiler.cache.command.answer" in imported
    assert "site" not in imported and "nvstage.compiler.launcher.front" not in imported
    shown = _run(["show", str(tmp_path / "record"), "--json"], tmp_path, env)  # typer: site
    assert shown.returncode == 0, shown.stderr
