"""SASS per kernel against nvdisasm's own structured listing; line info; fuzzed."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from nvstage.errors import NvstageError
from nvstage.inspect.sass import disassemble, parse_nvdisasm

ROOT = Path(__file__).resolve().parents[2]


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
            ops = ref[k.name]
            # ptxas pads to 128 bytes with NOPs after the last instruction: counted apart
            pad = len(ops) - len("".join("x" if o != "NOP" else " " for o in ops).rstrip())
            assert pad > 0 and k.padding == pad and (len(ops) * 16) % 128 == 0
            assert k.instruction_count == len(ops) - pad
            assert k.opcode_counts == dict(Counter(op.split(".")[0] for op in ops[:-pad]))
            assert "NOP" not in k.opcode_counts
            assert [i.mnemonic for i in k.instructions] == ops


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
    assert {(k.name, k.arch): k.instruction_count + k.padding for k in kernels} == dict(ref)


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


_PADDED = """
        .section        .text.k,"ax",@progbits
        .other          k,@"STO_CUDA_ENTRY STV_DEFAULT"
k:
        /*0000*/                   MOV R1, c[0x0][0x28] ;
        /*0010*/                   NOP ;
        /*0020*/               @P0 NOP ;
        /*0030*/                   EXIT ;
.L_x_0:
        /*0040*/                   BRA `(.L_x_0) ;
        /*0050*/                   NOP ;
        /*0060*/                   NOP ;
        /*0070*/                   NOP ;
"""


def test_padding_nops_are_counted_apart():
    (k,) = parse_nvdisasm(_PADDED, arch="sm_90", demangle=False)
    # the three NOPs after the last instruction pad to 128 bytes; the NOP inside is issued
    assert (k.padding, k.instruction_count, len(k.instructions)) == (3, 5, 8)
    assert k.opcode_counts == {"NOP": 2, "MOV": 1, "EXIT": 1, "BRA": 1}
    assert [i.offset for i in k.code][-1] == 0x40
    d = k.to_json()
    assert d["instruction_count"] == 5 and d["padding_nops"] == 3
    assert len(d["instructions"]) == 8  # the listing itself stays whole


def test_lineinfo_listing_shows_the_source_line_text(toolkit, tmp_path):
    import nvstage
    from nvstage.compiler.nvcc.options import CompileOptions
    from nvstage.inspect.sass import build_sass

    src = tmp_path / "saxpy.cu"
    src.write_text((ROOT / "kernels" / "saxpy.cu").read_text())
    build = nvstage.compile("saxpy.cu", CompileOptions(archs=("sm_90",), stop="cubin",
                                                       lineinfo=True, output="s.cubin"),
                            toolkit=toolkit, keep="s.keep", cwd=tmp_path)
    (k,) = build_sass(build, toolkit)
    lines = src.read_text().splitlines()
    shown = {i.source.rpartition(":")[2]: i.source_text for i in k.instructions if i.source}
    assert shown and all(text == lines[int(n) - 1].strip() for n, text in shown.items())
    assert shown["5"] == "y[i] = a * x[i] + y[i];"
    assert "source_text" in next(i.to_json() for i in k.instructions if i.source)

    # unreadable, it keeps the locations: a FIFO is never opened (no hang), a file past the
    # bound is not read, a missing one is no error
    src.unlink()
    os.mkfifo(src)
    (k,) = build_sass(build, toolkit)
    assert any(i.source for i in k.instructions)
    assert all(i.source_text is None for i in k.instructions)


def test_only_the_file_the_manifest_names_is_read(tmp_path, monkeypatch):
    from nvstage.inspect import sass
    from nvstage.inspect.sass import SassInstruction, SassKernel, with_source_text

    (tmp_path / "k.cu").write_text("line one\n\tline\x1b[31m two\r\n")
    (tmp_path / "other.h").write_text("secret\nsecret\n")
    k = SassKernel("k", "sm_90", (
        SassInstruction(0, "MOV", "MOV R1, R2", f"{tmp_path}/k.cu:2"),
        SassInstruction(16, "MOV", "MOV R1, R2", "other.h:1"),
        SassInstruction(32, "MOV", "MOV R1, R2", "k.cu:9"),  # past the end
        SassInstruction(48, "EXIT", "EXIT", "./k.cu:1")))
    read = []
    real = sass.source_lines
    monkeypatch.setattr(sass, "source_lines", lambda p, **kw: read.append(p) or real(p, **kw))
    (out,) = with_source_text([k], "k.cu", str(tmp_path))
    assert [i.source_text for i in out.instructions] == ["line?[31m two", None, None,
                                                         "line one"]
    assert read == [os.path.join(str(tmp_path), "k.cu")]  # once, and only the source

    monkeypatch.setattr(sass, "MAX_SOURCE_BYTES", 8)
    assert real(tmp_path / "k.cu") is None  # past the bound: not read


def test_a_manifest_naming_a_file_that_is_no_source_gets_no_text(tmp_path):
    """A crafted keep folder whose manifest names ~/.aws/credentials as its source, and whose
    cubin's line info (#line 1 "...credentials") names the same file: show --lineinfo and the
    HTML report printed the file. Only a file with a C, C++ or CUDA source's suffix is read,
    by its real name (a link named k.cu to the secret is no source either)."""
    from nvstage.inspect.sass import source_reader

    secret = tmp_path / "credentials"
    secret.write_text("aws_secret_access_key = s3cr3t\n")
    assert source_reader(str(secret), str(tmp_path))(str(secret)) is None
    (tmp_path / "k.cu").symlink_to(secret)
    assert source_reader("k.cu", str(tmp_path))("k.cu") is None
    (tmp_path / "real.cu").write_text("__global__ void k() {}\n")
    assert source_reader("real.cu", str(tmp_path))("real.cu") == ["__global__ void k() {}", ""]


def test_a_line_with_a_run_of_blanks_is_read_in_linear_time():
    """The same crafted name in ``show``'s SASS: the listing's pattern backtracked worse than
    cubically on a run of blanks (300 blanks: seconds; show --sections sass of a 13 KB cubin
    ran past 2 minutes)."""
    import time

    from nvstage.inspect.sass import parse_nvdisasm

    text = ('\t.section\t.text.k,"ax",@progbits\n.text.k:\n'
            "        /*0070*/   CALL.REL.NOINC `($k$f" + " " * 300 + "z) ;  /* 0x0 */\n")
    start = time.monotonic()
    (k,) = parse_nvdisasm(text)
    assert time.monotonic() - start < 1
    assert k.instructions[0].text.endswith("z)") and k.instructions[0].opcode == "CALL"
