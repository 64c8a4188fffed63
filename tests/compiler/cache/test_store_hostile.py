"""The stage cache under hostile input (issue 12): it returns every byte it was given, it
never hands one folder's path to another where the path did not come from the folder, it
clears only a folder nvstage made, and a running build's scratch folder survives a clear."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nvstage
from nvstage.compiler.cache.stage.stage_key import FileHasher, Paths
from nvstage.compiler.cache.local import Cache
from nvstage.compiler.cache.local.entries import Binding, Printed
from nvstage.compiler.cache.local.relocation import Work, cut, own_markers_only, paste
from nvstage.compiler.store.layout import MARK
from nvstage.errors import CacheError
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.nvcc.plan import StageKind as K

WORK = "/tmp/nvstage-abc123"  # a build's work folder
OTHER = "/home/u/proj/keep"  # another build's
# What the cache once used, or uses, inside: none of it may pass for anything else.
TOKENS = [b"@WORK@", b"@OUT@", b"nvstage-cut/1", b'["", "/k.stub.c"]', b"\0", b'"check"',
          WORK.encode(), WORK.encode()[:-1], WORK.encode() + b"/k.cudafe1.stub.c",
          b'# 1 "' + WORK.encode() + b'/out.c"\n', OTHER.encode()]
NEVER = (K.CLEANUP, K.LINK)  # stages the cache never keeps


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch) -> Path:
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(root))
    return root


def hostile_bytes(max_size: int = 300):
    """Random bytes with the work paths and the cache's tokens spliced in."""
    piece = st.one_of(st.binary(max_size=40), st.sampled_from(TOKENS))
    return st.lists(piece, max_size=12).map(b"".join).filter(lambda b: len(b) <= max_size * 4)


def hostile_text():
    piece = st.one_of(st.text(max_size=20),
                      st.sampled_from([t.decode("latin-1")
                                                             for t in TOKENS]))
    return st.lists(piece, max_size=8).map("".join)


# -- the store: property tests -----------------------------------------------------------------
@given(hostile_bytes(), st.sampled_from(TOKENS[:8] + [b"/", b"aa"]))
def test_cut_and_paste_give_back_every_byte(data, part):
    blob, sites = cut(data, part)
    assert paste(blob, sites, part) == data
    assert part not in blob or len(part) > 1  # what is left may spell it only across cuts


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(1, 3), own=st.booleans(), data=st.data())
def test_an_entry_comes_back_exactly_into_its_own_folder(tmp_path, n, own, data):
    """Outputs of random bytes holding the work folder's path, the folder's own line markers
    and the cache's tokens, and printed text holding them: the same folder gets every byte
    back; another folder gets the entry only where each site is the file's own marker."""
    c = Cache(tmp_path / "c")
    src = tmp_path / uuid.uuid4().hex  # the build's work folder, where its outputs are
    src.mkdir()
    work = Work(str(src))
    w = str(src).encode()
    marker = st.sampled_from([b'# 1 "%s/%d"\n' % (w, i) for i in range(n)])
    piece = st.one_of(st.binary(max_size=30), st.sampled_from(TOKENS + [w, w + b"/0"]), marker)
    files = [data.draw(st.lists(piece, max_size=10).map(b"".join)) for _ in range(n)]
    out, err = (data.draw(st.lists(st.one_of(st.text(max_size=10),
                                             st.sampled_from(
        [str(src), WORK, "@WORK@"])), max_size=5).map("".join)) for _ in range(2))
    paths = []
    for i, blob in enumerate(files):
        (src / str(i)).write_bytes(blob)
        paths.append(src / str(i))
    key, pinned = hashlib.sha256(os.urandom(8)).hexdigest(), uuid.uuid4().hex * 2
    assert c.put(key, paths, Printed(out, err, 0.5),
                 Binding(work=work, pinned=pinned, own_markers=own))
    # Where it went: the key any folder may use only when no site needs trusting.
    movable = c.get(key, work)
    entry = movable or c.get(pinned, work)
    assert entry and (movable is None) == (c.get(pinned, work) is not None)
    trusted = str(src) not in out + err and all(
        w not in blob or own and b"\0" not in blob and
        blob.count(w) == blob.count(b'# 1 "%s/%d"\n' % (w, i)) and not blob.startswith(b"/0")
        for i, blob in enumerate(files))
    assert bool(movable) <= trusted
    assert (entry.stdout, entry.stderr) == (out, err)
    dests = [tmp_path / uuid.uuid4().hex / str(i) for i in range(n)]
    assert c.restore(entry, dests, work) is not None
    assert [d.read_bytes() for d in dests] == files
    if movable:  # restored elsewhere: the folder's own markers name the new folder
        there = Work(OTHER)
        assert c.restore(c.get(key, there), dests, there) is not None
        for d, blob in zip(dests, files):
            assert d.read_bytes() == blob.replace(w, OTHER.encode())


@settings(max_examples=150, deadline=None)
@given(st.lists(hostile_text(), min_size=2, max_size=2, unique=True))
def test_keys_cut_at_the_work_folder_never_confuse_two_names(names):
    p = Paths(WORK, "/cwd")
    a, b = names
    assert p.norm(a) != p.norm(b) and p.name(a) != p.name(b)
    assert p.real(p.name(a)) == a


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_work_files_hash_apart_unless_equal_up_to_the_folder(tmp_path, data):
    # A file holding "@WORK@" (or another folder's path) is not the file holding the path:
    # once they hashed alike, and the cache gave one's outputs for the other.
    one, two = tmp_path / "w1", tmp_path / "w2"
    for d in (one, two):
        d.mkdir(exist_ok=True)
    piece = st.one_of(st.binary(max_size=20), st.sampled_from(
        TOKENS + [str(one).encode(), str(two).encode()]))
    a, b = (data.draw(st.lists(piece, max_size=8).map(b"".join)) for _ in range(2))
    (one / "f").write_bytes(a)
    (two / "f").write_bytes(b)
    h1, h2 = FileHasher(one), FileHasher(two)
    same = a.split(str(one).encode()) == b.split(str(two).encode())
    assert (h1(str(one / "f")) == h2(str(two / "f"))) == same
    # The same template in each folder: the same key (unless the text already spelt the
    # other folder, which is then no longer the same template).
    (two / "g").write_bytes(str(two).encode().join(a.split(str(one).encode())))
    assert (h1(str(one / "f")) == h2(str(two / "g"))) == (str(two).encode() not in a)


def test_own_markers_are_the_only_sites_another_folder_may_trust():
    w, own = b"/k/w", b"/k/w/k.cudafe1.stub.c"
    assert own_markers_only(b'x\n# 1 "/k/w/k.cudafe1.stub.c"\ny\n', w, own)
    assert own_markers_only(b'#line 3 "/k/w/k.cudafe1.stub.c" 2\r\n', w, own)
    assert own_markers_only(b"no path at all", w, own)
    for bad in (b'puts("/k/w/k.cudafe1.stub.c");\n',  # a string cudafe++ joined
                b'# 1 "/k/w/other.c"\n', b' # 1 "/k/w/k.cudafe1.stub.c"\n',
                b'# 1 "/k/w/k.cudafe1.stub.c" /k/w\n', b'# 1 "x/k/w/k.cudafe1.stub.c"\n'):
        assert not own_markers_only(bad, w, own), bad


def test_an_outside_file_is_read_as_is_and_flagged_when_it_spells_the_folder(tmp_path):
    (tmp_path / "w").mkdir()
    h = FileHasher(tmp_path / "w")
    (tmp_path / "h.h").write_bytes(b"x" * (1 << 20) + str(tmp_path / "w").encode() + b"y")
    (tmp_path / "plain.h").write_bytes(b"int x;\n")
    assert h.look(str(tmp_path / "h.h")).mentions  # across a read-block boundary
    assert not h.look(str(tmp_path / "plain.h")).mentions
    os.mkfifo(tmp_path / "fifo")
    assert h.look(str(tmp_path / "fifo")) is None  # never opened: it would block


# -- the folder: nvstage's own, or refused -------------------------------------------------------
def test_only_a_folder_nvstage_made_and_marked_is_written_to_or_cleared(tmp_path):
    user = tmp_path / "user"
    for name in ("notes", "tmp", "entries"):
        (user / name).mkdir(parents=True)
        (user / name / "mine.txt").write_text("keep me")
    (user / "stats.json").write_text("{}")
    for call in (lambda c: c.clear(), lambda c: c.open(), lambda c: c.describe()):
        with pytest.raises(CacheError) as e:
            call(Cache(user))
        assert "\n" not in e.value.message and e.value.hint is None
    assert sorted(p.name for p in user.iterdir()) == ["entries", "notes", "stats.json", "tmp"]
    assert all((user / n / "mine.txt").read_text() == "keep me" for n in ("notes", "tmp"))
    assert Cache(user).evict(0) == 0
    # A new folder, or an empty one, becomes nvstage's: marked, then used and cleared.
    for fresh in (tmp_path / "new/deeper", tmp_path / "empty"):
        if fresh.name == "empty":
            fresh.mkdir()
        c = Cache(fresh).open()
        assert c.marked() and (fresh / MARK).read_bytes().startswith(b"Signature: 8a477f597d")
        (tmp_path / "f").write_bytes(b"x")
        assert c.put("ab" * 32, [tmp_path / "f"])
        (fresh / "notes").mkdir(exist_ok=True)
        assert c.clear() and c.describe()["entries"] == 0 and c.marked()
    # A file, a folder under a file, /proc/self: errors, never "an empty cache".
    (tmp_path / "file").write_text("x")
    for bad in (tmp_path / "file", tmp_path / "file/sub", Path("/proc/self")):
        for call in (lambda c: c.describe(), lambda c: c.clear(), lambda c: c.open()):
            with pytest.raises(CacheError):
                call(Cache(bad))


def test_builds_opening_a_new_cache_at_once_all_get_it(tmp_path):
    # Each marks the new folder; none may take another's half-written mark for a stranger's.
    for n in range(20):
        root, errors = tmp_path / f"c{n}", []

        def use():
            try:
                Cache(root).open()
            except CacheError as e:
                errors.append(e)

        threads = [threading.Thread(target=use) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and Cache(root).marked()


def test_a_planted_mark_must_be_nvstages_and_a_regular_file(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a/notes").mkdir()
    (tmp_path / "a" / MARK).write_bytes(b"Signature: 8a477f597d28d172789f06886806bc55\n")
    with pytest.raises(CacheError):  # another program's cache tag is not nvstage's
        Cache(tmp_path / "a").clear()
    (tmp_path / "b").mkdir()
    (tmp_path / "b/notes").mkdir()
    os.mkfifo(tmp_path / "b" / MARK)  # would block a reader that opened it plainly
    with pytest.raises(CacheError):
        Cache(tmp_path / "b").clear()


def test_the_xdg_folder_from_before_the_mark_is_adopted(tmp_path, monkeypatch):
    monkeypatch.delenv("NVSTAGE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    old = tmp_path / "nvstage"
    for name in ("entries/ab", "notes", "tmp", "tools"):
        (old / name).mkdir(parents=True)
    (old / "stats.json").write_text('{"hits": 3}')
    c = Cache()
    assert c.clear() and c.marked() and c.totals().hits == 0
    assert (old / "tools").is_dir()  # the toolkit's notes are not the stage cache's


def test_an_unwritable_default_folder_builds_uncached_a_named_one_is_an_error(monkeypatch):
    from nvstage.compiler.cache.stage.stage_cache import open_cache

    monkeypatch.delenv("NVSTAGE_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", "/sys")  # EPERM to every mkdir, root included
    assert open_cache(True) is None  # as before: a read-only home fails no build
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", "/sys/nvstage")
    with pytest.raises(CacheError, match="NVSTAGE_CACHE_DIR=/sys/nvstage cannot be used"):
        open_cache(True)


def test_bad_max_size_is_one_line_naming_the_variable(monkeypatch, tmp_path):
    for bad in ("lots", "1e400", "nan", "-1G", "12 apples"):
        monkeypatch.setenv("NVSTAGE_CACHE_MAX_SIZE", bad)
        with pytest.raises(CacheError) as e:
            Cache(tmp_path)
        assert e.value.message.startswith(f"NVSTAGE_CACHE_MAX_SIZE='{bad}' is not a size")
        assert "500M" in e.value.message and "\n" not in e.value.message
    monkeypatch.setenv("NVSTAGE_CACHE_MAX_SIZE", "1.5GiB")
    assert Cache(tmp_path).max_bytes == 3 << 29


def test_clear_leaves_held_scratch_folders_and_sweeps_the_rest(tmp_path):
    c = Cache(tmp_path / "c").open()
    held = c.scratch()
    (Path(held.path) / "1.d").write_text("k.o: k.cu\n")
    left = tempfile_dir(c)  # a killed build's: nobody holds it
    assert c.clear()
    assert (Path(held.path) / "1.d").read_text() == "k.o: k.cu\n"
    assert not left.exists()
    held.close()
    assert not Path(held.path).exists()


def tempfile_dir(c: Cache) -> Path:
    d = c.root / "tmp" / f"deps-{uuid.uuid4().hex[:8]}"
    d.mkdir()
    (d / "0.d").write_text("x")
    return d


def test_a_scratch_folder_taken_by_a_clear_before_its_lock_is_made_again(tmp_path, monkeypatch):
    import tempfile

    c = Cache(tmp_path / "c").open()
    real, calls = tempfile.mkdtemp, []

    def racing(*a, **kw):  # a clear runs between mkdtemp and the lock, the first time
        path = real(*a, **kw)
        calls.append(path)
        if len(calls) == 1:
            fd = os.open(path, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(path, path + ".gone")
            os.close(fd)
        return path

    monkeypatch.setattr(tempfile, "mkdtemp", racing)
    s = c.scratch()
    assert len(calls) == 2 and s.path == calls[1] and Path(s.path).is_dir()
    s.close()


# -- in builds: the real toolkit ----------------------------------------------------------------
def hostile_source(workdir: Path, keeps: dict[str, Path]) -> str:
    """Host code printing the cache's tokens, a keep folder's path spelt out, another's made of
    two string literals (cudafe++ joins them), and every byte value as an escape."""
    k1, k2 = str(keeps["k1"]), str(keeps["k2"])
    half = len(k2) // 2
    everything = "".join(f"\\x{b:02x}" for b in range(256))  # each ends at the next "\\"
    words = [t.decode("latin-1") for t in TOKENS if b"\0" not in t and b"\n" not in t] + [
        k1, f"{k1}/k.cudafe1.stub.c", f'# 1 "{k1}/k.cudafe1.stub.c"']
    lits = ",\n  ".join(_c_string(w) for w in words)
    return f"""#include <cstdio>
static const char* words[] = {{
  {lits},
  "{k2[:half]}" "{k2[half:]}",
  "{k2[:half]}" "{k2[half:]}/k.cudafe1.stub.c",
}};
static const char bytes[] = "{everything}";
__global__ void k(char* out) {{
  const char* s = "@WORK@" "{k1}" "{k2[:half]}" "{k2[half:]}";
  for (int i = 0; s[i]; ++i) out[i] = s[i];
}}
int main() {{
  for (const char* w : words) printf("[%s]\\n", w);
  for (unsigned i = 0; i < sizeof bytes; ++i) printf("%02x", (unsigned char)bytes[i]);
  printf("\\n%s\\n", __FILE__);
  return 0;
}}
#line 9000 "{k1}/k.cudafe1.stub.c"
int after_line() {{ return __LINE__; }}
"""


def _c_string(text: str) -> str:
    return '"' + "".join(f"\\{ord(ch):03o}" if ch in '"\\' or not ch.isprintable() else ch
                         for ch in text) + '"'


def _run(exe: Path) -> str:
    cp = subprocess.run([str(exe)], capture_output=True, timeout=60)
    assert cp.returncode == 0, cp.stderr
    return cp.stdout.decode("latin-1")


def kept_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "stages.json"}


def test_cached_uncached_and_plain_nvcc_programs_print_the_same(toolkit, workdir, private_cache):
    """The source holds the cache's old token, the keep folders' paths (one spelt out, one
    joined by cudafe++ from two literals) and bytes 0..255: from the cache, from a cold build
    and from plain nvcc, the programs print the same, in every folder."""
    keeps = {n: workdir / n for n in ("k1", "k2", "k3")}
    (workdir / "k.cu").write_text(hostile_source(workdir, keeps))
    cp = subprocess.run([toolkit.nvcc, "-arch=sm_90", "k.cu", "-o", "plain"], cwd=workdir,
                        capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    want = _run(workdir / "plain")
    assert str(keeps["k2"]) in want and "@WORK@" in want and "00010203" in want
    opts = CompileOptions(archs=("sm_90",))

    def build(name: str, keep: str | None, **kw):
        # One program name: the device link's files are named after it, and so keyed.
        b = nvstage.compile("k.cu", CompileOptions(**{**opts.__dict__, "output": "prog"}),
                            toolkit=toolkit, keep=keep, jobs=2, **kw)
        assert _run(workdir / "prog") == want, name
        return {r.stage.kind.value: r.cached for r in b.runs if r.stage.kind not in NEVER}

    build("uncached", "k1", cache=False)
    cold = build("cold", "k1")
    assert not any(cold.values())
    kept = kept_files(keeps["k1"])
    warm = build("warm", "k1")  # the same folder: every stage, every byte
    assert all(warm.values()), warm
    assert kept_files(keeps["k1"]) == kept
    # The host compile's entry gone (evicted): it compiles what the cache gave cudafe++'s
    # stage. With a placeholder for the folder, that file said k1's path where the source
    # said "@WORK@", and the program printed the path.
    for meta in private_cache.glob("entries/*/*/meta.json"):
        if b'"host-compile"' in meta.read_bytes():
            shutil.rmtree(meta.parent)
    build("evicted", "k1")
    assert kept_files(keeps["k1"]) == kept
    # Another folder: the stages whose outputs spell k1 (copied from the source) or k2
    # (joined by cudafe++) are bound to the folder they ran in, and run again.
    there = build("there", "k2")
    assert not there["cudafe++"] and not there["host-preprocess"], there
    again = build("again", "k2")
    assert all(again.values()), again
    build("elsewhere", "k3")
    build("tmp", None)
    build("tmp2", None)


def test_a_plain_source_still_hits_in_every_folder(toolkit, workdir):
    (workdir / "k.cu").write_text('#include <cstdio>\n__global__ void k(float* p) { p[0] = 1; }\n'
                                  'int main() { puts("hi"); return 0; }\n')
    opts = CompileOptions(archs=("sm_90",), output="a")
    # A build without a keep folder names its files as plain nvcc does (tmpxft_...): its
    # entries are its own, and a second such build hits them (in another temporary folder).
    for keeps in (("one", "two"), (None, None)):
        nvstage.compile("k.cu", opts, toolkit=toolkit, keep=keeps[0])
        b = nvstage.compile("k.cu", opts, toolkit=toolkit, keep=keeps[1])
        assert all(r.cached for r in b.runs if r.stage.kind not in NEVER), keeps
    # The stub names its own folder: pasted back, it names the new one.
    stub = (workdir / "two/k.cudafe1.stub.c").read_text()
    assert f'# 1 "{workdir}/two/k.cudafe1.stub.c"' in stub and "/one/" not in stub


def test_debug_objects_naming_the_folder_are_kept_for_that_folder_only(toolkit, workdir):
    # gcc -g writes the work folder's path into the object's DWARF: a binary whose layout
    # follows the path's length. Once it was not stored at all; now it is bound to its folder.
    (workdir / "k.cu").write_text("__global__ void k(float* p) { p[0] = 1; }\n")
    opts = CompileOptions(archs=("sm_90",), compile_only=True, extra=("-g",), output="k.o")
    nvstage.compile("k.cu", opts, toolkit=toolkit, keep="one")
    same = nvstage.compile("k.cu", opts, toolkit=toolkit, keep="one")
    other = nvstage.compile("k.cu", opts, toolkit=toolkit, keep="two")
    host = [r for b in (same, other) for r in b.runs if r.stage.kind is K.HOST_COMPILE]
    assert [r.cached for r in host] == [True, False]
    assert str(workdir / "two").encode() in (workdir / "k.o").read_bytes()


def test_a_build_into_somebody_elses_folder_is_an_error_not_an_uncached_build(
        toolkit, workdir, monkeypatch, tmp_path):
    (workdir / "k.cu").write_text("__global__ void k(float* p) { p[0] = 1; }\n")
    user = tmp_path / "mine"
    (user / "notes").mkdir(parents=True)
    opts = CompileOptions(archs=("sm_90",), compile_only=True)
    for where in (str(user), "/proc/self", str(workdir / "k.cu")):
        monkeypatch.setenv("NVSTAGE_CACHE_DIR", where)
        with pytest.raises(CacheError) as e:
            nvstage.compile("k.cu", opts, toolkit=toolkit)
        assert f"NVSTAGE_CACHE_DIR={where}" in e.value.message
    assert [p.name for p in user.iterdir()] == ["notes"]


def test_a_clear_during_a_build_leaves_its_scratch_folder_and_the_build_ok(
        toolkit, workdir, private_cache, monkeypatch):
    """``cache --clear`` while a build runs: the clear empties the cache, the build's depfile
    folder survives and the build succeeds (it once failed, blaming gcc)."""
    (workdir / "k.cu").write_text("__global__ void k(float* p) { p[0] = 1; }\n")
    real = nvstage.compiler.pipeline.driver.run_stage
    cleared = threading.Event()

    def clear_midway(stage, *a, **kw):
        if stage.kind is K.CUDAFE and not cleared.is_set():
            # The host preprocess has run and holds a scratch folder: clear now.
            assert list((private_cache / "tmp").glob("deps-*"))
            assert Cache(private_cache).clear()
            cleared.set()
        return real(stage, *a, **kw)

    monkeypatch.setattr(nvstage.compiler.pipeline.driver, "run_stage", clear_midway)
    b = nvstage.compile("k.cu", CompileOptions(archs=("sm_90",), compile_only=True),
                        toolkit=toolkit, jobs=1)
    assert cleared.is_set() and b.status == "ok"
    assert not list((private_cache / "tmp").glob("deps-*"))  # gone with the build
