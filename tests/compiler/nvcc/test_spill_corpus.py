"""Spills read from a cubin are ptxas -v's, on kernels whose subroutines spill too (issue 44).

tests/data/spill_subroutines.cu holds kernels that spill in their own code and in the
subroutines ptxas places after it in the kernel's own ``.text`` section: the fp64 division
routine (in the shape of llm.c's softmax_forward_online_kernel1, where show said 64/56 bytes
and ptxas -v 56/44 at -maxrregcount=24 on sm_90), float division's slow path, 64-bit integer
division and remainder, and a ``__noinline__`` device function. Each is compiled by ptxas -v at
several -maxrregcount values for sm_75, sm_80 and sm_90: the kernel's spill stores and loads
must be ptxas's, and what the subroutines spill is counted apart.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nvstage import proc
from nvstage.compiler.nvcc.cubin_figures import SPILL, KernelFigures, read_figures
from nvstage.inspect.resources import parse_ptxas_verbose

SOURCE = Path(__file__).parents[2] / "data" / "spill_subroutines.cu"
JOBS = [(arch, cap) for arch in ("sm_75", "sm_80", "sm_90") for cap in (24, 32, 40)]


@pytest.fixture(scope="module")
def corpus(toolkit, tmp_path_factory):
    """[(arch, cap, ptxas -v's report, the cubin's bytes)]: one compute_75 PTX (cicc once)
    through ptxas for each arch and register cap."""
    root = tmp_path_factory.mktemp("spills")
    ptx = root / "spills.ptx"
    cp = proc.run([toolkit.nvcc, "-ptx", "-arch=compute_75", str(SOURCE), "-o", str(ptx)],
                  timeout=300)
    assert cp.returncode == 0, cp.stderr

    def ptxas(job):
        arch, cap = job
        out = root / f"spills.{arch}.{cap}.cubin"
        cp = proc.run([toolkit.tool("ptxas"), "-v", f"-arch={arch}", f"-maxrregcount={cap}",
                       str(ptx), "-o", str(out)], timeout=300)
        assert cp.returncode == 0, cp.stderr
        return arch, cap, cp.stderr + cp.stdout, out.read_bytes()

    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(ptxas, JOBS))


def test_spills_are_ptxas_verbose_spills(corpus):
    compared = apart = 0
    for arch, cap, report, data in corpus:
        ptxas = {r.kernel: r for r in parse_ptxas_verbose(report)}
        for f in read_figures(data):
            p = ptxas[f.kernel]
            where = f"{f.kernel} {arch} -maxrregcount={cap}"
            assert (f.spill_stores, f.spill_loads) == (p.spill_stores, p.spill_loads), where
            assert f.spill_kind == SPILL, where
            # every marked local store and load is the kernel's or a subroutine's
            assert f.spill_stores + f.subroutine_spill_stores <= f.local_stores, where
            compared += 1
            apart += f.subroutine_spill_stores > 0
    assert compared == 6 * len(JOBS)
    assert apart >= 10  # the subroutines spill in most of the corpus: the rule is exercised


def test_online_softmax_shape_at_24_registers(corpus):
    """The issue's case: 56/44 bytes as ptxas -v says, the division routine's 8/12 apart."""
    data = next(d for arch, cap, _, d in corpus if (arch, cap) == ("sm_90", 24))
    (f,) = [f for f in read_figures(data) if f.kernel == "_Z14online_max_sumPfPKfii"]
    assert (f.spill_stores, f.spill_loads) == (56, 44)
    assert (f.subroutine_spill_stores, f.subroutine_spill_loads) == (8, 12)
    assert (f.local_stores, f.local_loads) == (64, 56)  # what show said before


def test_a_named_device_function_spills_on_its_own_line(corpus):
    """ptxas -v gives a __noinline__ function its own "Function properties" line: its spills
    are not the calling kernel's, and the reader counts them apart."""
    arch, cap, report, data = next(c for c in corpus if c[:2] == ("sm_90", 24))
    (f,) = [f for f in read_figures(data) if f.kernel == "_Z17calls_out_of_linePK6float4PS_i"]
    assert (f.spill_stores, f.spill_loads) == (0, 0)
    assert f"{f.subroutine_spill_stores} bytes spill stores, " \
           f"{f.subroutine_spill_loads} bytes spill loads" in report
    assert f.subroutine_spill_stores > 0


def test_a_manifest_from_before_reads_as_unknown_subroutines(corpus):
    """A manifest written before the subroutines were counted apart has no such fields: they
    read as None (its spill figures were the SASS's count, subroutines included)."""
    f = read_figures(corpus[0][3])[0].to_json()
    del f["subroutine_spill_stores"], f["subroutine_spill_loads"]
    old = KernelFigures.from_json(f)
    assert old.subroutine_spill_stores is None and old.subroutine_spill_loads is None
