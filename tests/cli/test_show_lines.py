"""``nvstage show --kernel NAME --lineinfo``: source lines, their SASS and live registers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

PEAK = Path(__file__).parents[1] / "data" / "captured" / "lineview-peak.cu"


@pytest.fixture(scope="module")
def kept(tmp_path_factory):
    """lineview-peak.cu built with -lineinfo into a keep folder, and a cubin without it."""
    import nvstage

    folder = tmp_path_factory.mktemp("lines")
    src = folder / "peak.cu"
    src.write_text(PEAK.read_text())
    nvstage.compile(src, nvstage.CompileOptions(archs=("sm_90",), lineinfo=True, stop="cubin",
                                                output=str(folder / "peak.cubin")),
                    keep=folder / "peak.nvstage", cwd=folder)
    nvstage.compile(src, nvstage.CompileOptions(archs=("sm_90",), stop="cubin",
                                                output=str(folder / "plain.cubin")), cwd=folder)
    return folder


def test_each_line_with_its_sass_and_the_peak_flagged(cli, kept):
    r = cli("show", kept / "peak.nvstage", "--kernel", "peak", "--lineinfo")
    assert r.exit_code == 0, r.output
    out = r.stdout
    # README's figures (its show section)
    assert "39 instructions, peak 14 live registers at lines 7, 8" in out
    assert "14  0  2  ########################  LDG.E.CONSTANT R10, desc[UR4][R10.64]" in out
    assert "float a0 = x[i]" in out and "<- peak" in out
    assert "no SASS" in out  # the blank line 10, mix2's closing brace
    assert "(inlined at peak.cu:9)" in out
    assert ".L_x_1:" in out
    # the mix, per kernel and per line; the PTX the keep folder holds, counted per line
    assert ("mix: int 12, global_load 8 (32 B), fp32 7, constant 6, branch 3, move 2, "
            "global_store 1 (4 B)") in out
    assert "ptx: peak.ptx (compute_90), 42 instructions, counted per line" in out
    assert "[11 instr, peak 14, ptx 13 | int 5, global_load 4, constant 2]  <- peak" in out


def test_json_records_per_instruction_and_per_line(cli, kept):
    r = cli("show", kept / "peak.nvstage", "--kernel", "peak", "--lineinfo", "--json")
    assert r.exit_code == 0, r.output
    (k,) = json.loads(r.stdout)["lines"]
    assert k["peak_live_gpr"] == 14 and k["has_lineinfo"]
    ins = k["instructions"][0]
    assert {"offset", "text", "file", "line", "live_gpr", "live_pred", "live_ugpr"} <= set(ins)
    lines = {ln["line"]: ln for ln in k["lines"]}
    assert lines[7]["peak"] and lines[7]["source_text"] == "  float a0 = x[i], a1 = x[i + n], "\
        "a2 = x[i + 2 * n], a3 = x[i + 3 * n];"  # indented as written
    assert lines[10]["instructions"] == 0
    assert lines[7]["mix"] == {"int": 5, "global_load": 4, "constant": 2}
    assert lines[7]["ptx_instructions"] == 13 and lines[10]["ptx_instructions"] == 0
    assert k["mix"]["counts"]["global_load"] == 8 and k["mix"]["memory_bytes"] == \
        {"global_load": 32, "global_store": 4}
    assert k["mix"]["total"] == len(k["instructions"])
    assert k["ptx"]["module"] == "peak.ptx" and k["ptx"]["instructions"][0]["line"] == 4


def test_without_line_info_the_sass_and_its_live_registers_still_show(cli, kept):
    r = cli("show", kept / "plain.cubin", "--kernel", "peak", "--lineinfo")
    assert r.exit_code == 0, r.output
    assert "no line info in this cubin" in r.stdout
    assert "peak 14 live registers" in r.stdout
    assert "mix: int 12, global_load 8 (32 B)" in r.stdout and "ptx:" not in r.stdout


def test_the_source_file_is_named_and_peaks_in_several_files_say_which(cli, kept, tmp_path):
    """One file: ``source:`` named its folder alone (``source: /.../``), never the file.
    Several (#line directives, headers): the peak lines were bare numbers, the same number
    repeated for each file."""
    r = cli("show", kept / "peak.nvstage", "--kernel", "peak", "--lineinfo")
    assert f"source: {kept / 'peak.cu'}\n" in r.stdout
    import nvstage

    src = tmp_path / "two.cu"
    src.write_text('__global__ void k(float* y) {\n#line 1 "other.cu"\n  y[threadIdx.x] = 1;\n'
                   '#line 5 "two.cu"\n  y[threadIdx.x + 1] = 2;\n}\n')
    nvstage.compile(src, nvstage.CompileOptions(archs=("sm_90",), lineinfo=True, stop="cubin",
                                                output=str(tmp_path / "two.cubin")),
                    keep=tmp_path / "two.nvstage", cwd=tmp_path)
    r = cli("show", tmp_path / "two.nvstage", "--kernel", "k", "--lineinfo")
    assert r.exit_code == 0, r.output
    head = next(ln for ln in r.stdout.splitlines() if "live registers at line" in ln)
    assert all(".cu:" in p for p in head.split(" at line")[1].split(" ", 1)[1].split(", ")), \
        head
