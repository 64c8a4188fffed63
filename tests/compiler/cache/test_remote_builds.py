"""Builds through remote tiers on real servers (Redis; nginx's WebDAV, plain and Bazel
layouts): two "runners", each with its own local cache folder and its own cache key, share a
remote tier; signatures keep out entries written without the key; faults made on the real
servers mid-build (killed, stopped, garbage in every key, full) never fail a build, cost one
bounded wait and one line, and the outputs are a cold build's (up to nvcc's module id)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import nvstage
from nvstage.compiler.cache.remote.config import reset
from nvstage.compiler.cache.remote.describe import describe
from nvstage.compiler.nvcc.options import CompileOptions

GENCODES = ("arch=compute_80,code=sm_80", "arch=compute_90,code=[sm_90,compute_90]")
TIMEOUTS = "|connect-timeout=300|operation-timeout=500"


def source(workdir: Path, scale: str = "3.0f") -> None:
    (workdir / "inc").mkdir(exist_ok=True)
    (workdir / "inc/coef.h").write_text(f"#pragma once\n#define SCALE {scale}\n")
    (workdir / "k.cu").write_text('#include "coef.h"\n'
                                  "__global__ void k(float* p) { p[threadIdx.x] *= SCALE; }\n"
                                  "float host_scale() { return SCALE; }\n")


class Runner:
    """A CI runner: its own local cache folder and its own cache key (XDG_CONFIG_HOME)."""

    def __init__(self, root: Path, name: str, monkeypatch, toolkit):
        self.cache = root / f"{name}-cache"
        self.config = root / f"{name}-config"
        self.monkeypatch, self.toolkit = monkeypatch, toolkit

    def build(self, out: str = "k.o", keep: str | None = None, **env):
        self.monkeypatch.setenv("XDG_CONFIG_HOME", str(self.config))
        for k, v in env.items():
            if v is None:
                self.monkeypatch.delenv(k, raising=False)
            else:
                self.monkeypatch.setenv(k, v)
        reset()  # a new process
        opts = CompileOptions(gencodes=GENCODES, compile_only=True, include_dirs=("inc",),
                              output=out)
        return nvstage.compile("k.cu", opts, toolkit=self.toolkit, jobs=2,
                               cache=str(self.cache), keep=keep)


def staged(build) -> list:
    """The build's stage runs but a cleanup (nvcc's plan removes a file itself; nothing to
    cache)."""
    return [r for r in build.runs if r.stage.kind.value != "cleanup"]


def tier(build, n: int = 1) -> dict:
    return build.cache["tiers"][n]


@pytest.fixture
def runners(tmp_path_factory, monkeypatch, toolkit, workdir):
    root = tmp_path_factory.mktemp("runners")
    source(workdir)
    return lambda name: Runner(root, name, monkeypatch, toolkit)


@pytest.fixture
def reference(workdir, toolkit, dump):
    """The object a cold build without any cache gives, as ``dump`` shows it."""
    opts = CompileOptions(gencodes=GENCODES, compile_only=True, include_dirs=("inc",),
                          output="ref.o")
    nvstage.compile("k.cu", opts, toolkit=toolkit, jobs=2, cache=False)
    return dump(workdir / "ref.o")


def server_url(request, kind: str) -> tuple[object, str]:
    if kind == "redis":
        server = request.getfixturevalue("redis_server")
        return server, server.url
    server = request.getfixturevalue("webdav_server")
    return server, server.url + ("|layout=bazel" if kind == "bazel" else "")


@pytest.mark.parametrize("kind", ["redis", "webdav", "bazel"])
def test_a_second_runner_builds_from_the_first_runners_remote(request, runners, reference,
                                                              dump, workdir, kind):
    server, url = server_url(request, kind)
    a, b = runners("a"), runners("b")
    first = a.build(NVSTAGE_REMOTE_CACHE=url + TIMEOUTS)
    n = len([r for r in staged(first) if r.stage.kind.value != "depfile"])
    assert tier(first)["stored"] == n and tier(first)["misses"] == n
    second = b.build(out="b.o")
    assert all(r.cached for r in staged(second))
    assert tier(second)["hits"] == n and tier(second)["misses"] == 0
    assert tier(second)["bytes_read"] > 0 and tier(second)["stored"] == 0
    assert second.cache["tiers"][0]["misses"] == n  # nothing was in its own folder
    assert dump(workdir / "b.o") == reference
    # The hits were written back: with the remote gone, B's own folder has everything.
    server.kill()
    third = b.build(out="c.o", NVSTAGE_REMOTE_CACHE=None)
    assert all(r.cached for r in staged(third)) and "tiers" not in third.cache
    assert dump(workdir / "c.o") == reference


def test_a_source_edit_is_never_served_to_the_other_runner(redis_server, runners, workdir,
                                                           dump, toolkit):
    a, b = runners("a"), runners("b")
    a.build(NVSTAGE_REMOTE_CACHE=redis_server.url + TIMEOUTS)
    source(workdir, "5.0f")  # runner A's next commit
    edited = a.build(out="a5.o")
    assert tier(edited)["stored"] > 0
    source(workdir, "3.0f")  # runner B still builds the old commit
    old = b.build(out="b3.o")
    assert "0f40400000" in dump(workdir / "b3.o") and "0f40A00000" not in \
        dump(workdir / "b3.o")
    source(workdir, "5.0f")
    new = b.build(out="b5.o")
    assert "0f40A00000" in dump(workdir / "b5.o")
    for b in (old, new):
        assert all(r.cached for r in staged(b)), [(r.stage.kind.value, r.cached)
                                                  for r in staged(b)]


# -- signatures --------------------------------------------------------------------------------
def test_signed_entries_and_read_only_jobs(redis_server, runners, workdir, dump, reference,
                                           crypto, tmp_path):
    from nvstage.compiler.cache.remote import signing

    keys = {}
    for name in ("ci", "intruder"):
        pem, public = signing.new_key_pair()
        (tmp_path / f"{name}.pem").write_bytes(pem)
        keys[name] = (str(tmp_path / f"{name}.pem"), public)
    url = redis_server.url + TIMEOUTS
    cli = redis_server.cli()
    reader = dict(NVSTAGE_REMOTE_CACHE=url, NVSTAGE_REMOTE_VERIFY_KEY=keys["ci"][1],
                  NVSTAGE_REMOTE_SIGNING_KEY=None)
    # Entries written without the key, or with another key, are rejected by the reader.
    for writer, signing_key in (("plain", None), ("intruder", keys["intruder"][0])):
        cli.flushdb()
        w = runners(writer).build(NVSTAGE_REMOTE_CACHE=url, NVSTAGE_REMOTE_VERIFY_KEY=None,
                                  NVSTAGE_REMOTE_SIGNING_KEY=signing_key)
        assert tier(w)["stored"] > 0 and cli.dbsize() > 0
        got = runners(f"reader-{writer}").build(out=f"{writer}.o", **reader)
        assert not any(r.cached for r in staged(got))
        assert tier(got)["rejected"] > 0 and tier(got)["hits"] == 0
        assert tier(got)["stored"] == 0  # a reader without the signing key writes nothing
        assert dump(workdir / f"{writer}.o") == reference
    # Signed with the key: accepted.
    cli.flushdb()
    w = runners("ci").build(NVSTAGE_REMOTE_CACHE=url, NVSTAGE_REMOTE_VERIFY_KEY=None,
                            NVSTAGE_REMOTE_SIGNING_KEY=keys["ci"][0])
    assert tier(w)["stored"] > 0
    from nvstage.compiler.cache.local import Cache

    shown = describe(Cache(runners("ci").cache))[1]
    assert shown["signing"] == "writes signed, reads require signatures: 1 trusted key"
    got = runners("reader-ok").build(out="signed.o", **reader)
    assert all(r.cached for r in staged(got)) and tier(got)["rejected"] == 0
    assert dump(workdir / "signed.o") == reference
    # A read-only job (a fork's pull request) writes nothing, whatever it builds.
    source(workdir, "7.0f")
    before = sorted(cli.keys())
    ro = runners("fork").build(out="fork.o", NVSTAGE_REMOTE_CACHE=url,
                               NVSTAGE_REMOTE_VERIFY_KEY=None, NVSTAGE_REMOTE_READ_ONLY="1",
                               NVSTAGE_REMOTE_SIGNING_KEY=keys["ci"][0])
    assert not any(r.cached for r in ro.runs[:1]) and tier(ro)["stored"] == 0
    assert tier(ro)["read_only"] and sorted(cli.keys()) == before


# -- faults mid-build ------------------------------------------------------------------------------
@pytest.fixture
def after_stages(monkeypatch):
    """``after_stages(n, fault)``: run ``fault`` once n stages have been stored (locally and
    in the tiers; stores happen beside the next stage's tool)."""
    from nvstage.compiler.cache.stage.stage_cache import StageCache

    real = StageCache._store

    def install(n: int, fault):
        count = [0]

        def store(*args, **kw):
            real(*args, **kw)
            count[0] += 1
            if count[0] == n:
                fault()

        monkeypatch.setattr(StageCache, "_store", store)
    return install


@pytest.mark.parametrize("kind", ["redis", "webdav"])
@pytest.mark.parametrize("fault", ["kill", "stop"])
def test_a_server_lost_mid_build_costs_one_wait_and_one_line(request, runners, workdir, dump,
                                                            reference, after_stages,
                                                            fresh_tiers, kind, fault):
    server, url = server_url(request, kind)
    after_stages(2, getattr(server, fault))
    t = time.monotonic()
    try:
        b = runners("b").build(NVSTAGE_REMOTE_CACHE=url + TIMEOUTS, NVSTAGE_REMOTE_BACKOFF="0")
    finally:
        if fault == "stop":
            server.cont()
    took = time.monotonic() - t
    assert b.status == "ok" and dump(workdir / "k.o") == reference
    row = tier(b)
    assert "off" in row and row["errors"] >= 1 and 1 <= row["stored"] <= 2
    assert row["seconds"] < 2.0, row  # one operation's timeout (0.5 s) per thread, then off
    assert [line for line in fresh_tiers if "is off" in line] == fresh_tiers
    assert len(fresh_tiers) == 1, fresh_tiers
    assert took < 60


def test_down_at_start(redis_server, runners, workdir, dump, reference, fresh_tiers):
    redis_server.kill()
    b = runners("b").build(NVSTAGE_REMOTE_CACHE=redis_server.url + TIMEOUTS)
    assert dump(workdir / "k.o") == reference
    assert len(fresh_tiers) == 1 and "Connection refused" in fresh_tiers[0]
    assert tier(b)["seconds"] < 1.0
    # The next command skips the tier without trying (NVSTAGE_REMOTE_BACKOFF, 60 s).
    again = runners("b").build(out="again.o")
    assert "found down" in tier(again)["off"] and len(fresh_tiers) == 1


@pytest.mark.parametrize("kind", ["redis", "webdav"])
def test_garbage_in_every_key(request, runners, workdir, dump, reference, fresh_tiers, kind):
    server, url = server_url(request, kind)
    runners("a").build(NVSTAGE_REMOTE_CACHE=url + TIMEOUTS)
    if kind == "redis":
        cli = server.cli()
        for key in cli.keys():
            cli.set(key, os.urandom(64))
    else:
        for f in server.root.rglob("*"):
            if f.is_file():
                f.write_bytes(b"<html>not an entry</html>")
    b = runners("b").build(NVSTAGE_REMOTE_CACHE=url + TIMEOUTS)
    assert not any(r.cached for r in staged(b)) and dump(workdir / "k.o") == reference
    assert tier(b)["rejected"] > 0 and "off" not in tier(b) and not fresh_tiers
    assert tier(b)["seconds"] < 5.0, tier(b)
    # B's fresh results replaced the garbage: a third runner hits them.
    c = runners("c").build(out="c.o")
    assert all(r.cached for r in staged(c)) and dump(workdir / "c.o") == reference


def test_a_full_redis(redis_factory, runners, workdir, dump, reference, fresh_tiers):
    server = redis_factory("--maxmemory", "1mb", "--maxmemory-policy", "noeviction")
    cli = server.cli()
    with pytest.raises(Exception, match="maxmemory"):
        for i in range(100):
            cli.set(f"fill:{i}", b"x" * 100_000)
    with pytest.raises(Exception, match="maxmemory"):  # the last crumbs: lean entries are small
        for i in range(100_000):
            cli.set(f"crumb:{i}", b"x" * 16)
    b = runners("b").build(NVSTAGE_REMOTE_CACHE=server.url + TIMEOUTS)
    assert dump(workdir / "k.o") == reference
    assert len(fresh_tiers) == 1 and "refuses writes" in fresh_tiers[0]
    assert "writes_off" in tier(b) and "off" not in tier(b) and tier(b)["stored"] == 0
    assert tier(b)["seconds"] < 2.0, tier(b)  # a refusal is an answer: no waiting


def _files_hold(roots, secrets) -> list[str]:
    """Every file under ``roots`` that holds one of ``secrets`` (as bytes)."""
    found = []
    for root in roots:
        for f in Path(root).rglob("*"):
            if f.is_file() and not f.is_symlink():
                data = f.read_bytes()
                found += [f"{f}: {s}" for s in secrets if s.encode() in data]
    return found


@pytest.mark.parametrize("kind", ["redis", "webdav"])
def test_credentials_are_never_shown_or_written(request, redis_factory, runners, workdir, cli,
                                                monkeypatch, fresh_tiers, kind):
    """A password in the URL, in NVSTAGE_REMOTE_PASSWORD, a token in NVSTAGE_REMOTE_TOKEN, a
    wrong one: none of them (nor the Basic header made of them) is in what a build says or
    returns, in any file the builds wrote (local folders, outputs, the kept build record),
    or in ``nvstage cache`` and ``nvstage cache --json``."""
    import base64
    import json

    if kind == "redis":
        server = redis_factory("--requirepass", "s3cret-pw")
        base = f"127.0.0.1:{server.port}/0"
        url = f"redis://:s3cret-pw@{base}"
    else:
        server = request.getfixturevalue("webdav_server")  # nginx takes any Authorization
        base = server.url.split("://", 1)[1]
        url = f"http://ci:s3cret-pw@{base}"
    scheme = url.split(":", 1)[0]
    secrets = ["s3cret-pw", "n0pe-pw", "t0ken-pw",
               *(base64.b64encode(f"ci:{pw}".encode()).decode()
                 for pw in ("s3cret-pw", "n0pe-pw"))]
    a = runners("a")
    builds = [a.build(keep="a.keep", NVSTAGE_REMOTE_CACHE=url + TIMEOUTS)]
    assert tier(builds[0])["stored"] > 0 and not fresh_tiers
    builds.append(runners("b").build(
        out="b.o", keep="b.keep",
        NVSTAGE_REMOTE_CACHE=url.replace("s3cret-pw", "n0pe-pw") + TIMEOUTS))
    if kind == "redis":  # a wrong password: the tier goes off, with one line
        assert "off" in tier(builds[1]) and len(fresh_tiers) == 1
    # The password from its own variable works the same way; a token is one more secret.
    env = dict(NVSTAGE_REMOTE_CACHE=f"{scheme}://{'ci@' if kind == 'webdav' else ''}{base}"
               + TIMEOUTS, NVSTAGE_REMOTE_PASSWORD="s3cret-pw")
    c = runners("c")
    builds.append(c.build(out="c.o", keep="c.keep", **env))
    assert all(r.cached for r in builds[-1].runs)
    if kind == "webdav":
        builds.append(runners("d").build(out="d.o", keep="d.keep",
                                         NVSTAGE_REMOTE_CACHE=f"http://{base}" + TIMEOUTS,
                                         NVSTAGE_REMOTE_TOKEN="t0ken-pw",
                                         NVSTAGE_REMOTE_PASSWORD=None))
        assert all(r.cached for r in builds[-1].runs)
    said = [json.dumps(b.to_json()) for b in builds] + list(fresh_tiers)
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(c.cache))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    for args in (("cache", "--json"), ("cache",)):
        r = cli(*args)
        assert r.exit_code == 0, r.stderr
        said += [r.stdout, r.stderr]
    assert json.loads(said[-4])["tiers"][1]["configured"]
    assert [f"{s!r} in {t[:200]!r}" for t in said for s in secrets if s in t] == []
    assert _files_hold([workdir, *Path(a.cache).parent.iterdir()], secrets) == []


def test_the_remote_comes_from_the_environment_only(redis_server, kernels, workdir, cli,
                                                    monkeypatch, tmp_path_factory):
    """Settings in the repository (a pull request can write those) name no remote tier:
    pyproject.toml's [tool.nvstage], files named like settings, ccache's own setting. Only
    NVSTAGE_REMOTE_CACHE does."""
    import json
    import shutil

    url = redis_server.url
    shutil.copy(kernels / "saxpy.cu", workdir)
    (workdir / "pyproject.toml").write_text(
        f'[tool.nvstage]\nremote_cache = "{url}"\nNVSTAGE_REMOTE_CACHE = "{url}"\n')
    for name in (".env", "nvstage.toml", ".nvstage", "ccache.conf", ".nvstagerc"):
        (workdir / name).write_text(f"NVSTAGE_REMOTE_CACHE={url}\nremote_storage = {url}\n"
                                    f"remote_cache = {url}\n")
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("CCACHE_CONFIGPATH", str(workdir / "ccache.conf"))
    r = cli("compile", "saxpy.cu", "--arch", "sm_90", "-c", "--json")
    assert r.exit_code == 0, r.stderr
    assert "tiers" not in json.loads(r.stdout).get("cache", {})
    assert redis_server.cli().dbsize() == 0
    assert "tiers" not in json.loads(cli("cache", "--json").stdout)
    # The same build with the variable set writes to that server.
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE", url + TIMEOUTS)
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    r = cli("compile", "saxpy.cu", "--arch", "sm_90", "-c", "-o", "again.o")
    assert r.exit_code == 0, r.stderr
    assert redis_server.cli().dbsize() > 0
