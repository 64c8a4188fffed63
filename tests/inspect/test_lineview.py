"""Source, SASS and live registers joined line by line: captured nvdisasm text, then real."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from nvstage.inspect import lineview, mix

CAPTURED = Path(__file__).parents[1] / "data" / "captured"
SOURCE = (CAPTURED / "lineview-peak.cu").read_text().split("\n")


def _kernel(arch: str) -> lineview.KernelLines:
    located = lineview.parse_located(
        (CAPTURED / f"cuda13.5-peak-{arch}-nvdisasm-gi.txt").read_text())
    live = lineview.parse_live((CAPTURED / f"cuda13.5-peak-{arch}-nvdisasm-lrm.txt").read_text())
    (name,) = located
    return lineview.join(name, located[name], live[name], arch=arch, image="peak.cubin",
                         source_text=lambda f: SOURCE)


def _column(text: str) -> dict[int, int]:
    """The GPR column of an ``-lrm count`` listing, read without the module's parser."""
    out = {}
    for line in text.splitlines():
        if line.lstrip().startswith("/*") and "// |" in line:
            offset = int(line.split("/*")[1].split("*/")[0], 16)
            cell = line.split("// |")[1].split("|")[0].strip()
            out[offset] = int(cell or 0)
    return out


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_live_counts_are_nvdisasms_column_exactly(arch):
    k = _kernel(arch)
    want = _column((CAPTURED / f"cuda13.5-peak-{arch}-nvdisasm-lrm.txt").read_text())
    # -lrm lists the code alone: the padding NOPs after it are in neither.
    assert {i.offset: i.gpr for i in k.instructions} == want
    assert k.padding_nops > 0


def test_the_peak_line_holds_the_peak_instruction():
    k = _kernel("sm_90")
    assert k.peak_gpr == 14
    peak_lines = {ln.line for ln in k.lines if ln.peak}
    holders = {i.line for i in k.instructions if i.gpr == 14}
    assert peak_lines == holders == {7, 8}
    assert SOURCE[6].strip().startswith("float a0")


def test_lines_without_sass_are_shown_as_such_and_inlined_code_keeps_its_caller():
    k = _kernel("sm_90")
    by = {ln.line: ln for ln in k.lines}
    assert by[10].instructions == 0 and by[10].peak_gpr is None  # the blank line
    assert by[3].instructions == 0  # mix2's closing brace
    inlined = [i for i in k.instructions if i.line == 2]
    assert inlined and all(i.inlined_at == (("/src/peak.cu", 9),) for i in inlined)
    assert {i.opcode for i in inlined} == {"FFMA"}
    assert by[2].text.strip() == "return a * b + 1.0f;"


def test_labels_and_json_records():
    k = _kernel("sm_90")
    assert any(i.label == ".L_x_1" for i in k.instructions)
    doc = k.to_json()
    first = doc["instructions"][0]
    assert set(first) >= {"offset", "text", "file", "line", "live_gpr", "live_pred",
                          "live_ugpr"}
    assert {"file", "line", "source_text", "instructions", "peak_live_gpr"} <= \
        set(doc["lines"][0])


def test_a_listing_with_a_bad_count_is_refused():
    text = ("\t.section\t.text.k,\"ax\",@progbits\n"
            "  // | GPR   | PRED   |\n"
            "        /*0000*/   MOV R1, R2 ;   // |  x1   |        |\n")
    from nvstage.errors import ArtifactError

    with pytest.raises(ArtifactError, match="not a count"):
        lineview.parse_live(text)


def test_the_mix_counts_classes_and_widths():
    m = mix.mix(_kernel("sm_90").instructions)
    assert m.counts["global_load"] == 8 and m.memory_bytes["global_load"] == 32
    assert m.counts["global_store"] == 1 and m.counts["fp32"] == 7
    assert "other" not in m.counts
    assert mix.classify("HFMA2", "HFMA2.MMA R0, -RZ, RZ, 0, 0") == "move"
    assert mix.classify("HFMA2", "HFMA2 R0, R1, R2, R3") == "fp16"
    assert mix.access_bits("LDG.E.128.CONSTANT") == 128
    assert mix.access_bits("LDS.U8") == 8 and mix.access_bits("STG.E") == 32
    assert mix.classify("WHATEVER") == "other"


def test_every_opcode_is_in_one_class():
    seen: dict[str, str] = {}
    for cls, (_, ops) in mix.CLASSES.items():
        for op in ops:
            assert op not in seen, f"{op} in {seen.get(op)} and {cls}"
            assert re.fullmatch(r"[A-Z0-9_]+", op), op
            seen[op] = cls


def test_real_nvdisasm_gives_the_same_join(toolkit, tmp_path):
    src = tmp_path / "peak.cu"
    src.write_text("\n".join(SOURCE))
    cubin = tmp_path / "peak.cubin"
    subprocess.run([toolkit.nvcc, "-cubin", "-arch", "sm_90", "-lineinfo", str(src), "-o",
                    str(cubin)], check=True, capture_output=True)
    (k,) = lineview.cubin_lines(cubin, toolkit, arch="sm_90")
    assert k.has_lineinfo and k.peak_gpr == 14
    assert {ln.line for ln in k.lines if ln.peak} == {7, 8}
    nolines = tmp_path / "plain.cubin"
    subprocess.run([toolkit.nvcc, "-cubin", "-arch", "sm_90", str(src), "-o", str(nolines)],
                   check=True, capture_output=True)
    (k,) = lineview.cubin_lines(nolines, toolkit, arch="sm_90")
    assert not k.has_lineinfo and k.lines == () and k.peak_gpr == 14


@pytest.mark.parametrize("arch, kernel, want", [
    ("sm_80", "_Z6wmma_kPK6__halfS1_Pf", {"tensor": 2}),
    ("sm_90a", "_Z2wgPfyy", {"tensor": 1, "sync": 2}),  # HGMMA and its WARPGROUP fences
    ("sm_100a", "_Z6wmma_kPK6__halfS1_Pf", {"tensor": 2}),
    ("sm_80", "_Z4miscPKdPdPfi", {"fp64": 1, "sfu": 1, "atomic": 1, "shared_load": 1,
                                 "shared_store": 1, "shuffle": 1, "sync": 1}),
])
def test_the_mix_on_captured_sass_of_three_arches(arch, kernel, want):
    """mix-kernels.cu through the 13.5 nvdisasm: every opcode classified, none 'other'."""
    from nvstage.inspect.sass import parse_nvdisasm

    kernels = parse_nvdisasm((CAPTURED / f"cuda13.5-mix-{arch}-nvdisasm.txt").read_text(),
                             demangle=False)
    for k in kernels:
        assert "other" not in mix.mix(k.code).counts, (k.name, mix.mix(k.code).opcodes)
    (k,) = [k for k in kernels if k.name == kernel]
    m = mix.mix(k.code)
    assert {c: m.counts.get(c, 0) for c in want} == want, m.opcodes


def test_line_numbers_spread_too_far_list_the_lines_with_code_alone():
    """A crafted cubin naming line 1 and line 999,999,999: no billion rows."""
    from dataclasses import replace

    located = lineview.parse_located(
        (CAPTURED / "cuda13.5-peak-sm_90-nvdisasm-gi.txt").read_text())
    (name,) = located
    far = [replace(x, line=999_999_999) if n == 3 else x
           for n, x in enumerate(located[name])]
    k = lineview.join(name, far, {}, arch="sm_90", image="peak.cubin")
    assert len(k.lines) == len({(i.file, i.line) for i in k.instructions if i.line})
    assert k.lines[-1].line == 999_999_999


def test_many_files_each_spread_wide_are_bounded_as_a_whole():
    """A source whose #line directives name 150 files, each at line 1 and line 20,001 (within
    the span one file may list): 3 million rows, gigabytes and minutes before; now the
    lines with code alone past the span the whole kernel may list."""
    from dataclasses import replace

    located = lineview.parse_located(
        (CAPTURED / "cuda13.5-peak-sm_90-nvdisasm-gi.txt").read_text())
    (name,) = located
    files = [replace(x, file=f"f{n // 2}.cu", line=1 if n % 2 else lineview.MAX_SPAN + 1)
             for n, x in enumerate(located[name])]
    k = lineview.join(name, files, {}, arch="sm_90", image="peak.cubin")
    with_code = {(i.file, i.line) for i in k.instructions if i.line}
    assert len(k.lines) <= lineview.MAX_SPAN + len(with_code)
    assert with_code <= {(ln.file, ln.line) for ln in k.lines}


def test_one_function_at_a_time_is_bounded(monkeypatch, tmp_path):
    """Where nvdisasm refuses a whole cubin's live ranges ("Invalid register count"), the
    view asks again one function at a time: a crafted cubin with 100,000 function symbols
    made 100,000 nvdisasm runs (about a second each). Past a bound, the rest get no counts."""
    from nvstage.errors import ToolkitError

    calls = []

    def run(argv, what):
        calls.append(argv)
        if "-fun" in argv or "--life-range-mode" not in argv:
            return ""
        raise ToolkitError("nvdisasm failed on k.cubin: Invalid register count : '255'")

    class Toolkit:
        def tool(self, name):
            return "nvdisasm"

    monkeypatch.setattr(lineview, "_run", run)
    monkeypatch.setattr(lineview, "_function_symbols", lambda cubin: list(range(100_000)))
    lineview._listings(tmp_path / "k.cubin", Toolkit())
    assert len(calls) <= 2 + lineview.MAX_FUNCTIONS


def test_a_big_kernel_is_printed_in_time_that_grows_with_it(monkeypatch):
    """The terminal view asked for the kernel's peak (a walk of every instruction) once per
    instruction: 12,000 instructions took a minute, 100,000 hours. Counted here as the reads
    of the instructions' live registers."""
    import io
    from dataclasses import replace

    from rich.console import Console

    from nvstage.report.terminal.lines import render_lines

    k = _kernel("sm_90")
    many = tuple(replace(k.instructions[n % len(k.instructions)], offset=16 * n)
                 for n in range(3000))
    big = lineview.join(k.name, [lineview.Located(i.offset, i.text, i.file, i.line, (), None)
                                 for i in many], {i.offset: {"GPR": 3} for i in many},
                        arch="sm_90", image="big.cubin")
    reads = []
    gpr = lineview.LineInstruction.gpr
    monkeypatch.setattr(lineview.LineInstruction, "gpr",
                        property(lambda i: reads.append(1) or gpr.fget(i)))
    render_lines([big], Console(file=io.StringIO(), width=120, color_system=None))
    assert len(reads) < 10 * len(big.instructions)


def test_thousands_of_files_are_joined_in_time_that_grows_with_them():
    """#line directives naming 10,000 files (a real build: cicc and ptxas keep them): every
    file's lines were picked out of every line's, and each PTX line's file matched against
    every file, 10^8 steps."""
    import time

    from nvstage.inspect.ptx_lines import PtxFunction, PtxInstruction

    n = 10_000
    located = [lineview.Located(16 * k, "FADD R1, R1, R2", f"/src/f{k}.cu", k + 1)
               for k in range(n)]
    ptx = PtxFunction("k", "k.ptx", "compute_90", tuple(
        PtxInstruction(k + 1, "add.f32 %f1, %f1, %f2", f"/src/f{k}.cu", k + 1)
        for k in range(n)))
    start = time.monotonic()
    k = lineview.join("k", located, {}, arch="sm_90", image="k.cubin", ptx=ptx)
    assert time.monotonic() - start < 3
    assert len(k.lines) == n and all(ln.ptx_instructions == 1 for ln in k.lines)


def test_a_line_with_a_run_of_blanks_is_read_in_linear_time():
    """A crafted cubin whose called function's name holds 3,000 spaces: nvdisasm prints
    ``CALL.REL.NOINC `($k$f<3,000 spaces>z)``, and the one pattern for the whole line
    backtracked cubically (2,000 spaces: a minute; show --lineinfo ran past 2 minutes)."""
    import time

    head = '\t.section\t.text.k,"ax",@progbits\n'
    call = "        /*0070*/   CALL.REL.NOINC `($k$f" + " " * 1000 + "z) ;"
    start = time.monotonic()
    (located,) = lineview.parse_located(head + call + "\n").values()
    live = lineview.parse_live(head + "  // | GPR | PRED |\n" + call + "   // |  3 |  1 |\n")
    assert time.monotonic() - start < 1
    assert located[0].text.endswith("z)") and live["k"] == {0x70: {"GPR": 3, "PRED": 1}}


def test_a_file_with_thousands_of_cubins_is_refused_before_any_is_read(monkeypatch):
    """A crafted fatbin (or a manifest) with 5,000 different cubins: two nvdisasm runs each,
    about three hours. Past ``MAX_CUBINS`` one error, before nvdisasm runs."""
    from types import SimpleNamespace

    from nvstage.errors import ArtifactError

    images = [(SimpleNamespace(index=n, arch_name="sm_90"), b"cubin %d" % n)
              for n in range(5000)]
    monkeypatch.setattr(lineview, "kind_of_file", lambda p: "fatbin")
    monkeypatch.setattr(lineview, "image_bytes",
                        lambda p, tk, kind: images if kind == "cubin" else [])
    monkeypatch.setattr(lineview, "cubin_lines", lambda *a, **k: pytest.fail("read one"))
    with pytest.raises(ArtifactError, match="5000 different cubins"):
        lineview.lines_of("crafted.fatbin", object())
