"""What one SM gets through per clock, per compute capability: instructions issued, results per
class of instruction, and shared-memory bytes. The model's issue, pipe and shared-memory
bounds divide a kernel's dynamic instruction mix by these.

The classes are ``nvstage.inspect.mix``'s (fp32, fp16, fp64, int, convert, sfu, shuffle); an
instruction of a class not listed here needs an issue slot and nothing else the model counts.
The figures are the CUDA C++ Programming Guide's "Throughput of Native Arithmetic
Instructions" table (results per clock cycle per multiprocessor; a warp instruction is 32
results, a packed half2 instruction 64), its "Multiprocessor Level" section (four warp
schedulers, each issuing one instruction per clock, from compute capability 5.x on) and its
shared-memory sections (32 banks, each 32 bits per clock). Where the guide's column was not
checked here, the arch's row says ASSUMPTION and which column it copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from nvstage.hw.archs import arch_limits

_TABLE = ("CUDA C++ Programming Guide, Arithmetic Instructions: Throughput of Native "
          "Arithmetic Instructions (results per clock cycle per multiprocessor), cc {}")
_ISSUE = ("CUDA C++ Programming Guide, Multiprocessor Level: four warp schedulers, each "
          "issuing one instruction per clock (cc 5.x and later)")
_SHARED = ("CUDA C++ Programming Guide, Shared Memory (cc 5.x and later): 32 banks, each "
           "32 bits per clock = 128 bytes per clock per SM")

# Results per clock per SM: (fp32, fp16 (half2 counts 2), fp64, int (add, multiply-add,
# logic, shift, compare), convert (type conversions other than 8/16-bit ints), sfu
# (reciprocal, rsqrt, log2, exp2, sin, cos), shuffle).
_CLASSES = ("fp32", "fp16", "fp64", "int", "convert", "sfu", "shuffle")
_ROWS: dict[str, tuple[tuple[int, ...], str]] = {
    "sm_75": ((64, 128, 2, 64, 16, 16, 32), _TABLE.format("7.5")),
    "sm_80": ((64, 256, 32, 64, 16, 16, 32), _TABLE.format("8.0")),
    "sm_86": ((128, 256, 2, 64, 16, 16, 32), _TABLE.format("8.6")),
    "sm_87": ((128, 256, 2, 64, 16, 16, 32),
              "ASSUMPTION: the guide's cc 8.6 column (8.7's not checked here)"),
    "sm_88": ((128, 256, 2, 64, 16, 16, 32),
              "ASSUMPTION: the guide's cc 8.6 column (the guide has no 8.8 column)"),
    "sm_89": ((128, 128, 2, 64, 16, 16, 32), _TABLE.format("8.9")),
    "sm_90": ((128, 256, 64, 64, 16, 16, 32), _TABLE.format("9.0")),
    "sm_100": ((128, 256, 64, 64, 16, 16, 32),
               "ASSUMPTION: the guide's cc 9.0 column (10.0's not checked here; its FP32 and "
               "FP64 agree with the B200's published 80 and 40 TFLOPS)"),
    "sm_103": ((128, 256, 64, 64, 16, 16, 32),
               "ASSUMPTION: the guide's cc 9.0 column (10.3's not checked here)"),
    "sm_107": ((128, 256, 2, 64, 16, 16, 32),
               "ASSUMPTION: the guide's cc 8.6 column with FP32 at 128 (10.7 not checked)"),
    "sm_110": ((128, 256, 2, 64, 16, 16, 32),
               "ASSUMPTION: the guide's cc 8.6 column (11.0's not checked here)"),
    "sm_120": ((128, 256, 2, 64, 16, 16, 32),
               "ASSUMPTION: the guide's cc 8.6 column (12.0's not checked here)"),
    "sm_121": ((128, 256, 2, 64, 16, 16, 32),
               "ASSUMPTION: the guide's cc 8.6 column (12.1's not checked here)"),
}
# Results a warp instruction of the class produces: 32 lanes, twice that for packed halves.
RESULTS_PER_WARP_INSTRUCTION = {"fp16": 64}


@dataclass(frozen=True)
class SmThroughput:
    """Per SM and clock: warp instructions issued, results per class, shared-memory bytes."""

    arch: str
    results_per_clock: Mapping[str, int]
    issue_per_clock: int = 4
    shared_bytes_per_clock: int = 128
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)

    def warp_instructions_per_clock(self, cls: str) -> float | None:
        """How many warp instructions of ``cls`` one SM completes per clock (None: the class
        has no pipe of its own here, only issue slots)."""
        r = self.results_per_clock.get(cls)
        return None if r is None else r / RESULTS_PER_WARP_INSTRUCTION.get(cls, 32)

    def to_json(self) -> dict:
        return {"arch": self.arch, "results_per_clock": dict(self.results_per_clock),
                "issue_per_clock": self.issue_per_clock,
                "shared_bytes_per_clock": self.shared_bytes_per_clock,
                "sources": dict(self.sources)}


PIPES: dict[str, SmThroughput] = {
    arch: SmThroughput(arch, dict(zip(_CLASSES, row)),
                       sources={"results_per_clock": src, "issue_per_clock": _ISSUE,
                                "shared_bytes_per_clock": _SHARED})
    for arch, (row, src) in _ROWS.items()}


def sm_throughput(arch: str) -> SmThroughput:
    """The table's row for ``arch`` (``sm_90a`` reads as ``sm_90``)."""
    return PIPES[arch_limits(arch).arch]
