"""Redis as a remote tier: objects as strings, over RESP spoken with the standard library."""

from __future__ import annotations

import socket
import threading

from nvstage.compiler.cache.remote.protocol import Fault, Refused, checked_name
from nvstage.compiler.cache.remote.deadline import Deadline
from nvstage.compiler.cache.remote.spec import Spec

class _Slot:
    """One thread's Redis connection, (socket, reader), and the socket under it, which a
    ``Deadline`` shuts down (an HTTPConnection serves as its own slot: it has ``sock``)."""

    __slots__ = ("conn", "sock")

    def __init__(self):
        self.conn = None
        self.sock: socket.socket | None = None


class _ErrorReply(Exception):
    """An error the server answered with (``-ERR ...``)."""


_REFUSALS = ("OOM", "READONLY", "NOPERM", "MISCONF")
_MAX_BULK = 512 << 20  # Redis's own limit for a string


class RedisBackend:
    """Objects as Redis strings under ``PREFIX:NAME``, over RESP on one socket per thread.

    The protocol is small (GET, MGET, SET, AUTH, SELECT) and spoken here with the standard
    library: importing redis-py would cost more than a whole compile command that hits. Every command is bounded by the operation timeout (``Deadline``); nothing is
    retried. A reply is read within what was asked: a string longer than the caller's limit
    is skipped (within the time bound) and given as ``b""`` (rejected by the caller), and an
    array is taken only as long as the keys asked for, of strings."""

    def __init__(self, spec: Spec):
        self.spec = spec
        self._local = threading.local()
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()

    def _key(self, name: str) -> bytes:
        return f"{self.spec.prefix}:{checked_name(name)}".encode()

    # -- the connection ---------------------------------------------------------------------
    def _slot(self) -> _Slot:
        slot = getattr(self._local, "slot", None)
        if slot is None:
            slot = self._local.slot = _Slot()
        return slot

    def _conn(self, slot: _Slot):
        if slot.conn is not None:
            return slot.conn
        spec = self.spec
        try:
            sock = socket.create_connection((spec.host, spec.port), timeout=spec.connect_s)
        except (TimeoutError, socket.timeout):
            raise Fault(f"cannot connect to {spec.host}:{spec.port} within "
                        f"{spec.connect_s:g} s") from None
        except OSError as e:
            raise Fault(spec.mask(f"cannot connect to {spec.host}:{spec.port}: "
                                  f"{e.strerror or e}")) from None
        slot.sock = sock
        with self._lock:
            self._socks.append(sock)
        try:
            sock.settimeout(spec.operation_s)
            if spec.scheme == "rediss":
                import ssl

                sock = ssl.create_default_context().wrap_socket(
                    sock, server_hostname=spec.host, do_handshake_on_connect=False)
                slot.sock = sock  # the plain one is detached: the watch shuts this one
                with self._lock:
                    self._socks.append(sock)
                sock.do_handshake()
            slot.conn = (sock, sock.makefile("rb"))
            if spec.password is not None:
                self._command(slot, [b"AUTH", *([spec.username.encode()] if spec.username
                                                else []), spec.password.encode()], 1 << 10)
            if spec.path != "0":
                self._command(slot, [b"SELECT", spec.path.encode()], 1 << 10)
        except _ErrorReply as e:
            self._drop(slot)
            raise Fault(spec.mask(f"the server refused the connection: {e}")) from None
        return slot.conn

    def _drop(self, slot: _Slot) -> None:
        conn, sock = slot.conn, slot.sock
        slot.conn = slot.sock = None
        for c in ((conn[1], conn[0]) if conn is not None else ()) + ((sock,) if sock else ()):
            try:
                c.close()
            except OSError:
                pass

    def _command(self, slot: _Slot, words: list[bytes], limit: int, items: int = 0):
        sock, reader = self._conn(slot)
        out = [b"*%d\r\n" % len(words)]
        for w in words:
            out += [b"$%d\r\n" % len(w), w, b"\r\n"]
        sock.sendall(b"".join(out))
        return self._reply(reader, limit, items)

    def _reply(self, reader, limit: int, items: int = 0):
        """One reply: strings up to ``limit`` bytes (longer ones skipped: ``b""``), an array
        (``items`` > 0) of at most ``items`` strings; ValueError for anything else."""
        line = reader.readline(1 << 12)
        if not line.endswith(b"\r\n"):
            raise ValueError("a reply line that does not end")
        kind, body = line[:1], line[1:-2]
        if kind == b"+":
            return body
        if kind == b"-":
            raise _ErrorReply(body.decode(errors="replace"))
        if kind == b":":
            return int(body)
        if kind == b"$":
            n = int(body)
            if n == -1:
                return None
            if not 0 <= n <= _MAX_BULK:
                raise ValueError("a string longer than Redis allows")
            if n > limit:
                _skip(reader, n + 2)
                return b""
            data = reader.read(n + 2)
            if len(data) != n + 2 or not data.endswith(b"\r\n"):
                raise ValueError("a string cut short")
            return data[:-2]
        if kind == b"*" and items:
            n = int(body)
            if n == -1:
                return None
            if not 0 <= n <= items:
                raise ValueError("an array longer than asked for")
            return [self._reply(reader, limit) for _ in range(n)]
        raise ValueError(f"a reply of unexpected type {kind!r}")

    def _call(self, words: list[bytes], limit: int = 1 << 10, items: int = 0):
        """One command's reply; ``Fault``/``Refused`` for anything but an answer."""
        slot = self._slot()
        spec = self.spec
        seconds = spec.operation_s + (spec.connect_s if slot.conn is None else 0)
        deadline = Deadline(slot, seconds)
        try:
            with deadline:
                reply = self._command(slot, words, limit, items)
        except _ErrorReply as e:
            text = str(e)
            if text.startswith(_REFUSALS):
                raise Refused(spec.mask(text)) from None
            raise Fault(spec.mask(f"the server answered with an error: {text}")) from None
        except (Fault, OSError, ValueError, UnicodeDecodeError) as e:
            self._drop(slot)
            if deadline.timed_out(e):
                raise deadline.fault() from None
            if isinstance(e, Fault):
                raise
            if isinstance(e, OSError):  # reset, closed, refused
                raise Fault(spec.mask(e.strerror or str(e) or type(e).__name__)) from None
            raise Fault(f"not the Redis protocol: {e}") from None
        if deadline.fired:  # what was read may have ended at the shutdown: cut short
            self._drop(slot)
            raise deadline.fault()
        return reply

    # -- the backend's operations -----------------------------------------------------------
    def get(self, name: str, limit: int) -> bytes | None:
        data = self._call([b"GET", self._key(name)], limit)
        if data is not None and not isinstance(data, bytes):
            raise Fault("the server answered GET with something that is not a string")
        return data

    def get_many(self, names: list[str], limit: int) -> list[bytes | None]:
        """Several objects in one round trip (MGET): a stage's candidate keys."""
        got = self._call([b"MGET", *(self._key(n) for n in names)], limit, len(names))
        if not isinstance(got, list) or len(got) != len(names) or \
                not all(v is None or isinstance(v, bytes) for v in got):
            raise Fault("the server answered MGET with something that is not a list of strings")
        return got

    def put(self, name: str, data: bytes) -> None:
        if self._call([b"SET", self._key(name), data]) != b"OK":
            raise Fault("the server did not answer SET with OK")

    def close(self) -> None:
        with self._lock:
            for sock in self._socks:
                try:
                    sock.close()
                except OSError:
                    pass
            self._socks.clear()


def _skip(reader, n: int) -> None:
    """Read and drop ``n`` bytes, a piece at a time (within the operation's time bound)."""
    while n:
        got = reader.read(min(n, 1 << 20))
        if not got:
            raise ValueError("a string cut short")
        n -= len(got)
