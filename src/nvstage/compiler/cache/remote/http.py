"""HTTP as a remote tier: GET, PUT and HEAD (http.client), in one of three layouts.

``subdirs`` puts an object at ``PATH/ab/cdef...`` (ccache's default), ``flat`` at
``PATH/abcdef...`` (any WebDAV server: nginx's ``dav_methods PUT`` with
``create_full_put_path on``); ``bazel`` speaks the Bazel remote-cache protocol that
bazel-remote serves: the object goes into the content-addressed store (``/cas/SHA256``) and
``/ac/NAME`` holds an ``ActionResult`` pointing at it (``bazel.py``), so bazel-remote's own
validation of both passes.
"""

from __future__ import annotations

import base64
import hashlib
import threading

from nvstage.compiler.cache.remote.protocol import NAME, Fault, Refused, checked_name
from nvstage.compiler.cache.remote.bazel import action_result, action_result_digest
from nvstage.compiler.cache.remote.deadline import Deadline
from nvstage.compiler.cache.remote.spec import Spec

_MAX_REPLY = 1 << 16


def _https_class():
    """HTTPSConnection whose TLS handshake runs after ``sock`` is the TLS socket, so that a
    ``Deadline`` can end a handshake that trickles (``connect`` otherwise hands the plain
    socket, already detached, to the deadline until the handshake is done). No proxy tunnels."""
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
        name = checked_name(name)
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
            deadline = Deadline(conn, seconds)
            try:
                with deadline:
                    got = self._exchange(conn, fresh, method, path, body, limit)
                if deadline.fired:  # what was read may have ended at the shutdown: cut short
                    self._drop()
                    raise deadline.fault()
                return got
            except (http.client.RemoteDisconnected, BrokenPipeError,
                    ConnectionResetError) as e:
                self._drop()
                if deadline.fired:
                    raise deadline.fault() from None
                if attempt == 0 and not fresh:
                    continue  # the server closed an idle kept-alive connection
                raise Fault(self.spec.mask(f"the connection was closed: {e}")) from None
            except (http.client.HTTPException, ValueError, OSError) as e:
                self._drop()
                if deadline.timed_out(e):  # a socket's own timeout is an OSError too
                    raise deadline.fault() from None
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
        status, data = self._request("GET", f"{self.spec.path}/ac/{checked_name(name)}",
                                     limit=1 << 20)
        if not self._check_get(status, "/ac/"):
            return None
        digest = action_result_digest(data) if data is not None else None
        if digest is None or not NAME.fullmatch(digest[0]) or digest[1] > limit:
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
        name = checked_name(name)
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
