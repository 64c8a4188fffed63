"""Grid-, block- and warp-stride loops as real code writes them (issue 46: "its trip count as an
expression in the kernel's parameters and the launch ..., grid-stride and block-stride
patterns"): tests/model/data/stride_loops.cu holds our own kernels in the shapes of the CUDA
samples' reduction (reduce6), NVIDIA's grid-stride pro tip, llm.c's layernorm kernel3 (a warp
per row, cooperative groups), its softmax kernel2 (a block per row) and its float4 kernels."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nvstage.hw.gpus import GPUS
from nvstage.model.estimate import estimate
from nvstage.model.ptx_walk import parse_function, trip_expression

DATA = Path(__file__).resolve().parent / "data"

WORKLOAD = """
[kernel]
source = "stride_loops.cu"

[params]
n = "1 << 24"
blocks = 1000
N = 4096
C = 768

[buffers.data]
dtype = "float32"
count = "n"

[buffers.partial]
dtype = "float32"
count = "blocks"

[buffers.y]
dtype = "float32"
count = "n"

[buffers.inp]
dtype = "float32"
count = "N * C"

[buffers.rows]
dtype = "float32"
count = "N"

[[launch]]
kernel = "reduce_pairs"
grid = "blocks"
block = 256
args = ["data", "partial", { u32 = "n", counts = [] }]

[[launch]]
kernel = "saxpy_wide"
grid = "blocks"
block = 256
args = [{ f32 = "n" }, "data", "y", { i64 = "n", counts = [] }]

[[launch]]
kernel = "scale_grid"
grid = "blocks"
block = 256
args = ["y", "data", { f32 = "n" }, { i32 = "n", counts = [] }]

[[launch]]
kernel = "rows_mean_warp"
grid = "N / 8"
block = 256
args = ["rows", "inp", { i32 = "N", counts = [] }, { i32 = "C", counts = [] }]

[[launch]]
kernel = "rows_max_block"
grid = "N"
block = 128
shared = 512
args = ["rows", "inp", { i32 = "N", counts = [] }, { i32 = "C", counts = [] }]

[[launch]]
kernel = "rows_sum_vec4"
grid = "N"
block = 64
args = ["rows", "inp", { i32 = "N", counts = [] }, { i32 = "C", counts = [] }]
"""


def _cost(kernels: list[tuple[str, str, str, str]]) -> str:
    out = ['host_memory = "pinned"']
    for kernel, reads, writes, flops in kernels:
        out += ["[[launch]]", f'kernel = "{kernel}"', f'reads = ["{reads}"]',
                f'writes = ["{writes}"]', f'flops = "{flops}"']
    return "\n".join(out) + "\n"


@pytest.fixture(scope="module")
def loops(toolkit, tmp_path_factory):
    folder = tmp_path_factory.mktemp("stride")
    shutil.copy(DATA / "stride_loops.cu", folder)
    (folder / "stride.toml").write_text(WORKLOAD)
    (folder / "stride.cost.toml").write_text(_cost([
        ("reduce_pairs", "data", "partial", "n"), ("saxpy_wide", "data", "y", "2 * n"),
        ("scale_grid", "data", "y", "n"), ("rows_mean_warp", "inp", "rows", "N * C"),
        ("rows_max_block", "inp", "rows", "N * C"), ("rows_sum_vec4", "inp", "rows", "N * C")]))
    e = estimate(folder / "stride.toml", GPUS["h100"], toolkit=toolkit)
    return {x.kernel: x.code.loops for x in e.launches}


def test_grid_stride_loops(loops):
    """The grid's stride computed first (unsigned, two elements a pass) or written gridDim.x *
    blockDim.x: the first thread's count, cdiv over the grid's stride."""
    (r,) = loops["reduce_pairs"]  # 16M / (1000 x 512) = 32.8: the first thread runs 33
    assert (r.trips, r.expression) == (
        33, "cdiv(n - 512 * blockIdx.x - threadIdx.x, 512 * gridDim.x)")
    (r,) = loops["scale_grid"]
    assert (r.trips, r.expression) == (
        66, "cdiv(n - blockDim.x * blockIdx.x - threadIdx.x, blockDim.x * gridDim.x)")
    # 64-bit indices: NVVM unrolled it by 4 after a remainder loop, counting the passes as
    # (n - i - 1) / stride + 1 first; 66 = 2 + 4 x 16
    rest, main = loops["saxpy_wide"]
    passes = "cdiv(n - blockDim.x * blockIdx.x - threadIdx.x, blockDim.x * gridDim.x)"
    assert (rest.trips, rest.expression) == (2, f"{passes} % 4")
    assert (main.trips, main.expression) == (16, f"{passes} // 4")
    assert main.shape == "unrolled by 4 (its body 4 of loop 1's)"


def test_a_warp_stride_loop_ptxas_unrolled(loops):
    """A warp per row, lanes striding by 32 (cooperative groups' thread_rank(): the block's
    linear thread index & 31; the launch's block is 1-D, so threadIdx.x alone). ptxas
    unrolled the loop by 4 and left the remainder after it: 768 / 32 = 24 passes of the
    source's loop, 6 of the SASS's."""
    (r,) = loops["rows_mean_warp"]
    assert (r.trips, r.expression) == (6, "cdiv(C - threadIdx.x % 32, 32) // 4")
    assert r.shape == "unrolled by 4 by ptxas, remainder outside it"


def test_block_stride_loops(loops):
    """A block per row: by blockDim.x over C, and over C / 4 float4s (C's signed division
    rounds toward 0: for a size, C // 4)."""
    first, tree = loops["rows_max_block"]
    assert (first.trips, first.expression) == (6, "cdiv(C - threadIdx.x, blockDim.x)")
    assert first.shape == "as written"
    assert tree.trips == 7  # stride halves from 64 to 1: a count, not a counted loop
    (r,) = loops["rows_sum_vec4"]
    assert (r.trips, r.expression) == (3, "cdiv(C // 4 - threadIdx.x, blockDim.x)")


def test_a_label_llvm_commented_still_closes_its_loop():
    """LLVM's NVPTX back end (Triton's PTX) writes a comment after a loop's label: the label
    is still the loop's head, and the branch back to it a branch, not the function's end."""
    ptx = """.visible .entry k(
	.param .u32 k_param_0
)
{
	ld.param.u32 	%r2, [k_param_0];
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r3, %nctaid.x;
$L__BB0_2:                              // =>This Inner Loop Header: Depth=1
	add.s32 	%r1, %r1, %r3;
	setp.lt.s32 	%p1, %r1, %r2;
	@%p1 bra 	$L__BB0_2;
	ret;
}
"""
    fn = parse_function(ptx, "k")
    (span,) = fn.loops()
    assert trip_expression(fn, span, {"k_param_0": "rows"}) == "cdiv(rows - blockIdx.x, gridDim.x)"


def test_a_loop_counting_down_past_a_barrier():
    """Triton's pipelined matmul loop (the matmul tutorial's ``for k in range(0,
    tl.cdiv(K, BLOCK_SIZE_K))``, num_stages 3): a count from cdiv(K, 64) down to 0 with
    ``bar.sync 0`` and ``wgmma.wait_group 0`` in the loop, whose 0s are no register's value."""
    ptx = """.visible .entry k(
	.param .u32 k_param_0
)
{
	ld.param.b32 	%r594, [k_param_0];
	add.s32 	%r45, %r594, 63;
	shr.s32 	%r47, %r45, 31;
	shr.u32 	%r48, %r47, 26;
	add.s32 	%r49, %r45, %r48;
	shr.s32 	%r595, %r49, 6;
$L__BB0_2:                              // =>This Inner Loop Header: Depth=1
	wgmma.wait_group.sync.aligned 0;
	bar.sync 	0;
	add.s32 	%r595, %r595, -1;
	setp.ne.b32 	%p68, %r595, 0;
	@%p68 bra 	$L__BB0_2;
	ret;
}
"""
    fn = parse_function(ptx, "k")
    (span,) = fn.loops()
    assert trip_expression(fn, span, {"k_param_0": "K"}) == "cdiv(K, 64)"
