"""nvstage cache with remote tiers: each tier's figures (hits, misses, bytes, time, errors) in
text and JSON, never a credential; without a remote tier the output is what it was; a new
signing key is written 0600 and never replaces one."""

from __future__ import annotations

import json
import os
import shutil
import socket

import pytest


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch, fresh_tiers):
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    return fresh_tiers


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_each_tier_is_shown_without_credentials(cli, kernels, workdir, monkeypatch,
                                                private_cache):
    shutil.copy(kernels / "saxpy.cu", workdir)
    url = f"redis://:hunter2@127.0.0.1:{_closed_port()}/0"
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE", url)
    monkeypatch.setenv("NVSTAGE_BASE_DIR", str(workdir))
    r = cli("compile", "saxpy.cu", "--arch", "sm_90", "-c")
    assert r.exit_code == 0, r.output
    assert len(private_cache) == 1 and "is off for the rest of this build" in private_cache[0]
    info = json.loads(cli("cache", "--json").stdout)
    local, remote = info["tiers"]
    assert local["tier"] == "local" and local["misses"] == 7 and local["builds"] == 1
    assert local["base_dir"] == str(workdir)
    assert "hunter2" not in remote["tier"] and remote["errors"] >= 1
    assert remote["configured"] and "down" in remote
    text = cli("cache").stdout
    assert "tier      local: 0 hits, 7 misses" in text
    assert f"tier      redis://127.0.0.1:{url.rsplit(':', 1)[1]}: 0 hits" in text
    assert "hunter2" not in text + json.dumps(info) + r.output
    # Without a remote tier configured or recorded, the figures are those of before.
    monkeypatch.delenv("NVSTAGE_REMOTE_CACHE")
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(workdir / "fresh"))
    assert "tiers" not in json.loads(cli("cache", "--json").stdout)


def test_a_bad_remote_setting_is_shown(cli, monkeypatch):
    monkeypatch.setenv("NVSTAGE_REMOTE_CACHE", "ftp://user:pw@host/x")
    info = json.loads(cli("cache", "--json").stdout)
    assert info["tiers"][-1]["problems"] and "pw" not in json.dumps(info["tiers"][-1])
    assert "problem   NVSTAGE_REMOTE_CACHE: ftp://host/x" in cli("cache").stdout


def test_a_new_signing_key(cli, tmp_path):
    pytest.importorskip("cryptography")
    key = tmp_path / "k.pem"
    r = cli("cache", "--new-signing-key", str(key))
    assert r.exit_code == 0 and r.stdout.startswith("ssh-ed25519 ")
    assert oct(os.stat(key).st_mode & 0o777) == "0o600"
    assert b"PRIVATE KEY" in key.read_bytes()
    again = cli("cache", "--new-signing-key", str(key))
    assert again.exit_code == 2 and "does not replace a key" in again.stderr
