"""report.terminal.build_log: a build log's headline in words that read right for one
step, and for steps that left most of the wall time to the build tool."""

from __future__ import annotations

from nvstage.inspect.build_view import BuildView, TranslationUnit
from nvstage.report.terminal.build_log import summary_line


def _unit(index: int, start: float, seconds: float) -> TranslationUnit:
    return TranslationUnit(index, None, f"/p/{index}.cu", f"/p/{index}.o", "ok", None, False,
                           start, seconds, 9, f"nvcc -c {index}.cu", [])


def test_one_step_is_one_step():
    line = summary_line(BuildView("/p/.nvstage-build", 0.0, [_unit(0, 0.0, 1.0)], [], 256))
    assert " 1 step (1 CUDA compile; 1 ok) in 1.00 s" in line, line
    assert "(1.0x parallel)" in line, line


def test_steps_that_leave_a_gap_are_not_a_parallelism_below_one():
    # 1 s of steps in a 2.2 s build: the build tool's own work fell between them.
    view = BuildView("/p/.nvstage-build", 0.0, [_unit(0, 0.0, 1.0), _unit(1, 2.0, 0.2)], [], 256)
    line = summary_line(view)
    assert "2 steps" in line and "x parallel" not in line, line
    assert "(steps busy 54% of the wall time)" in line, line
