"""Remote storage for the stage cache: where a remote tier is (from the environment only) and
the two kinds of server it speaks to, Redis and HTTP.

A backend only moves bytes under names (64 hex digits, made by ``tiers.py``): ``get`` gives
the bytes or None, ``put`` stores them. It knows nothing of entries, signatures or the local
cache. Every operation is bounded in time: the whole of it (connecting, sending, every byte of
the answer) takes at most the operation timeout, plus the connect timeout when it opens the
connection; a server that trickles its answer a byte at a time is cut off at that point, not
merely at a silence as long as the timeout (``_Watch``). What is read is bounded in size too:
no answer is read beyond the limit the caller gives (an object larger than an entry may be is
skipped or the connection dropped), and no Redis reply nests or holds more items than asked
for. Anything that is not an answer (refused, reset, timed out, a reply that is not the
protocol, an HTTP redirect: never followed, so credentials never go to another host) raises
``Fault``, and a server that answers but will not store (Redis's ``maxmemory`` with
``noeviction``, HTTP 403, 405, 413, 507) raises ``Refused``. ``tiers.py`` turns either into
"this tier is off for the rest of the build".

Configuration (``NVSTAGE_REMOTE_CACHE``), one or more specs separated by blanks, each a URL
with ccache-style ``|name=value`` attributes::

    redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]      (rediss:// for TLS)
    http(s)://[USER:PASSWORD@]HOST[:PORT][/PATH]    |layout=subdirs (default), flat or bazel
    ...|connect-timeout=MS|operation-timeout=MS|read-only=true

``connect-timeout`` (1000) bounds opening a connection; ``operation-timeout`` (5000) bounds one
operation (a GET, an MGET, a PUT) from its first byte sent to its last byte read.

Credentials may instead come from ``NVSTAGE_REMOTE_USER``/``NVSTAGE_REMOTE_PASSWORD`` (HTTP
basic authentication, Redis AUTH) and ``NVSTAGE_REMOTE_TOKEN`` (HTTP bearer). They are never
part of a tier's label, and every message about a tier is masked (``Spec.mask``).

HTTP layouts: ``subdirs`` puts an object at ``PATH/ab/cdef...`` (ccache's default), ``flat`` at
``PATH/abcdef...`` (any WebDAV server: nginx's ``dav_methods PUT`` with
``create_full_put_path on``); ``bazel`` speaks the Bazel remote-cache protocol that
bazel-remote serves: the object goes into the content-addressed store (``/cas/SHA256``) and
``/ac/NAME`` holds an ``ActionResult`` pointing at it (so bazel-remote's own validation of
both passes).
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import os
import re
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

from nvstage.compiler.cache.tiers import ENV_PASSWORD, ENV_REMOTE, ENV_TOKEN, ENV_USER
from nvstage.errors import RemoteCacheError

DEFAULT_CONNECT_S = 1.0
DEFAULT_OPERATION_S = 5.0
LAYOUTS = ("subdirs", "flat", "bazel")
_ATTRS = ("layout", "connect-timeout", "operation-timeout", "read-only", "key-prefix")


class Fault(Exception):
    """The server did not answer as a server of its kind does (message: why, masked)."""


class Refused(Fault):
    """The server answered, and will not store (full, or no permission to write)."""


@dataclass
class Spec:
    """One remote tier as configured."""

    scheme: str  # redis, rediss, http, https
    host: str
    port: int
    path: str  # HTTP: the URL's path, no trailing slash; Redis: the database number
    username: str | None = None
    password: str | None = field(default=None, repr=False)  # a traceback never shows them
    token: str | None = field(default=None, repr=False)
    layout: str = "subdirs"
    connect_s: float = DEFAULT_CONNECT_S
    operation_s: float = DEFAULT_OPERATION_S
    read_only: bool = False
    prefix: str = "nvstage"
    secrets: list[str] = field(default_factory=list, repr=False)

    @property
    def kind(self) -> str:
        return "redis" if self.scheme.startswith("redis") else "http"

    @property
    def label(self) -> str:
        """The tier as messages, ``nvstage cache`` and manifests name it: no credentials."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        where = f"{self.scheme}://{host}:{self.port}"
        if self.kind == "redis":
            return f"{where}/{self.path}"
        return f"{where}{self.path}" + (f"|layout={self.layout}"
                                        if self.layout != "subdirs" else "")

    def mask(self, text: str) -> str:
        """``text`` with every credential replaced by ``***``."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            if secret:
                text = text.replace(secret, "***")
                quoted = urllib.parse.quote(secret, safe="")
                if quoted != secret:
                    text = text.replace(quoted, "***")
        return text


def parse_specs(value: str, environ=os.environ) -> list[Spec]:
    """The tiers ``NVSTAGE_REMOTE_CACHE`` names. Raises ``RemoteCacheError`` (masked)."""
    specs = []
    for word in value.split():
        specs.append(parse_spec(word, environ))
    return specs


def parse_spec(word: str, environ=os.environ) -> Spec:
    url, *attrs = word.split("|")
    secrets = [s for s in (environ.get(ENV_PASSWORD), environ.get(ENV_TOKEN)) if s]
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise RemoteCacheError(_masked(f"{ENV_REMOTE}: not a URL: {url}", url)) from None
    if parts.password:
        secrets.append(urllib.parse.unquote(parts.password))
        secrets.append(parts.password)
    shown = _strip_userinfo(url)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss", "http", "https"):
        raise RemoteCacheError(f"{ENV_REMOTE}: {shown}: nvstage speaks redis://, rediss://, "
                               f"http:// and https://")
    if not parts.hostname:
        raise RemoteCacheError(f"{ENV_REMOTE}: {shown}: no host")
    user = urllib.parse.unquote(parts.username) if parts.username else environ.get(ENV_USER)
    password = urllib.parse.unquote(parts.password) if parts.password is not None else \
        environ.get(ENV_PASSWORD)
    if scheme.startswith("redis"):
        db = parts.path.strip("/") or "0"
        if not db.isdigit():
            raise RemoteCacheError(f"{ENV_REMOTE}: {shown}: the path names a Redis database "
                                   f"by its number (/0)")
        spec = Spec(scheme, parts.hostname, port or 6379, db, user or None, password or None)
    else:
        spec = Spec(scheme, parts.hostname, port or (443 if scheme == "https" else 80),
                    parts.path.rstrip("/"), user or None, password or None,
                    environ.get(ENV_TOKEN) or None)
    spec.secrets = secrets
    for attr in attrs:
        name, _, val = attr.partition("=")
        name = name.strip()
        if name not in _ATTRS:
            raise RemoteCacheError(f"{ENV_REMOTE}: {shown}: unknown attribute {name!r} "
                                   f"(known: {', '.join(_ATTRS)})")
        try:
            if name == "layout":
                if val not in LAYOUTS:
                    raise ValueError(f"layout is one of {', '.join(LAYOUTS)}")
                if spec.kind != "http":
                    raise ValueError("layout is for http(s):// tiers")
                spec.layout = val
            elif name in ("connect-timeout", "operation-timeout"):
                ms = int(val)
                if not 1 <= ms <= 600_000:
                    raise ValueError("give milliseconds, 1 to 600000")
                setattr(spec, "connect_s" if name == "connect-timeout" else "operation_s",
                        ms / 1000)
            elif name == "read-only":
                if val not in ("true", "false"):
                    raise ValueError("read-only is true or false")
                spec.read_only = val == "true"
            elif name == "key-prefix":
                if not val or any(c.isspace() for c in val):
                    raise ValueError("a key prefix is a word")
                spec.prefix = val
        except ValueError as e:
            raise RemoteCacheError(f"{ENV_REMOTE}: {shown}: {name}={val!r}: {e}") from None
    return spec


def _strip_userinfo(url: str) -> str:
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.username is None and parts.password is None:
            return url
        host = parts.netloc.rsplit("@", 1)[-1]
        return urllib.parse.urlunsplit((parts.scheme, host, parts.path, "", ""))
    except ValueError:
        return "(a URL)"


def _masked(text: str, url: str) -> str:
    return text.replace(url, _strip_userinfo(url))


def open_backend(spec: Spec):
    """The backend for ``spec``."""
    return RedisBackend(spec) if spec.kind == "redis" else HttpBackend(spec)


_NAME = re.compile(r"[0-9a-f]{64}")


def _name(name: str) -> str:
    """``name`` if it is one (64 hex digits): nothing else becomes a key or a URL path."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"not an object name: {name!r}")
    return name


class _Slot:
    """One thread's Redis connection, (socket, reader), and the socket under it, which a
    ``_Watch`` shuts down (an HTTPConnection serves as its own slot: it has ``sock``)."""

    __slots__ = ("conn", "sock")

    def __init__(self):
        self.conn = None
        self.sock: socket.socket | None = None


class _Watch:
    """Bounds one operation's whole time. A socket timeout only bounds each silence: a server
    that sends one byte per timeout would hold a build for as long as it likes. When the time
    is up, the slot's socket is shut down (by ``_watchdog``'s thread), which ends a read or a
    write blocked on it, TLS handshakes included; the caller then reports a timeout
    (``fired``)."""

    __slots__ = ("_slot", "deadline", "done", "fired")

    def __init__(self, slot, seconds: float):
        self._slot = slot
        self.deadline = time.monotonic() + seconds
        self.done = False
        self.fired = False

    def __enter__(self):
        _watchdog.arm(self)
        return self

    def __exit__(self, *exc) -> None:
        with _watchdog.lock:
            self.done = True

    def fire(self) -> None:  # the watchdog's thread, holding its lock
        if self.done:
            return
        self.fired = True
        sock = self._slot.sock
        if sock is not None:
            try:  # the plain socket's shutdown: an SSL socket's would need its own thread
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass


class _Watchdog:
    """One thread for the process that fires each ``_Watch`` at its deadline. Arming is a
    heap push under a lock (a few microseconds; a thread per operation cost 0.5 ms here), and
    the thread is woken only when a new deadline comes before the one it waits for."""

    def __init__(self):
        self.lock = threading.Lock()
        self._cond = threading.Condition(self.lock)
        self._heap: list = []
        self._count = 0
        self._thread: threading.Thread | None = None

    def arm(self, watch: _Watch) -> None:
        with self._cond:
            self._count += 1
            earlier = not self._heap or watch.deadline < self._heap[0][0]
            heapq.heappush(self._heap, (watch.deadline, self._count, watch))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="nvstage-remote-watch",
                                                daemon=True)
                self._thread.start()
            elif earlier:
                self._cond.notify()

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)[2].fire()


_watchdog = _Watchdog()


# -- Redis ------------------------------------------------------------------------------------
class _ErrorReply(Exception):
    """An error the server answered with (``-ERR ...``)."""


_REFUSALS = ("OOM", "READONLY", "NOPERM", "MISCONF")
_MAX_BULK = 512 << 20  # Redis's own limit for a string


class RedisBackend:
    """Objects as Redis strings under ``PREFIX:NAME``, over RESP on one socket per thread.

    The protocol is small (GET, MGET, SET, AUTH, SELECT) and spoken here with the standard
    library: importing redis-py takes about 150 ms, more than a whole compile command that
    hits. Every command is bounded by the operation timeout (``_Watch``); nothing is
    retried. A reply is read within what was asked: a string longer than the caller's limit
    is skipped (within the time bound) and given as ``b""`` (rejected by the caller), and an
    array is taken only as long as the keys asked for, of strings."""

    def __init__(self, spec: Spec):
        self.spec = spec
        self._local = threading.local()
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()

    def _key(self, name: str) -> bytes:
        return f"{self.spec.prefix}:{_name(name)}".encode()

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
        watch = _Watch(slot, seconds)
        try:
            with watch:
                reply = self._command(slot, words, limit, items)
        except _ErrorReply as e:
            text = str(e)
            if text.startswith(_REFUSALS):
                raise Refused(spec.mask(text)) from None
            raise Fault(spec.mask(f"the server answered with an error: {text}")) from None
        except (Fault, OSError, ValueError, UnicodeDecodeError) as e:
            self._drop(slot)
            if watch.fired or isinstance(e, (TimeoutError, socket.timeout)):
                raise Fault(f"no answer within {seconds:g} s") from None
            if isinstance(e, Fault):
                raise
            if isinstance(e, OSError):  # reset, closed, refused
                raise Fault(spec.mask(e.strerror or str(e) or type(e).__name__)) from None
            raise Fault(f"not the Redis protocol: {e}") from None
        if watch.fired:  # what was read may have ended at the shutdown: cut short
            self._drop(slot)
            raise Fault(f"no answer within {seconds:g} s")
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


# -- HTTP -------------------------------------------------------------------------------------
_MAX_REPLY = 1 << 16


def _https_class():
    """HTTPSConnection whose TLS handshake runs after ``sock`` is the TLS socket, so that a
    ``_Watch`` can end a handshake that trickles (``connect`` otherwise hands the plain
    socket, already detached, to the watch until the handshake is done). No proxy tunnels."""
    import http.client

    class Connection(http.client.HTTPSConnection):
        def connect(self):
            http.client.HTTPConnection.connect(self)
            self.sock = self._context.wrap_socket(self.sock, server_hostname=self.host,
                                                  do_handshake_on_connect=False)
            self.sock.do_handshake()

    return Connection
class HttpBackend:
    """GET, PUT and HEAD over one keep-alive connection per thread (http.client)."""

    def __init__(self, spec: Spec):
        self.spec = spec
        self._local = threading.local()
        self._conns: list = []
        self._lock = threading.Lock()
        headers = {"User-Agent": "nvstage"}
        if spec.token:
            headers["Authorization"] = f"Bearer {spec.token}"
        elif spec.username is not None or spec.password is not None:
            pair = f"{spec.username or ''}:{spec.password or ''}".encode()
            cred = base64.b64encode(pair).decode()
            headers["Authorization"] = f"Basic {cred}"
            spec.secrets.append(cred)
        self._headers = headers

    # -- where objects are ----------------------------------------------------------------
    def _path(self, name: str) -> str:
        name = _name(name)
        if self.spec.layout == "subdirs":
            return f"{self.spec.path}/{name[:2]}/{name[2:]}"
        return f"{self.spec.path}/{name}"

    # -- one request ------------------------------------------------------------------------
    def _connection(self):
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self.spec.scheme == "https":
                import ssl

                conn = _https_class()(self.spec.host, self.spec.port,
                                      timeout=self.spec.connect_s,
                                      context=ssl.create_default_context())
            else:
                import http.client

                conn = http.client.HTTPConnection(self.spec.host, self.spec.port,
                                                  timeout=self.spec.connect_s)
            self._local.conn = conn
            with self._lock:
                self._conns.append(conn)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def _request(self, method: str, path: str, body: bytes | None = None,
                 limit: int = 0) -> tuple[int, bytes | None]:
        """(status, body read within ``limit``: None for a longer one, which is not read).
        A kept-alive connection the server closed meanwhile is opened again once; anything
        else raises ``Fault``. A redirect is a status like any other: never followed."""
        import http.client

        limit = limit or _MAX_REPLY  # a PUT's or a HEAD's answer: a few words
        for attempt in (0, 1):
            conn = self._connection()
            fresh = conn.sock is None
            seconds = self.spec.operation_s + (self.spec.connect_s if fresh else 0)
            watch = _Watch(conn, seconds)
            try:
                with watch:
                    got = self._exchange(conn, fresh, method, path, body, limit)
                if watch.fired:  # what was read may have ended at the shutdown: cut short
                    self._drop()
                    raise Fault(f"no answer within {seconds:g} s")
                return got
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError) as e:
                self._drop()
                if watch.fired:
                    raise Fault(f"no answer within {seconds:g} s") from None
                if attempt == 0 and not fresh:
                    continue  # the server closed an idle kept-alive connection
                raise Fault(self.spec.mask(f"the connection was closed: {e}")) from None
            except (TimeoutError, socket.timeout):
                self._drop()
                raise Fault(f"no answer within {seconds:g} s") from None
            except (http.client.HTTPException, ValueError, OSError) as e:
                self._drop()
                if watch.fired:
                    raise Fault(f"no answer within {seconds:g} s") from None
                if isinstance(e, OSError):
                    raise Fault(self.spec.mask(e.strerror or str(e))) from None
                raise Fault(self.spec.mask(f"not an HTTP answer: {type(e).__name__}: {e}")) \
                    from None
        raise Fault("unreachable")  # pragma: no cover

    def _exchange(self, conn, fresh: bool, method: str, path: str, body: bytes | None,
                  limit: int) -> tuple[int, bytes | None]:
        if fresh:
            conn.connect()  # within the connect timeout
            conn.sock.settimeout(self.spec.operation_s)
        headers = dict(self._headers)
        if body is not None:
            headers["Content-Length"] = str(len(body))
            headers["Content-Type"] = "application/octet-stream"
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        length = resp.getheader("Content-Length")
        if method == "HEAD":
            data = resp.read()  # nothing, and the response is done with
        elif length is not None and length.isdigit() and int(length) > limit:
            self._drop()  # the body is not read: the connection cannot be reused
            return resp.status, None
        else:
            data = resp.read(limit + 1)
            if len(data) > limit:
                self._drop()
                return resp.status, None
        if resp.will_close:
            self._drop()
        return resp.status, data

    def _check_get(self, status: int, what: str) -> bool:
        """True for a body, False for "not there"; else ``Fault``."""
        if status == 200:
            return True
        if status == 404:
            return False
        raise Fault(f"GET {what}: HTTP {status}")

    def _check_put(self, status: int, what: str) -> None:
        if status in (200, 201, 204):
            return
        if status in (401, 403, 405, 409, 411, 413, 507):
            raise Refused(f"PUT {what}: HTTP {status}")
        raise Fault(f"PUT {what}: HTTP {status}")

    # -- the backend's two operations -------------------------------------------------------
    def get(self, name: str, limit: int) -> bytes | None:
        """The object, None when there is none, ``b""`` for one that cannot be an entry
        (longer than ``limit``; in the Bazel layout, an action that is not ours or a blob
        that is not its digest's): the caller counts it rejected."""
        if self.spec.layout != "bazel":
            status, data = self._request("GET", self._path(name), limit=limit)
            if not self._check_get(status, "an object"):
                return None
            return b"" if data is None else data
        status, data = self._request("GET", f"{self.spec.path}/ac/{_name(name)}",
                                     limit=1 << 20)
        if not self._check_get(status, "/ac/"):
            return None
        digest = action_result_digest(data) if data is not None else None
        if digest is None or not _NAME.fullmatch(digest[0]) or digest[1] > limit:
            return b""
        sha = digest[0]
        status, blob = self._request("GET", f"{self.spec.path}/cas/{sha}", limit=limit)
        if not self._check_get(status, "/cas/"):
            return None
        if blob is None or hashlib.sha256(blob).hexdigest() != sha:
            return b""
        return blob

    def put(self, name: str, data: bytes) -> None:
        if self.spec.layout != "bazel":
            status, _ = self._request("PUT", self._path(name), data)
            self._check_put(status, "an object")
            return
        name = _name(name)
        sha = hashlib.sha256(data).hexdigest()
        status, _ = self._request("HEAD", f"{self.spec.path}/cas/{sha}")
        if status != 200:  # 200: the content store has it already, only the action to write
            status, _ = self._request("PUT", f"{self.spec.path}/cas/{sha}", data)
            self._check_put(status, "/cas/")
        status, _ = self._request("PUT", f"{self.spec.path}/ac/{name}",
                                  action_result(sha, len(data)))
        self._check_put(status, "/ac/")

    def close(self) -> None:
        with self._lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()


# -- Bazel's ActionResult, the few fields used -----------------------------------------------
# build.bazel.remote.execution.v2: ActionResult { repeated OutputFile output_files = 2;
# int32 exit_code = 4; } OutputFile { string path = 1; Digest digest = 2; }
# Digest { string hash = 1; int64 size_bytes = 2; }
ENTRY_PATH = "nvstage-entry"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def action_result(sha: str, size: int) -> bytes:
    digest = _field(1, sha.encode()) + _varint(2 << 3) + _varint(size)
    return _field(2, _field(1, ENTRY_PATH.encode()) + _field(2, digest))


def _fields(data: bytes):
    """(field number, wire type, value) of a protobuf message; ValueError when malformed."""
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 2:
            length, i = _read_varint(data, i)
            if i + length > len(data):
                raise ValueError("truncated")
            value, i = data[i:i + length], i + length
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError("unknown wire type")
        yield number, wire, value


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if i >= len(data) or shift > 63:
            raise ValueError("bad varint")
        b = data[i]
        i += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def action_result_digest(data: bytes) -> tuple[str, int] | None:
    """The (sha256, size) of the entry an ActionResult of ours points at; None otherwise."""
    try:
        for number, wire, value in _fields(data):
            if number != 2 or wire != 2:
                continue
            path, sha, size = None, None, None
            for n2, w2, v2 in _fields(value):
                if n2 == 1 and w2 == 2:
                    path = v2.decode()
                elif n2 == 2 and w2 == 2:
                    for n3, w3, v3 in _fields(v2):
                        if n3 == 1 and w3 == 2:
                            sha = v3.decode()
                        elif n3 == 2 and w3 == 0:
                            size = v3
            if path == ENTRY_PATH and sha and len(sha) == 64 and size is not None:
                return sha, size
    except (ValueError, UnicodeDecodeError):
        return None
    return None
