"""The estimate on real code (issue 46): loops derived from the code, never below the peaks,
shared-memory bank conflicts, every Triton kernel's own SASS, nvcc flags in a workload.

Kernels are compiled for real; examples/model/matmul_forward4.cu is our own kernel in the shape
of llm.c's dev/cuda/matmul_forward.cu kernel4, tests/model/data/transpose_tile.cu in the shape
of the CUDA samples' transpose (transposeCoalesced / transposeNoBankConflicts).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nvstage.hw.gpus import GPUS
from nvstage.model.estimate import estimate

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "examples" / "model"
DATA = Path(__file__).resolve().parent / "data"
H100 = GPUS["h100"]


def _write(folder: Path, name: str, toml: str, cost: str) -> Path:
    (folder / f"{name}.toml").write_text(toml)
    (folder / f"{name}.cost.toml").write_text(cost)
    return folder / f"{name}.toml"


@pytest.fixture(scope="module")
def kernel4(toolkit):
    return estimate(MODEL / "matmul_forward4.toml", H100, toolkit=toolkit)


def test_kernel4_trips_come_from_the_code(kernel4):
    (x,) = kernel4.launches
    # worked out by hand from its SASS: C / 32 = 24 tiles; 32 / 4 = 8 steps a tile; the
    # loop that loads a tile (128 rows / 32 = 4 per thread) is unrolled by 4 in the PTX, and
    # ptxas enters that loop only with more than 12 rows left (ISETP.GT ... 0x180 before
    # it), so its 4 rows run in the straight copies after it: 0 times (the PTX's loop runs
    # once: counting it would count the load twice)
    assert x.code.trips == (24.0, 0.0, 8.0)
    assert x.code.trips_source == "derived from the code"
    rows = x.code.loops
    assert [(r.depth, r.line) for r in rows] == [(1, 24), (2, 29), (2, 34)]
    # ptxas unrolled the PTX's 4x loop by 4 again (16 rows a pass): 1 // 4 = 0 passes
    assert rows[1].shape == "unrolled by 4, remainder: 3 copies outside it; then by 4 by ptxas"
    assert rows[1].expression == "cdiv(32 - threadIdx.x // 8 - 2 * threadIdx.y, 128) // 4"
    assert rows[0].shape == rows[2].shape == "as written"
    assert rows[0].expression == "cdiv(C, 32)" and rows[2].expression == "8"
    assert all(r.head < r.tail for r in rows) and rows[0].head < rows[1].head < rows[2].head


def test_kernel4_never_below_its_flops_at_the_fp32_peak(kernel4):
    (x,) = kernel4.launches
    floor = 2 * 1024 * 768 * 3072 / H100.fp32_flops
    assert x.bounds.time("FP32 peak") == pytest.approx(floor)
    assert x.t_kernel_s >= floor


def test_grid_and_block_stride_loops_as_expressions(toolkit):
    """examples/model/reduce.toml: a grid-stride loop and a block-stride loop, their counts
    in the launch's names (the longest lane's, evaluated) equal to the cost file's trips."""
    e = estimate(MODEL / "reduce.toml", GPUS["h200"], toolkit=toolkit)
    partial, final = e.launches
    assert [(r.trips, r.expression) for r in partial.code.loops] == [
        (64, "cdiv(n - blockDim.x * blockIdx.x - threadIdx.x, blockDim.x * gridDim.x)"),
        (8, None)]
    assert (final.code.loops[0].trips, final.code.loops[0].expression) == (
        4, "cdiv(blocks - threadIdx.x, blockDim.x)")
    assert partial.code.trips == (64, 8) and final.code.trips == (4, 8)  # as declared


def test_the_peak_wins_over_loops_said_too_short(toolkit, tmp_path):
    """Trips of 1 each (the old default for nested loops) put every code bound far below the
    kernel's declared FLOPs at the FP32 peak: the peak is the estimate, and a note says so."""
    import shutil

    for f in ("matmul_forward4.toml", "matmul_forward4.cu"):
        shutil.copy(MODEL / f, tmp_path)
    (tmp_path / "matmul_forward4.cost.toml").write_text(
        (MODEL / "matmul_forward4.cost.toml").read_text() + "trips = [1, 1, 1]\n")
    e = estimate(tmp_path / "matmul_forward4.toml", H100, toolkit=toolkit)
    (x,) = e.launches
    assert x.limiter == "FP32 peak"
    assert x.t_kernel_s == pytest.approx(2 * 1024 * 768 * 3072 / H100.fp32_flops)
    (note,) = [n for n in e.notes if "the peak is the estimate" in n]
    assert "FP32 peak" in note and "4.832 GFLOP (declared)" in note


def test_loops_in_json_and_the_hint_names_them(cli, tmp_path):
    r = cli("model", MODEL / "matmul_forward4.toml", "--gpu", "h100", "--json")
    assert r.exit_code == 0, r.stderr
    (launch,) = json.loads(r.stdout)["per_launch"]
    loops = launch["code"]["loops"]
    assert [lp["trips"] for lp in loops] == [24, 0, 8]
    assert loops[1]["sass"].startswith("0x") and loops[1]["line"] == 29
    assert launch["limiter"] in [b["name"] for b in launch["bounds"]["bounds"]]
    import shutil

    for f in ("matmul_forward4.toml", "matmul_forward4.cu"):
        shutil.copy(MODEL / f, tmp_path)
    (tmp_path / "matmul_forward4.cost.toml").write_text(
        (MODEL / "matmul_forward4.cost.toml").read_text() + "trips = [24, 8]\n")
    r = cli("model", tmp_path / "matmul_forward4.toml", "--gpu", "h100")
    assert r.exit_code != 0 and "2 trip counts for 3 loops" in r.stderr
    assert "per_launch[].code.loops" in r.stderr and "Traceback" not in r.stderr


TRANSPOSE = """
[kernel]
source = "{src}"
defines = ["PAD={pad}"]

[params]
n = 2048

[buffers.odata]
dtype = "float32"
count = "n * n"

[buffers.idata]
dtype = "float32"
count = "n * n"

[[launch]]
kernel = "transpose_tile"
grid = ["n / 32", "n / 32"]
block = [32, 8]
args = ["odata", "idata", {{ i32 = "n", counts = [] }}, {{ i32 = "n", counts = [] }}]
"""
TRANSPOSE_COST = """
[[launch]]
kernel = "transpose_tile"
reads = ["idata"]
writes = ["odata"]
flops = 0
"""


def test_transpose_tile_and_its_padded_fix(toolkit, tmp_path):
    """tile[32][32]'s column read puts all 32 lanes on one bank: 32 wavefronts for each of
    its 4 reads, 1 for each of its 4 row writes, 16.5x what the bytes ask; tile[32][33]
    spreads them over the 32 banks."""
    est = {}
    for pad in (0, 1):
        p = _write(tmp_path, f"transpose{pad}",
                   TRANSPOSE.format(src=DATA / "transpose_tile.cu", pad=pad), TRANSPOSE_COST)
        est[pad] = estimate(p, H100, toolkit=toolkit).launches[0]
    conflicted, padded = est[0], est[1]
    assert conflicted.code.banks.factor == pytest.approx(16.5)
    assert padded.code.banks.factor == pytest.approx(1.0)
    assert conflicted.code.banks.words() == "32-way bank conflicts at line 21"
    assert padded.code.banks.words() == "no bank conflicts"
    ratio = conflicted.bounds.time("shared memory") / padded.bounds.time("shared memory")
    assert ratio == pytest.approx(16.5)
    assert "32-way bank conflicts at line 21" in conflicted.bounds.bound("shared memory").detail
    assert conflicted.t_kernel_s > padded.t_kernel_s


LAYERNORM = """
[kernel]
source = "{src}"
flags = ["--use_fast_math"]

[params]
N = 8192
C = {C}

[buffers.out]
dtype = "float32"
count = "N * C"

[buffers.mean]
dtype = "float32"
count = "N"

[buffers.rstd]
dtype = "float32"
count = "N"

[buffers.inp]
dtype = "float32"
count = "N * C"

[buffers.weight]
dtype = "float32"
count = "C"

[buffers.bias]
dtype = "float32"
count = "C"

[[launch]]
kernel = "layernorm_rows"
grid = "N / 256"
block = 256
args = ["out", "mean", "rstd", "inp", "weight", "bias", {{ i32 = "N", counts = ["mean"] }},
        {{ i32 = "C", counts = [] }}]
"""
LAYERNORM_COST = """
[[launch]]
kernel = "layernorm_rows"
reads = ["inp", "weight", "bias"]
writes = ["out", "mean", "rstd"]
flops = "8 * N * C"
"""


@pytest.mark.parametrize("C,trips", [(770, [48, 0, 2]), (768, [48, 0, 0]), (30, [1, 1, 2])])
def test_remainder_loops_as_ptxas_shaped_them(toolkit, tmp_path, C, trips):
    """llm.c's layernorm kernel1 in shape (a thread per row, three i < C loops): the PTX
    unrolls each loop 4x with a remainder loop; ptxas makes of the 4x loop a 16x loop (run
    while more than 12 are left), 8 in straight code (when more than 4 are left) and the 4x
    loop, so each source loop is three SASS loops. Worked out by hand from the SASS (R10 =
    C - C % 4, less 16 a pass while above 12, less 8 once if above 4, less 4 a pass while
    above 0; then C % 4 passes): C = 770 is 48, 0 and 2 passes; 30 is 1, 1 and 2."""
    p = _write(tmp_path, "ln", LAYERNORM.format(src=DATA / "layernorm_rows.cu", C=C),
               LAYERNORM_COST)
    (x,) = estimate(p, H100, toolkit=toolkit).launches
    rows = x.code.loops
    assert len(rows) == 9 and x.code.trips_source == "derived from the code"
    for first in (0, 3, 6):  # the three source loops, each as three SASS loops
        assert [r.trips for r in rows[first:first + 3]] == trips
        assert len({r.line for r in rows[first:first + 3]}) == 1
        assert rows[first].shape.startswith("unrolled by 16")
        assert rows[first + 1].shape.startswith("unrolled by 4")
        assert rows[first + 2].shape.startswith("remainder of loops")
    assert x.t_kernel_s >= x.bounds.time("FP32 peak")


DATA_LOOP = """
[kernel]
source = "{src}"

[params]
rows = 4096

[buffers.row_start]
dtype = "int32"
count = "rows + 1"

[buffers.values]
dtype = "float32"
count = "rows * 8"

[buffers.sums]
dtype = "float32"
count = "rows"

[[launch]]
kernel = "row_sums"
grid = "rows / 256"
block = 256
args = ["row_start", "values", "sums", {{ i32 = "rows", counts = ["sums"] }}]
"""
DATA_LOOP_COST = """
[[launch]]
kernel = "row_sums"
reads = ["row_start", "values"]
writes = ["sums"]
flops = "rows * 8"
"""


def test_a_loop_bound_read_from_memory_is_asked_for_by_line(cli, tmp_path):
    p = _write(tmp_path, "rows", DATA_LOOP.format(src=DATA / "data_loop.cu"), DATA_LOOP_COST)
    r = cli("model", p, "--gpu", "h100", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    loops = doc["per_launch"][0]["code"]["loops"]
    assert loops and all(not lp["derived"] and lp["line"] == 6 for lp in loops)
    assert all("read from memory" in lp["how"] for lp in loops)
    (note,) = [n for n in doc["notes"] if "trip count not derived" in n]
    assert "line 6" in note and "trips = [" in note and "counted once" in note


def test_a_launch_held_at_a_peak_fits_no_efficiency():
    """The peaks are the datasheet's, not the guide's throughput times compute_efficiency: a
    launch limited by one says nothing of that efficiency."""
    from types import SimpleNamespace

    from nvstage.model.calibrate import fit_kernels

    def launch(limiter, seconds):
        return SimpleNamespace(limiter=limiter, counts=SimpleNamespace(bytes=0),
                               bounds=SimpleNamespace(seconds=seconds, time=lambda n: 0.0))

    assert fit_kernels([(launch("FP32 peak", 1e-3), 2e-3)], H100) == {}
    (value, n, _) = fit_kernels([(launch("FP32 peak", 1e-3), 2e-3),
                                 (launch("instruction issue", 1e-3), 2e-3)],
                                H100)["compute_efficiency"]
    assert (value, n) == (0.5, 1)


def test_peaks_per_pipe():
    """FLOPs on FP32 at the datasheet's FP32 peak, on the tensor cores at the dense BF16 peak,
    none for 8-bit or narrower MMAs (faster than that: no floor would be a floor); bytes at
    the datasheet's bandwidth."""
    from nvstage.model.bounds import LaunchShape, peak_bounds
    from nvstage.model.estimate import DEFAULT_PRESETS, machine

    m = machine(H100, DEFAULT_PRESETS)

    def shape(pipe):
        return LaunchShape(blocks=1, warps_per_block=1, blocks_per_sm=1, dram_bytes=3.35e9,
                           round_trips=0, loads_per_trip=0, bytes_per_load=0, instructions=0,
                           pipes={}, shared_bytes=0, flops=67e12, flops_pipe=pipe)

    by = {b.name: b.seconds for b in peak_bounds(shape("fp32"), m)}
    assert by == {"FP32 peak": pytest.approx(1.0), "DRAM peak": pytest.approx(1e-3)}
    by = {b.name: b.seconds for b in peak_bounds(shape("tensor"), m)}
    assert by["tensor peak"] == pytest.approx(67e12 / H100.bf16_flops)
    assert [b.name for b in peak_bounds(shape("tensor, 8-bit or narrower"), m)] == ["DRAM peak"]
    fp64 = {b.name: b for b in peak_bounds(shape("fp64"), m)}["FP64 peak"]
    # the guide's 64 FP64 results per clock per SM x 2 x 132 SMs x 1980 MHz = 33.5 TFLOP/s
    assert fp64.seconds == pytest.approx(67e12 / (64 * 2 * 132 * 1980e6))
