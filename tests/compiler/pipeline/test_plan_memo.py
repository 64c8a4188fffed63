"""nvcc's plan from the plan cache: the same stages nvcc prints, in the new work folder."""

import os
import shutil

import pytest

from nvstage import proc
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.pipeline.driver import compile
from nvstage.compiler.pipeline.plan_memo import Shape
from nvstage.compiler.pipeline.planning import ask_ahead, plan_words


def test_a_remembered_plan_is_nvccs_in_the_new_folder(kernels, tmp_path, monkeypatch):
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    shutil.copy(kernels / "multi.cu", tmp_path)
    opts = CompileOptions(archs=("sm_80", "sm_90"), compile_only=True)
    first = compile("multi.cu", opts, cwd=tmp_path, keep="k1")
    assert list((tmp_path / "cache" / "plans").rglob("*"))
    again = compile("multi.cu", opts, cwd=tmp_path, keep="k2")
    fresh = compile("multi.cu", opts, cwd=tmp_path, keep="k3", cache=False)
    k2, k3 = str(tmp_path / "k2"), str(tmp_path / "k3")
    assert [s.argv for s in again.plan.stages] == [
        [a.replace(k3, k2) for a in s.argv] for s in fresh.plan.stages]
    assert again.plan_seconds < first.plan_seconds
    assert all(os.path.isfile(a.path) for a in again.artifacts)


# A unit of a cold CMake build: every word that names the unit is one nvcc only echoes.
def _unit(src_dir, stem: str) -> tuple[list[str], str]:
    (src_dir / f"{stem}.cu").write_text(f"__global__ void f_{stem}(int *p) {{ p[0] = 1; }}\n")
    obj = f"CMakeFiles/p.dir/src/{stem}.cu.o"
    source = str(src_dir / f"{stem}.cu")
    return ["-MD", "-MT", obj, "-MF", f"{obj}.d", "-x", "cu", "-c", source, "-o", obj,
            "--generate-code=arch=compute_90,code=[sm_90]"], source


@pytest.fixture
def units(tmp_path, monkeypatch):
    """(a folder of sources, the build folder, nvcc --dryrun runs seen), the cache open."""
    from nvstage.compiler.cache.stage.stage_cache import open_cache

    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    open_cache(True)
    (tmp_path / "src").mkdir()
    (tmp_path / "build" / "work").mkdir(parents=True)
    asked = []
    run = proc.run

    def spy(argv, *a, **k):
        asked.extend(w for w in argv if w == "--dryrun")
        return run(argv, *a, **k)

    monkeypatch.setattr(proc, "run", spy)
    return tmp_path / "src", tmp_path / "build", asked


def _plans(toolkit, units, stems) -> list[int]:
    """How many times each unit asked nvcc for its plan, each plan checked against nvcc's."""
    src, build, asked = units
    counts = []
    for stem in stems:
        words, source = _unit(src, stem)
        before = len(asked)
        got, _, _ = plan_words(words, toolkit, build / "work", str(build), remember=True,
                               kept=False, source=source)
        counts.append(len(asked) - before)
        nvcc, _, _ = plan_words(words, toolkit, build / "work", str(build), kept=False)
        assert [s.argv for s in got.stages] == [s.argv for s in nvcc.stages], stem
    return counts


def test_a_new_unit_takes_the_plan_of_its_shape_once_another_proved_it(toolkit, units):
    assert _plans(toolkit, units, ["k0", "k1", "k2", "x_y-9"]) == [1, 1, 0, 0]
    src, build, _ = units
    words, source = _unit(src, "k3")
    with ask_ahead(toolkit.nvcc, words, str(build), remember=True, source=source) as ahead:
        assert ahead.scratch is None  # nothing asked of nvcc either


def test_a_stem_nvcc_prints_of_its_own_teaches_nothing(toolkit, units):
    # "cuda" is also in nvcc's "cuda_runtime.h": the plan it teaches has a hole there, which
    # the next unit's plan does not prove; that unit teaches again, and the third trusts it.
    assert _plans(toolkit, units, ["cuda", "k1", "k2", "k3"]) == [1, 1, 1, 0]


def test_a_stem_in_a_word_nvcc_reads_has_no_shape(toolkit, units):
    src, build, asked = units
    for stem, extra in (("k0", ["-DUNIT=k0"]), ("cu", []), ("sm_90", []), ("-k", [])):
        words, source = _unit(src, stem)
        assert Shape.of(toolkit.nvcc, ["tmpxft", *words, *extra], source, str(build),
                        os.environ) is None, stem
    # Where it is not a file's name: an extension (which kind of file -o writes), a suffix.
    for stem, out in (("ptx", "k.ptx"), ("k0", "objk0.cu.o"), ("k0", "k0k0.o")):
        words, source = _unit(src, stem)
        words[words.index("-o") + 1] = out
        assert Shape.of(toolkit.nvcc, ["tmpxft", *words], source, str(build),
                        os.environ) is None, out
    words, source = _unit(src, "k0")
    assert Shape.of(toolkit.nvcc, ["tmpxft", *words], source, str(build), os.environ)


def test_a_prover_whose_stem_nvcc_also_prints_keeps_the_teachers_holes(toolkit, units):
    # cuda proves k0's plan; what is kept is k0's, not cuda's, which would have a hole in
    # cuda_runtime.h that k2 would fill (k2_runtime.h).
    assert _plans(toolkit, units, ["k0", "cuda", "k2", "k3"]) == [1, 1, 0, 0]


def test_a_stem_in_the_environment_s_flags_stays_nvcc_s(toolkit, units, monkeypatch):
    monkeypatch.setenv("NVCC_APPEND_FLAGS", "-DWHICH=k2")
    assert _plans(toolkit, units, ["k0", "k2", "k3"]) == [1, 1, 0]


def test_a_folder_named_as_a_unit_proves_nothing_it_should_not(toolkit, tmp_path, monkeypatch):
    from nvstage.compiler.cache.stage.stage_cache import open_cache

    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    open_cache(True)
    here = tmp_path / "saxpy"
    (here / "work").mkdir(parents=True)
    for stem in ("util", "saxpy", "main"):
        (here / f"{stem}.cu").write_text("__global__ void f() {}\n")
        words = ["-c", f"{stem}.cu", "-o", f"{stem}.o", "-arch=sm_90"]
        got, _, _ = plan_words(words, toolkit, here / "work", str(here), remember=True,
                               kept=False, source=f"{stem}.cu")
        nvcc, _, _ = plan_words(words, toolkit, here / "work", str(here), kept=False)
        assert [s.argv for s in got.stages] == [s.argv for s in nvcc.stages], stem


def test_a_document_that_stands_for_a_huge_plan_is_not_pasted(toolkit, units):
    import marshal

    from nvstage import fsio
    from nvstage.compiler.pipeline import plan_memo
    from nvstage.compiler.store import zstd

    src, build, _ = units
    words, source = _unit(src, "k0")
    shape = Shape.of(toolkit.nvcc, ["tmpxft", *words], source, str(build), os.environ)
    inner = [""] * 10**6
    big = marshal.dumps([inner] * 10**6)  # one list shared: 10**12 holes in a few MB
    fsio.write_sealed(plan_memo._path(shape.root, shape.sure), shape.secret,
                      {"schema": plan_memo.SHAPE, "z": zstd.compress(big), "stem": "k1"})
    assert shape.holds() and shape.lookup(str(build / "work")) is None
    assert plan_memo._joined(["a"] * 10**7, "/work") is None
