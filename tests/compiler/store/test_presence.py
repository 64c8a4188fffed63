"""Presence answers as os.path.exists does, but a folder is not there (gcc skips a folder named
as the header it looks for), from one listing per folder."""

import os

from nvstage.compiler.store import presence as presence_module
from nvstage.compiler.store.presence import Presence, present


def _a_file(p: str) -> bool:
    return os.path.exists(p) and not os.path.isdir(p)


def _layout(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "a.h").write_text("")
    (tmp_path / "inc" / "sub").mkdir()
    (tmp_path / "inc" / "dangling.h").symlink_to(tmp_path / "nowhere.h")
    (tmp_path / "inc" / "linked.h").symlink_to(tmp_path / "inc" / "a.h")
    (tmp_path / "file").write_text("")
    names = ["inc/a.h", "inc/b.h", "inc/sub", "inc/sub/c.h", "inc/dangling.h", "inc/linked.h",
             "missing/x.h", "missing/deeper/y.h", "file/z.h", "inc/../inc/a.h", "inc/./a.h",
             "inc/sub/../a.h", "missing/../inc/a.h", "inc/", "inc/sub/..", "inc/.", "inc/sub/."]
    return [str(tmp_path / n) for n in names] + ["relative/a.h", "/"]


def test_it_agrees_with_os_path_exists(tmp_path):
    paths = _layout(tmp_path)
    assert Presence().of(paths) == {p: _a_file(p) for p in paths}
    assert present(paths) == sorted({p for p in paths if _a_file(p)})
    assert any(os.path.isdir(p) for p in paths)


def test_one_listing_answers_for_a_folder(tmp_path, monkeypatch):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "a.h").write_text("")
    calls = []
    real = os.stat
    monkeypatch.setattr(os, "stat", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    got = Presence().of([str(tmp_path / "inc" / f"h{n}.h") for n in range(500)]
                        + [str(tmp_path / "inc" / "a.h")])
    assert sum(got.values()) == 1
    assert len(calls) <= 2  # the listed name alone is asked by stat


def test_memory_keeps_its_first_look_and_a_new_one_sees_the_disk(tmp_path):
    (tmp_path / "inc").mkdir()
    path = str(tmp_path / "inc" / "x.h")
    seen = Presence()
    assert not seen.of([path])[path]
    (tmp_path / "inc" / "x.h").write_text("")
    assert not seen.of([path])[path]  # one build's memory
    assert Presence().of([path])[path]


def test_a_name_in_another_case_is_asked_by_stat(tmp_path, monkeypatch):
    # A case-folding folder finds "X.h" as "x.h": a listing that holds the other case must not
    # settle it.
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "x.h").write_text("")
    asked = []
    real = presence_module._a_file
    monkeypatch.setattr(presence_module, "_a_file", lambda p: asked.append(p) or real(p))
    Presence().of([str(tmp_path / "inc" / "X.h"), str(tmp_path / "inc" / "y.h")])
    assert asked == [str(tmp_path / "inc" / "X.h")]


def test_a_folder_that_cannot_be_listed_is_asked_name_by_name(tmp_path, monkeypatch):
    # Searchable but not readable (mode 0111): as root, which lists anything, it is simulated.
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "x.h").write_text("")

    def refused(folder):
        raise PermissionError(13, "Permission denied", folder)

    monkeypatch.setattr(os, "listdir", refused)
    got = Presence().of([str(tmp_path / "inc" / "x.h"), str(tmp_path / "inc" / "y.h")])
    assert list(got.values()) == [True, False]


def test_under_a_folder_one_listing_answers_names_below_parts_it_does_not_hold(tmp_path,
                                                                               monkeypatch):
    paths = _layout(tmp_path)
    names = [p[len(str(tmp_path)) + 1:] for p in paths if p.startswith(str(tmp_path) + "/")]
    got, by_listing = Presence().under(str(tmp_path), names)
    assert got == {n: _a_file(str(tmp_path / n)) for n in names}
    assert not by_listing  # inc/ and file are there: names below them were looked at
    calls = []
    real = os.stat
    monkeypatch.setattr(os, "stat", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    got, by_listing = Presence().under(str(tmp_path / "inc"),
                                       [f"nowhere{n}/x.h" for n in range(300)])
    assert not any(got.values()) and by_listing and calls == []


def test_under_takes_dot_dot_and_absolute_names_as_paths(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "a.h").write_text("")
    got, by_listing = Presence().under(str(tmp_path / "inc"),
                                       ["../a.h", str(tmp_path / "a.h"), "./x.h"])
    assert got == {"../a.h": True, str(tmp_path / "a.h"): True, "./x.h": False}
    assert not by_listing
