"""Headers' digests remembered across processes by identity (``local/hash_memo.py``): a later
process takes a settled header's digest without reading it, a changed header is read again, a
header too new to trust is not kept, and a note nobody sealed stands for nothing."""

from __future__ import annotations

import hashlib
import json
import os
import time

import pytest

from nvstage.compiler.cache.stage.stage_key import FileHasher
from nvstage.compiler.cache.local import Cache
from nvstage.compiler.store import hash_memo


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Cache:
    monkeypatch.setenv("NVSTAGE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return Cache().open()


def _header(folder, name: str, text: bytes, age_s: float = 60.0) -> str:
    path = folder / name
    path.write_bytes(text)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return str(path)


def _hasher(cache, work, trusted=None) -> FileHasher:
    h = FileHasher(work)
    h.kept = hash_memo.load(cache)
    h.kept.trust([str(trusted or work.parent)])  # as the toolkit's folder is
    return h


def test_a_settled_header_is_taken_from_the_memo_by_its_identity(cache, tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    # ctime cannot be set back: the memo's clock is moved on instead.
    path = _header(inc, "a.h", b"#define A 1\n")
    first = _hasher(cache, tmp_path / "w1")
    first.kept.started_ns = time.time_ns() + 10 * hash_memo.SETTLE_NS
    look = first.look(path)
    assert look.digest == hashlib.sha256(b"#define A 1\n").hexdigest()
    hash_memo.save(cache, first.kept)

    later = _hasher(cache, tmp_path / "w2")
    assert later.kept.get(path, _sig(path)) == (look.digest, False)
    assert later.look(path) == look
    assert later.kept.fresh == {}  # taken, not hashed again

    # Edited: another identity, read again, never the remembered digest.
    with open(path, "wb") as f:
        f.write(b"#define A 2\n")
    again = _hasher(cache, tmp_path / "w3")
    assert again.look(path).digest == hashlib.sha256(b"#define A 2\n").hexdigest()


def test_a_header_changed_moments_ago_is_not_kept(cache, tmp_path):
    path = _header(tmp_path, "new.h", b"int x;\n", age_s=0)
    h = _hasher(cache, tmp_path / "w")
    assert h.look(path) is not None
    assert h.kept.fresh == {}  # its ctime is now: a write in the same tick would hide


def test_a_header_spelling_the_work_folder_is_not_kept(cache, tmp_path):
    work = tmp_path / "w"
    path = _header(tmp_path, "odd.h", os.fsencode(work) + b"\n")
    h = _hasher(cache, work)
    h.kept.started_ns = time.time_ns() + 10 * hash_memo.SETTLE_NS
    assert h.look(path).mentions
    assert h.kept.fresh == {}


def test_a_note_nobody_sealed_stands_for_nothing(cache, tmp_path):
    path = _header(tmp_path, "b.h", b"int b;\n")
    forged = {"b.h": [*_sig(path), "0" * 64, False]}
    (cache.root / "tools").mkdir(exist_ok=True)
    name = hash_memo.note_name(str(tmp_path))
    (cache.root / "tools" / f"{name}.json").write_text(json.dumps({"note": name,
                                                                    "value": forged}))
    h = _hasher(cache, tmp_path / "w")
    assert h.kept.get(path, _sig(path)) is None
    assert h.look(path).digest == hashlib.sha256(b"int b;\n").hexdigest()


def test_a_header_outside_the_trusted_folders_is_always_hashed(cache, tmp_path):
    # A project's own headers may sit on a file system whose ctime is the mtime (FAT, sshfs),
    # where an edit that restores the mtime keeps the identity: never kept across builds.
    (tmp_path / "toolkit").mkdir()
    (tmp_path / "project").mkdir()
    mine = _header(tmp_path / "project", "mine.h", b"int m;\n")
    escaped = str(tmp_path / "toolkit" / ".." / "project" / "mine.h")
    h = _hasher(cache, tmp_path / "w", trusted=tmp_path / "toolkit")
    h.kept.started_ns = time.time_ns() + 10 * hash_memo.SETTLE_NS
    h.look(mine)
    h.look(escaped)
    assert h.kept.fresh == {}
    h.kept.rows[str(tmp_path / "project")] = {"mine.h": [*_sig(mine), "0" * 64, False]}
    assert h.kept.get(mine, _sig(mine)) is None


def test_at_most_max_notes_folders_are_kept_the_oldest_removed(cache, monkeypatch):
    monkeypatch.setattr(hash_memo, "MAX_NOTES", 2)
    for n in range(4):
        memo = hash_memo.HashMemo(cache, started_ns=10 * hash_memo.SETTLE_NS)
        memo.trust(["/"])
        memo.add(f"/f{n}/h", (n, 1, 1, 1), "a" * 64, False)
        hash_memo.save(cache, memo)
        time.sleep(0.01)
    left = sorted(p.name for p in (cache.root / "tools").glob("hashes-*.json"))
    assert left == sorted(f"{hash_memo.note_name(f'/f{n}')}.json" for n in (2, 3))


@pytest.mark.parametrize("row", [["x"], [1, 2, 3, 4, "short", False], None,
                                 [1, 2, 3, 4, "0" * 64, "yes"]])
def test_a_malformed_row_is_no_digest(row):
    memo = hash_memo.HashMemo()
    memo.trust(["/inc"])
    memo.rows["/inc"] = {"h": row}
    assert memo.get("/inc/h", (1, 2, 3, 4)) is None


def test_each_folder_keeps_at_most_its_cap_and_is_read_alone(cache, monkeypatch):
    monkeypatch.setattr(hash_memo, "MAX_FILES", 3)
    memo = hash_memo.HashMemo(cache, started_ns=10 * hash_memo.SETTLE_NS)
    memo.trust(["/a", "/b"])
    for n in range(5):
        memo.add(f"/a/h{n}", (n, 1, 1, 1), "a" * 64, False)
    memo.add("/b/h", (9, 1, 1, 1), "b" * 64, True)
    hash_memo.save(cache, memo)
    later = hash_memo.load(cache)
    later.trust(["/a", "/b"])
    assert [later.get(f"/a/h{n}", (n, 1, 1, 1)) is not None for n in range(5)] == \
        [False, False, True, True, True]
    assert list(later.rows) == ["/a"]  # /b's note is not read until a file there is
    assert later.get("/b/h", (9, 1, 1, 1)) == ("b" * 64, True)


def _sig(path: str) -> tuple:
    st = os.stat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def test_a_build_keeps_the_toolkit_headers_digests_but_a_keep_build_does_not(
        cache, toolkit, kernels, tmp_path):
    # A keep folder has a name a header may spell: its builds neither read nor add notes.
    import shutil

    import nvstage

    shutil.copy(kernels / "vadd.cu", tmp_path)
    opts = nvstage.CompileOptions(archs=("sm_90",), output="vadd.o", compile_only=True)
    nvstage.compile("vadd.cu", opts, toolkit=toolkit, keep="vadd.keep", cwd=tmp_path)
    assert not list((cache.root / "tools").glob("hashes-*.json"))
    nvstage.compile("vadd.cu", opts, toolkit=toolkit, cwd=tmp_path, cache=True)
    assert list((cache.root / "tools").glob("hashes-*.json"))  # the toolkit's folders
