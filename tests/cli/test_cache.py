"""nvstage cache: figures on stdout, JSON with --json, --clear empties it."""

from __future__ import annotations

import json
import shutil

import pytest


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(root))
    return root


def test_cache_shows_builds_and_clears(cli, kernels, workdir, private_cache):
    shutil.copy(kernels / "saxpy.cu", workdir)
    empty = json.loads(cli("cache", "--json").stdout)
    assert empty["dir"] == str(private_cache) and empty["entries"] == 0
    assert empty["stats"]["hit_rate"] is None
    for _ in range(2):
        r = cli("compile", "saxpy.cu", "--arch", "sm_90", "-c")
        assert r.exit_code == 0, r.output
    assert "(cached)" in r.stdout and "cache 7 hits, 0 misses" in r.stderr
    info = json.loads(cli("cache", "--json").stdout)
    assert info["entries"] == 7 and info["size"] > 0
    assert info["stats"]["hits"] == 7 and info["stats"]["misses"] == 7
    assert info["stats"]["hit_rate"] == 0.5
    text = cli("cache").stdout
    assert f"folder    {private_cache}" in text and "entries   7" in text
    assert "hit rate  50.0% (7 hits, 7 misses" in text
    r = cli("compile", "saxpy.cu", "--arch", "sm_90", "-c", "--no-cache")
    assert r.exit_code == 0 and "(cached)" not in r.stdout
    cleared = cli("cache", "--clear", "--json")
    assert cleared.exit_code == 0
    after = json.loads(cleared.stdout)
    assert after["entries"] == 0 and after["stats"]["hits"] == 0


def test_cache_dir_option(cli, tmp_path):
    info = json.loads(cli("cache", "--dir", str(tmp_path / "elsewhere"), "--json").stdout)
    assert info["dir"] == str(tmp_path / "elsewhere") and info["entries"] == 0
