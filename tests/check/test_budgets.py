"""Budgets against real builds: registers, spills, arches, sizes, stage times, baselines."""

from __future__ import annotations

import json

import pytest

from nvstage.check.budgets import load_budgets, parse_budgets
from nvstage.check.gate import check
from nvstage.check.metrics import locate_kernel, run_figures
from nvstage.errors import BaselineError, BudgetConfigError
from nvstage.report.checks import github_annotations, markdown_summary
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.inspect.kernels import base_name, matches, qualified_name

TWO_ARCHES = ("arch=compute_80,code=sm_80", "arch=compute_90,code=[sm_90,compute_90]")


def _build(toolkit, kernels, tmp_path_factory, name, source, **opts):
    from nvstage.compiler.pipeline.driver import compile

    keep = tmp_path_factory.mktemp(name)
    out = keep / source.replace(".cu", ".fatbin")  # nvcc's default is the current folder
    return compile(kernels / source, CompileOptions(stop="fatbin", output=str(out), **opts),
                   toolkit=toolkit, keep=keep, jobs=1)


@pytest.fixture(scope="module")
def small(toolkit, kernels, tmp_path_factory):
    return _build(toolkit, kernels, tmp_path_factory, "small", "budget_acc.cu",
                  gencodes=TWO_ARCHES, defines=("ACC=4",))


@pytest.fixture(scope="module")
def big(toolkit, kernels, tmp_path_factory):
    return _build(toolkit, kernels, tmp_path_factory, "big", "budget_acc.cu",
                  gencodes=TWO_ARCHES, defines=("ACC=32",))


@pytest.fixture(scope="module")
def one_arch(toolkit, kernels, tmp_path_factory):
    return _build(toolkit, kernels, tmp_path_factory, "one", "budget_acc.cu",
                  archs=("sm_90",), defines=("ACC=4",))


@pytest.fixture(scope="module")
def spilled(toolkit, kernels, tmp_path_factory):
    return _build(toolkit, kernels, tmp_path_factory, "spill", "spill.cu", archs=("sm_90",),
                  maxrregcount=16)


BUDGETS = {"budgets": {"max_registers": 32, "no_spills": True,
                       "required_arches": ["sm_80", "sm_90"]}}


def test_within_budget_passes(small, toolkit):
    r = check(small, parse_budgets(BUDGETS), toolkit=toolkit)
    assert r.passed, r.violations
    assert r.checked >= 6
    regs = {k.arch: k.registers for k in r.measurements.kernels}
    assert set(regs) == {"sm_80", "sm_90"} and max(regs.values()) <= 32
    assert r.measurements.arches == ["compute_90", "sm_80", "sm_90"]


def test_more_registers_fail_with_the_kernel_named(big, toolkit):
    r = check(big, parse_budgets(BUDGETS), toolkit=toolkit)
    assert not r.passed
    regs = [v for v in r.violations if v.metric == "registers"]
    assert regs and {v.kernel for v in regs} == {"budget_acc"}
    v = regs[0]
    assert v.value > 32 and v.limit == 32
    assert "budget_acc" in v.message and v.file.endswith("budget_acc.cu") and v.line == 7


def test_per_kernel_table_overrides_the_defaults(big, toolkit):
    b = parse_budgets({"budgets": {"max_registers": 32,
                                   "kernels": {"budget_*": {"max_registers": 255}}}})
    assert check(big, b, toolkit=toolkit).passed


def test_spills_fail(spilled, toolkit):
    r = check(spilled, parse_budgets({"budgets": {"no_spills": True}}), toolkit=toolkit)
    (v,) = r.violations
    assert v.kernel == "spill" and v.metric == "spill_bytes" and v.value > 0 and v.limit == 0
    assert "no spills are allowed" in v.message
    # a spill allowance above what it spills passes
    allowed = parse_budgets({"budgets": {"max_spill_bytes": v.value}})
    assert check(spilled, allowed, toolkit=toolkit).passed


def test_dropped_arch_fails(one_arch, toolkit):
    r = check(one_arch, parse_budgets(BUDGETS), toolkit=toolkit)
    (v,) = r.violations
    assert v.metric == "required_arch" and v.arch == "sm_80"
    assert "sm_80 is missing" in v.message and "budget_acc.fatbin" in v.message


def test_sizes_and_stage_times(small, toolkit):
    m = check(small, parse_budgets({}), toolkit=toolkit).measurements
    tight = parse_budgets({"budgets": {"max_cubin_bytes": 100, "max_fatbin_bytes": 100,
                                       "stage_seconds": {"ptxas": 0.0}}})
    r = check(small, tight, toolkit=toolkit)
    metrics = sorted(v.metric for v in r.violations)
    assert metrics.count("cubin_bytes") == 2 and metrics.count("fatbin_bytes") == 1
    assert metrics.count("stage_seconds") == sum(1 for s in m.stages if s["kind"] == "ptxas"
                                                 and s["seconds"] > 0)
    loose = parse_budgets({"budgets": {"max_fatbin_bytes": m.fatbin_bytes,
                                       "stage_seconds": {"*": 3600}}})
    assert check(small, loose, toolkit=toolkit).passed


def test_keep_folder_and_manifest_paths_work(small, toolkit):
    r1 = check(small.keep_dir, parse_budgets(BUDGETS), toolkit=toolkit)
    r2 = check(f"{small.keep_dir}/stages.json", parse_budgets(BUDGETS), toolkit=toolkit)
    assert r1.passed and r2.passed
    assert r1.measurements.kernels == r2.measurements.kernels


def test_baseline_growth(small, big, toolkit, tmp_path):
    base = tmp_path / "base.json"
    base.write_text(json.dumps(check(small, parse_budgets({}), toolkit=toolkit).to_json()))
    same = check(small, parse_budgets({}), toolkit=toolkit, baseline=base)
    assert not [v for v in same.violations if v.metric != "stage_seconds"]
    grown = check(big, parse_budgets({}), toolkit=toolkit, baseline=base)
    regs = [v for v in grown.violations if v.metric == "registers"]
    assert {v.arch for v in regs} == {"sm_80", "sm_90"}
    assert all(v.against == "baseline" and "grew from" in v.message for v in regs)
    # a generous threshold lets the same growth through
    lax = parse_budgets({"baseline": {"registers": 10.0, "cubin_bytes": 10.0,
                                      "fatbin_bytes": 10.0, "stage_seconds": 100.0}})
    assert not [v for v in check(big, lax, toolkit=toolkit, baseline=base).violations
                if v.metric != "stage_seconds"]
    # a manifest works as a baseline too
    vs_manifest = check(big, parse_budgets({}), toolkit=toolkit,
                        baseline=f"{small.keep_dir}/stages.json")
    assert any(v.metric == "registers" for v in vs_manifest.violations)


@pytest.mark.parametrize("content, expected", [
    ("{not json", "not JSON"),
    ("[1, 2]", "a JSON list"),
    ('{"schema": "something/1"}', "not an nvstage check report"),
    ('{"schema": "nvstage.check/1", "measurements": {"source": "x"}}', "damaged"),
])
def test_corrupt_baseline_is_one_clear_error(small, toolkit, tmp_path, content, expected):
    p = tmp_path / "base.json"
    p.write_text(content)
    with pytest.raises(BaselineError, match=expected):
        check(small, parse_budgets({}), toolkit=toolkit, baseline=p)


def test_baseline_an_arch_apart_compares_what_both_have(small, one_arch, toolkit, tmp_path):
    # one_arch has sm_90 only: against it small's sm_80 kernel and cubin are new (no
    # violation), and the sm_90 kernel both have is still compared
    doc = check(one_arch, parse_budgets({}), toolkit=toolkit).to_json()
    old = tmp_path / "one.json"
    old.write_text(json.dumps(doc))
    r = check(small, parse_budgets({}), toolkit=toolkit, baseline=old)
    assert [(u.kind, u.kernel, u.arch) for u in r.unmatched] == [
        ("new", "budget_acc", "sm_80"), ("new", None, "sm_80")]
    assert r.unmatched[0].message == "budget_acc (sm_80): new, not in the baseline (its " \
                                     "budgets still apply)"
    assert not [v for v in r.violations if v.metric != "stage_seconds"]
    assert ("sizes not compared with the baseline (kernels or arches were added): the "
            "fatbin") in r.notes
    assert r.to_json()["unmatched"][1] == {"kind": "new", "kernel": None, "arch": "sm_80",
                                           "message": "the sm_80 cubin: new, not in the baseline"}
    # the kernel both have is compared: a baseline that says it had fewer registers fails it
    (k90,) = doc["measurements"]["kernels"]
    k90["registers"] = 1
    old.write_text(json.dumps(doc))
    regs = [v for v in check(small, parse_budgets({}), toolkit=toolkit, baseline=old).violations
            if v.metric == "registers"]
    assert [(v.arch, v.against) for v in regs] == [("sm_90", "baseline")]
    # the new kernel is still held to its budgets
    tight = parse_budgets({"budgets": {"max_registers": 1}})
    regs = [v for v in check(small, tight, toolkit=toolkit, baseline=old).violations
            if v.metric == "registers" and v.against == "budget"]
    assert sorted(v.arch for v in regs) == ["sm_80", "sm_90"]
    # the other way round the sm_80 kernel and cubin are removed, and that passes
    new = tmp_path / "small.json"
    new.write_text(json.dumps(check(small, parse_budgets({}), toolkit=toolkit).to_json()))
    r = check(one_arch, parse_budgets({}), toolkit=toolkit, baseline=new)
    assert [(u.kind, u.kernel, u.arch) for u in r.unmatched] == [
        ("removed", "budget_acc", "sm_80"), ("removed", None, "sm_80")]
    assert r.unmatched[0].message == "budget_acc (sm_80): removed, only in the baseline"
    assert not [v for v in r.violations if v.metric != "stage_seconds"]


def test_a_baseline_of_another_program_is_one_clear_error(small, spilled, toolkit, tmp_path):
    p = tmp_path / "base.json"
    p.write_text(json.dumps(check(spilled, parse_budgets({}), toolkit=toolkit).to_json()))
    with pytest.raises(BaselineError) as e:
        check(small, parse_budgets({}), toolkit=toolkit, baseline=p)
    assert e.value.message == (
        f"baseline {p} is for a different build: no kernel and arch in common (only in the "
        f"baseline: spill (sm_90); only in this build: budget_acc (sm_80), budget_acc (sm_90))")
    assert "nvstage check --write-baseline" in e.value.hint


def test_renderers(big, toolkit):
    r = check(big, parse_budgets(BUDGETS), toolkit=toolkit)
    gh = github_annotations(r, base=str(big.source).rsplit("/kernels/", 1)[0])
    first = gh.splitlines()[0]
    assert first.startswith("::error file=kernels/budget_acc.cu,line=7,title=nvstage check%3A "
                            "registers::budget_acc (sm_")
    md = markdown_summary(r)
    assert md.startswith("## ❌ nvstage check: failed: 2 violations"), r.violations
    assert "| budget_acc | sm_80 | registers |" in md


# -- pure parts --------------------------------------------------------------------------

def test_names_and_globs():
    assert base_name("ns::scale<float>(float*, float, int)") == "scale"
    assert base_name("f<a::b<c>>(int)") == "f"
    dem = "void scale<float>(float*, float, int)".replace("void ", "")
    assert matches("scale", "_Z5scaleIfEvPT_S0_i", dem)
    assert matches("scale<float>", "_Z5scaleIfEvPT_S0_i", dem)
    assert matches("_Z5scale*", "_Z5scaleIfEvPT_S0_i", dem, glob=True)
    assert not matches("scal", "_Z5scaleIfEvPT_S0_i", dem)


def test_locate_kernel(kernels):
    assert locate_kernel(kernels / "multi.cu", "scale<float>(float*, float, int)") == 20
    assert locate_kernel(kernels / "multi.cu", "histogram") is not None
    assert locate_kernel(kernels / "multi.cu", "nowhere") is None


@pytest.mark.parametrize("doc, expected", [
    ({"budgets": {"max_registerz": 3}}, "unknown key"),
    ({"budgets": {"max_registers": -1}}, "whole number from 0"),
    ({"budgets": {"max_registers": 1.5}}, "whole number"),
    ({"budgets": {"no_spills": True, "max_spill_bytes": 8}}, "disagree"),
    ({"budgets": {"kernels": {"k": {"max_fatbin_bytes": 3}}}}, "unknown key"),
    ({"budgets": {"required_arches": ["sm90"]}}, "required_arches"),
    ({"budgets": {"stage_seconds": {"ptxass": 1}}}, "unknown stage kind"),
    ({"baseline": {"regs": 0.1}}, "unknown metric"),
    ({"tool": {"nvstage": {"budget": {}}}}, "unknown table"),
    ({"compile": {"arch": ["sm_90"]}}, "unknown option"),
])
def test_bad_config_is_refused(doc, expected):
    with pytest.raises(BudgetConfigError, match=expected):
        parse_budgets(doc)


def test_pyproject_tables(tmp_path):
    p = tmp_path / "pyproject.toml"
    p.write_text('[project]\nname = "x"\n[tool.nvstage.budgets]\nmax_registers = 64\n'
                 '[tool.nvstage.budgets.kernels."saxpy"]\nmax_registers = 32\n'
                 '[tool.nvstage.compile]\narchs = ["sm_90"]\n')
    b = load_budgets(p)
    assert b.limits_for("saxpy", "saxpy").max_registers == 32
    assert b.limits_for("other", "other").max_registers == 64
    assert b.compile_options().archs == ("sm_90",) and b.compile_options().stop == "fatbin"
    p.write_text('[project]\nname = "x"\n')
    with pytest.raises(BudgetConfigError, match=r"no \[tool.nvstage\]"):
        load_budgets(p)
    p.write_text("[tool.nvstage\n")
    with pytest.raises(BudgetConfigError, match="not valid TOML"):
        load_budgets(p)


def test_run_figures_read_the_decomposition_and_ignore_the_rest():
    doc = {"schema": "nvstage.run/1", "unknown": {"x": 1}, "decomposition": {
        "launch_ns": {"median": 4000.0}, "kernel_ns": {"median": 12000.0},
        "wall_ns": {"median": 20000.0}, "transfer_ns": None,
        "operations": [{"kind": "launch", "name": "saxpy", "gpu_ns": {"median": 12000.0}},
                       {"kind": "h2d", "name": "x", "gpu_ns": {"median": 1.0}}]}}
    kernels, terms = run_figures(doc)
    assert kernels == {"saxpy": 12.0}
    assert terms == {"launch": 4.0, "kernel": 12.0, "wall": 20.0}
    assert run_figures({"schema": "nvstage.run/1"}) == ({}, {})


def test_run_budgets(small, toolkit):
    run = {"decomposition": {"launch_ns": {"median": 4000.0}, "operations": [
        {"kind": "launch", "name": "budget_acc", "gpu_ns": {"median": 12000.0}}]}}
    b = parse_budgets({"budgets": {"max_kernel_us": 10.0, "run": {"max_launch_us": 5.0}}})
    r = check(small, b, toolkit=toolkit, run_report=run)
    (v,) = r.violations
    assert v.metric == "kernel_us" and v.kernel == "budget_acc" and v.value == 12.0
    assert v.line == 7
    b2 = parse_budgets({"budgets": {"run": {"max_launch_us": 3.0}}})
    (v2,) = check(small, b2, toolkit=toolkit, run_report=run).violations
    assert v2.metric == "launch_us"


def test_names_as_cuxxfilt_spells_them():
    # c++filt gives template functions their return type, and anonymous namespaces a space
    # and parentheses of their own: neither is part of the name a budget is written for.
    sigs = {
        "void scale<float>(float*, float, int)": ("scale<float>", "scale"),
        "void ns::scale<float>(float*, float, int)": ("ns::scale<float>", "scale"),
        "(anonymous namespace)::kernel(float*)": ("(anonymous namespace)::kernel", "kernel"),
        "void ns::k<foo::k<int> >(foo::bar<int>*)": ("ns::k<foo::k<int> >", "k"),
        "saxpy": ("saxpy", "saxpy"),
    }
    for dem, (qualified, base) in sigs.items():
        assert (qualified_name(dem), base_name(dem)) == (qualified, base), dem
    real = "void ns::scale<float>(float*, float, int)"
    for pattern in ("scale", "scale<float>", "ns::scale<float>", "scale<*>", real):
        assert matches(pattern, "_ZN2ns5scaleIfEEvPT_S1_i", real, glob=True), pattern
    assert not matches("void", "_ZN2ns5scaleIfEEvPT_S1_i", real)
    assert matches("kernel", "_ZN12_GLOBAL__N_16kernelEPf",
                          "(anonymous namespace)::kernel(float*)")
    b = parse_budgets({"budgets": {"max_registers": 64,
                                   "kernels": {"scale": {"max_registers": 16}}}})
    assert b.limits_for("_Z5scaleIfEvPT_S0_i",
                        "void scale<float>(float*, float, int)").max_registers == 16


def test_locate_template_kernel_from_its_real_demangled_name(kernels):
    assert locate_kernel(kernels / "multi.cu", "void scale<float>(float*, float, int)") == 20


@pytest.mark.parametrize("doc, expected", [
    ({"budget": {"max_registers": 1}}, "unknown table"),  # a typo would check nothing
    ({"budgets": 3}, "budgets must be a table"),
    ({"budgets": {"kernels": 3}}, "budgets.kernels must be a table"),
    ({"baseline": 0.1}, "baseline must be a table"),
    ({"compile": ["sm_90"]}, "compile must be a table"),
    ({"source": 3}, "source must be a path"),
    ({"tool": {"nvstage": 3}}, "tool.nvstage must be a table"),
])
def test_malformed_tables_are_refused_not_tracebacks(doc, expected):
    with pytest.raises(BudgetConfigError, match=expected):
        parse_budgets(doc)


def test_standalone_file_may_carry_other_tools_tables():
    b = parse_budgets({"tool": {"black": {"line-length": 100}},
                       "budgets": {"max_registers": 8}})
    assert b.defaults.max_registers == 8


def test_a_kernel_table_can_lift_no_spills(spilled, toolkit):
    b = parse_budgets({"budgets": {"no_spills": True,
                                   "kernels": {"spill": {"no_spills": False}}}})
    r = check(spilled, b, toolkit=toolkit)
    assert r.passed, r.violations
    assert not r.notes


def test_load_budgets_refuses_folders_and_binaries(tmp_path):
    with pytest.raises(BudgetConfigError, match="is a folder"):
        load_budgets(tmp_path)
    png = tmp_path / "b.toml"
    png.write_bytes(b"\x89PNG\r\n\x1a\n\0")
    with pytest.raises(BudgetConfigError, match="not text"):
        load_budgets(png)


def test_run_figures_refuse_other_documents(tmp_path):
    from nvstage.errors import ArtifactError

    for doc in ({"a": 1}, {"schema": "nvstage.check/1", "decomposition": {}}):
        with pytest.raises(ArtifactError, match="is not a run report"):
            run_figures(doc)


def _facts(**kw):
    from nvstage.check.metrics import Measurements

    base = dict(source="k.cu", kernels=[], arches=["sm_90"], arches_from="k.fatbin",
                cubin_bytes={}, fatbin_bytes=None, stages=[])
    return Measurements(**{**base, **kw})


def test_baseline_ignores_time_noise_below_the_floor():
    from nvstage.check.gate import _Checker, _compare

    stage = {"index": 1, "kind": "ptxas", "arch": "sm_90", "cached": False}
    before = _facts(stages=[{**stage, "seconds": 0.008}], kernel_us={"k": 2.0})
    rel = dict(parse_budgets({}).baseline)
    # +50 % of a few milliseconds, +40 % of 2 us: noise on a shared runner, not a regression
    c = _Checker()
    _compare(_facts(stages=[{**stage, "seconds": 0.012}], kernel_us={"k": 2.8}), before, rel,
             c, "base")
    assert c.violations == [] and c.checked == 2
    c = _Checker()
    _compare(_facts(stages=[{**stage, "seconds": 0.5}], kernel_us={"k": 20.0}), before, rel,
             c, "base")
    assert sorted(v.metric for v in c.violations) == ["kernel_us", "stage_seconds"]


def test_baseline_pairs_kernels_by_name_and_arch():
    from nvstage.check.gate import _Checker, _compare
    from nvstage.inspect.kernels import KernelRecord

    def k(name, arch, registers=10):
        return KernelRecord(name, name, arch, registers, 0, 0)

    rel = dict(parse_budgets({}).baseline)
    before = _facts(kernels=[k("a", "sm_90"), k("gone", "sm_90"), k("kept", "sm_90", 50)],
                    cubin_bytes={"sm_80": 100, "sm_90": 1000}, fatbin_bytes=1200)
    now = _facts(kernels=[k("a", "sm_90", 20), k("b", "sm_90"), k("kept", "sm_90", 50)],
                 cubin_bytes={"sm_90": 5000, "sm_100": 10}, fatbin_bytes=6000)
    c, notes = _Checker(), []
    unmatched = _compare(now, before, rel, c, "base", notes)
    assert [(u.kind, u.kernel, u.arch) for u in unmatched] == [
        ("new", "b", "sm_90"), ("removed", "gone", "sm_90"), ("new", None, "sm_100"),
        ("removed", None, "sm_80")]
    # the kernels both have are compared; the sizes a new kernel grew are not
    assert [(v.metric, v.kernel) for v in c.violations] == [("registers", "a")]
    assert c.checked == 6
    assert notes == ["sizes not compared with the baseline (kernels or arches were added): "
                     "the sm_90 cubin, the fatbin"]
    # a kernel removed, none added: the sizes are compared as before
    c = _Checker()
    _compare(_facts(kernels=[k("a", "sm_90")], cubin_bytes={"sm_90": 5000}), before, rel, c,
             "base")
    assert [v.metric for v in c.violations] == ["cubin_bytes"]
    # the same name on other arches only: nothing in common, a baseline of another build
    with pytest.raises(BaselineError, match=r"no kernel and arch in common \(only in the "
                                            r"baseline: a \(sm_80\); only in this build: a "
                                            r"\(sm_90\)\)"):
        _compare(_facts(kernels=[k("a", "sm_90")]), _facts(kernels=[k("a", "sm_80")]), rel,
                 _Checker(), "base")
    # two builds with no kernels at all have nothing to tell apart
    assert _compare(_facts(), _facts(), rel, _Checker(), "base") == []


def test_a_kernel_whose_signature_changed_is_compared_with_its_old_self():
    from nvstage.check.gate import _Checker, _compare
    from nvstage.inspect.kernels import KernelRecord

    def k(mangled, demangled, registers):
        return KernelRecord(mangled, demangled, "sm_90", registers, 0, 0)

    rel = dict(parse_budgets({}).baseline)
    before = _facts(kernels=[k("_Z4copyPf", "copy(float*)", 16),
                             k("_Z5scalePf", "scale(float*)", 32)],
                    cubin_bytes={"sm_90": 4000})
    now = _facts(kernels=[k("_Z4copyPf", "copy(float*)", 16),
                          k("_Z5scalePfi", "scale(float*, int)", 200)],
                 cubin_bytes={"sm_90": 40000})
    c, notes = _Checker(), []
    assert _compare(now, before, rel, c, "base", notes) == []
    assert sorted(v.metric for v in c.violations) == ["cubin_bytes", "registers"]
    assert notes == ["scale(float*, int) (sm_90): its signature changed since the baseline "
                     "(scale(float*)); compared with it"]
    # a single kernel that changed is the same program, not a baseline of another one
    c = _Checker()
    _compare(_facts(kernels=[now.kernels[1]]), _facts(kernels=[before.kernels[1]]), rel, c,
             "base")
    assert [v.metric for v in c.violations] == ["registers"]


def _result(violations, kernels=()):
    from nvstage.check.gate import CheckResult

    return CheckResult(_facts(kernels=list(kernels)), list(violations), checked=3)


def test_markdown_cells_are_escaped():
    from nvstage.check.gate import Violation
    from nvstage.inspect.kernels import KernelRecord

    dem = "void k<float>(float*, float*) | x"
    r = _result([Violation(dem, "sm_90", "registers", 40, 32, "too many")],
                [KernelRecord("_Z1k", dem, "sm_90", 40, 0, 0)])
    md = markdown_summary(r)
    row = next(line for line in md.splitlines() if line.startswith("| void"))
    # no emphasis from the stars, no HTML from <, the pipe does not split the row
    assert row.startswith(r"| void k&lt;float>(float\*, float\*) \| x | sm_90 | registers |")
    # the kernels table shows the name as code: literal, only the pipe escaped
    assert r"| `void k<float>(float*, float*) \| x` | sm_90 | 40 |" in md


def test_github_annotation_escaping():
    from nvstage.check.gate import Violation

    v = Violation("k", "sm_90", "registers", 40, 32, "50% more\nregisters, k: bad",
                  file="/repo/dir,a:b/k.cu", line=3)
    out = github_annotations(_result([v]), base="/repo")
    assert out == ("::error file=dir%2Ca%3Ab/k.cu,line=3,title=nvstage check%3A registers::"
                   "50%25 more%0Aregisters, k: bad\n")


def test_renderers_show_what_the_baseline_did_not_compare():
    from nvstage.check.gate import Unmatched

    r = _result([])
    r.unmatched = [Unmatched("new", "k<int>(int*)", "sm_90", "k<int>(int*) (sm_90): new"),
                   Unmatched("removed", None, "sm_80", "the sm_80 cubin: removed")]
    md = markdown_summary(r)
    assert "| `k<int>(int*)` | sm_90 | new, not in the baseline |" in md
    assert "| (cubin) | sm_80 | removed, only in the baseline |" in md
    assert github_annotations(r).splitlines() == [
        "::notice title=nvstage check%3A new vs baseline::k<int>(int*) (sm_90): new",
        "::notice title=nvstage check%3A removed vs baseline::the sm_80 cubin: removed",
        "::notice title=nvstage check::passed: 3 limits checked, no violations"]
