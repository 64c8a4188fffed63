"""``nvstage diff`` on real code (issue 44, items 3 and 8): explicit pairs (``--pair A=B``),
two versions of one kernel aligned by their source, local-memory traffic per line, nothing
paired said as such, and why a kernel changed (PTX as well as SASS, the register cap,
``__launch_bounds__`` over ``-maxrregcount``, each kernel's own SASS bytes).

tests/data/layernorm_versions.cu is in the shape of llm.c's dev/cuda/layernorm_forward.cu
(kernel3, kernel4, kernel5 of one operation in one file); tests/data/softmax_rows.cu of its
softmax_forward.cu, to pair with tests/data/triton/fused_softmax.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data"
LN = DATA / "layernorm_versions.cu"
K3, K4, K5 = (f"layernorm_forward_kernel{n}" for n in (3, 4, 5))


@pytest.fixture(scope="module")
def builds(tmp_path_factory, kernels):
    """layernorm_versions.cu with -lineinfo, and again with -maxrregcount=24; softmax_rows.cu;
    kernels/spill.cu at 64 and 32 registers: kept for sm_90."""
    import nvstage

    folder = tmp_path_factory.mktemp("diffpairs")
    for name, source, regs in (("ln", LN, None), ("ln24", LN, 24),
                               ("sm", DATA / "softmax_rows.cu", None),
                               ("s64", kernels / "spill.cu", 64),
                               ("s32", kernels / "spill.cu", 32)):
        nvstage.compile(source, nvstage.CompileOptions(
            archs=("sm_90",), lineinfo=True, stop="cubin", maxrregcount=regs,
            output=str(folder / f"{name}.cubin")), keep=folder / f"{name}.nvstage", cwd=folder)
    return folder


def _line(text: str, after: str) -> int:
    """The number of the first line of layernorm_versions.cu holding ``text`` after the
    line holding ``after``."""
    lines = LN.read_text().splitlines()
    start = next(n for n, ln in enumerate(lines) if after in ln)
    return next(n for n, ln in enumerate(lines) if n > start and text in ln) + 1


def _row(doc, side: str, line: int) -> dict:
    (row,) = [r for r in doc["lines"] if r[side] and r[side]["line"] == line]
    return row


def test_two_versions_of_one_kernel_align_by_source(cli, builds):
    r = cli("diff", builds / "ln.nvstage", "--pair", f"{K3}={K4}", "--lineinfo", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    reduce3 = _line("sum = cg::reduce(warp, sum,", f"void {K3}(")
    reduce4 = _line("sum = cg::reduce(warp, sum,", f"void {K4}(")
    row = _row(doc, "a", reduce3)
    # one line of A's, one of B's, by text: not the same number
    assert row["b"]["line"] == reduce4 != reduce3 and row["same_text"]
    # cg::reduce's shuffles and adds, inlined from <cooperative_groups.h>, count to the call
    assert row["a"]["instructions"] >= 10 and row["b"]["instructions"] > 0
    assert row["a"]["file"] == row["b"]["file"] == "layernorm_versions.cu"
    only_b = _row(doc, "b", _line("sum2 = cg::reduce", f"void {K4}("))
    assert only_b["only_in"] == "b" and only_b["a"] is None and only_b["b"]["instructions"]
    only_a = _row(doc, "a", _line("float diff = x[i] - m;", f"void {K3}("))
    assert only_a["only_in"] == "a" and only_a["a"]["instructions"]
    rewritten = _row(doc, "a", _line("sum += x[i];", f"void {K3}("))
    assert rewritten["b"]["line"] == _line("sum += xi;", f"void {K4}(")
    assert not rewritten["same_text"]
    assert doc["aligned"]["only_a"] > 0 and doc["aligned"]["only_b"] > 0
    # every line of A's with code is in a row, and every row of two lines is in order
    both = [(x["a"]["line"], x["b"]["line"]) for x in doc["lines"] if x["a"] and x["b"]]
    assert both == sorted(both) and [b for _, b in both] == sorted(b for _, b in both)
    # --kernel A,B is the same pair
    same = cli("diff", builds / "ln.nvstage", "--kernel", f"{K3},{K4}", "--lineinfo", "--json")
    assert json.loads(same.stdout) == doc
    text = cli("diff", builds / "ln.nvstage", "--pair", f"{K3}={K4}", "--lineinfo").stdout
    assert "aligned by source:" in text and "B: sum += xi;" in text


def test_innermost_attribution_leaves_the_call_line_without_code(cli, builds):
    r = cli("diff", builds / "ln.nvstage", "--pair", f"{K3}={K4}", "--lineinfo",
            "--attribute", "innermost", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["attribute"] == "innermost"
    row = [x for x in doc["lines"] if x["a"] and x["a"]["line"] ==
           _line("sum = cg::reduce(warp, sum,", f"void {K3}(")]
    assert not row or row[0]["a"]["instructions"] == 0
    assert any(x["file"].startswith("<cooperative_groups") for x in doc["lines"])


def test_local_traffic_per_line_and_ptxas_alone(cli, builds):
    r = cli("diff", builds / "s64.nvstage", builds / "s32.nvstage", "--kernel", "spill",
            "--lineinfo", "--json")
    assert r.exit_code == 0, r.output
    lines = json.loads(r.stdout)
    kernel = json.loads(cli("diff", builds / "s64.nvstage", builds / "s32.nvstage",
                            "--json").stdout)["kernels"][0]
    # the spills land on lines: their bytes add up to ptxas's spill figures
    assert lines["local"]["a"] == {"stores": 0, "loads": 0, "spill_stores": 0, "spill_loads": 0}
    assert lines["local"]["b"]["spill_stores"] == kernel["b"]["spill_stores"] > 0
    assert lines["local"]["b"]["spill_loads"] == kernel["b"]["spill_loads"] > 0
    assert lines["local_changed_at"]
    # -maxrregcount=32 vs 64 left spill.cu's PTX as it was: ptxas alone made the change
    assert (lines["ptx"], lines["sass"]) == ("same", "changed")
    assert (kernel["why"]["ptx"], kernel["why"]["sass"]) == ("same", "changed")
    assert any("reached ptxas alone" in w for w in kernel["why"]["lines"])
    assert ("B: -maxrregcount=32 caps its registers at 32 (it uses 32: at the cap)"
            in kernel["why"]["lines"])


def test_why_the_ptx_changed_and_launch_bounds_overrode_the_cap(cli, builds):
    from nvstage.compiler.nvcc.cubin_figures import read_figures

    r = cli("diff", builds / "ln.nvstage", builds / "ln24.nvstage", "--json")
    assert r.exit_code == 0, r.output
    rows = {k["key"].split("(")[0]: k for k in json.loads(r.stdout)["kernels"]}
    k5, k3 = rows[K5], rows[K3]
    # __launch_bounds__(1024): ptxas caps it at 64 (64K registers / 1024 threads) and takes
    # no -maxrregcount, as the CUDA Programming Guide says
    assert k5["why"]["a"]["register_cap"] == k5["why"]["b"]["register_cap"] == 64
    assert k5["why"]["b"]["maxntid"] == [1024, 1, 1] and k5["why"]["b"]["maxrregcount"] == 24
    assert ("B: __launch_bounds__(1024) overrides -maxrregcount=24: ptxas caps its registers "
            "at 64") in k5["why"]["lines"]
    assert k3["why"]["b"]["register_cap"] == 24 and k3["why"]["a"]["register_cap"] == 255
    # nvcc gives -maxrregcount to cicc too: the PTX of all three changed
    for k in (k3, k5, rows[K4]):
        assert k["why"]["ptx"] == "changed", k["key"]
        assert any("nvcc passes -maxrregcount to cicc" in w for w in k["why"]["lines"])
    # each kernel's own SASS bytes, its .text section: not the cubin's size on every row
    own = {f.kernel: f.code_bytes for f in
           read_figures((builds / "ln.cubin").read_bytes())}
    sizes = sorted(k["a"]["sass_bytes"] for k in rows.values())
    assert sizes == sorted(own.values()) and sum(sizes) < k3["a"]["cubin_size"]
    one = cli("diff", builds / "ln.nvstage", builds / "ln24.nvstage", "--kernel", K5, "--json")
    assert [k["key"].split("(")[0] for k in json.loads(one.stdout)["kernels"]] == [K5]
    text = cli("diff", builds / "ln.nvstage", builds / "ln24.nvstage").stdout
    assert f"why {K5} (sm_90):" in text and "overrides -maxrregcount=24" in text
    assert "SASS bytes" in text and "cubin bytes" not in text


def test_two_kernels_of_one_build_without_lineinfo(cli, builds):
    r = cli("diff", builds / "ln.nvstage", "--pair", f"{K3}={K4}", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    (row,) = doc["kernels"]
    assert row["key"].startswith(f"{K3}(") and row["b_key"].startswith(f"{K4}(")
    assert doc["pairs"] == [{"a": K3, "b": K4}]
    assert row["why"]["ptx"] is None  # two kernels: their PTX differs by construction


def test_nothing_paired_is_said_and_fails(cli, builds):
    r = cli("diff", builds / "ln.nvstage", builds / "sm.nvstage")
    assert r.exit_code == 2 and "no change" not in r.output
    assert "error: nothing paired: A has layernorm_forward_kernel" in r.stderr
    assert "; B has softmax_forward_kernel" in r.stderr
    assert "hint: name the kernels to compare: --pair layernorm_forward_kernel" in r.stderr
    r = cli("diff", builds / "ln.nvstage", builds / "sm.nvstage", "--pair",
            f"{K4}=softmax_forward_kernel", "--json")
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["kernels"]
    assert row["b_key"].startswith("softmax_forward_kernel(")
    r = cli("diff", builds / "ln.nvstage", builds / "sm.nvstage", "--pair", "nope=softmax")
    assert r.exit_code == 2 and "no kernel 'nope' in A: A has" in r.stderr
    assert "Traceback" not in r.output


def test_via_takes_no_pairs(cli, kernels):
    r = cli("diff", kernels / "saxpy.cu", "--via", "nvcc,nvrtc", "--arch", "sm_90", "--pair",
            "a=b")
    assert r.exit_code == 2 and "--via compiles one source" in r.stderr


SIG = ("output_ptr:*fp32,input_ptr:*fp32,input_row_stride:i32,output_row_stride:i32,"
       "n_rows:i32,n_cols:i32")


@pytest.fixture(scope="module")
def softmax_triton(triton_kit, toolkit, tmp_path_factory):
    """tests/data/triton/fused_softmax.py's softmax_kernel kept for sm_90."""
    from nvstage.compiler.triton.stages import TritonOptions, compile_triton, parse_signature

    keep = tmp_path_factory.mktemp("softmax-triton") / "softmax.triton"
    compile_triton(DATA / "triton" / "fused_softmax.py", TritonOptions(
        "softmax_kernel", parse_signature(SIG), (("BLOCK_SIZE", 1024),), arch="sm_90",
        num_stages=4), toolkit=toolkit, keep=keep)
    return keep


def test_a_triton_kernel_and_a_cuda_one_pair_per_kernel(cli, builds, softmax_triton):
    r = cli("diff", softmax_triton, builds / "sm.nvstage", "--block", "256")
    assert r.exit_code == 2 and "no change" not in r.output
    assert "nothing paired: A has softmax_kernel; B has softmax_forward_kernel" in r.stderr
    assert "--pair softmax_kernel=softmax_forward_kernel" in r.stderr
    r = cli("diff", softmax_triton, builds / "sm.nvstage", "--block", "256", "--pair",
            "softmax_kernel=softmax_forward_kernel", "--json")
    assert r.exit_code == 0, r.output
    (row,) = json.loads(r.stdout)["kernels"]
    assert row["key"] == "softmax_kernel (sm_90a)"
    assert row["b_key"].startswith("softmax_forward_kernel(") and row["b_key"].endswith("(sm_90)")
    assert row["a"]["block"] == 128 and row["b"]["block"] == 256  # num_warps 4 x 32; --block
    assert row["a"]["occupancy"] and row["b"]["occupancy"]
    assert row["a"]["mix.shuffle"] > 0 and row["b"]["mix.shuffle"] > 0
    # two languages: compared per kernel, not line by line
    r = cli("diff", softmax_triton, builds / "sm.nvstage", "--pair",
            "softmax_kernel=softmax_forward_kernel", "--lineinfo")
    assert r.exit_code == 2 and "a Triton kernel" in r.stderr and "Traceback" not in r.output
