"""The base folder (NVSTAGE_BASE_DIR, ccache's base_dir) as keys and stages see it: which
absolute paths become relative, and which never do."""

from __future__ import annotations

import os

from nvstage.compiler.cache.stage.stage_key import Place

BASE, CWD, WORK = "/ck/repo", "/ck/repo/build", "/tmp/nvstage-abc"


def test_paths_under_the_base_folder_become_relative():
    p = Place(BASE, CWD, WORK)
    assert p.word("/ck/repo/src/a.cu") == "../src/a.cu"
    assert p.word("-I/ck/repo/include") == "-I../include"
    assert p.word("-isystem/ck/repo/third") == "-isystem../third"
    assert p.word("--orig_src_path_name=/ck/repo/src/a.cu") == \
        "--orig_src_path_name=../src/a.cu"
    assert p.word("/ck/repo/build/CMakeFiles/a.o") == "CMakeFiles/a.o"
    assert p.word("/ck/repo") == ".."
    # "build/.." is resolved through build by the system: kept, the base part made relative.
    assert p.rel("/ck/repo/build/../include") == "../build/../include"
    assert p.cwd_part() == ["base", "build"]


def test_what_is_never_rewritten():
    p = Place(BASE, CWD, WORK)
    for word in ("-DDATA=/ck/repo/data", "-UX", "/ck/repository/x.cu", "/usr/include/x.h",
                 "--image3=kind=elf,file=/ck/repo/a.cubin", "relative/a.cu",
                 "/tmp/nvstage-abc/k.ii", "-I/usr/include"):
        assert p.word(word) == word
    inside = Place(BASE, CWD, "/ck/repo/build/k.nvstage")  # a keep folder in the checkout
    assert inside.word("/ck/repo/build/k.nvstage/k.ii") == "/ck/repo/build/k.nvstage/k.ii"
    assert Place(BASE, "/elsewhere", WORK).cwd_part() == "/elsewhere"
    none = Place(None, CWD, WORK)
    assert none.word("/ck/repo/src/a.cu") == "/ck/repo/src/a.cu" and none.cwd_part() == CWD


def test_a_current_folder_named_through_a_link_turns_it_off(tmp_path):
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "link")
    assert Place(str(tmp_path), str(tmp_path / "link"), WORK).base is None
    assert Place(str(tmp_path), str(tmp_path / "real"), WORK).base == str(tmp_path)


def test_the_setting(monkeypatch):
    from nvstage.paths import base_dir, base_dir_problem

    for value, want in (("/ck/repo/", "/ck/repo"), ("relative", None), ("/", None),
                        ("", None)):
        monkeypatch.setenv("NVSTAGE_BASE_DIR", value)
        assert base_dir() == want
    monkeypatch.setenv("NVSTAGE_BASE_DIR", "relative")
    assert "not an absolute path" in base_dir_problem()
