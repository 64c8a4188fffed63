"""The source <-> SASS view (report/lines_html.py) rendered from captured nvdisasm listings of
lineview-peak.cu (as tests/inspect/test_lineview.py joins them): what links to what, the live
registers, labels, a kernel without line info, escaping. The view in Chromium is
tests/report/test_lines_html_browser.py."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from nvstage.inspect import lineview
from nvstage.report.lines_html import MAX_VIEW_ROWS, kernel_view, missing_view

CAPTURED = Path(__file__).parents[1] / "data" / "captured"
SOURCE = (CAPTURED / "lineview-peak.cu").read_text().split("\n")


def _kernel(arch: str = "sm_90", source=True) -> lineview.KernelLines:
    located = lineview.parse_located(
        (CAPTURED / f"cuda13.5-peak-{arch}-nvdisasm-gi.txt").read_text())
    live = lineview.parse_live((CAPTURED / f"cuda13.5-peak-{arch}-nvdisasm-lrm.txt").read_text())
    (name,) = located
    return lineview.join(name, located[name], live[name], arch=arch, image="peak.cubin",
                         source_text=(lambda f: SOURCE) if source else None,
                         demangled="peak(float const*, float*, int)")


def _rows(html: str, cls: str) -> list[tuple[str, str]]:
    """(classes, data-l or "") of each row of a kind (sl: source, ai: SASS, pi: PTX)."""
    return [(m.group(1), m.group(2) or "") for m in
            re.finditer(rf'<div class="({cls}(?: [^"]*)?)"(?: data-l="([^"]+)")?', html)]


def test_each_sass_row_links_to_the_source_line_it_came_from():
    k = _kernel()
    html = kernel_view(k, "kv-0", root="/src")
    src, sass = _rows(html, "sl"), _rows(html, "ai")
    assert len(sass) == len(k.instructions) == 39
    keys = {key for _, key in src if key}
    # every source line with SASS has a key, and its SASS rows carry it with its colour
    assert keys == {f"0:{ln.line}" for ln in k.lines if ln.instructions}
    colour = {key: re.search(r"c\d", c).group(0) for c, key in src if key}
    for cls, key in sass:
        if key:  # its own line first (its colour), then the call it was inlined through
            own, *calls = key.split()
            assert own in keys and colour[own] in cls.split() and set(calls) <= keys
    by_line = {}
    for i in k.instructions:
        by_line[f"0:{i.line}"] = by_line.get(f"0:{i.line}", 0) + 1
    assert {key: sum(1 for _, s in sass if s.split()[0] == key) for key in keys} == by_line
    # adjacent lines with code never share a colour
    ordered = [colour[key] for _, key in src if key]
    assert all(a != b for a, b in zip(ordered, ordered[1:]))


def test_the_path_once_labels_peak_lines_and_live_bars():
    k = _kernel()
    html = kernel_view(k, "kv-0", root="/src")
    assert html.count('class="kv-file"') == 1 and ">peak.cu</div>" in html  # relative
    assert "/src/peak.cu" not in html.replace('title="/src/peak.cu"', "")
    peaks = [key for cls, key in _rows(html, "sl") if "peak" in cls.split()]
    assert peaks == ["0:7", "0:8"]
    assert "peak 14 live registers at lines 7, 8" in html
    # the widest bar is the peak's, and the count beside it is nvdisasm's
    assert 'width:100%' in html and '<span class="lc">14</span>' in html
    assert '<div class="lb">.L_x_1:</div>' in html
    assert "NOP \u00d7" in html  # the padding, counted apart
    # the blank line 10 is there, with no link
    assert ("sl none", "") in _rows(html, "sl")
    assert 'data-pane="ptx"' not in html  # no PTX was given


def test_inlined_code_says_where_it_was_called():
    html = kernel_view(_kernel(), "kv-0")
    # mix2's body (line 2) names its call (line 9): hovering line 9 lights it too
    assert re.search(r'class="ai c\d" data-l="0:2 0:9" title="[^"]*peak.cu:2 inlined at '
                     r'peak.cu:9', html)


def test_without_line_info_one_line_and_the_sass_with_live_registers():
    k = _kernel()
    k = replace(k, lines=(), has_lineinfo=False,
                instructions=tuple(replace(i, file=None, line=None, inlined_at=())
                                   for i in k.instructions))
    html = kernel_view(k, "kv-3")
    assert html.count("no line info in this cubin") == 1
    assert 'class="kv-pane kv-src"' not in html and 'class="kv-panes one"' in html
    assert len(_rows(html, "ai")) == 39 and all(key == "" for _, key in _rows(html, "ai"))
    assert '<span class="lc">14</span>' in html


def test_everything_from_the_build_is_escaped():
    evil = "</script><img src=x onerror=alert(1)>"
    k = _kernel()
    k = replace(k, demangled=evil, image=evil,
                lines=tuple(replace(ln, text=evil, file=evil) for ln in k.lines),
                instructions=tuple(replace(i, text=evil, label=evil) for i in k.instructions))
    html = kernel_view(k, evil) + missing_view(evil, evil, evil)
    assert "<img" not in html and "</script>" not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_a_huge_kernel_is_cut_with_a_note():
    k = _kernel()
    many = tuple(replace(k.instructions[n % 39], offset=16 * n)
                 for n in range(MAX_VIEW_ROWS + 7))
    html = kernel_view(replace(k, instructions=many), "kv-0")
    assert len(_rows(html, "ai")) == MAX_VIEW_ROWS
    assert "7 more instructions not drawn" in html


def test_peak_lines_in_several_files_say_which_file():
    """#line directives or headers: the summary listed bare line numbers, one per file."""
    k = _kernel()
    two = tuple(replace(ln, file="other.cu") if n % 2 else ln for n, ln in enumerate(k.lines))
    html = kernel_view(replace(k, lines=two), "kv-0")
    said = re.search(r"peak 14 live registers at lines ([^<]*)<", html).group(1)
    assert all(re.fullmatch(r"[\w.-]+\.cu:\d+", p) for p in said.split(", ")), said
