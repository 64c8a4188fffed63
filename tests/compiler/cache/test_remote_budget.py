"""A remote tier that answers correctly but slowly (under its operation timeout) costs a build
at most its budget (``remote/budget.py``): waiting on a tier may not exceed the work it could
save plus 1 s a command and 5 s a build. Real sockets on loopback: a slow proxy (every request
held 4.5 s, under the 5 s operation timeout) in front of a real Redis, or in front of a small
HTTP store served by the test; nothing of nvstage's is mocked."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nvstage.compiler.cache.local import Cache
from nvstage.compiler.cache.remote.budget import PER_BUILD_S, PER_COMMAND_S, Budget
from nvstage.compiler.cache.remote.config import reset
from nvstage.compiler.cache.remote.tiers import open_tiers

from .conftest import start_redis

BIN = Path(sys.executable).parent
SLOW = 4.5  # seconds a request is held: under the 5 s operation timeout


class _Store(BaseHTTPRequestHandler):
    """An object store over HTTP (GET, HEAD, PUT), kept in memory: ccache's http layout."""

    protocol_version = "HTTP/1.1"
    objects: dict[str, bytes]

    def log_message(self, *args) -> None:
        pass

    def _answer(self, status: int, body: bytes = b"") -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self):
        got = self.objects.get(self.path)
        self._answer(200, got) if got is not None else self._answer(404)

    do_HEAD = do_GET

    def do_PUT(self):
        self.objects[self.path] = self.rfile.read(int(self.headers["Content-Length"]))
        self._answer(201)


@pytest.fixture
def http_store():
    handler = type("Store", (_Store,), {"objects": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
    thread.join(timeout=10)


@pytest.fixture
def slow_proxy():
    """``slow_proxy(port, delay)``: a TCP proxy on loopback in front of ``port`` that holds
    each request ``delay`` seconds (the first piece a client sends after the server last
    answered) before passing it on; the answers go back at once. Its port."""
    listeners: list[socket.socket] = []
    socks: list[socket.socket] = []
    stop = threading.Event()

    def pipe(src: socket.socket, dst: socket.socket, delay: float | None,
             answered: threading.Event) -> None:
        try:
            while not stop.is_set():
                data = src.recv(1 << 16)
                if not data:
                    break
                if delay is None:  # the server's side
                    answered.set()
                elif answered.is_set():  # a new request
                    answered.clear()
                    time.sleep(delay)
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def start(port: int, delay: float) -> int:
        lsock = socket.create_server(("127.0.0.1", 0))
        lsock.settimeout(0.1)
        listeners.append(lsock)

        def accept() -> None:
            while not stop.is_set():
                try:
                    conn, _ = lsock.accept()
                except (TimeoutError, socket.timeout):
                    continue
                except OSError:
                    return
                up = socket.create_connection(("127.0.0.1", port))
                socks.extend((conn, up))
                answered = threading.Event()
                answered.set()
                threading.Thread(target=pipe, args=(conn, up, delay, answered),
                                 daemon=True).start()
                threading.Thread(target=pipe, args=(up, conn, None, answered),
                                 daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()
        return lsock.getsockname()[1]

    yield start
    stop.set()
    for s in listeners + socks:
        try:
            s.close()
        except OSError:
            pass


@pytest.fixture(params=["redis", "http"])
def slow_url(request, slow_proxy, tmp_path_factory):
    """``slow_url(delay)``: a tier's URL through the slow proxy: a real Redis behind it, or
    the test's HTTP store."""
    if request.param == "redis":
        server = start_redis(tmp_path_factory.mktemp("redis"))
        request.addfinalizer(server.close)
        return lambda delay: f"redis://127.0.0.1:{slow_proxy(server.port, delay)}/0"
    port = request.getfixturevalue("http_store")
    return lambda delay: f"http://127.0.0.1:{slow_proxy(port, delay)}/cache"


KEY = "ab" * 32


@pytest.fixture(autouse=True)
def one_build(monkeypatch):
    """The commands these tests stand for are one build's, whatever runs the suite: the build's
    identity comes from the process tree (``build_record.build_identity``), which a suite
    started under init alone (a detached CI job) leaves without one."""
    from nvstage.compiler.buildlog import current as build_record

    monkeypatch.setattr(build_record, "_identity", [f"process:{os.getpid()}:0"])


# -- the rule, on the tiers themselves ----------------------------------------------------------
def test_a_slow_tier_is_cut_at_its_budget_and_skipped_by_the_builds_next_command(
        slow_url, tmp_path, monkeypatch, fresh_tiers):
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE", slow_url(SLOW))
    cache = Cache(tmp_path / "local").open()
    tiers = open_tiers(cache)
    start = time.monotonic()
    for _ in range(5):  # a command's stages asking, with no work at stake yet
        assert tiers.fetch_entry([KEY]) is None
    took = time.monotonic() - start
    assert PER_COMMAND_S - 0.05 <= took < PER_COMMAND_S + 0.5, took  # not 5 x 4.5 s
    assert len(fresh_tiers) == 1 and "too slow: 1.0 s waiting" in fresh_tiers[0], fresh_tiers
    row = tiers.to_json()[1]
    assert "too slow" in row["off"] and row["errors"] == 0
    tiers.record()
    # The build's next command (a new process) skips it without asking, and says nothing.
    reset()
    again = open_tiers(cache)
    start = time.monotonic()
    assert again.fetch_entry([KEY]) is None and time.monotonic() - start < 0.1
    assert "found too slow" in again.to_json()[1]["off"] and len(fresh_tiers) == 1


def test_a_tier_slower_than_the_work_it_stands_for_goes_off_within_the_build_budget(
        slow_url, tmp_path, monkeypatch, fresh_tiers):
    """Each ask answered in 0.3 s, each stage 0.05 s of work: every command keeps within its
    own allowance (1 s + its work), and the build's (5 s + its work) ends it."""
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE", slow_url(0.3))
    cache = Cache(tmp_path / "local").open()
    waited, commands = 0.0, 0
    while not fresh_tiers and commands < 30:
        reset()  # a new command, in a new process
        tiers = open_tiers(cache)
        for _ in range(3):
            tiers.fetch_entry([KEY])
            tiers.missed(0.05)
        waited += tiers.budgets[tiers.remotes[0].label].waited
        tiers.record()
        commands += 1
    assert len(fresh_tiers) == 1 and "too slow" in fresh_tiers[0], (commands, fresh_tiers)
    assert 3 <= commands <= 10, commands
    assert waited <= PER_BUILD_S + 0.15 * commands + 0.3, waited


def test_a_quick_tier_is_never_off(slow_url, tmp_path, monkeypatch, fresh_tiers):
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE", slow_url(0.0))
    cache = Cache(tmp_path / "local").open()
    for _ in range(10):
        reset()
        tiers = open_tiers(cache)
        for _ in range(20):
            assert tiers.fetch_entry([KEY]) is None
            tiers.missed(0.01)
        tiers.record()
    assert not fresh_tiers


def test_the_budget_figures():
    b = Budget()
    assert b.left() == PER_COMMAND_S
    b.add_stake(2.0)
    b.add_stake(float("nan"))
    b.add_stake(-5)
    assert b.left() == PER_COMMAND_S + 2.0
    late = Budget(waited_before=PER_BUILD_S + 1.0, stake_before=0.5)
    assert late.left() == pytest.approx(-0.5)  # the build's allowance is spent
    b.add_stake(1e9)  # an entry's record cannot buy more than an hour a stage
    assert b.left() <= PER_COMMAND_S + 2.0 + 3600.0


# -- a build ----------------------------------------------------------------------------------
UNITS = 3
MAKEFILE = """\
all: {objs}
%.o: %.cu
\t{launcher} {nvcc} -arch=sm_80 -c $< -o $@
"""


def _project(root: Path, launcher: str, nvcc: str) -> Path:
    root.mkdir()
    for n in range(UNITS):
        (root / f"k{n}.cu").write_text(
            f"__global__ void k{n}(float* p) {{ p[threadIdx.x] *= {n + 2}.0f; }}\n"
            f"float host{n}() {{ return {n}; }}\n")
    (root / "Makefile").write_text(MAKEFILE.format(
        objs=" ".join(f"k{n}.o" for n in range(UNITS)), launcher=launcher, nvcc=nvcc))
    return root


def _make(root: Path, env: dict[str, str]) -> tuple[float, str]:
    start = time.monotonic()
    cp = subprocess.run(["make", "-j1", "-C", str(root)], env=env, capture_output=True,
                        text=True, timeout=600)
    took = time.monotonic() - start
    assert cp.returncode == 0, cp.stdout + cp.stderr
    return took, cp.stderr


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_a_build_with_a_slow_tier_takes_about_as_long_as_without(slow_url, toolkit, tmp_path):
    """Three launcher commands under make, each its own process, cold: with a Redis (or an
    HTTP store) answering every request in 4.5 s, the build finishes within 1.5 times the
    build without the tier (it cost one command's 1 s allowance, then the build skipped it);
    without the budget it waited about 4.5 s for each of its requests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVSTAGE_")}
    env.update(NVSTAGE_SERVER="0", PATH=f"{BIN}:{env.get('PATH', '')}")
    plain = _project(tmp_path / "plain", str(BIN / "nvstage"), str(toolkit.nvcc))
    base, _ = _make(plain, {**env, "NVSTAGE_CACHE_DIR": str(tmp_path / "cache-plain")})
    slow = _project(tmp_path / "slow", str(BIN / "nvstage"), str(toolkit.nvcc))
    took, err = _make(slow, {**env, "NVSTAGE_CACHE_DIR": str(tmp_path / "cache-slow"),
                             "NVSTAGE_REMOTE_CACHE": slow_url(SLOW)})
    lines = [line for line in err.splitlines() if "remote cache" in line]
    assert len(lines) == 1 and "too slow" in lines[0], err
    assert took <= 1.5 * base + PER_COMMAND_S, (took, base)
    doc = json.loads((tmp_path / "cache-slow" / "tiers.json").read_text())
    (spent,) = doc["budget"].values()
    assert spent["waited"] <= PER_COMMAND_S + 0.2, spent
    assert spent["build"].startswith("make:"), spent
    for n in range(UNITS):
        assert (slow / f"k{n}.o").stat().st_size > 0
