"""The warm path: a whole nvcc command answered from the cache with no process started."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from nvstage import proc
from nvstage.cli.main import run
from nvstage.compiler.nvcc import environment as nvcc_env



@pytest.fixture
def warm(tmp_path, monkeypatch, kernels, toolkit):
    """A folder with multi.cu (and two include folders), its own cache and build record."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    # The names nvcc reads, as a fresh launcher process knows them: none yet, so that the
    # first build notes them in this cache folder (an earlier test's would skip the note).
    monkeypatch.setattr(nvcc_env, "_memo", {})
    (tmp_path / "inc").mkdir()
    (tmp_path / "first").mkdir()
    (tmp_path / "inc" / "coef.h").write_text("#define COEF 2.0f\n")
    (tmp_path / "k.cu").write_text(
        '#include "coef.h"\n__global__ void k(float* x) { x[threadIdx.x] *= COEF; }\n')
    argv = [toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-Ifirst", "-Iinc", "-MD", "-MF", "k.d",
            "-arch=sm_90"]
    return tmp_path, argv


def _entries(folder):
    from nvstage.compiler.buildlog.log import load_build_log

    return load_build_log(folder).entries


def _quiet_run(argv, capfd):
    code = run(argv)
    capfd.readouterr()
    return code


def test_a_full_hit_starts_no_process_and_gives_the_cold_outputs(warm, monkeypatch, capfd,
                                                                  dump):
    folder, argv = warm
    assert _quiet_run(argv, capfd) == 0  # cold: through the pipeline, recorded
    cold = {n: (folder / n).read_bytes() for n in ("k.o", "k.d")}
    for n in cold:
        (folder / n).unlink()

    def no(*a, **k):
        raise AssertionError("a process was started on a hit")

    monkeypatch.setattr(subprocess.Popen, "__init__", no)
    for name in ("fork", "posix_spawn", "posix_spawnp", "execv", "execve", "system"):
        monkeypatch.setattr(os, name, no)
    assert _quiet_run(argv, capfd) == 0
    monkeypatch.undo()
    assert {n: (folder / n).read_bytes() for n in cold} == cold
    entries = _entries(folder)
    assert [e.hit for e in entries] == [False, True] and entries[1].build is not None
    # and what plain nvcc makes of the same command (up to its per-run module id)
    plain = [*argv[:4], "plain.o", *argv[5:9], "plain.d", argv[-1]]
    assert proc.run(plain, cwd=folder).returncode == 0
    assert dump(folder / "k.o", ("-sass",)) == dump(folder / "plain.o", ("-sass",))
    assert (folder / "plain.d").read_text() == (folder / "k.d").read_text().replace(
        "k.o :", "plain.o :")


def test_a_hit_finds_the_watched_folders_as_the_cold_build_left_them(warm, monkeypatch, capfd):
    # The build record's folder is made in the current folder, which is watched (the source
    # is there): made after the entry was stored, it would send every later hit to look at
    # the hiding places again.
    folder, argv = warm
    assert _quiet_run(argv, capfd) == 0
    assert (folder / ".nvstage-build").is_dir()
    from nvstage.compiler.store.presence import Presence

    def looked(self, *a):
        raise AssertionError("a hit looked at the hiding places: a watched folder changed")

    monkeypatch.setattr(Presence, "of", looked)
    monkeypatch.setattr(Presence, "under", looked)
    assert _quiet_run(argv, capfd) == 0
    monkeypatch.undo()
    assert [e.hit for e in _entries(folder)] == [False, True]


@pytest.mark.parametrize("change", ["header", "hiding header", "source", "environment",
                                    "arguments"])
def test_what_a_hit_must_not_survive(warm, monkeypatch, capfd, change):
    folder, argv = warm
    assert _quiet_run(argv, capfd) == 0
    if change == "header":
        (folder / "inc" / "coef.h").write_text("#define COEF 3.0f\n")
    elif change == "hiding header":  # found first now: -Ifirst comes before -Iinc
        (folder / "first" / "coef.h").write_text("#define COEF 4.0f\n")
    elif change == "source":
        with open(folder / "k.cu", "a") as f:
            f.write("// edited\n")
    elif change == "environment":
        monkeypatch.setenv("NVCC_APPEND_FLAGS", "-lineinfo")
    else:
        argv = [*argv, "-DEXTRA=1"]
    assert _quiet_run(argv, capfd) == 0
    assert [e.hit for e in _entries(folder)] == [False, False]
    if change in ("header", "hiding header"):  # and the rebuild used the file it must
        dep = (folder / "k.d").read_text()
        assert ("first/coef.h" in dep) == (change == "hiding header")


def test_a_full_hit_imports_the_standard_library_and_the_warm_path_only(warm, capfd,
                                                                       beyond_the_warm_path):
    folder, argv = warm
    assert _quiet_run(argv, capfd) == 0
    code = ("import sys; before = set(sys.modules); from nvstage.cli.main import run;"
            "rc = run(sys.argv[1:]); print(rc, sorted(set(sys.modules) - before))")
    cp = subprocess.run([sys.executable, "-c", code, *argv], cwd=folder, capture_output=True,
                        text=True, env={**os.environ, "NVSTAGE_CACHE_DIR":
                                        str(folder / "cache")})
    rc, _, mods = cp.stdout.strip().rpartition("\n")[2].partition(" ")
    assert rc == "0", cp.stdout + cp.stderr
    assert beyond_the_warm_path(eval(mods)) == [], mods
    assert "nvstage.compiler.cache.command.answer" in mods
    assert [e.hit for e in _entries(folder)] == [False, True]


def test_one_changed_gencode_leaves_the_other_archs_cicc_and_ptxas_as_hits(kernels, tmp_path):
    from nvstage.compiler.pipeline.driver import compile
    from nvstage.compiler.nvcc.options import CompileOptions

    shutil.copy(kernels / "saxpy.cu", tmp_path)
    gens = ["arch=compute_75,code=sm_75", "arch=compute_80,code=sm_80",
            "arch=compute_86,code=sm_86", "arch=compute_90,code=sm_90"]
    cache = tmp_path / "cache"
    compile("saxpy.cu", CompileOptions(gencodes=tuple(gens), compile_only=True),
            cwd=tmp_path, cache=cache)
    gens[3] = "arch=compute_89,code=sm_89"
    b = compile("saxpy.cu", CompileOptions(gencodes=tuple(gens), compile_only=True),
                cwd=tmp_path, cache=cache)
    hit = {(r.stage.kind.value, r.stage.arch): r.cached for r in b.runs}
    for arch in ("75", "80", "86"):
        assert hit[("cicc", f"compute_{arch}")] and hit[("ptxas", f"sm_{arch}")], hit
    assert not hit[("ptxas", "sm_89")] and not hit[("fatbinary", None)]
