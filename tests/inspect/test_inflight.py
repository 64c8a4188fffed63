"""inspect.inflight and inspect.loops: global loads in flight per warp and loop trip counts, on
captured nvdisasm listings (CUDA 13.5, sm_90), on small hand-written listings, and on real
nvdisasm output of the bundled kernels."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvstage.inspect.inflight import in_flight
from nvstage.inspect.loops import find_loops, multiplicities, trip_list
from nvstage.inspect.sass import parse_nvdisasm

CAPTURED = Path(__file__).resolve().parents[1] / "data" / "captured"


def _kernels(name: str) -> dict:
    text = (CAPTURED / f"cuda13.5-{name}-sm_90-nvdisasm.txt").read_text()
    return {k.demangled.split("(")[0]: k for k in parse_nvdisasm(text)}


def _listing(body: str):
    """A one-function nvdisasm listing from ``body``: one instruction or label per line."""
    lines = ["\t.target\tsm_90", "\t.section\t.text._Z1kv,\"ax\",@progbits",
             "\t.other\t_Z1kv,@\"STO_CUDA_ENTRY STV_DEFAULT\"", "_Z1kv:"]
    offset = 0
    for ln in body.strip().splitlines():
        ln = ln.strip()
        if ln.endswith(":"):
            lines.append(ln)
        else:
            lines.append(f"        /*{offset:04x}*/                   {ln} ;")
            offset += 16
    return parse_nvdisasm("\n".join(lines), demangle=False)[0].code


@pytest.mark.parametrize("kernel,loads,bytes_", [
    ("scale", 1, 4), ("add_bias", 2, 8), ("gelu_act", 1, 4), ("fused", 2, 8),
    ("fused_wide", 64, 256),
])
def test_the_chain_kernels_loads_in_flight(kernel, loads, bytes_):
    fl = in_flight(_kernels("fusion_chain")[kernel].code)
    # one batch each, used by the arithmetic after it; fused_wide's 32 x and 32 b loads all
    # go out before the first FFMA (the "32 loads in flight" per thread, times two)
    assert [(b.loads, b.bytes_per_thread, b.loop) for b in fl.batches] == [(loads, bytes_, None)]
    assert fl.max_loads == loads and fl.loops == ()
    assert fl.round_trips() == 1 and fl.batches[0].wait is not None


def test_fused_waits_at_the_first_use_of_a_loaded_register():
    k = _kernels("fusion_chain")["fused"]
    b = in_flight(k.code).batches[0]
    by_offset = {i.offset: i for i in k.code}
    assert by_offset[b.first].text.startswith("LDG.E.CONSTANT R4")
    assert by_offset[b.wait].text.startswith("FFMA R3, R4, UR6, R7")


def test_matmul_tiled_two_loads_per_tile_in_its_one_loop():
    k = _kernels("matmul_tiled")["matmul_tiled"]
    fl = in_flight(k.code)
    assert len(fl.loops) == 1 and fl.loops[0].depth == 1
    assert [(b.loads, b.loop) for b in fl.batches] == [(2, 0)]
    # k / 32 = 32 tiles: 32 round trips per thread
    assert fl.round_trips([32]) == 32 and fl.loads_per_round_trip([32]) == 2
    assert fl.bytes_per_round_trip([32]) == 8


def test_reduce_partial_one_dependent_load_per_iteration():
    k = _kernels("reduce")["reduce_partial"]
    fl = in_flight(k.code)
    # the grid-stride loop (its LDG feeds an FADD before the branch back), then the tree
    assert len(fl.loops) == 2 and all(lp.depth == 1 for lp in fl.loops)
    assert [(b.loads, b.loop) for b in fl.batches] == [(1, 0)]
    assert fl.round_trips([64, 8]) == 64


def test_pointer_chasing_is_one_batch_per_load():
    code = _listing("""
        LDG.E R2, desc[UR4][R4.64]
        IMAD.WIDE R6, R2, 0x4, R8
        LDG.E R3, desc[UR4][R6.64]
        IMAD.WIDE R6, R3, 0x4, R8
        LDG.E R5, desc[UR4][R6.64]
        STG.E desc[UR4][R10.64], R5
        EXIT
    """)
    fl = in_flight(code)
    assert [b.loads for b in fl.batches] == [1, 1, 1]
    assert [b.wait for b in fl.batches] == [0x10, 0x30, 0x50]


def test_wide_loads_cover_their_registers_and_a_store_uses_them():
    code = _listing("""
        LDG.E.128 R4, desc[UR4][R2.64]
        LDG.E.64 R12, desc[UR4][R2.64+0x10]
        IADD3 R20, R21, 0x1, RZ
        STG.E.64 desc[UR4][R14.64], R8
        FADD R0, R7, R13
        EXIT
    """)
    fl = in_flight(code)
    # R4..R7 and R12, R13 in flight; the 64-bit store's address R14.64 reads R14 and R15 (not
    # loaded), its data R8, R9 (not loaded): the FADD reading R7 is the first use
    assert [(b.loads, b.bytes_per_thread, b.wait) for b in fl.batches] == [(2, 24, 0x40)]


def test_overwriting_a_loaded_register_waits_for_the_load():
    code = _listing("""
        LDG.E R2, desc[UR4][R4.64]
        LDG.E R3, desc[UR4][R6.64]
        MOV R3, RZ
        EXIT
    """)
    assert [(b.loads, b.wait) for b in in_flight(code).batches] == [(2, 0x20)]


def test_uniform_registers_and_rz_are_not_general_registers():
    code = _listing("""
        LDG.E R4, desc[UR4][R2.64]
        IADD3 UR4, UR4, 0x20, URZ
        MOV R1, RZ
        FADD R0, R4, R4
        EXIT
    """)
    assert in_flight(code).batches[0].wait == 0x30


def test_loops_nested_and_the_trap_after_exit():
    code = _listing("""
        MOV R0, RZ
        .L_x_0:
        MOV R1, RZ
        .L_x_1:
        LDG.E R2, desc[UR4][R4.64]
        FADD R0, R0, R2
        @P0 BRA `(.L_x_1)
        @P1 BRA `(.L_x_0)
        EXIT
        .L_x_2:
        BRA `(.L_x_2)
    """)
    loops = find_loops(code)
    assert [(lp.label, lp.head, lp.tail, lp.depth) for lp in loops] == [
        (".L_x_0", 0x10, 0x50, 1), (".L_x_1", 0x20, 0x40, 2)]
    fl = in_flight(code)
    assert [(b.loads, b.loop) for b in fl.batches] == [(1, 1)]
    assert fl.round_trips([3, 5]) == 15  # the inner body runs 3 x 5 times
    weights = multiplicities(code, loops, [3, 5])
    assert weights == [1, 3, 15, 15, 15, 3, 1, 1]
    assert multiplicities(code, loops, 2) == [1, 2, 4, 4, 4, 2, 1, 1]
    with pytest.raises(ValueError, match="1 trip count for 2 loops"):
        trip_list(loops, [7])


def test_real_nvdisasm_of_the_bundled_kernels(toolkit, kernels, tmp_path):
    """The captured listings are what this toolkit's nvdisasm gives for these kernels today."""
    from nvstage import proc
    from nvstage.inspect.sass import disassemble

    expect = {"fused_wide": 64, "fused": 2, "scale": 1, "add_bias": 2, "gelu_act": 1,
              "matmul_tiled": 2, "reduce_partial": 1, "reduce_final": 1}
    got = {}
    for src in ("fusion_chain.cu", "matmul_tiled.cu", "reduce.cu"):
        out = tmp_path / (src + ".cubin")
        cp = proc.run([toolkit.nvcc, "-cubin", "-arch=sm_90", "-o", str(out),
                       str(kernels / src)], timeout=300)
        assert cp.returncode == 0, cp.stderr
        for k in disassemble(out, toolkit):
            got[k.demangled.split("(")[0]] = in_flight(k.code).max_loads
    assert got == expect
