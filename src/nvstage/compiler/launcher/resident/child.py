"""The resident nvstage's child: one per command a launcher hands the server (``server.py``;
``handover.py`` is the client). Forked by the server, it claims the command, takes the
client's place (its standard streams and a make jobserver's pipe at the numbers the client has
them, those it was started without closed, its folder, environment and umask) and runs the
launcher's flow (``launcher/flow.py``) for it, with none of the resident's steps.

Its client is told the exit status as soon as the outputs and the build log's entry are
written, and ends once this process has (the cache's bookkeeping done, its work folder
removed: nothing of the command is left in $TMPDIR when the build goes on). A client that is
gone before it was answered (its build ended, by SIGKILL too) ends this process and every one
it started: nothing more is written for it (``_watch_client``).
"""

from __future__ import annotations

import marshal
import os
import select
import signal
import socket
import sys
import time

from nvstage.compiler.launcher.resident import ask, handover as client

_MAX_REQUEST = 64 << 20


def take(conn: socket.socket, own: list[int]) -> tuple[int, int] | None:
    """Read one request and fork its child; the child's pid and its client's. ``own``: the
    server's lock and sockets, which the child lets go of."""
    conn.settimeout(10)
    if ask.peer_uid(conn) != os.getuid():
        return None
    head, fds, _, _ = socket.recv_fds(conn, 4 + 65536, 1)
    try:
        size = int.from_bytes(head[:4], "big")
        if size > _MAX_REQUEST:
            return None
        body = head[4:]
        while len(body) < size:
            chunk = conn.recv(min(1 << 20, size - len(body)))
            if not chunk:
                return None
            body += chunk
        req = marshal.loads(body)
        wanted = list(req["fds"])
        who = client.peer(conn, str(req["cwd"]))
        # Its claim channel (``ask.claimed``) alone: the client's streams come once the
        # child claimed the command (``_child``).
        if len(fds) != 1 or who is None:
            return None
        pid = os.fork()
        if pid == 0:
            _child(conn, req, wanted, who[1], fds[0], own)  # never returns
        return pid, who[0]
    finally:
        for fd in fds:
            os.close(fd)


def _child(conn: socket.socket, req: dict, wanted: list[int], ppid: int, claim: int,
           own: list[int]) -> None:
    code = 1
    try:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        for fd in own:  # a stop waits for the lock; the next server binds the socket
            os.close(fd)
        # Claimed by the child itself, its pid the claim: a server stopped since the fork
        # does not keep the client from watching (and passing signals to) the child.
        with socket.socket(fileno=claim) as ch:
            if not ask.claim(ch, b"%d\n" % os.getpid()):
                os._exit(0)  # withdrawn: the client runs the command itself
        # Then the client sends its descriptors: never sooner, since a descriptor sent to a
        # server that is stopped stays open in its queue, and a build waits for the streams
        # of a command that ended (the client ran it itself) to close.
        head, fds, _, _ = socket.recv_fds(conn, 1, 64)
        if head != b"F" or len(fds) != len(wanted):
            os._exit(1)
        conn.settimeout(None)
        # The client's descriptors at the numbers it had them (out of the way first).
        moved = [os.dup(fd) for fd in fds]
        for fd in fds:
            os.close(fd)
        for fd, want in zip(moved, wanted):
            # Inheritable, every one: plain nvcc (a fallback, a link) and the tools write to
            # the standard streams and take the jobserver's tokens themselves.
            os.dup2(fd, want, inheritable=True)
            os.close(fd)
        closed = [fd for fd in req.get("closed", ()) if fd in (0, 1, 2) and fd not in wanted]
        for fd in closed:  # a stream the client was started without: closed for the tools
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, fd, inheritable=False)
            os.close(null)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        os.umask(req["umask"])
        from nvstage.compiler.launcher import flow

        said: list[int] = []
        _watch_client(conn, said)
        signal.signal(signal.SIGTSTP, _stop_with_tools)
        # The launcher's flow, for the client's command as the client has it (its build: the
        # client's parent's), with none of the resident's steps (this is the resident) and
        # no hit to look for (the client looked). The client is told the exit status once
        # the outputs and the build log's entry are written, and ends once this process has
        # (its work folder removed).
        cmd = flow.Command(list(req["argv"]), req["cwd"], dict(req["env"]), req["umask"],
                           closed, ppid, asked=ask.MISSED)
        code = flow.launch(cmd, flow.Hooks(answered=lambda c: _answer(conn, c, said))).code
        _answer(conn, code, said)
    except BaseException:  # noqa: BLE001 - the client runs the command itself
        os._exit(1)
    os._exit(0)


def _watch_client(conn: socket.socket, said: list[int]) -> None:
    """End this child, and every process it started, once its client is gone before it was
    answered (its build ended, SIGKILL included): nothing more is written for it. Ended as a
    launcher is by SIGTERM (its tools ended, its work folders removed, no entry written);
    still here ``proc.GRACE`` and a second later, by SIGKILL to what it started and itself.
    A thread that polls the client's socket (the client sends nothing after its streams: the
    socket reads only at its end)."""
    import threading

    from nvstage import proc

    watch = os.dup(conn.fileno())  # its own: the answer closes ``conn``
    events = select.POLLIN | select.POLLHUP | select.POLLERR | getattr(select, "POLLRDHUP", 0)

    def run() -> None:
        poll = select.poll()
        poll.register(watch, events)
        while not said and not poll.poll(100):
            pass
        os.close(watch)
        if said:  # answered (the client ends after this process): nothing to watch
            return
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(proc.GRACE + 1.0)
        proc.signal_descendants(signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=run, name="nvstage-client-watch", daemon=True).start()


def _stop_with_tools(signum, frame) -> None:
    """^Z came to the client's job (``handover._wait`` passes it on): this child stops with
    every process it started, as the job's own processes would, and they resume with it
    (the client's SIGCONT, when the job is resumed)."""
    from nvstage import proc

    proc.signal_descendants(signal.SIGSTOP)
    os.kill(os.getpid(), signal.SIGSTOP)  # here until the client's SIGCONT
    proc.signal_descendants(signal.SIGCONT)


def _answer(conn: socket.socket, code: int, said: list[int]) -> None:
    """Tell the client the exit status (once), and let go of its standard streams: what is
    left (the cache's bookkeeping) is nobody's wait."""
    if said:
        return
    said.append(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    try:
        conn.sendall(b"%d\n" % code)
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    conn.close()
