"""A command the command cache could not answer, handed to a resident nvstage (the client side).

A launcher process that misses pays for Python's imports and set-up before its first tool, and
for its bookkeeping after the last (tens of milliseconds a command, more on a loaded machine):
sccache keeps a server for this. Here the server (``server.py``) is a process that has
imported the launcher's pipeline and forks one child per command (``child.py``); it takes this
process's place: its current folder, environment and umask, and its standard streams and a
make jobserver's pipe, passed over a Unix socket (``SCM_RIGHTS``), so that what the tools print
goes where this process's would, and nothing is copied. Its exit status is this process's.
Signals that end this process (SIGINT, SIGTERM, SIGHUP) are passed on to the child, which ends
its tools as the launcher does.

On by default (``NVSTAGE_SERVER=0`` refuses it; docs/launcher.md says why, from measurements),
and never required: no server, a server that refuses, one of another user or another nvstage,
and this process runs the command itself (and starts a server for the next ones,
``resident``). One server per user, cache folder, Python and nvstage (its files' times: an
upgraded or edited nvstage gets a server of its own) and locale; its socket in a folder only
the user can enter (``$XDG_RUNTIME_DIR``, else ``/tmp/nvstage-UID``), and each side checks that
the other runs as the same user (``SO_PEERCRED``). Standard library only.
"""

from __future__ import annotations

import os
import stat
import sys
import nvstage

_LOCALE = ("LANG", "LC_ALL", "LC_CTYPE", "PYTHONIOENCODING", "PYTHONUTF8")
_MAX_REPLY = 64


def _code_stamp() -> list:
    """nvstage's files as they are now (names, sizes and times): another server for other
    code."""
    top = os.path.dirname(nvstage.__file__)
    out = []
    stack = [top]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False) and e.name != "__pycache__":
                        stack.append(e.path)
                    elif e.name.endswith(".py"):
                        st = e.stat(follow_symlinks=False)
                        out.append((e.path[len(top):], st.st_size, st.st_mtime_ns))
        except OSError:
            continue
    return sorted(out)


def folder() -> str:
    """The folder the user's sockets live in: $XDG_RUNTIME_DIR, else /tmp/nvstage-UID."""
    run = os.environ.get("XDG_RUNTIME_DIR")
    if run and os.path.isabs(run):
        return os.path.join(run, "nvstage")
    return f"/tmp/nvstage-{os.getuid()}"


def own_folder(path: str, make: bool = False) -> bool:
    """Whether ``path`` is a folder only this user can enter (made so with ``make``)."""
    if make:
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError:
            return False
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and \
        stat.S_IMODE(st.st_mode) & 0o077 == 0


def socket_path(root: str, env) -> str:
    """The server's socket for the cache folder ``root`` and this nvstage."""
    from nvstage import fsio

    ident = [os.getuid(), os.path.realpath(root), sys.prefix, os.path.realpath(sys.executable),
             sys.version,
             [env.get(k) for k in _LOCALE], _code_stamp()]
    return os.path.join(folder(), fsio.hexdigest(repr(ident).encode(
        "utf-8", "surrogateescape"))[:24] + ".sock")


def peer(sock, cwd: str) -> tuple[int, int] | None:
    """The peer's pid and parent pid (the kernel's, not what it says) when it sees files as
    this process does: the same user, group and groups, mount namespace and root, and ``cwd``
    the folder it is in. None for any other (a client in a container or a chroot, one with
    other groups, or one that cannot be looked at): it runs the command itself, since an answer
    here would be built from files it may not see, or may see as others."""
    import socket
    import struct

    pid, uid, gid = struct.unpack("3i", sock.getsockopt(
        socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    # SO_PEERCRED holds the effective ids; pid 0: a peer in another pid namespace.
    if pid <= 0 or uid != os.geteuid() or gid != os.getegid():
        return None
    proc = f"/proc/{pid}"
    try:
        if not _SELF:  # this process's own: they do not change
            _SELF.extend([_ident("/proc/self/ns/mnt"), _ident("/"),
                          _status("/proc/self")[b"Groups"]])
        if _ident(proc + "/ns/mnt") != _SELF[0] or _ident(proc + "/root") != _SELF[1] or \
                _ident(proc + "/cwd") != _ident(cwd):
            return None
        theirs = _status(proc)
        if theirs[b"Groups"] != _SELF[2]:
            return None
        return pid, int(theirs[b"PPid"][0])
    except (OSError, ValueError, TypeError, KeyError, IndexError):
        return None


_SELF: list = []


def _ident(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def _status(proc: str) -> dict:
    fd = os.open(proc + "/status", os.O_RDONLY | os.O_CLOEXEC)
    try:
        text = os.read(fd, 1 << 16)
    finally:
        os.close(fd)
    rows = (line.split(b":", 1) for line in text.splitlines())
    return {r[0]: sorted(r[1].split()) for r in rows if r[0] in (b"Groups", b"PPid")}


def closed_streams() -> list[int]:
    """The standard streams this process was started without (``cmd >&-``): closed, or held
    by /dev/null closed on exec (``cli/transparent.hold_closed_streams``; a stream a process
    was started with is never close-on-exec). The child holds them so too: plain nvcc and
    the tools find them closed, as they would without nvstage."""
    out = []
    for fd in (0, 1, 2):
        try:
            if not os.get_inheritable(fd):
                out.append(fd)
        except OSError:
            out.append(fd)
    return out


def passed_fds(env) -> list[int]:
    """The descriptors the child needs at the same numbers: the standard streams (those this
    process has: ``closed_streams``), and a make jobserver's pipe (``--jobserver-auth=R,W``;
    a fifo is opened by name)."""
    closed = closed_streams()
    fds = [fd for fd in (0, 1, 2) if fd not in closed]
    flags = env.get("MAKEFLAGS", "")
    for word in flags.split():
        for opt in ("--jobserver-auth=", "--jobserver-fds="):
            if word.startswith(opt) and not word[len(opt):].startswith("fifo:"):
                try:
                    fds += [int(x) for x in word[len(opt):].split(",")]
                except ValueError:
                    pass
    out = []
    for fd in fds:
        try:
            os.fstat(fd)
        except OSError:
            continue
        if fd not in out:
            out.append(fd)
    return out


def delegate(argv: list[str], cwd: str, env, root: str) -> int | None:
    """``nvstage NVCC ARGS...`` run by the resident server for the cache folder ``root``: its
    exit status; None when no server took it (this process runs it)."""
    import marshal

    import _socket  # not socket: its import (enum, selectors) is 11 ms of every miss

    from nvstage import fsio
    from nvstage.compiler.launcher.resident import ask

    path = socket_path(root, env)
    if not own_folder(os.path.dirname(path)):
        return None
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    mine = theirs = None
    try:
        mine, theirs = ask.claim_pair()
        s.connect(path)
        server, uid = ask.peer_ids(s)
        if uid != os.getuid():
            return None
        fds = passed_fds(env)
        request = marshal.dumps({"argv": list(argv), "cwd": cwd, "env": dict(env),
                                 "umask": fsio.umask(), "fds": fds,
                                 "closed": closed_streams()})
        data = len(request).to_bytes(4, "big") + request
        # The claim channel's end alone (``ask.claimed``): the server's child writes its pid
        # there before it does anything of the command's. The standard streams and the
        # jobserver's pipe follow the claim: sent to a server that is stopped, they would
        # stay open in its queue, and a build waits for a command's streams to close.
        rights = theirs.fileno().to_bytes(4, sys.byteorder, signed=True)
        sent = s.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)])
        if sent < len(data):
            s.sendall(data[sent:])  # the claim's end went with the first part
        theirs.close()
        pid = ask.claimed(s, mine, server, woken=True)
        if pid == b"":  # the server's end (it refused): claimed before, or never
            pid = ask.revoke(mine)
        if pid is None:  # unclaimed: a server stopped, stuck or refusing writes nothing
            return None
        s.settimeout(None)
        s.sendmsg([b"F"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, b"".join(
            fd.to_bytes(4, sys.byteorder, signed=True) for fd in fds))])
        code = _wait(s, int(pid))
        if code is None:  # the child ended (killed) before it said: its work folders go
            from nvstage.compiler.pipeline import leftovers

            leftovers.sweep_after(int(pid))
        return code
    except (OSError, ValueError):
        return None
    finally:
        s.close()
        for end in (mine, theirs):
            if end is not None:
                end.close()


def _read_line(s) -> bytes | None:
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(1)
        if not chunk:
            return None
        data += chunk
        if len(data) > _MAX_REPLY:
            raise ValueError("not a reply")
    return data[:-1]


# A child seen stopped (SIGSTOP, not a debugger's stop) this long: it makes no progress, and
# its client ends it (SIGKILL, which needs no cooperation) and runs the command itself.
STOPPED_S = 2.0
_LOOK_S = 0.25


# How long a child that said its exit status is given to finish the cache's bookkeeping: this
# process ends after it, so that its work folder is gone from $TMPDIR when the build goes on.
_AFTER_S = 30.0


def _wait(s, pid: int) -> int | None:
    """The child's exit status, once the child is gone (``_AFTER_S`` at most after it said),
    passing it the signals that would end this process, and ^Z (it stops with its tools, then
    this process; resumed, it resumes them); None when it ended before it said (killed), or
    was stopped STOPPED_S and ended here."""
    import _signal as signal  # not signal: its import (enum) is 5 ms of every miss

    def forward(signum, frame):
        try:
            os.kill(pid, signum)
        except OSError:
            pass

    def stop(signum, frame):  # ^Z: the child stops with its tools, then this process
        forward(signum, frame)
        signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTSTP)  # stopped here until the job is resumed
        signal.signal(signal.SIGTSTP, stop)
        forward(signal.SIGCONT, frame)

    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGTSTP):
        if signal.getsignal(sig) != signal.SIG_IGN:
            old[sig] = signal.signal(sig, stop if sig == signal.SIGTSTP else forward)
    try:
        code = _watch(s, pid)
        if code is not None:
            _gone(pid, _AFTER_S)
    finally:
        for sig, prev in old.items():
            signal.signal(sig, prev)
    if code is None:  # the child died before it could say: this process runs the command
        return None
    return int(code)


def _gone(pid: int, seconds: float) -> None:
    """Wait (``seconds`` at most) until process ``pid`` has ended (a zombie its parent has
    not reaped yet has ended)."""
    import time

    from nvstage.compiler.launcher.resident.ask import state

    end = time.monotonic() + seconds
    while state(pid) not in (None, "Z", "X") and time.monotonic() < end:
        time.sleep(0.002)


def _watch(s, pid: int) -> bytes | None:
    """The child's line (its exit status) on ``s``; None at its end without one. Looked at
    every _LOOK_S: a child stopped STOPPED_S on end (signal state T) is killed, and its end
    waited for (the socket closed: it writes nothing more)."""
    from nvstage.compiler.launcher.resident.ask import state

    stopped = 0.0
    while True:
        s.settimeout(_LOOK_S)
        try:
            import _socket

            if s.recv(1, _socket.MSG_PEEK):
                s.settimeout(None)
                return _read_line(s)
            return None  # its end
        except TimeoutError:
            pass
        except InterruptedError:
            continue
        stopped = stopped + _LOOK_S if state(pid) == "T" else 0.0
        if stopped >= STOPPED_S:
            try:
                os.kill(pid, 9)  # SIGKILL
            except OSError:
                pass
            s.settimeout(None)
            try:
                while s.recv(4096):  # until it is gone
                    pass
            except OSError:
                pass
            return None
