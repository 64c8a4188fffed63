"""The report in a real headless browser: Debian's Chromium driven by Playwright.

Browsers cannot be downloaded here, so Playwright launches the system Chromium by path. The
page must render, draw its charts, make no network request and log no console error; at
1400 px nothing scrolls sideways, no table cell overflows, and no text leaves its box in the
stage graph, for a build that ran and for the same build restored from the cache.
"""

from __future__ import annotations

import os
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("NVSTAGE_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)")
if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)) and \
        not shutil.which("chromium"):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)",
                allow_module_level=True)

sys.path.insert(0, str(Path(__file__).parent))
from test_html import synthetic_run  # noqa: E402 - after the skips and sys.path


@pytest.fixture(scope="module")
def report_file(toolkit, kernels, tmp_path_factory):
    from nvstage.compiler.nvcc.options import CompileOptions
    from nvstage.compiler.pipeline.driver import compile
    from nvstage.report.html import write_report

    keep = tmp_path_factory.mktemp("browser")
    build = compile(kernels / "multi.cu", CompileOptions(
        gencodes=("arch=compute_80,code=sm_80", "arch=compute_90,code=[sm_90,compute_90]"),
        stop="fatbin", output=str(keep / "multi.fatbin")), toolkit=toolkit, keep=keep, jobs=1)
    run, trace = synthetic_run("scale<float>")
    return Path(write_report(build, keep / "report.html", toolkit=toolkit, run=run,
                             trace=trace)), build


def test_report_renders_in_chromium(report_file, tmp_path):
    path, build = report_file
    console_errors, page_errors, requests = [], [], []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM if os.path.isfile(CHROMIUM)
                                     else shutil.which("chromium"), args=ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", lambda m: console_errors.append(m.text)
                    if m.type == "error" else None)
            page.on("pageerror", lambda e: page_errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(path.as_uri(), wait_until="load")
            page.wait_for_selector("body[data-ready='1']", timeout=10_000)

            assert page.title().startswith("nvstage report: multi.cu")
            for sel in ("svg#stage-graph", "svg#stage-gantt", "svg#decomposition-chart",
                        "svg#trace-chart", "table#resources", "table#fatbin"):
                assert page.locator(sel).count() == 1, sel
                box = page.locator(sel).bounding_box()
                assert box and box["width"] > 100 and box["height"] > 30, (sel, box)
            assert page.get_attribute("body", "data-charts") == "4"
            assert page.locator("svg#stage-gantt rect.gantt-bar").count() == len(build.runs)
            assert page.locator("svg#stage-graph g.node-stage").count() == len(build.runs)
            assert page.locator("svg#decomposition-chart rect.decomp-seg").count() >= 3
            assert page.locator("svg#trace-chart rect.trace-span").count() >= 4
            # resources: one row per kernel and arch (5 kernels x 2 arches)
            assert page.locator("table#resources tbody tr").count() == 10
            # the first kernel's source and SASS are open; the others open on click
            views = page.locator("details.kview")
            assert views.count() == 10 and views.first.locator(".kv-sass").is_visible()
            views.nth(1).locator("summary").click()
            assert views.nth(1).locator(".kv-sass .ai").first.is_visible()
            ptx = page.locator("details.code-view.ptx").first
            ptx.locator("summary").click()
            assert ptx.locator("pre").is_visible()
            # the tooltip follows the pointer over a bar
            page.locator("svg#stage-gantt rect.gantt-bar").first.hover()
            assert "took" in page.locator("#tip").inner_text()
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    print(f"\nscreenshot: {shot}")
    assert shot.stat().st_size > 10_000
    assert console_errors == [] and page_errors == []
    assert all(u.startswith(("file:", "data:", "about:")) for u in requests), requests


# Measured in the page: what scrolls sideways, what text overflows its cell or its box.
_LAYOUT = """() => {
  const d = document.documentElement, out = {page: [d.scrollWidth, d.clientWidth],
                                              overflow: [], outside: []};
  document.querySelectorAll('.table-frame, .table-frame *, .scroll, .card, .meta, summary')
    .forEach(e => { if (e.scrollWidth > e.clientWidth)
      out.overflow.push([e.tagName, e.className, e.scrollWidth, e.clientWidth,
                         e.textContent.slice(0, 80)]); });
  document.querySelectorAll('svg#stage-graph g.node').forEach(g => {
    const box = g.querySelector('rect').getBBox();
    g.querySelectorAll('text').forEach(t => { const b = t.getBBox();
      if (b.x < box.x || b.x + b.width > box.x + box.width - 2 ||
          b.y < box.y || b.y + b.height > box.y + box.height)
        out.outside.push([t.textContent, b.x + b.width, box.x + box.width]); }); });
  out.cards = Array.from(document.querySelectorAll('#summary .card .k'), e => e.textContent);
  out.graph = Array.from(document.querySelectorAll('svg#stage-graph text.artifact:not(.size)'),
                         e => Array.from(e.childNodes).filter(n => n.nodeType === 3)
                                   .map(n => n.textContent).join(''));
  return out; }"""


@pytest.fixture(scope="module")
def ran_and_restored(toolkit, kernels, tmp_path_factory):
    """The same build twice through one fresh cache: every stage run, then every stage
    restored; a report of each."""
    from nvstage.compiler.pipeline.driver import compile
    from nvstage.compiler.nvcc.options import CompileOptions
    from nvstage.report.html import write_report

    root = tmp_path_factory.mktemp("restored")
    pages = {}
    for name in ("ran", "restored"):
        keep = root / name
        build = compile(kernels / "multi.cu", CompileOptions(
            gencodes=("arch=compute_80,code=sm_80", "arch=compute_90,code=[sm_90,compute_90]"),
            stop="fatbin", output=str(keep / "multi.fatbin")), toolkit=toolkit, keep=keep,
            jobs=1, cache=root / "cache")
        run, trace = synthetic_run("scale<float>")
        pages[name] = (Path(write_report(build, keep / "report.html", toolkit=toolkit, run=run,
                                         trace=trace)), build)
    assert not any(r.cached for r in pages["ran"][1].runs)
    assert all(r.cached for r in pages["restored"][1].runs)
    return pages


@pytest.mark.parametrize("which", ["ran", "restored"])
def test_layout_fits_1400_px(ran_and_restored, which):
    path, build = ran_and_restored[which]
    with sync_playwright_chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(path.as_uri(), wait_until="load")
        page.wait_for_selector("body[data-ready='1']", timeout=10_000)
        got = page.evaluate(_LAYOUT)
        meta = page.locator("p.meta").first.inner_text()
        gantt = page.locator("svg#stage-gantt").text_content()
    scroll, client = got["page"]
    assert scroll <= client == 1400, got["page"]
    assert got["overflow"] == [], got["overflow"]
    assert got["outside"] == [], got["outside"]
    # artifact names whole: no ellipsis, each name's parts in order in its box
    assert not any("\u2026" in t for t in got["graph"])
    assert "".join(got["graph"]).count("multi.compute_90.cudafe1.stub.c") == 1
    if which == "restored":  # the restore time is called that, never the build's wall time
        assert any(k.startswith("restore time") for k in got["cards"]), got["cards"]
        assert not any(k.startswith("wall time") for k in got["cards"])
        assert "7 stages restored from the cache in" in meta
        assert "restore time" in gantt and "wall " not in gantt
    else:
        assert "wall time" in got["cards"] and "restored" not in meta


@contextmanager
def sync_playwright_chromium():
    """Debian's Chromium, headless, closed on the way out."""
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM if os.path.isfile(CHROMIUM)
                                     else shutil.which("chromium"), args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()
