"""Kernel names as a user wrote them (inspect/names.py): nvcc's module-id prefixes of
internal-linkage kernels taken out, from captured names (tests/data/captured/
cuda13.5-static-rdc-ptxas-v.txt: static-kernels.cu built with -rdc=true), and every view that
shows a kernel's name showing it so: show, occupancy, diff, check (text, GitHub, Markdown) and
report, of a keep folder and of a build record. The raw name stays in --json."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from nvstage.inspect.kernels import base_name, display_name, kernel_names, matches
from nvstage.inspect.names import demangle_all, split_static, without_internal
from nvstage.inspect.resources import parse_ptxas_verbose
from nvstage.run.workload.signatures import split_c_args

CAPTURED = "cuda13.5-static-rdc-ptxas-v.txt"
# A module id, as nvcc writes it into a name (the hash, the file name's length, ...).
MODULE_ID = re.compile(r"__nv_static_|_INTERNAL_|_[0-9a-f]{8}_\d+_clock_cu")
SHOWN = {
    "clock.cu: timedReduction(float const*, float*, long*) (static)",
    "clock.cu: ns::scale(float*, float) (static)",
    "clock.cu: (anonymous namespace)::anon_k(int*) (static)",
    "clock.cu: void fillT<float>(float*) (static)",
    "plain(int*)",
}


@pytest.fixture(scope="module")
def names(captured) -> list[str]:
    text = (captured / CAPTURED).read_text()
    return re.findall(r"Compiling entry function '([^']+)'", text)


def test_captured_names_lose_their_module_ids(names):
    assert any(n.startswith("__nv_static_29__") for n in names)
    shown = demangle_all(names)
    assert set(shown.values()) == SHOWN
    assert not any(MODULE_ID.search(v) for v in shown.values())
    # The issue's name (nvcc 12's module id, "main" where 13.5 has a second hash).
    raw = "__nv_static_25__9c2380f4_8_clock_cu_main__Z14timedReductionPKfPfPl"
    assert split_static(raw) == ("_Z14timedReductionPKfPfPl", "clock.cu")
    assert demangle_all([raw])[raw] == \
        "clock.cu: timedReduction(float const*, float*, long*) (static)"
    # A name in an _INTERNAL_ namespace (TOOLCHAIN_FACTS: a PTX name of reduction_kernel.cu).
    internal = "_ZN55_INTERNAL_ea460fcf_19_reduction_kernel_cu_644567ac_65324cuda3std3__44swapEv"
    assert demangle_all([internal])[internal] == \
        "reduction_kernel.cu: cuda::std::__4::swap() (static)"
    assert without_internal("void k<_INTERNAL_ea460fcf_19_reduction_kernel_cu_644567ac_6532"
                            "::Op>(int*)") == ("void k<Op>(int*)", "reduction_kernel.cu")
    # Anything else as it was.
    assert split_static("_Z5plainPi") == ("_Z5plainPi", None)
    assert demangle_all(["histogram"]) == {"histogram": "histogram"}


def test_the_name_readers_read_the_shown_name():
    shown = "clock.cu: timedReduction(float const*, float*, long*) (static)"
    raw = "__nv_static_29__e3513f8c_8_clock_cu_3c7ab8be__Z14timedReductionPKfPfPl"
    assert display_name(shown) == "clock.cu: timedReduction (static)"
    assert base_name(shown) == "timedReduction"  # what the source spells (check's line)
    for name in ("timedReduction", "timedReduction(float const*, float*, long*)", shown, raw):
        assert matches(name, raw, shown), name
    assert shown in kernel_names(raw, shown)
    assert split_c_args(shown) == ["float const*", "float*", "long*"]
    assert display_name("clock.cu: void fillT<float>(float*) (static)") == \
        "clock.cu: fillT<float> (static)"


def test_parsed_records_carry_the_raw_and_the_shown_name(captured):
    rows = parse_ptxas_verbose((captured / CAPTURED).read_text(), final=False)
    assert {r.demangled for r in rows} == SHOWN
    assert all(r.kernel.startswith(("__nv_static_", "_Z")) for r in rows)
    (t,) = [r for r in rows if "timedReduction" in r.demangled]
    assert t.name == "clock.cu: timedReduction (static)" and t.registers == 12
    assert t.to_json()["kernel"].startswith("__nv_static_29__e3513f8c")


def _shown(text: str) -> list[str]:
    """What a view shows of names: a table's text, a page's less its code listings; of a
    JSON document, its "demangled", "name" and "key" fields that hold no raw symbol (its
    "kernel" fields, a PTX entry's and a fatbin's lists of symbols are the raw names, which
    JSON keeps)."""
    if text.startswith("<!DOCTYPE html>"):  # a page: its code listings (PTX) are the code
        return [re.sub(r"<pre[^>]*>.*?</pre>", "", text, flags=re.S)]
    try:
        doc = json.loads(text)
    except ValueError:
        return [text]
    found = []

    def walk(x):
        if isinstance(x, dict):
            for k, v in x.items():
                if k in ("demangled", "name", "key") and isinstance(v, str) \
                        and not v.startswith(("_Z", "__nv_static_")):
                    found.append(v)
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(doc)
    return found


def _assert_clean(outputs: dict) -> None:
    for what, text in outputs.items():
        shown = _shown(text)
        assert not any(MODULE_ID.search(t) for t in shown), what
        assert any("timedReduction" in t for t in shown), what


BUDGETS = "[budgets]\nmax_registers = 9\nrequired_arches = [\"sm_90\"]\n"


def test_every_view_of_a_build_shows_the_names_clean(cli, captured, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(captured / "static-kernels.cu", tmp_path / "clock.cu")
    (tmp_path / "budgets.toml").write_text(BUDGETS)
    r = cli("compile", "clock.cu", "-c", "-rdc=true", "-arch=sm_90", "--keep-dir", "k",
            "-o", "clock.o")
    assert r.exit_code == 0, r.output
    outputs = {}
    for argv in (["show", "k"], ["show", "k", "--sections", "resources,sass,ptx"],
                 ["show", "k", "--json"], ["show", "clock.o"],
                 ["show", "k", "--kernel", "timedReduction", "--sections", "resources"],
                 ["occupancy", "k", "--block", "128", "--gpu", "h200"],
                 ["diff", "k", "k", "--all"], ["diff", "k", "k", "--all", "--json"],
                 ["check", "k", "--config", "budgets.toml"],
                 ["check", "k", "--config", "budgets.toml", "--format", "github"],
                 ["check", "k", "--config", "budgets.toml", "--format", "markdown"]):
        r = cli(*argv)
        assert r.exit_code in (0, 1), (argv, r.output)
        outputs[" ".join(argv)] = r.stdout
    r = cli("report", "k", "-o", "r.html", "--no-code")
    assert r.exit_code == 0, r.output
    outputs["report"] = (tmp_path / "r.html").read_text()
    _assert_clean(outputs)
    assert "__nv_static_" in outputs["show k --json"]  # the raw name stays in JSON
    assert "clock.cu: timedReduction" in outputs["show k"]
    assert "clock.cu: timedReduction(float const*, float*, long*) (static)" in \
        outputs["check k --config budgets.toml --format github"]


def test_every_view_of_a_build_record_shows_the_names_clean(cli, captured, cuproject_record,
                                                             tmp_path, monkeypatch):
    """A record whose unit's ptxas report (as an older manifest kept it) names the captured
    static kernels: show, check, report and diff of the record."""
    from nvstage.compiler.buildlog import log as buildlog

    rec = tmp_path / "rec"
    shutil.copytree(cuproject_record[1] / buildlog.FOLDER, rec)
    report = (captured / CAPTURED).read_text()
    for p in sorted((rec / "tu").glob("*.json")):
        doc = json.loads(p.read_text())
        if not (doc["build"] or {}).get("source", "").endswith("scale.cu"):
            continue
        for s in doc["build"]["stages"]:
            if s["kind"] == "ptxas":
                s.pop("cubin_figures", None)
                s["resources"] = report if s["arch"] == "sm_90" else ""
        p.write_text(json.dumps(doc))
    (tmp_path / "budgets.toml").write_text(BUDGETS)
    monkeypatch.chdir(tmp_path)
    outputs = {}
    for argv in (["show", str(rec)], ["show", str(rec), "--json"],
                 ["show", str(rec), "--kernel", "timedReduction", "--sections", "resources"],
                 ["diff", str(rec), "--all"], ["diff", str(rec), "--all", "--json"],
                 ["check", str(rec), "--config", "budgets.toml"],
                 ["check", str(rec), "--config", "budgets.toml", "--format", "github"],
                 ["check", str(rec), "--config", "budgets.toml", "--format", "markdown"]):
        r = cli(*argv)
        assert r.exit_code in (0, 1), (argv, r.output)
        outputs[" ".join(argv[:1] + argv[2:])] = r.stdout
    r = cli("report", str(rec), "-o", "r.html", "--no-code")
    assert r.exit_code == 0, r.output
    outputs["report"] = (tmp_path / "r.html").read_text()
    _assert_clean(outputs)
    assert "__nv_static_" in outputs["show --json"]
    assert "clock.cu: timedReduction (static)" in outputs["show"]
