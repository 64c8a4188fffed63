"""Atomic writes: the old file or the new one, never half; a failed write is one message."""

import os

import pytest

from nvstage.artifacts import write_atomic, write_json_atomic
from nvstage.errors import UsageError, WriteError


def test_write_replaces_whole_and_keeps_normal_modes(tmp_path):
    p = tmp_path / "sub" / "out.json"
    write_json_atomic(p, {"a": 1})
    write_json_atomic(p, {"a": 2})
    assert p.read_text().strip().endswith("}") and '"a": 2' in p.read_text()
    assert oct(p.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    assert [f.name for f in p.parent.iterdir()] == ["out.json"]  # no temp file left


def test_a_folder_in_the_way_is_one_clear_error(tmp_path):
    with pytest.raises(UsageError, match="it is a folder"):
        write_atomic(tmp_path, "x")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_folder_is_one_clear_error(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    with pytest.raises(WriteError, match="cannot write"):
        write_atomic(ro / "x.json", "x")


def test_write_errors_are_still_oserrors_for_best_effort_writers(tmp_path):
    with pytest.raises(OSError):
        write_atomic(tmp_path, "x")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
