"""PTX per source line (inspect/ptx_lines.py): captured cicc 13.5 output of the test kernels
lineview-stencil.cu and lineview-callee.cu (built with -lineinfo for sm_90; the .file path
written as /src/...), then the join with the SASS line view on a real build."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvstage.inspect.ptx_lines import match_file, parse_ptx_lines

CAPTURED = Path(__file__).parents[1] / "data" / "captured"


def _stencil():
    (fn,) = parse_ptx_lines((CAPTURED / "cuda13.5-stencil-sm_90-lineinfo.ptx").read_text(),
                            module="stencil.ptx")
    return fn


def test_each_instruction_has_the_line_its_loc_gave():
    fn = _stencil()
    assert fn.name == "_Z7stencilPKfPfii" and fn.arch == "compute_90" and fn.has_lineinfo
    first = fn.instructions[0]
    # `.loc 1 12 0` opens the body: the parameter loads belong to the kernel's own line
    assert (first.file, first.line, first.number) == ("/src/stencil.cu", 12, 31)
    assert first.text == "ld.param.u64 %rd3, [_Z7stencilPKfPfii_param_0]"
    assert first.opcode == "ld.param.u64"
    per = fn.per_line()
    assert per[("/src/stencil.cu", 19)] == 1  # __syncthreads(): one bar.sync
    assert per[("/src/stencil.cu", 9)] == 5  # clamp01's return: cvt.sat, one per unrolled copy
    assert sum(per.values()) + sum(1 for i in fn.instructions if i.line is None) == \
        len(fn.instructions) == 124


def test_inlined_code_keeps_its_chain_of_calls_and_its_function_name():
    fn = _stencil()
    smooth = [i for i in fn.instructions if i.line == 4]
    clamp = [i for i in fn.instructions if i.line == 8]
    # smooth (line 4) inlined into clamp01 at line 8, itself inlined into the kernel at 22
    assert smooth and {i.inlined_at for i in smooth} == {(("/src/stencil.cu", 8),
                                                           ("/src/stencil.cu", 22))}
    assert {i.function for i in smooth} == {"_Z6smoothfff"}
    assert {i.inlined_at for i in clamp} == {(("/src/stencil.cu", 22),)}
    assert {i.function for i in clamp} == {"_Z7clamp01f"}
    assert all(i.function is None for i in fn.instructions if i.line == 22)


def test_line_zero_is_no_line_and_labels_ride_on_the_next_instruction():
    fn = _stencil()
    nowhere = [i for i in fn.instructions if i.line is None]
    assert nowhere and all(i.file == "/src/stencil.cu" for i in nowhere)  # `.loc 1 0 3`
    labelled = {i.label: i for i in fn.instructions if i.label}
    assert labelled["$L__BB0_2"].text.startswith("shl.b32")
    assert "$L__BB0_13" in labelled


def test_a_func_and_a_call_spread_over_lines():
    twice, caller = parse_ptx_lines(
        (CAPTURED / "cuda13.5-callee-sm_90-lineinfo.ptx").read_text())
    assert twice.name == "_Z5twicef" and caller.name == "_Z6callerPf"
    assert [i.line for i in twice.instructions] == [1, 2, 2, 2]
    call = next(i for i in caller.instructions if i.opcode == "call.uni")
    # the statement runs over five lines; it is one instruction, numbered where it starts
    assert call.text == "call.uni (retval0), _Z5twicef, ( param0 )" and call.number == 52
    assert len(caller.instructions) == 11


def test_ptx_without_line_info_has_none():
    text = (CAPTURED / "multi.sm_80.ptx").read_text()
    fns = parse_ptx_lines(text)
    assert fns and not any(f.has_lineinfo for f in fns)
    assert all(i.file is None for f in fns for i in f.instructions)


@pytest.mark.parametrize("text", [
    ".version 9.5\n.target sm_90\n.visible .entry k(\n)\n{\n.loc 1 3 0\nret;\n",  # not closed
    ".version 9.5\n.target sm_90\n.entry k()\n{\n" + "add.s32 %r1, %r1, 1\n" * 5000 + "}\n",
    ".version 9.5\n.target sm_90\n.entry k()\n{\n.loc 99999 4 0\n.loc 1 0 0, function_name "
    "$nope, inlined_at 7 7 7\nret;\n}\n$L__info_string0:\n.b8 999,1234,-1,\n",
])
def test_crafted_text_reads_without_failing(text):
    """A body never closed, a statement never ended, a .loc naming no file: read, bounded."""
    fns = parse_ptx_lines(text)
    assert len(fns) <= 1
    for f in fns:
        assert all(len(i.text) <= 70_000 for i in f.instructions)


def test_a_ptx_file_name_is_matched_to_nvdisasms():
    assert match_file("/src/k.cu", ["/src/k.cu", "/src/h.cuh"]) == "/src/k.cu"
    assert match_file("k.cu", ["/build/src/k.cu"]) == "/build/src/k.cu"
    assert match_file("k.cu", ["/a/k.cu", "/b/k.cu"]) == "k.cu"  # two: neither is chosen
    assert match_file(None, ["/a/k.cu"]) is None


def test_the_line_view_counts_ptx_per_line_and_the_mix(toolkit, tmp_path):
    """A keep folder's PTX joined to its cubin's lines: PTX-only lines join the span."""
    import nvstage
    from nvstage.inspect.lineview import build_lines

    src = tmp_path / "stencil.cu"
    src.write_text((CAPTURED / "lineview-stencil.cu").read_text())
    build = nvstage.compile(src, nvstage.CompileOptions(archs=("sm_90",), lineinfo=True,
                                                        stop="cubin",
                                                        output=str(tmp_path / "s.cubin")),
                            keep=tmp_path / "s.nvstage", cwd=tmp_path, toolkit=toolkit)
    (k,) = build_lines(build, toolkit)
    assert k.ptx is not None and k.ptx.module == "stencil.ptx" and k.ptx.arch == "compute_90"
    by = {ln.line: ln for ln in k.lines}
    assert by[9].instructions == 0 and by[9].ptx_instructions == 5  # PTX, no SASS of its own
    assert by[19].ptx_instructions == 1 and by[19].mix == {"sync": 1}
    assert by[4].mix == {"fp32": by[4].instructions}
    assert sum(sum(ln.mix.values()) for ln in k.lines) == \
        sum(1 for i in k.instructions if i.line is not None)
    assert k.mix.total == len(k.instructions)
    doc = k.to_json()
    assert doc["mix"]["counts"]["sync"] == k.mix.counts["sync"]
    assert doc["ptx"]["instructions"][0]["line"] == 12
    assert {ln["line"]: ln["ptx_instructions"] for ln in doc["lines"]}[9] == 5


def test_a_chain_of_inlined_calls_is_bounded():
    """A crafted PTX whose every .loc is inlined at the one before it: the chain of calls grew
    by one per line (20,000 lines took seconds and 20,000-long chains, a million hours)."""
    import time

    body = ".loc 1 1 0, function_name $s, inlined_at 1 1 0\nadd.s32 %r1, %r1, 1;\n" * 20_000
    text = (".version 9.5\n.target sm_90\n.visible .entry k()\n{\n" + body + "ret;\n}\n"
            '.file 1 "k.cu"\n')
    start = time.monotonic()
    (fn,) = parse_ptx_lines(text)
    assert time.monotonic() - start < 5
    assert len(fn.instructions) == 20_001
    assert max(len(i.inlined_at) for i in fn.instructions) <= 64
