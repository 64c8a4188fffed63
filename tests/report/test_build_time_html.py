"""The build page's compile-time section (report/build_time_html.py): on a real traced build of
kernels/templates.cu (NVSTAGE_TIME_TRACE=1 through the launcher) the page holds show --time's
tables with its figures, from the trace and, once the trace is gone, from the entry's summary;
a build nothing traced has no section (and no folder walked); strings from traces are escaped;
in Chromium the section renders and its tables sort, with nothing fetched."""

from __future__ import annotations

import html as html_text
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from nvstage import proc
from nvstage.compiler.buildlog import log as buildlog
from nvstage.inspect.build_view import load_build_view
from nvstage.report.build_html import write_build_report
from nvstage.report.build_time_html import compile_time_section, read_compile_time

from tests.compiler.launcher.test_launcher_bytes import _launcher
from tests.report.test_build_html import _column, opened

WORDS = ["-c", "templates.cu", "-arch=sm_90"]
TABLES = ("time-tools", "time-units", "time-headers", "time-template-sets", "time-templates",
          "time-nvvm", "time-ptxas")


def _build(toolkit, kernels, root: Path, env: dict) -> Path:
    shutil.copy(kernels / "templates.cu", root)
    cp = proc.run([*_launcher(), toolkit.nvcc, *WORDS, "-o", "k.o"], cwd=root,
                  env={**os.environ, "NVSTAGE_CACHE": "0", **env}, timeout=600)
    assert cp.returncode == 0, cp.stderr
    return root


@pytest.fixture(scope="module")
def traced(toolkit, kernels, tmp_path_factory):
    return _build(toolkit, kernels, tmp_path_factory.mktemp("time-page"),
                  {"NVSTAGE_TIME_TRACE": "1"})


def _rows(html: str, table: str) -> list[list[str]]:
    body = re.search(rf'<table id="{table}".*?<tbody>(.*?)</tbody>', html, re.S).group(1)
    cells = (re.findall(r"<td[^>]*>(.*?)</td>", r, re.S)
             for r in re.findall(r"<tr>(.*?)</tr>", body, re.S))
    return [[html_text.unescape(re.sub(r"<[^>]+>", "", c)) for c in row] for row in cells]


def test_the_page_holds_show_times_tables(traced, cli, tmp_path):
    report = write_build_report(traced, tmp_path / "b.html", code=False)
    html = Path(report.path).read_text()
    assert '<section id="compile-time">' in html and 'href="#compile-time"' in html
    for table in TABLES:
        assert f'id="{table}"' in html, table
    shown = json.loads(cli("show", traced, "--time", "--json").stdout)
    headers = _rows(html, "time-headers")
    assert len(headers) == len(shown["headers"]) == 10
    # Same rows, same figures (ms, as show prints them).
    for row, h in zip(headers, shown["headers"]):
        assert h["path"].endswith(row[1].removeprefix("..."))
        assert row[2] == f"{h['inclusive_seconds'] * 1e3:.1f}" and row[4] == str(h["parses"])
    sets = _rows(html, "time-template-sets")
    assert [r[0] for r in sets] == [s["name"] for s in shown["template_sets"]]
    assert [r[0] for r in _rows(html, "time-nvvm")] == \
        [f["demangled"] for f in shown["functions_nvvm"]]
    assert "block_sum(float const*, float*, int)" in html  # demangled
    (unit,) = _rows(html, "time-units")
    assert unit[0] == "templates.cu" and unit[1] == "compute_90" and unit[-1] == "trace"
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html


def test_the_page_reads_a_gone_trace_from_its_summary(traced, tmp_path):
    copy = tmp_path / "copy"  # a copied build folder keeps its build log's traces
    shutil.copytree(traced, copy)
    before, _ = read_compile_time(load_build_view(copy))
    for trace in (copy / buildlog.FOLDER / "traces").iterdir():
        trace.unlink()
    after, note = read_compile_time(load_build_view(copy))
    assert note is None and after["from_summaries"] == 1
    assert after["work"] == before["work"]
    assert [h["path"] for h in after["headers"]] == [h["path"] for h in before["headers"]]
    html = Path(write_build_report(copy, tmp_path / "b.html", code=False).path).read_text()
    assert "read from the summary its build log entry keeps" in html
    assert _rows(html, "time-units")[0][-1] == "summary"


def test_an_untraced_build_has_no_section(toolkit, kernels, tmp_path):
    root = _build(toolkit, kernels, tmp_path, {})
    (root / "stray.json").write_text('{"traceEvents": []}')  # never walked for: no trace asked
    assert read_compile_time(load_build_view(root)) == (None, None)
    html = Path(write_build_report(root, tmp_path / "b.html", code=False).path).read_text()
    assert 'id="compile-time"' not in html and "#compile-time" not in html


def test_strings_from_traces_are_escaped():
    evil = "</script><script>alert(1)</script><img src=x onerror=alert(2)>"
    cost = {"seconds": 0.001, "count": 1}
    doc = {"traces": 1, "arch_passes": 1, "from_summaries": 1,
           "work": {"headers_parsed": 1, "distinct_headers": 1, "instantiations": 1,
                    "functions_optimised": 1, "entries_assembled": 1},
           "tools": {evil: cost},
           "units": [{"unit": evil, "trace": evil, "from": "summary", "archs": [evil],
                      "front_end_seconds": 0.1, "tools": {"cicc": 0.1},
                      "work": {"headers": 1, "instantiations": 1, "functions": 1}}],
           "headers": [{"path": f"/inc/{evil}.h", "inclusive_seconds": 0.1,
                        "exclusive_seconds": 0.1, "parses": 1, "units": 1,
                        "chain": [evil, f"/inc/{evil}.h"]}],
           "template_sets": [{"name": evil, **cost}], "templates": [{"name": evil, **cost}],
           "functions_nvvm": [{"name": evil, "demangled": evil, **cost}],
           "functions_ptxas": [{"name": evil, **cost}],
           "advice": [{"rule": evil, "subject": evil, "evidence": evil, "suggestion": evil}],
           "notes": [evil]}
    html = compile_time_section(doc)
    assert "<script" not in html and "<img" not in html
    assert html.count("&lt;/script&gt;&lt;script&gt;alert(1)") >= 10


def test_the_section_in_chromium(traced, tmp_path):
    report = write_build_report(traced, tmp_path / "b.html", code=False)
    errors, requests = [], []
    with opened(report.path, errors, requests) as tab:
        assert tab.locator("section#compile-time table").count() == len(TABLES)
        incl = [float(v) for v in _column(tab, "time-headers", "incl")]
        assert incl == sorted(incl, reverse=True) and len(incl) == 10
        tab.locator("table#time-headers th", has_text=re.compile("^incl$")).click()
        tab.locator("table#time-headers th", has_text=re.compile("^incl$")).click()
        assert [float(v) for v in _column(tab, "time-headers", "incl")] == sorted(incl)
        widths = tab.evaluate("""() => [document.documentElement.scrollWidth,
                                        window.innerWidth]""")
        assert widths[0] <= widths[1], widths
        tab.locator("section#compile-time").screenshot(path=str(tmp_path / "time.png"))
    assert errors == []
    assert all(u.startswith(("file:", "data:", "about:")) for u in requests), requests
