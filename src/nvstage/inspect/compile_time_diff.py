"""Two builds' compile time compared (``nvstage diff A B --time``): units, headers, template
sets and device functions, each row with its work figures beside its times and a verdict.

The verdict never rests on a bare threshold. A row whose work figures changed (instantiations,
parses, functions) is ``changed``, whatever its time did; a row on one side only is ``added``
or ``removed``. A row whose work is the same on both sides is judged against this machine's
noise, measured from the builds themselves: the units whose work figures are the same on
both sides did the same work, so how far their front-end times moved apart is how far time
moves on its own here (in the manner of nvbench's comparison, which holds a difference
against the measured spread rather than a fixed percentage): the largest relative move of one
of them, and the sum of their moves in seconds (a row summed over the build, a header parsed
by every unit, moves with all of them; a small row moves by a larger fraction than a unit
does). A time change inside either is ``within noise``; outside both, ``slower`` or
``faster``. With fewer than
``MIN_UNCHANGED`` such units the spread is unknown and the verdict says so. A row smaller
than ``TOO_SMALL`` of the front end is not judged by time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nvstage.inspect.compile_time import CompileTime, summarize_path

MIN_UNCHANGED = 2  # units with unchanged work needed to measure the noise
TOO_SMALL = 0.01  # a row below this share of the front end is not judged by its time


@dataclass(frozen=True)
class Row:
    kind: str  # unit, header, template-set, function
    name: str
    a: float | None  # seconds; None: not on that side
    b: float | None
    work_a: dict | None  # the row's work figures (inst, parses, hdr, fn, passes)
    work_b: dict | None
    verdict: str  # added, removed, changed, slower, faster, within noise, noise unknown, small

    @property
    def delta(self) -> float:
        return (self.b or 0.0) - (self.a or 0.0)

    def to_json(self) -> dict:
        return {"kind": self.kind, "name": self.name, "a_seconds": self.a,
                "b_seconds": self.b, "work_a": self.work_a, "work_b": self.work_b,
                "verdict": self.verdict}


@dataclass
class TimeDiff:
    a: str
    b: str
    rows: list[Row] = field(default_factory=list)
    noise: float | None = None  # the largest relative move of an unchanged unit
    noise_seconds: float = 0.0  # the unchanged units' moves, summed
    unchanged_units: int = 0
    front_end: tuple[float, float] = (0.0, 0.0)

    @property
    def changed(self) -> list[Row]:
        return [r for r in self.rows if r.verdict not in ("within noise", "small")]

    def to_json(self) -> dict:
        return {"schema": "nvstage.compile-time-diff/1", "a": self.a, "b": self.b,
                "noise": self.noise, "noise_seconds": self.noise_seconds,
                "noise_from_units": self.unchanged_units,
                "front_end_seconds": list(self.front_end),
                "rows": [r.to_json() for r in self.rows]}


def diff_time(a, b) -> TimeDiff:
    """Compare the traces of ``a`` and ``b`` (trace files or folders, build folders with
    their build log's own traces)."""
    sa, sb = summarize_path(a), summarize_path(b)
    return compare(sa, sb, str(a), str(b))


def compare(sa: CompileTime, sb: CompileTime, a: str = "A", b: str = "B") -> TimeDiff:
    out = TimeDiff(a, b)
    ua = {u.unit: u for u in sa.units if u.archs}
    ub = {u.unit: u for u in sb.units if u.archs}
    same = [n for n in ua.keys() & ub.keys()
            if ua[n].work == ub[n].work and ua[n].front_end > 0]
    moves = [abs(ub[n].front_end - ua[n].front_end) for n in same]
    out.unchanged_units = len(same)
    if len(same) >= MIN_UNCHANGED:
        out.noise = max(m / ua[n].front_end for m, n in zip(moves, same))
        out.noise_seconds = sum(moves)
    front = max(sum(u.front_end for u in ua.values()), sum(u.front_end for u in ub.values()))
    out.front_end = (sum(u.front_end for u in ua.values()),
                     sum(u.front_end for u in ub.values()))

    def judge(kind, name, ta, tb, wa, wb):
        if ta is None:
            verdict = "added"
        elif tb is None:
            verdict = "removed"
        elif wa != wb:
            verdict = "changed"
        elif max(ta, tb) < TOO_SMALL * front:
            verdict = "small"
        elif out.noise is None:
            verdict = "noise unknown"
        elif abs(tb - ta) <= max(out.noise * max(ta, tb), out.noise_seconds):
            verdict = "within noise"
        else:
            verdict = "slower" if tb > ta else "faster"
        out.rows.append(Row(kind, name, ta, tb, wa, wb, verdict))

    for n in sorted(ua.keys() | ub.keys()):
        x, y = ua.get(n), ub.get(n)
        judge("unit", n, x and x.front_end, y and y.front_end, x and _unit_work(x),
              y and _unit_work(y))
    for n in sorted(sa.headers.keys() | sb.headers.keys()):
        x, y = sa.headers.get(n), sb.headers.get(n)
        judge("header", n, x and x.inclusive, y and y.inclusive, x and _header_work(x),
              y and _header_work(y))
    for n in sorted(sa.template_sets.keys() | sb.template_sets.keys()):
        x, y = sa.template_sets.get(n), sb.template_sets.get(n)
        judge("template-set", n, x and x.seconds, y and y.seconds, x and {"inst": x.count},
              y and {"inst": y.count})
    for n in sorted(sa.nvvm.keys() | sb.nvvm.keys()):
        x, y = sa.nvvm.get(n), sb.nvvm.get(n)
        judge("function", n, x and x.seconds, y and y.seconds, x and {"passes": x.count},
              y and {"passes": y.count})
    out.rows.sort(key=lambda r: -abs(r.delta))
    return out


def _unit_work(u) -> dict:
    w = u.work
    return {"hdr": w["headers"], "inst": w["instantiations"], "fn": w["functions"]}


def _header_work(h) -> dict:
    return {"parses": h.count, "inst": h.instantiations}


def work_change(a: dict | None, b: dict | None) -> str:
    """The work figures that differ, for people: "inst 446->846"; one side's alone."""
    if a is None or b is None:
        return ", ".join(f"{k} {v}" for k, v in (a or b or {}).items())
    return ", ".join(f"{k} {a[k]}->{b[k]}" for k in a if a[k] != b.get(k))
