"""nvstage doctor: what was found, where, which versions, and what therefore works."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.cli.common import emit_json, handled
from nvstage.cli.options import json_option, nvcc_option
from nvstage.errors import UsageError
from nvstage.report.terminal.console import data_console


def doctor_cmd(
    nvcc: nvcc_option("Check this nvcc instead of the one from the pip wheels.") = None,
    json_out: json_option("Print the report as JSON.") = False,
    cmake_toolchain: Annotated[Optional[Path], typer.Option("--cmake-toolchain",
        metavar="FILE", help="Write a CMake toolchain file for this toolkit instead: nvcc, "
        "CUDAToolkit_ROOT and the libraries FindCUDAToolkit cannot find by name (the wheels' "
        "libcudart.so.13, ...). Use: cmake -DCMAKE_TOOLCHAIN_FILE=FILE.")] = None,
    launcher: Annotated[bool, typer.Option("--launcher", help="With --cmake-toolchain: nvstage "
        "in front of every compile, device link, link and archive, so the build record holds "
        "the whole build. A C or C++ launcher given to cmake (-DCMAKE_CXX_COMPILER_LAUNCHER="
        "ccache) runs after nvstage.")] = False,
    print_nvcc: Annotated[bool, typer.Option("--print-nvcc", help="Print the path of the nvcc "
        "nvstage uses (the pip wheels', unless --nvcc or $NVSTAGE_NVCC names another) and "
        "nothing else: cmake -DCMAKE_CUDA_COMPILER=\"$(nvstage doctor --print-nvcc)\"")] = False,
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

          nvstage doctor --cmake-toolchain nvstage.cmake --launcher

          cmake -DCMAKE_CUDA_COMPILER="$(nvstage doctor --print-nvcc)" ...
    """
    from nvstage.doctor import diagnose
    from nvstage.report.terminal.doctor import render, render_toolchain

    with handled(json_out):
        if print_nvcc:
            from nvstage.compiler.toolkit.locate import find_toolkit

            if cmake_toolchain is not None or launcher:
                raise UsageError("--print-nvcc prints a path and does nothing else",
                                 hint="run nvstage doctor --cmake-toolchain FILE apart")
            tk = find_toolkit(nvcc)
            if json_out:
                emit_json({"nvcc": tk.nvcc, "source": tk.source, "version": tk.version})
            else:
                import sys

                sys.stdout.write(tk.nvcc + "\n")
            return
        if cmake_toolchain is not None or launcher:

            if cmake_toolchain is None:
                raise UsageError("--launcher goes with --cmake-toolchain FILE",
                                 hint="nvstage doctor --cmake-toolchain nvstage.cmake --launcher")
            from nvstage.compiler.toolkit.cmake_toolchain import write_cmake_toolchain

            written = write_cmake_toolchain(cmake_toolchain, launcher=launcher, nvcc=nvcc)
            if json_out:
                emit_json(written.to_json())
            render_toolchain(written)
            return
        r = diagnose(nvcc)
        if json_out:
            emit_json(r.to_json())
        render(r, data_console(json_out))
        if not r.can_compile:
            raise typer.Exit(1)
