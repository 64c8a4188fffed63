"""Real cache servers on loopback for the remote-tier tests: Debian's redis-server and nginx
with WebDAV, each started on a free port in a temporary folder and stopped after the test.

Where a server (or redis-py, or cryptography) is missing, its tests skip with the reason;
with ``NVSTAGE_REQUIRE_SERVERS=1`` (``.ci/run`` sets it) that skip is a failure instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REQUIRE = os.environ.get("NVSTAGE_REQUIRE_SERVERS") == "1"


def missing(reason: str):
    """Skip with ``reason``; fail where the servers are required (CI)."""
    if REQUIRE:
        pytest.fail(f"NVSTAGE_REQUIRE_SERVERS=1 and {reason}", pytrace=False)
    pytest.skip(reason)


def need_module(name: str, extra: str = "test"):
    try:
        return __import__(name)
    except ImportError:
        missing(f"the Python package {name!r} is not installed (pip install -e '.[{extra}]')")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}): "
                               f"{log.read_text(errors='replace')[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"the server did not listen on {port} within {timeout} s")


@dataclass
class Server:
    """A server process on loopback: its URL, and the faults tests make with it."""

    proc: subprocess.Popen
    port: int
    url: str
    folder: Path

    def stop(self) -> None:
        """SIGSTOP: it keeps its port (connections are accepted by the kernel) and answers
        nothing."""
        os.kill(self.proc.pid, signal.SIGSTOP)

    def cont(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(timeout=10)

    def close(self) -> None:
        self.kill()


class Redis(Server):
    def cli(self):
        import redis

        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)


class WebDav(Server):
    @property
    def root(self) -> Path:
        return self.folder / "root"


def start_redis(folder: Path, *extra: str) -> Redis:
    exe = shutil.which("redis-server")
    if exe is None:
        missing("redis-server is not installed (apt-get install redis-server)")
    need_module("redis")  # the tests' own client, to fill, break and inspect the server
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "redis.log"
    proc, port = _serve("redis-server", lambda port: [
        exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
        "--dir", str(folder), "--daemonize", "no", "--logfile", str(log), *extra], log)
    return Redis(proc, port, f"redis://127.0.0.1:{port}/0", folder)


def _serve(name: str, argv_for, log: Path) -> tuple[subprocess.Popen, int]:
    """A server started on a free loopback port (``argv_for(port)``), tried five times: a
    port found free can be taken before the server binds it."""
    for _ in range(5):
        port = _free_port()
        proc = subprocess.Popen(argv_for(port), stdout=subprocess.DEVNULL,
                                stderr=subprocess.STDOUT)
        try:
            _wait_port(port, proc, log)
            return proc, port
        except RuntimeError:
            proc.kill()
            proc.wait()
    raise RuntimeError(f"{name} did not start")


_NGINX_CONF = """
daemon off;
master_process off;
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {folder}/body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
    keepalive_timeout 30s;
    server {{
        listen 127.0.0.1:{port};
        root {folder}/root;
        client_max_body_size 0;
        location / {{
            dav_methods PUT DELETE MKCOL;
            create_full_put_path on;
            dav_access user:rw;
        }}
    }}
}}
"""


def start_webdav(folder: Path) -> WebDav:
    exe = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.path.exists(p)),
                                        None)
    if exe is None:
        missing("nginx is not installed (apt-get install nginx)")
    version = subprocess.run([exe, "-V"], capture_output=True, text=True).stderr
    if "http_dav_module" not in version:
        missing("this nginx has no WebDAV module (Debian's nginx has it)")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "root").mkdir(exist_ok=True)
    conf, log = folder / "nginx.conf", folder / "error.log"

    def argv_for(port: int) -> list[str]:
        conf.write_text(_NGINX_CONF.format(folder=folder, port=port))
        return [exe, "-p", str(folder), "-e", str(log), "-c", str(conf)]

    proc, port = _serve("nginx", argv_for, log)
    return WebDav(proc, port, f"http://127.0.0.1:{port}/cache", folder)


@pytest.fixture
def redis_server(tmp_path_factory):
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.close()


@pytest.fixture
def redis_factory(tmp_path_factory):
    """Start Redis servers with extra options (``--maxmemory 2mb``); all stopped after."""
    started = []

    def make(*extra: str) -> Redis:
        started.append(start_redis(tmp_path_factory.mktemp("redis"), *extra))
        return started[-1]

    yield make
    for server in started:
        server.close()


@pytest.fixture
def webdav_server(tmp_path_factory):
    server = start_webdav(tmp_path_factory.mktemp("webdav"))
    yield server
    server.close()


@pytest.fixture
def crypto():
    return need_module("cryptography")


@pytest.fixture(autouse=True)
def _every_test_with_fresh_tiers(fresh_tiers):
    return fresh_tiers  # tests/conftest.py


# -- a hostile server ---------------------------------------------------------------------------
@dataclass
class Hostile:
    """A server on loopback that answers as a test says (``handler(conn, request_bytes)``
    per connection, in a thread), and remembers what each connection sent first."""

    port: int
    seen: list[bytes]


@pytest.fixture
def hostile():
    """``hostile(handler)``: a listening socket whose connections ``handler`` serves; every
    socket and thread is closed and joined after the test."""
    import threading

    listeners: list[socket.socket] = []
    conns: list[socket.socket] = []
    threads: list[threading.Thread] = []
    stop = threading.Event()

    def start(handler) -> Hostile:
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(16)
        lsock.settimeout(0.1)
        listeners.append(lsock)
        server = Hostile(lsock.getsockname()[1], [])

        def serve(conn: socket.socket) -> None:
            try:
                conn.settimeout(5)
                first = conn.recv(1 << 16)
                server.seen.append(first)
                handler(conn, first, stop)
            except OSError:
                pass

        def accept() -> None:
            while not stop.is_set():
                try:
                    conn, _ = lsock.accept()
                except (TimeoutError, socket.timeout):
                    continue
                except OSError:
                    return
                conns.append(conn)
                t = threading.Thread(target=serve, args=(conn,), daemon=True)
                threads.append(t)
                t.start()

        t = threading.Thread(target=accept, daemon=True)
        threads.append(t)
        t.start()
        return server

    yield start
    stop.set()
    for s in listeners + conns:
        try:
            s.close()
        except OSError:
            pass
    for t in list(threads):
        t.join(timeout=10)
