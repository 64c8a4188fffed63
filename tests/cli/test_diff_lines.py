"""``nvstage diff A B --kernel NAME[,NAME_B] --lineinfo``: which lines gained live registers."""

from __future__ import annotations

import json

import pytest


@pytest.fixture(scope="module")
def chain(tmp_path_factory, kernels):
    """kernels/fusion_chain.cu with -lineinfo, kept; spill.cu at 64 and 32 registers."""
    import nvstage

    folder = tmp_path_factory.mktemp("difflines")
    nvstage.compile(kernels / "fusion_chain.cu",
                    nvstage.CompileOptions(archs=("sm_90",), lineinfo=True, compile_only=True,
                                           output=str(folder / "fc.o")),
                    keep=folder / "fc.nvstage", cwd=folder)
    for regs in (64, 32):
        nvstage.compile(kernels / "spill.cu",
                        nvstage.CompileOptions(archs=("sm_90",), lineinfo=True, stop="cubin",
                                               maxrregcount=regs,
                                               output=str(folder / f"s{regs}.cubin")),
                        keep=folder / f"s{regs}.nvstage", cwd=folder)
    return folder


def test_two_kernels_of_one_build_name_the_lines_whose_registers_rose(cli, chain):
    r = cli("diff", chain / "fc.nvstage", "--kernel", "fused,fused_wide", "--lineinfo", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["peak_live_gpr"]["b"] > doc["peak_live_gpr"]["a"]
    rose = {(x["file"], x["line"]) for x in doc["rose_at"]}
    # gelu, inlined into both: its one line holds 11 live registers in fused, 80 in fused_wide
    assert ("fusion_chain.cu", 17) in rose
    (gelu,) = [x for x in doc["lines"] if x["line"] == 17]
    assert gelu["a"]["line"] == gelu["b"]["line"] == 17 and gelu["same_text"]
    assert gelu["peak_live_gpr"] == {"a": 11, "b": 80}  # README's figures
    only_b = [x for x in doc["lines"] if x["only_in"] == "b"]
    assert any("xv[k]" in (x["source_text"] or "") for x in only_b)
    text = cli("diff", chain / "fc.nvstage", "--kernel", "fused,fused_wide", "--lineinfo")
    assert "live registers rose at 17 -> 17" in text.stdout


def test_two_builds_of_one_kernel_line_up_exactly(cli, chain):
    r = cli("diff", chain / "s64.nvstage", chain / "s32.nvstage", "--kernel", "spill",
            "--lineinfo", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["peak_live_gpr"]["b"] <= 32 < doc["peak_live_gpr"]["a"]
    assert all(x["only_in"] is None for x in doc["lines"] if x["instructions"]["a"])
    assert not doc["rose_at"] and any(x["fell"] for x in doc["lines"])


def test_lineinfo_needs_a_kernel_and_line_info(cli, chain):
    r = cli("diff", chain / "s64.nvstage", chain / "s32.nvstage", "--lineinfo")
    assert r.exit_code == 2 and "--lineinfo compares a pair of kernels" in r.stderr
    assert "--pair A=B" in r.stderr
    r = cli("diff", chain / "s64.nvstage", "--kernel", "spill", "--lineinfo")
    assert r.exit_code == 2 and "nothing to compare" in r.stderr
