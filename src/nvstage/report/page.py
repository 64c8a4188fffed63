"""The shell every nvstage HTML page shares: the self-contained page (inline style and script,
nothing fetched: a Content-Security-Policy forbids every request), escaping, the JSON block the
page's script reads, the base style both reports use, and small pieces (cards, charts' frames).

Every string taken from a document is escaped (``esc``); data for a script travels as JSON in a
``<script type="application/json">`` block with ``<``, ``>`` and ``&`` escaped, so no value
can close the block.
"""

from __future__ import annotations

import html
import json

# Text widths in px per character, generous for the fonts a system may substitute: charts
# size their labels from these, so names that do not fit wrap, never cut.
MONO_PX, TEXT_PX = 6.8, 6.4  # 11px ui-monospace; 11px system-ui


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def json_for_script(obj) -> str:
    # "<" as \\u003c: no "</script>" or "<!--" can appear inside the block.
    return json.dumps(obj).replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("&", "\\u0026")


def page(title: str, css: str, body: str, data: dict, js: str) -> str:
    """A self-contained page: ``body``, then ``data`` as a JSON block the script reads."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            # No network: the policy forbids every fetch; inline style and script only.
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
            f"<title>{esc(title)}</title><style>{css}</style></head><body>"
            + body
            + f'<script type="application/json" id="nvstage-data">{json_for_script(data)}'
            + f"</script><script>{js}</script></body></html>\n")



def cards(items) -> str:
    """The summary cards: (label, value, bad) each; a bad one stands out."""
    return '<div class="cards" id="summary">' + "".join(
        f'<div class="card{" bad" if bad else ""}"><div class="v">{esc(v)}</div>'
        f'<div class="k">{esc(k)}</div></div>' for k, v, bad in items) + "</div>"


def svg_open(chart_id: str, width: int, height: int, label: str) -> str:
    """A chart that scales down to the page (a long -rdc plan is wide), but never below 80 %
    of its size, where its text would be too small to read: its frame scrolls instead."""
    return (f'<svg id="{chart_id}" class="chart" xmlns="http://www.w3.org/2000/svg" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
            f'style="width:100%;max-width:{width}px;min-width:{int(width * 0.8)}px;'
            f'height:auto" aria-label="{esc(label)}">')


# The style both reports share; each page adds its own after it.
BASE_CSS = """
:root{--fg:#1d1d1f;--dim:#6e6e73;--line:#d2d2d7;--bg:#f5f5f7;--bad:#c5221f}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);
 background:var(--bg);margin:0 auto;padding:24px 32px 48px;max-width:1440px}
h1{font-size:24px;margin:0 0 4px;overflow-wrap:anywhere} h2{font-size:18px;margin:32px 0 10px}
h3{font-size:13px;margin:18px 0 6px;color:var(--dim);text-transform:uppercase;
 letter-spacing:.04em}
a{color:#0b57d0;text-decoration:none} a:hover{text-decoration:underline}
.dim,.note{color:var(--dim)} .meta{color:var(--dim);margin:0 0 12px;overflow-wrap:anywhere}
nav{display:flex;flex-wrap:wrap;gap:6px;margin:14px 0 0}
nav a{font-size:12px;color:var(--fg);background:#fff;border:1px solid var(--line);
 border-radius:12px;padding:2px 10px}
nav a:hover{border-color:var(--fg);text-decoration:none}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(150px,1fr));gap:10px}
.card{background:#fff;border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.card .v{font-size:20px;font-weight:600;font-variant-numeric:tabular-nums;
 overflow-wrap:anywhere}
.card .k{font-size:12px;color:var(--dim);overflow-wrap:anywhere}
.card.bad{border-color:var(--bad)} .card.bad .v{color:var(--bad)}
.scroll,.table-frame{overflow-x:auto;background:#fff;border:1px solid var(--line);
 border-radius:8px;max-width:100%}
.scroll{padding:8px}
table{border-collapse:collapse;font-size:13px;width:100%}
th,td{border-bottom:1px solid var(--line);padding:5px 8px;text-align:left;white-space:nowrap}
tbody tr:last-child td{border-bottom:none} tbody tr:hover{background:#f7f7fa}
th{background:#f0f0f3;font-weight:600;position:sticky;top:0}
th.num,td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.flagged td{background:#fdecea} tr.flagged td:first-child{box-shadow:inset 3px 0 var(--bad)}
svg text{font:12px system-ui,sans-serif;fill:var(--fg)}
svg .axis{fill:var(--dim);font-size:11px} svg .grid{stroke:#e5e5ea;stroke-width:1}
section{scroll-margin-top:12px}
"""


def cell(value, *, num: bool = False, sort=None, cls: str = "", raw: bool = False) -> str:
    """A cell; ``sort``: the value the column sorts by (numbers sort as numbers)."""
    classes = " ".join(c for c in ("num" if num else "", cls) if c)
    attr = f' class="{classes}"' if classes else ""
    if sort is not None:
        attr += f' data-v="{esc(sort)}"'
    return f"<td{attr}>{value if raw else esc(value)}</td>"


def table(table_id: str, head: list[tuple[str, bool]], rows: list[str], *,
          sortable: bool = True, caption: str = "") -> str:
    """``head``: (title, numeric) per column; ``rows``: ``<tr>`` strings."""
    cls = ' class="sortable"' if sortable else ""
    sort_attr = ' tabindex="0" title="sort"' if sortable else ""
    ths = "".join(f'<th{" class=num" if num else ""}{sort_attr}>{esc(h)}</th>'
                  for h, num in head)
    cap = f'<caption>{esc(caption)}</caption>' if caption else ""
    return (f'<div class="table-frame"><table id="{table_id}"{cls}>{cap}<thead><tr>{ths}'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>')
