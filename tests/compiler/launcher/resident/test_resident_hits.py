"""Hits asked of the resident nvstage (``compiler/launcher/resident/ask.py``, the thin client; answered in
``compiler/launcher/resident/server.py``): the launcher's own object and build-record entry, never a stale
one, and nothing answered by a server whose code changed."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import nvstage
from nvstage.compiler.launcher.resident import server as resident
from nvstage.compiler.toolkit.cmake_toolchain import nvstage_command
from nvstage.compiler.launcher.resident import ask

SRC = str(Path(nvstage.__file__).resolve().parents[1])
# The client alone, as cli/bare.py runs it: what it says is whether the server answered.
_ASK = ("import sys; sys.path.insert(0, sys.argv.pop(1));"
        "from nvstage.compiler.launcher.resident.ask import ask; print(ask(sys.argv[1:]))")


@pytest.fixture
def run_folder():
    # A socket's path holds 107 bytes at most: pytest's folders are longer.
    run = Path(tempfile.mkdtemp(prefix="nvs-", dir="/tmp"))
    yield run
    shutil.rmtree(run, ignore_errors=True)


def _unshare_works() -> bool:
    try:
        return subprocess.run(["unshare", "--mount", "true"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _asked(argv, cwd, env) -> str:
    cp = subprocess.run([sys.executable, "-S", "-P", "-c", _ASK, SRC, *argv], cwd=cwd,
                        env=env, capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout.strip()


def test_a_hit_the_resident_answers_is_the_launchers_own_and_never_stale(toolkit, kernels,
                                                                         tmp_path, run_folder):
    cache = tmp_path / "cache"
    env = dict(os.environ, NVSTAGE_SERVER="1", NVSTAGE_CACHE_DIR=str(cache),
               NVSTAGE_BUILD_RECORD=str(tmp_path / "record"), XDG_RUNTIME_DIR=str(run_folder))
    shutil.copy(kernels / "vadd.cu", tmp_path / "vadd.cu")
    argv = [toolkit.nvcc, "-c", "-arch=sm_90", "vadd.cu", "-o", "a.o"]
    try:
        first = subprocess.run([*nvstage_command(), *argv], cwd=tmp_path, env=env,
                               capture_output=True, timeout=600)
        assert first.returncode == 0, first.stderr
        cold = (tmp_path / "a.o").read_bytes()
        hit_socket = ask.name(env)
        for _ in range(300):  # the miss started a server: both its sockets
            if os.path.exists(hit_socket):
                break
            time.sleep(0.1)
        (tmp_path / "a.o").unlink()
        record = tmp_path / "record" / "tu"
        before = set(os.listdir(record))
        assert _asked(argv, tmp_path, env) == "True"
        assert (tmp_path / "a.o").read_bytes() == cold
        (new,) = set(os.listdir(record)) - before  # the server wrote it, before it answered
        assert new.endswith("-h.json")
        # A fifo planted as the output: nothing answered (the server does not wait on it),
        # and the client goes on to build it.
        (tmp_path / "a.o").unlink()
        os.mkfifo(tmp_path / "a.o")
        assert _asked(argv, tmp_path, env) == "MISSED"
        (tmp_path / "a.o").unlink()
        if _unshare_works():
            # A client in another mount namespace sees other files under the same names: the
            # server, which would build from its own, answers nothing.
            cp = subprocess.run(["unshare", "--mount", sys.executable, "-S", "-P", "-c", _ASK,
                                 SRC, *argv], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=120)
            assert cp.stdout.strip() == "False", cp.stderr
            assert not (tmp_path / "a.o").exists()
        assert _asked(argv, tmp_path, env) == "True"
        assert (tmp_path / "a.o").read_bytes() == cold
        # The source edited: the server looked and missed (the client need not look
        # again), and the launcher builds anew.
        src = tmp_path / "vadd.cu"
        src.write_text(src.read_text() + "\n__device__ int resident_hit_marker;\n")
        assert _asked(argv, tmp_path, env) == "MISSED"
        assert (tmp_path / "a.o").read_bytes() == cold  # untouched by a miss
        again = subprocess.run([*nvstage_command(), *argv], cwd=tmp_path, env=env,
                               capture_output=True, timeout=600)
        assert again.returncode == 0, again.stderr
        assert b"resident_hit_marker" in (tmp_path / "a.o").read_bytes()
        # Another cache folder names another socket: no server to ask.
        other = dict(env, NVSTAGE_CACHE_DIR=str(tmp_path / "other"))
        assert _asked(argv, tmp_path, other) == "None"
        assert _asked(argv, tmp_path, dict(env, NVSTAGE_SERVER="0")) == "False"
    finally:
        subprocess.run([sys.executable, "-m", "nvstage.compiler.launcher.resident.server", "--stop",
                        str(cache)], env=env, capture_output=True, timeout=60)
    assert not os.path.exists(hit_socket)


def test_a_server_whose_code_changed_answers_nothing(tmp_path, run_folder):
    path = str(run_folder / "h.sock")
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(path)
        ask.send(client, {"argv": ["nvcc"], "cwd": str(tmp_path), "env": {}, "umask": 0o22,
                          "pid": 1, "ppid": 1})
        changed = [(str(tmp_path / "gone.py"), (1, 2, 3, 4))]
        assert resident._serve_hit(srv, str(tmp_path), changed, None) is False
        assert ask.receive(client) == {"code": None}
    finally:
        client.close()
        srv.close()


def test_hit_socket_names_differ_by_what_picks_the_server():
    env = {"HOME": "/home/a", "NVSTAGE_CACHE_DIR": "/c"}
    assert ask.name(env) == ask.name(dict(env))
    assert ask.name(env) != ask.name(dict(env, NVSTAGE_CACHE_DIR="/d"))
    assert ask.name(env) != ask.name(dict(env, LANG="C"))
    assert ask.name(dict(env, XDG_RUNTIME_DIR="/run/user/7")).startswith("/run/user/7/nvstage/h")
    assert len(os.path.basename(ask.name(env))) == len("h") + 16 + len(".sock")


def test_the_request_is_made_before_the_server_is_woken(monkeypatch, run_folder):
    # The connect wakes the server: the request is whole by then, and sent at once, so the
    # server reads it as it accepts (one wake-up each side a hit). Nothing is sent to a socket
    # of another user.
    import struct
    import types

    events: list = []
    reply = bytearray(ask.pack({"code": 0, "out": b"", "err": b""}))
    uid = [os.getuid()]

    class Fake:
        def __init__(self, *args):
            pass

        def settimeout(self, t):
            pass

        def connect(self, path):
            events.append("connect")

        def getsockopt(self, *args):
            return struct.pack("3i", os.getpid(), uid[0], os.getgid())

        def sendall(self, data):
            events.append("sent")

        def sendmsg(self, buffers, ancillary):  # the request, with the claim channel's end
            events.append("sent")
            return sum(len(b) for b in buffers)

        def recv(self, n, flags=0):
            chunk = bytes(reply[:n])
            if not flags:  # MSG_PEEK: looked at, left there
                del reply[:n]
            return chunk

        def close(self):
            pass

    real = sys.modules["_socket"]
    fake = types.SimpleNamespace(socket=Fake, AF_UNIX=real.AF_UNIX, SOCK_STREAM=real.SOCK_STREAM,
                                 SOL_SOCKET=real.SOL_SOCKET, SO_PEERCRED=real.SO_PEERCRED,
                                 SCM_RIGHTS=real.SCM_RIGHTS, MSG_PEEK=real.MSG_PEEK,
                                 SHUT_RD=real.SHUT_RD, socketpair=real.socketpair)
    monkeypatch.setitem(sys.modules, "_socket", fake)
    made = ask.pack
    monkeypatch.setattr(ask, "pack", lambda v: events.append("made") or made(v))
    (run_folder / "nvstage").mkdir(mode=0o700)
    monkeypatch.setattr(ask.posix, "environ", {b"NVSTAGE_SERVER": b"1", b"HOME": b"/h",
                                               b"XDG_RUNTIME_DIR": str(run_folder).encode()})
    assert ask.ask(["nvcc", "-c", "a.cu"]) is True
    assert events == ["made", "connect", "sent"]
    events.clear()
    uid[0] = os.getuid() + 1  # the socket's owner is another user
    assert ask.ask(["nvcc", "-c", "a.cu"]) is False and "sent" not in events


def test_a_peer_is_answered_only_where_it_is():
    a, b = socket.socketpair()
    with a, b:
        assert resident.client.peer(a, os.getcwd()) == (os.getpid(), os.getppid())
        # Elsewhere than it says it is: its files may not be the ones named.
        assert resident.client.peer(a, "/") is None if os.getcwd() != "/" else True
