"""nvcc's plan asked ahead (``planning.ask_ahead``): taken only by the build that asks with the
same words, the same plan nvcc prints for that build's folder, its own folder removed."""

from __future__ import annotations

import dataclasses
import os
import shutil

import pytest

from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.pipeline import planning
from nvstage.compiler.pipeline.driver import compile as nvs_compile
from nvstage.compiler.pipeline.planning import ask_ahead, plan_words, words_for
from nvstage.errors import ToolkitError

OPTS = CompileOptions(archs=("sm_90",), compile_only=True, output="out.o")


@pytest.fixture
def src(kernels, tmp_path):
    shutil.copy(kernels / "vadd.cu", tmp_path)
    return tmp_path


def _taken(monkeypatch) -> list:
    got = []
    take = planning.Ahead.take

    def spy(self, *a):
        r = take(self, *a)
        got.append(r is not None)
        return r

    monkeypatch.setattr(planning.Ahead, "take", spy)
    return got


def test_a_plan_asked_ahead_is_the_build_s_own(toolkit, src, monkeypatch):
    taken = _taken(monkeypatch)
    cwd = str(src)
    with ask_ahead(toolkit.nvcc, words_for("vadd.cu", OPTS), cwd, remember=False) as ahead:
        scratch = ahead.scratch
        assert scratch and os.path.isdir(scratch)
        ahead_build = nvs_compile("vadd.cu", OPTS, toolkit=toolkit, cwd=cwd, cache=False,
                                  ahead=ahead)
    assert taken == [True]
    assert not os.path.exists(scratch)  # nvcc's folder goes with the block
    ahead_obj = (src / "out.o").read_bytes()
    plain = nvs_compile("vadd.cu", OPTS, toolkit=toolkit, cwd=cwd, cache=False)
    assert (src / "out.o").read_bytes() == ahead_obj  # the same object, byte for byte
    # The same stages, each naming its own build's work folder, none the folder asked in.
    work_a = ahead_build.dryrun_argv[1].removeprefix("TMPDIR=")
    work_p = plain.dryrun_argv[1].removeprefix("TMPDIR=")
    assert [s.argv for s in ahead_build.plan.stages] == [
        [a.replace(work_p, work_a) for a in s.argv] for s in plain.plan.stages]
    assert not any(scratch in a for s in ahead_build.plan.stages for a in s.argv)


def test_other_words_ask_nvcc_again(toolkit, src, monkeypatch, tmp_path):
    taken = _taken(monkeypatch)
    other = CompileOptions(archs=("sm_90",), compile_only=True, output="other.o")
    with ask_ahead(toolkit.nvcc, words_for("vadd.cu", OPTS), str(src), remember=False) as ahead:
        build = nvs_compile("vadd.cu", other, toolkit=toolkit, cwd=src, cache=False,
                            ahead=ahead)
    assert taken == [False]
    assert build.output.endswith("other.o") and (src / "other.o").is_file()


def test_a_plan_in_the_memo_is_not_asked_again(toolkit, src, monkeypatch, tmp_path):
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    nvs_compile("vadd.cu", OPTS, toolkit=toolkit, cwd=src)  # remembers the plan
    with ask_ahead(toolkit.nvcc, words_for("vadd.cu", OPTS), str(src), remember=True) as ahead:
        assert ahead.scratch is None
    with ask_ahead(toolkit.nvcc, words_for("vadd.cu", OPTS), str(src), remember=False) as ahead:
        assert ahead.scratch is not None


def test_a_cache_folder_not_yet_made_is_not_looked_up(toolkit, src, monkeypatch, tmp_path):
    # Its key would remember nvcc's names in this process before the folder holds their
    # note: the next hit, in a process of its own, would read nvcc's 35 MB to find them.
    from nvstage.compiler.nvcc import environment

    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(environment, "_memo", {})
    with ask_ahead(toolkit.nvcc, words_for("vadd.cu", OPTS), str(src), remember=True) as ahead:
        assert ahead.scratch is not None
    assert environment._memo == {}


def test_a_build_that_failed_waits_for_no_plan_and_leaves_no_folder(toolkit, src):
    # nvcc's answer for a build that raised is never taken: the error is said without it.
    from nvstage.errors import InputNotFound

    with pytest.raises(InputNotFound):
        with ask_ahead(toolkit.nvcc, words_for("vadd.cu", OPTS), str(src),
                       remember=False) as ahead:
            scratch = ahead.scratch
            nvs_compile("gone.cu", OPTS, toolkit=toolkit, cwd=src, cache=False, ahead=ahead)
    assert not os.path.exists(scratch)
    ahead._thread.join()  # nvcc, in a folder gone, finishes all the same
    assert not os.path.exists(scratch)


def test_words_the_build_will_refuse_are_not_asked_ahead(toolkit, src, monkeypatch):
    def refuse(self, words):
        raise planning.UsageError("a name that cannot be given to nvcc")

    monkeypatch.setattr(planning.Placeholders, "sub_words", refuse)
    with ask_ahead(toolkit.nvcc, words_for("vadd.cu", OPTS), str(src), remember=False) as ahead:
        assert ahead.scratch is None


def test_nvcc_that_cannot_start_is_said_where_the_plan_is_taken(toolkit, src, tmp_path):
    fake = tmp_path / "nvcc"
    fake.write_text("not a program\n")
    fake.chmod(0o644)
    words = words_for("vadd.cu", OPTS)
    with ask_ahead(str(fake), words, str(src), remember=False) as ahead:
        bad = dataclasses.replace(toolkit, nvcc=str(fake))
        with pytest.raises(ToolkitError, match="cannot start"):
            plan_words(words, bad, tmp_path / "work", str(src), kept=False, ahead=ahead)


def test_a_name_that_needs_a_placeholder_is_not_asked_ahead(toolkit, src):
    words = words_for("vadd.cu", OPTS) + ["-DX=$HOME"]
    with ask_ahead(toolkit.nvcc, words, str(src), remember=False) as ahead:
        assert ahead.scratch is None
