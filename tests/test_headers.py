"""Where the host compiler finds headers, and the places a new file would hide one."""

from __future__ import annotations

import os
import shutil

import pytest

from nvstage.headers import Existence, builtin_dirs, builtin_flags, include_search, \
    parse_search_list, present, shadow_candidates

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
    # A build's memory answers from its first look (a folder that is not there: one stat).
    seen = Existence()
    assert present(cands, seen) == [str(tmp_path / "inc1/x.h")]
    (tmp_path / "inc1/x.h").unlink()
    assert present(cands, seen) == [str(tmp_path / "inc1/x.h")]
    assert not Existence()(str(tmp_path / "nowhere/x.h"))
