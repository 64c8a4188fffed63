"""The resident's child (``compiler/launcher/resident/child.py``): where its work folder goes,
and the wait for the bookkeeping children do after their answers."""

from __future__ import annotations

import fcntl
import os
import threading
import time

import pytest

from nvstage.compiler.launcher.resident import child


def test_a_childs_own_folder_is_in_the_cache_folder_and_held_where_it_can_be(tmp_path,
                                                                               monkeypatch):
    # In the cache folder's tmp/, nothing of the command is in the build's $TMPDIR once it is
    # answered. Not for a folder nvstage has not marked, nor one the stage cache would not
    # relocate ("@" as in user@corp.com), nor one on another file system than $TMPDIR's.
    from nvstage.compiler.cache.local import Cache

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    plain = tmp_path / "cache"
    Cache(plain).open()
    got = child._own_folder({"NVSTAGE_CACHE_DIR": str(plain), "TMPDIR": str(tmp_path)})
    assert got is not None and os.path.dirname(got[0]) == str(plain / "tmp")
    with pytest.raises(BlockingIOError):  # held: a clear leaves it alone
        fcntl.flock(os.open(got[0], os.O_RDONLY), fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.close(got[1])
    unmarked = tmp_path / "new"
    assert child._own_folder({"NVSTAGE_CACHE_DIR": str(unmarked)}) is None
    assert not unmarked.exists()  # not made: a folder holding only tmp/ is no cache
    at = tmp_path / "user@corp"
    Cache(at).open()
    assert child._own_folder({"NVSTAGE_CACHE_DIR": str(at)}) is None
    monkeypatch.setenv("TMPDIR", "/dev/shm")
    if os.path.isdir("/dev/shm") and os.stat("/dev/shm").st_dev != os.stat(tmp_path).st_dev:
        assert child._own_folder({"NVSTAGE_CACHE_DIR": str(plain)}) is None


def test_settle_waits_for_every_child_still_storing_after_its_answer(tmp_path):
    (tmp_path / "tmp").mkdir()
    assert child.settle(str(tmp_path), 1.0) is True  # no child ever went on: at once
    fd = os.open(tmp_path / "tmp" / "after-3", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)  # a child storing after its answer holds its slot
    assert child.settle(str(tmp_path), 0.1) is False
    threading.Timer(0.3, os.close, (fd,)).start()  # it ends: the slot is let go
    t = time.monotonic()
    assert child.settle(str(tmp_path), 10.0) is True
    assert time.monotonic() - t >= 0.25
