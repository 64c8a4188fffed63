"""nvstage compile ended by a signal mid-build: no tool of the build outlives it, no scratch
folder stays behind, a kept folder never claims "ok" over a half-rebuilt mix, and the next
build is right. Real nvcc, a real `python -m nvstage` process, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HEAVY = (Path(__file__).parents[1] / "data" / "heavy.cu").read_text()  # slow in cicc, ptxas
ARGS = ["heavy.cu", "-c", "--arch", "sm_90"]
# The signals these tests send. A suite started with them ignored (`nohup pytest &` ignores
# SIGHUP, and a background job's SIGINT) would hand SIG_IGN to each build it starts, which
# nvstage keeps on purpose (a nohup'ed build survives a hangup): the builds here are started
# as from a terminal instead.
SENT = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _as_from_a_terminal() -> None:
    for s in SENT:
        signal.signal(s, signal.SIG_DFL)


class Build:
    """One `nvstage compile` process with its own $TMPDIR and cache, and a mark in its
    environment that every process it starts inherits: how its tools are found in /proc."""

    def __init__(self, root: Path):
        self.root, self.tmp, self.cache = root, root / "tmp", root / "cache"
        self.tmp.mkdir(exist_ok=True)
        self.mark = f"NVSTAGE_SIGNAL_TEST={os.getpid()}-{time.monotonic_ns()}"
        self.env = {**os.environ, "TMPDIR": str(self.tmp), "NVSTAGE_CACHE_DIR": str(self.cache),
                    self.mark.split("=")[0]: self.mark.split("=")[1]}
        self.env.pop("COLUMNS", None)

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "nvstage", "compile", *args],
                                cwd=self.root, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True,
                                preexec_fn=_as_from_a_terminal)

    def tools(self) -> list[tuple[int, str]]:
        """(pid, name) of every live process carrying this build's mark."""
        found = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                environ = Path(f"/proc/{d}/environ").read_bytes().split(b"\0")
                if self.mark.encode() in environ:
                    found.append((int(d), Path(f"/proc/{d}/comm").read_text().strip()))
            except OSError:
                pass  # gone meanwhile, or not ours to read
        return found

    def wait_for(self, tool: str, p: subprocess.Popen, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end and p.poll() is None:
            if any(name == tool for _, name in self.tools()):
                return
            time.sleep(0.005)
        raise AssertionError(f"{tool} never ran: {p.communicate()}")

    def none_left(self, timeout: float = 5.0) -> bool:
        end = time.monotonic() + timeout
        while self.tools():
            if time.monotonic() > end:
                return False
            time.sleep(0.05)
        return True


@pytest.fixture
def build(tmp_path) -> Build:
    (tmp_path / "heavy.cu").write_text(HEAVY)
    return Build(tmp_path)


def _sass(toolkit, path) -> str:
    out = subprocess.run([toolkit.tool("cuobjdump"), "-sass", str(path)], capture_output=True,
                         text=True, check=True).stdout
    return "\n".join(line for line in out.splitlines()
                     if not line.startswith(("Fatbin", "\tcode for")))


def test_builds_here_take_signals_even_under_nohup(build):
    """With SIGINT and SIGHUP ignored in the suite (as `nohup pytest &` starts it), the
    builds these tests signal still take them: nothing is ignored in the build's process."""
    before = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGHUP)}
    try:
        p = build.start("--version")
    finally:
        for s, h in before.items():
            signal.signal(s, h)
    try:
        status = Path(f"/proc/{p.pid}/status").read_text()  # after exec: Popen waited for it
        ignored = int(next(ln for ln in status.splitlines()
                           if ln.startswith("SigIgn:")).split()[1], 16)
        assert not any(ignored & (1 << (s - 1)) for s in SENT), hex(ignored)
    finally:
        p.communicate(timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_mid_compile_leaves_no_tool_and_no_scratch(sig, build, toolkit):
    p = build.start(*ARGS)
    build.wait_for("cicc", p)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, err
    assert f"terminated by {signal.Signals(sig).name}" in err and "Traceback" not in err
    assert build.none_left(), build.tools()  # cicc was not left to PID 1
    assert list(build.tmp.iterdir()) == []  # neither nvstage-* nor a tool's temporary files
    assert list(build.cache.rglob("deps-*")) == []  # the cache's scratch for this build
    assert not (build.root / "heavy.o").exists()

    # The next build (stages finished before the signal now come from the cache) is right.
    p = build.start(*ARGS)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    subprocess.run([toolkit.nvcc, "-c", "-arch=sm_90", "heavy.cu", "-o", "plain.o"],
                   cwd=build.root, check=True, capture_output=True)
    assert _sass(toolkit, build.root / "heavy.o") == _sass(toolkit, build.root / "plain.o")
    assert list(build.tmp.iterdir()) == []


@pytest.mark.slow
def test_sigint_during_a_keep_rebuild_leaves_no_stale_ok(build):
    p = build.start(*ARGS, "--keep", "--no-cache")
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    manifest = build.root / "heavy.nvstage" / "stages.json"
    assert json.loads(manifest.read_text())["status"] == "ok"
    done = {s["kind"] for s in json.loads(manifest.read_text())["stages"]}

    p = build.start(*ARGS, "--keep", "--no-cache")
    build.wait_for("cicc", p)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "interrupted" in err, err
    assert build.none_left(), build.tools()
    doc = json.loads(manifest.read_text())
    # The folder now mixes this build's early files with the last build's later ones: the
    # manifest says so, and lists only what this build finished.
    assert doc["status"] == "interrupted" and "SIGINT" in doc["error"]["message"]
    kinds = [s["kind"] for s in doc["stages"]]
    assert "cicc" not in kinds and "host-compile" not in kinds and set(kinds) < done
    assert all(s["returncode"] == 0 for s in doc["stages"])
    assert list(build.tmp.iterdir()) == []


@pytest.mark.slow
def test_sigkill_mid_keep_rebuild_leaves_running_not_ok(build):
    # No handler runs on SIGKILL: the manifest written before the first stage says it all.
    p = build.start(*ARGS, "--keep", "--no-cache")
    assert p.communicate(timeout=300) and p.returncode == 0
    p = build.start(*ARGS, "--keep", "--no-cache")
    build.wait_for("cicc", p)
    p.kill()
    p.communicate(timeout=60)
    doc = json.loads((build.root / "heavy.nvstage" / "stages.json").read_text())
    assert doc["status"] == "running" and doc["stages"] == [] and doc["artifacts"] == []
    for pid, _ in build.tools():  # SIGKILL leaves the tools running: the test ends them
        os.kill(pid, signal.SIGKILL)


def test_a_signal_while_nvcc_hangs_ends_it_and_its_child(build, tmp_path):
    # A --nvcc that never answers (here: its --version) with a child of its own.
    fake = tmp_path / "hanging-nvcc"
    fake.write_text("#!/bin/sh\nsleep 300 &\nwait\n")
    fake.chmod(0o755)
    p = build.start(*ARGS, "--nvcc", str(fake))
    build.wait_for("sleep", p)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143 and "Traceback" not in err, err
    assert build.none_left(), build.tools()
