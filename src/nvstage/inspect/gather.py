"""What a path holds, gathered kernel by kernel: the one place in ``inspect/`` that opens a
build folder.

A file (cubin, fatbin, object, executable) is read by the readers directly (``resources``,
``sass``); a keep folder or a ``stages.json`` is opened as the ``Build`` it records
(``compiler.manifest.model.load_build``) and read stage by stage, each stage's cubins by the same
readers. The readers themselves take bytes, files or a ``Build``, never a path that may be a
build: they import nothing that opens one, and nothing of this module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace

from nvstage.inspect.fatbin import kind_of_file
from nvstage.inspect.kernels import KernelRecord, select
from nvstage.inspect.resources import build_resources, file_resources
from nvstage.inspect.sass import SassKernel, build_sass, disassemble
from nvstage.inspect.elf import refine_arch
from nvstage.compiler.manifest.model import load_build, Build
from nvstage.compiler.toolkit.locate import find_toolkit


def resources_of(path: str | os.PathLike, toolkit) -> list[KernelRecord]:
    """Per kernel and arch, for a cubin, fatbin, object, executable or build folder: a
    build's joined from its ptxas reports and cuobjdump (``build_resources``), a file's from
    cuobjdump alone (``file_resources``: no spills)."""
    if kind_of_file(path) == "build":

        return build_resources(load_build(path), toolkit)
    return file_resources(path, toolkit)


def sass_of(path: str | os.PathLike, toolkit, *, lineinfo: bool = False) -> list[SassKernel]:
    """SASS of every function in a file (``sass.disassemble``) or of every cubin a build
    folder holds (``sass.build_sass``)."""
    if kind_of_file(path) == "build":

        return build_sass(load_build(path), toolkit, lineinfo=lineinfo)
    return disassemble(path, toolkit, lineinfo=lineinfo)


def kernel_records(artifact, toolkit=None, *, kernel: str | None = None) -> list[KernelRecord]:
    """Every kernel of a ``Build`` or of an artifact (cubin, fatbin, object, executable, keep
    folder or stages.json), per arch; only those ``kernel`` names when given. A build's
    records join its ptxas report with cuobjdump's; a file's are cuobjdump's (no spills)."""
    if isinstance(artifact, Build):
        rows = build_resources(artifact, toolkit)
    else:

        rows = resources_of(artifact, toolkit or find_toolkit())
    return select(rows, kernel)


def with_code(cubin: str, toolkit, records: Mapping[tuple[str, str], KernelRecord], *,
              final: bool, size: int | None = None) -> list[KernelRecord]:
    """The kernels of one cubin file, in the order nvdisasm lists them: each one's record from
    ``records`` (by mangled name and arch) with its SASS instruction count and the cubin's
    name (and ``size``); a kernel no record holds gets a record of these alone (its
    resources None, ``final`` as given)."""
    out = []
    for k in disassemble(cubin, toolkit):
        if not k.is_entry:  # -rdc cubins also hold device functions
            continue
        # The ELF cannot say "f": the cubin reads sm_100 where ptxas said sm_100f.
        r = records.get((k.name, k.arch)) or next(
            (v for (name, arch), v in records.items()
             if name == k.name and refine_arch(k.arch, arch) == arch), None) \
            or KernelRecord(k.name, k.demangled, k.arch, None, None, None, final=final)
        out.append(replace(r, instructions=k.instruction_count,
                           image=os.path.basename(cubin), image_size=size))
    return out
