"""A build record is someone else's document (a CI artifact of their pull request): what report,
check and show print of it is text, never a terminal's escape sequence, and the page never
carries its markup."""

from __future__ import annotations

import json

import pytest

from nvstage.cli.main import run
from nvstage.compiler.buildlog import log as buildlog

# OSC 52 (writes the reader's clipboard), a colour, a carriage return that overwrites a line.
ESC = "\x1b]52;c;SGVsbG8=\x07\x1b[31mRED\x1b[0m\rOVER\x9b2J"
TAG = '"><img src=x onerror=alert(1)></script><script>alert(2)</script>'


@pytest.fixture(scope="module")
def entry(toolkit, tmp_path_factory):
    """One real entry: a kernel compiled through the launcher (its manifest, ptxas' report)."""
    import os

    folder = tmp_path_factory.mktemp("one-unit")
    (folder / "k.cu").write_text("__global__ void k(float* x) { x[threadIdx.x] *= 2; }\n")
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        assert run([toolkit.nvcc, "-c", "k.cu", "-o", "k.o", "-arch=sm_90"]) == 0
    finally:
        os.chdir(cwd)
    (path,) = (folder / buildlog.FOLDER / "tu").glob("*.json")
    return json.loads(path.read_text())


def _crafted(base: dict, folder, text: str):
    rec = folder / "rec"
    (rec / "tu").mkdir(parents=True)
    (rec / buildlog.MARK).write_text("x\n")
    for n, status in enumerate(("ok", "fallback")):
        doc = json.loads(json.dumps(base))
        b = doc["build"]
        b["source"], b["output"] = f"k{n}{text}.cu", f"k{n}{text}.o"
        for s in b["stages"]:
            if s.get("resources"):
                s["resources"] = s["resources"].replace("_Z1kPf", "_Z1kPf" + text)
            for f in s.get("cubin_figures") or []:  # the figures read from the cubin
                f["kernel"] = f["kernel"].replace("_Z1kPf", "_Z1kPf" + text)
        doc.update(argv=["nvcc", text, "-c", f"k{n}{text}.cu"], reason=text, status=status,
                   cwd="/x" + text, started=doc["started"] + n)
        (rec / "tu" / f"0000000000000000{n}-1-{text[:3]}.json").write_text(json.dumps(doc))
    (folder / "budgets.toml").write_text("[budgets]\nmax_registers = 2\n")
    return rec


def test_escape_sequences_in_a_record_never_reach_the_terminal(cli, entry, tmp_path):
    rec = _crafted(entry, tmp_path, ESC)
    outs = [cli("report", rec, "-o", tmp_path / "r.html", "--build-trace", tmp_path / "t.json"),
            cli("report", rec, "-o", tmp_path / "r2.html", "--json"),
            cli("check", rec, "--config", tmp_path / "budgets.toml"),
            cli("check", rec, "--config", tmp_path / "budgets.toml", "--format", "github"),
            cli("show", rec, "--kernel", "k"), cli("show", rec, "--kernel", "k", "--tu", "x")]
    assert [r.exit_code for r in outs] == [0, 0, 1, 1, 2, 2], [r.output for r in outs]
    for r in outs:
        assert not any(c in r.output for c in "\x1b\x07\r\x9b"), r.output
    assert "_Z1kPf\\x1b]52" in outs[3].stdout  # shown, as text
    for name in ("r.html", "t.json"):
        assert "\x1b" not in (tmp_path / name).read_text()


def test_markup_in_a_record_is_text_on_the_page(cli, entry, tmp_path):
    rec = _crafted(entry, tmp_path, TAG)
    r = cli("report", rec, "-o", tmp_path / "r.html")
    assert r.exit_code == 0, r.output
    page = (tmp_path / "r.html").read_text()
    assert "<img" not in page and "<script>alert" not in page and "onerror=alert" in page


def test_rows_for_commands_that_all_overlap_take_n_log_n():
    import random

    from nvstage.inspect.build_view import first_free_rows

    # 200k commands at once (a crafted record): one row each, in well under a second (the
    # first-fit scan this replaced took minutes).
    assert first_free_rows([(0.0, 1.0)] * 200_000) == list(range(200_000))

    def first_fit(spans):  # the layout's definition
        ends, rows = [], []
        for start, end in spans:
            row = next((r for r, e in enumerate(ends) if e <= start + 1e-9), len(ends))
            ends[row:row + 1] = [end]
            rows.append(row)
        return rows

    rng = random.Random(7)
    for _ in range(500):
        starts = sorted(rng.choice([rng.random() * 5, float(rng.randint(0, 3))])
                        for _ in range(rng.randint(0, 25)))
        spans = [(s, s + rng.choice([0.0, rng.random() * 2, 1.0])) for s in starts]
        assert first_free_rows(spans) == first_fit(spans)


def test_parallel_stage_rows_never_share_a_commands_thread():
    from nvstage.inspect.build_view import BuildView, StageTime, TranslationUnit
    from nvstage.report.build_trace import PARALLEL_TID, chrome_build_trace

    units = [TranslationUnit(i, None, f"k{i}.cu", f"k{i}.o", "ok", None, False, 0.0, 2.0, 1,
                             "nvcc") for i in range(PARALLEL_TID + 2)]
    for u in units:
        u.lane = u.index
    units[0].stages = [StageTime(n, "cicc", None, 0.0, 1.0, False, True) for n in range(2)]
    trace = chrome_build_trace(BuildView("rec", 0.0, units, [], 256))
    commands = {e["tid"] for e in trace["traceEvents"] if e.get("cat", "").startswith("command")}
    stages = {e["tid"] for e in trace["traceEvents"] if e.get("cat", "").startswith("stage")}
    assert len(stages) == 2 and not stages - {1} & commands


def test_a_record_past_its_byte_budget_reads_the_newest_entries(tmp_path, monkeypatch):
    rec = tmp_path / "rec"
    (rec / "tu").mkdir(parents=True)
    (rec / buildlog.MARK).write_text("x\n")
    for i in range(6):
        doc = {"schema": buildlog.SCHEMA, "argv": ["nvcc", "-c", f"k{i}.cu", "-o", f"k{i}.o"],
               "cwd": "/x", "started": 1e9 + i, "seconds": 1.0, "status": "fallback",
               "exit_code": 0, "pid": 1, "reason": "r" * 900, "hit": False, "build": None}
        (rec / "tu" / f"{i:017d}-1-0.json").write_text(json.dumps(doc))
    monkeypatch.setattr(buildlog, "MAX_RECORD_BYTES", 3500)  # three entries' worth
    r = buildlog.load_build_log(rec)
    assert [e.argv[2] for e in r.entries] == ["k3.cu", "k4.cu", "k5.cu"]
    assert r.skipped[-1].startswith("3 older entries")
