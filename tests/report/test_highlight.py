"""The hand-written highlighter (report/highlight.py): each token class where it belongs, and
every character of the input out again, escaped, exactly once."""

from __future__ import annotations

import html
import re

import pytest

from nvstage.report import highlight


def _text(out: str) -> str:
    """What a browser shows: the tags dropped, the entities read."""
    return html.unescape(re.sub(r"<[^>]+>", "", out))


def _classes(out: str) -> dict[str, list[str]]:
    got: dict[str, list[str]] = {}
    for cls, text in re.findall(r'<span class="t-(\w+)">(.*?)</span>', out):
        got.setdefault(cls, []).append(html.unescape(text))
    return got


@pytest.mark.parametrize("line", [
    "@!P0 LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;",
    "BRA `(.L_x_63)",
    "FFMA R0, R11, R10, -0.052303962409496307373",
    "MOV R20, 32@lo((_Z7squaresPfi + .L_x_0@srel))",
    "<script>alert(1)</script> & \"'",
])
def test_sass_tokens_and_text_kept(line):
    out = highlight.sass(line)
    assert _text(out) == line
    assert "<script>" not in out


def test_sass_classes():
    got = _classes(highlight.sass("@!P0 LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;"))
    assert got["pred"] == ["@!P0"] and got["op"] == ["LDG"]
    assert got["mod"] == [".E.128.CONSTANT"] and "R4" in got["reg"]
    assert got["cbank"] == ["desc[UR4]"]
    got = _classes(highlight.sass("LDC R1, c[0x0][0x28]"))
    assert got["cbank"] == ["c[0x0][0x28]"]
    assert _classes(highlight.sass("BRA `(.L_x_63)"))["lbl"] == ["`(.L_x_63)"]


def test_ptx_classes():
    got = _classes(highlight.ptx("@%p1 bra $L__BB0_2"))
    assert got == {"pred": ["@%p1"], "op": ["bra"], "lbl": ["$L__BB0_2"]}
    got = _classes(highlight.ptx("fma.rn.f32 %f3, %f2, %f1, 0f3F800000"))
    assert got["op"] == ["fma"] and got["mod"] == [".rn.f32"]
    assert got["reg"] == ["%f3", "%f2", "%f1"] and got["num"] == ["0f3F800000"]
    assert _text(highlight.ptx("mov.u32 %r3, %ntid.x")) == "mov.u32 %r3, %ntid.x"


def test_cuda_lines_carry_a_block_comment_over_lines():
    src = ["#include <cuda.h>", "/* one", " two */ int x = 0x1F; // tail",
           '__global__ void k(const float* __restrict__ p) { s = "a<b"; }',
           "  return 1.5f;"]
    out = highlight.cuda_lines(src)
    assert [_text(o) for o in out] == src
    assert _classes(out[0]) == {"pp": ["#include <cuda.h>"]}
    assert _classes(out[1]) == {"com": ["/* one"]}
    got = _classes(out[2])
    assert got["com"] == [" two */", "// tail"] and got["ty"] == ["int"]
    assert got["num"] == ["0x1F"]
    got = _classes(out[3])
    assert got["cu"] == ["__global__", "__restrict__"] and got["str"] == ['"a<b"']
    assert set(got["kw"]) == {"const"} and set(got["ty"]) == {"void", "float"}
    assert _classes(out[4]) == {"kw": ["return"], "num": ["1.5f"]}
    assert highlight.cuda_lines([None, ""]) == ["", ""]
