"""Compile-time budgets: a unit's, a header's, a template set's and a device function's time,
from nvcc's -fdevice-time-trace files (``inspect.compile_time``), held to
``[budgets.compile_time]``::

    [tool.nvstage.budgets.compile_time]
    max_unit_seconds = 60.0            # one unit: every tool the trace shows, summed
    max_front_end_seconds = 30.0       # one unit: cicc's front end, over its arch passes
    max_header_seconds = 5.0           # one header's inclusive parse time, over the build
    max_template_set_seconds = 2.0     # one template set (name without arguments)
    max_template_set_count = 500       # its instantiations
    max_function_seconds = 10.0        # one device function in NVVM and ptxas

Times are measured on the machine that built (a trace holds what its clock said): a verdict
says so, and what it is summed over (arch passes, units). They sit beside
``[budgets.stage_seconds]``, which holds each stage (cicc, ptxas) whole; these look inside.
"""

from __future__ import annotations

from dataclasses import dataclass
from nvstage.inspect.compile_time import summarize_path
from nvstage.inspect.compile_time_diff import compare, work_change
from nvstage.inspect.names import demangle_all


KEYS = {
    "max_unit_seconds": float, "max_front_end_seconds": float, "max_header_seconds": float,
    "max_template_set_seconds": float, "max_template_set_count": int,
    "max_function_seconds": float,
}
MEASURED = "measured by this build's traces"


def fmt_time(seconds: float) -> str:
    """A budget's time in a message (check does not draw; ``report`` does)."""
    return f"{seconds:.3f} s"


@dataclass(frozen=True)
class Over:
    """One compile-time budget broken: ``gate.Violation``'s fields."""

    metric: str
    what: str  # the unit, header, template set or function
    value: float | int
    limit: float | int
    message: str
    file: str | None = None


def _chain(chain) -> str:
    """An include chain in a verdict: the unit, and the header that included this one."""
    return " > ".join(chain) if len(chain) <= 2 else f"{chain[0]} > ... > {chain[-1]}"


def over_budget(summary, limits: dict, names: dict[str, str] | None = None
                ) -> tuple[list[Over], int]:
    """(what broke, how many limits were compared) for ``summary`` (a ``CompileTime``)."""
    names = names or {}
    out: list[Over] = []
    checked = 0

    def hold(metric, what, value, limit, message, file=None):
        nonlocal checked
        checked += 1
        if value > limit:
            out.append(Over(metric, what, value, limit, message, file))

    passes = f"over {summary.passes} arch pass{'es' if summary.passes != 1 else ''}"
    if (lim := limits.get("max_unit_seconds")) is not None:
        for u in summary.units:
            total = sum(u.tools.values())
            hold("unit_seconds", u.unit, total, lim,
                 f"{u.unit} took {fmt_time(total)} in its tools ({MEASURED}); the budget "
                 f"is {fmt_time(lim)}", u.unit)
    if (lim := limits.get("max_front_end_seconds")) is not None:
        for u in summary.units:
            hold("front_end_seconds", u.unit, u.front_end, lim,
                 f"{u.unit} spent {fmt_time(u.front_end)} in cicc's front end over "
                 f"{len(u.archs) or 1} arch pass(es) ({MEASURED}); the budget is "
                 f"{fmt_time(lim)}", u.unit)
    if (lim := limits.get("max_header_seconds")) is not None:
        for path, h in summary.headers.items():
            hold("header_seconds", path, h.inclusive, lim,
                 f"header {path} took {fmt_time(h.inclusive)} to parse, inclusive, in "
                 f"{h.count} parse(s) by {len(h.units)} unit(s) {passes} ({MEASURED}; "
                 f"included from {_chain(h.chain[:-1])}); the budget is {fmt_time(lim)}",
                 h.chain[0] if h.chain else None)
    for key, metric in (("max_template_set_seconds", "template_set_seconds"),
                        ("max_template_set_count", "template_set_count")):
        if (lim := limits.get(key)) is None:
            continue
        for name, c in summary.template_sets.items():
            value = c.seconds if metric.endswith("seconds") else c.count
            shown = f"{fmt_time(c.seconds)} ({MEASURED})" if metric.endswith("seconds") else \
                f"{c.count} instantiations"
            limit = fmt_time(lim) if metric.endswith("seconds") else str(lim)
            verb = "took" if metric.endswith("seconds") else "has"
            unit = summary.costliest_unit(name)
            hold(metric, name, value, lim, f"template set {name} {verb} {shown} {passes}"
                 f"{f', most in {unit}' if unit else ''}; the budget is {limit}", unit)
    if (lim := limits.get("max_function_seconds")) is not None:
        funcs: dict[str, float] = {}
        for d in (summary.nvvm, summary.ptxas):
            for name, c in d.items():
                funcs[name] = funcs.get(name, 0.0) + c.seconds
        for name, seconds in funcs.items():
            shown = names.get(name, name)
            hold("function_seconds", shown, seconds, lim,
                 f"device function {shown} took {fmt_time(seconds)} in NVVM and ptxas "
                 f"{passes} ({MEASURED}); the budget is {fmt_time(lim)}")
    return out, checked


def held(limits: dict, traces) -> tuple[list[Over], int, str | None]:
    """(what broke, limits compared, a note) for the traces under ``traces`` (a trace file or
    a folder; None: none given); the note says when there was nothing to read."""
    import os


    summary = summarize_path(traces) \
        if traces is not None and os.path.exists(traces) else None
    if summary is None or not summary.units:
        return [], 0, ("compile-time budgets not checked: no nvcc time trace "
                       f"{'under ' + str(traces) if traces else 'given'} (build with "
                       "-fdevice-time-trace -, or give --time-trace PATH)")
    names = demangle_all(list(summary.nvvm) + list(summary.ptxas)) \
        if "max_function_seconds" in limits else {}
    broken, checked = over_budget(summary, limits, names)
    return broken, checked, None


def regressions(baseline, traces) -> tuple[list[Over], int, str | None]:
    """(what regressed, rows compared, a note) of the traces under ``traces`` against those
    under ``baseline`` (``inspect.compile_time_diff``): a row slower beyond the noise the two
    builds' unchanged units measure, or whose work grew with its time beyond that noise (an
    added row too). Faster and removed rows never fail."""
    import os


    if traces is None or not os.path.exists(traces):
        return [], 0, "compile-time baseline not compared: no nvcc time trace of this build"
    base, now = summarize_path(baseline), summarize_path(traces)
    if not base.units:
        return [], 0, f"compile-time baseline not compared: no nvcc time trace under {baseline}"
    d = compare(base, now, str(baseline), str(traces))
    if d.noise is None:
        noise = "noise unknown: fewer than 2 units did the same work on both sides"
    else:
        noise = (f"noise here {d.noise:.0%} or {fmt_time(d.noise_seconds)}, measured from "
                 f"{d.unchanged_units} units that did the same work")
    out = []
    for r in d.rows:
        grew = r.verdict in ("changed", "added") and r.delta > 0 and (
            d.noise is None or r.delta > max(d.noise * (r.b or 0.0), d.noise_seconds))
        if r.verdict == "slower" or grew:
            before = "not there" if r.a is None else fmt_time(r.a)
            work = work_change(r.work_a, r.work_b)
            out.append(Over(f"{r.kind}_regression", r.name, r.b, r.a or 0.0,
                            f"{r.kind} {r.name} took {fmt_time(r.b or 0.0)}, was {before}"
                            f"{f' (work {work})' if work else ''}: {r.verdict} ({noise})",
                            r.name if r.kind == "unit" else None))
    return out, len(d.rows), None
