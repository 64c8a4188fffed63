"""nvstage doctor: what was found, where, which versions, and what therefore works."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from nvstage.cli.common import data_console, emit_json, handled


def doctor_cmd(
    nvcc: Annotated[Optional[str], typer.Option("--nvcc", envvar="NVSTAGE_NVCC",
        help="Check this nvcc instead of the one from the pip wheels.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
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
    from rich import box
    from rich.table import Table

    from nvstage.doctor import diagnose
    from nvstage.report.units import fmt_bytes

    with handled(json_out):
        r = diagnose(nvcc)
        if json_out:
            emit_json(r.to_json())
        con = data_console(json_out)
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="toolkit")
        t.add_column("tool")
        t.add_column("version")
        t.add_column("path", overflow="fold")
        if r.toolkit:
            for info in r.toolkit.tools.values():
                t.add_row(info.name, info.version or ("-" if info.found else ""),
                          info.path or "NOT FOUND")
        t.add_row(f"host ({r.host.name})", r.host.version or "", r.host.path or "NOT FOUND")
        for name, version in r.runtime_compilers.items():
            label = {"nvrtc": "NVRTC", "nvjitlink": "nvJitLink"}.get(name, name)
            t.add_row(label, version or "", "library (cuda-bindings)" if version
                      else "NOT FOUND: compile --via nvrtc will not work")
        con.print(t)
        if r.toolkit:
            con.print(f"toolkit: {r.toolkit.describe()}")
        else:
            con.print(f"toolkit: none ({r.toolkit_error})")
        for source, path in r.other_toolkits:
            con.print(f"also found: {path} ({source}); choose it with --nvcc")
        con.print(f"driver: {r.driver.reason}")
        for g in r.gpus:
            pcie = (f"PCIe gen{g.pcie_generation} x{g.pcie_width}"
                    f" (max gen{g.pcie_max_generation} x{g.pcie_max_width})"
                    if g.pcie_generation else "PCIe unknown")
            con.print(f"gpu {g.index}: {g.name}, {g.arch} (cc {g.compute_capability}), "
                      f"{fmt_bytes(g.memory_bytes)}, {pcie}")
        if not r.gpus:
            con.print(f"gpus: none listed ({r.nvml_note})")
        con.print(f"compile: {'yes' if r.can_compile else 'NO'} ({r.compile_check})")
        con.print(f"run: {'yes' if r.can_run else 'no'} ({r.driver.reason})")
        if not r.can_compile:
            raise typer.Exit(1)
