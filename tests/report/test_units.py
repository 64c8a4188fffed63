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
