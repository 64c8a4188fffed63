"""The resident's child (``compiler/launcher/resident/child.py``): where its work folder goes,
and the wait for the bookkeeping children do after their answers."""

from __future__ import annotations

import fcntl
import os
import threading
import time

from nvstage.compiler.launcher.resident import child


def test_a_childs_work_folder_goes_to_the_cache_folder_unless_its_path_needs_quoting(tmp_path):
    # In the cache folder's tmp/, nothing of the command is in the build's $TMPDIR once it is
    # answered; a path nvcc would plan another way keeps it in $TMPDIR (no answer before
    # the bookkeeping then).
    plain = tmp_path / "cache"
    assert child._cache_tmp({"NVSTAGE_CACHE_DIR": str(plain)}) == str(plain / "tmp")
    assert (plain / "tmp").is_dir()
    blank = tmp_path / "a cache"
    assert child._cache_tmp({"NVSTAGE_CACHE_DIR": str(blank)}) is None
    assert not blank.exists()


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
