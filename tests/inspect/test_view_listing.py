"""nvstage show's listings: the PTX text per arch (whole, or one entry's with --kernel), as
Compiler Explorer shows it, beside the entry table; and what --json leaves out."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from nvstage.inspect.view import entry_spans, show
from nvstage.report.terminal.show import render_shown

PTX = """//
// a comment with .entry fake( and { braces }
//
.version 9.5
.target sm_90
.address_size 64

.visible .entry first(
\t.param .u32 first_param_0
)
{
\t/* } a closing brace in a comment */
\tret;
}

.visible .entry _Z6secondPf(
\t.param .u64 _Z6secondPf_param_0
)
.maxntid 128, 1, 1
{
\t{ // an inner block
\t}
\tret;
}
"""


def _render(shown, *, listing: bool) -> str:
    out = io.StringIO()
    render_shown(shown, Console(file=out, width=160, no_color=True), listing=listing)
    return out.getvalue()


def test_entry_spans_skip_comments_and_nest():
    assert entry_spans(PTX) == (("first", 8, 14), ("_Z6secondPf", 16, 24))
    assert entry_spans(".version 9.5\n.target sm_90\n.entry cut(\n{\n ret;") == \
        (("cut", 3, 5),)  # cut short: to the end


def test_ptx_file_listing_prints_the_text(tmp_path):
    p = tmp_path / "k.ptx"
    p.write_text(PTX)
    shown = show(p)
    text = _render(shown, listing=True)
    assert "PTX compute_90 (k.ptx, ISA 9.5, 24 lines)" in text
    for n, line in enumerate(PTX.splitlines(), 1):
        assert f"{n:>2}  {line.expandtabs(8)}".rstrip() in text, line
    # without --listing: the entry table alone
    plain = _render(shown, listing=False)
    assert "ret;" not in plain and "second(float*)" in plain
    # --json holds the entries, never the text
    doc = shown.to_json()
    assert "ptx_text" not in doc and doc["ptx"][0]["entries"][1]["name"] == "_Z6secondPf"


def test_kernel_narrows_the_listing_to_its_entry(tmp_path):
    p = tmp_path / "k.ptx"
    p.write_text(PTX)
    text = _render(show(p, kernel="second"), listing=True)
    assert "1 of its entries" in text
    assert "16  .visible .entry _Z6secondPf(" in text and "24  }" in text
    assert "first(" not in text and ".version" not in text


def test_listing_per_arch_from_a_build(toolkit, kernels, tmp_path):
    import nvstage
    from nvstage.compiler.nvcc.options import CompileOptions

    (tmp_path / "multi.cu").write_text((kernels / "multi.cu").read_text())
    nvstage.compile("multi.cu", CompileOptions(
        gencodes=("arch=compute_80,code=sm_80", "arch=compute_90,code=[sm_90,compute_90]"),
        stop="fatbin", output="multi.fatbin"), toolkit=toolkit, keep="m.keep", cwd=tmp_path)
    cases = ((tmp_path / "m.keep", ("PTX compute_80 (multi.compute_80.ptx",
                                    "PTX compute_90 (multi.compute_90.ptx")),
             (tmp_path / "multi.fatbin", ("PTX compute_90 (multi.2.compute_90.ptx",)))
    for artifact, names in cases:
        shown = show(artifact, sections="ptx", kernel="block_sum", toolkit=toolkit)
        text = _render(shown, listing=True)
        for name in names:
            assert name in text, (artifact, text[:400])
        assert text.count(".entry _Z9block_sumPKfPfi(") == len(names)
        assert ".entry histogram" not in text
        json.dumps(shown.to_json())


@pytest.mark.parametrize("kernel", [None, "saxpy"])
def test_sass_listing_folds_the_padding(built, toolkit, kernel):
    root, _ = built
    text = _render(show(root / "saxpy.sm_90.cubin", sections="sass", kernel=kernel,
                        toolkit=toolkit), listing=True)
    assert "NOP x15  // padding to the 128-byte boundary" in text
    assert "without the 15 NOPs that pad" in text
    assert " 25 " in text  # instructions, the padding left out
