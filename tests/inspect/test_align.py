"""Two kernels' lines aligned by their text (inspect/align.py) and the pairs a diff is asked
for (inspect/pairs.py): pure, no toolkit."""

from __future__ import annotations

import pytest

from nvstage.errors import UsageError
from nvstage.inspect.align import align, key
from nvstage.inspect.pairs import Pair, nothing_paired, parse


def test_keys_leave_out_comments_and_blanks():
    assert key("    sum = cg::reduce(warp, sum, cg::plus<float>{}); // sum(x)") == \
        "sum = cg::reduce(warp, sum, cg::plus<float>{});"
    assert key("  // only a comment") == "" and key(None) == ""
    assert key("    row = tl.load(ptrs)  # the row", python=True) == "row = tl.load(ptrs)"


def test_lines_align_by_text_not_position():
    a = ["float sum = 0.0f;", "for (int i = r; i < C; i += 32) {", "sum += x[i];", "}",
         "sum = cg::reduce(warp, sum, plus);", "float m = sum / C;"]
    b = ["float sum = 0.0f;", "float sum2 = 0.0f;", "for (int i = r; i < C; i += 32) {",
         "float xi = x[i];", "sum += xi;", "sum2 += xi * xi;", "}",
         "sum = cg::reduce(warp, sum, plus);", "sum2 = cg::reduce(warp, sum2, plus);",
         "float m = sum / C;"]
    got = align(a, b)
    pairs = {(i, j) for i, j in got if i is not None and j is not None}
    assert (0, 0) in pairs and (1, 2) in pairs and (4, 7) in pairs and (5, 9) in pairs
    assert (2, 4) in pairs  # "sum += x[i]" rewritten as "sum += xi": alike enough to pair
    assert (None, 1) in got and (None, 8) in got  # sum2's lines: B's alone
    # every line of both, each once, in order
    assert [i for i, _ in got if i is not None] == list(range(len(a)))
    assert [j for _, j in got if j is not None] == list(range(len(b)))


def test_unlike_lines_stay_apart():
    got = align(["float diff = x[i] - m;"], ["__syncthreads();"])
    assert got == [(0, None), (None, 0)]


def test_pairs_from_pair_and_kernel():
    assert parse(["a=b", " c = d "], "k") == [Pair("k", "k"), Pair("a", "b"), Pair("c", "d")]
    assert parse((), "x,y") == [Pair("x", "y")]
    assert parse(["a=b", "a=b"]) == [Pair("a", "b")]
    for bad in (["a"], ["=b"], ["a="]):
        with pytest.raises(UsageError, match="give A=B"):
            parse(bad)
    with pytest.raises(UsageError, match="NAME_A,NAME_B"):
        parse((), "a,b,c")


def test_nothing_paired_names_each_side():
    e = nothing_paired(["softmax_kernel"], ["softmax_forward_kernel"])
    assert e.message == "nothing paired: A has softmax_kernel; B has softmax_forward_kernel"
    assert "--pair softmax_kernel=softmax_forward_kernel" in e.hint
    e = nothing_paired([f"k{i}" for i in range(12)], [])
    assert "k7 and 4 more" in e.message and "B has no kernels" in e.message
