"""The resident nvstage never holds a build up, never writes what its client writes, and
leaves nothing behind (issue 43): a stopped server or child is noticed and the command runs
itself, with plain nvcc's exit status, streams and object; a killed child's temporary folders
are swept by identity; the lock follows no link; bad settings are the defaults; --stop's
errors are one line."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from nvstage import proc
from nvstage.compiler.launcher.resident import server as resident
from nvstage.compiler.pipeline import leftovers

from .resident_procs import residents as _procs

SERVER = [sys.executable, "-m", "nvstage.compiler.launcher.resident.server"]
STOP = [*SERVER, "--stop"]


def _launcher() -> list[str]:
    script = Path(sys.executable).parent / "nvstage"
    return [str(script)] if script.exists() else [sys.executable, "-m", "nvstage"]


def _until(what, seconds: float = 60.0):
    end = time.monotonic() + seconds
    while not (got := what()):
        assert time.monotonic() < end
        time.sleep(0.01)
    return got


class _Server:
    """A resident nvstage with no helpers (the server alone answers), started by a first
    command (a miss); its own $TMPDIR, which the commands share."""

    def __init__(self, toolkit, kernels, tmp_path: Path, **more):
        self.run = Path(tempfile.mkdtemp(prefix="nvs-", dir="/tmp"))
        self.tmp = tmp_path / "tmpdir"
        self.tmp.mkdir()
        self.cache = tmp_path / "cache"
        self.record = tmp_path / "record" / "tu"
        self.env = dict(os.environ, NVSTAGE_SERVER="1", NVSTAGE_CACHE_DIR=str(self.cache),
                        NVSTAGE_BUILD_RECORD=str(tmp_path / "record"), TMPDIR=str(self.tmp),
                        XDG_RUNTIME_DIR=str(self.run), NVSTAGE_SERVER_HELPERS="0", **more)
        self.src = tmp_path / "vadd.cu"
        shutil.copy(kernels / "vadd.cu", self.src)
        self.words = [toolkit.nvcc, "-c", "-arch=sm_90", "vadd.cu", "-o", "a.o"]
        self.cwd = tmp_path
        first = self.command()
        assert first.returncode == 0, first.stderr
        (self.pid,) = _until(lambda: [p for p, _ in _procs(self.cache)] or None)
        _until(lambda: any(n.endswith(".sock") for n in os.listdir(self.run / "nvstage")))

    def command(self, timeout: float = 120):
        return proc.run([*_launcher(), *self.words], cwd=self.cwd, env=self.env,
                        timeout=timeout)

    def plain(self):
        """The same command run by nvcc itself, in a copy of the folder (what nvstage must
        look like): its exit status, streams and object."""
        here = self.cwd / "plain"
        here.mkdir(exist_ok=True)
        shutil.copy(self.src, here / "vadd.cu")
        env = {k: v for k, v in self.env.items() if not k.startswith("NVSTAGE_")}
        return proc.run(self.words, cwd=here, env=env, timeout=300), here / "a.o"

    def entries(self) -> int:
        return len(os.listdir(self.record))

    def close(self):
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGCONT)
        proc.run([*STOP, str(self.cache)], env=self.env, timeout=60)
        for pid, _ in _procs(self.cache):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.run, ignore_errors=True)


@pytest.fixture
def server(toolkit, kernels, tmp_path):
    s = _Server(toolkit, kernels, tmp_path)
    yield s
    s.close()


def _same_as_plain(server, got, marker: bytes | None = None) -> None:
    plain, obj = server.plain()
    assert (got.returncode, got.stdout, got.stderr) == (plain.returncode, plain.stdout,
                                                        plain.stderr), got.stderr
    if marker is not None:
        assert marker in obj.read_bytes() and marker in (server.cwd / "a.o").read_bytes()


def test_a_stopped_server_is_noticed_and_the_command_runs_itself(server):
    # SIGSTOP (a debugger, job control, a frozen cgroup): a hit and a miss asked of it run
    # here, at once, as plain nvcc would; resumed, the server writes nothing of theirs (it
    # never claimed them: the outputs and the build record are the client's alone).
    built = (server.cwd / "a.o").read_bytes()
    os.kill(server.pid, signal.SIGSTOP)
    try:
        (server.cwd / "a.o").unlink()
        before = server.entries()
        t0 = time.monotonic()
        hit = server.command(timeout=60)
        assert time.monotonic() - t0 < 20
        _same_as_plain(server, hit)
        assert (server.cwd / "a.o").read_bytes() == built
        server.src.write_text(server.src.read_text() + "\n__device__ int stopped_marker;\n")
        miss = server.command(timeout=120)
        _same_as_plain(server, miss, b"stopped_marker")
        assert server.entries() == before + 2
        written = os.stat(server.cwd / "a.o")
    finally:
        os.kill(server.pid, signal.SIGCONT)
    time.sleep(1.5)  # the server takes the withdrawn requests from its queue: and drops them
    assert server.entries() == before + 2
    now = os.stat(server.cwd / "a.o")
    assert (now.st_ino, now.st_mtime_ns) == (written.st_ino, written.st_mtime_ns)
    assert server.pid in [p for p, _ in _procs(server.cache)]  # and serves on
    assert server.command().returncode == 0


def _child_of(server) -> int:
    return _until(lambda: next((p for p, pp in _procs(server.cache) if pp == server.pid),
                               None), 60)


def _communicate(p: subprocess.Popen, *also: int, timeout: float = 120):
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        for pid in (p.pid, *also):  # a hang is the failure, never one of the test itself
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)  # (``also``: what holds the client's streams)
        p.communicate()
        raise


def test_a_stopped_child_is_ended_and_the_command_runs_itself(server):
    server.src.write_text(server.src.read_text() + "\n__device__ int child_marker;\n")
    with subprocess.Popen([*_launcher(), *server.words], cwd=server.cwd, env=server.env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        child = _child_of(server)
        os.kill(child, signal.SIGSTOP)
        out, err = _communicate(p, child)
    got = subprocess.CompletedProcess(p.args, p.returncode, out.decode(), err.decode())
    _same_as_plain(server, got, b"child_marker")
    # Ended, not left stopped: by the client (it had claimed the command) or by the server.
    _until(lambda: child not in [pid for pid, _ in _procs(server.cache)], 10)
    assert [n for n in os.listdir(server.tmp) if n.startswith("nvstage-")] == []


def test_a_killed_childs_folders_are_swept(server):
    # The server's process group SIGKILLed during a miss (the child among them): the client
    # runs the command itself, and the child's work folder and its tools' TMPDIRs go.
    server.src.write_text(server.src.read_text() + "\n__device__ int killed_marker;\n")
    with subprocess.Popen([*_launcher(), *server.words], cwd=server.cwd, env=server.env,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        child = _child_of(server)
        _until(lambda: any(n.startswith("nvstage-") for n in os.listdir(server.tmp)), 60)
        os.killpg(server.pid, signal.SIGKILL)
        out, err = _communicate(p)
    got = subprocess.CompletedProcess(p.args, p.returncode, out.decode(), err.decode())
    _same_as_plain(server, got, b"killed_marker")
    # (The client, having run the command itself, may have started a new server.)
    assert not {server.pid, child} & {pid for pid, _ in _procs(server.cache)}
    assert [n for n in os.listdir(server.tmp) if n.startswith("nvstage-")] == []


def test_leftovers_are_told_by_their_owner_not_their_name(tmp_path):
    mine = leftovers.make(folder=str(tmp_path))  # this process's: alive
    dead = leftovers.make(folder=str(tmp_path))
    child = subprocess.Popen(["true"])
    child.wait()
    Path(dead, leftovers.MARKER).write_text(f"{child.pid} 1\n")  # a pid gone
    reused = leftovers.make(folder=str(tmp_path))  # this pid, but another process's start
    Path(reused, leftovers.MARKER).write_text(f"{os.getpid()} 1\n")
    unmarked = tmp_path / "nvstage-someone-else"
    unmarked.mkdir()
    link = tmp_path / "nvstage-link"
    link.symlink_to(dead)
    removed = leftovers.sweep(str(tmp_path))
    assert sorted(removed) == sorted([dead, reused])
    assert os.path.isdir(mine) and unmarked.is_dir() and link.is_symlink()


def test_a_folder_whose_owner_died_before_its_marker_is_swept_by_its_name(tmp_path):
    # Killed between making the folder and writing its marker (the group SIGKILL above comes
    # as the first folder appears): the name says the owner, as the marker would.
    code = "from nvstage.compiler.pipeline import leftovers; print(leftovers.make(folder=%r))"
    made = subprocess.run([sys.executable, "-c", code % str(tmp_path)], capture_output=True,
                          text=True, check=True).stdout.strip()
    os.unlink(Path(made, leftovers.MARKER))
    mine = leftovers.make(folder=str(tmp_path))  # this process's: alive
    os.unlink(Path(mine, leftovers.MARKER))
    assert leftovers.sweep(str(tmp_path)) == [made]
    assert os.path.isdir(mine)


def test_the_lock_follows_no_link(toolkit, kernels, tmp_path):
    # A link planted under the lock's name: its target keeps its bytes, the server runs.
    run = Path(tempfile.mkdtemp(prefix="nvs-", dir="/tmp"))
    cache = tmp_path / "cache"
    cache.mkdir()
    env = dict(os.environ, NVSTAGE_CACHE_DIR=str(cache), XDG_RUNTIME_DIR=str(run),
               NVSTAGE_SERVER_HELPERS="0")
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    try:
        with _environ(env):
            from nvstage.compiler.launcher.resident import handover as client

            sock = client.socket_path(str(cache), env)
        os.makedirs(os.path.dirname(sock), mode=0o700)
        os.symlink(victim, sock + ".lock")
        proc.start_detached([*SERVER, str(cache)], env=env)
        _until(lambda: os.path.exists(sock) and not os.path.islink(sock + ".lock"), 60)
        assert victim.read_text() == "precious\n"
        # Stopped at once (still warming up): it leaves, its socket and lock with it.
        assert proc.run([*STOP, str(cache)], env=env, timeout=60).returncode == 0
        assert os.listdir(os.path.dirname(sock)) == []
    finally:
        proc.run([*STOP, str(cache)], env=env, timeout=60)
        shutil.rmtree(run, ignore_errors=True)


@contextlib.contextmanager
def _environ(env):
    old = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(old)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-5", "1e308", "soon", ""])
def test_a_bad_idle_time_is_the_default(value):
    assert resident.idle_seconds({"NVSTAGE_SERVER_IDLE": value}) == 600


def test_idle_times_and_helpers_taken_as_given():
    assert resident.idle_seconds({"NVSTAGE_SERVER_IDLE": "8"}) == 8
    assert resident.idle_seconds({}) == 600
    default = resident.helper_count({})
    assert 0 <= default <= 7
    for value, want in (("0", 0), ("3", 3), ("100", 7), ("-1", default), ("nan", default),
                        ("two", default), ("", default)):
        assert resident.helper_count({"NVSTAGE_SERVER_HELPERS": value}) == want


def test_a_server_started_with_nan_leaves_when_idle(tmp_path):
    # The lock says the idle time the server keeps: nan was kept (for ever), now 600 s.
    run = Path(tempfile.mkdtemp(prefix="nvs-", dir="/tmp"))
    cache = tmp_path / "cache"
    cache.mkdir()
    env = dict(os.environ, NVSTAGE_CACHE_DIR=str(cache), XDG_RUNTIME_DIR=str(run),
               NVSTAGE_SERVER_HELPERS="0", NVSTAGE_SERVER_IDLE="nan")
    try:
        proc.start_detached([*SERVER, str(cache)], env=env)
        with _environ(env):
            (found,) = _until(lambda: resident.running(str(cache), env), 60)
        assert found["idle_s"] == 600
    finally:
        proc.run([*STOP, str(cache)], env=env, timeout=60)
        shutil.rmtree(run, ignore_errors=True)


@pytest.mark.parametrize("args,code,said", [
    ([], 2, "usage: python -m nvstage.compiler.launcher.resident.server CACHE_FOLDER"),
    (["--stop"], 2, "--stop takes the cache folder"),
    (["--stop", ""], 2, "--stop takes the cache folder"),
    (["--stop", "a", "b"], 2, "--stop takes the cache folder"),
    (["--stop", "/nonexistent\n\x1b[31m"], 1, "no resident nvstage runs for /nonexistent"),
    (["--bogus"], 2, "usage:"),
])
def test_the_servers_command_line_errors_are_one_line(args, code, said, tmp_path):
    env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path))
    got = proc.run([*SERVER, *args], env=env, timeout=60)
    assert got.returncode == code
    assert got.stdout == "" and got.stderr.startswith("error: ") and said in got.stderr
    assert len(got.stderr.splitlines()) == 1 and "\x1b" not in got.stderr


# --- The build ended while the resident's child runs its command (issue 43, B1): the child
# notices its client is gone, ends what it started and writes nothing, as plain nvcc's group
# ends with the build.

HEAVY = (Path(__file__).parents[3] / "data" / "heavy.cu").read_text()  # slow in cicc


def _marked(mark: str) -> list[tuple[int, str]]:
    """(pid, name) of the live processes whose environment holds ``mark`` (the client's
    environment: what the child starts has it)."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if mark.encode() in Path(f"/proc/{d}/environ").read_bytes().split(b"\0") and \
                        Path(f"/proc/{d}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append((int(d), Path(f"/proc/{d}/comm").read_text().strip()))
            except (OSError, IndexError):
                pass
    return found


def test_a_client_killed_during_a_miss_ends_its_child_which_writes_nothing(server):
    (server.cwd / "heavy.cu").write_text(HEAVY)
    words = [server.words[0], "-c", "-arch=sm_90", "heavy.cu", "-o", "heavy.o"]
    mark = f"NVSTAGE_B1_TEST={os.getpid()}-{time.monotonic_ns()}"
    env = dict(server.env, NVSTAGE_B1_TEST=mark.split("=", 1)[1])
    for front in ([], _launcher()):  # plain nvcc, then through the resident nvstage
        p = subprocess.Popen([*front, *words], cwd=server.cwd, env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _until(lambda: any(n == "cicc" for _, n in _marked(mark)), 120)
        child = next((c for c, pp in _procs(server.cache) if pp == server.pid), None)
        assert (child is None) == (front == []), front
        os.killpg(p.pid, signal.SIGKILL)  # the build ends (timeout -s KILL, a CI runner)
        assert p.wait(timeout=30) == -signal.SIGKILL
        _until(lambda: not _marked(mark), 10)
        if child is not None:
            _until(lambda: child not in [c for c, _ in _procs(server.cache)], 10)
        assert not (server.cwd / "heavy.o").exists(), front
    assert [n for n in os.listdir(server.tmp) if n.startswith("nvstage-")] == []
    assert server.pid in [c for c, _ in _procs(server.cache)]  # the server serves on
    time.sleep(2)
    assert not (server.cwd / "heavy.o").exists()


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def test_job_control_stops_and_resumes_the_childs_tools_with_the_client(server):
    # ^Z stops the client's job; the child and its tools, in the server's session, stop with
    # it (as plain nvcc's tools stop with nvcc: tests/compiler/launcher/
    # test_launcher_transparent.py), stay stopped past the 2 s after which a stopped child
    # is taken for stuck, and resume with the job.
    (server.cwd / "heavy.cu").write_text(HEAVY)
    words = [server.words[0], "-c", "-arch=sm_90", "heavy.cu", "-o", "heavy.o"]
    mark = f"NVSTAGE_B4_TEST={os.getpid()}-{time.monotonic_ns()}"
    env = dict(server.env, NVSTAGE_B4_TEST=mark.split("=", 1)[1])
    before = server.entries()
    p = subprocess.Popen([*_launcher(), *words], cwd=server.cwd, env=env,
                         stdout=subprocess.DEVNULL, process_group=0)  # a shell's job
    try:
        cicc = _until(lambda: next((c for c, n in _marked(mark) if n == "cicc"), None), 120)
        child = _child_of(server)
        os.killpg(p.pid, signal.SIGTSTP)
        _until(lambda: {_state(pid) for pid in (p.pid, child, cicc)} == {"T"}, 10)
        time.sleep(3)
        assert {_state(pid) for pid in (p.pid, child, cicc)} == {"T"}
        os.killpg(p.pid, signal.SIGCONT)
        assert p.wait(timeout=600) == 0
    finally:
        with contextlib.suppress(OSError):
            os.killpg(p.pid, signal.SIGKILL)
    assert (server.cwd / "heavy.o").stat().st_size > 0
    assert server.entries() == before + 1  # the child's: the command ran once


# --- A standard stream the client was started without is the child's too (B5).

def test_a_closed_stdin_is_closed_for_the_plain_nvcc_the_child_runs(server):
    words = [*server.words, "-keep"]  # a command nvstage runs with plain nvcc

    def run(argv, cwd):
        return subprocess.run(argv, cwd=cwd, env=server.env, capture_output=True, timeout=300,
                              preexec_fn=lambda: os.close(0))

    plain_dir = server.cwd / "plain"
    plain_dir.mkdir()
    shutil.copy(server.src, plain_dir / "vadd.cu")
    plain = run([w for w in words], plain_dir)
    assert plain.returncode == 1  # nvcc 13's host compiler probe fails without stdin
    before = server.entries()
    ours = run([*_launcher(), *words], server.cwd)
    assert (ours.returncode, ours.stdout, ours.stderr) == (plain.returncode, plain.stdout,
                                                         plain.stderr)
    assert server.entries() == before + 1  # the child's: it ran the command


# --- A server stopped after it claimed a hit (B13): noticed, and the command runs itself.

_CLAIMS_AND_STOPS = """
import os, signal, socket
from nvstage.compiler.launcher.resident import ask, server
path = ask.name(dict(os.environ))
os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
s = socket.socket(socket.AF_UNIX)
s.bind(path)
s.listen(1)
print("ready", flush=True)
conn, _ = s.accept()
req, claim = server._receive(conn)
ask.claim(claim, b"h%d\\n" % os.getpid())
os.kill(os.getpid(), signal.SIGSTOP)
"""


def test_a_server_stopped_after_claiming_a_hit_is_ended_and_the_command_runs(
        toolkit, kernels, tmp_path):
    run = Path(tempfile.mkdtemp(prefix="nvs-", dir="/tmp"))
    env = dict(os.environ, NVSTAGE_CACHE_DIR=str(tmp_path / "cache"), XDG_RUNTIME_DIR=str(run),
               NVSTAGE_BUILD_RECORD=str(tmp_path / "record"), NVSTAGE_SERVER="0")
    shutil.copy(kernels / "vadd.cu", tmp_path / "vadd.cu")
    words = [toolkit.nvcc, "-c", "-arch=sm_90", "vadd.cu", "-o", "a.o"]
    assert proc.run([*_launcher(), *words], cwd=tmp_path, env=env, timeout=300).returncode == 0
    built = (tmp_path / "a.o").read_bytes()
    (tmp_path / "a.o").unlink()
    env["NVSTAGE_SERVER"] = "1"
    fake = subprocess.Popen([sys.executable, "-c", _CLAIMS_AND_STOPS], env=env,
                            stdout=subprocess.PIPE)
    try:
        assert fake.stdout.readline() == b"ready\n"
        client = subprocess.Popen([*_launcher(), *words], cwd=tmp_path, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        t0 = time.monotonic()
        out, err = _communicate(client, timeout=60)
        assert time.monotonic() - t0 < 30
        assert (client.returncode, out, err) == (0, b"", b"")  # as plain nvcc: a hit here
        assert (tmp_path / "a.o").read_bytes() == built
        assert fake.wait(timeout=10) == -signal.SIGKILL  # ended: it writes nothing more
    finally:
        with contextlib.suppress(OSError):
            fake.kill()
        fake.wait()
        fake.stdout.close()
        proc.run([*STOP, str(tmp_path / "cache")], env=env, timeout=60)
        shutil.rmtree(run, ignore_errors=True)


# --- A miss the child ran leaves nothing in $TMPDIR once the client has ended (B14).

def test_a_miss_through_the_server_leaves_tmpdir_empty_when_the_client_ends(server):
    for n in range(3):
        server.src.write_text(server.src.read_text() + f"\n__device__ int tmp_marker{n};\n")
        # (Not proc.run, which gives a tool a $TMPDIR of its own: the build's is looked at.)
        got = subprocess.run([*_launcher(), *server.words], cwd=server.cwd, env=server.env,
                             capture_output=True, timeout=300)
        assert got.returncode == 0, got.stderr
        assert [x for x in os.listdir(server.tmp) if x.startswith("nvstage-")] == [], n


# --- The server's own command line (B15): a folder that is not the environment's cache
# folder is one line and a non-zero exit, and the running server keeps its names.

def test_a_server_for_another_folder_is_refused_and_leaves_the_running_one_alone(server,
                                                                                  tmp_path):
    folder = server.run / "nvstage"
    names = {n: os.stat(folder / n).st_ino for n in os.listdir(folder)}
    other = tmp_path / "other"
    other.mkdir()
    for bad in ("/nonexistent-folder", str(other)):
        got = proc.run([*SERVER, bad], env=server.env, timeout=60)
        assert got.returncode == 2 and got.stdout == ""
        assert got.stderr.startswith("error: ") and len(got.stderr.splitlines()) == 1
        assert "is not the cache folder this environment names" in got.stderr
    assert {n: os.stat(folder / n).st_ino for n in os.listdir(folder)} == names
    assert server.pid in [p for p, _ in _procs(server.cache)]
    assert server.command().returncode == 0
