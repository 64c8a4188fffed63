"""The source <-> SASS view in headless Chromium (as test_html_browser.py drives the report), at
1000 and 1400 px: no code is clipped sideways (nothing scrolls sideways: not the page, not a
code pane), hovering or clicking a source line lights up its SASS and the SASS line lights up
its source line (read from the DOM's classes), the PTX tab links the same way. Built from
the test kernel lineview-stencil.cu (a loop, shared memory, two levels of inlining) and the
bundled kernels/fusion_chain.cu (fused, fused_wide), and tests/data/layernorm_cg.cu (a
warp-per-row layer norm with cooperative groups: its cg::reduce lines have no code of their
own, all of it inlined from <cooperative_groups.h>), each with -lineinfo for sm_90.

Screenshots go to a temporary folder, or to $NVSTAGE_SCREENSHOTS to be looked at.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("NVSTAGE_CHROMIUM", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
CAPTURED = Path(__file__).parents[1] / "data" / "captured"
LAYERNORM = Path(__file__).parents[1] / "data" / "layernorm_cg.cu"

sync_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is not installed (pip install playwright)")
if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)) and \
        not shutil.which("chromium"):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install -y chromium)",
                allow_module_level=True)


@pytest.fixture(scope="module")
def pages(toolkit, kernels, tmp_path_factory):
    """report.html of each build: {"stencil": path, "fusion": path, "layernorm": path}."""
    import nvstage
    from nvstage.report.html import write_report

    root = tmp_path_factory.mktemp("lines-view")
    (root / "stencil.cu").write_text((CAPTURED / "lineview-stencil.cu").read_text())
    shutil.copy(kernels / "fusion_chain.cu", root / "fusion_chain.cu")
    shutil.copy(LAYERNORM, root / "layernorm_cg.cu")
    out = {}
    for name, src in (("stencil", "stencil.cu"), ("fusion", "fusion_chain.cu"),
                      ("layernorm", "layernorm_cg.cu")):
        build = nvstage.compile(root / src, nvstage.CompileOptions(
            archs=("sm_90",), lineinfo=True, stop="cubin", output=str(root / f"{name}.cubin")),
            keep=root / f"{name}.nvstage", cwd=root, toolkit=toolkit)
        out[name] = Path(write_report(build, root / f"{name}.html", toolkit=toolkit))
    return out


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM if os.path.isfile(CHROMIUM)
                               else shutil.which("chromium"), args=ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def _shots(tmp_path) -> Path:
    folder = Path(os.environ.get("NVSTAGE_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _open(browser, path: Path, width: int, errors: list):
    tab = browser.new_page(viewport={"width": width, "height": 1000})
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.goto(path.as_uri(), wait_until="load")
    tab.wait_for_selector("body[data-ready='1']", timeout=10_000)
    return tab


# Sideways overflow of the page, and of every code pane and row (a row wider than its pane
# would be clipped: the panes hide their sideways overflow).
_SIDEWAYS = """() => {
  const d = document.documentElement, out = {page: [d.scrollWidth, d.clientWidth], clipped: []};
  document.querySelectorAll('details.kview[open] .kv-code:not([hidden])').forEach(c => {
    if (c.scrollWidth > c.clientWidth + 1) out.clipped.push(['pane', c.scrollWidth,
                                                            c.clientWidth]);
    c.querySelectorAll('.cd').forEach(e => { if (e.scrollWidth > e.clientWidth + 1)
      out.clipped.push([e.textContent.slice(0, 60), e.scrollWidth, e.clientWidth]); });
  });
  return out; }"""


def _classes(view, selector: str) -> list[list[str]]:
    return view.locator(selector).evaluate_all("els => els.map(e => Array.from(e.classList))")


@pytest.mark.parametrize("width", [1000, 1400])
def test_source_and_sass_linked_both_ways_without_clipping(pages, browser, width, tmp_path):
    errors: list = []
    tab = _open(browser, pages["stencil"], width, errors)
    view = tab.locator("details.kview#kv-0")
    assert view.get_attribute("open") is not None  # the first kernel opens with the page
    got = tab.evaluate(_SIDEWAYS)
    assert got["page"][0] <= got["page"][1] == width, got["page"]
    assert got["clipped"] == [], got["clipped"]
    # The loop body, line 22: hover it and its SASS lights up (with clamp01's and smooth's,
    # inlined into it), and nothing else does.
    line = view.locator('.kv-src .sl[data-l="0:22"]')
    assert "for" not in line.inner_text() and "clamp01" in line.inner_text()
    line.hover()
    sass = view.locator('.kv-sass .ai[data-l~="0:22"]')
    n = sass.count()
    own = view.locator('.kv-sass .ai[data-l="0:22"]').count()
    assert n > own > 0 and all("hl" in c for c in _classes(view, '.kv-sass .ai[data-l~="0:22"]'))
    assert view.locator(".kv-sass .ai.hl").count() == n
    assert "hl" in line.get_attribute("class")
    # A click pins it; the SASS pane scrolls to the first of them.
    line.click()
    assert view.locator(".kv-sass .ai.sel").count() == n
    assert sass.first.is_visible()
    shots = _shots(tmp_path)
    tab.locator("#code").screenshot(path=str(shots / f"stencil-{width}.png"))
    # The other way: a SASS instruction of line 4 (smooth, inlined into clamp01 at line 8,
    # inlined into the kernel at 22) lights its line and the two calls it came through.
    ins = view.locator('.kv-sass .ai[data-l^="0:4 "]').first
    assert ins.get_attribute("data-l") == "0:4 0:8 0:22"
    ins.scroll_into_view_if_needed()
    ins.hover()
    src4 = view.locator('.kv-src .sl[data-l="0:4"]')
    assert "hl" in src4.get_attribute("class") and "0.25f * a" in src4.inner_text()
    lit = view.locator(".kv-src .sl.hl").evaluate_all("e => e.map(x => x.dataset.l)")
    assert lit == ["0:4", "0:8", "0:22"]
    ins.click()
    assert "sel" in src4.get_attribute("class")
    assert view.locator(".kv-sass .ai.sel").count() == \
        view.locator('.kv-sass .ai[data-l~="0:4"]').count()
    # The PTX tab: its statements link to the same lines (line 9 has PTX and no SASS).
    view.locator('.kv-tab[data-pane="ptx"]').click()
    assert view.locator(".kv-ptx").is_visible() and not view.locator(".kv-sass").is_visible()
    view.locator('.kv-src .sl[data-l="0:9"]').hover()
    assert view.locator(".kv-ptx .pi.hl").count() == 5
    assert tab.evaluate(_SIDEWAYS)["clipped"] == []
    tab.locator("#code").screenshot(path=str(shots / f"stencil-ptx-{width}.png"))
    tab.close()
    assert errors == []


@pytest.mark.parametrize("width", [1000, 1400])
def test_a_wide_fused_kernel_fits(pages, browser, width, tmp_path):
    """fused_wide: 1,500 instructions and 80-odd live registers; the panes scroll inside."""
    errors: list = []
    tab = _open(browser, pages["fusion"], width, errors)
    names = tab.locator("details.kview summary .kv-name").all_inner_texts()
    wide = names.index("fused_wide(float const*, float const*, float*, float, int)")
    view = tab.locator(f"details.kview#kv-{wide}")
    if view.get_attribute("open") is None:
        view.locator("summary").click()
    got = tab.evaluate(_SIDEWAYS)
    assert got["page"][0] <= got["page"][1] == width and got["clipped"] == [], got
    pane = view.locator(".kv-sass")
    sizes = pane.evaluate("e => [e.scrollHeight, e.clientHeight]")
    assert sizes[0] > sizes[1] * 2  # it scrolls inside itself, the page does not grow
    line = view.locator('.kv-src .sl.peak').first
    line.click()
    assert view.locator(".kv-sass .ai.sel").count() == \
        view.locator(f'.kv-sass .ai[data-l~="{line.get_attribute("data-l")}"]').count() > 0
    view.screenshot(path=str(_shots(tmp_path) / f"fused_wide-{width}.png"))
    tab.close()
    assert errors == []


@pytest.mark.parametrize("width", [1000, 1400])
def test_a_call_line_whose_code_is_all_inlined_lights_its_instructions(pages, browser, width,
                                                                       tmp_path):
    """``sum = cg::reduce(warp, sum, cg::plus<float>{});``: its 5 SHFL and 5 FADD come from
    <cooperative_groups.h>, none from the line itself; hovering the line lights them all (and
    nothing else), and the frames they came through open beneath it."""
    errors: list = []
    tab = _open(browser, pages["layernorm"], width, errors)
    names = tab.locator("details.kview summary .kv-name").all_inner_texts()
    n = next(i for i, x in enumerate(names) if x.startswith("layernorm_warp("))
    view = tab.locator(f"details.kview#kv-{n}")
    if view.get_attribute("open") is None:
        view.locator("summary").first.click()
    line = view.locator(".kv-src .sl", has_text="cg::reduce").first
    key = line.get_attribute("data-l")
    assert key and line.locator(".ct").inner_text() == "10"
    line.scroll_into_view_if_needed()
    line.hover()
    lit = view.locator(".kv-sass .ai.hl")
    ops = sorted(t.split()[0].split(".")[0] for t in lit.locator(".cd").all_inner_texts())
    assert ops == ["FADD"] * 5 + ["SHFL"] * 5
    assert lit.count() == view.locator(f'.kv-sass .ai[data-l~="{key}"]').count()
    assert "hl" in line.get_attribute("class")
    # coloured as the line: the instructions belong to it
    colour = next(c for c in line.get_attribute("class").split() if re.fullmatch(r"c\d", c))
    assert all(colour in c for c in _classes(view, ".kv-sass .ai.hl"))
    # the frames, closed, then opened: the include names, not the wheel's paths
    frames = line.locator("xpath=following-sibling::*[1]")
    assert frames.evaluate("e => e.tagName") == "DETAILS" and not frames.evaluate("e => e.open")
    frames.locator("summary").click()
    text = frames.inner_text()
    assert "<cooperative_groups/details/reduce.h>" in text and "site-packages" not in text
    got = tab.evaluate(_SIDEWAYS)
    assert got["page"][0] <= got["page"][1] == width and got["clipped"] == [], got
    # the PTX tab: its statements inlined from the reduction are the line's too, its colour
    view.locator('.kv-tab[data-pane="ptx"]').click()
    line.hover()
    ptx = view.locator(".kv-ptx .pi.hl")
    assert ptx.count() > 0 and all(colour in c for c in _classes(view, ".kv-ptx .pi.hl"))
    assert any("shfl.sync" in t for t in ptx.locator(".cd").all_inner_texts())
    view.locator('.kv-tab[data-pane="sass"]').click()
    line.click()  # pinned: the SASS pane scrolls to them
    assert view.locator(".kv-sass .ai.sel").count() == 10
    assert view.locator(".kv-sass .ai.sel").first.is_visible()
    view.screenshot(path=str(_shots(tmp_path) / f"layernorm-reduce-{width}.png"))
    tab.close()
    assert errors == []


def test_a_link_with_a_malformed_hash_opens_the_page_without_an_error(pages, browser):
    """``report.html#%E0%A4%A``: decodeURIComponent threw (URIError) in the script that opens
    a kernel's view from the link."""
    errors: list = []
    tab = browser.new_page(viewport={"width": 1000, "height": 1000})
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.goto(pages["stencil"].as_uri() + "#%E0%A4%A", wait_until="load")
    tab.wait_for_selector("body[data-ready='1']", timeout=10_000)
    tab.close()
    assert not errors
