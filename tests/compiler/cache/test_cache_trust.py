"""The stage cache as something only its user writes (the hostile-input hunt after issue 12):
it never follows a link out of its folder, never waits on a planted FIFO, returns no entry
written without the user's key, keeps the toolkit's notes under the same rules, restores
files with the modes a fresh build gives, and goes where the settings say, not elsewhere.

Each test uses the finding's own reproduction; the toolkit is the real one throughout."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from nvstage.compiler.cache.local import Cache
from nvstage.compiler.cache.local.entries import Printed
from nvstage.compiler.store.folder import MAX_DOC_BYTES, read_file
from nvstage.compiler.cache.local.tool_notes import set_tool_note, tool_note
from nvstage.errors import CacheError


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch) -> Path:
    root = tmp_path_factory.mktemp("cache") / "c"
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(root))
    # The key lives in the config folder: a private one, not the user's.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.mktemp("config")))
    return root


def compile_ok(cli, *args: str):
    r = cli("compile", *args)
    assert r.exit_code == 0, r.output
    return r


def counts(r) -> tuple[int, int]:
    """(hits, misses) from a build's summary line."""
    import re

    m = re.search(r"cache (\d+) hits?, (\d+) miss", r.stderr + r.stdout)
    assert m, r.output
    return int(m.group(1)), int(m.group(2))


def nvstage_cmd(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    """nvstage in a child process with a time bound: a hang fails the test, not the suite."""
    return subprocess.run([sys.executable, "-m", "nvstage", *args], cwd=cwd, timeout=timeout,
                          capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})


def vadd(kernels, workdir: Path, name: str = "vadd.cu") -> str:
    shutil.copy(kernels / "vadd.cu", workdir / name)
    return name


# -- finding 1: a link where the cache keeps a folder is never followed -------------------------
def test_a_tmp_link_in_the_cache_is_never_followed_by_clear_or_a_builds_sweep(
        cli, kernels, workdir, private_cache, tmp_path_factory, monkeypatch):
    """``tmp`` linked to a folder of the user's: ``cache --clear`` deleted everything there,
    and every build that stored an entry deleted its files over a day old."""
    src = vadd(kernels, workdir)
    compile_ok(cli, src, "--arch", "sm_90", "-o", "v2")
    victim = tmp_path_factory.mktemp("victim2")
    (victim / "sub").mkdir()
    (victim / "file1").write_text("data\n")
    (victim / "sub/f").write_text("d2\n")
    shutil.rmtree(private_cache / "tmp")
    (private_cache / "tmp").symlink_to(victim)
    r = cli("cache", "--clear")
    assert r.exit_code == 0, r.output
    assert (victim / "file1").read_text() == "data\n" and (victim / "sub/f").read_text() == "d2\n"
    assert not (private_cache / "tmp").is_symlink()

    # No --clear: an ordinary build that stores something sweeps tmp/ for files a day old.
    other = tmp_path_factory.mktemp("cache3") / "c3"
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(other))
    compile_ok(cli, src, "--arch", "sm_90", "-o", "v3")
    victim3 = tmp_path_factory.mktemp("victim3")
    (victim3 / "oldfile").write_text("old\n")
    os.utime(victim3 / "oldfile", (1, 1))  # 1970: long past the sweep's day
    (victim3 / "newfile").write_text("new\n")
    shutil.rmtree(other / "tmp")
    (other / "tmp").symlink_to(victim3)
    (workdir / "vadd3.cu").write_text((workdir / src).read_text() + "// change\n")
    compile_ok(cli, "vadd3.cu", "--arch", "sm_90", "-o", "v3b")
    assert sorted(p.name for p in victim3.iterdir()) == ["newfile", "oldfile"]
    assert (other / "tmp").is_dir() and not (other / "tmp").is_symlink()


@pytest.mark.parametrize("name", ["entries", "direct", "notes", "tmp", "lock", "stats.json"])
def test_links_for_the_caches_own_names_lead_nowhere(tmp_path, name):
    """Each of the cache's names linked out of it: writes, evictions and clears stay inside
    (the link is replaced or removed), and what is outside is untouched."""
    c = Cache(tmp_path / "c").open()
    outside = tmp_path / "outside"
    (outside / "ab" / ("ab" * 32)).mkdir(parents=True)  # shaped like an entry, even
    (outside / "ab" / ("ab" * 32) / "meta.json").write_text("{}")
    (outside / "keep.txt").write_text("mine\n")
    os.utime(outside / "keep.txt", (1, 1))
    before = sorted(str(p.relative_to(outside)) for p in outside.rglob("*"))
    (c.root / name).symlink_to(outside)
    (tmp_path / "f").write_bytes(b"x" * 100)
    assert c.put("cd" * 32, [tmp_path / "f"])
    c.add_header_set("ef" * 32, ["[\"h\"]"], "0" * 64, "s")
    c.set_note("n1", [1])
    c.record(c.totals())
    c.discard("ab" * 32)
    c.evict(0)
    c.clear()
    assert sorted(str(p.relative_to(outside)) for p in outside.rglob("*")) == before
    assert (outside / "keep.txt").read_text() == "mine\n"


# -- finding 7: an entry written without the key is a miss -------------------------------------
def forge_host_object(cache: Path, evil: bytes, field: str) -> int:
    """The hunt's forgery: the host-compile entry's object replaced and its record re-sealed
    with a plain checksum (what anyone who can write the folder can compute)."""
    n = 0
    for m in cache.glob("entries/*/*/meta.json"):
        mac, body = m.read_bytes().split(b"\n", 1)  # fsio.seal: the HMAC, then the body
        d = json.loads(body)
        if d.get("about", {}).get("kind") != "host-compile":
            continue
        (m.parent / "0").write_bytes(evil)
        d["files"][0].update(sha256=hashlib.sha256(evil).hexdigest(), size=len(evil), sites=[])
        body = json.dumps(d, sort_keys=True, separators=(",", ":")).encode()
        if field == "seal":  # the seal made a plain checksum
            mac = hashlib.sha256(body).hexdigest().encode()
        else:  # the old seal kept, a checksum of the new body beside it
            d["check"] = hashlib.sha256(body).hexdigest()
            body = json.dumps(d).encode()
        m.write_bytes(mac + b"\n" + body)
        n += 1
    return n


@pytest.mark.parametrize("field", ["seal", "check"])
def test_a_forged_entry_is_a_miss_and_is_discarded(cli, kernels, workdir, private_cache, field):
    src = vadd(kernels, workdir)
    compile_ok(cli, src, "--arch", "sm_90", "-c", "-o", "vadd.o")
    (workdir / "evil.cu").write_text((workdir / src).read_text().replace(
        "vadd: no CUDA device", "EVIL: forged from the cache"))
    compile_ok(cli, "evil.cu", "--arch", "sm_90", "-c", "-o", "evil.o", "--no-cache")
    evil = (workdir / "evil.o").read_bytes()
    assert b"EVIL: forged" in evil
    assert forge_host_object(private_cache, evil, field) == 1
    r = compile_ok(cli, src, "--arch", "sm_90", "-c", "-o", "again.o")
    assert b"EVIL" not in (workdir / "again.o").read_bytes()
    assert b"vadd: no CUDA device" in (workdir / "again.o").read_bytes()
    assert counts(r)[1] == 1  # the forged stage ran
    info = json.loads(cli("cache", "--json").stdout)
    assert info["stats"]["corrupt"] == 1
    r = compile_ok(cli, src, "--arch", "sm_90", "-c", "-o", "third.o")
    assert counts(r) == (7, 0)  # the entry made again is good


def test_the_key_is_private_outside_the_cache_and_another_keys_entries_miss(
        tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "conf"))
    c = Cache(tmp_path / "c").open()
    key = tmp_path / "conf/nvstage/cache.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert stat.S_IMODE(key.parent.stat().st_mode) == 0o700
    assert not list(c.root.rglob("*.key"))
    (tmp_path / "f").write_text("object\n")
    assert c.put("ab" * 32, [tmp_path / "f"], Printed("o"))
    assert c.get("ab" * 32).stdout == "o"
    # The same folder under another user's key (a shared or restored cache): a miss.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "other"))
    assert Cache(tmp_path / "c").open().get("ab" * 32) is False
    # Damage is still damage under the right key.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "conf"))
    meta = c.root / "entries/ab" / ("ab" * 32) / "meta.json"
    meta.write_text(meta.read_text().replace('"o"', '"p"'))
    assert Cache(tmp_path / "c").open().get("ab" * 32) is False


def test_a_key_that_is_no_key_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "conf"))
    (tmp_path / "conf/nvstage").mkdir(parents=True)
    os.mkfifo(tmp_path / "conf/nvstage/cache.key")  # never waited on
    with pytest.raises(CacheError, match="is not a regular file"):
        Cache(tmp_path / "c").open()
    os.unlink(tmp_path / "conf/nvstage/cache.key")
    (tmp_path / "conf/nvstage/cache.key").write_text("short")
    with pytest.raises(CacheError, match="holds 5 bytes"):
        Cache(tmp_path / "c").open()
    # Inside the cache folder it would be readable by whoever writes the cache.
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    with pytest.raises(CacheError, match="holds the cache's own key"):
        Cache(tmp_path / "nvstage").open()


def test_an_entry_sealed_as_before_is_a_miss_not_a_corrupt_one(tmp_path, monkeypatch):
    """nvstage.cache/2 sealed its documents with a JSON field; /3 as every sealed document
    (``fsio.seal``): an old entry is a clean miss, removed, and a new one stores."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "conf"))
    cache = Cache(tmp_path / "c").open()
    (tmp_path / "out").write_bytes(b"data")
    key = "ab" * 32
    assert cache.put(key, [tmp_path / "out"], Printed(seconds=0.1))
    meta = cache.root / "entries" / key[:2] / key / "meta.json"
    meta.write_bytes(b'{"key": "%s", "schema": "nvstage.cache/2", "seal": "00"}' % key.encode())
    assert cache.get(key) is None and not meta.exists()
    assert cache.put(key, [tmp_path / "out"], Printed(seconds=0.1))
    assert cache.get(key).files[0]["size"] == 4


# -- finding 9: a FIFO or device planted in the cache is a miss, never a hang -------------------
def test_fifos_and_devices_planted_in_the_cache_never_hang_a_build(kernels, workdir,
                                                                   private_cache):
    src = vadd(kernels, workdir)
    assert nvstage_cmd("compile", src, "--arch", "sm_90", "-o", "v", cwd=workdir).returncode == 0
    for m in private_cache.glob("entries/*/*/meta.json"):
        m.unlink()
        os.mkfifo(m)
    for f in [*private_cache.glob("direct/*/*.json"), *private_cache.glob("notes/*.json")]:
        f.unlink()
        os.mkfifo(f)
    r = nvstage_cmd("compile", src, "--arch", "sm_90", "-o", "v", cwd=workdir, timeout=90)
    assert r.returncode == 0 and "cache 0 hits, 10 misses" in r.stderr + r.stdout, r.stderr
    (private_cache / "stats.json").unlink()
    os.mkfifo(private_cache / "stats.json")
    r = nvstage_cmd("cache", "--json", cwd=workdir, timeout=30)
    assert r.returncode == 0 and json.loads(r.stdout)["entries"] == 10
    # an entry that holds its file 0 (lean entries hold no preprocessed source)
    entry = next(e for e in private_cache.glob("entries/*/*") if (e / "0").is_file())
    (entry / "0").unlink()
    (entry / "0").symlink_to("/dev/zero")
    (private_cache / "lock").unlink()
    os.mkfifo(private_cache / "lock")
    r = nvstage_cmd("compile", src, "--arch", "sm_90", "-o", "v", cwd=workdir, timeout=90)
    assert r.returncode == 0, r.stderr
    assert (private_cache / "lock").is_file()  # made again, a regular file


def test_read_file_takes_regular_files_within_a_bound_only(tmp_path):
    (tmp_path / "f").write_bytes(b"12345")
    assert read_file(tmp_path / "f", 5) == b"12345"
    with pytest.raises(OSError):
        read_file(tmp_path / "f", 4)
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "f")
    (tmp_path / "zero").symlink_to("/dev/zero")
    for name in ("fifo", "link", "zero"):
        with pytest.raises(OSError):
            read_file(tmp_path / name, MAX_DOC_BYTES)
    with pytest.raises(OSError):
        read_file("/dev/zero", MAX_DOC_BYTES)


# -- finding 10: the toolkit's notes go through the cache's gate -------------------------------
def test_tool_notes_are_not_written_into_a_folder_nvstage_refuses(cli, kernels, workdir,
                                                                  monkeypatch):
    src = vadd(kernels, workdir)
    (workdir / "notes.txt").write_text("mine\n")
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", ".")
    from nvstage.compiler.nvcc.grammar import _grammar
    from nvstage.compiler.toolkit.locate import _load

    _load.cache_clear()  # this process may know the versions already: ask the disk
    _grammar.cache_clear()
    r = cli("compile", src, "--arch", "sm_90", "-c", "-o", "q.o")
    assert r.exit_code == 2 and "is not an nvstage cache folder" in r.stderr
    r = cli("doctor")
    assert r.exit_code in (0, 1) and "Traceback" not in r.output
    assert sorted(p.name for p in workdir.iterdir()) == ["notes.txt", "vadd.cu"]


def test_fifos_in_the_tool_notes_hang_no_command(kernels, workdir, private_cache):
    src = vadd(kernels, workdir)
    r = nvstage_cmd("compile", src, "--arch", "sm_90", "-c", "-o", "q.o", cwd=workdir)
    assert r.returncode == 0, r.stderr
    notes = list((private_cache / "tools").glob("*.json"))
    assert len(notes) >= 7  # the tools' versions and nvcc's grammar
    for f in notes:
        f.unlink()
        os.mkfifo(f)
    for args in (("show", "q.o"), ("doctor",), ("compile", src, "--arch", "sm_90", "-c",
                                                "-o", "r.o")):  # not answered whole
        r = nvstage_cmd(*args, cwd=workdir, timeout=60)
        assert r.returncode in (0, 1) and "Traceback" not in r.stderr, (args, r.stderr)
    assert all(f.is_file() for f in notes)  # what was worked out again replaced them


def test_tool_notes_are_sealed_and_a_bad_cache_setting_only_forgets_them(tmp_path, monkeypatch):
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "c"))
    assert tool_note("v1") is None  # no cache folder yet
    set_tool_note("v1", {"version": "13.5.37"})
    assert tool_note("v1") == {"version": "13.5.37"}
    note = tmp_path / "c/tools/v1.json"
    note.write_text(note.read_text().replace("13.5.37", "13.0.88"))  # edited: not trusted
    assert tool_note("v1") is None
    for bad in (" ", str(tmp_path / "c/tools/v1.json/x")):
        monkeypatch.setenv("NVSTAGE_CACHE_DIR", bad)
        set_tool_note("v2", 1)  # nothing, and no error
        assert tool_note("v2") is None
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("NVSTAGE_CACHE_MAX_SIZE", "lots")
    assert tool_note("v1") is None


def test_a_tool_version_note_is_trusted_only_when_sealed(tmp_path, monkeypatch):
    from nvstage.compiler.toolkit.locate import _cached_version

    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "c"))
    tool = tmp_path / "bin/ptxas"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.5, V13.5.37'\n")
    tool.chmod(0o755)
    assert _cached_version(str(tool)) == "13.5.37"
    (note,) = (tmp_path / "c/tools").glob("*.json")
    mac, body = note.read_bytes().split(b"\n", 1)  # fsio.seal: the HMAC, then the body
    doc = json.loads(body)
    doc["value"]["version"] = "13.0.88"  # what a planted note would say
    note.write_bytes(mac + b"\n" + json.dumps(doc).encode())
    assert _cached_version(str(tool)) == "13.5.37"


# -- finding 19: restored files have the modes a fresh write gives -----------------------------
@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_restored_outputs_have_the_modes_of_a_fresh_build(cli, kernels, workdir, mask):
    src = vadd(kernels, workdir)
    old = os.umask(mask)
    try:
        compile_ok(cli, src, "--arch", "sm_90", "-c", "-o", "o1.o", "--keep-dir", "k1")
        r = compile_ok(cli, src, "--arch", "sm_90", "-c", "-o", "o2.o", "--keep-dir", "k2")
    finally:
        os.umask(old)
    assert counts(r) == (7, 0)
    want = 0o666 & ~mask
    assert stat.S_IMODE((workdir / "o1.o").stat().st_mode) == want
    assert stat.S_IMODE((workdir / "o2.o").stat().st_mode) == want
    fresh = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (workdir / "k1").iterdir()}
    restored = {p.name: stat.S_IMODE(p.stat().st_mode) for p in (workdir / "k2").iterdir()}
    assert restored == fresh and set(restored.values()) == {want}


def test_an_executable_output_is_restored_executable(tmp_path):
    c = Cache(tmp_path / "c")
    (tmp_path / "tool").write_text("#!/bin/sh\n")
    (tmp_path / "tool").chmod(0o755)
    assert c.put("ab" * 32, [tmp_path / "tool"])
    old = os.umask(0o022)
    try:
        c.restore(c.get("ab" * 32), [tmp_path / "out/tool"])
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out/tool").stat().st_mode) == 0o755


# -- finding 21: where the cache goes ----------------------------------------------------------
def test_the_cache_never_lands_in_the_current_folder_by_accident(cli, kernels, workdir,
                                                                  tmp_path_factory, monkeypatch):
    src = vadd(kernels, workdir)
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("NVSTAGE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "relxdg")  # relative: ignored, as XDG says
    compile_ok(cli, src, "--arch", "sm_90", "-c", "-o", "q.o")
    assert Cache(home / ".cache/nvstage").marked()
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", "~/x")
    compile_ok(cli, src, "--arch", "sm_90", "-c", "-o", "q.o")
    assert Cache(home / "x").marked()
    for blank in (" ", "\t"):
        monkeypatch.setenv("NVSTAGE_CACHE_DIR", blank)
        for args in (("compile", src, "--arch", "sm_90", "-c", "-o", "q.o"), ("cache",)):
            r = cli(*args)
            assert r.exit_code == 2, r.output
            lines = [line for line in r.stderr.splitlines() if line.strip()]
            assert lines[-1].startswith(f"error: NVSTAGE_CACHE_DIR={blank!r} is blank"), lines
    assert sorted(p.name for p in workdir.iterdir()) == ["q.o", "vadd.cu"]
