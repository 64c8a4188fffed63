"""proc: every way a child can fail to answer is a ToolMissing, never a stray exception."""

import stat

import pytest

from nvstage import proc


def test_a_timeout_is_a_tool_timeout(tmp_path):
    with pytest.raises(proc.ToolTimeout, match="did not finish within 0.2 s"):
        proc.run(["sleep", "5"], timeout=0.2)


def test_a_file_that_is_not_a_program_is_tool_missing(tmp_path):
    junk = tmp_path / "nvcc"
    junk.write_bytes(b"\x00\x01not a program")
    junk.chmod(junk.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(proc.ToolMissing, match="cannot start"):
        proc.run([str(junk)])
    with pytest.raises(proc.ToolMissing, match="cannot start"):
        proc.run([str(tmp_path / "absent")])
