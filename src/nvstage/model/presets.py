"""The estimator's free parameters, each with the kind and the text of its source.

A preset is sourced (a datasheet, the CUDA C++ Programming Guide, a published measurement, a
measurement of our own kept in docs/measured), fitted by ``--calibrate`` from a measured run
report, or an ASSUMPTION that says why; ``tests/model/test_presets.py`` fails on any other.
Figures the GPU itself owns (bandwidth, memory latency, clocks, per-SM throughput) are the GPU
table's (``nvstage.hw``), with their own sources.

The measurements of our own come from one H200 session (docs/measured/h200-2026-11-30.txt):
an empty kernel, a 4-byte copy, 256 MiB pinned copies and the launch benchmark there. They
measure the launch, the floor and the copies themselves, not the bundled workloads the model
is checked against; on another GPU or host they are assumptions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields

KINDS = ("datasheet", "guide", "published", "measured", "fitted", "assumption")
_SESSION = "docs/measured/h200-2026-11-30.txt (H200, driver 580.159.04, PCIe Gen5 x16)"
_BENCHES = "te42kyfo/gpu-benches gpu-stream/h200.txt (github.com/te42kyfo/gpu-benches)"


@dataclass(frozen=True)
class Presets:
    """The model's free parameters. Defaults carry a source each (``PRESET_SOURCES``)."""

    launch_cost_s: float = 3.901e-6
    kernel_floor_s: float = 2.912e-6
    dram_efficiency: float = 3898 / 4800
    compute_efficiency: float = 1.0
    pcie_pinned_efficiency: float = 55.393 / 63.015
    pcie_pageable_efficiency: float = 10.0 / 31.5
    copy_latency_s: float = 3.232e-6
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def source(self, name: str) -> str:
        return self.sources.get(name) or PRESET_SOURCES[name][1]

    def kind(self, name: str) -> str:
        return "fitted" if name in self.sources else PRESET_SOURCES[name][0]

    def names(self) -> list[str]:
        return [f.name for f in fields(self) if f.name != "sources"]

    def to_json(self) -> dict:
        return {n: {"value": getattr(self, n), "kind": self.kind(n), "source": self.source(n)}
                for n in self.names()}


PRESET_SOURCES: dict[str, tuple[str, str]] = {
    "launch_cost_s": ("measured", f"host time of one launch through nvstage's engine, 3.901 "
                                  f"us median (bench/launch_overhead, {_SESSION}); --calibrate "
                                  "fits it from a run's launches"),
    "kernel_floor_s": ("measured", f"GPU time of an empty kernel between two CUDA events, "
                                   f"2.912 us ({_SESSION}, the run's noise floor): no event-"
                                   "timed kernel reads less; --calibrate fits it"),
    "dram_efficiency": ("published", f"3898 GB/s of the H200's 4.8 TB/s: the store-only "
                                     f"stream's plateau from 56% occupancy up ({_BENCHES}), "
                                     "the highest rate measured there; the same share of "
                                     "the datasheet is taken on other GPUs; --calibrate "
                                     "fits it"),
    "compute_efficiency": ("guide", "1: the CUDA C++ Programming Guide's per-SM throughput "
                                    "as published (issue, pipes, shared memory), not derated; "
                                    "--calibrate fits it from SM-bound kernels"),
    "pcie_pinned_efficiency": ("measured", f"256 MiB pinned copies at 55.39 GB/s of the "
                                           f"link's 63.02 ({_SESSION}, host to device); "
                                           "--calibrate fits it"),
    "pcie_pageable_efficiency": ("assumption", "ASSUMPTION: pageable copies at about 10 of "
                                               "31.5 GB/s, because no pageable copy has been "
                                               "measured here (nvstage run copies from pinned "
                                               "memory) and the driver stages them through a "
                                               "pinned buffer (CUDA C++ Best Practices Guide, "
                                               "pinned memory); --calibrate fits it"),
    "copy_latency_s": ("measured", f"GPU time of a 4-byte host-to-device copy, 3.232 us "
                                   f"({_SESSION}); --calibrate fits it"),
}
DEFAULT_PRESETS = Presets()
