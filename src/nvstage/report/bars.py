"""The decomposition as stacked bars, one per workload, as a standalone SVG (pure, no deps).

Each bar stacks sum launch (host), sum kernel (GPU) and sum transfer (GPU): T. Every bar says
whether it is an estimate or a measurement, and a tick marks the figure T is compared with
(the measured wall time, or the pipelined estimate). When one term dwarfs the others (large
copies next to microsecond kernels), a second panel repeats the bars without it, on its own
scale, so the smaller terms can be read.

``bars_svg`` is the entry point; ``bar_from_estimate`` and ``bar_from_decomposition`` turn a
model ``Estimate`` or a measured ``decompose.Decomposition`` into a ``Bar``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from xml.sax.saxutils import escape

TERMS = ("launch", "kernel", "transfer")
TERM_LABELS = {"launch": "sum launch (host)", "kernel": "sum kernel (GPU)",
               "transfer": "sum transfer (GPU)"}
COLORS = {"launch": "#4e79a7", "kernel": "#f28e2b", "transfer": "#59a14f"}
KINDS = ("estimate", "measured")


@dataclass(frozen=True)
class Bar:
    label: str  # the workload
    terms: Mapping[str, float]  # seconds per term
    kind: str = "estimate"  # "estimate" | "measured"
    marker: float | None = None  # seconds: wall time (measured) or pipelined (estimate)
    marker_label: str = ""
    spread: Mapping[str, float] = field(default_factory=dict)  # optional: IQR of T, seconds

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"bar kind must be one of {KINDS}, not {self.kind!r}")
        for k, v in self.terms.items():
            if k not in TERMS:
                raise ValueError(f"unknown term {k!r}; terms are {TERMS}")
            if v < 0:
                raise ValueError(f"term {k} is negative ({v})")

    @property
    def total(self) -> float:
        return sum(self.terms.get(t, 0.0) for t in TERMS)


def format_seconds(s: float) -> str:
    """Seconds in the unit that reads best: ns, us, ms or s, three significant digits."""
    if s == 0:
        return "0"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if abs(s) >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def bar_from_estimate(e, label: str | None = None) -> Bar:
    """A model ``Estimate``: its three terms, with the pipelined estimate as the tick."""
    return Bar(label or e.workload, e.terms(), "estimate", e.pipelined_s, "pipelined")


def bar_from_decomposition(d, label: str) -> Bar:
    """A measured ``Decomposition`` (medians over repetitions, ns), with the wall time."""
    def med(sp):
        return sp.median * 1e-9 if sp else 0.0

    return Bar(label, {"launch": med(d.launch), "kernel": med(d.kernel),
                       "transfer": med(d.transfer)}, "measured",
               med(d.wall) if d.wall else None, "wall",
               {"T_iqr": d.total.iqr * 1e-9} if d.total else {})


def _nice_max(x: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``x``."""
    import math

    if x <= 0:
        return 1e-6
    p = 10 ** math.floor(math.log10(x))
    for m in (1, 2, 5, 10):
        if m * p >= x * 0.999999:
            return m * p
    return 10 * p


# Layout, in px.
_W = 820
_LEFT = 190
_RIGHT = 110
_BAR_H = 26
_ROW_H = 58
_PANEL_GAP = 36
_AXIS_H = 26


def bars_svg(bars: Sequence[Bar], *, title: str, subtitle: str = "",
             detail_threshold: float = 0.8) -> str:
    """A standalone SVG of stacked bars. ``detail_threshold``: when one term is more than this
    share of the largest bar, a second panel leaves that term out."""
    if not bars:
        raise ValueError("no bars to draw")
    for b in bars:  # a NaN or infinite figure has no place on an axis (_nice_max overflowed)
        figures = [*b.terms.values(), *b.spread.values()] + \
            ([b.marker] if b.marker is not None else [])
        if not all(math.isfinite(v) for v in figures):
            raise ValueError(f"bar {b.label!r} has a figure that is not finite")
    kinds = sorted({b.kind for b in bars})
    heading = f"{title} ({' and '.join(kinds)})"
    panels = [(None, bars)]
    biggest = max(bars, key=lambda b: b.total)
    if biggest.total > 0:
        dominant = max(TERMS, key=lambda t: biggest.terms.get(t, 0.0))
        share = biggest.terms.get(dominant, 0.0) / biggest.total
        rest = [t for t in TERMS if t != dominant]
        if share > detail_threshold and any(b.terms.get(t, 0) > 0 for b in bars for t in rest):
            panels.append((dominant, bars))
    top = 70 if subtitle else 52
    legend_h = 30
    height = top + legend_h + sum(14 + len(bs) * _ROW_H + _AXIS_H + _PANEL_GAP
                                  for _, bs in panels) - _PANEL_GAP + 12
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{height}" '
           f'viewBox="0 0 {_W} {height}" font-family="DejaVu Sans, Arial, sans-serif" '
           f'font-size="12">',
           f"<title>{escape(heading)}</title>",
           f'<rect x="0" y="0" width="{_W}" height="{height}" fill="#ffffff"/>',
           f'<text x="{_W / 2}" y="24" text-anchor="middle" font-size="16" '
           f'font-weight="bold">{escape(heading)}</text>']
    if subtitle:
        out.append(f'<text x="{_W / 2}" y="44" text-anchor="middle" fill="#555">'
                   f"{escape(subtitle)}</text>")
    # Legend.
    x = 30
    y = top
    for t in TERMS:
        out.append(f'<rect x="{x}" y="{y - 10}" width="12" height="12" fill="{COLORS[t]}"/>')
        out.append(f'<text x="{x + 17}" y="{y}">{escape(TERM_LABELS[t])}</text>')
        x += 150
    out.append(f'<line x1="{x + 4}" y1="{y - 11}" x2="{x + 4}" y2="{y + 3}" stroke="#000" '
               f'stroke-width="2"/>')
    out.append(f'<text x="{x + 10}" y="{y}">wall (measured) / pipelined (estimate)</text>')
    y += legend_h
    for left_out, bs in panels:
        y = _panel(out, bs, y, left_out)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _panel(out: list[str], bars: Sequence[Bar], y: float, left_out: str | None) -> float:
    terms = [t for t in TERMS if t != left_out]
    caption = ("T = launch + kernel + transfer" if left_out is None
               else f"without {left_out}, on its own scale: " + " + ".join(terms))
    out.append(f'<text x="{_LEFT}" y="{y}" font-weight="bold">{escape(caption)}</text>')
    y += 10
    totals = [sum(b.terms.get(t, 0.0) for t in terms) for b in bars]
    markers = [b.marker for b in bars if b.marker is not None and left_out is None]
    scale_max = _nice_max(max(totals + markers + [0.0]))
    plot_w = _W - _LEFT - _RIGHT
    px = plot_w / scale_max
    # Axis with five ticks.
    axis_y = y + len(bars) * _ROW_H + 4
    out.append(f'<line x1="{_LEFT}" y1="{axis_y}" x2="{_LEFT + plot_w}" y2="{axis_y}" '
               f'stroke="#888"/>')
    for i in range(6):
        v = scale_max * i / 5
        tx = _LEFT + v * px
        out.append(f'<line x1="{tx:.1f}" y1="{y}" x2="{tx:.1f}" y2="{axis_y + 4}" '
                   f'stroke="#e4e4e4"/>')
        out.append(f'<text x="{tx:.1f}" y="{axis_y + 17}" text-anchor="middle" fill="#555">'
                   f"{escape(format_seconds(v))}</text>")
    for b, total in zip(bars, totals):
        by = y + 8
        out.append(f'<text x="{_LEFT - 8}" y="{by + 12}" text-anchor="end" '
                   f'font-weight="bold">{escape(b.label)}</text>')
        out.append(f'<text x="{_LEFT - 8}" y="{by + 26}" text-anchor="end" fill="#555">'
                   f"{escape(b.kind)}</text>")
        x = _LEFT
        for t in terms:
            v = b.terms.get(t, 0.0)
            w = v * px
            if w <= 0:
                continue
            out.append(f'<rect x="{x:.2f}" y="{by}" width="{max(w, 0.5):.2f}" height="{_BAR_H}" '
                       f'fill="{COLORS[t]}"><title>{escape(b.label)} {escape(TERM_LABELS[t])}: '
                       f"{escape(format_seconds(v))} ({escape(b.kind)})</title></rect>")
            x += w
        if b.marker is not None and left_out is None:
            mx = _LEFT + b.marker * px
            out.append(f'<line x1="{mx:.2f}" y1="{by - 4}" x2="{mx:.2f}" y2="{by + _BAR_H + 4}" '
                       f'stroke="#000" stroke-width="2"><title>{escape(b.marker_label)}: '
                       f"{escape(format_seconds(b.marker))}</title></line>")
        total_label = ("T " if left_out is None else "") + format_seconds(total)
        out.append(f'<text x="{_LEFT + total * px + 6:.2f}" y="{by + 17}">'
                   f"{escape(total_label)}</text>")
        parts = " · ".join(f"{t} {format_seconds(b.terms.get(t, 0.0))}" for t in terms)
        if b.marker is not None and left_out is None:
            parts += f" · {b.marker_label} {format_seconds(b.marker)}"
        if b.spread.get("T_iqr") is not None and left_out is None:
            parts += f" · T IQR {format_seconds(b.spread['T_iqr'])}"
        out.append(f'<text x="{_LEFT}" y="{by + _BAR_H + 15}" fill="#444" font-size="11">'
                   f"{escape(parts)}</text>")
        y += _ROW_H
    return axis_y + _AXIS_H + _PANEL_GAP
