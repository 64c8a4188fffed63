"""model.kernelcode: a kernel's SASS made dynamic per thread (trip counts declared, derived
from the FLOPs, or unknown), declared counts, and the limits on what is walked."""

from __future__ import annotations

from pathlib import Path

import pytest

from nvstage.inspect.sass import parse_nvdisasm
from nvstage.model import kernelcode
from nvstage.model.kernelcode import KernelCode, declared_code, finite

CAPTURED = Path(__file__).resolve().parents[1] / "data" / "captured"


def _code(name: str, kernel: str) -> KernelCode:
    text = (CAPTURED / f"cuda13.5-{name}-sm_90-nvdisasm.txt").read_text()
    (k,) = [k for k in parse_nvdisasm(text) if k.demangled.startswith(kernel + "(")]
    return KernelCode.of(k)


def test_matmul_trips_declared_or_derived_from_the_flops():
    c = _code("matmul_tiled", "matmul_tiled")
    # 2 x 1024^3 FLOPs over 1024^2 threads = 2048 per thread; 32 FFMAs (64 FLOPs) a tile
    assert c.derived_trips(2048) == 32
    derived = c.dynamic(flops_per_thread=2048)
    declared = c.dynamic(32)
    assert derived.trips == declared.trips == (32.0,)
    assert derived.trips_source == "derived from the declared FLOPs"
    assert declared.trips_source == "declared in the cost file"
    assert declared.pipes["fp32"] == 32 * 32 and declared.round_trips == 32
    # per thread per tile: 32 LDS of 4 B, 8 LDS.128 of 16 B, 2 STS of 4 B = 264 B
    assert declared.shared_bytes == 32 * 264


def test_unknown_trips_count_each_loop_once():
    c = _code("reduce", "reduce_partial")
    d = c.dynamic()  # no FLOPs, no trips: nothing says how often the loops run
    assert d.trips == (1.0, 1.0) and d.trips_source.startswith("unknown")
    assert c.dynamic([64, 8]).round_trips == 64


def test_no_loop_no_trips():
    d = _code("fusion_chain", "fused").dynamic(flops_per_thread=10)
    assert d.trips == () and d.trips_source == "no loop"
    assert d.loads_per_trip == 2 and d.bytes_per_load == 4 and d.round_trips == 1


def test_declared_counts_alone_and_overflow():
    d = declared_code({"fp32": 100.0, "shared_load": 10.0})
    assert d.instructions == 110 and d.pipes == {"fp32": 100.0} and d.shared_bytes == 40
    assert finite(d)
    # trip counts a cost file may give (each below 2**512) can still add past any float
    assert not finite(_code("reduce", "reduce_partial").dynamic([1e308, 1e308]))


def test_code_past_the_limits_is_not_walked(monkeypatch):
    text = (CAPTURED / "cuda13.5-matmul_tiled-sm_90-nvdisasm.txt").read_text()
    (k,) = parse_nvdisasm(text)
    monkeypatch.setattr(kernelcode, "MAX_INSTRUCTIONS", 10)
    assert KernelCode.of(k) is None
    monkeypatch.setattr(kernelcode, "MAX_INSTRUCTIONS", 100_000)
    monkeypatch.setattr(kernelcode, "MAX_LOOPS", 0)
    assert KernelCode.of(k) is None


@pytest.mark.parametrize("trips", [[2.0, 3.0, 4.0], [1.0]])
def test_a_trip_list_must_fit_the_loops(trips):
    with pytest.raises(ValueError, match="for 2 loops"):
        _code("reduce", "reduce_partial").dynamic(trips)
