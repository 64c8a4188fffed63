"""The one kernel record and the one name matcher (``inspect.kernels``): every view finds a
kernel by the same names."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvstage.inspect.kernels import (KernelNames, KernelRecord, final_rows, for_arch,
                                     kernel_names, matches, preferred, select, spelling)

PTX = Path(__file__).resolve().parents[1] / "data" / "captured" / "multi.sm_80.ptx"
SCALE = "void ns::scale<unsigned int>(unsigned int*, unsigned int, int)"


def test_every_name_a_user_may_give():
    assert kernel_names("_ZN2ns5scaleIjEEvPT_S1_i", SCALE) == (
        "_ZN2ns5scaleIjEEvPT_S1_i", SCALE,
        "ns::scale<unsigned int>(unsigned int*, unsigned int, int)", "void ns::scale<unsigned int>",
        "ns::scale<unsigned int>", "ns::scale", "scale<unsigned int>", "scale")
    assert kernel_names("histogram", "histogram") == ("histogram",)


@pytest.mark.parametrize("wanted", [
    "scale", "scale<unsigned int>", "ns::scale", "ns::scale<unsigned int>",
    "scale< unsigned int >", "ns::scale<unsigned int>(unsigned int *, unsigned int, int)",
    "void ns::scale<unsigned int>(unsigned int*,unsigned int,int)", "_ZN2ns5scaleIjEEvPT_S1_i",
    None, ""])
def test_matches_names_and_spellings(wanted):
    assert matches(wanted, "_ZN2ns5scaleIjEEvPT_S1_i", SCALE)


@pytest.mark.parametrize("wanted", ["scal", "scale<unsignedint>", "void", "ns", "scale<int>"])
def test_matches_nothing_else(wanted):
    assert not matches(wanted, "_ZN2ns5scaleIjEEvPT_S1_i", SCALE)


def test_globs_for_budgets():
    assert matches("scale<*>", "_ZN2ns5scaleIjEEvPT_S1_i", SCALE, glob=True)
    assert matches("_ZN2ns*", "_ZN2ns5scaleIjEEvPT_S1_i", SCALE, glob=True)
    assert not matches("scale<*>", "_ZN2ns5scaleIjEEvPT_S1_i", SCALE)  # a glob only if asked
    assert spelling("k<a<int> >( float * )") == "k<a<int>>(float*)"


def _rec(name, arch="sm_90", final=True, registers=8, demangled=None):
    return KernelRecord(name, demangled or name, arch, registers, final=final)


def test_names_index_full_names_first():
    f = _rec("_Z5scaleIfEvPT_S0_i", demangled="void scale<float>(float*, float, int)")
    d = _rec("_Z5scaleIdEvPT_S0_i", demangled="void scale<double>(double*, double, int)")
    index = KernelNames([f, d])
    assert index["scale"] is f  # a name both share names the first
    assert index["scale<double>"] is d and index["scale< double >"] is d
    assert index["_Z5scaleIdEvPT_S0_i"] is d
    assert "scale<int>" not in index and index.get("nope") is None
    assert index.map(lambda r: r.kernel)["scale<double>"] == "_Z5scaleIdEvPT_S0_i"


def test_after_link_rule():
    per_file, linked = _rec("k", final=False, registers=40), _rec("k", registers=32)
    assert preferred([per_file, linked]) is linked
    assert preferred([per_file]) is per_file
    assert final_rows([per_file, _rec("j"), linked]) == [linked, _rec("j")]


def test_record_for_an_arch():
    rows = [_rec("k", "sm_80", registers=30), _rec("k", "sm_90", final=False, registers=40),
            _rec("k", "sm_90", registers=32)]
    assert for_arch(rows, "sm_90").registers == 32  # the linked one
    assert for_arch(rows, "sm_89").registers == 30  # the nearest older arch
    assert for_arch(rows, "sm_75").arch == "sm_90"  # none older: the newest
    assert for_arch(rows, None).registers == 32
    assert select(rows, "k") == rows and select(rows, "j") == []


def test_the_record_json_leaves_out_what_no_view_read():
    d = _rec("k").to_json()
    assert not {"instructions", "image", "image_size", "file", "line"} & set(d)
    assert d["spills"] is False
    assert KernelRecord("k", "k", "sm_90", 8, spill_stores=None, spill_loads=None).spill_bytes \
        is None
    assert KernelRecord("k", "k", "sm_90", 8, spill_stores=8, spill_loads=4).spill_bytes == 12


def test_a_workload_finds_every_kernel_show_finds():
    # show --kernel and a workload's [[launch]] kernel = "..." read names one way: what the
    # matcher finds in a module, the workload's signatures find too.
    from nvstage.inspect.ptx import parse_ptx
    from nvstage.run.workload.signatures import kernel_signatures

    text = PTX.read_text()
    sigs = kernel_signatures(text)
    entries = parse_ptx(text).entries
    for e in entries:
        for name in kernel_names(e.name, e.demangled):
            assert matches(name, e.name, e.demangled)
            found = sigs[name]
            assert matches(name, found.mangled, found.demangled), (name, found.mangled)
    assert sigs["scale<double>"].mangled == "_Z5scaleIdEvPT_S0_i"
    assert sigs["block_sum"].mangled == "_Z9block_sumPKfPfi"
