"""Where the host compiler finds headers, and the places a new file would hide one."""

from __future__ import annotations

import os
import shutil

import pytest

from nvstage.compiler.cache.stage.headers import (
    builtin_dirs,
    builtin_flags,
    include_search,
    parse_search_list,
    shadow_candidates,
)
from nvstage.compiler.store.presence import present

GCC_V = """\
ignoring nonexistent directory "/usr/local/include/x86_64-linux-gnu"
#include "..." search starts here:
#include <...> search starts here:
 /usr/include/c++/12
 /usr/lib/gcc/x86_64-linux-gnu/12/include
 /usr/local/include
 /usr/include
 /Library/Frameworks (framework directory)
End of search list.
 /not/a/folder
"""


def test_parse_search_list_reads_gccs_verbose_output():
    assert parse_search_list(GCC_V) == ["/usr/include/c++/12",
                                        "/usr/lib/gcc/x86_64-linux-gnu/12/include",
                                        "/usr/local/include", "/usr/include",
                                        "/Library/Frameworks"]
    assert parse_search_list("no list here") == []


def test_builtin_flags_keep_what_moves_the_builtin_folders():
    argv = ["gcc", "-E", "-x", "c++", "-Ia", "-m64", "--sysroot=/s", "-isysroot", "/t", "-O2",
            "-nostdinc++", "k.cu"]
    assert builtin_flags(argv) == ["-x", "c++", "-m64", "--sysroot=/s", "-isysroot", "/t",
                                   "-nostdinc++"]


def test_include_search_follows_gccs_order():
    argv = ["gcc", "-Ib", "-isystem", "/s", "-I", "c", "-iquote", "q", "-idirafter/late",
            "-I-", "-include", "x.h", "-isystem/t", "-Ib"]
    env = {"CPATH": "/cp:", "CPLUS_INCLUDE_PATH": "/cpp"}
    assert include_search(argv, "/w", env, ["/usr/include"]) == [
        "/w/q", "/w/b", "/w/c", "/cp", "/w", "/s", "/t", "/cpp", "/usr/include", "/late"]


def test_a_folder_named_as_user_and_system_is_searched_as_system(tmp_path):
    """gcc: 'ignoring duplicate directory "sys" as it is a non-system directory that
    duplicates a system directory'; the same folder through a link counts as the same."""
    for d in ("sys", "later"):
        (tmp_path / d).mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "sys")
    argv = ["gcc", "-Isys", "-Ilater", "-Ilink", "-isystem", "sys"]
    assert include_search(argv, str(tmp_path), {}) == [str(tmp_path / "later"),
                                                       str(tmp_path / "sys")]


def test_builtin_dirs_asks_the_real_compiler(tmp_path):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("no gcc on this machine")
    dirs = builtin_dirs([gcc, "-x", "c++"], dict(os.environ, CPATH=str(tmp_path)))
    assert dirs and all(os.path.isabs(d) for d in dirs)
    assert str(tmp_path) not in dirs  # only the compiler's own folders
    assert any(os.path.isfile(os.path.join(d, "stdio.h")) for d in dirs)


def test_shadow_candidates_are_earlier_folders_and_user_includers_folders():
    search = ["/w/inc1", "/w/inc2", "/w/inc3", "/usr/include"]
    headers = ["/w/src/main.cu", "/w/inc2/sub/a.h", "/w/inc1/b.h", "/usr/include/stdio.h",
               "/usr/include/bits/types.h"]
    got = shadow_candidates(headers, search, "/w/run", fixed=["/usr/include"])
    # a.h was found in inc2 as sub/a.h: inc1 is searched first, and a quoted include looks
    # beside every file that was read; b.h in the first folder hides only beside includers.
    assert {"/w/inc1/sub/a.h", "/w/src/sub/a.h", "/w/src/b.h"} <= got
    assert "/w/run/b.h" in got  # -include looks in the current folder first
    assert {"/w/inc1/stdio.h", "/w/inc3/stdio.h", "/w/src/stdio.h"} <= got
    assert "/w/inc3/sub/a.h" not in got and "/w/inc2/sub/a.h" not in got
    # beside a file in the compiler's own tree: not watched
    assert "/usr/include/bits/stdio.h" not in got


def test_the_shadow_state_changes_when_a_candidate_appears(tmp_path):
    (tmp_path / "inc1").mkdir()
    cands = shadow_candidates([str(tmp_path / "inc2/x.h")],
                              [str(tmp_path / "inc1"), str(tmp_path / "inc2")],
                              str(tmp_path / "inc2"))
    before = present(cands)
    (tmp_path / "inc1/other.h").write_text("")
    assert present(cands) == before
    (tmp_path / "inc1/x.h").write_text("")
    assert present(cands) == [str(tmp_path / "inc1/x.h")]


def test_clean_keeps_dotdot_which_normpath_would_drop():
    from nvstage.compiler.cache.stage.headers import clean

    assert clean("/w/./a//b/../c/") == "/w/a/b/../c"
    assert clean("a/./b") == "a/b"


def test_a_header_named_by_its_real_path_is_matched_through_the_folders_real_paths(tmp_path):
    """gcc writes a system header's real path to the depfile when it is shorter."""
    (tmp_path / "r/include").mkdir(parents=True)
    (tmp_path / "r/include/x.h").write_text("")
    (tmp_path / "a_long_link_name").symlink_to(tmp_path / "r")
    search = [str(tmp_path / "first"), str(tmp_path / "a_long_link_name/include")]
    got = shadow_candidates([str(tmp_path / "r/include/x.h")], search, str(tmp_path / "w"))
    assert str(tmp_path / "first/x.h") in got


def test_a_dotdot_include_is_watched_where_the_system_resolves_it(tmp_path):
    search = [str(tmp_path / "first/b"), str(tmp_path / "a/b")]
    got = shadow_candidates([str(tmp_path / "a/b/../shared/coef.h")], search, str(tmp_path))
    assert str(tmp_path / "first/b/../shared/coef.h") in got


def test_the_search_layout_follows_links_and_folders(tmp_path):
    from nvstage.compiler.cache.stage.headers import search_layout

    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    (tmp_path / "sys").symlink_to(tmp_path / "one")
    search = [str(tmp_path / "sys"), str(tmp_path / "later")]
    before = search_layout(search)
    assert before[1][1] is None  # not there
    (tmp_path / "sys").unlink()
    (tmp_path / "sys").symlink_to(tmp_path / "two")
    assert search_layout(search) != before


def test_include_search_reads_long_forms_sysroot_and_the_languages_variable():
    env = {"C_INCLUDE_PATH": "/c", "CPLUS_INCLUDE_PATH": "/cpp"}
    argv = ["gcc", "-x", "c++", "--include-directory=a", "--include-directory", "b",
            "--sysroot=/root", "-I=/inc"]
    assert include_search(argv, "/w", env) == ["/w/a", "/w/b", "/root/inc", "/cpp"]
    assert include_search(["gcc", "-x", "c", "-Ia"], "/w", env) == ["/w/a", "/c"]
    assert builtin_flags(["gcc", "-B/opt/gcc/", "-B", "/x"]) == ["-B/opt/gcc/", "-B", "/x"]


def test_files_naming_time_macros_are_found(tmp_path):
    from nvstage.compiler.cache.stage.headers import uses_time_macros

    (tmp_path / "a.h").write_text("#define X 1\n")
    (tmp_path / "b.h").write_text('const char* built = __DATE__ " " __TIME__;\n')
    assert uses_time_macros([str(tmp_path / "a.h")]) is None
    assert uses_time_macros([str(tmp_path / "a.h"), str(tmp_path / "b.h"),
                             str(tmp_path / "gone.h")]) == str(tmp_path / "b.h")
