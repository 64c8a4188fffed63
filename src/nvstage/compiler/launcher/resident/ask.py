"""A hit asked of the resident nvstage before anything else is imported: the thin client of
sccache's design (``server.py`` is the server; ``handover.py`` hands it misses).

A launcher process that answers a hit itself pays for its imports and for running code that is
new to it (about 10 ms here, against 2 ms in a process that has done it before). Here it sends
its command line, folder, environment, umask and process ids to the resident nvstage over a Unix
socket, and the server answers the hit with the same code (``answer.serve``), with this
process's folder, environment and umask, and writes the build log's entry for it; this
process prints what the tools printed and exits. A miss, no server, a server of another user,
any error before the request is sent: this process goes on as if it had not asked.

Built-in modules only (no ``os``: 1 ms a start without ``site``), so that ``cli/bare.py`` can ask
first. The resident nvstage is on unless ``NVSTAGE_SERVER=0`` refuses it (``resident_on``). The
socket is named by what picks the server: the user, nvstage's folder, Python's version, the
variables that name the cache folder and the locale (``name``); the server checks the rest (the
cache folder, its own code unchanged).
"""

import marshal
import sys

import posix

# The variables that pick the cache folder and how names are decoded: a client and a server
# that read them alike meet (the server checks the cache folder itself).
NAMED_BY = ("NVSTAGE_CACHE_DIR", "XDG_CACHE_HOME", "HOME", "LANG", "LC_ALL", "LC_CTYPE",
            "PYTHONIOENCODING", "PYTHONUTF8")
MAX_MESSAGE = 64 << 20
_S_IFMT, _S_IFDIR = 0o170000, 0o040000


def resident_on(env) -> bool:
    """Whether commands use the resident nvstage: by default, as sccache's server; not with
    ``NVSTAGE_SERVER=0``, nor without the cache (``NVSTAGE_CACHE=0``), which it serves."""
    return env.get("NVSTAGE_SERVER") != "0" and env.get("NVSTAGE_CACHE", "1") != "0"


def _package() -> str:
    """nvstage's folder as this file spells it (``.../compiler/launcher/resident/ask.py``)."""
    return __file__.rsplit("/", 4)[0]


def folder(env) -> str:
    """The folder the user's sockets live in (``launcher/resident/handover.folder``'s rule)."""
    run = env.get("XDG_RUNTIME_DIR")
    if run and run.startswith("/"):
        return run + "/nvstage"
    return f"/tmp/nvstage-{posix.getuid()}"


def name(env) -> str:
    """The hit socket's path for this user, nvstage, Python and ``env`` (str -> str)."""
    # Spelled out, not marshalled (marshal's bytes for equal strings can differ: its
    # interned-string flag). No variable holds a NUL; unset is told from empty, but for an
    # empty NVSTAGE_CACHE_DIR, which means unset (paths.cache_dir_of): both meet one server.
    values = [(env.get(n) or None) if n == "NVSTAGE_CACHE_DIR" else env.get(n)
              for n in NAMED_BY]
    fields = [str(posix.getuid()), _package(), sys.version,
              *("\1" if v is None else "\2" + v for v in values)]
    ident = "\0".join(fields).encode("utf-8", "surrogateescape")
    h = 0xcbf29ce484222325  # FNV-1a, 64 bits: no hashlib (and its OpenSSL) to load
    for b in ident:
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{folder(env)}/h{h:016x}.sock"


def _own_folder(path: str) -> bool:
    try:
        st = posix.lstat(path)
    except OSError:
        return False
    return st.st_mode & _S_IFMT == _S_IFDIR and st.st_uid == posix.getuid() and \
        st.st_mode & 0o077 == 0


def peer_uid(sock) -> int:
    """The uid of the process at the other end of a Unix socket (``SO_PEERCRED``)."""
    return peer_ids(sock)[1]


def peer_ids(sock) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a Unix socket (``SO_PEERCRED``; a
    client's peer is the process that listens: the server, not a helper it forked)."""
    import _socket

    creds = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)  # pid, uid, gid
    return (int.from_bytes(creds[0:4], sys.byteorder, signed=True),
            int.from_bytes(creds[4:8], sys.byteorder, signed=True))


# The claim. A client sends, with its request, one end of a socket pair of its own; the server
# writes on it (a byte for a hit, the child's pid for a command it runs) just before it writes
# anything of the command's, and writes nothing if that fails. The client may give up only
# by shutting its end for reading (``revoke``): the kernel orders that against the server's
# write (one lock of the receiving socket), so either the claim is already there to be read
# (the client waits for the answer, as before) or the write fails with EPIPE (the server
# leaves the command alone). Never both write the same output; never a wait on a server that
# does not move before it claimed.
CLAIM_S = 2.0  # an unclaimed request this old: a server stuck (busy past reason, frozen)
TICK_S = 0.05  # how often a waiting client looks whether the server was stopped
STOPPED = ("T", "t")  # /proc/PID/stat's states of a stopped process (a signal, a debugger)


def claim_pair():
    """(the client's end, the end sent to the server) of a new claim channel."""
    import _socket

    return _socket.socketpair(_socket.AF_UNIX, _socket.SOCK_STREAM, 0)


def claim(channel, what: bytes) -> bool:
    """The server's half: claim a client's request on its ``channel`` (``claimed``), ``what``
    naming the process that claimed it; False when the client withdrew it (it runs the
    command itself, and nothing may be written for it)."""
    import _socket

    try:
        channel.setblocking(False)
        return channel.send(what, _socket.MSG_NOSIGNAL) == len(what)
    except OSError:
        return False


def state(pid: int) -> str | None:
    """The state letter of process ``pid`` (/proc/PID/stat: R, S, D, T, t, Z, ...); None when
    it is gone or cannot be read."""
    try:
        fd = posix.open(f"/proc/{pid}/stat", posix.O_RDONLY | posix.O_CLOEXEC)
    except OSError:
        return None
    try:
        text = posix.read(fd, 4096)
    except OSError:
        return None
    finally:
        posix.close(fd)
    rest = text.rpartition(b")")[2].split()  # the name (field 2) may hold anything
    return rest[0].decode("ascii", "replace") if rest else None


def revoke(mine) -> bytes | None:
    """Withdraw a request: its claim if the server made one before this (the client then
    waits for the answer), else None: from now on the server cannot claim it."""
    import _socket

    try:
        mine.shutdown(_socket.SHUT_RD)
    except OSError:
        pass
    return _take_claim(mine)


def _take_claim(mine) -> bytes | None:
    mine.setblocking(False)
    try:
        return mine.recv(64) or None
    except OSError:  # nothing there (EAGAIN)
        return None


def claimed(sock, mine, server: int, bound: float = CLAIM_S, *,
            woken: bool = False) -> bytes | None:
    """Wait for the server's claim on ``mine`` (returned) or for ``sock`` to be readable
    (b"": an answer or the server's end came first). A server still unclaimed that is
    stopped (SIGSTOP, a debugger; looked at every TICK_S) or after ``bound`` seconds: the
    request is revoked, None (unless the claim came meanwhile).

    ``woken``: the claim wakes this process as ``sock`` does (``poll``). A hand-over's
    child waits for this process's streams once it has claimed, so a claim seen only at the
    tick's end cost each miss handed over about TICK_S of a slot's time (``bench/many_units.py
    --server 1``); a hit's answer follows its claim on ``sock``, and the hit path stays
    without ``select``'s import."""
    import _socket

    waited = 0.0
    if woken:
        import select

        poll = select.poll()  # not select.select: a descriptor past 1023 is refused there
        poll.register(sock, select.POLLIN)
        poll.register(mine, select.POLLIN)
    while True:
        if woken:
            ready = {fd for fd, _ in poll.poll(TICK_S * 1000)}
            if sock.fileno() in ready:
                return b""
            if mine.fileno() in ready:
                got = _take_claim(mine)
                if got is not None:
                    return got
                woken = False  # its other end closed unclaimed: looked at each tick from now
                continue
        else:
            sock.settimeout(TICK_S)
            try:
                sock.recv(1, _socket.MSG_PEEK)
                return b""
            except TimeoutError:
                pass
        got = _take_claim(mine)
        if got is not None:
            return got
        waited += TICK_S
        if waited >= bound or state(server) in STOPPED:
            return revoke(mine)


ANSWER_S = 10.0  # a claimed hit not answered in this long: the process that claimed it is stuck
STOPPED_S = 2.0  # a claimed hit's process seen stopped this long: ended
_SIGKILL = 9


def claimer(claim: bytes, server: int) -> int:
    """The pid of the process that claimed a hit (``b"h<pid>"``: the server or one of its
    helpers); the server's for a claim that names none."""
    try:
        return int(claim[1:]) if claim[:1] == b"h" and len(claim) > 2 else server
    except ValueError:
        return server


def answered(sock, pid: int):
    """The reply to a claimed hit (``receive``'s), waited for while process ``pid``, which
    claimed it, makes progress; None when none comes: ``pid`` seen stopped STOPPED_S (SIGSTOP,
    a debugger), or no reply ANSWER_S after the claim. Then ``pid`` is ended (SIGKILL, which
    needs no cooperation) and its end waited for (the socket closes: it writes nothing more)."""
    import _socket

    waited = stopped = 0.0
    while True:
        sock.settimeout(TICK_S)
        try:
            sock.recv(1, _socket.MSG_PEEK)
            break  # the reply, or the other end (``receive`` says which)
        except TimeoutError:
            pass
        except OSError:
            return None
        waited += TICK_S
        stopped = stopped + TICK_S if state(pid) in STOPPED else 0.0
        if stopped >= STOPPED_S or waited >= ANSWER_S:
            try:
                posix.kill(pid, _SIGKILL)
            except OSError:
                pass
            sock.settimeout(STOPPED_S)
            try:
                while sock.recv(1 << 16):  # until it is gone
                    pass
            except OSError:
                pass
            return None
    sock.settimeout(ANSWER_S)
    try:
        return receive(sock)
    except (OSError, ValueError):
        return None


def pack(value) -> bytes:
    """``value`` as one message: its length, then its marshal bytes."""
    data = marshal.dumps(value)
    return len(data).to_bytes(4, "big") + data


def send(sock, value) -> None:
    sock.sendall(pack(value))


def receive(sock):
    """One message (``send``'s); ValueError when the other end closed first or sent more than
    a message may hold."""
    head = _exactly(sock, 4)
    size = int.from_bytes(head, "big")
    if size > MAX_MESSAGE:
        raise ValueError("a message over its limit")
    return marshal.loads(_exactly(sock, size))


def _exactly(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(min(n - len(data), 1 << 20))
        if not chunk:
            raise ValueError("closed")
        data += chunk
    return data


class _Missed:
    """``ask``'s answer when the server looked for a whole entry and found none: false, as
    False is, and this process need not look again (``cli/launcher.py``)."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "MISSED"


MISSED = _Missed()


def ask(argv: list[str]) -> bool | _Missed | None:
    """Whether the resident nvstage answered ``NVCC ARGS...`` whole (outputs in place, the
    build log's entry written), what the tools printed written to this process's standard
    streams; False when it did not (off, refused, or it could not answer), ``MISSED`` when it
    looked and no whole entry answers the command, None when it is on and no server was there
    to ask. Either way but True, this process runs the command as if it had not asked."""
    enc, errors = sys.getfilesystemencoding(), sys.getfilesystemencodeerrors()
    env = {k.decode(enc, errors): v.decode(enc, errors) for k, v in posix.environ.items()}
    if not resident_on(env):
        return False
    path = name(env)
    if not _own_folder(path.rsplit("/", 1)[0]):
        return None
    try:
        # Made before the server is woken (by the connect), so that it finds the request
        # whole when it accepts: one wake-up of each side a hit, not a second one of the
        # server while this process would still be making it.
        mask = posix.umask(0o022)
        posix.umask(mask)
        request = pack({"argv": list(argv), "cwd": posix.getcwd(), "env": env, "umask": mask,
                        "pid": posix.getpid(), "ppid": posix.getppid()})
    except (OSError, ValueError):  # no current folder, a value marshal cannot hold
        return False
    import _socket

    try:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    except OSError:  # out of descriptors, no Unix sockets here: not asked
        return None
    mine = theirs = None
    try:
        try:
            mine, theirs = claim_pair()
        except OSError:
            return None
        s.settimeout(1.0)
        try:
            s.connect(path)
        except OSError:
            return None  # no server (or a socket file left by one that ended)
        try:
            server, uid = peer_ids(s)
            if uid != posix.getuid():
                return False  # nothing sent to a socket of another user
            s.settimeout(5.0)
            rights = theirs.fileno().to_bytes(4, sys.byteorder, signed=True)
            sent = s.sendmsg([request], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)])
            if sent < len(request):  # (sendall of nothing to a server that answered: EPIPE)
                s.sendall(request[sent:])  # the claim's end went with the first part
            theirs.close()
            # The server claims the command before it writes a thing of it (``claimed``):
            # unclaimed, a stopped or stuck server is left alone and this process runs the
            # command. Claimed, only its answer or its end (the socket closed: it wrote nothing
            # more) lets this process go on; never a timeout, after which both could write
            # the same output.
            got = claimed(s, mine, server)
            if got is None:
                return False
        except (OSError, ValueError):
            return False
        # Claimed: the answer comes in milliseconds. One that does not come (the process
        # that claimed it stopped, or stuck) is ended here, and this process runs the command
        # once it is gone: it writes nothing more.
        reply = answered(s, claimer(got, server))
        if reply is None:
            return False
    finally:
        s.close()
        for end in (mine, theirs):
            if end is not None:
                end.close()
    if not isinstance(reply, dict) or reply.get("code") != 0:
        return MISSED if isinstance(reply, dict) and reply.get("missed") is True else False
    for fd, text in ((1, reply.get("out")), (2, reply.get("err"))):
        while text:
            try:
                text = text[posix.write(fd, text):]
            except BlockingIOError:  # a stream left non-blocking: as a blocking write would
                import select

                select.select([], [fd], [])
            except OSError:  # a stream closed: the outputs are in place all the same
                break
    return True
