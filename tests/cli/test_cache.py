"""nvstage cache: figures on stdout, JSON with --json, --clear empties it, and only a folder
nvstage made; a running build keeps its scratch folder; bad settings are one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

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
    # the entries' files as stored (zstd frames) and as the builds wrote them
    assert 0 < info["stored_bytes"] < info["uncompressed_bytes"] <= info["size"] * 20
    assert "stored    " in text and "uncompressed (zstd: 0." in text
    r = cli("compile", "saxpy.cu", "--arch", "sm_90", "-c", "--no-cache")
    assert r.exit_code == 0 and "(cached)" not in r.stdout
    cleared = cli("cache", "--clear", "--json")
    assert cleared.exit_code == 0
    after = json.loads(cleared.stdout)
    assert after["entries"] == 0 and after["stats"]["hits"] == 0


def test_cache_dir_option(cli, tmp_path):
    info = json.loads(cli("cache", "--dir", str(tmp_path / "elsewhere"), "--json").stdout)
    assert info["dir"] == str(tmp_path / "elsewhere") and info["entries"] == 0


def user_folder(tmp_path):
    """Somebody's folder that happens to use the cache's names."""
    d = tmp_path / "project"
    for name in ("notes", "tmp"):
        (d / name).mkdir(parents=True)
        (d / name / "todo.txt").write_text("mine\n")
    (d / "README").write_text("my project\n")
    return d


def snapshot(d):
    return {str(p.relative_to(d)): p.read_bytes() if p.is_file() else None
            for p in sorted(d.rglob("*"))}


def one_error_line(r) -> str:
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_clearing_a_folder_nvstage_did_not_make_is_refused(cli, tmp_path, monkeypatch):
    """Issue 12: ``cache --clear`` deleted a user's notes/ and tmp/."""
    d = user_folder(tmp_path)
    before = snapshot(d)
    r = cli("cache", "--clear", "--dir", str(d))
    assert r.exit_code == 2
    assert one_error_line(r) == (f"error: refusing to clear --dir {d}: nvstage did not make "
                                 f"it (it holds other files and no CACHEDIR.TAG from nvstage)")
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(d))
    r = cli("cache", "--clear")
    assert r.exit_code == 2 and f"NVSTAGE_CACHE_DIR={d}" in one_error_line(r)
    r = cli("cache", "--json")  # not "an empty cache" either
    assert r.exit_code == 2 and json.loads(r.stdout)["error"] == "CacheError"
    assert snapshot(d) == before


def test_a_file_or_proc_self_as_the_cache_is_an_error(cli, kernels, workdir, monkeypatch):
    shutil.copy(kernels / "saxpy.cu", workdir)
    (workdir / "afile").write_text("x")
    for where in (str(workdir / "afile"), "/proc/self", str(workdir / "afile/below")):
        for args in (("cache",), ("cache", "--clear"),
                     ("compile", "saxpy.cu", "--arch", "sm_90", "-c")):
            monkeypatch.setenv("NVSTAGE_CACHE_DIR", where)
            r = cli(*args)
            assert r.exit_code == 2, (where, args, r.output)
            assert f"NVSTAGE_CACHE_DIR={where}" in one_error_line(r)
        r = cli("cache", "--dir", where)
        assert r.exit_code == 2 and f"--dir {where}" in one_error_line(r)
    assert (workdir / "afile").read_text() == "x"
    assert not (workdir / "saxpy.o").exists()  # no silently uncached build either


def test_a_bad_max_size_is_one_line(cli, kernels, workdir, monkeypatch):
    shutil.copy(kernels / "saxpy.cu", workdir)
    for bad in ("lots", "1e400"):
        monkeypatch.setenv("NVSTAGE_CACHE_MAX_SIZE", bad)
        for args in (("cache",), ("compile", "saxpy.cu", "--arch", "sm_90", "-c")):
            r = cli(*args)
            assert r.exit_code == 2, r.output
            assert one_error_line(r) == (
                f"error: NVSTAGE_CACHE_MAX_SIZE='{bad}' is not a size: give bytes (123456) "
                f"or a number with K, M, G or T (500M, 2G, 1.5GiB)")
    monkeypatch.setenv("NVSTAGE_CACHE_MAX_SIZE", "500M")
    assert json.loads(cli("cache", "--json").stdout)["max_size"] == 500 << 20


def test_clear_during_a_build_leaves_the_build_alone(cli, kernels, workdir, private_cache):
    """Issue 12: a clear removed a running build's scratch folder and the build failed,
    blaming gcc. The clear now empties the cache around it; the build finishes."""
    shutil.copy(kernels / "multi.cu", workdir)
    env = {**os.environ, "NVSTAGE_CACHE_DIR": str(private_cache)}
    args = [sys.executable, "-m", "nvstage", "compile", "multi.cu", "-c", "-j", "1",
            *sum((["--gencode", f"arch=compute_{a},code=sm_{a}"] for a in (75, 80, 90)), [])]
    build = subprocess.Popen(args, cwd=workdir, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not list(private_cache.glob("tmp/deps-*")):  # its first depfile's folder
            assert build.poll() is None and time.monotonic() < deadline, build.stderr.read()
            time.sleep(0.005)
        r = cli("cache", "--clear")
        assert r.exit_code == 0 and f"cleared {private_cache}" in r.stderr
        assert list(private_cache.glob("tmp/deps-*"))  # held: not the clear's to remove
        out, err = build.communicate(timeout=300)
    finally:
        if build.poll() is None:
            build.kill()
    assert build.returncode == 0, err
    assert (workdir / "multi.o").is_file()
    assert not list(private_cache.glob("tmp/deps-*"))  # gone with its build
