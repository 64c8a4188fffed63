"""A traced unit's build log entry keeps its trace's file and a bounded summary (the driver's
``Tracer.record``, in the manifest the launcher writes into the entry), for nvstage's own trace
(NVSTAGE_TIME_TRACE=1) and the user's (-fdevice-time-trace -); a command answered whole from
the cache keeps the summary of the build that made it; ``show BUILD --time`` has the unit's
figures from the summary once its trace is gone. Real builds of kernels/templates.cu."""

from __future__ import annotations

import json
import os
import shutil
import zlib

import pytest

from nvstage import proc
from nvstage.compiler.buildlog import log as buildlog
from nvstage.inspect.compile_time import summarize

from tests.compiler.launcher.test_launcher_bytes import _launcher
from tests.compiler.nvcc.test_time_trace_perfetto import check_file

WORDS = ["-c", "templates.cu", "-arch=sm_90"]


@pytest.fixture(scope="module")
def traced(toolkit, kernels, tmp_path_factory):
    """A build folder: k.o traced by the setting (built, then answered whole from the cache),
    u.o by the user's option; a cache of its own (no stage restored from another test's)."""
    root = tmp_path_factory.mktemp("traced-log")
    shutil.copy(kernels / "templates.cu", root)
    env = {**os.environ, "NVSTAGE_CACHE_DIR": str(root / "cache"),
           "NVSTAGE_LAUNCHER_VERBOSE": "1"}
    said = []
    for argv, more in (([*WORDS, "-o", "k.o"], {"NVSTAGE_TIME_TRACE": "1"}),
                       ([*WORDS, "-o", "k.o"], {"NVSTAGE_TIME_TRACE": "1"}),
                       ([*WORDS, "-o", "u.o", "-fdevice-time-trace", "-"], {"NVSTAGE_CACHE": "0"})):
        cp = proc.run([*_launcher(), toolkit.nvcc, *argv], cwd=root, env={**env, **more},
                      timeout=600)
        assert cp.returncode == 0, cp.stderr
        said.append(cp.stderr)
    assert "answered whole" in said[1] and "answered whole" not in said[0] + said[2]
    return root


def _entries(root):
    return buildlog.load_build_log(root).entries


def test_each_traced_entry_names_its_trace_and_keeps_a_summary(traced):
    built, hit, user = _entries(traced)
    (own,) = (traced / buildlog.FOLDER / "traces").iterdir()
    for e, path in ((built, own), (hit, own), (user, traced / "u.o.json")):
        f = e.trace_file
        assert f is not None and f.in_log == (e is not user)
        assert f.where(traced / buildlog.FOLDER, e.cwd) == path
        data = path.read_bytes()
        assert (f.size, f.crc32) == (len(data), zlib.crc32(data))
        summary = e.time_summary()
        whole = summarize([path])
        assert summary["unit"] == "templates.cu" and summary["archs"] == ["compute_90"]
        assert summary["work"]["instantiations"] == whole.work()["instantiations"] > 100
        assert summary["work"]["headers"] == whole.work()["headers_parsed"]
        top = max(whole.template_sets.items(), key=lambda kv: kv[1].seconds)
        assert summary["template_sets"][0]["name"] == top[0]
        assert len(json.dumps(summary)) < 20_000
        assert check_file(path) == []  # the merged trace opens in Perfetto
    # The hit keeps the summary of the build that made it, as it keeps that build's trace.
    assert hit.time_summary() == built.time_summary()


def test_an_untraced_entry_has_no_trace(traced, toolkit):
    cp = proc.run([*_launcher(), toolkit.nvcc, *WORDS, "-o", "plain.o"], cwd=traced,
                  env={**os.environ, "NVSTAGE_CACHE": "0"}, timeout=600)
    assert cp.returncode == 0, cp.stderr
    plain = [e for e in _entries(traced) if e.output.endswith("plain.o")]
    assert plain[0].trace_file is None and plain[0].time_summary() is None


def test_show_time_has_the_figures_once_the_traces_are_gone(traced, cli):
    before = json.loads(cli("show", traced, "--time", "--json").stdout)
    assert before["from_summaries"] == 0 and len(before["units"]) == 2
    for path in (*(traced / buildlog.FOLDER / "traces").iterdir(), traced / "u.o.json"):
        path.unlink()
    r = cli("show", traced, "--time", "--json")
    assert r.exit_code == 0, r.stderr
    after = json.loads(r.stdout)
    assert after["from_summaries"] == 2 and after["work"] == before["work"]
    assert {u["from"] for u in after["units"]} == {"summary"}
    # The top rows; near the tenth, a row one unit kept and the other cut may differ.
    for key, name in (("headers", "path"), ("template_sets", "name"),
                      ("functions_nvvm", "name"), ("functions_ptxas", "name")):
        got, want = after[key][:5], before[key][:5]
        assert [r[name] for r in got] == [r[name] for r in want], key
        assert [r.get("count", r.get("parses")) for r in got] == \
            [r.get("count", r.get("parses")) for r in want], key
    assert "read from the summary its build log entry keeps" in r.stderr
