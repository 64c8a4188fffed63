"""The resident nvstage: a process that has imported the launcher's pipeline and forks one child
per command a launcher hands it (``launcher/resident/handover.py`` is the client; read it first).

    python -m nvstage.compiler.launcher.resident.server CACHE_FOLDER   (a launcher starts it)
    python -m nvstage.compiler.launcher.resident.server --stop CACHE_FOLDER   (ends it)

Started on demand: a launcher that ran a command itself starts one for the next commands
(``start.ensure``) unless ``NVSTAGE_SERVER=0``. One per user, cache folder and nvstage (a
lock beside its socket); it leaves after ``NVSTAGE_SERVER_IDLE`` seconds (600) without a
command, and removes its socket. Only single-threaded between commands, so that a fork
copies no held lock. A child (``child.py``) takes the client's place (folder, environment,
umask, descriptors) and runs the launcher's flow as ``nvstage NVCC ARGS`` would.

A hit is asked on a second socket (``ask.py``, the thin client) and answered here, in this
process, with no fork: the client's folder, environment and umask for the while, the same
code as a launcher's own answer (``answer.serve``) and the build log's entry written before
the reply. Only while the code that answers is the code this process loaded (its files' stat,
looked at before each answer); else it answers nothing, and leaves. Helpers forked at the start
(``_helpers``) answer hits on the same socket beside it, so that a build's commands asking at
once are answered at once; the hits they answer count against its idle time (a shared page),
and it leaves when one of them left (its code changed) or when a newer server took the hit
socket's name.
"""

from __future__ import annotations

import contextlib
import fcntl
import marshal
import os
import select
import signal
import socket
import stat
import struct
import sys
import time

from nvstage.compiler.launcher.resident import ask, child, handover as client
from nvstage.errors import one_line
from nvstage.paths import cache_dir_of

_IDLE_S = 600
_OWN: list[int] = []  # the server's lock and socket: a child lets go of them


def stop(root: str, env) -> list[int]:
    """End the servers for ``root`` (``running``: this nvstage's, and any other left running
    for it): the pids of those that ran ([] when none did)."""
    found = running(root, env)
    for server in found:
        _stop(server["lock"], server["pid"])
    return [s["pid"] for s in found]


def _stop(lock: str, pid: int) -> None:
    """SIGTERM to the server ``pid`` holding ``lock``, and a wait (5 s at most) until it let
    go of the lock: gone, its socket removed."""
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    for _ in range(100):  # gone once its lock is let go
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return
        except OSError:
            time.sleep(0.05)
        finally:
            os.close(fd)


_MAX_LOCK = 8192  # a lock file's text: the pid, when it started, its idle time, the folder


def running(root: str, env) -> list[dict]:
    """The resident servers that run for the cache folder ``root`` (``nvstage cache``): each
    one's pid, when it started (Unix time), how long it waits idle before it leaves, its
    socket, and whether it is this nvstage's (``current``: the one a launcher here asks; a
    server of an nvstage since edited or upgraded leaves when idle). Found by their locks in
    the user's socket folder, each held by a live process of this module (a lock nobody holds
    is no server); [] when none runs."""
    base = client.folder()
    if not client.own_folder(base):
        return []
    mine = client.socket_path(root, env) + ".lock"
    real = os.path.realpath(root)
    try:
        names = sorted(n for n in os.listdir(base) if n.endswith(".sock.lock"))
    except OSError:
        return []
    out = []
    for name in names[:256]:
        lock = os.path.join(base, name)
        got = _held(lock)
        if got is None:
            continue
        pid, since, idle, served = got
        if lock != mine and served != real:
            continue  # another cache folder's (or an older server's, which names none)
        out.append({"pid": pid, "since": since, "idle_s": idle, "socket": lock[:-len(".lock")],
                    "lock": lock, "current": lock == mine})
    return out


def _held(lock: str) -> tuple[int, float, float | None, str | None] | None:
    """(pid, started, idle seconds, cache folder) a server wrote into ``lock`` while it holds
    it; None when nobody holds it, or its holder is no resident nvstage."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return None  # nobody holds it: no server
        except OSError:
            pass
        text = os.read(fd, _MAX_LOCK).decode("utf-8", "surrogateescape")
    except OSError:
        return None
    finally:
        os.close(fd)
    head, _, rest = text.partition("\n")
    words = head.split()
    try:
        pid = int(words[0])
        since = float(words[1]) if len(words) > 1 else st.st_mtime  # older servers: the pid only
        idle = float(words[2]) if len(words) > 2 else None
    except (ValueError, IndexError):
        return None
    # The pid is this module's process (its command line), not one that took the number since.
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read(1 << 16).split(b"\0")
    except OSError:
        return None
    if pid <= 1 or b"nvstage.compiler.launcher.resident.server" not in argv:
        return None
    served = rest.split("\n", 1)[0] if rest else None
    return pid, since, idle, served or None


_USAGE = ("usage: python -m nvstage.compiler.launcher.resident.server CACHE_FOLDER (start one) "
          "or --stop "
          "CACHE_FOLDER (end it)")


def _error(line: str, code: int = 2) -> int:
    sys.stderr.write(f"error: {line}\n")
    return code


def main(argv: list[str]) -> int:
    if argv[:1] == ["--stop"]:
        if len(argv) != 2 or not argv[1].strip():
            return _error(f"--stop takes the cache folder whose server to end; {_USAGE}")
        if stop(argv[1], dict(os.environ)):
            return 0
        return _error(f"no resident nvstage runs for {one_line(argv[1])}", 1)
    if len(argv) != 1 or not argv[0].strip() or argv[0].startswith("-"):
        return _error(_USAGE)
    code = _code_files()  # first: code loaded after a change would be taken for the new
    root = argv[0]
    env = dict(os.environ)
    # The sockets are named by the environment (the hit socket by it alone): a server for
    # another folder would take a running server's names, and serve nothing.
    named = cache_dir_of(env)
    if named is None or not os.path.isdir(root) or \
            os.path.realpath(root) != os.path.realpath(named):
        return _error(f"{one_line(root)} is not the cache folder this environment names "
                      f"({one_line(named or 'none')}); {_USAGE}")
    path = client.socket_path(root, env)
    if not client.own_folder(os.path.dirname(path), make=True):
        return 1
    lock = _open_lock(path + ".lock")
    if lock is None:
        return 1
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another server has it
    # A stop (SIGTERM) as soon as the socket is there waits for the loop, whose end removes
    # the socket and the lock: it would kill a server still warming up, leaving both.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    idle = idle_seconds(env)
    # Its pid first (what an older ``stop`` reads), when it started and its idle time, then the
    # cache folder it serves (``running``: ``nvstage cache`` shows it).
    os.ftruncate(lock, 0)
    os.write(lock, b"%d %.3f %s\n%s\n" % (os.getpid(), time.time(), repr(idle).encode(),
                                          os.fsencode(os.path.realpath(root))))
    try:
        os.unlink(path)  # left by a server that was killed
    except FileNotFoundError:
        pass
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        srv.bind(path)
    except OSError:  # a path past a socket's 107 bytes, its folder gone: no server
        srv.close()
        with contextlib.suppress(OSError):
            os.unlink(path + ".lock")
        return 1
    bound = os.stat(path)  # the socket's file (fstat of the socket names another inode)
    srv.listen(64)
    hits, hits_bound = _hit_socket(root, env)
    _OWN[:] = [lock, srv.fileno(), *([hits.fileno()] if hits else [])]
    _warm_up()
    import gc

    # What the imports made lives as long as this process: out of the collector's sight, so a
    # full collection while a hit waits walks what the hits made, not every module loaded
    # (and a miss's child, forked, does not touch those pages to collect them).
    gc.freeze()
    from nvstage.compiler.cache.command.answer import Memory

    memory = Memory()
    helpers, beat = _helpers(hits, root, code, memory, lock, srv) if hits else ([], None)
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    last = time.monotonic()
    children: set[int] = set()
    clients: dict[int, int] = {}  # a child's client (a stopped one is job control)
    stopped: dict[int, float] = {}

    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        while True:
            _reap(children)
            _end_stopped(children, stopped, clients)
            if helpers and len(alive := _reap(set(helpers))) < len(helpers):
                helpers[:] = alive  # the ended one waited for: never signalled again
                return 0  # a helper left (its code changed): a launcher starts a new server
            ready, _, _ = select.select([srv, *([hits] if hits else [])], [], [],
                                        min(0.5 if children else 5.0, max(0.1, idle)))
            if not ready:
                if beat is not None:  # the hits its helpers answered count as its own
                    last = max(last, struct.unpack_from("d", beat)[0])
                if not children and time.monotonic() - last > idle:
                    return 0
                if not os.path.exists(path) or not os.path.isdir(root):
                    return 0  # its socket or its cache folder removed under it: leave
                if hits is not None and not _same(hits.getsockname(), hits_bound):
                    return 0  # a newer server (newer code) has the hit socket's name
                continue
            last = time.monotonic()
            if hits in ready:
                if not _serve_hit(hits, root, code, memory):
                    return 0  # its code changed: a launcher starts a server of the new code
                if srv not in ready:
                    continue
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            try:
                got = child.take(conn, _OWN)
            except (OSError, ValueError, EOFError, TypeError, KeyError):
                got = None
            finally:
                conn.close()
            if got:
                children.add(got[0])
                clients[got[0]] = got[1]
    finally:
        _end(helpers)
        for sock_path, ident in ((path, bound), (hits and hits.getsockname(), hits_bound)):
            if ident is not None and _same(sock_path, ident):
                with contextlib.suppress(OSError):
                    os.unlink(sock_path)  # ours, not a later server's
        try:
            os.unlink(path + ".lock")  # held to the end: a server starting now makes another
        except OSError:
            pass


_MAX_IDLE_S = 7 * 86400.0  # a week: past it, a value is taken for a mistake


def idle_seconds(env) -> float:
    """``NVSTAGE_SERVER_IDLE``: seconds (above 0, at most a week) a server waits for a command
    before it leaves; anything else (not a number, nan, inf, 0 or less, more) is the default,
    600: a setting never makes a server that stays for ever."""
    import math

    try:
        idle = float(env.get("NVSTAGE_SERVER_IDLE", _IDLE_S))
    except ValueError:
        return _IDLE_S
    return idle if math.isfinite(idle) and 0 < idle <= _MAX_IDLE_S else _IDLE_S


def helper_count(env) -> int:
    """``NVSTAGE_SERVER_HELPERS``: how many helpers answer hits beside the server, 0 to 7;
    anything else (not a whole number, negative) is the default, one fewer than the cores
    this process may run on (at most 7)."""
    try:
        default = min(7, max(0, len(os.sched_getaffinity(0)) - 1))
    except (AttributeError, OSError):
        default = 0
    try:
        n = int(env.get("NVSTAGE_SERVER_HELPERS", default))
    except ValueError:
        return default
    return min(n, 7) if n >= 0 else default


def _open_lock(name: str) -> int | None:
    """The server's lock file, opened without following a link (one planted under its name
    would have its target written with the pid): a link, a FIFO or anything but this user's
    file there is removed, once, and the file made anew; None when it cannot be had."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    for _ in range(2):
        try:
            fd = os.open(name, flags, 0o600)
        except OSError:
            fd = None
        if fd is not None:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
                return fd
            os.close(fd)
        try:
            if stat.S_ISDIR(os.lstat(name).st_mode):
                return None
            os.unlink(name)  # the name itself, never what it points to
        except OSError:
            return None
    return None


def _same(path: str, ident) -> bool:
    """Whether ``path`` is still the file ``ident`` (a stat) was."""
    try:
        now = os.stat(path)
    except (OSError, TypeError, ValueError):
        return False
    return (now.st_dev, now.st_ino) == (ident.st_dev, ident.st_ino)


def _end(helpers: list[int]) -> None:
    """The helpers ended: asked (SIGTERM), then made to (SIGKILL) after two seconds, so that
    one stopped or stuck never keeps the server (its lock, its sockets) alive."""
    for pid in helpers:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    left, end = set(helpers), time.monotonic() + 2.0
    while left and time.monotonic() < end:
        if _reap(left):
            time.sleep(0.01)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def _helpers(hits: socket.socket, root: str, code: list, memory, *mine):
    """Processes that answer hits beside this one (its pids), one fewer than the cores this
    process may run on (at most 7): a build's commands ask at once, and one process answers one
    at a time while a core waits. Each is a fork made now (the imports shared, a memory of its
    own), accepts on the same socket (whoever takes a connection answers it), and ends with this
    process, or as soon as its code is not what it loaded (the next hit this process takes
    finds the same and leaves). ``NVSTAGE_SERVER_HELPERS`` sets how many. Returns their pids
    and a shared page where each writes when it last answered (the server's idle clock)."""
    n = helper_count(os.environ)
    hits.setblocking(False)  # a connection another process took first: EAGAIN, not a wait
    parent, pids = os.getpid(), []
    if n <= 0:
        return pids, None
    import mmap

    beat = mmap.mmap(-1, 8)  # shared with the helpers forked below (MAP_SHARED)
    struct.pack_into("d", beat, 0, time.monotonic())
    for _ in range(min(n, 7)):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid:
            pids.append(pid)
            continue
        try:  # a helper never returns into the server's loop (nor its clean-up)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            for fd in mine:  # the lock and the miss socket are the server's alone
                os.close(fd if isinstance(fd, int) else fd.detach())
            while os.getppid() == parent:  # the server gone (even killed): so is this one
                if select.select([hits], [], [], 1.0)[0]:
                    if not _serve_hit(hits, root, code, memory):
                        break
                    struct.pack_into("d", beat, 0, time.monotonic())
        finally:
            os._exit(0)
    return pids, beat


def _hit_socket(root: str, env):
    """The socket hits are asked on (``ask.py``) and its file's stat; (None, None) when
    it cannot be had (this server still runs what launchers hand it)."""
    path = ask.name(env)
    if not client.own_folder(os.path.dirname(path), make=True):
        return None, None
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # an older server's: the newest takes the name (that one leaves)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.bind(path)
        s.listen(64)
        return s, os.stat(path)
    except OSError:
        s.close()
        return None, None


# The modules whose code answers a hit (tests/test_imports.py's hit path).
_HIT_CODE = ("nvstage.fsio", "nvstage.paths", "nvstage.compiler.store.zstd",
             "nvstage.compiler.store.presence", "nvstage.compiler.store.layout",
             "nvstage.compiler.nvcc.environment", "nvstage.compiler.nvcc.host_flags",
             "nvstage.compiler.toolkit.nvcc_lookup", "nvstage.compiler.buildlog.current",
             "nvstage.compiler.cache.command.command_key", "nvstage.compiler.cache.command.entry",
             "nvstage.compiler.cache.command.answer", "nvstage.compiler.launcher.resident.ask",
             "nvstage.compiler.launcher.resident.handover")


def _code_files() -> list:
    """The files of the code that answers a hit, with their stat now: the hit path's modules
    (``_HIT_CODE``) and this one."""
    import importlib

    names = [importlib.import_module(m).__file__ for m in _HIT_CODE]
    return [(n, _stat(n)) for n in [*names, __file__]]


def _stat(path: str):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino


def _serve_hit(hits: socket.socket, root: str, code: list, memory) -> bool:
    """Answer one hit asked on ``hits``; False when this process's code is no longer what
    its files hold (nothing answered: the client runs the command itself)."""
    try:
        conn, _ = hits.accept()
    except OSError:
        return True
    claim = None
    with conn:
        try:
            conn.settimeout(5)
            if ask.peer_uid(conn) != os.getuid():
                return True
            req, claim = _receive(conn)
            if any(_stat(n) != st for n, st in code):
                ask.send(conn, {"code": None})
                return False
            who = client.peer(conn, str(req["cwd"]))
            if who is None or claim is None:
                ask.send(conn, {"code": None})
            elif ask.claim(claim, b"h%d\n" % os.getpid()):  # else the client gave up: not a byte
                ask.send(conn, _hit(req, root, memory, who))
        except Exception:  # noqa: BLE001 - the client sees the socket close and runs it itself
            pass
        finally:
            if claim is not None:
                claim.close()
    return True


def _receive(conn: socket.socket):
    """A hit's request (``ask.receive``'s message) and the claim channel sent with it (None
    when none came)."""
    head, fds, _, _ = socket.recv_fds(conn, 4, 1)
    claim = socket.socket(fileno=fds[0]) if len(fds) == 1 else None
    for fd in fds[1:] if claim is not None else fds:
        os.close(fd)
    try:
        head += ask._exactly(conn, 4 - len(head)) if len(head) < 4 else b""
        size = int.from_bytes(head, "big")
        if size > ask.MAX_MESSAGE:
            raise ValueError("a message over its limit")
        return marshal.loads(ask._exactly(conn, size)), claim
    except BaseException:
        if claim is not None:
            claim.close()
        raise


def _hit(req: dict, root: str, memory=None, who: tuple[int, int] | None = None) -> dict:
    """The client's command served whole here, as its own process would (``answer.serve``),
    in its folder, with its environment and umask; its build log entry written."""
    from nvstage.compiler.cache.command import answer

    env, cwd, argv = dict(req["env"]), str(req["cwd"]), [str(a) for a in req["argv"]]
    here = os.getcwd()
    mask = os.umask(int(req["umask"]))
    try:
        os.chdir(cwd)  # a relative name (a cache folder, a PATH entry) means what it meant
        mine = cache_dir_of(env)
        if mine is None or (mine != root and os.path.realpath(mine) != os.path.realpath(root)):
            return {"code": None}  # another cache folder: not this server's to answer
        client = who or (int(req["pid"]), int(req["ppid"]))
        served = answer.serve(argv, cwd, env, memory, client)
        if served is None:  # looked, and no whole entry: the client need not look again
            return {"code": None, "missed": True}
        return {"code": 0, "out": served["out"], "err": served["err"]}
    finally:
        os.umask(mask)
        os.chdir(here)


def _warm_up() -> None:
    """What every command's child would import: imported once, here."""
    import nvstage.compiler.buildlog.log  # noqa: F401
    import nvstage.compiler.pipeline.driver  # noqa: F401
    import nvstage.compiler.pipeline.jobserver  # noqa: F401
    import nvstage.compiler.launcher.flow  # noqa: F401
    import nvstage.compiler.nvcc.grammar  # noqa: F401
    import nvstage.compiler.pipeline.plan_memo  # noqa: F401
    import nvstage.compiler.buildlog.current  # noqa: F401
    import nvstage.compiler.cache.command.entry  # noqa: F401
    import nvstage.compiler.store.presence  # noqa: F401
    from nvstage.compiler.store import zstd

    zstd.available()  # its extension loaded: a hit reads compressed entries


def _end_stopped(children: set[int], since: dict[int, float], clients: dict[int, int]) -> None:
    """SIGKILL to a child seen stopped (SIGSTOP; a debugger's stop is another state) for
    ``client.STOPPED_S``: it makes no progress, and its client runs the command itself (one
    that claimed it sees its end; one that did not has already gone on), so that a stopped
    child is never left behind, nor keeps this server from leaving. Not while its client is
    stopped too: that is job control (^Z), which stopped the child with its client's job."""
    now = time.monotonic()
    for table in (since, clients):
        for pid in list(table):
            if pid not in children:
                del table[pid]
    for pid in children:
        if ask.state(pid) != "T" or ask.state(clients.get(pid, 0)) in ask.STOPPED:
            since.pop(pid, None)
        elif now - since.setdefault(pid, now) >= client.STOPPED_S:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def _reap(children: set[int]) -> set[int]:
    """``children`` less those that ended (waited for); it, for the asking."""
    for pid in list(children):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            children.discard(pid)
    return children


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
