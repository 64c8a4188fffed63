"""The launcher ended by a signal leaves nothing in $TMPDIR: neither nvstage's scratch nor
nvcc's own ``tmpxft_*`` files. nvcc removes those when interrupted (SIGINT) and leaves them on
SIGTERM and SIGHUP, so the plain nvcc the launcher runs (a command it does not stage, a
failed stage's replay) is ended with SIGINT, and what it still left is removed by its pid.
Real nvcc, a real launcher process, real signals."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from nvstage import proc
from nvstage.compiler.launcher.flow import remove_nvcc_temps
from nvstage.errors import Terminated

HEAVY = (Path(__file__).parents[2] / "data" / "heavy.cu").read_text()  # slow in cicc, ptxas
GENCODES = ["-gencode", "arch=compute_90,code=sm_90", "-gencode", "arch=compute_80,code=sm_80"]
# The launcher as a build starts it, whatever the test runner ignores (a background job's
# SIGINT, nohup's SIGHUP): those signals must reach it.
_LAUNCH = ("import runpy, signal, sys\n"
           "for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):\n"
           "    signal.signal(s, signal.SIG_DFL)\n"
           "sys.argv[0] = 'nvstage'\n"
           "runpy.run_module('nvstage', run_name='__main__')\n")


class Launch:
    """``nvstage NVCC ARGS`` in its own folder, with an empty $TMPDIR of its own, its own
    cache, and a mark every process it starts inherits (how its tools are found in /proc)."""

    def __init__(self, root: Path, toolkit):
        self.root, self.tmp, self.nvcc = root, root / "tmp", toolkit.nvcc
        self.tmp.mkdir()
        (root / "heavy.cu").write_text(HEAVY)
        self.mark = f"{os.getpid()}-{time.monotonic_ns()}"
        self.env = {**os.environ, "TMPDIR": str(self.tmp), "NVSTAGE_JOBS": "4",
                    "NVSTAGE_CACHE_DIR": str(root / "cache"),
                    "NVSTAGE_BUILD_RECORD": str(root / "record"),
                    "NVSTAGE_LAUNCHER_SIGNAL_TEST": self.mark}

    def start(self, *words: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", _LAUNCH, self.nvcc, *words],
                                cwd=self.root, env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def tools(self) -> list[str]:
        """The names of the live processes carrying this launch's mark."""
        return [name for name, _ in self.running()]

    def running(self) -> list[tuple[str, list[bytes]]]:
        """(name, argv) of the live processes carrying this launch's mark."""
        return [(name, argv) for _, _, name, argv in self.processes()]

    def processes(self) -> list[tuple[int, int, str, list[bytes]]]:
        """(pid, parent pid, name, argv) of the live processes carrying this launch's mark."""
        found = []
        want = f"NVSTAGE_LAUNCHER_SIGNAL_TEST={self.mark}".encode()
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    if want in Path(f"/proc/{d}/environ").read_bytes().split(b"\0"):
                        ppid = Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[1]
                        found.append((int(d), int(ppid),
                                      Path(f"/proc/{d}/comm").read_text().strip(),
                                      Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")))
                except (OSError, IndexError, ValueError):
                    pass  # gone meanwhile, or not ours to read
        return found

    def stage_running(self, tool: str) -> bool:
        """``tool`` runs as a stage (not asked its version while the toolkit is probed)."""
        return any(name == tool and b"--version" not in argv for name, argv in self.running())


    def wait_until(self, ready, p: subprocess.Popen, what: str, timeout: float = 120) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end and p.poll() is None:
            if ready():
                return
            time.sleep(0.01)
        raise AssertionError(f"{what} never happened: {p.communicate()}, exit {p.returncode}")

    def left(self, timeout: float = 10.0) -> list[str]:
        """What is in $TMPDIR once no process of the launch runs any more."""
        end = time.monotonic() + timeout
        while self.tools() and time.monotonic() < end:
            time.sleep(0.05)
        assert not self.tools(), self.tools()
        return sorted(os.listdir(self.tmp))


@pytest.fixture
def launch(tmp_path, toolkit) -> Launch:
    return Launch(tmp_path, toolkit)


_SIGNALS = [signal.SIGTERM, signal.SIGHUP, signal.SIGINT]


@pytest.mark.slow
@pytest.mark.parametrize("sig", _SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_a_signal_while_plain_nvcc_runs_leaves_no_tmpxft(launch, sig):
    # A link is not staged: plain nvcc runs it, with its temporary files in $TMPDIR.
    p = launch.start("heavy.cu", "-o", "heavy", *GENCODES)
    launch.wait_until(lambda: any(n.startswith("tmpxft_") for n in os.listdir(launch.tmp))
                      and "cicc" in launch.tools(), p, "plain nvcc at work")
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 128 + sig, err
    assert "Traceback" not in err, err
    assert launch.left() == []
    assert not (launch.root / "heavy").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig, moment", [
    (signal.SIGTERM, 0.3), (signal.SIGHUP, 1.0), (signal.SIGTERM, "cicc"),
    (signal.SIGHUP, "cicc"), (signal.SIGINT, "cicc"), (signal.SIGTERM, "ptxas")],
    ids=lambda v: signal.Signals(v).name if isinstance(v, int) else str(v))
def test_a_signal_mid_staged_build_leaves_nothing(launch, sig, moment):
    """At a stage, or a moment into the command (planning, the toolkit's probe: its tools
    asked their versions in threads, whose scratch folders a signal there left behind)."""
    p = launch.start("-c", "heavy.cu", "-o", "heavy.o", *GENCODES)
    if isinstance(moment, float):
        time.sleep(moment)
    else:
        launch.wait_until(lambda: launch.stage_running(moment), p, f"{moment} running")
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    # Before nvstage takes the signals (Python starting) the default action ends it.
    assert p.returncode in ((128 + sig, -sig) if isinstance(moment, float) else (128 + sig,)), err
    assert launch.left() == []
    assert not (launch.root / "heavy.o").exists()


_CHILD = """
import signal, sys, time
def said(s, _):
    open(sys.argv[1], "w").write(signal.Signals(s).name)
    sys.exit(1)
for s in (signal.SIGINT, signal.SIGTERM):
    signal.signal(s, said)
open(sys.argv[1] + ".up", "w").close()
time.sleep(60)
"""


def test_call_ends_its_child_with_the_stop_signal_then_asks_for_leftovers(tmp_path):
    said, left = tmp_path / "said", []
    up = Path(f"{said}.up")

    def send():
        end = time.monotonic() + 30
        while not up.exists() and time.monotonic() < end:
            time.sleep(0.01)
        if up.exists():  # only into the call (never at this process once it has ended)
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=send, daemon=True).start()
    with pytest.raises(Terminated), proc.handle_signals():
        proc.call([sys.executable, "-c", _CHILD, str(said)], stop=signal.SIGINT,
                  leftovers=lambda pid, since: left.append((pid, since)))
    assert said.read_text() == "SIGINT"  # asked once, with its own signal: not SIGTERM
    ((pid, since),) = left
    assert pid > 0 and since <= time.time_ns()


def test_only_the_ended_nvccs_own_new_temporary_files_are_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    pid = 0x1234
    since = time.time_ns()
    ours = [tmp_path / f"tmpxft_{pid:08x}_00000000{s}" for s in ("", "-1", "-2.cpp")]
    for f in ours:
        f.write_text("x")
    other = tmp_path / f"tmpxft_{pid + 1:08x}_00000000-1"  # another nvcc's
    other.write_text("x")
    folder = tmp_path / f"tmpxft_{pid:08x}_00000000-9"  # not a file nvcc makes
    folder.mkdir()
    link = tmp_path / f"tmpxft_{pid:08x}_00000000-8"
    link.symlink_to(other)
    remove_nvcc_temps(pid, since)
    assert not any(f.exists() for f in ours)
    assert other.exists() and folder.is_dir() and link.is_symlink()
    # Made before that nvcc started: an older process's with the same number, not its.
    old = tmp_path / f"tmpxft_{pid:08x}_00000001-1"
    old.write_text("x")
    remove_nvcc_temps(pid, time.time_ns() + 1_000_000_000)
    assert old.exists()


def test_a_signal_while_the_toolkit_is_probed_waits_for_the_probes(tmp_path, monkeypatch):
    from nvstage.compiler.toolkit import locate as toolkit

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr("tempfile.tempdir", None)  # mkdtemp reads $TMPDIR again
    tools = []
    for name in ("slow-a", "slow-b", "slow-c"):  # asked together, in threads
        t = tmp_path / name
        t.write_text(f"#!/bin/sh\n: > {tmp_path}/{name}.up\nexec sleep 30\n")
        t.chmod(0o755)
        tools.append(str(t))

    def send():
        end = time.monotonic() + 30
        while len(list(tmp_path.glob("*.up"))) < len(tools) and time.monotonic() < end:
            time.sleep(0.01)
        if len(list(tmp_path.glob("*.up"))) == len(tools):
            os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=send, daemon=True).start()
    with pytest.raises(Terminated), proc.handle_signals():
        toolkit._cached_versions(tools)
    # Every probe has finished, its tool ended and its scratch folder removed.
    assert sorted(os.listdir(tmp)) == []
    assert not [th for th in threading.enumerate() if th.name.endswith("(run)")]


@pytest.mark.slow
def test_a_signal_to_a_launcher_whose_command_the_resident_runs(tmp_path, toolkit):
    # The client passes SIGTERM on to the server's child that runs its command: the tools end,
    # nothing is left in $TMPDIR, and the client exits as the launcher would.
    run = Path(tempfile.mkdtemp(prefix="nvs-", dir="/tmp"))  # a socket path's 107 bytes
    launch = Launch(tmp_path, toolkit)
    # One helper beside the server, whatever the cores: both are there before the command.
    launch.env.update(NVSTAGE_SERVER="1", XDG_RUNTIME_DIR=str(run), NVSTAGE_SERVER_HELPERS="1")
    stop = [sys.executable, "-m", "nvstage.compiler.launcher.resident.server", "--stop", str(tmp_path / "cache")]
    try:
        (tmp_path / "small.cu").write_text("__global__ void k(int* p) { *p = 1; }\n")
        first = launch.start("-c", "small.cu", "-o", "small.o", "-arch=sm_90")
        assert first.wait(timeout=600) == 0, first.communicate()
        socks = run / "nvstage"
        end = time.monotonic() + 60
        while not (socks.is_dir() and sum(n.endswith(".sock") for n in os.listdir(socks)) >= 2
                   and len(launch.processes()) == 2):
            assert time.monotonic() < end, "no resident nvstage"
            time.sleep(0.1)
        server = {pid for pid, *_ in launch.processes()}  # started by the first command
        p = launch.start("-c", "heavy.cu", "-o", "heavy.o", *GENCODES)
        launch.wait_until(lambda: launch.stage_running("cicc"), p, "cicc running")
        # The command runs in the server's child: cicc is no child of the launcher's.
        assert p.pid not in [ppid for _, ppid, name, _ in launch.processes() if name == "cicc"]
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        assert p.returncode == 128 + signal.SIGTERM, err
        assert "Traceback" not in err, err
        end = time.monotonic() + 10
        while {pid for pid, *_ in launch.processes()} - server and time.monotonic() < end:
            time.sleep(0.05)
        assert not {pid for pid, *_ in launch.processes()} - server
        assert os.listdir(launch.tmp) == []
        assert not (launch.root / "heavy.o").exists()
    finally:
        proc.run(stop, env=launch.env, timeout=60)
        shutil.rmtree(run, ignore_errors=True)

