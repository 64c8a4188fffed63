"""Remote tiers against hostile servers (a real socket server on loopback that answers as each
test says) and hostile objects on a real Redis: every operation ends within its timeout as a
whole (a server that trickles bytes is cut off), reads no more than an entry may hold, never
follows a redirect (credentials stay with the configured host), never builds a path from what
a server says, and takes nothing for an entry that is not the one asked for."""

from __future__ import annotations

import time
import tracemalloc
import zlib

import pytest

from nvstage.compiler.cache.remote.protocol import Fault
from nvstage.compiler.cache.remote.bazel import action_result
from nvstage.compiler.cache.remote.objects import MAGIC, object_name, pack
from nvstage.compiler.cache.remote.spec import parse_spec
from nvstage.compiler.cache.remote.tier import open_backend
from nvstage.compiler.cache.remote.tiers import open_tiers
from nvstage.compiler.cache.local import Cache

KEY = "ab" * 32
OTHER = "cd" * 32
NAME = object_name("entry", KEY)
LIMIT = 1 << 20
TIMEOUTS = "|connect-timeout=300|operation-timeout=500"


def _backend(url: str, **env):
    return open_backend(parse_spec(url + TIMEOUTS, env))


def _trickle(head: bytes, byte: bytes = b"x"):
    """A handler that sends ``head``, then one byte every 0.1 s (each read is answered well
    within the 0.5 s timeout) until the client goes away."""
    def handler(conn, request, stop):
        conn.sendall(head)
        while not stop.is_set():
            conn.sendall(byte)
            time.sleep(0.1)
    return handler


def _bounded(call) -> tuple[Exception | None, float]:
    start = time.monotonic()
    try:
        call()
        err = None
    except Fault as e:
        err = e
    return err, time.monotonic() - start


# -- slow loris: the operation timeout bounds the whole operation -------------------------------
@pytest.mark.parametrize("head", [
    b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n",  # the body, a byte at a time
    b"HTTP/1.1 200 OK\r\n",  # headers that never end
])
def test_an_http_server_that_trickles_is_cut_off(hostile, head):
    server = hostile(_trickle(head, b"x" if head.endswith(b"\r\n\r\n") else b"X-a: b\r\n"))
    backend = _backend(f"http://127.0.0.1:{server.port}/c")
    err, took = _bounded(lambda: backend.get(NAME, LIMIT))
    backend.close()
    assert err is not None and "no answer within 0.8 s" in str(err)
    assert took < 1.5, took


def test_a_redis_server_that_trickles_is_cut_off(hostile):
    server = hostile(_trickle(b"$100000\r\n"))
    backend = _backend(f"redis://127.0.0.1:{server.port}/0")
    err, took = _bounded(lambda: backend.get(NAME, LIMIT))
    backend.close()
    assert err is not None and "no answer within 0.8 s" in str(err)
    assert took < 1.5, took


def test_a_trickling_server_costs_one_timeout_in_a_build(hostile, tmp_path, monkeypatch,
                                                         fresh_tiers):
    server = hostile(_trickle(b"$100000\r\n"))
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE", f"redis://127.0.0.1:{server.port}/0" + TIMEOUTS)
    monkeypatch.setenv("NVSTAGE_REMOTE_BACKOFF", "0")
    t = open_tiers(Cache(tmp_path / "local").open())
    start = time.monotonic()
    for _ in range(5):
        assert t.fetch_entry([KEY]) is None
    assert time.monotonic() - start < 1.5
    assert len(fresh_tiers) == 1 and "no answer within" in fresh_tiers[0]


# -- huge answers: nothing is read beyond the limit ---------------------------------------------
def _endless(head: bytes, piece: bytes):
    def handler(conn, request, stop):
        conn.sendall(head)
        while not stop.is_set():
            conn.sendall(piece)
    return handler


@pytest.mark.parametrize("method", ["GET", "PUT"])
@pytest.mark.parametrize("head, piece", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n", b"x" * 65536),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"10000\r\n" + b"x" * 65536
     + b"\r\n"),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", b"x" * 65536),
])
def test_a_huge_http_body_is_not_read(hostile, head, piece, method):
    server = hostile(_endless(head, piece))
    backend = _backend(f"http://127.0.0.1:{server.port}/c")
    tracemalloc.start()
    try:
        start = time.monotonic()
        if method == "GET":  # too large to be an entry: rejected, not a fault
            assert backend.get(NAME, LIMIT) == b""
        else:  # a PUT's answer is a few words: the body is left unread
            backend.put(NAME, b"entry")
        took = time.monotonic() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        backend.close()
    assert took < 1.0 and peak < 4 * LIMIT, (took, peak)


@pytest.mark.parametrize("reply", [b"$400000000\r\n", b"$400000000\r\n" + b"x" * 100000])
def test_a_giant_redis_bulk_length_is_not_allocated(hostile, reply):
    def handler(conn, request, stop):
        conn.sendall(reply)
        conn.close()
    server = hostile(handler)
    backend = _backend(f"redis://127.0.0.1:{server.port}/0")
    tracemalloc.start()
    try:
        err, took = _bounded(lambda: backend.get(NAME, LIMIT))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        backend.close()
    assert err is not None and "cut short" in str(err) and took < 1.0
    assert peak < 4 * LIMIT, peak


def test_a_redis_value_larger_than_an_entry_is_skipped(redis_server):
    cli = redis_server.cli()
    cli.set(f"nvstage:{NAME}", b"x" * (LIMIT + 1))
    cli.set(f"nvstage:{object_name('entry', OTHER)}", b"small")
    backend = _backend(redis_server.url)
    try:
        assert backend.get(NAME, LIMIT) == b""
        # The connection is still in step: the next reply is the next command's.
        assert backend.get_many([NAME, object_name("entry", OTHER)], LIMIT) == \
            [b"", b"small"]
    finally:
        backend.close()


@pytest.mark.parametrize("reply", [
    b"*1\r\n" * 100000,  # arrays in arrays: no recursion without end
    b"*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",  # more items than keys asked for
    b"*2\r\n:1\r\n:2\r\n",  # not strings
])
def test_redis_replies_that_are_not_what_was_asked(hostile, reply):
    def handler(conn, request, stop):
        conn.sendall(reply)
        while not stop.is_set() and conn.recv(1 << 16):
            conn.sendall(reply)
    server = hostile(handler)
    backend = _backend(f"redis://127.0.0.1:{server.port}/0")
    try:
        for call in (lambda: backend.get(NAME, LIMIT),
                     lambda: backend.get_many([NAME, object_name("entry", OTHER)], LIMIT)):
            err, took = _bounded(call)
            assert err is not None and took < 1.0
    finally:
        backend.close()


# -- redirects: never followed, credentials stay home -------------------------------------------
def test_a_redirect_to_another_host_is_not_followed(hostile, monkeypatch, tmp_path,
                                                   fresh_tiers):
    elsewhere = hostile(lambda conn, request, stop: conn.sendall(
        b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))

    def redirect(conn, request, stop):
        path = request.split(b" ")[1]
        conn.sendall(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:%d%s\r\n"
                     b"Content-Length: 0\r\n\r\n" % (elsewhere.port, path))
    server = hostile(redirect)
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE",
                       f"http://ci:hunter2@127.0.0.1:{server.port}/c" + TIMEOUTS)
    t = open_tiers(Cache(tmp_path / "local").open())
    assert t.fetch_entry([KEY]) is None
    time.sleep(0.2)
    assert server.seen and b"Authorization: Basic" in server.seen[0]
    assert elsewhere.seen == []
    assert len(fresh_tiers) == 1 and "HTTP 307" in fresh_tiers[0]
    assert "hunter2" not in fresh_tiers[0]


# -- names: never a path from the server -------------------------------------------------------
def test_a_bazel_action_naming_another_path_is_rejected(hostile):
    bad = ("../../../../../etc/passwd?" + "a" * 64)[:64]
    action = action_result(bad, 10)

    def handler(conn, request, stop):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(action) + action)
        while not stop.is_set():
            more = conn.recv(1 << 16)
            if not more:
                return
            server.seen.append(more)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    server = hostile(handler)
    backend = _backend(f"http://127.0.0.1:{server.port}/c|layout=bazel")
    try:
        assert backend.get(NAME, LIMIT) == b""
    finally:
        backend.close()
    assert len(server.seen) == 1 and server.seen[0].startswith(b"GET /c/ac/" + NAME.encode())


def test_only_object_names_become_keys_or_paths(redis_server):
    for url in (redis_server.url, "http://127.0.0.1:1/c", "http://127.0.0.1:1/c|layout=bazel"):
        backend = _backend(url)
        for name in ("../" + NAME[3:], NAME[:-1], NAME.upper(), NAME + "/x"):
            with pytest.raises(ValueError):
                backend.get(name, LIMIT)
            with pytest.raises(ValueError):
                backend.put(name, b"x")
        backend.close()


# -- hostile objects on a real server ------------------------------------------------------------
def _entry_doc(blob: bytes) -> dict:
    import hashlib

    return {"files": [{"name": "0", "sha256": hashlib.sha256(blob).hexdigest(),
                       "size": len(blob), "sites": []}], "stdout": [""], "stderr": [""],
            "seconds": 0.1, "about": {}}


def test_an_entry_for_another_key_is_rejected(redis_server, tmp_path, monkeypatch, fresh_tiers):
    cli = redis_server.cli()
    # A real entry for KEY, copied under OTHER's name.
    cli.set(f"nvstage:{object_name('entry', OTHER)}",
            pack("entry", KEY, _entry_doc(b"abc"), [b"abc"]))
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE", redis_server.url + TIMEOUTS)
    local = Cache(tmp_path / "local").open()
    t = open_tiers(local)
    assert t.fetch_entry([OTHER]) is None and local.export_entry(OTHER) is None
    row = t.to_json()[1]
    assert row["rejected"] == 1 and "off" not in row and not fresh_tiers


def test_a_zip_bomb_is_not_unpacked(redis_server, tmp_path, monkeypatch, fresh_tiers):
    # 256 MiB of zeros behind a valid magic and header: about 250 KiB on the wire.
    header = b'{"schema":"nvstage.remote/1","kind":"entry","key":"' + KEY.encode() + \
        b'","sizes":[268435456],"doc":{}}'
    z = zlib.compressobj(9)
    body = z.compress(len(header).to_bytes(4, "big") + header)
    zeros = bytes(1 << 20)
    body += b"".join(z.compress(zeros) for _ in range(256)) + z.flush()
    redis_server.cli().set(f"nvstage:{NAME}", MAGIC + b"\0" + body)
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE", redis_server.url + TIMEOUTS)
    local = Cache(tmp_path / "local", max_bytes=LIMIT).open()
    t = open_tiers(local)
    tracemalloc.start()
    try:
        start = time.monotonic()
        assert t.fetch_entry([KEY]) is None
        took = time.monotonic() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert t.to_json()[1]["rejected"] == 1 and not fresh_tiers
    assert took < 1.0 and peak < 8 * LIMIT, (took, peak)
