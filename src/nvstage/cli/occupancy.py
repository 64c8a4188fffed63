"""nvstage occupancy: theoretical occupancy per kernel, offline, from its real resources."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import emit_json, handled
from nvstage.cli.options import json_option, nvcc_option
from nvstage.errors import UsageError
from nvstage.report.terminal.console import data_console

_BYTES = re.compile(r"^\s*(\d+)\s*(k|kb|kib)?\s*$", re.IGNORECASE)


def parse_bytes(text: str, what: str) -> int:
    """``49152``, ``48K``, ``48KB`` or ``48KiB`` (all 1024-based, as CUDA counts shared memory)."""
    m = _BYTES.match(text)
    if not m:
        raise UsageError(f"{what}: not a byte count: {text!r}", hint="e.g. 49152 or 48K")
    return int(m.group(1)) * (1024 if m.group(2) else 1)


def occupancy_cmd(
    artifact: Annotated[Optional[Path], typer.Argument(
        help="A cubin, fatbin, object, executable or keep folder (omit with --registers).",
        show_default=False)] = None,
    block: Annotated[Optional[int], typer.Option("--block", "-b",
        help="Threads per block.")] = None,
    smem: Annotated[str, typer.Option("--smem",
        help="Dynamic shared memory per block, bytes (48K works).")] = "0",
    gpu: Annotated[Optional[str], typer.Option("--gpu",
        help="Target GPU: a preset (h200, a100, l4, ...), an arch, or a .toml/.json spec.")
        ] = None,
    arch: Annotated[Optional[str], typer.Option("--arch",
        help="Target arch (sm_90); the same as --gpu sm_90.")] = None,
    sweep_: Annotated[bool, typer.Option("--sweep",
        help="Also try every block size from 32 to 1024 and show the best.")] = False,
    kernel: Annotated[Optional[str], typer.Option("--kernel", "-k",
        help="Only this kernel (mangled or plain name).")] = None,
    registers: Annotated[Optional[int], typer.Option("--registers",
        help="Registers per thread, for a kernel given by numbers instead of an artifact.")
        ] = None,
    shared: Annotated[str, typer.Option("--shared",
        help="With --registers: static shared memory per block, bytes.")] = "0",
    barriers: Annotated[int, typer.Option("--barriers",
        help="With --registers: block barriers the kernel uses (matters from sm_90 on).")] = 0,
    nvcc: nvcc_option("Read artifacts with this toolkit instead of the pip wheels.") = None,
    json_out: json_option("Print the results as JSON.") = False,
) -> None:
    """Theoretical occupancy per kernel, and what limits it. No GPU needed.

    Active blocks and warps per SM, and what limits
    them (warps, registers, shared memory, blocks per SM), computed with the CUDA occupancy
    formulas from the kernel's registers and shared memory. No GPU needed.

    Examples (after the README's first step, nvstage compile kernels/vadd.cu --arch sm_90
    -o vadd --keep):

          nvstage occupancy vadd.nvstage/vadd.sm_90.cubin --block 256

          nvstage occupancy vadd --gpu h100 --block 128 --smem 16K --sweep

          nvstage occupancy --registers 64 --shared 8192 --arch sm_86 --sweep
    """
    from nvstage.hw.gpus import resolve_gpu
    from nvstage.inspect.occupancy import kernel_occupancy
    from nvstage.report.terminal.occupancy import render

    with handled(json_out):
        if gpu and arch:
            raise UsageError("give --gpu or --arch, not both")
        target = resolve_gpu(gpu or arch) if (gpu or arch) else None
        report = kernel_occupancy(
            artifact, gpu=target, block=block, dynamic_shared=parse_bytes(smem, "--smem"),
            sweep=sweep_, kernel=kernel, registers=registers,
            shared_static=parse_bytes(shared, "--shared"), barriers=barriers, nvcc=nvcc)
        if json_out:
            emit_json(report.to_json())
        render(report, data_console(json_out))
