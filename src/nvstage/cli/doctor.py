"""nvstage doctor: what was found, where, which versions, and what therefore works."""

from __future__ import annotations

import typer

from nvstage.cli.common import emit_json, handled
from nvstage.cli.options import json_option, nvcc_option


def doctor_cmd(
    nvcc: nvcc_option("Check this nvcc instead of the one from the pip wheels.") = None,
    json_out: json_option("Print the report as JSON.") = False,
) -> None:
    """Say what this machine can do: toolkit, host compiler, driver, GPUs.

    Lists nvcc, cudafe++, cicc, ptxas, fatbinary, nvlink, cuobjdump and nvdisasm with where
    each was found and its version; the host compiler; whether a CUDA driver and GPUs are
    present (name, compute capability, memory, PCIe link, via NVML); then compile yes/no
    (measured: a one-line kernel is compiled) and run yes/no.

    Exits 0 when compiling works, even with no GPU.

    Examples:

          nvstage doctor

          nvstage doctor --json | python -m json.tool

          nvstage doctor --nvcc "$CUDA_HOME/bin/nvcc"
    """
    from nvstage.doctor import diagnose
    from nvstage.report.terminal.console import data_console
    from nvstage.report.terminal.doctor import render

    with handled(json_out):
        r = diagnose(nvcc)
        if json_out:
            emit_json(r.to_json())
        render(r, data_console(json_out))
        if not r.can_compile:
            raise typer.Exit(1)
