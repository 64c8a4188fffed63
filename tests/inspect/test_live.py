"""What is live at the peak, by the line that wrote it (issue 44, item 5).

tests/data/matmul_acc.cu keeps an 8x8 accumulator array per thread across its loops, in the
shape of llm.c's matmul_forward.cu kernel 4 (float vals[8][8]): as there, the line view puts
the peak on the inlined store helper's line, a line that does not hold the values. What is live
at the peak names the line that wrote 64 of them: the accumulate line. Then the way from the
live count to ptxas's: R1 among the live, holes below the highest register, 2 above it, and
occupancy's rounding. The walk itself is tested on a listing written here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvstage.inspect import live
from nvstage.inspect.lineview import build_lines, parse_live

SOURCE = Path(__file__).parents[1] / "data" / "matmul_acc.cu"
TEXT = SOURCE.read_text().split("\n")
ACCUMULATE = TEXT.index("          acc[ii][ji] += lhs.w * rhs[ji].w;") + 1
STORE = next(n for n, t in enumerate(TEXT, 1) if t.startswith("__device__ void store4"))


@pytest.fixture(scope="module")
def build(toolkit, tmp_path_factory):
    from nvstage.compiler.nvcc.options import CompileOptions
    from nvstage.compiler.pipeline.driver import compile

    keep = tmp_path_factory.mktemp("acc")
    return compile(SOURCE, CompileOptions(archs=("sm_90",), lineinfo=True, stop="cubin",
                                          output=str(keep / "acc.cubin")),
                   toolkit=toolkit, keep=keep, jobs=1)


@pytest.fixture(scope="module")
def kernel(build, toolkit):
    (k,) = [k for k in build_lines(build, toolkit) if "matmul_acc" in k.name]
    return k


def test_the_peak_sits_on_the_store_helper_and_holds_the_accumulators(kernel):
    at = kernel.live_at_peak
    assert at.offset == kernel.peak_offset and at.live == kernel.peak_gpr
    assert at.at[1] == STORE  # where the line view puts the peak, as llm.c's st_vec
    top = at.written[0]
    assert (top.line, len(top.registers)) == (ACCUMULATE, 64)
    assert top.text == "acc[ii][ji] += lhs.w * rhs[ji].w;"
    # their first values come from before the loops: the bias or the zeros
    assert top.also and all(n < ACCUMULATE for _, n in top.also)
    assert sum(len(w.registers) for w in at.written) == at.live


def test_the_gap_from_live_to_ptxas_count(kernel):
    gap = kernel.live_at_peak.gap
    assert gap.reported == kernel.registers == 128
    assert gap.stack_pointer and not gap.subroutines
    assert gap.peak_live + len(gap.holes) == gap.highest + 1  # every register below: one or other
    assert gap.above == 2  # no subroutine in its section: two above the highest (seen)
    assert gap.paired == len(gap.holes)  # here every hole shares a quad with a live register
    assert gap.allocated == 128


def test_narrow_counts_are_the_count_modes(kernel, build, toolkit):
    """The line view reads its counts from the narrow listing: they are -lrm count's."""
    from nvstage import proc

    cubin = next(a.path for a in build.artifacts if a.kind == "cubin")
    cp = proc.run([toolkit.tool("nvdisasm"), "--life-range-mode", "count", "-c", cubin],
                  timeout=300)
    counts = parse_live(cp.stdout)[kernel.name]
    assert {i.offset: i.live for i in kernel.instructions if i.offset in counts} == \
        {o: c for o, c in counts.items() if o in {i.offset for i in kernel.instructions}}
    assert all(len(kernel.ranges.marks(n)) == c for n, c in enumerate(kernel.ranges.counts))


def test_show_live_at_a_line_and_an_offset(cli, build):
    r = cli("show", build.keep_dir, "--kernel", "matmul_acc", "--live-at",
            f"{ACCUMULATE},0x0010", "--sections", "lines", "--json")
    assert r.exit_code == 0, r.output
    (k,) = json.loads(r.stdout)["lines"]
    peak = k["live_at_peak"]
    assert (peak["written_at"][0]["line"], peak["written_at"][0]["count"]) == (ACCUMULATE, 64)
    assert peak["registers"]["reported"] == 128 and peak["registers"]["above_highest"] == 2
    line, offset = k["live_at"]
    assert line["line"] == ACCUMULATE and offset["offset"] == 0x10
    r = cli("show", build.keep_dir, "--kernel", "matmul_acc", "--sections", "lines")
    assert f"  64  line {ACCUMULATE}  acc[ii][ji] += lhs.w * rhs[ji].w;" in r.stdout
    assert "ptxas counts 128: R125 + 1 + 2" in r.stdout


@pytest.mark.parametrize("args,said", [
    (("--live-at", "0x7"), "has no instruction at 0x7"),
    (("--live-at", "5"), "line 5 has no instruction"),
    (("--live-at", "nowhere"), "neither a source line"),
])
def test_bad_places_are_one_line(cli, build, args, said):
    r = cli("show", build.keep_dir, "--kernel", "matmul_acc", "--sections", "lines", *args)
    assert r.exit_code == 2 and said in r.stderr
    assert "Traceback" not in r.stderr


def test_live_at_needs_a_kernel(cli, build):
    r = cli("show", build.keep_dir, "--live-at", "54")
    assert r.exit_code == 2 and "give --kernel NAME" in r.stderr


def test_html_names_the_lines_with_their_colours(kernel):
    from nvstage.report.lines_html import kernel_view

    html = kernel_view(kernel, "kv-0")
    assert f"64 \u00d7 line {ACCUMULATE}</span>" in html
    assert f'data-l="0:{ACCUMULATE}"' in html.split('class="kv-live"')[1].split("</span>")[0]
    assert "ptxas counts 128" in html


# A listing in -lrm narrow's shape: R0 written before a loop and in it (a back edge), R2
# written under a predicate before the loop and once unconditionally, R3 only read.
LISTING = """\
\t.section\t.text.k,"ax",@progbits
        // +----------+
        // |   GPR    |
        // |   # 0123 |
        // +----------+
        /*0000*/  MOV R0, 0x1 ;               // |   1 ^    |
        /*0010*/  MOV R2, 0x2 ;               // |   2 : ^  |
        /*0020*/  @P0 MOV R2, 0x3 ;           // |   2 : x  |
.L_x_0:
        /*0030*/  IADD3 R0, R0, R2, RZ ;      // |   2 x v  |
        /*0040*/  MOV R2, R0 ;                // |   2 v ^  |
        /*0050*/  FADD R3, R2, R0 ;           // |   3 : :^ |
        /*0060*/  @P1 BRA `(.L_x_0) ;         // |   3 : :v |
        /*0070*/  EXIT ;                      // |          |
"""


def test_a_write_reaches_through_a_back_edge_and_past_a_predicate():
    (k,) = live.parse_ranges(LISTING).values()
    assert k.registers == (0, 1, 2, 3) and k.counts[3] == 2 and k.highest == 3
    at = k.index(0x30)
    writes = live.reaching_writes(k, at)
    assert writes[0] == (at,)  # R0 is read and written there: the value it writes
    # R2 at 0x30: the loop's own write (0x40, around the back edge), the predicated one
    # (0x20), and the one before it (0x10), which the predicate may leave
    assert writes[2] == (1, 2, 4)
    assert live.reaching_writes(k, k.index(0x50)) == {0: (3,), 2: (4,), 3: (5,)}


def test_the_lines_count_each_register_once_by_its_last_write():
    (k,) = live.parse_ranges(LISTING).values()
    lines = {0x00: 1, 0x10: 2, 0x20: 3, 0x30: 4, 0x40: 5, 0x50: 6, 0x60: 6, 0x70: 7}
    got = live.live_at(k, 0x30, lambda o: (("k.cu", lines[o]), None),
                       text_of=lambda f, n: f"line {n}", reported=8)
    assert [(w.line, w.registers, w.also) for w in got.written] == [
        (4, (0,), ()), (5, (2,), (("k.cu", 2), ("k.cu", 3)))]
    assert got.gap.holes == (1, 3) and got.gap.above == 4 and got.gap.allocated == 8


def test_a_header_that_is_not_narrows_is_left_out():
    assert live.parse_ranges(LISTING.replace("# 0123", "       ")) == {}
    with pytest.raises(Exception):
        live.live_at(live.parse_ranges(LISTING)["k"], 0x38, lambda o: ((None, None), None))


def test_with_a_subroutine_the_count_is_the_highest_plus_one(toolkit, tmp_path):
    """online_max_sum's fp64 division routine sits in its section: ptxas counts no register
    above the highest the code touches (seen on every such kernel of the corpora)."""
    from nvstage import proc
    from nvstage.inspect.lineview import cubin_lines

    cubin = tmp_path / "s.cubin"
    cp = proc.run([toolkit.nvcc, "-cubin", "-arch=sm_90", "-maxrregcount=24",
                   str(SOURCE.with_name("spill_subroutines.cu")), "-o", str(cubin)], timeout=300)
    assert cp.returncode == 0, cp.stderr
    (k,) = [k for k in cubin_lines(cubin, toolkit, arch="sm_90") if "online_max_sum" in k.name]
    gap = k.live_at_peak.gap
    assert gap.subroutines and gap.reported == 24 == gap.highest + 1 and gap.above == 0
