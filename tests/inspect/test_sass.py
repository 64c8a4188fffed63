"""SASS per kernel against nvdisasm's own structured listing; line info; fuzzed."""

from __future__ import annotations

import json
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from nvstage.errors import NvstageError
from nvstage.inspect.sass import disassemble, parse_nvdisasm


def _nvdisasm_json(reference, cubin) -> dict[str, list[str]]:
    doc = json.loads(reference("nvdisasm", "-json", cubin))
    return {f["function-name"]: [i["opcode"] for i in f["sass-instructions"]] for f in doc[1]}


def test_counts_match_nvdisasm_json(built, toolkit, reference):
    root, builds = built
    for cubin in (root / "saxpy.sm_90.cubin",
                  next(a.path for a in builds["spill16"].artifacts if a.kind == "cubin")):
        ref = _nvdisasm_json(reference, cubin)
        kernels = disassemble(cubin, toolkit)
        assert {k.name for k in kernels} == set(ref)
        for k in kernels:
            assert k.instruction_count == len(ref[k.name])
            assert k.opcode_counts == dict(Counter(op.split(".")[0] for op in ref[k.name]))
            assert [i.mnemonic for i in k.instructions] == ref[k.name]


def test_lineinfo_interleaves_source(built, toolkit):
    root, _ = built
    (k,) = disassemble(root / "saxpy.sm_90.cubin", toolkit, lineinfo=True)
    lines = {i.source for i in k.instructions if i.source}
    assert lines and all(s.startswith(str(root / "saxpy.cu") + ":") or
                         s.endswith(tuple(f"saxpy.cu:{n}" for n in range(1, 7)))
                         for s in lines)
    (plain,) = disassemble(root / "saxpy.sm_90.cubin", toolkit)
    assert all(i.source is None for i in plain.instructions)


def test_object_images_one_at_a_time(built, toolkit, reference):
    root, _ = built
    kernels = disassemble(root / "multi.o", toolkit)
    assert sorted({k.arch for k in kernels}) == ["sm_80", "sm_90"]
    assert len({k.image for k in kernels}) == 2 and len(kernels) == 10
    # Same instruction count per kernel and arch as cuobjdump -sass on the object.
    listing = reference("cuobjdump", "-sass", root / "multi.o")
    ref: Counter = Counter()
    arch = func = None
    for line in listing.splitlines():
        if line.strip().startswith("code for sm_"):
            arch = line.split()[-1]
        elif "Function :" in line:
            func = line.split(":", 1)[1].strip()
        elif line.strip().startswith("/*") and "*/ " in line and line.strip()[2:6].isalnum() \
                and not line.strip().startswith("/* 0x"):
            ref[(func, arch)] += 1
    assert {(k.name, k.arch): k.instruction_count for k in kernels} == dict(ref)


def test_captured_listing(captured):
    (k,) = parse_nvdisasm((captured / "cuda13.5-saxpy-nvdisasm-g.txt").read_text())
    assert (k.name, k.arch, k.is_entry) == ("saxpy", "sm_90", True)
    assert k.instructions[0].offset == 0 and k.instructions[1].offset == 16
    assert k.instructions[1].source.endswith("saxpy.cu:4")
    assert sum(k.opcode_counts.values()) == k.instruction_count


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([
    "\t.target\tsm_90", "\t.section\t.text.k,\"ax\",@progbits",
    "        .other          k,@\"STO_CUDA_ENTRY STV_DEFAULT\"",
    "        /*0000*/                   LDC R1, c[0x0][0x28] ;",
    "        /*0010*/               @P0 EXIT ;", "        /*zz*/ ;",
    "\t//## File \"a.cu\", line 3", "", "junk"]), max_size=30).map("\n".join)
    | st.text(max_size=300))
def test_fuzz_nvdisasm(text):
    try:
        kernels = parse_nvdisasm(text, demangle=False)
    except NvstageError as e:
        assert str(e)
    else:
        assert all(k.instruction_count == sum(k.opcode_counts.values()) for k in kernels)


def test_branch_target_labels_are_kept_before_their_instruction():
    from nvstage.inspect.sass import parse_nvdisasm

    text = """
        .section        .text.k,"ax",@progbits
        .type           k,@function
k:
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/              @!P0 BRA `(.L_x_2) ;
.L_x_2:
        /*0020*/                   EXIT ;
"""
    (k,) = parse_nvdisasm(text, arch="sm_90", demangle=False)
    assert [i.label for i in k.instructions] == [None, None, ".L_x_2"]
    assert k.instructions[2].to_json()["label"] == ".L_x_2"
