"""Real builds through nvstage, checked against plain nvcc with the same flags."""

from __future__ import annotations

import contextlib
import json
import fcntl
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

import nvstage
from nvstage.compiler.pipeline.observer import Observer
from nvstage.errors import InputNotFound, PlanError, StageFailed, UnknownArch, UsageError
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.nvcc.plan import StageKind as K


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    # The stage cache is on by default: these builds must neither read nor fill the user's.
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


def nvcc(toolkit, *args, cwd):
    cp = subprocess.run([toolkit.nvcc, *map(str, args)], cwd=cwd, capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    return cp


def sass(toolkit, path) -> str:
    out = subprocess.run([toolkit.tool("cuobjdump"), "-sass", str(path)], capture_output=True,
                         text=True, check=True).stdout
    # The listing names the file it read; everything else must match.
    return "\n".join(line for line in out.splitlines()
                     if not line.startswith(("Fatbin", "\tcode for")))


def run_exe(path, cwd):
    cp = subprocess.run([str(path)], cwd=cwd, capture_output=True, text=True, timeout=60)
    return cp.returncode, cp.stdout


def test_whole_program_matches_plain_nvcc(toolkit, kernels, workdir):
    shutil.copy(kernels / "vadd.cu", workdir)
    opts = CompileOptions(archs=("sm_90",), output="vadd_nvstage")
    build = nvstage.compile("vadd.cu", opts, toolkit=toolkit, keep="kept")
    kinds = [r.stage.kind for r in build.runs]
    assert kinds[-4:] == [K.DEVICE_LINK, K.DLINK_FATBINARY, K.DLINK_COMPILE, K.LINK]
    assert all(r.ok and r.seconds >= 0 for r in build.runs)

    nvcc(toolkit, "-arch=sm_90", "-keep", "-keep-dir", "ref", "vadd.cu", "-o", "vadd_nvcc",
         cwd=workdir) if (workdir / "ref").mkdir() is None else None
    # Same PTX, same SASS in the cubin, same device code in the executable.
    assert (workdir / "kept/vadd.ptx").read_text() == (workdir / "ref/vadd.ptx").read_text()
    assert sass(toolkit, workdir / "kept/vadd.sm_90.cubin") == \
        sass(toolkit, workdir / "ref/vadd.sm_90.cubin")
    assert sass(toolkit, workdir / "vadd_nvstage") == sass(toolkit, workdir / "vadd_nvcc")
    # And the programs behave the same (here: both report no GPU, or both pass on one).
    assert run_exe(workdir / "vadd_nvstage", workdir)[0] == run_exe(workdir / "vadd_nvcc",
                                                                   workdir)[0]
    plain = nvcc(toolkit, "-arch=sm_90", "vadd.cu", "-o", "vadd_plain", cwd=workdir)
    assert plain.returncode == 0
    assert run_exe(workdir / "vadd_nvstage", workdir) == run_exe(workdir / "vadd_plain", workdir)


def test_keep_folder_has_readable_names_and_a_manifest(toolkit, kernels, workdir):
    shutil.copy(kernels / "vadd.cu", workdir)
    build = nvstage.compile("vadd.cu", CompileOptions(archs=("sm_90",)), toolkit=toolkit,
                            keep="out")
    names = {p.name for p in (workdir / "out").iterdir()}
    for expected in ("vadd.ptx", "vadd.sm_90.cubin", "vadd.fatbin", "vadd.cudafe1.cpp",
                     "vadd.cudafe1.stub.c", "vadd.cpp4.ii", "vadd.cpp1.ii", "vadd.module_id",
                     "stages.json"):
        assert expected in names
    assert not any("tmpxft" in n for n in names)
    manifest = json.loads((workdir / "out/stages.json").read_text())
    assert manifest["schema"] == "nvstage.compile/1" and manifest["status"] == "ok"
    assert manifest["toolkit"]["version"] == toolkit.version
    arts = {Path(a["path"]).name: a for a in manifest["artifacts"]}
    cubin = arts["vadd.sm_90.cubin"]
    assert cubin["kind"] == "cubin" and cubin["arch"] == "sm_90" and len(cubin["sha256"]) == 64
    assert cubin["size"] == (workdir / "out/vadd.sm_90.cubin").stat().st_size
    assert [s["index"] for s in manifest["stages"]] == [r.stage.index for r in build.runs]
    assert (workdir / "a.out").is_file()  # nvcc's default output name


def test_without_keep_nothing_is_left_behind(toolkit, kernels, workdir, tmp_path_factory,
                                             monkeypatch):
    shutil.copy(kernels / "saxpy.cu", workdir)
    # A private temporary folder: other processes' nvstage-* folders in /tmp are not ours.
    tmp = tmp_path_factory.mktemp("tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    build = nvstage.compile("saxpy.cu", CompileOptions(archs=("sm_80",), compile_only=True),
                            toolkit=toolkit)
    assert sorted(p.name for p in workdir.iterdir()) == ["saxpy.cu", "saxpy.o"]
    assert not list(tmp.iterdir())
    assert build.keep_dir is None and build.output == str(workdir / "saxpy.o")


def test_several_gencodes(toolkit, kernels, workdir):
    shutil.copy(kernels / "multi.cu", workdir)
    opts = CompileOptions(gencodes=("arch=compute_80,code=sm_80",
                                    "arch=compute_90,code=[sm_90,compute_90]"),
                          compile_only=True)
    build = nvstage.compile("multi.cu", opts, toolkit=toolkit, keep="k")
    cubins = sorted(a.arch for a in build.artifacts if a.kind == "cubin")
    assert cubins == ["sm_80", "sm_90"]
    ptx = sorted(a.arch for a in build.artifacts if a.kind == "ptx")
    assert ptx == ["compute_80", "compute_90"]
    (workdir / "ref").mkdir()
    nvcc(toolkit, *sum((["-gencode", g] for g in opts.gencodes), []), "-c", "-keep",
         "-keep-dir", "ref", "multi.cu", "-o", "ref/multi.o", cwd=workdir)
    for name in ("multi.compute_80.ptx", "multi.compute_90.ptx"):
        assert (workdir / "k" / name).read_text() == (workdir / "ref" / name).read_text()
    assert sass(toolkit, workdir / "multi.o") == sass(toolkit, workdir / "ref/multi.o")


def test_rdc_build_runs_the_device_link(toolkit, kernels, workdir):
    shutil.copy(kernels / "vadd.cu", workdir)
    build = nvstage.compile("vadd.cu", CompileOptions(archs=("sm_90",), rdc=True, output="v"),
                            toolkit=toolkit, keep="k")
    ptxas = next(r for r in build.runs if r.stage.kind is K.PTXAS)
    assert "--compile-only" in ptxas.stage.argv
    dlink = next(r for r in build.runs if r.stage.kind is K.DEVICE_LINK)
    assert [a.kind for a in dlink.artifacts][0] == "cubin"
    assert (workdir / "v").is_file()


@pytest.mark.parametrize("stop,kind,suffix", [("ptx", "ptx", ".ptx"),
                                              ("cubin", "cubin", ".cubin"),
                                              ("fatbin", "fatbin", ".fatbin")])
def test_stop_points_produce_what_nvcc_produces(toolkit, kernels, workdir, stop, kind, suffix):
    shutil.copy(kernels / "saxpy.cu", workdir)
    build = nvstage.compile("saxpy.cu", CompileOptions(archs=("sm_90",), stop=stop),
                            toolkit=toolkit)
    out = workdir / f"saxpy{suffix}"
    assert out.is_file() and build.output == str(out)
    (workdir / "ref").mkdir()
    nvcc(toolkit, "-arch=sm_90", f"--{stop}", "saxpy.cu", "-o", f"ref/saxpy{suffix}",
         cwd=workdir)
    if kind == "ptx":
        assert out.read_text() == (workdir / "ref" / out.name).read_text()
    else:
        assert sass(toolkit, out) == sass(toolkit, workdir / "ref" / out.name)


def test_compile_error_stops_at_the_failing_stage_and_keeps_what_ran(toolkit, workdir):
    (workdir / "bad.cu").write_text("__global__ void k(int* p) { p[0] = ; }\n")
    with pytest.raises(StageFailed) as info:
        nvstage.compile("bad.cu", CompileOptions(archs=("sm_90",)), toolkit=toolkit, keep="k")
    err = info.value
    assert err.tool == "cudafe++" and err.returncode != 0
    assert "bad.cu(1): error" in err.stderr
    assert "cudafe++" in err.reproduce() and "cd " in err.reproduce()
    manifest = json.loads((workdir / "k/stages.json").read_text())
    assert manifest["status"] == "failed" and manifest["error"]["tool"] == "cudafe++"
    assert (workdir / "k/bad.cpp4.ii").is_file()  # the stage before it ran and was kept


def test_device_only_error_names_cicc(toolkit, workdir):
    # Valid C++ on the host side; only the device compiler rejects it.
    (workdir / "dev.cu").write_text(
        "__global__ void k(float* p) {\n#ifdef __CUDA_ARCH__\n p[0] = undefined_name;\n"
        "#endif\n}\n")
    with pytest.raises(StageFailed) as info:
        nvstage.compile("dev.cu", CompileOptions(archs=("sm_90",), compile_only=True),
                        toolkit=toolkit)
    assert info.value.tool == "cicc" and "undefined_name" in info.value.stderr


def test_bad_inputs_are_clear(toolkit, workdir):
    with pytest.raises(InputNotFound, match="no such file: missing.cu"):
        nvstage.compile("missing.cu", toolkit=toolkit)
    (workdir / "k.cu").write_text("__global__ void k() {}\n")
    with pytest.raises(UnknownArch, match="sm_50"):
        nvstage.compile("k.cu", CompileOptions(archs=("sm_50",)), toolkit=toolkit)
    with pytest.raises(UnknownArch):
        CompileOptions(archs=("hopper",))
    with pytest.raises(UsageError, match="gencode"):
        CompileOptions(gencodes=("sm_90",))
    with pytest.raises(PlanError, match="nvcc rejected"):
        nvstage.compile("k.cu", CompileOptions(extra=("--no-such-flag",)), toolkit=toolkit)


@pytest.mark.parametrize("name", ["sp ace.cu", "dollar $(touch PWNED).cu", "semi;colon.cu",
                                  "it's.cu"])
def test_odd_file_names_just_work_and_are_never_run_by_a_shell(toolkit, kernels, workdir, name):
    shutil.copy(kernels / "saxpy.cu", workdir / name)
    build = nvstage.compile(name, CompileOptions(archs=("sm_90",), compile_only=True),
                            toolkit=toolkit, keep="kept dir $(x)")
    stem = name[:-3]
    assert (workdir / f"{stem}.o").is_file()
    assert (workdir / "kept dir $(x)" / f"{stem}.ptx").is_file()
    assert not (workdir / "PWNED").exists()
    assert build.status == "ok"


def test_double_quote_in_a_name_is_refused_before_any_stage(toolkit, kernels, workdir):
    shutil.copy(kernels / "saxpy.cu", workdir / 'q"uote.cu')
    with pytest.raises(UsageError, match="fatbinary cannot take"):
        nvstage.compile('q"uote.cu', CompileOptions(compile_only=True), toolkit=toolkit)
    assert not (workdir / 'q"uote.o').exists()


def test_defines_and_includes_with_spaces(toolkit, workdir):
    (workdir / "inc dir").mkdir()
    (workdir / "inc dir/val.h").write_text("#define BASE 3\n")
    (workdir / "d.cu").write_text(
        '#include "val.h"\n__global__ void k(int* p) { p[0] = BASE + EXTRA; }\n'
        'const char* msg = MSG;\n')
    opts = CompileOptions(archs=("sm_90",), stop="ptx", include_dirs=("inc dir",),
                          defines=("EXTRA=4", 'MSG="hello world"'))
    nvstage.compile("d.cu", opts, toolkit=toolkit)
    assert "mov.u32 \t%r1, 7;" in (workdir / "d.ptx").read_text() or \
        "7;" in (workdir / "d.ptx").read_text()


def test_a_keep_folder_in_use_by_another_build_is_refused(toolkit, kernels, workdir):
    # Two builds in one keep folder at once would overwrite each other's intermediate files.
    shutil.copy(kernels / "saxpy.cu", workdir)
    (workdir / "k").mkdir()
    fd = os.open(workdir / "k", os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as a running build holds it
        with pytest.raises(UsageError, match="another nvstage build is using"):
            nvstage.compile("saxpy.cu", CompileOptions(archs=("sm_80",), compile_only=True),
                            toolkit=toolkit, keep="k")
        from nvstage.compiler.nvrtc import compile_nvrtc

        with pytest.raises(UsageError, match="another nvstage build is using"):
            compile_nvrtc("saxpy.cu", CompileOptions(archs=("sm_80",)), toolkit=toolkit,
                          keep="k")
    finally:
        os.close(fd)
    b = nvstage.compile("saxpy.cu", CompileOptions(archs=("sm_80",), compile_only=True),
                        toolkit=toolkit, keep="k")  # free again once the other is done
    assert b.status == "ok" and (workdir / "k/stages.json").is_file()


def test_a_keep_folder_that_cannot_be_made_is_a_usage_error(toolkit, kernels, workdir):
    shutil.copy(kernels / "saxpy.cu", workdir)
    (workdir / "afile").write_text("")
    with pytest.raises(UsageError, match="cannot use afile/k as the keep folder"):
        nvstage.compile("saxpy.cu", CompileOptions(archs=("sm_80",), compile_only=True),
                        toolkit=toolkit, keep="afile/k")


# Slow enough in cicc (about a second here) to be caught running.
SLOW_CICC = """
template <int N> struct Step {
    __device__ static float apply(float x) {
        return Step<N - 1>::apply(x) * 1.0001f + __sinf(x + N);
    }
};
template <> struct Step<0> {
    __device__ static float apply(float x) { return x; }
};
__global__ void slow(float *out, const float *in) {
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < 128; ++i) acc += Step<150>::apply(in[threadIdx.x] + i);
    out[threadIdx.x] = acc;
}
"""


def _children(name: str | None = None) -> list[int]:
    """This process's live children (the tools a build started), by name if given."""
    found = []
    for d in os.listdir("/proc"):
        try:
            status = Path(f"/proc/{d}/status").read_text() if d.isdigit() else ""
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("PPid", "").strip() == str(os.getpid()) and \
                not fields.get("State", "").startswith("Z") and \
                (name is None or fields.get("Name", "").strip() == name):
            found.append(int(d))
    return found


@pytest.fixture
def signals_as_from_a_terminal():
    """SIGINT raising KeyboardInterrupt, SIGTERM and SIGHUP not ignored, for one test: a
    suite started with them ignored (`nohup pytest &`) has no handler to raise it, and
    handle_signals leaves an ignored signal ignored, as a nohup'ed build wants."""
    import signal

    wanted = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL,
              signal.SIGHUP: signal.SIG_DFL}
    before = {s: signal.signal(s, h) for s, h in wanted.items()}
    yield
    for s, h in before.items():
        signal.signal(s, h)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["handle_signals", "plain KeyboardInterrupt"])
def test_a_library_build_stopped_mid_stage_ends_its_tools_and_marks_the_folder(
        how, toolkit, workdir, tmp_path_factory, monkeypatch, signals_as_from_a_terminal):
    import signal
    import threading
    import time

    from nvstage import proc

    tmp = tmp_path_factory.mktemp("tmp")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    (workdir / "slow.cu").write_text(SLOW_CICC)
    opts = CompileOptions(archs=("sm_90",), compile_only=True)
    nvstage.compile("slow.cu", opts, toolkit=toolkit, keep="k", cache=False)
    sig = signal.SIGTERM if how == "handle_signals" else signal.SIGINT

    def signal_once_cicc_runs():
        end = time.monotonic() + 60
        while not _children("cicc") and time.monotonic() < end:
            time.sleep(0.005)
        if _children("cicc"):  # only while the build runs: never into pytest itself
            os.kill(os.getpid(), sig)

    threading.Thread(target=signal_once_cicc_runs, daemon=True).start()
    with pytest.raises(KeyboardInterrupt) as err:
        # Without handle_signals Python's own SIGINT handler raises KeyboardInterrupt in the
        # main thread: the build's tool scope ends the tools the workers wait for.
        with proc.handle_signals() if how == "handle_signals" else contextlib.nullcontext():
            nvstage.compile("slow.cu", opts, toolkit=toolkit, keep="k", cache=False)
    assert getattr(err.value, "signum", sig) == sig
    assert _children() == []
    assert list(tmp.iterdir()) == []  # every tool's private $TMPDIR went with it
    doc = json.loads((workdir / "k/stages.json").read_text())
    assert doc["status"] == "interrupted" and "cicc" not in [s["kind"] for s in doc["stages"]]
    b = nvstage.compile("slow.cu", opts, toolkit=toolkit, keep="k", cache=False)
    assert b.status == "ok" and json.loads((workdir / "k/stages.json").read_text())[
        "status"] == "ok"


def test_the_keep_manifest_says_running_before_the_first_stage(toolkit, kernels, workdir):
    shutil.copy(kernels / "saxpy.cu", workdir)
    seen = []

    class Peek(Observer):
        def on_stage_start(self, stage):
            if not seen:
                seen.append(json.loads((workdir / "k/stages.json").read_text()))

    opts = CompileOptions(archs=("sm_80",), compile_only=True)
    nvstage.compile("saxpy.cu", opts, toolkit=toolkit, keep="k")
    nvstage.compile("saxpy.cu", opts, toolkit=toolkit, keep="k", observer=Peek())
    assert seen[0]["status"] == "running" and seen[0]["stages"] == []
    assert json.loads((workdir / "k/stages.json").read_text())["status"] == "ok"
