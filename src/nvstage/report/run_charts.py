"""The charts of a GPU run: the measured decomposition (as ``report.bars`` draws it) and the
trace, from a Chrome trace or else the sequential baseline the per-operation medians lay out.
Traces are documents: every value is checked as read, and a chart draws a bounded number of
spans and lanes."""

from __future__ import annotations

from nvstage.report.page import TEXT_PX, clip, esc, svg_open
from nvstage.report.units import fmt_time
from nvstage.run.document import RunReport

LANE_COLORS = {"launch": "#4e79a7", "kernel": "#f28e2b", "transfer": "#59a14f",
               "wall": "#9c755f", "h2d": "#59a14f", "d2h": "#76b7b2", "other": "#bab0ac"}


def run_report(run) -> RunReport | None:
    """The run document typed (``nvstage.run.document``: every field checked as read)."""
    return RunReport.from_json(run) if isinstance(run, dict) else run


def _number(v) -> float | None:
    """A finite number from a trace, or None (an integer of 400 digits is no float)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and -1e300 < v < 1e300:
        return float(v)
    return None


def _get(d, key: str):
    return d.get(key) if isinstance(d, dict) else None


def _key(value):
    """A dict key from a document value (a pid may be a list in a crafted trace)."""
    return value if isinstance(value, (str, int, float, type(None))) else repr(value)[:80]



def decomposition_svg(run: RunReport | dict) -> str | None:
    """The measured decomposition as ``report.bars`` draws it (T stacked, the wall time
    ticked), as this page's chart; None when the run has no figures to draw."""
    from nvstage.report.bars import bar_from_medians, bars_svg

    report = run_report(run)
    dec = report.decomposition
    if dec is None or not {"launch", "kernel", "transfer", "wall"} & set(dec.medians_ns):
        return None
    return bars_svg([bar_from_medians(report.workload or "run", dec.medians_ns)],
                    title="decomposition, medians over the repetitions",
                    chart_id="decomposition-chart")


_TERMS = {"t_launch": "launch", "t_kernel": "kernel", "t_transfer": "transfer"}
_CATS = {"kernel": "kernel", "copy": "transfer"}


def _event_kind(e: dict, lane: str) -> str:
    """Colour by the decomposition term the event stands for (baseline lane), else its
    category, else its lane's name."""
    term, cat = _get(e.get("args"), "term"), e.get("cat")
    if isinstance(term, str) and term in _TERMS:  # a list there is no key: not a term
        return _TERMS[term]
    if isinstance(cat, str) and cat in _CATS:
        return _CATS[cat]
    low = lane.lower()
    return "launch" if "launch" in low else "transfer" if "cop" in low else "other"


def _trace_spans(run: RunReport | None, trace: dict | None
                 ) -> list[tuple[str, str, float, float, str]]:
    """(lane, name, start us, duration us, colour kind) from a Chrome trace, or else the sequential
    baseline laid out from the run's per-operation medians."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    spans = []
    if isinstance(events, list):
        names: dict[tuple, str] = {}
        procs: dict = {}
        for e in events:
            if isinstance(e, dict) and e.get("ph") == "M":
                if e.get("name") == "thread_name":
                    names[(_key(e.get("pid")), _key(e.get("tid")))] = \
                        str(_get(e.get("args"), "name"))
                elif e.get("name") == "process_name":
                    procs[_key(e.get("pid"))] = str(_get(e.get("args"), "name"))
        for e in events:
            if not isinstance(e, dict) or e.get("ph") != "X":
                continue
            ts, dur = _number(e.get("ts")), _number(e.get("dur"))
            if ts is None or dur is None:
                continue
            pid, tid = _key(e.get("pid")), _key(e.get("tid"))
            lane = f"{procs.get(pid, pid)}: {names.get((pid, tid), tid)}"
            spans.append((lane, str(e.get("name"))[:200], ts, dur, _event_kind(e, lane)))
        if spans:
            return spans
    dec = run.decomposition if run else None
    t = 0.0
    for op in (dec.operations or ()) if dec else ():
        h, g = op.host_ns, op.gpu_ns
        name = str(op.name)
        if op.kind == "launch" and h:
            spans.append(("baseline: launch", f"launch {name}", t / 1000, h / 1000, "launch"))
            t += h
        if g:
            kind = "kernel" if op.kind == "launch" else "transfer"
            spans.append((f"baseline: {kind}", name, t / 1000, g / 1000, kind))
            t += g
    return spans


# What one chart draws at most: a trace of a long run can hold millions of events, and a page
# of millions of rectangles does not open; the note under the chart says when it was cut.
MAX_TRACE_SPANS = 20_000
MAX_TRACE_LANES = 64


def trace_svg(run: RunReport | dict | None, trace: dict | None) -> str | None:
    spans = _trace_spans(run_report(run), trace)
    if not spans:
        return None
    lanes = list(dict.fromkeys(s[0] for s in spans))[:MAX_TRACE_LANES]
    lane_row = {lane: n for n, lane in enumerate(lanes)}
    drawn = [s for s in spans if s[0] in lane_row][:MAX_TRACE_SPANS]
    cut = len(spans) - len(drawn)
    spans = drawn
    t0 = min(s[2] for s in spans)
    t1 = max(s[2] + s[3] for s in spans)
    span_us = max(t1 - t0, 1e-9)
    # Lane names whole (to 60 characters): the label column grows to fit them.
    label_w = int(min(420, max(160, 16 + TEXT_PX * 1.1 * max(min(len(n), 60)
                                                             for n in lanes))))
    chart_w, row_h, top = 640, 24, 22
    width, height = label_w + chart_w + 20, top + row_h * len(lanes) + 26
    out = [svg_open("trace-chart", width, height, "trace")]
    for k in range(5):
        x = label_w + chart_w * k / 4
        out.append(f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 20}" '
                   f'class="grid"/>')
        out.append(f'<text x="{x:.1f}" y="{top - 8}" class="axis" text-anchor="middle">'
                   f'{fmt_time(span_us * k / 4 * 1e-6, "us")}</text>')
    for n, lane in enumerate(lanes):
        out.append(f'<text x="{label_w - 8}" y="{top + n * row_h + 16}" class="label" '
                   f'text-anchor="end"><title>{esc(lane)}</title>{esc(clip(lane, 60))}</text>')
    for lane, name, ts, dur, kind in spans:
        n = lane_row[lane]
        x = label_w + chart_w * (ts - t0) / span_us
        bw = max(1.0, chart_w * dur / span_us)
        out.append(f'<rect class="trace-span" x="{x:.1f}" y="{top + n * row_h + 3}" '
                   f'width="{bw:.1f}" height="{row_h - 6}" fill="{LANE_COLORS[kind]}" '
                   f'data-tip="{esc(f"{name}: {_us_text(dur)} at {_us_text(ts - t0)}")}"/>')
    what = "Chrome trace" if trace else \
        "sequential baseline from the per-operation medians (no trace given)"
    if cut:
        what += f"; {cut} more spans not drawn"
    out.append(f'<text x="{label_w}" y="{height - 6}" class="axis">{what}</text>')
    out.append("</svg>")
    return "\n".join(out)



def _us_text(us: float) -> str:
    return fmt_time(us * 1e-6, "us", digits=3)

