"""The resident nvstage (on by default, NVSTAGE_SERVER=0 refuses it): a command it runs gives plain
nvcc's object, it holds none of a build's streams, and --stop ends it leaving neither its socket
nor its lock behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nvstage import proc

from .resident_procs import residents as _residents

# nvcc's per-run tokens, as tests/compiler/launcher/test_launcher_bytes.py masks them.
_RUN_TOKENS = re.compile(rb"tmpxft_[0-9a-f]{8}_|\d*_INTERNAL_[0-9a-f]{8}_\d+_\w+?_[0-9a-f]{8}"
                         rb"(?:_\d+)?|\d*_GLOBAL__N__[0-9a-f]{8}_\d+_\w+?_[0-9a-f]{8}(?:_\d+)?"
                         rb"|__nv_module_id_\w+")


def _mask(data: bytes) -> bytes:
    return _RUN_TOKENS.sub(b"<run>", data)


def _launcher() -> list[str]:
    script = Path(sys.executable).parent / "nvstage"
    return [str(script)] if script.exists() else [sys.executable, "-m", "nvstage"]


def _server_files(run: Path) -> list[str]:
    folder = run / "nvstage"
    return sorted(os.listdir(folder)) if folder.is_dir() else []


def test_a_command_the_resident_nvstage_runs_is_plain_nvccs(toolkit, kernels, tmp_path):
    # A socket's path holds 107 bytes at most: pytest's folders are longer.
    run = Path(tempfile.mkdtemp(prefix="nvs-", dir="/tmp"))
    try:
        _served(toolkit, kernels, tmp_path, run)
    finally:
        shutil.rmtree(run, ignore_errors=True)


def _served(toolkit, kernels, tmp_path: Path, run: Path) -> None:
    cache = tmp_path / "cache"
    env = dict(os.environ, NVSTAGE_SERVER="1", NVSTAGE_CACHE_DIR=str(cache),
               NVSTAGE_BUILD_RECORD=str(tmp_path / "record"), XDG_RUNTIME_DIR=str(run))
    shutil.copy(kernels / "vadd.cu", tmp_path / "vadd.cu")
    words = ["-c", "-arch=sm_90", "vadd.cu"]
    stop = [sys.executable, "-m", "nvstage.compiler.launcher.resident.server", "--stop", str(cache)]
    try:
        # The first miss runs here and starts a server for the next commands.
        first = proc.run([*_launcher(), toolkit.nvcc, *words, "-o", "a.o"], cwd=tmp_path,
                         env=env, timeout=600)
        assert first.returncode == 0, first.stderr
        for _ in range(300):
            if any(f.endswith(".sock") for f in _server_files(run)):
                break
            time.sleep(0.1)
        assert any(f.endswith(".sock") for f in _server_files(run)), _server_files(run)
        # A changed source misses again: the server runs it.
        src = tmp_path / "vadd.cu"
        src.write_text(src.read_text() + "\n__device__ int resident_test_marker;\n")
        record = tmp_path / "record" / "tu"
        before = set(os.listdir(record))
        with subprocess.Popen([*_launcher(), toolkit.nvcc, *words, "-o", "b.o"], cwd=tmp_path,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as served:
            _, err = served.communicate(timeout=600)
        assert served.returncode == 0, err
        # Its build record entry (named <start>-<pid>-<n>.json) was written by the server's
        # child, not by the launcher process the build started.
        (new,) = set(os.listdir(record)) - before
        assert int(new.split("-")[1]) != served.pid
        # ... and grouped with the build the launcher was part of (its parent's, this test's
        # process), as the first command's entry, run in the launcher itself, was.
        ids = {json.loads((record / n).read_text())["build_id"] for n in os.listdir(record)}
        assert len(ids) == 1 and None not in ids, ids
        # A command plain nvcc runs (not staged) writes to the client's streams: they reach
        # the server's child inheritable.
        version = proc.run([*_launcher(), toolkit.nvcc, "--version"], cwd=tmp_path, env=env,
                           timeout=120)
        assert version.returncode == 0 and "Cuda compilation tools" in version.stdout, \
            version.stderr
        plain = proc.run([toolkit.nvcc, *words, "-o", "p.o"], cwd=tmp_path, env=env,
                         timeout=600)
        assert plain.returncode == 0, plain.stderr
        assert _mask((tmp_path / "b.o").read_bytes()) == _mask((tmp_path / "p.o").read_bytes())
    finally:
        stopped = proc.run(stop, cwd=tmp_path, env=env, timeout=60)
    assert stopped.returncode == 0  # a server ran
    assert _server_files(run) == []  # its socket and its lock are gone with it


def test_by_default_a_server_starts_and_holds_none_of_the_builds_streams(toolkit, kernels,
                                                                          tmp_path):
    # A build piped to tee, or run by subprocess.run(capture_output=True), ends when its last
    # command does: the server (600 s idle) and its children keep none of their pipes open.
    run = Path(tempfile.mkdtemp(prefix="nvs-", dir="/tmp"))
    cache = tmp_path / "cache"
    env = {k: v for k, v in os.environ.items() if k != "NVSTAGE_SERVER"}
    env.update(NVSTAGE_CACHE_DIR=str(cache), XDG_RUNTIME_DIR=str(run))
    src = tmp_path / "vadd.cu"
    shutil.copy(kernels / "vadd.cu", src)
    nvcc = [*_launcher(), toolkit.nvcc, "-c", "-arch=sm_90", "vadd.cu"]
    try:
        refused = subprocess.run([*nvcc, "-o", "r.o"], cwd=tmp_path, capture_output=True,
                                 env=dict(env, NVSTAGE_SERVER="0"), timeout=120)
        assert refused.returncode == 0, refused.stderr
        time.sleep(1)
        assert _residents(cache) == [] and _server_files(run) == []
        first = subprocess.run([*nvcc, "-o", "a.o"], cwd=tmp_path, env=env,
                               capture_output=True, timeout=120)
        assert first.returncode == 0, first.stderr
        _until(lambda: any(f.endswith(".sock") for f in _server_files(run)))
        assert _residents(cache)
        # A miss the server's child runs, piped as `nvstage nvcc ... | cat` is.
        src.write_text(src.read_text() + "\n__device__ int resident_default_marker;\n")
        piped = subprocess.run(["sh", "-c", '"$@" 2>&1 | cat', "sh", *nvcc, "-o", "b.o",
                                "-Xptxas", "-v"], cwd=tmp_path, env=env,
                               capture_output=True, timeout=120)
        assert piped.returncode == 0 and b"registers" in piped.stdout, piped.stdout
        assert (tmp_path / "b.o").is_file()
    finally:
        subprocess.run([sys.executable, "-m", "nvstage.compiler.launcher.resident.server",
                        "--stop", str(cache)], env=env, capture_output=True, timeout=60)
        shutil.rmtree(run, ignore_errors=True)


def _until(what, seconds: float = 60.0) -> None:
    end = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < end
        time.sleep(0.05)


def test_helpers_answer_hits_beside_the_server_and_end_with_it(toolkit, kernels, tmp_path):
    # The server forks helpers that answer hits on the same socket: with the server itself
    # stopped, a hit is still answered (by a helper), whole and right; killed, the helpers end.
    run = Path(tempfile.mkdtemp(prefix="nvs-", dir="/tmp"))
    cache = tmp_path / "cache"
    env = dict(os.environ, NVSTAGE_SERVER="1", NVSTAGE_CACHE_DIR=str(cache),
               NVSTAGE_BUILD_RECORD=str(tmp_path / "record"), XDG_RUNTIME_DIR=str(run),
               NVSTAGE_SERVER_HELPERS="2")
    shutil.copy(kernels / "vadd.cu", tmp_path / "vadd.cu")
    argv = [*_launcher(), toolkit.nvcc, "-c", "-arch=sm_90", "vadd.cu", "-o", "a.o"]
    server = None
    try:
        assert proc.run(argv, cwd=tmp_path, env=env, timeout=600).returncode == 0
        _until(lambda: len(_residents(cache)) == 3)
        pids = _residents(cache)
        (server,) = [pid for pid, ppid in pids if ppid not in {p for p, _ in pids}]
        assert sorted(ppid for pid, ppid in pids if pid != server).count(server) == 2
        built = (tmp_path / "a.o").read_bytes()
        os.kill(server, signal.SIGSTOP)  # only a helper can answer now
        try:
            (tmp_path / "a.o").unlink()
            hit = proc.run(argv, cwd=tmp_path, env=env, timeout=60)
            assert hit.returncode == 0, hit.stderr
            assert (tmp_path / "a.o").read_bytes() == built
        finally:
            os.kill(server, signal.SIGCONT)
        os.kill(server, signal.SIGKILL)  # not even its clean-up runs: the helpers see it gone
        _until(lambda: _residents(cache) == [], 30)
    finally:
        if server is not None:
            with contextlib.suppress(OSError):
                os.kill(server, signal.SIGKILL)
        shutil.rmtree(run, ignore_errors=True)


class _Server:
    """A resident nvstage started by a first command (a miss) in ``tmp_path``, with
    ``helpers`` helpers; ``pids``: the server's, then its helpers'."""

    def __init__(self, toolkit, kernels, tmp_path: Path, helpers: int, idle: float = 600):
        self.run = Path(tempfile.mkdtemp(prefix="nvs-", dir="/tmp"))
        self.cache = tmp_path / "cache"
        self.env = dict(os.environ, NVSTAGE_SERVER="1", NVSTAGE_CACHE_DIR=str(self.cache),
                        NVSTAGE_BUILD_RECORD=str(tmp_path / "record"),
                        XDG_RUNTIME_DIR=str(self.run), NVSTAGE_SERVER_HELPERS=str(helpers),
                        NVSTAGE_SERVER_IDLE=str(idle))
        shutil.copy(kernels / "vadd.cu", tmp_path / "vadd.cu")
        self.argv = [*_launcher(), toolkit.nvcc, "-c", "-arch=sm_90", "vadd.cu", "-o", "a.o"]
        self.cwd = tmp_path
        assert self.command().returncode == 0
        _until(lambda: len(_residents(self.cache)) == 1 + helpers)
        got = _residents(self.cache)
        (main,) = [pid for pid, ppid in got if ppid not in {p for p, _ in got}]
        self.pids = [main, *(pid for pid, _ in got if pid != main)]

    def command(self):
        return proc.run(self.argv, cwd=self.cwd, env=self.env, timeout=600)

    def close(self):
        for pid in self.pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.run, ignore_errors=True)


def test_hits_its_helpers_answer_keep_the_server_from_leaving_idle(toolkit, kernels, tmp_path):
    # The server stopped while its helper answers hits for longer than its idle time: once it
    # runs again, its first look at the clock (a select's timeout, 5 s, the rest of one begun
    # before the stop) counts those hits as its own and it stays; it leaves idle after them.
    server = _Server(toolkit, kernels, tmp_path, helpers=1, idle=8)
    try:
        os.kill(server.pids[0], signal.SIGSTOP)
        try:
            end = time.monotonic() + 9
            while time.monotonic() < end:
                assert server.command().returncode == 0
                time.sleep(0.5)
        finally:
            os.kill(server.pids[0], signal.SIGCONT)
        time.sleep(7)  # past its first look (by 5 s): with the helper's hits counted, there
        assert server.pids[0] in [p for p, _ in _residents(server.cache)]
        _until(lambda: _residents(server.cache) == [], 30)  # then idle indeed: gone
    finally:
        server.close()


def test_a_server_whose_hit_socket_a_newer_one_took_leaves(toolkit, kernels, tmp_path):
    # Its code changed, a newer server took the hit socket's name: this one, which nothing can
    # reach for hits any more, leaves at its next look (5 s), not after its idle time (600 s).
    server = _Server(toolkit, kernels, tmp_path, helpers=1)
    try:
        from nvstage.compiler.launcher.resident import ask

        name = ask.name(server.env)
        os.unlink(name)  # as a newer server (newer code) takes the name
        import socket

        newer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        newer.bind(name)
        try:
            _until(lambda: _residents(server.cache) == [], 30)
        finally:
            newer.close()
    finally:
        server.close()


def test_a_stopped_helper_does_not_keep_the_server_alive(toolkit, kernels, tmp_path):
    server = _Server(toolkit, kernels, tmp_path, helpers=2)
    try:
        os.kill(server.pids[1], signal.SIGSTOP)
        stop = [sys.executable, "-m", "nvstage.compiler.launcher.resident.server", "--stop", str(server.cache)]
        assert proc.run(stop, cwd=tmp_path, env=server.env, timeout=60).returncode == 0
        _until(lambda: _residents(server.cache) == [], 10)
        assert _server_files(server.run) == []
    finally:
        server.close()
