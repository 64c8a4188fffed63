"""The PTX reader on captured and freshly built PTX, and fuzzed."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from nvstage.errors import ArtifactError, NvstageError
from nvstage.inspect.ptx import parse_param, parse_ptx


def test_aggregates_launch_bounds_and_templates(captured):
    m = parse_ptx((captured / "params.sm_90.ptx").read_text())
    assert (m.version, m.target, m.address_size) == ("9.5", "sm_90", 64)
    agg = m.entry("aggregates")
    assert agg.demangled == "aggregates(Pair, Vec4, char, double, float*)"
    assert agg.max_ntid == (128, 1, 1)
    shapes = [(p.ptx_type, p.size, p.align, p.is_pointer) for p in agg.params]
    assert shapes == [("b8", 16, 8, False), ("b8", 16, 16, False), ("u8", 1, 1, False),
                      ("f64", 8, 8, False), ("u64", 8, 8, True)]
    fill = m.entry("fill<short>")
    assert fill.name == "_Z4fillIsEvPT_S0_y" and fill.max_ntid is None
    assert [(p.ptx_type, p.size) for p in fill.params] == [("u64", 8), ("u16", 2), ("u64", 8)]


def test_every_entry_and_line_count(captured):
    text = (captured / "multi.sm_80.ptx").read_text()
    m = parse_ptx(text)
    assert m.target == "sm_80" and m.line_count == len(text.splitlines())
    assert [e.name for e in m.entries] == re.findall(r"\.entry (\w+)\(", text)
    assert m.entry("block_sum").demangled == "block_sum(float const*, float*, int)"
    assert m.entry("histogram").demangled == "histogram"  # extern "C": nothing to demangle
    for e in m.entries:
        assert 0 < e.line_count < m.line_count


def test_ptx_from_the_toolkit_matches_ptxas_view(built, reference):
    root, builds = built
    ptx = next(a.path for a in builds["spill16"].artifacts if a.kind == "ptx")
    m = parse_ptx(open(ptx).read())
    # ptxas compiles exactly the entries the reader found.
    out = reference("ptxas", "-arch=sm_90", "-v", ptx, "-o", str(root / "check.cubin"))
    assert [e.name for e in m.entries] == re.findall(r"Compiling entry function '(\w+)'", out)
    assert [p.size for p in m.entries[0].params] == [8, 8, 4, 4]


def test_not_ptx_and_truncated():
    for bad in ("", "hello", ".version 9.5\n"):
        try:
            parse_ptx(bad)
        except ArtifactError as e:
            assert "not PTX" in str(e)
        else:
            raise AssertionError(bad)
    cut = ".version 9.5\n.target sm_90\n.visible .entry k(\n.param .u32 a\n)\n{\n ret;\n"
    try:
        parse_ptx(cut)
    except ArtifactError as e:
        assert "not closed" in str(e)
    else:
        raise AssertionError("truncated PTX accepted")


def test_parameter_declarations():
    assert parse_param(".param .u64 .ptr .global .align 1 p").is_pointer
    assert parse_param(".param .align 4 .b8 s[12]").size == 12
    assert parse_param(".param .f16x2 h").size == 4
    for bad in (".param .u64", ".param .q32 x", ".param .align 3 .b8 s[4]"):
        try:
            parse_param(bad)
        except ArtifactError:
            pass
        else:
            raise AssertionError(bad)


_PTX_WORDS = st.sampled_from([".version 9.5", ".target sm_90", ".entry k(", ".param .u32 a",
                              ".param .align 8 .b8 s[", ")", "{", "}", ",", ".maxntid 1,2",
                              "//", "/*", "\n", " ", ".visible", ".address_size 64", "x"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_PTX_WORDS, max_size=40).map(" ".join) | st.text(max_size=400))
def test_fuzz_odd_text_is_a_clear_error(text):
    try:
        m = parse_ptx(text, demangle=False)
    except NvstageError as e:
        assert str(e)
    else:
        assert m.version and m.target


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_fuzz_truncated_real_ptx(captured, data):
    text = (captured / "params.sm_90.ptx").read_text()
    cut = data.draw(st.integers(0, len(text)))
    try:
        parse_ptx(text[:cut], demangle=False)
    except ArtifactError:
        pass
