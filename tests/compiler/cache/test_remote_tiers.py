"""Remote tiers without a build: settings, packing and signatures, and each backend against a
real server on loopback (Redis, nginx's WebDAV in the plain and the Bazel layouts), with the
faults made on those servers: down at start, stopped (SIGSTOP), refusing writes (Redis
``maxmemory`` with ``noeviction``), garbage in a key."""

from __future__ import annotations

import time

import pytest

from nvstage.compiler.cache.remote.bazel import action_result, action_result_digest
from nvstage.compiler.cache.remote.config import configured, reset
from nvstage.compiler.cache.remote.objects import MAGIC, Rejected, object_name, pack, unpack
from nvstage.compiler.cache.remote.spec import ENV_TOKEN, Spec, parse_spec, parse_specs
from nvstage.compiler.cache.remote.tier import open_backend
from nvstage.compiler.cache.remote.tiers import Tiers, open_tiers
from nvstage.compiler.cache.local import Cache
from nvstage.errors import RemoteCacheError

KEY = "ab" * 32
OTHER = "cd" * 32
DOC = {"files": [{"name": "0", "sha256": "x", "size": 3, "sites": []}], "stdout": [""],
       "stderr": [""], "seconds": 0.1, "about": {}}


# -- settings -----------------------------------------------------------------------------------
def test_specs_and_labels_never_hold_credentials():
    env = {ENV_TOKEN: "tok-SECRET"}
    r, h, b = parse_specs(
        "redis://user:pa%40ss@cache.example:7000/3|operation-timeout=250 "
        "https://bob:hunter2@cache.example/nvstage/|read-only=true "
        "http://cache.example:8080|layout=bazel", env)
    assert (r.kind, r.host, r.port, r.path, r.username, r.password) == \
        ("redis", "cache.example", 7000, "3", "user", "pa@ss")
    assert r.operation_s == 0.25 and r.label == "redis://cache.example:7000/3"
    assert h.label == "https://cache.example:443/nvstage" and h.read_only
    assert b.label == "http://cache.example:8080|layout=bazel" and b.token == "tok-SECRET"
    assert r.mask("auth pa@ss / pa%40ss failed") == "auth *** / *** failed"
    assert h.mask("bob:hunter2 tok-SECRET") == "bob:*** ***"
    assert b.mask("Bearer tok-SECRET") == "Bearer ***"


@pytest.mark.parametrize("value, said", [
    ("ftp://h/x", "nvstage speaks redis://"),
    ("redis://h/abc", "by its number"),
    ("http://h|layout=zip", "layout is one of"),
    ("redis://h|layout=bazel", "layout is for http"),
    ("http://h|colour=blue", "unknown attribute"),
    ("http://h|connect-timeout=0", "milliseconds"),
    ("http://user:sekrit@|read-only=true", "no host"),
])
def test_bad_settings_are_one_line_without_the_password(value, said):
    with pytest.raises(RemoteCacheError) as e:
        parse_specs(value)
    assert said in e.value.message and "sekrit" not in e.value.message


def test_a_bad_setting_leaves_the_build_without_the_tier(monkeypatch, fresh_tiers):
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE", "http://user:sekrit@cache|colour=blue")
    config = configured()
    assert config.tiers == [] and len(fresh_tiers) == 1
    assert "building without the remote cache" in fresh_tiers[0]
    assert "sekrit" not in fresh_tiers[0]
    configured()
    assert len(fresh_tiers) == 1  # said once per process


# -- packing and signatures ----------------------------------------------------------------------
def test_pack_round_trip_and_damage():
    data = pack("entry", KEY, DOC, [b"abc"])
    doc, blobs = unpack("entry", KEY, data)
    assert doc == DOC and blobs == [b"abc"]
    for bad in (b"", b"garbage", data[:-3], data[:20] + b"x" + data[21:],
                MAGIC + b"\x07" + data[len(MAGIC) + 1:]):
        with pytest.raises(Rejected):
            unpack("entry", KEY, bad)
    with pytest.raises(Rejected):  # an object for another key
        unpack("entry", OTHER, data)
    with pytest.raises(Rejected):  # or of another kind
        unpack("direct", KEY, data)
    with pytest.raises(Rejected):  # a bomb: more than the limit once unpacked
        unpack("entry", KEY, pack("entry", KEY, DOC, [b"\0" * 100_000]), limit=10_000)


def test_signatures(crypto, tmp_path):
    from nvstage.compiler.cache.remote import signing

    pem, public = signing.new_key_pair()
    (tmp_path / "k.pem").write_bytes(pem)
    signer = signing.Signer.from_file(str(tmp_path / "k.pem"))
    pem2, public2 = signing.new_key_pair()
    (tmp_path / "k2.pem").write_bytes(pem2)
    intruder = signing.Signer.from_file(str(tmp_path / "k2.pem"))
    reader = signing.Verifier.from_text(public)
    signed = pack("entry", KEY, DOC, [b"abc"], signer)
    assert unpack("entry", KEY, signed, reader, require=True)[1] == [b"abc"]
    # Unsigned, signed by another key, replayed under another key, or altered: rejected.
    for data, key in ((pack("entry", KEY, DOC, [b"abc"]), KEY),
                      (pack("entry", KEY, DOC, [b"abc"], intruder), KEY),
                      (signed, OTHER),
                      (signed[:-1] + bytes([signed[-1] ^ 1]), KEY)):
        with pytest.raises(Rejected):
            unpack("entry", key, data, reader, require=True)
    # A reader that requires nothing takes an unsigned entry (it trusts the server).
    assert unpack("entry", KEY, pack("entry", KEY, DOC, [b"x"]))[1] == [b"x"]
    # Public keys in every form a CI secret holds them, and as files.
    raw = signer.public
    (tmp_path / "pub").write_text(public + "\n")
    for text in (public, raw.hex(), __import__("base64").b64encode(raw).decode(),
                 str(tmp_path / "pub"), f"{public2}, {public}"):
        assert raw in signing.Verifier.from_text(text).keys
    with pytest.raises(RemoteCacheError):
        signing.Verifier.from_text("ssh-ed25519 AAAAnotakey")
    (tmp_path / "rsa").write_text("-----BEGIN PRIVATE KEY-----\nnope\n-----END PRIVATE KEY-----\n")
    with pytest.raises(RemoteCacheError) as e:
        signing.Signer.from_file(str(tmp_path / "rsa"))
    assert "nope" not in e.value.message


def test_signing_settings(crypto, tmp_path, monkeypatch, fresh_tiers):
    from nvstage.compiler.cache.remote import signing

    pem, public = signing.new_key_pair()
    (tmp_path / "k.pem").write_bytes(pem)
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("NVSTAGE_REMOTE_VERIFY_KEY", public)
    reader = configured().tiers[0]
    assert reader.require and reader.signer is None and not reader.writable  # a reader only
    monkeypatch.setenv("NVSTAGE_REMOTE_SIGNING_KEY", str(tmp_path / "k.pem"))
    writer = configured().tiers[0]
    assert writer.require and writer.signer is not None and writer.writable
    monkeypatch.setenv("NVSTAGE_REMOTE_READ_ONLY", "1")
    assert not configured().tiers[0].writable
    monkeypatch.delenv("NVSTAGE_REMOTE_VERIFY_KEY")
    monkeypatch.delenv("NVSTAGE_REMOTE_SIGNING_KEY")
    monkeypatch.delenv("NVSTAGE_REMOTE_READ_ONLY")
    monkeypatch.setenv("NVSTAGE_REMOTE_REQUIRE_SIGNATURE", "1")
    assert configured().tiers == []  # required, and nothing to check them with
    assert any("no public key" in line for line in fresh_tiers)


def test_bazel_action_result():
    sha = "12" * 32
    data = action_result(sha, 12345)
    assert action_result_digest(data) == (sha, 12345)
    for bad in (b"", b"\xff\xff", data[:-2], action_result("zz", 1)):
        assert action_result_digest(bad) is None


# -- backends on real servers ----------------------------------------------------------------------
def _spec(url: str, **kw) -> Spec:
    spec = parse_spec(url)
    spec.connect_s, spec.operation_s = 0.5, 0.5
    for k, v in kw.items():
        setattr(spec, k, v)
    return spec


def _roundtrip(backend) -> None:
    name = object_name("entry", KEY)
    assert backend.get(name, 1 << 20) is None
    backend.put(name, b"payload")
    assert backend.get(name, 1 << 20) == b"payload"
    backend.put(name, b"payload2")  # a writer replaces what is there (garbage, say)
    assert backend.get(name, 1 << 20) == b"payload2"


def test_redis_backend(redis_server):
    backend = open_backend(_spec(redis_server.url))
    _roundtrip(backend)
    assert backend.get_many([object_name("entry", KEY), "00" * 32], 100) == \
        [b"payload2", None]
    backend.close()


@pytest.mark.parametrize("layout", ["subdirs", "flat", "bazel"])
def test_webdav_backend(webdav_server, layout):
    backend = open_backend(_spec(webdav_server.url, layout=layout))
    _roundtrip(backend)
    files = sorted(p.relative_to(webdav_server.root).as_posix()
                   for p in webdav_server.root.rglob("*") if p.is_file())
    name = object_name("entry", KEY)
    if layout == "subdirs":
        assert files == [f"cache/{name[:2]}/{name[2:]}"]
    elif layout == "flat":
        assert files == [f"cache/{name}"]
    else:  # the action points into the content store, both as bazel-remote keeps them
        assert len(files) == 3 and f"cache/ac/{name}" in files
        assert sum(f.startswith("cache/cas/") for f in files) == 2
    # Too large for the reader's limit: an empty answer (a rejected entry), not a fault.
    assert backend.get(name, 3) == b""
    backend.close()


# -- one tier's faults -------------------------------------------------------------------------
@pytest.fixture
def local(tmp_path):
    return Cache(tmp_path / "local").open()


def _tiers(monkeypatch, local, url: str) -> Tiers:
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE", f"{url}|connect-timeout=300|operation-timeout=500")
    return open_tiers(local)


def test_down_at_start_is_one_line_and_later_commands_skip_it(monkeypatch, local, fresh_tiers):
    t = _tiers(monkeypatch, local, f"redis://127.0.0.1:{_closed_port()}/0")
    start = time.monotonic()
    assert t.fetch_entry([KEY]) is None and t.fetch_entry([OTHER]) is None
    assert time.monotonic() - start < 2
    assert len(fresh_tiers) == 1 and "is off for the rest of this build" in fresh_tiers[0]
    row = t.to_json()[1]
    assert row["errors"] == 1 and "off" in row
    # The next command (a new process under a launcher) skips it without trying.
    reset()
    t2 = open_tiers(local)
    assert t2.fetch_entry([KEY]) is None and len(fresh_tiers) == 1
    assert "found down by an earlier command" in t2.to_json()[1]["off"]


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("kind", ["redis", "webdav"])
def test_a_stopped_server_costs_one_timeout(request, monkeypatch, local, fresh_tiers, kind):
    server = request.getfixturevalue(f"{kind}_server")
    monkeypatch.setenv("NVSTAGE_REMOTE_BACKOFF", "0")
    t = _tiers(monkeypatch, local, server.url)
    assert t.fetch_entry([KEY]) is None  # the connection is open now
    server.stop()
    try:
        start = time.monotonic()
        for _ in range(5):
            assert t.fetch_entry([KEY]) is None
            t.push_sets(KEY, [([], "d", "s")])
        took = time.monotonic() - start
    finally:
        server.cont()
    assert took < 2.0, took  # one operation timeout (0.5 s), then off
    assert len(fresh_tiers) == 1 and "no answer within 0.5 s" in fresh_tiers[0]


def test_garbage_in_a_key_is_a_rejected_miss(redis_server, monkeypatch, local, fresh_tiers):
    t = _tiers(monkeypatch, local, redis_server.url)
    cli = redis_server.cli()
    cli.set(f"nvstage:{object_name('entry', KEY)}", b"\x00garbage" * 100)
    assert t.fetch_entry([KEY]) is None
    row = t.to_json()[1]
    assert row["rejected"] == 1 and row["errors"] == 0 and "off" not in row
    assert not fresh_tiers  # the tier stays on: a writer replaces the garbage


def test_a_full_redis_refuses_writes_and_still_serves_reads(redis_factory, monkeypatch, local,
                                                           fresh_tiers):
    server = redis_factory("--maxmemory", "2mb", "--maxmemory-policy", "noeviction")
    t = _tiers(monkeypatch, local, server.url)
    # An entry written before the server filled up.
    cli = server.cli()
    cli.set(f"nvstage:{object_name('entry', KEY)}",
            pack("entry", KEY, _entry_doc(), [b"abc"]))
    with pytest.raises(Exception, match="maxmemory"):
        for i in range(100):  # fill it
            cli.set(f"fill:{i}", b"x" * 100_000)
    t.push_sets(OTHER, [([], "d", "s")])  # refused: writes off, one line
    t.push_sets(OTHER, [([], "d", "s")])
    assert len(fresh_tiers) == 1 and "refuses writes" in fresh_tiers[0]
    assert "maxmemory" in fresh_tiers[0]
    assert t.fetch_entry([KEY]) == KEY  # reads go on, and the hit reaches the local folder
    assert local.export_entry(KEY)[1] == [b"abc"]
    row = t.to_json()[1]
    assert row["hits"] == 1 and "writes_off" in row and "off" not in row


def _entry_doc() -> dict:
    import hashlib

    sha = hashlib.sha256(b"abc").hexdigest()  # held ("z"), its key digest recorded ("look")
    return {"files": [{"name": "0", "sha256": sha, "size": 3, "sites": [], "z": 3,
                       "look": [sha, False, False, False]}], "stdout": [""], "stderr": [""],
            "seconds": 0.1, "about": {}}
