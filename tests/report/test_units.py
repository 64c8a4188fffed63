"""report.units: figures for people, whatever their size."""

from __future__ import annotations

from nvstage.report.units import fmt_time


def test_times_in_a_fixed_unit():
    assert fmt_time(12.345e-6, "us", digits=2, suffix=False) == "12.35"
    assert fmt_time(2.5, "ms") == "2500.0 ms"


def test_a_huge_time_is_written_with_its_exponent():
    """A cost file's trip counts may reach 2**512: the kernel's time in us ran to 150 digits
    and broke the model's tables."""
    assert fmt_time(3.3858e147, "us", digits=2, suffix=False) == "3.39e+153"
    assert fmt_time(-2e9, "us", sign=True) == "-2.0e+15 us"


def test_one_of_a_thing_is_singular():
    from nvstage.report.units import plural

    assert plural(1, "step") == "1 step"
    assert plural(0, "step") == "0 steps" and plural(12, "stage") == "12 stages"
    assert plural(1, "miss", "misses") == "1 miss" and plural(2, "miss", "misses") == "2 misses"


def test_a_parallelism_below_one_is_said_as_how_busy_the_steps_kept_the_build():
    from nvstage.report.units import fmt_parallel

    assert fmt_parallel(2.345) == "2.3x parallel" and fmt_parallel(2.345, cell=True) == "2.3x"
    assert fmt_parallel(1.0) == "1.0x parallel"
    # 0.4x parallel read as a slowdown: the steps filled 40% of the wall time, no more.
    assert fmt_parallel(0.4) == "steps busy 40% of the wall time"
    assert fmt_parallel(0.999, cell=True) == "99% busy"
    assert fmt_parallel(None) == "" and fmt_parallel(None, cell=True) == "-"
