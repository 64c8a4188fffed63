"""One kernel through nvcc, NVRTC, NVRTC + nvJitLink and LTO: what differs, with real tools."""

import io
import json

import pytest
from rich.console import Console

from nvstage.errors import UsageError
from nvstage.compiler_paths import (
    LTO,
    NVCC,
    NVJITLINK,
    NVRTC,
    PathResult,
    compare_paths,
    compare_ptx,
)
from nvstage.report.terminal.diff import render_paths as render


def _text(result) -> str:
    buf = io.StringIO()
    render(result, Console(file=buf, width=160, no_color=True, highlight=False))
    return buf.getvalue()


@pytest.fixture(scope="module")
def saxpy(toolkit, kernels):
    return compare_paths(kernels / "saxpy.cu", arch="sm_90", toolkit=toolkit, lto=True)


@pytest.fixture(scope="module")
def lto_pair(toolkit, kernels):
    return compare_paths([kernels / "lto_a.cu", kernels / "lto_b.cu"], arch="sm_90",
                         toolkit=toolkit, lto=True)


def test_saxpy_is_the_same_through_every_path(saxpy):
    assert [p.name for p in saxpy.paths] == [NVCC, NVRTC, NVJITLINK, LTO]
    (nvcc_vs_rtc, rtc_vs_lto) = saxpy.ptx
    assert (nvcc_vs_rtc.a, nvcc_vs_rtc.b, nvcc_vs_rtc.identical) == (NVCC, NVRTC, True)
    assert nvcc_vs_rtc.normalised == []  # byte for byte: nothing set aside
    assert rtc_vs_lto.b == LTO and rtc_vs_lto.identical
    regs = saxpy.registers("saxpy")
    assert set(regs) == {NVCC, NVRTC, NVJITLINK, LTO} and len(set(regs.values())) == 1
    assert all(v and v > 0 for v in regs.values())
    for p in saxpy.paths:
        k = p.kernel("saxpy")
        assert k.instructions and k.instructions > 4 and k.final
        assert p.stages and p.seconds > 0
    assert [s.stage for s in saxpy.path(NVCC).stages][-2:] == ["cicc", "ptxas"]
    assert [s.stage for s in saxpy.path(LTO).stages] == ["nvrtc", "nvjitlink", "nvjitlink"]
    assert saxpy.resource_differences() == []


def test_the_lto_pair_shows_fewer_registers_after_lto(lto_pair):
    regs = lto_pair.registers("lto_apply")
    # Separately compiled and linked, the kernel pays for shade()'s heavy branch; with LTO it
    # is inlined with mode == 0 and the branch is folded away (24 -> 10 on CUDA 13.5).
    assert regs[LTO] < regs[NVJITLINK]
    assert regs[NVJITLINK] >= 2 * regs[LTO]
    assert not lto_pair.path(NVCC).kernel("lto_apply").final  # -rdc, before linking
    assert lto_pair.path(LTO).kernel("lto_apply").final
    diffs = lto_pair.resource_differences()
    assert any(d.startswith("lto_apply: registers") for d in diffs)
    # Each source's PTX is the same from nvcc and NVRTC (both -rdc=true).
    assert [(c.module, c.identical) for c in lto_pair.ptx] == [("lto_a", True), ("lto_b", True)]
    text = _text(lto_pair)
    assert f"{regs[NVJITLINK]}" in text and f"{regs[LTO]}" in text
    assert "differs: lto_apply: registers" in text
    assert "before linking (-rdc)" in text


def test_templates_differ_in_ptx_and_name_expressions_add_kernels(toolkit, kernels):
    r = compare_paths(kernels / "templates.cu", arch="sm_80", toolkit=toolkit,
                      name_expressions=("scale<int>",))
    (c,) = r.ptx
    # NVRTC emits explicit template instances as .weak entries where nvcc has .visible ones.
    assert not c.identical and c.changed_lines > 0
    assert "-.visible .entry _Z5scaleIfEvPT_S0_i(" in c.diff
    assert "+.weak .entry _Z5scaleIfEvPT_S0_i(" in c.diff
    assert r.path(NVCC).kernel("_Z5scaleIiEvPT_S0_i") is None  # only NVRTC instantiated it
    assert r.path(NVRTC).kernel("_Z5scaleIiEvPT_S0_i").registers > 0
    assert any("scale<int> -> _Z5scaleIiEvPT_S0_i" in n for n in r.notes)
    text = _text(r)
    assert "PTX templates: nvcc != nvrtc" in text and "(absent)" in text


def test_json_is_serialisable_and_complete(saxpy):
    doc = json.loads(json.dumps(saxpy.to_json()))
    assert doc["schema"] == "nvstage.crosspath/1" and doc["arch"] == "sm_90" and doc["lto"]
    assert doc["versions"]["nvrtc"] == "13.5"
    assert [p["name"] for p in doc["paths"]] == [NVCC, NVRTC, NVJITLINK, LTO]
    assert doc["ptx"][0]["summary"] == "PTX saxpy: nvcc = nvrtc (byte for byte)"
    k = doc["paths"][0]["kernels"][0]
    assert {"kernel", "registers", "spill_stores", "spill_loads", "sass_instructions"} <= set(k)


def test_render_shows_kernels_ptx_and_times(saxpy):
    text = _text(saxpy)
    for word in ("saxpy.cu for sm_90", "registers", "SASS instr", "nvrtc+lto",
                 "PTX saxpy: nvcc = nvrtc (byte for byte)", "ptxas", "nvjitlink", "total"):
        assert word in text


def test_ptx_header_is_the_only_thing_normalised():
    body = ".version 9.5\n.target sm_90\n.visible .entry k()\n{\n\tret;\n}\n"
    a = PathResult("a", "", ptx={"k": "//\n// Compiler Build ID: CL-1\n//\n\n" + body})
    b = PathResult("b", "", ptx={"k": "//\n// Compiler Build ID: CL-2\n//\n\n" + body})
    c = compare_ptx(a, b, "k")
    assert c.identical and c.normalised and "comment header" in c.normalised[0]
    b.ptx["k"] = b.ptx["k"].replace("ret;", "exit;")
    c = compare_ptx(a, b, "k")
    assert not c.identical and c.changed_lines == 2
    assert "-\tret;" in c.diff and "+\texit;" in c.diff


def test_a_virtual_arch_is_refused(toolkit, kernels):
    with pytest.raises(UsageError, match="real arch"):
        compare_paths(kernels / "saxpy.cu", arch="compute_90", toolkit=toolkit)


def test_keep_leaves_one_folder_per_path(toolkit, kernels, workdir):
    compare_paths(kernels / "saxpy.cu", arch="sm_90", toolkit=toolkit, keep="d")
    assert sorted(p.name for p in (workdir / "d").iterdir()) == [NVCC, NVRTC]
    assert (workdir / "d" / NVRTC / "stages.json").is_file()


def test_spills_come_from_each_compilers_own_report(toolkit, kernels, workdir):
    r = compare_paths(kernels / "spill.cu", arch="sm_80", toolkit=toolkit, maxrregcount=16)
    for p in r.paths:
        k = p.kernel("spill")
        assert k.registers <= 16 + 8  # ptxas may round up; it must not ignore the cap
        assert k.spill_stores > 0 and k.spill_loads > 0, p.name
    assert list(workdir.iterdir()) == []  # nothing left behind, not even nvcc's NAME.cubin


def test_a_path_that_fails_says_its_folder_is_gone(toolkit, kernels, workdir):
    from nvstage.errors import StageFailed

    # lto_a.cu alone calls shade() that only lto_b.cu defines: nvcc's ptxas refuses first.
    with pytest.raises(StageFailed) as info:
        compare_paths(kernels / "lto_a.cu", arch="sm_90", toolkit=toolkit)
    assert "Unresolved extern function '_Z5shadefi'" in info.value.message
    assert "temporary folder is removed" in info.value.hint
