"""The options several commands share, defined once (each command may word its help)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer


def nvcc_option(help: str):
    return Annotated[Optional[str], typer.Option("--nvcc", envvar="NVSTAGE_NVCC", help=help)]


def json_option(help: str = "Print JSON to stdout."):
    return Annotated[bool, typer.Option("--json", help=help)]


def svg_option(help: str):
    return Annotated[Optional[Path], typer.Option("--svg", help=help)]


JsonOpt = json_option()
# Commands that compile (run, model, compare, check) and commands that read artifacts.
NvccOpt = nvcc_option("Compile with this nvcc instead of the one from the pip wheels.")
NvccReadOpt = nvcc_option("Use the cuobjdump/nvdisasm of the toolkit of this nvcc.")
GpuOpt = Annotated[Optional[str], typer.Option("--gpu",
    help="A GPU preset: h200, h100, a100, l4, l40s, rtx4090, b200.")]
GpuSpecOpt = Annotated[Optional[Path], typer.Option("--gpu-spec",
    help="A GPU of your own, in a .toml or .json file of keys: name, arch (sm_90), sm_count, "
         "memory_bandwidth (bytes/s) and fp32_flops (FLOP/s); optional bf16_flops (FLOP/s), "
         "memory_bytes, boost_clock_mhz and base_clock_mhz (MHz), pcie_gen, pcie_width, "
         "display_name, notes, and a [sources] table naming where each figure comes from. "
         "Or base = \"h100\" and only the keys that differ.")]
CalibrateOpt = Annotated[Optional[Path], typer.Option("--calibrate",
    help="Fit the presets to a measured report (nvstage run W --profile --json FILE).")]

# show --time: nvcc's compile-time traces (cli/show_time.py).
TimeOpt = Annotated[bool, typer.Option("--time",
    help="Where compile time went, from nvcc's -fdevice-time-trace files: ARTIFACT is a trace "
    "or a folder of them (a build folder). The slowest units, headers by inclusive parse time "
    "with an include chain, template sets, device functions in NVVM and ptxas, per tool totals "
    "(nvstage show build/ --time --top 20).")]
TopOpt = Annotated[int, typer.Option("--top", metavar="N", help="With --time: rows per table.")]
LiveAtOpt = Annotated[Optional[str], typer.Option("--live-at", metavar="WHERE",
    help="The line view (needs --kernel; implies --lineinfo): what is live at an instruction, "
    "by the source line that last wrote each value. WHERE: a source line (54, or k.cu:54: its "
    "instruction with the most live registers) or an offset (0x17a0); a comma list asks for "
    "several. The peak's is always shown.")]
DiffTimeOpt = Annotated[bool, typer.Option("--time",
    help="Compare compile time from nvcc's -fdevice-time-trace files (A and B: traces or "
    "folders of them): units, headers, template sets, device functions, each with its work "
    "figures and a verdict against the noise measured from the units whose work did not "
    "change.")]
