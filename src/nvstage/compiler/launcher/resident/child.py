"""The resident nvstage's child: one per command a launcher hands the server (``server.py``;
``handover.py`` is the client). Forked by the server, it claims the command, takes the
client's place (its standard streams and a make jobserver's pipe at the numbers the client has
them, those it was started without closed, its folder, environment and umask) and runs the
launcher's flow (``launcher/flow.py``) for it, with none of the resident's steps.

Its work folder and its tools' $TMPDIRs are in the cache folder's tmp/, not the build's
$TMPDIR. Its client is told the exit status as soon as the outputs and the build log's entry
are written, and ends then: the cache's bookkeeping goes on here, at the lowest priority
(``_detach``), so that the build's next command starts at once and its tools come first, as
sccache's server stores after it answers. At most ``AFTER_SLOTS`` children at a time do so
(the rest tell their client once their bookkeeping is done, as before), and a miss of the
same command meanwhile waits for its entry (``answer.hold_pending``). A client that is gone
before it was answered (its build ended, by SIGKILL too) ends this process and every one it
started: nothing more is written for it (``_watch_client``).
"""

from __future__ import annotations

import marshal
import os
import select
import signal
import socket
import sys
import tempfile
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

        tmp = _cache_tmp(req["env"])
        if tmp is not None:  # the work folder and the tools' $TMPDIRs: not the build's
            tempfile.tempdir = tmp
        said: list[int] = []
        pending: list = []  # the held ``answer.hold_pending`` of a detached child
        _watch_client(conn, said)
        signal.signal(signal.SIGTSTP, _stop_with_tools)
        # The launcher's flow, for the client's command as the client has it (its build: the
        # client's parent's), with none of the resident's steps (this is the resident) and
        # no hit to look for (the client looked). The client is told the exit status once
        # the outputs and the build log's entry are written if this child may detach, else
        # once its bookkeeping is done and its work folder removed.
        cmd = flow.Command(list(req["argv"]), req["cwd"], dict(req["env"]), req["umask"],
                           closed, ppid, asked=ask.MISSED)

        def answered(c: int) -> None:
            _let_go()
            if tmp is not None and _detach(req, tmp, pending):
                _answer(conn, c, said)

        code = flow.launch(cmd, flow.Hooks(answered=answered)).code
        _answer(conn, code, said)
        for path, _ in pending:  # the entry is stored: a miss waiting for it looks again
            os.unlink(path)
    except BaseException:  # noqa: BLE001 - the client runs the command itself
        os._exit(1)
    os._exit(0)


# Children that may go on with their bookkeeping after their client ended, at once: each
# holds its memory until done, and at the lowest priority on busy cores may wait a while.
AFTER_SLOTS = min(32, 4 * (os.cpu_count() or 1))  # ``settle`` looks at 32


def settle(root: str, seconds: float = 30.0) -> bool:
    """Wait (``seconds`` at most) until no child of a server for the cache folder ``root`` is
    still doing its bookkeeping after its client ended (each holds a slot, ``_detach``):
    then the cache holds every command answered so far. Whether none is left."""
    import fcntl

    end = time.monotonic() + seconds
    for n in range(32):  # AFTER_SLOTS on any machine: at most 32
        try:
            fd = os.open(os.path.join(root, "tmp", f"after-{n}"), os.O_RDONLY | os.O_NOFOLLOW |
                         os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > end:
                        return False
                    time.sleep(0.01)
        finally:
            os.close(fd)
    return True


def _cache_tmp(env) -> str | None:
    """The cache folder's tmp/, made if need be; None where it cannot be, or where nvcc would
    plan in it another way than in $TMPDIR (a blank, a quote, $ or a backslash in its path:
    ``flow``'s own rule for $TMPDIR)."""
    from nvstage.compiler.nvcc.placeholders import needs_placeholder
    from nvstage.paths import cache_dir_of

    root = cache_dir_of(env)
    if root is None or needs_placeholder(os.path.abspath(root)):
        return None
    tmp = os.path.join(os.path.abspath(root), "tmp")
    try:
        os.makedirs(tmp, mode=0o700, exist_ok=True)
    except OSError:
        return None
    return tmp if os.path.isdir(tmp) and not os.path.islink(tmp) else None


def _detach(req: dict, tmp: str, pending: list) -> bool:
    """Whether this child may go on with the cache's bookkeeping after its client ended: a
    free slot of ``AFTER_SLOTS`` taken (held until this process ends) and the command's
    pending mark made; then every thread of it goes to the lowest priority."""
    import fcntl

    from nvstage.compiler.cache.command import answer

    for n in range(AFTER_SLOTS):
        try:
            fd = os.open(os.path.join(tmp, f"after-{n}"), os.O_RDWR | os.O_CREAT |
                         os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            os.close(fd)
    else:
        return False
    try:
        held = answer.hold_pending(list(req["argv"]), str(req["cwd"]), dict(req["env"]))
    except Exception:  # noqa: BLE001 - no key: nothing for a later miss to wait for
        held = None
    if held is not None:
        pending.append(held)
    for tid in os.listdir("/proc/self/task"):  # each thread's own (Linux), and theirs after
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), 19)
        except (OSError, ValueError):
            pass
    return True


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


def _let_go() -> None:
    """Let go of the client's standard streams: what is left writes nothing to them."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _answer(conn: socket.socket, code: int, said: list[int]) -> None:
    """Tell the client the exit status (once), its standard streams let go: it ends."""
    if said:
        return
    said.append(code)
    _let_go()
    try:
        conn.sendall(b"%d\n" % code)
    except OSError:
        pass
    conn.close()
