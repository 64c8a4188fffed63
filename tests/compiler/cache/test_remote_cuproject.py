"""Two CI runners on one machine sharing one remote tier (a real Redis on loopback), each with
its own local cache folder and cache key, building the launcher test project
(tests/data/cuproject) with CMake + Ninja and nvstage as the CUDA compiler launcher.

- At the same checkout path, runner B builds everything from the remote, with objects equal
  to its own cold build (up to nvcc's module id), and a source edit runner A built is never
  served to B.
- At another path, the same with ``NVSTAGE_BASE_DIR`` (what nvstage can serve across paths:
  the outputs that do not hold the checkout's absolute path), and not one hit without it.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from nvstage import proc
from nvstage.compiler.cache.local import Cache

PROJECT = Path(__file__).parents[2] / "data" / "cuproject"
BIN = Path(sys.executable).parent
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (BIN / "cmake").exists() or not (BIN / "ninja").exists(),
    reason="cmake and ninja come from the test extra's wheels")]
_REMOTE_VARS = ("NVSTAGE_REMOTE_CACHE", "NVSTAGE_BASE_DIR", "NVSTAGE_REMOTE_SIGNING_KEY",
                "NVSTAGE_REMOTE_VERIFY_KEY", "NVSTAGE_REMOTE_READ_ONLY")


class Runner:
    def __init__(self, root: Path, name: str, toolkit):
        self.root, self.name, self.toolkit = root, name, toolkit
        self.cache = root / f"{name}-cache"

    def env(self, remote: str | None, base: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _REMOTE_VARS}
        env.update(PATH=f"{BIN}:{os.environ.get('PATH', '')}", NVSTAGE_CACHE_DIR=str(self.cache),
                   XDG_CONFIG_HOME=str(self.root / f"{self.name}-config"))
        if remote:
            env["NVSTAGE_REMOTE_CACHE"] = remote
        if base:
            env["NVSTAGE_BASE_DIR"] = base
        return env

    def build(self, checkout: Path, remote: str | None = None, base: str | None = None,
              fresh: bool = True) -> Path:
        """Check the project out at ``checkout`` (a fresh copy unless ``fresh`` is False)
        and build it; the build folder."""
        if fresh:
            shutil.rmtree(checkout, ignore_errors=True)
            shutil.copytree(PROJECT, checkout)
        env = self.env(remote, base)
        build = checkout / "build"
        if fresh:
            cp = proc.run(["cmake", "-S", str(checkout), "-B", str(build), "-G", "Ninja",
                           f"-DCMAKE_CUDA_COMPILER={self.toolkit.nvcc}",
                           "-DCMAKE_CUDA_COMPILER_LAUNCHER=" +
                           ";".join([sys.executable, "-m", "nvstage"])], env=env, timeout=600)
            assert cp.returncode == 0, cp.stdout + cp.stderr
        cp = proc.run(["ninja", "-C", str(build), "-j2"], env=env, timeout=1200)
        assert cp.returncode == 0, cp.stdout + cp.stderr
        return build

    def tier(self, label: str) -> dict:
        return Cache(self.cache).tier_doc()["stats"].get(label, {})


def outputs(build: Path, dump) -> dict[str, str]:
    """What a build gave: each object's PTX and SASS, the dependencies ninja recorded, the
    program's output."""
    out = {str(p.relative_to(build)): dump(p) for p in sorted(build.rglob("*.cu.o"))}
    assert len(out) == 5
    deps = proc.run(["ninja", "-C", str(build), "-t", "deps"],
                    env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}).stdout
    # ninja's deps hold when each object was built; the names are what matters.
    out["deps"] = "\n".join(sorted(line.strip() for line in deps.splitlines()
                                   if line.startswith(" ")))
    out["run"] = proc.run([str(build / "app")]).stdout
    return out


@pytest.fixture
def two_runners(tmp_path_factory, toolkit, redis_server):
    root = tmp_path_factory.mktemp("runners")
    return root, Runner(root, "a", toolkit), Runner(root, "b", toolkit), redis_server


def test_same_path_and_a_source_edit(two_runners, dump):
    root, a, b, server = two_runners
    label = server.url
    checkout = root / "checkout"  # every runner checks out here, one after the other
    # Runner A builds main, then its next commit, which edits the shared header.
    a.build(checkout, remote=server.url)
    header = checkout / "include" / "common.h"
    header.write_text(header.read_text().replace("2.0f * x", "3.0f * x"))
    edited = a.build(checkout, remote=server.url, fresh=False)
    assert "scale_on_host(21) = 63" in proc.run([str(edited / "app")]).stdout
    stored = a.tier(label)["stored"]
    assert stored > 0 and a.tier(label)["hits"] == 0
    # Runner B: its own cold build of main, then main again from the remote.
    cold = outputs(Runner(root, "b-cold", a.toolkit).build(checkout), dump)
    assert "scale_on_host(21) = 42" in cold["run"]
    warm = outputs(b.build(checkout, remote=server.url), dump)
    assert warm == cold  # up to the module id: the edit never reached B
    figures = b.tier(label)
    assert figures["misses"] == 0 and figures["hits"] > 0 and figures["rejected"] == 0
    assert figures["bytes_read"] > 0 and figures["stored"] == 0
    assert b.tier("local")["hits"] == 0  # all of it came from the remote


def test_another_path_with_and_without_the_base_folder(two_runners, dump):
    root, a, b, server = two_runners
    label = server.url
    here, there = root / "runner-a" / "src", root / "runner-b" / "work" / "src"
    a.build(here, remote=server.url, base=str(here))
    assert a.tier(label)["stored"] > 0
    cold = outputs(Runner(root, "b-cold", a.toolkit).build(there, base=str(there)), dump)
    warm = outputs(b.build(there, remote=server.url, base=str(there)), dump)
    assert warm == cold
    figures = b.tier(label)
    # Everything but what holds the checkout's absolute path (-lineinfo's line tables, made
    # absolute by cicc, and what is built from them) came from runner A.
    assert figures["hits"] > figures["misses"] > 0 and figures["rejected"] == 0
    # Without the base folder, keys hold the absolute paths: not one hit, and no wrong one.
    c = Runner(root, "c", a.toolkit)
    other = outputs(c.build(root / "runner-c" / "src", remote=server.url), dump)
    assert c.tier(label)["hits"] == 0
    assert other["run"] == cold["run"]
