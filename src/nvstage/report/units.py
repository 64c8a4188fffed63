"""Human units for sizes and times (pure): the one byte formatter and the one time formatter
every renderer uses, with its two fixed forms (a "us" column, a trace's microseconds)."""

from __future__ import annotations


def fmt_bytes(n: int | float | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def fmt_share(x: float | None) -> str:
    """A fraction as a whole percentage (a hit rate); None reads "-"."""
    return "-" if x is None else f"{x:.0%}"


def plural(n: int, one: str, many: str | None = None) -> str:
    """``n`` and the word for it: "1 step", "2 steps", "0 misses" (``many`` where adding an
    s is wrong)."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def fmt_parallel(p: float | None, *, cell: bool = False) -> str:
    """A build's parallelism (its steps' time added up over its wall time): "2.3x parallel"
    ("2.3x" in a ``cell``). Below 1 the steps did not even fill the wall time (the build tool's
    own work and the steps it ran without nvstage fall between them): no parallelism, but
    how busy they kept it, "steps busy 40% of the wall time" ("40% busy"). None: "" ("-")."""
    if p is None:
        return "-" if cell else ""
    if p >= 1:
        return f"{p:.1f}x" if cell else f"{p:.1f}x parallel"
    busy = f"{int(p * 100)}%"  # floored: 0.999 is not 100% busy
    return f"{busy} busy" if cell else f"steps busy {busy} of the wall time"


def fmt_known(v) -> str:
    """A figure that may be unknown (a kernel's registers, say): "?" when it is."""
    return "?" if v is None else str(v)


_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


def fmt_time(seconds: float | None, unit: str | None = None, *, digits: int | None = None,
             significant: int | None = None, sign: bool = False, suffix: bool = True) -> str:
    """A time given in seconds, for people.

    ``unit`` ("s", "ms", "us", "ns") fixes the unit, as a column whose header names it does
    (then usually ``suffix=False``); without one the largest unit the value reaches is taken
    (down to us, or to ns with ``significant``). ``digits``: decimals (default 2 in s, else
    1); ``significant``: that many significant digits instead. ``sign``: "+" for a
    non-negative difference. None reads "-".
    """
    if seconds is None:
        return "-"
    if significant is not None and seconds == 0 and unit is None:
        return "0"
    if unit is None:
        unit = next((u for u in ("s", "ms", "us") if abs(seconds) >= _SCALE[u]),
                    "ns" if significant is not None else "us")
    plus = "+" if sign else ""
    if significant is not None:
        text = f"{seconds / _SCALE[unit]:{plus}.{significant}g}"
    else:
        places = digits if digits is not None else (2 if unit == "s" else 1)
        value = seconds / _SCALE[unit]
        # Past a trillion, fixed decimals run to hundreds of digits (a cost file's trip counts
        # may reach 2**512): the exponent instead.
        text = f"{value:{plus}.{places}{'e' if abs(value) >= 1e12 else 'f'}}"
    return f"{text} {unit}" if suffix else text


def fmt_us(seconds: float | None = None, digits: int = 2, *, ns: float | None = None) -> str:
    """A time in a column whose header says "us": the number alone, ``digits`` decimals;
    None reads "-". ``ns``: the time given in nanoseconds instead (a run's figures)."""
    return fmt_time(seconds if ns is None else ns * 1e-9, "us", digits=digits, suffix=False)


def trace_us(seconds: float = 0.0, *, ns: float | None = None) -> float:
    """A time as a trace event's ``ts`` or ``dur`` (the Chrome trace format counts
    microseconds), to the nanosecond. ``ns``: the time given in nanoseconds instead."""
    return round(ns / 1000.0, 3) if ns is not None else round(seconds * 1e6, 3)
