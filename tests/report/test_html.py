"""nvstage report: the HTML page from a real kept build (and a run document), escaped and
self-contained."""

from __future__ import annotations

import json
import re

import pytest

EVIL = '</script><script>alert("x")</script><img src=x onerror=alert(1)>'


def synthetic_run(name: str = "saxpy"):
    """A run document and trace made by nvstage's own decomposition and trace code from fixed
    samples (no GPU here): the shape nvstage run --profile writes, numbers not measured."""
    from nvstage.run.decompose import NoiseFloor, OpSamples, decompose
    from nvstage.report.trace import chrome_trace
    from nvstage.run.results import Span, Timeline

    ops = [OpSamples(0, "h2d", "x", gpu_ns=[4000.0, 4200.0, 4100.0], nbytes=1 << 20),
           OpSamples(1, "launch", name, host_ns=[3000.0, 3100.0, 2900.0],
                     gpu_ns=[12000.0, 12500.0, 11800.0]),
           OpSamples(2, "d2h", "y", gpu_ns=[4100.0, 4000.0, 4300.0], nbytes=1 << 20)]
    dec = decompose(ops, [25000.0, 26000.0, 24500.0], NoiseFloor(500.0, 2500.0, 1500.0, 40.0),
                    "serialized")
    tl = Timeline(host=[Span(1, "launch", f"kernel {name}", 5000.0, 3000.0)],
                  gpu=[Span(0, "h2d", "x", 0.0, 4100.0), Span(1, "launch", name, 8000.0,
                                                                 12000.0),
                       Span(2, "d2h", "y", 20500.0, 4100.0)], title="synthetic")
    doc = {"schema": "nvstage.run/1", "workload": "synthetic", "mode": "serialized",
           "status": "ok", "device": {"name": "no GPU: synthetic samples"},
           "decomposition": dec.to_json(), "field_from_the_future": {"x": [1, 2]}}
    return doc, chrome_trace(tl, dec)


@pytest.fixture(scope="module")
def kept(toolkit, kernels, tmp_path_factory):
    from nvstage.compiler.nvcc.options import CompileOptions
    from nvstage.compiler.pipeline.driver import compile

    keep = tmp_path_factory.mktemp("report")
    return compile(kernels / "multi.cu", CompileOptions(
        archs=("sm_90",), stop="fatbin", output=str(keep / "multi.fatbin"), lineinfo=True),
        toolkit=toolkit, keep=keep, jobs=1)


@pytest.fixture(scope="module")
def page(kept, toolkit):
    from nvstage.report.html import gather, render

    run, trace = synthetic_run()
    return render(gather(kept, toolkit=toolkit, run=run, trace=trace))


def test_every_section_is_there(page, kept):
    for marker in ('id="stage-graph"', 'id="stage-gantt"', 'id="resources"', 'id="fatbin"',
                   'class="kview"', 'class="code-view ptx"',
                   'id="decomposition-chart"', 'id="trace-chart"', 'id="operations"'):
        assert marker in page, marker
    assert page.count('class="gantt-bar"') == len(kept.runs)
    assert page.count('class="node node-stage') == len(kept.runs)
    for k in ("block_sum", "histogram", "apply_poly", "scale&lt;float&gt;"):
        assert k in page, k
    # each artifact is named in the graph, with the stage that wrote it
    for a in kept.artifacts:
        assert a.name in page or a.name[:29] in page, a.name


def test_self_contained(page):
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "@import" not in page and "url(http" not in page
    assert "default-src 'none'" in page


def test_everything_is_escaped(kept, toolkit):
    from nvstage.report.html import gather, render

    run, _ = synthetic_run(EVIL)
    run["workload"] = EVIL
    inp = gather(kept, toolkit=toolkit, run=run, sass=False)
    inp.notes.append(EVIL)
    html = render(inp, title=EVIL)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert html.count("<script") == 2  # the data block and the page's own script
    data = re.search(r'<script type="application/json" id="nvstage-data">(.*?)</script>',
                     html, re.DOTALL).group(1)
    assert json.loads(data)["schema"] == "nvstage.report/1"


def test_without_run_the_gpu_box_says_so(kept, toolkit):
    from nvstage.report.html import gather, render

    html = render(gather(kept, toolkit=toolkit, sass=False))
    assert "not run (no --run given)" in html
    assert 'id="decomposition-chart"' not in html and 'id="run"' not in html


def test_unknown_run_layout_degrades(kept, toolkit):
    from nvstage.report.html import gather, render

    html = render(gather(kept, toolkit=toolkit, run={"schema": "nvstage.run/9", "x": 1},
                         sass=False))
    assert "the run document has no decomposition" in html
    # a run with a decomposition but no trace: the trace lane is the sequential baseline
    run, _ = synthetic_run()
    html = render(gather(kept, toolkit=toolkit, run=run, sass=False))
    assert 'id="trace-chart"' in html and "sequential baseline" in html


def test_cli_writes_the_page_and_prints_its_path(cli, workdir, kept):
    run, trace = synthetic_run()
    (workdir / "run.json").write_text(json.dumps(run))
    (workdir / "trace.json").write_text(json.dumps(trace))
    out = workdir / "r" / "report.html"
    r = cli("report", kept.keep_dir, "--run", "run.json", "--trace", "trace.json", "-o", out)
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == str(out)
    assert 'id="trace-chart"' in out.read_text()
    r = cli("report", f"{kept.keep_dir}/stages.json", "--json", "-o", out)
    doc = json.loads(r.stdout)
    assert doc["output"] == str(out) and doc["sections"]["resources"] >= 4


def test_cli_bad_inputs(cli, workdir, kept):
    (workdir / "run.json").write_text("{nope")
    r = cli("report", kept.keep_dir, "--run", "run.json", "-o", "x.html")
    assert r.exit_code == 6 and "is not a run document: not JSON" in r.stderr
    assert not (workdir / "x.html").exists()
    r = cli("report", workdir)
    assert r.exit_code == 2 and "no build manifest" in r.stderr


def test_cli_refuses_documents_of_the_wrong_kind(cli, workdir, kept):
    (workdir / "other.json").write_text('{"a": 1}')
    r = cli("report", kept.keep_dir, "--run", "other.json", "-o", "x.html")
    assert r.exit_code == 6 and "other.json is not a run document" in r.stderr
    r = cli("report", kept.keep_dir, "--trace", "other.json", "-o", "x.html")
    assert r.exit_code == 6 and "other.json is not a Chrome trace: no traceEvents" in r.stderr
    assert not (workdir / "x.html").exists()
    # a bare event array is a Chrome trace too
    _, trace = synthetic_run()
    (workdir / "events.json").write_text(json.dumps(trace["traceEvents"]))
    r = cli("report", kept.keep_dir, "--trace", "events.json", "-o", "x.html")
    assert r.exit_code == 0, r.output


def test_cli_output_that_cannot_be_written(cli, workdir, kept):
    (workdir / "d").mkdir()
    r = cli("report", kept.keep_dir, "-o", "d", "--json")
    assert r.exit_code == 2 and json.loads(r.stdout)["message"] == "-o d is a folder"
    (workdir / "f").write_text("")
    r = cli("report", kept.keep_dir, "-o", "f/report.html")
    assert r.exit_code == 2 and "cannot write the report to f/report.html" in r.stderr


def test_summary_cards_and_flagged_spills(kept, toolkit):
    from nvstage.report.html import gather, render

    inp = gather(kept, toolkit=toolkit, sass=False)
    html = render(inp)
    assert '<div class="cards" id="summary">' in html and ">kernels that spill<" in html
    assert '<nav><a href="#graph">' in html
    # a kernel that spills is flagged in its row and in the summary
    from dataclasses import replace

    inp.resources[0] = replace(inp.resources[0], spill_stores=8)
    html = render(inp)
    assert '<tr class="flagged">' in html and 'class="card bad"' in html


def test_non_finite_medians_draw_nothing():
    from nvstage.report.html import decomposition_svg

    nan = float("nan")
    assert decomposition_svg({"decomposition": {"kernel_ns": {"median": nan},
                                                "wall_ns": {"median": float("inf")}}}) is None


def test_fatbin_table_names_kernels_as_the_resources_table_does(page):
    fatbin = page[page.index('id="fatbin"'):]
    fatbin = fatbin[:fatbin.index("</table>")]
    resources = page[page.index('id="resources"'):]
    resources = resources[:resources.index("</table>")]
    for name in ("void scale&lt;float&gt;(float*, float, int)",
                 "block_sum(float const*, float*, int)"):
        assert name in fatbin and name in resources, name
    assert "_Z5scaleIfEvPT_S0_i" not in fatbin and "_Z9block_sum" not in fatbin


def test_each_source_line_sits_beside_its_sass_and_no_padding(page, kept):
    # kept is a -lineinfo build of multi.cu: the view shows multi.cu's lines, indented as
    # written, each linked (data-l) to the SASS it became
    source = open(kept.source).read().splitlines()
    line = next(n for n, text in enumerate(source, 1) if "atomicAdd" in text)
    m = re.search(rf'<div class="sl c\d[^"]*" data-l="(\d+:{line})"[^>]*>.*?'
                  rf'<span class="ln">{line}</span><span class="cd">(.*?)</span>'
                  r'<span class="ct">', page)
    assert m and _shown(m.group(2)) == source[line - 1].rstrip()
    # the atomic comes from a CUDA header's atomicAdd, inlined: it names this line as its call
    sass = re.findall(rf'<div class="ai c\d" data-l="(?:[^"]* )?{m.group(1)}(?: [^"]*)?"[^>]*>.*?'
                      r'<span class="cd">(.*?)</span></div>', page)
    from nvstage.inspect.mix import classify

    assert any(classify(_shown(t).split(" ")[0].split(".")[0]) == "atomic" for t in sass), \
        [_shown(t) for t in sass]
    assert "padding to the 128-byte boundary" in page


def _shown(fragment: str) -> str:
    """What the browser shows of an HTML fragment: tags dropped, entities read."""
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def esc_text(text: str) -> str:
    import html

    return html.escape(text, quote=True)


def test_restored_build_says_restore_time(kept, toolkit, kernels, tmp_path):
    from dataclasses import replace

    from nvstage.report.html import gather, render

    # the same record, as a build every stage of which came from the cache
    restored = replace(kept, runs=[replace(r, cached=True) for r in kept.runs])
    page = render(gather(restored, toolkit=toolkit, sass=False))
    assert "stages restored from the cache in" in page
    assert '<div class="k">restore time (every stage from the cache; no tool ran)</div>' in page
    assert '<div class="k">wall time' not in page
    assert "(cached)" not in page and "to restore" in page
    ran = replace(kept, runs=[replace(r, cached=False) for r in kept.runs])
    fresh = render(gather(ran, toolkit=toolkit, sass=False))
    assert '<div class="k">wall time</div>' in fresh and "restore" not in fresh
    some = replace(kept, runs=[replace(r, cached=n < 2) for n, r in enumerate(kept.runs)])
    mixed = render(gather(some, toolkit=toolkit, sass=False))
    assert f'<div class="k">wall time (2 of {len(kept.runs)} stages from the cache)</div>' \
        in mixed
