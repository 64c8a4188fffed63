"""The resident nvstage's child: one per command a launcher hands the server (``server.py``;
``handover.py`` is the client). Forked by the server, it claims the command, takes the
client's place (its standard streams and a make jobserver's pipe at the numbers the client has
them, those it was started without closed, its folder, environment and umask) and runs the
launcher's flow (``launcher/flow.py``) for it, with none of the resident's steps.

Its work folder and its tools' $TMPDIRs are in a folder of its own in the cache folder's
tmp/, not the build's $TMPDIR (``_own_folder``). Its client is told the exit status as soon as
the outputs and the build log's entry are written, and ends then: the cache's bookkeeping goes
on here, at the lowest priority, so that the build's next command starts at once and its tools
come first, as sccache's server stores after it answers. At most ``AFTER_SLOTS`` children at a
time do so (``_detach``); another, or one whose work stays in $TMPDIR, tells its client once
its bookkeeping is done (``_AFTER_S`` at most). A miss of a command whose entry a child is
storing waits for it, then looks it up (``answer.after_pending``). A client that is gone
before it was answered (its build ended, by SIGKILL too) ends this process and every one it
started: nothing more is written for it (``_watch_client``).
"""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import threading
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

        mine = _own_folder(req["env"])
        if mine is not None:  # the work folder and the tools' $TMPDIRs: not the build's
            tempfile.tempdir = mine[0]
        said: list[int] = []
        pending: list = []  # the held ``answer.hold_pending`` of a detached child
        _watch_client(conn, said)
        signal.signal(signal.SIGTSTP, _stop_with_tools)
        argv, cwd, env = list(req["argv"]), req["cwd"], dict(req["env"])
        from nvstage.compiler.cache.command import answer

        # The launcher's flow, for the client's command as the client has it (its build: the
        # client's parent's), with none of the resident's steps (this is the resident) and
        # no hit to look for (the client looked), unless another child was storing this
        # command's entry then, or stored it a moment ago: then it is looked up here.
        again = answer.after_pending(argv, cwd, env, time.time() - 2.0)
        cmd = flow.Command(argv, cwd, env, req["umask"], closed, ppid,
                           asked=None if again else ask.MISSED)

        def answered(c: int) -> None:  # the outputs and the build log's entry are written
            try:
                _let_go(wanted)
                if mine is not None and _detach(req, os.path.dirname(mine[0]), pending):
                    _answer(conn, c, said)
                    _lowest_priority()
                else:  # told once the bookkeeping is done, or after _AFTER_S at most
                    timer = threading.Timer(_AFTER_S, _answer, (conn, c, said))
                    timer.daemon = True
                    timer.start()
            except Exception:  # noqa: BLE001 - answered at the end, then
                pass

        code = flow.launch(cmd, flow.Hooks(answered=answered)).code
        _answer(conn, code, said)
        for path, _ in pending:  # the entry is stored: a miss waiting for it looks again
            os.unlink(path)
        if mine is not None:
            shutil.rmtree(mine[0], ignore_errors=True)
    except BaseException:  # noqa: BLE001 - the client runs the command itself
        os._exit(1)
    os._exit(0)


# Children that may go on with their bookkeeping after their client ended, at once: each
# holds its memory until done, and at the lowest priority on busy cores may wait a while.
AFTER_SLOTS = min(32, 4 * len(os.sched_getaffinity(0)))  # ``settle`` looks at 32
# How long a client whose child may not go on after its answer waits for its bookkeeping.
_AFTER_S = 30.0


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


def _own_folder(env) -> tuple[str, int] | None:
    """A folder of this child's own in the cache folder's tmp/, held (a shared lock, which
    ``nvstage cache --clear`` leaves alone) until it ends: where its work folder and its tools'
    $TMPDIRs go, so that nothing of the command is in the build's $TMPDIR once it is answered
    (its path, and the descriptor that holds it). None, and they stay in $TMPDIR (the client
    is then answered after the bookkeeping), where the cache folder is not nvstage's yet, is
    not on $TMPDIR's filesystem (where the user put temporary files stands), or its path is
    one the stage cache would not relocate (``relocation.Work.plain``)."""
    import fcntl
    import stat

    from nvstage.compiler.cache.local.relocation import Work
    from nvstage.compiler.pipeline import leftovers
    from nvstage.compiler.store.layout import cache_root

    root = cache_root(env)
    if root is None:
        return None
    tmp = os.path.join(os.path.abspath(root), "tmp")
    tempfile.tempdir = None  # $TMPDIR as the client has it, not as the server found it
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(tmp, 0o700)
        st = os.lstat(tmp)
        if not stat.S_ISDIR(st.st_mode) or not Work(tmp).plain or \
                st.st_dev != os.stat(tempfile.gettempdir()).st_dev:
            return None
        path = leftovers.make(leftovers.PREFIX, tmp)
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:  # a file system without locks: not held, but still the child's own
        pass
    return path, fd


def _detach(req: dict, tmp: str, pending: list) -> bool:
    """Whether this child may go on with the cache's bookkeeping after its client ended: a
    free slot of ``AFTER_SLOTS`` in the cache folder's ``tmp`` taken (held until this process
    ends), and the command's pending mark made (``answer.hold_pending``)."""
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
    return True


def _lowest_priority() -> None:
    """Every thread of this process at nice 19 (Linux sets it per thread; the threads and
    tools started after take it from theirs): the build's tools come first."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), 19)
        except (OSError, ValueError):
            pass


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


def _let_go(wanted: list[int] = ()) -> None:
    """Let go of the client's descriptors (its standard streams, a jobserver's pipe):
    what is left writes nothing to them, and holds none of the build's."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        pass
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    for fd in wanted:
        if fd > 2:
            with contextlib.suppress(OSError):
                os.close(fd)


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
