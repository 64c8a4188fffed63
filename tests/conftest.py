"""Shared fixtures: the real toolkit, the bundled kernels, a CLI runner, the gpu marker."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture(scope="session")
def toolkit():
    from nvstage.compiler.toolkit.locate import find_toolkit

    return find_toolkit()


@pytest.fixture(scope="session")
def kernels() -> Path:
    return KERNELS


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """A fresh current folder for a build."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@pytest.fixture
def cli(monkeypatch):
    """Invoke the nvstage CLI in-process (its entry point, cli/main.py) with a fixed width and
    no colour; stdout and stderr captured apart."""
    import io
    import sys

    from nvstage.cli.main import run

    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "160")

    def invoke(*args: str) -> CliResult:
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        try:
            code = run([str(a) for a in args])
        finally:
            monkeypatch.setattr(sys, "stdout", sys.__stdout__)
            monkeypatch.setattr(sys, "stderr", sys.__stderr__)
        return CliResult(code, out.getvalue(), err.getvalue())

    return invoke


_SESSION: dict[str, str] = {}


def pytest_configure(config):
    """One folder for everything the session makes: the cache, the cache's key, and $TMPDIR
    (what nvstage and its tools leave in a temporary folder is checked at the end)."""
    import tempfile

    if "session" in _SESSION:  # pytest-xdist workers and re-entrant configures: once
        return
    root = tempfile.mkdtemp(prefix="nvstage-test-session-")
    _SESSION.update(session=root, tmp=os.path.join(root, "tmp"),
                    system=tempfile.gettempdir(), before=" ".join(_temp_names()))
    os.makedirs(_SESSION["tmp"])
    # Tests never read or fill the user's cache, nor the user's cache key (kept beside it).
    if "NVSTAGE_CACHE_DIR" not in os.environ or os.environ.get("NVSTAGE_TEST_KEEP_CACHE") != "1":
        os.environ["NVSTAGE_CACHE_DIR"] = os.path.join(root, "cache")
    os.environ["XDG_CONFIG_HOME"] = os.path.join(root, "config")
    os.environ["TMPDIR"] = _SESSION["tmp"]
    # No resident nvstage outlives a test (tests/compiler/launcher/resident/test_resident.py starts and stops
    # its own).
    os.environ["NVSTAGE_SERVER"] = "0"
    tempfile.tempdir = None  # gettempdir() reads $TMPDIR again


def pytest_unconfigure(config):
    """The session's folder goes at the very end, however the session ended: after a
    ``--collect-only`` (no test, so no fixture's teardown), an interrupt or a usage error too."""
    import shutil

    if "session" in _SESSION:
        shutil.rmtree(_SESSION["session"], ignore_errors=True)


def _temp_names() -> list[str]:
    import tempfile

    try:
        return sorted(os.listdir(_SESSION.get("system") or tempfile.gettempdir()))
    except OSError:
        return []


@pytest.fixture(scope="session", autouse=True)
def nothing_left_behind():
    """At the end: $TMPDIR holds nothing but pytest's own folders; with
    NVSTAGE_TEST_STRICT_TMP=1 (.ci/run, where nothing else runs) nothing new appeared in the
    system's temporary folder either."""
    yield
    import shutil

    left = [n for n in os.listdir(_SESSION["tmp"]) if not n.startswith("pytest-of-")]
    new = sorted(set(_temp_names()) - set(_SESSION["before"].split()) -
                 {os.path.basename(_SESSION["session"])})
    shutil.rmtree(_SESSION["session"], ignore_errors=True)
    assert not left, f"tests left these in $TMPDIR: {left[:20]}"
    if os.environ.get("NVSTAGE_TEST_STRICT_TMP") == "1":
        assert not new, f"tests left these in {_SESSION['system']}: {new[:20]}"


def pytest_collection_modifyitems(config, items):
    if not any(item.get_closest_marker("gpu") for item in items):
        return
    from nvstage.run.probe import probe

    p = probe()
    if p.available:
        return
    if os.environ.get("NVSTAGE_REQUIRE_GPU") == "1":
        # A job that claims a GPU (CI's gpu job) must fail without one, not pass by skipping.
        raise pytest.UsageError(f"NVSTAGE_REQUIRE_GPU=1 but this machine has no GPU: "
                                f"{p.reason}")
    skip = pytest.mark.skip(reason=f"needs a GPU: {p.reason}")
    for item in items:
        if item.get_closest_marker("gpu"):
            item.add_marker(skip)


def has_system_toolkit() -> bool:
    return os.path.isfile("/usr/local/cuda/bin/nvcc")


# --- Builds shared by the inspect, show, occupancy and diff tests: each made once a session.

CAPTURED = DATA / "captured"


@pytest.fixture(scope="session")
def captured() -> Path:
    """Tool output captured from CUDA 13.5 (ptxas -v, cuobjdump, nvdisasm) and PTX files."""
    return CAPTURED


@pytest.fixture(scope="session")
def reference(toolkit):
    """Run one of the toolkit's own tools (cuobjdump, nvdisasm, ptxas) and return its output:
    the reference the readers are checked against."""
    import subprocess

    def run(name: str, *args, cwd=None) -> str:
        cp = subprocess.run([toolkit.tool(name), *map(str, args)], capture_output=True,
                            text=True, cwd=cwd)
        assert cp.returncode == 0, cp.stderr
        return cp.stdout + cp.stderr

    return run


# nvcc's own per-run names (the module id and what is derived from it), temporary names.
NVCC_RUN_NAMES = re.compile(
    r"(_[0-9a-f]{8}_[0-9a-f]{2,}_[A-Za-z0-9_]+?_[0-9a-f]{8}|__nv_module_id_\w+|"
    r"_GLOBAL__N__[0-9a-f_]+\w*|tmpxft_[0-9a-f_]+|/tmp/[\w.-]+)")


@pytest.fixture(scope="session")
def dump(toolkit):
    """``dump(obj, flags=("-ptx", "-sass"))``: cuobjdump's listing of every image in an
    object, nvcc's per-run names normalised: two builds of one source compare equal exactly
    when they differ only in the module id."""
    from nvstage import proc

    def run(obj, flags=("-ptx", "-sass")) -> str:
        out = []
        for flag in flags:
            cp = proc.run([toolkit.tool("cuobjdump"), flag, str(obj)], timeout=300)
            assert cp.returncode == 0, cp.stderr
            out.append(NVCC_RUN_NAMES.sub("<id>", cp.stdout))
        return "\n".join(out)

    return run


@pytest.fixture(scope="session")
def built(toolkit, kernels, tmp_path_factory):
    """(folder, builds): multi.o (sm_80 + sm_90 + PTX) by plain nvcc with -Xptxas -v (its
    report in multi_ptxas.txt), saxpy.sm_90.cubin with -lineinfo, and kept nvstage builds of
    spill.cu (plain, and -maxrregcount=16) and vadd.cu."""
    import shutil
    import subprocess

    import nvstage
    from nvstage.compiler.nvcc.options import CompileOptions

    root = tmp_path_factory.mktemp("built")
    for k in ("multi.cu", "spill.cu", "vadd.cu", "saxpy.cu"):
        shutil.copy(kernels / k, root)

    def nvcc(*args: str) -> str:
        cp = subprocess.run([toolkit.nvcc, *args], cwd=root, capture_output=True, text=True)
        assert cp.returncode == 0, cp.stderr
        return cp.stderr

    (root / "multi_ptxas.txt").write_text(nvcc(
        "-c", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
        "arch=compute_90,code=[sm_90,compute_90]", "-Xptxas", "-v", "multi.cu", "-o", "multi.o"))
    nvcc("--cubin", "-arch=sm_90", "-lineinfo", "saxpy.cu", "-o", "saxpy.sm_90.cubin")
    spill = dict(archs=("sm_90",), stop="cubin", resource_usage=True)
    builds = {
        "spill": nvstage.compile("spill.cu", CompileOptions(**spill, output="spill.cubin"),
                                 toolkit=toolkit, keep="spill.keep", cwd=root),
        "spill16": nvstage.compile("spill.cu", CompileOptions(**spill, maxrregcount=16,
                                                              output="spill16.cubin"),
                                   toolkit=toolkit, keep="spill16.keep", cwd=root),
        "vadd": nvstage.compile("vadd.cu", CompileOptions(archs=("sm_90",), output="vadd"),
                                toolkit=toolkit, keep="vadd.keep", cwd=root),
    }
    return root, builds


def _load_by_path(file: str):
    """A module of tests/ by its path (the tests run in importlib mode: no package to import
    it from), once a session."""
    import importlib.util
    import sys

    name = "_nvstage_" + file.removesuffix(".py")
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / file)
        sys.modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[name])
    return sys.modules[name]


# The test project built once a session through the launcher (tests/cuproject_record.py),
# for the build-record tests.
cuproject_record = _load_by_path("cuproject_record.py").cuproject_record


def load_triton_builds():
    """tests/triton_builds.py (by path, as cuproject_record): what the Triton tests share."""
    return _load_by_path("triton_builds.py")


@pytest.fixture(scope="session")
def triton_kit():
    """tests/triton_builds.py; skipped where Triton is not installed (.ci/run installs it:
    the triton extra)."""
    from nvstage.extras import TRITON

    pytest.importorskip("triton", reason=f"Triton is not installed ({TRITON})")
    return load_triton_builds()


@pytest.fixture(scope="session")
def triton_chain(triton_kit, toolkit, tmp_path_factory):
    """The bundled Triton chain, each kernel kept for sm_90: kernel -> keep folder."""
    return triton_kit.build_chain(tmp_path_factory.mktemp("triton-chain"), toolkit)


@pytest.fixture
def fresh_tiers(monkeypatch):
    """No remote tier remembered and none configured, and lines said about tiers collected
    (``tier.notice``) instead of printed: the list is the fixture's value."""
    from nvstage.compiler.cache.remote.config import reset
    from nvstage.compiler.cache.remote.spec import _ENV, ENV_BACKOFF
    from nvstage.compiler.cache.remote.tier import set_notice_sink

    for name in (*_ENV, ENV_BACKOFF, "NVSTAGE_BASE_DIR"):
        monkeypatch.delenv(name, raising=False)
    reset()
    said: list[str] = []
    set_notice_sink(said.append)
    yield said
    set_notice_sink(None)
    reset()


# What a full hit may import: the standard library, and of nvstage the entry point, the base
# (fsio, paths) and the hit path's modules (tests/test_imports.py names them). Nothing else
# of nvstage, no third-party module.
def _hit_path() -> tuple[tuple[str, ...], tuple[str, ...]]:
    # The hit path's modules and packages as tests/test_imports.py names them: one list.
    spec = importlib.util.spec_from_file_location("_nvstage_hit_path",
                                                  Path(__file__).parent / "test_imports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.HIT_PATH, module.HIT_PACKAGES


WARM_MODULES = frozenset({"nvstage", "nvstage.cli", "nvstage.cli.main", "nvstage.cli.launcher",
                          "nvstage.fsio", "nvstage.paths", *(m for ms in _hit_path() for m in ms),
                          # the launcher's flow: a hit runs its first steps alone (what
                          # the rest needs is imported where it is run)
                          "nvstage.compiler.launcher.flow",
                          # zstd's extension alone, its package's __init__ not run
                          # (``compiler/store/zstd.py``); Python 3.14's is standard
                          "backports.zstd._zstd"})


@pytest.fixture
def beyond_the_warm_path():
    """``f(modules, also=())``: the modules of ``modules`` a whole-command answer may not
    import: not the standard library, not ``WARM_MODULES`` or
    ``also``; json, hashlib, hmac, re and pathlib neither (milliseconds each)."""
    def beyond(modules, also=()) -> list[str]:
        allowed = WARM_MODULES | set(also)
        return sorted(m for m in modules
                      if m in ("json", "hashlib", "hmac", "re", "pathlib")
                      or (m.split(".")[0] not in sys.stdlib_module_names
                          and m not in allowed))
    return beyond
