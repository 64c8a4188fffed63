"""The whole build's page (report/build_html.py) and its Perfetto trace (report/build_trace.py):
what the page holds, that strings from the record are escaped, that the trace nests, and the
page in headless Chromium (as tests/report/test_html_browser.py opens the single-build page):
it renders, the kernel table sorts, and nothing scrolls sideways at 1400 px."""

from __future__ import annotations

import json
import contextlib
import os
import re
import shutil
from pathlib import Path

import pytest

from nvstage.compiler.buildlog import log as buildlog
from nvstage.inspect.build_view import load_build_view
from nvstage.report.build_html import _Axis, render_build, write_build_report
from nvstage.report.build_trace import chrome_build_trace

CHROMIUM = os.environ.get("NVSTAGE_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def page(cuproject_record, tmp_path_factory):
    out = tmp_path_factory.mktemp("build-page")
    report = write_build_report(cuproject_record[1], out / "build.html",
                                build_trace=out / "build-trace.json")
    return report


def test_the_page_holds_every_unit_stage_and_kernel(page):
    html = Path(page.path).read_text()
    view = page.view
    assert html.startswith("<!DOCTYPE html>") and "nvstage build report" in html
    for u in view.units:
        assert f'id="unit-{u.index}"' in html and u.name in html
    # The timeline is the last build's: one bar per command and one per stage that ran;
    # the tables hold every kernel of the project.
    assert len(view.last_units) == 4 and len(view.units) == 12
    assert html.count('class="unit-bar"') == len(view.last_units)
    assert html.count('class="stage-bar"') == sum(len(u.stages) for u in view.last_units)
    assert len(re.findall(r'<tr[^>]*>(?:(?!</tr>).)*class="wrap kname"', html)) == 8
    for table in ("build-timeline", "slowest-units", "slowest-stages", "stage-kinds", "units",
                  "kernels", "builds", "rebuilt", "kernels-moved"):
        assert f'id="{table}"' in html, table
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html


def test_the_trace_nests_for_perfetto(page):
    trace = json.loads(Path(page.trace).read_text())
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    units = [e for e in events if e["cat"].startswith("command")]
    stages = [e for e in events if e["cat"].startswith("stage")]
    # The last build's: every stage that ran is one event (nvcc's own cleanup stage among
    # them).
    assert len(units) == 4 and len(stages) == sum(len(u.stages) for u in page.view.last_units)
    assert all(e["pid"] == 1 and e["dur"] >= 0 for e in events)
    # On each thread, any two events are either disjoint or one holds the other.
    by_tid: dict[int, list[dict]] = {}
    for e in events:
        by_tid.setdefault(e["tid"], []).append(e)
    for tid, evs in by_tid.items():
        for a in evs:
            for b in evs:
                if a is b:
                    continue
                a0, a1, b0, b1 = a["ts"], a["ts"] + a["dur"], b["ts"], b["ts"] + b["dur"]
                disjoint = a1 <= b0 + 0.01 or b1 <= a0 + 0.01
                nested = (a0 <= b0 + 0.01 and b1 <= a1 + 0.01) or \
                    (b0 <= a0 + 0.01 and a1 <= b1 + 0.01)
                assert disjoint or nested, (tid, a["name"], b["name"])
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert "slot 1" in names


def test_strings_from_the_record_are_escaped(cuproject_record, tmp_path):
    rec = tmp_path / "rec"
    shutil.copytree(cuproject_record[1] / buildlog.FOLDER, rec)
    evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"
    entry = buildlog.Entry(["/usr/bin/nvcc", "-dlink", evil, "-o", str(tmp_path / "e.o")],
                           str(tmp_path), buildlog.now(), 0.1, "fallback", 0, 1,
                           reason=f"nvstage: {evil}")
    buildlog.add(entry, str(tmp_path), {buildlog.ENV: str(rec)})
    html = render_build(load_build_view(rec), title=evil)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in html
    assert html.count("<script") == 2  # the data block and the page's own script


def test_long_idle_stretches_are_drawn_short():
    class U:
        def __init__(self, start, seconds):
            self.start, self.seconds, self.end = start, seconds, start + seconds

    units = [U(0, 10), U(5, 10), U(86_400, 10)]  # a build run, then another a day later
    axis = _Axis(units, 1000)
    assert len(axis.breaks) == 1 and axis.breaks[0] == (15, 86_400)
    assert axis.x(86_410) == pytest.approx(1000)
    assert axis.x(15) < 700 and axis.x(86_400) - axis.x(15) < 50
    assert axis.x(0) == 0 and axis.x(7.5) == pytest.approx(axis.x(15) / 2)


# -- in a browser ---------------------------------------------------------------------------

def _chromium():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)) and \
            not shutil.which("chromium"):
        pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)")
    return sync_api, CHROMIUM if os.path.isfile(CHROMIUM) else shutil.which("chromium")


@contextlib.contextmanager
def opened(path, errors: list, requests: list):
    """A page open in headless Chromium at 1400 x 1000 and ready (``data-ready``): its console
    errors and page errors into ``errors``, every URL it asks for into ``requests``."""
    sync_api, chromium = _chromium()
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 1000})
            tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            tab.on("pageerror", lambda e: errors.append(str(e)))
            tab.on("request", lambda r: requests.append(r.url))
            tab.goto(Path(path).as_uri(), wait_until="load")
            tab.wait_for_selector("body[data-ready='1']", timeout=10_000)
            yield tab
        finally:
            browser.close()


def _column(page, table: str, header: str) -> list[str]:
    return page.evaluate(
        """([table, header]) => {
             const t = document.getElementById(table);
             const col = Array.from(t.tHead.rows[0].cells).findIndex(
                 c => c.textContent.trim() === header);
             return Array.from(t.tBodies[0].rows).map(r => r.cells[col].textContent.trim());
           }""", [table, header])


def test_the_page_in_chromium(page, tmp_path):
    errors, requests = [], []
    view = page.view
    with opened(page.path, errors, requests) as tab:
        assert tab.get_attribute("body", "data-units") == "12"
        box = tab.locator("svg#build-timeline").bounding_box()
        assert box and box["width"] > 600 and box["height"] > 40
        assert tab.locator("svg#build-timeline rect.unit-bar").count() == 4
        assert tab.locator("svg#build-timeline rect.stage-bar").count() == \
            sum(len(u.stages) for u in view.last_units)
        assert tab.locator("table#kernels tbody tr").count() == len(view.kernels)
        # Sorting: registers, largest first, then smallest first; names A to Z.
        regs = sorted((k.record.registers for k in view.kernels), reverse=True)
        tab.locator("table#kernels th", has_text="regs").click()
        assert [int(v) for v in _column(tab, "kernels", "regs")] == regs
        tab.locator("table#kernels th", has_text="regs").click()
        assert [int(v) for v in _column(tab, "kernels", "regs")] == regs[::-1]
        tab.locator("table#kernels th", has_text="kernel").first.click()
        names = _column(tab, "kernels", "kernel")
        assert names == sorted(names, key=str.lower)
        # A unit opens on click and shows its stages.
        first = tab.locator("details.unit-stages").first
        first.locator("summary").click()
        assert first.locator("table.stages tbody tr").count() == len(view.units[0].stages)
        # Nothing scrolls sideways at 1400 px: not the page, not the kernel table.
        widths = tab.evaluate("""() => {
            const f = document.getElementById('kernels').parentElement;
            return [document.documentElement.scrollWidth, window.innerWidth,
                    f.scrollWidth, f.clientWidth]; }""")
        assert widths[0] <= widths[1] and widths[2] <= widths[3] + 1, widths
        shot = tmp_path / "build.png"
        tab.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    assert errors == []
    assert all(u.startswith(("file:", "data:", "about:")) for u in requests), requests


@pytest.mark.parametrize("width", [1000, 1400])
def test_a_kernel_row_opens_its_view(page, tmp_path, width):
    """Every kernel row links to its source and SASS, read from the unit's object: app's
    units were built with -lineinfo (their source beside the SASS), devlib's without (one
    line saying so, and the SASS with live registers)."""
    sync_api, chromium = _chromium()
    view = page.view
    html = Path(page.path).read_text()
    assert html.count('class="kv-link"') == len(view.kernels) == html.count('class="kview"')
    errors: list = []
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        try:
            tab = browser.new_page(viewport={"width": width, "height": 1000})
            tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            tab.on("pageerror", lambda e: errors.append(str(e)))
            tab.goto(Path(page.path).as_uri(), wait_until="load")
            tab.wait_for_selector("body[data-ready='1']", timeout=10_000)
            assert tab.locator("details.kview[open]").count() == 0
            names = [k.record.name for k in view.kernels]
            lined = names.index(next(n for n in names if n.startswith("block_sum")))
            plain = names.index(next(n for n in names if n.startswith("squares")))
            for n in (lined, plain):
                link = tab.locator("table#kernels a.kv-link").nth(n)
                assert link.get_attribute("href") == f"#kv-{n}"
                link.click()
                # The page opens it on hashchange, an event after the click: on a loaded
                # machine, later than the next line.
                tab.wait_for_selector(f"details.kview#kv-{n}[open]", timeout=10_000)
                target = tab.locator(f"details.kview#kv-{n}")
                assert target.get_attribute("open") is not None
                assert target.locator(".kv-sass .ai").first.is_visible()
                assert target.locator(".kv-sass .lc").first.inner_text().strip().isdigit()
                box = target.bounding_box()
                assert box and -2 <= box["y"] < 200  # scrolled to it
            lined_view = tab.locator(f"details.kview#kv-{lined}")
            assert lined_view.locator(".kv-file").inner_text() == "src/src/reduce.cu"
            assert lined_view.locator(".kv-src .sl[data-l]").count() > 3
            assert "no line info" in tab.locator(f"#kv-{plain}").inner_text()
            widths = tab.evaluate("() => [document.documentElement.scrollWidth, "
                                  "window.innerWidth]")
            assert widths[0] <= widths[1], widths
            shot = tmp_path / f"build-kernel-{width}.png"
            lined_view.screenshot(path=str(shot))
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000 and errors == []


def test_stages_that_ran_at_once_get_rows_of_their_own():
    from nvstage.inspect.build_view import BuildView, StageTime, TranslationUnit

    stages = [StageTime(1, "cicc", "compute_80", 0.0, 2.0, False, True),
              StageTime(2, "cicc", "compute_90", 0.5, 2.0, False, True),  # -j2: at once
              StageTime(3, "ptxas", "sm_80", 2.0, 0.5, True, True)]
    unit = TranslationUnit(0, None, "/p/a.cu", "/p/a.o", "ok", None, False, 0.0, 3.0, 9,
                           "nvcc -c a.cu", stages)
    view = BuildView("/p/.nvstage-build", 0.0, [unit], [], 256)
    events = [e for e in chrome_build_trace(view)["traceEvents"] if e["ph"] == "X"]
    tids = {e["name"]: e["tid"] for e in events}
    assert tids["a.cu"] == tids["cicc (compute_80)"] == tids["ptxas (sm_80)"] == 1
    assert tids["cicc (compute_90)"] == 10_001
    cached = next(e for e in events if e["name"] == "ptxas (sm_80)")
    assert "cached" in cached["cat"] and cached["args"]["cached"] is True
    html = render_build(view)
    assert html.count('class="stage-bar"') == 3 and "opacity=0.45" in html
