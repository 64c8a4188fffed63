"""The stage cache: keys follow content (headers included), damage is a miss, builds share it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import nvstage
from nvstage.compiler.cache.stage.stage_key import parse_depfile
from nvstage.compiler.cache.local import Cache
from nvstage.compiler.cache.local.entries import Binding, Printed
from nvstage.compiler.cache.local.eviction import parse_size
from nvstage.compiler.cache.local.relocation import Work
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.nvcc.plan import StageKind as K

GENCODES = ("arch=compute_80,code=sm_80", "arch=compute_90,code=[sm_90,compute_90]")
PREPROCESS = (K.HOST_PREPROCESS, K.DEVICE_PREPROCESS)


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch) -> Path:
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(root))
    return root


def kernel(workdir: Path, scale: str = "3.0f") -> None:
    (workdir / "inc").mkdir(exist_ok=True)
    (workdir / "inc/coef.h").write_text(f"#pragma once\n#define SCALE {scale}\n")
    (workdir / "inc/unused.h").write_text("#define UNUSED 1\n")
    (workdir / "k.cu").write_text('#include "coef.h"\n'
                                  "__global__ void k(float* p) { p[threadIdx.x] *= SCALE; }\n")


def build(toolkit, keep="k", **kw):
    opts = CompileOptions(gencodes=GENCODES, compile_only=True, include_dirs=("inc",))
    return nvstage.compile("k.cu", opts, toolkit=toolkit, keep=keep, jobs=2, **kw)


def cached(b) -> dict:
    return {r.stage.index: r.cached for r in b.runs}


# -- the store on its own -------------------------------------------------------------------
def test_put_get_restore_and_damage(tmp_path):
    c = Cache(tmp_path / "c")
    (tmp_path / "a.txt").write_text("hello @ /w/x\n")
    (tmp_path / "b.bin").write_bytes(b"\0\1\2")
    assert c.get("ab" * 32) is None
    assert c.put("ab" * 32, [tmp_path / "a.txt", tmp_path / "b.bin"], Printed("o", "e", 1.5))
    assert not c.put("ab" * 32, [tmp_path / "a.txt"])
    e = c.get("ab" * 32)
    assert e.stdout == "o" and e.stderr == "e" and e.seconds == 1.5
    out = c.restore(e, [tmp_path / "x/a", tmp_path / "x/b"])
    assert (tmp_path / "x/a").read_text() == "hello @ /w/x\n"
    assert (tmp_path / "x/b").read_bytes() == b"\0\1\2" and len(out.files) == 2
    blob = e.path / "1"
    blob.write_bytes(b"\0\1")  # truncated
    assert c.restore(e, [tmp_path / "y/a", tmp_path / "y/b"]) is None
    assert not (tmp_path / "y/a").exists()  # nothing half-restored
    (e.path / "meta.json").write_text((e.path / "meta.json").read_text().replace('"o"', '"p"'))
    assert c.get("ab" * 32) is False  # the record itself fails its check
    c.discard("ab" * 32)
    assert c.get("ab" * 32) is None


def test_outputs_are_cut_at_the_work_folder_and_pasted_back(tmp_path):
    c = Cache(tmp_path / "c")
    old, new = Work(str(tmp_path / "old")), Work("/new/place")
    stub = tmp_path / "old/k.stub.c"
    stub.parent.mkdir()
    # The stub naming itself (cudafe++'s --stub_file_name): another folder's entry too.
    # The old placeholder's text is just text now: it comes back as it was.
    stub.write_text(f'# 1 "{stub}"\nputs("@WORK@");\n')
    assert c.put("cd" * 32, [stub], binding=Binding(work=old, own_markers=True))
    c.restore(c.get("cd" * 32, new), [tmp_path / "t.c"], new)
    assert (tmp_path / "t.c").read_text() == '# 1 "/new/place/k.stub.c"\nputs("@WORK@");\n'
    assert c.restore(c.get("cd" * 32), [tmp_path / "u.c"]) is None  # sites, no folder: a miss
    # Anywhere else (a string cudafe++ joined, what a tool printed, a binary, whose layout
    # follows the path's length), the path is bound to its folder: the pinned key, or not
    # stored without one.
    stub.write_text(f'puts("{stub}");\n')
    (tmp_path / "o.bin").write_bytes(f"\0{stub}".encode())
    for files, err in (([stub], ""), ([tmp_path / "o.bin"], ""), ([], f"{old.path}/x: warn")):
        assert not c.put("ef" * 32, files, Printed(stderr=err), Binding(work=old, own_markers=True))
        assert c.put("ef" * 32, files, Printed(stderr=err),
                     Binding(work=old, pinned="01" * 32, own_markers=True))
        assert c.get("ef" * 32) is None
        e = c.get("01" * 32, old)
        assert e.stderr == err
        c.restore(e, [tmp_path / "v"] * len(files), old)
        assert [(tmp_path / "v").read_bytes() for f in files] == [f.read_bytes() for f in files]
        c.discard("01" * 32)


def test_whole_command_entries_count_and_go_oldest_first(tmp_path):
    """cache/command/entry.py's entries (inv/) hold outputs too: they share the size limit."""
    c = Cache(tmp_path / "c", max_bytes=3000)
    (tmp_path / "f").write_bytes(os.urandom(1000))
    c.put("aa" * 32, [tmp_path / "f"])
    os.utime(c.get("aa" * 32).path / "meta.json", (3000, 3000))
    olds = []
    for n in range(3):
        k = f"b{n}" * 32
        d = c.root / "inv" / k[:2] / k
        d.mkdir(parents=True)
        (d / "meta").write_bytes(b"m")
        (d / "0").write_bytes(b"o" * 1000)
        os.utime(d / "meta", (1000 + n, 1000 + n))
        olds.append(d)
    assert len(c.whole_commands()) == 3
    assert c.evict() >= 1
    assert not olds[0].exists() and c.get("aa" * 32) is not None


def test_a_whole_command_entry_a_killed_process_left_half_written_is_swept(tmp_path):
    c = Cache(tmp_path / "c", max_bytes=1 << 30)
    (tmp_path / "f").write_bytes(b"x")
    c.put("aa" * 32, [tmp_path / "f"])  # marks the folder
    k = "cd" * 32
    old, fresh = c.root / "inv" / k[:2] / f"{k}.tmp-123", c.root / "inv" / k[:2] / f"{k}.tmp-9"
    for d in (old, fresh):
        d.mkdir(parents=True)
        (d / "0").write_bytes(b"o" * 100)
    os.utime(old, (1000, 1000))
    c.evict()
    assert not old.exists() and fresh.exists()  # a store in progress is left alone


def test_least_recently_used_entries_go_first(tmp_path):
    c = Cache(tmp_path / "c", max_bytes=3000)
    (tmp_path / "f").write_bytes(os.urandom(1000))
    keys = [f"{n:02d}" * 32 for n in range(4)]
    for n, k in enumerate(keys):
        c.put(k, [tmp_path / "f"])
        os.utime(c.get(k).path / "meta.json", (1000 + n, 1000 + n))
    c.restore(c.get(keys[0]), [tmp_path / "g"])  # a hit makes the oldest the newest
    assert c.evict() >= 1
    left = {d.name for d, _, _ in c.entries()}
    assert keys[0] in left and keys[1] not in left and c.size() <= 3000


def test_the_size_ledger_spares_builds_a_count_until_the_limit_is_passed(tmp_path,
                                                                          monkeypatch):
    c = Cache(tmp_path / "c", max_bytes=3500)
    (tmp_path / "f").write_bytes(os.urandom(1000))
    c.put("00" * 32, [tmp_path / "f"])
    assert c.evict() == 0  # no count yet: one is made, and written down
    counted = []
    real = Cache._listed
    monkeypatch.setattr(Cache, "_listed", lambda *a: counted.append(1) or real(*a))
    c.put("01" * 32, [tmp_path / "f"])
    assert c.evict() == 0 and not counted  # the ledger says 2 entries: under the limit
    for n in (2, 3):
        c.put(f"{n:02d}" * 32, [tmp_path / "f"])
    assert c.evict() >= 1 and counted  # passed: counted, and the oldest removed
    assert c.size() <= 3500
    counted.clear()
    assert c.evict() == 0 and not counted
    # A damaged or stale ledger is never believed: it is counted again.
    (c.root / "size").write_bytes(b"= 10 nonsense\n")
    c.evict()
    assert counted
    counted.clear()
    (c.root / "size").write_bytes(b"= 10 1000.0\n")  # counted long ago
    c.evict()
    assert counted
    counted.clear()
    (c.root / "size").write_bytes(b"= 0 %.3f\n+-100000000\n" % __import__("time").time())
    c.evict()  # a negative line: written by hand, never by nvstage
    assert counted


def test_a_ledger_just_written_is_believed(tmp_path, monkeypatch):
    # Its time is rounded down: rounded to the nearest millisecond, a count written 0.4 ms
    # before a millisecond's end read as from the future, and was counted again.
    import time as real_time

    from nvstage.compiler.cache.local import eviction

    c = Cache(tmp_path / "c", max_bytes=3500)
    (tmp_path / "f").write_bytes(b"x")
    c.put("00" * 32, [tmp_path / "f"])
    now_ns = 1_700_000_000_999_600_000

    class Clock:
        def __getattr__(self, name):
            return getattr(real_time, name)

        time_ns = staticmethod(lambda: now_ns)
        time = staticmethod(lambda: now_ns / 1e9)

    monkeypatch.setattr(eviction, "time", Clock())
    c.evict()
    assert c._ledger() is not None


def test_header_sets_and_plans_count_against_the_limit(tmp_path):
    # One header-set file per source and one plan per command: small each, unbounded together.
    c = Cache(tmp_path / "c", max_bytes=12_000)
    (tmp_path / "f").write_bytes(b"x")
    c.put("00" * 32, [tmp_path / "f"])  # marks the folder
    for n in range(20):
        c.add_header_set(f"{n:02d}" * 32, [f'["/inc/{os.urandom(8).hex()}/h{i}.h"]'
                                           for i in range(40)], "ab" * 32, "cd" * 32)
    plan = c.root / "plans" / "ee" / ("ee" * 32)
    plan.parent.mkdir(parents=True)
    plan.write_bytes(b"p" * 5000)
    held = sum(f.stat().st_size for f in (c.root / "direct").rglob("*.z")) + 5000
    assert held > 12_000 and c.size() >= held
    assert c.evict() >= 1
    assert c.size() <= 12_000


def test_racing_writers_of_one_key_both_succeed(tmp_path):
    c = Cache(tmp_path / "c")
    (tmp_path / "f").write_bytes(os.urandom(1 << 20))
    results = []

    def put():
        results.append(c.put("aa" * 32, [tmp_path / "f"]))

    threads = [threading.Thread(target=put) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results.count(True) == 1
    c.restore(c.get("aa" * 32), [tmp_path / "g"])
    assert (tmp_path / "g").read_bytes() == (tmp_path / "f").read_bytes()
    assert not list((tmp_path / "c/tmp").iterdir())


def test_small_parsers():
    assert parse_depfile("a.o: x.cu /usr/a\\ b.h \\\n  c.h\n") == ["x.cu", "/usr/a b.h", "c.h"]
    assert parse_depfile("a.o: p$$q.h x\\#y.h z\\\\ w.h x.cu x.cu\n") == [
        "p$q.h", "x#y.h", "z\\", "w.h", "x.cu"]
    assert parse_depfile("no rule here") == []
    assert parse_size("2G") == 2 << 30 and parse_size("500M") == 500 << 20
    assert parse_size("1234") == 1234 and parse_size("1.5KiB") == 1536
    assert parse_size(" 2gb ") == 2 << 30 and parse_size("0") == 0
    for bad in ("lots", "1e400", "inf", "nan", "-5M", "", "1.5.5G", "5X", "9" * 30, "0x10"):
        with pytest.raises(ValueError):
            parse_size(bad)


# -- in builds ------------------------------------------------------------------------------
def test_warm_rebuild_starts_no_tool_and_gives_the_same_files(toolkit, workdir):
    kernel(workdir)
    cold = build(toolkit, keep="cold")
    assert not any(cached(cold).values()) and cold.cache["stored"] == len(cold.runs)
    warm = build(toolkit, keep="warm")
    assert all(cached(warm).values())
    # Every host-compiler stage was found through its recorded headers: no gcc ran.
    assert warm.cache["direct_hits"] == sum(r.stage.kind in PREPROCESS + (K.HOST_COMPILE,)
                                            for r in warm.runs)
    for p in (workdir / "cold").iterdir():
        if p.name != "stages.json":
            mine = (workdir / "warm" / p.name).read_bytes()
            assert mine.replace(b"/warm/", b"/cold/") == p.read_bytes(), p.name
    assert {a.sha256 for a in warm.artifacts} == {
        nvstage.files.sha256_file(a.path) for a in warm.artifacts}


def test_editing_an_included_header_rebuilds_and_gives_the_new_result(toolkit, workdir):
    kernel(workdir, "3.0f")
    first = build(toolkit)
    ptx = (workdir / "k/k.compute_90.ptx").read_text()
    assert "0f40400000" in ptx  # 3.0f
    kernel(workdir, "5.0f")
    second = build(toolkit)
    # The header reaches every preprocessed file, so nothing downstream can be reused...
    assert not any(r.cached for r in second.runs if r.stage.kind in (K.CICC, K.PTXAS))
    assert "0f40A00000" in (workdir / "k/k.compute_90.ptx").read_text()  # 5.0f
    # ...and the result is what a build without the cache gives.
    (workdir / "ref").mkdir()
    nvstage.compile("k.cu", CompileOptions(gencodes=GENCODES, compile_only=True,
                                           include_dirs=("inc",), output="ref/k.o"),
                    toolkit=toolkit, keep="ref", cache=False)
    names = [p.name for p in (workdir / "ref").iterdir()
             if p.suffix in (".ptx", ".cubin", ".fatbin", ".ii")]
    assert len(names) == 8
    for name in names:
        assert (workdir / "k" / name).read_bytes() == (workdir / "ref" / name).read_bytes()
    assert first.cache["misses"] == len(first.runs)


def test_a_new_header_that_hides_the_old_one_rebuilds(toolkit, workdir):
    # ccache's direct mode misses this: the recorded headers are all unchanged, but the
    # compiler would now find a different coef.h first.
    kernel(workdir, "3.0f")
    (workdir / "first").mkdir()
    opts = CompileOptions(gencodes=GENCODES, compile_only=True, include_dirs=("first", "inc"))
    nvstage.compile("k.cu", opts, toolkit=toolkit, keep="k", jobs=2)
    assert "0f40400000" in (workdir / "k/k.compute_90.ptx").read_text()  # 3.0f
    (workdir / "first/coef.h").write_text("#pragma once\n#define SCALE 5.0f\n")
    hidden = nvstage.compile("k.cu", opts, toolkit=toolkit, keep="k", jobs=2)
    assert not any(r.cached for r in hidden.runs if r.stage.kind in PREPROCESS)
    assert "0f40A00000" in (workdir / "k/k.compute_90.ptx").read_text()  # 5.0f
    # Gone again: the first build's results are found again, without the compiler.
    (workdir / "first/coef.h").unlink()
    back = nvstage.compile("k.cu", opts, toolkit=toolkit, keep="k", jobs=2)
    assert all(cached(back).values()) and back.cache["direct_hits"] > 0
    assert "0f40400000" in (workdir / "k/k.compute_90.ptx").read_text()


def test_a_new_header_that_hides_a_system_one_rebuilds(toolkit, workdir):
    """<float.h> comes from the compiler's built-in folders; a float.h in an -I folder,
    searched first, takes its place."""
    (workdir / "first").mkdir()
    (workdir / "k.cu").write_text("#include <float.h>\n__global__ void k(float* p) "
                                  "{ p[0] = FLT_DIG; }\n")
    opts = CompileOptions(gencodes=GENCODES, compile_only=True, include_dirs=("first",))
    nvstage.compile("k.cu", opts, toolkit=toolkit, keep="k", jobs=2)
    (workdir / "first/float.h").write_text("#define FLT_DIG 77\n")
    again = nvstage.compile("k.cu", opts, toolkit=toolkit, keep="k", jobs=2)
    assert not any(r.cached for r in again.runs if r.stage.kind in PREPROCESS)
    assert "p[0] = 77;" in (workdir / "k/k.compute_90.cpp1.ii").read_text()
    assert "p[0] = 77;" in (workdir / "k/k.cpp4.ii").read_text()


def test_a_hiding_header_that_appears_while_the_compiler_runs_is_not_trusted(
        toolkit, workdir, monkeypatch):
    import nvstage.compiler.pipeline.driver as pl

    kernel(workdir, "3.0f")
    (workdir / "first").mkdir()
    real = pl.run_stage

    def racing(stage, *a, **kw):  # the compiler has read inc/coef.h; then first/coef.h lands
        run = real(stage, *a, **kw)
        if stage.kind is K.HOST_PREPROCESS:
            (workdir / "first/coef.h").write_text("#pragma once\n#define SCALE 5.0f\n")
        return run

    monkeypatch.setattr(pl, "run_stage", racing)
    opts = CompileOptions(gencodes=GENCODES, compile_only=True, include_dirs=("first", "inc"))
    nvstage.compile("k.cu", opts, toolkit=toolkit, keep="k", jobs=1)
    monkeypatch.setattr(pl, "run_stage", real)
    again = nvstage.compile("k.cu", opts, toolkit=toolkit, keep="k", jobs=1)
    host = next(r for r in again.runs if r.stage.kind is K.HOST_PREPROCESS)
    assert not host.cached
    assert "5.0f" in (workdir / "k/k.cpp4.ii").read_text()


def test_a_system_header_reached_through_a_link_is_still_watched(toolkit, workdir):
    """gcc names a system header by its real path when that is shorter (the CUDA toolkit's
    /usr/local/cuda link): the folder it was found in is matched through its real path."""
    (workdir / "r").mkdir()
    (workdir / "r/coef.h").write_text("#define SCALE 3.0f\n")
    (workdir / "a_much_longer_link_to_r").symlink_to(workdir / "r")
    (workdir / "first").mkdir()
    (workdir / "k.cu").write_text("#include <coef.h>\n"
                                  "__global__ void k(float* p) { p[0] = SCALE; }\n")
    opts = CompileOptions(archs=("sm_90",), compile_only=True, include_dirs=("first",),
                          extra=("-Xcompiler",
                                 f"-isystem,{workdir / 'a_much_longer_link_to_r'}"))
    nvstage.compile("k.cu", opts, toolkit=toolkit, keep="k", jobs=2)
    warm = nvstage.compile("k.cu", opts, toolkit=toolkit, keep="k", jobs=2)
    assert all(cached(warm).values())  # recorded: what follows is the shadow check's doing
    assert "3.0f" in (workdir / "k/k.cpp4.ii").read_text()
    (workdir / "first/coef.h").write_text("#define SCALE 5.0f\n")
    again = nvstage.compile("k.cu", opts, toolkit=toolkit, keep="k", jobs=2)
    assert not any(r.cached for r in again.runs if r.stage.kind in PREPROCESS)
    assert "5.0f" in (workdir / "k/k.cpp4.ii").read_text()


def test_a_source_naming_the_date_is_never_cached(toolkit, workdir):
    (workdir / "k.cu").write_text('const char* built = __DATE__ " " __TIME__;\n'
                                  "__global__ void k(float* p) { p[0] = 1.0f; }\n")
    opts = CompileOptions(archs=("sm_90",), compile_only=True)
    nvstage.compile("k.cu", opts, toolkit=toolkit, keep="k", jobs=2)
    again = nvstage.compile("k.cu", opts, toolkit=toolkit, keep="k", jobs=2)
    assert not any(r.cached for r in again.runs if r.stage.kind in PREPROCESS)


def test_editing_an_unrelated_file_reuses_everything(toolkit, workdir):
    kernel(workdir)
    build(toolkit)
    (workdir / "inc/unused.h").write_text("#define UNUSED 2\n")
    (workdir / "other.cu").write_text("int x;\n")
    again = build(toolkit)
    assert all(cached(again).values())


def test_a_corrupt_or_truncated_entry_is_a_miss_and_is_rebuilt(toolkit, workdir,
                                                                private_cache):
    kernel(workdir)
    build(toolkit, keep="a")
    blobs = sorted(p for p in (private_cache / "entries").rglob("*") if p.is_file()
                   and p.name != "meta.json" and p.stat().st_size > 100)
    blobs[0].write_bytes(blobs[0].read_bytes()[:50])  # truncated
    damaged = bytearray(blobs[1].read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF  # one bit pattern flipped
    blobs[1].write_bytes(bytes(damaged))
    metas = sorted((private_cache / "entries").rglob("meta.json"))
    metas[-1].write_text("{ not json")
    b = build(toolkit, keep="b")
    assert b.cache["corrupt"] >= 2 and b.cache["misses"] >= b.cache["corrupt"]
    assert b.status == "ok"
    for p in (workdir / "a").iterdir():
        if p.name != "stages.json":
            assert (workdir / "b" / p.name).read_bytes().replace(b"/b/", b"/a/") == \
                p.read_bytes(), p.name
    c = build(toolkit, keep="c")  # the rebuilt entries are good again
    assert all(cached(c).values())


def test_two_processes_share_one_cache(toolkit, workdir, private_cache):
    kernel(workdir)
    script = (
        "import sys, nvstage\n"
        "from nvstage.compiler.nvcc.options import CompileOptions\n"
        f"o = CompileOptions(gencodes={GENCODES!r}, compile_only=True, include_dirs=('inc',),"
        " output=sys.argv[1] + '.o')\n"
        "b = nvstage.compile('k.cu', o, keep=sys.argv[1], jobs=2)\n"
        "print(b.status)\n")
    env = {**os.environ, "NVSTAGE_CACHE_DIR": str(private_cache)}
    procs = [subprocess.Popen([sys.executable, "-c", script, name], cwd=workdir, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for name in ("p1", "p2")]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    build(toolkit, keep="ref", cache=False)
    for name in ("p1", "p2"):
        for f in ("k.compute_80.ptx", "k.compute_90.sm_90.cubin", "k.fatbin.c"):
            assert (workdir / name / f).read_bytes() == (workdir / "ref" / f).read_bytes()
    assert (workdir / "p1.o").read_bytes() == (workdir / "p2.o").read_bytes()
    stats = json.loads((private_cache / "stats.json").read_text())
    assert stats["misses"] + stats["hits"] == 2 * 10
    assert not [p for p in (private_cache / "tmp").iterdir() if not p.name.startswith(".")]


def test_cache_off_touches_nothing(toolkit, workdir, private_cache):
    kernel(workdir)
    b = build(toolkit, cache=False)
    assert b.cache is None and not any(cached(b).values())
    assert not (private_cache / "entries").exists()


def test_a_build_in_another_folder_never_gets_this_folders_outputs(toolkit, workdir):
    # nvcc hands cudafe++ the source's absolute path and derives the module id from it: an
    # entry made in folder a restored in folder b gave b an object file nvcc would not make.
    for d in ("a", "b"):
        (workdir / d).mkdir()
        kernel(workdir / d)
    opts = CompileOptions(archs=("sm_90",), compile_only=True, rdc=True,
                          include_dirs=(str(workdir / "a/inc"),), output="k.o")
    nvstage.compile("k.cu", opts, toolkit=toolkit, keep="kk", cwd=workdir / "a")
    opts = CompileOptions(archs=("sm_90",), compile_only=True, rdc=True,
                          include_dirs=(str(workdir / "b/inc"),), output="k.o")
    b = nvstage.compile("k.cu", opts, toolkit=toolkit, keep="kk", cwd=workdir / "b")
    ref = nvstage.compile("k.cu", CompileOptions(**{**opts.__dict__, "output": "ref.o"}),
                          toolkit=toolkit, keep="ref", cwd=workdir / "b", cache=False)
    assert not any(r.cached for r in b.runs if r.stage.kind in (K.CUDAFE, K.HOST_COMPILE))
    assert (workdir / "b/k.o").read_bytes() == (workdir / "b/ref.o").read_bytes()
    for name in ("k.module_id", "k.cpp4.ii", "k.cudafe1.cpp"):
        assert (workdir / "b/kk" / name).read_bytes() == (workdir / "b/ref" / name).read_bytes()
    assert ref.status == "ok"


def test_a_header_edited_while_its_stage_runs_is_not_stored(toolkit, workdir, monkeypatch):
    kernel(workdir, "3.0f")
    real = nvstage.compiler.pipeline.driver.run_stage

    def run_then_edit(stage, *a, **kw):
        run = real(stage, *a, **kw)
        if stage.kind is K.DEVICE_PREPROCESS:  # the compiler has read 3.0f: now it changes
            (workdir / "inc/coef.h").write_text("#pragma once\n#define SCALE 5.0f\n")
        return run

    monkeypatch.setattr(nvstage.compiler.pipeline.driver, "run_stage", run_then_edit)
    build(toolkit)
    monkeypatch.setattr(nvstage.compiler.pipeline.driver, "run_stage", real)
    again = build(toolkit)  # the header says 5.0f now: no entry may claim otherwise
    assert "0f40A00000" in (workdir / "k/k.compute_90.ptx").read_text()  # 5.0f
    assert not any(r.cached for r in again.runs if r.stage.kind is K.DEVICE_PREPROCESS)


def test_a_device_library_is_part_of_the_device_links_key(toolkit, workdir):
    # nvlink reads lib*.a from the -L folders: a rebuilt library must relink.
    def lib(value: str) -> None:
        (workdir / "f.cu").write_text(f"__device__ float f() {{ return {value}; }}\n")
        cp = subprocess.run([toolkit.nvcc, "-arch=sm_90", "-rdc=true", "-lib", "f.cu", "-o",
                             "libf.a"], cwd=workdir, capture_output=True, text=True)
        assert cp.returncode == 0, cp.stderr

    (workdir / "m.cu").write_text(
        "__device__ float f();\n__global__ void k(float* p) { p[0] = f(); }\n"
        "int main() { return 0; }\n")
    opts = CompileOptions(archs=("sm_90",), rdc=True, extra=("-L.", "-lf"), output="m")
    lib("1.5f")
    nvstage.compile("m.cu", opts, toolkit=toolkit, keep="k")
    lib("2.5f")
    again = nvstage.compile("m.cu", opts, toolkit=toolkit, keep="k")
    dlink = next(r for r in again.runs if r.stage.kind is K.DEVICE_LINK)
    assert not dlink.cached
    sass = subprocess.run([toolkit.tool("cuobjdump"), "-sass", "k/m_dlink.sm_90.cubin"],
                          cwd=workdir, capture_output=True, text=True).stdout
    assert "0x40200000" in sass  # 2.5f


def test_an_unwritable_cache_index_does_not_run_a_stage_twice(toolkit, workdir, monkeypatch):
    kernel(workdir)
    real, ran = nvstage.compiler.pipeline.driver.run_stage, []

    def counted(stage, *a, **kw):
        ran.append(stage.index)
        return real(stage, *a, **kw)

    def refuse(*a, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(nvstage.compiler.pipeline.driver, "run_stage", counted)
    monkeypatch.setattr(Cache, "add_header_set", refuse)
    b = build(toolkit)
    assert sorted(ran) == sorted(r.stage.index for r in b.runs)  # each stage once
