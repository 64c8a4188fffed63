"""A workload's Triton kernels: kept builds of ``nvstage compile --via triton`` (their keep
folders: cubin, PTX and Triton's metadata), never a Python file. A workload is a document, and
documents run no code; the build ran the Python when its owner compiled it.

Each launch of a Triton kernel follows Triton's convention (Triton 3.9,
``backends/nvidia/driver.c``): ``num_warps x 32`` threads in x, the metadata's ``shared`` bytes
of dynamic shared memory, and after the user's arguments two pointers, the global and the
profile scratch, null when the kernel asks for none (``triton_record.EXTRA_PARAMS``).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from nvstage.errors import NvstageError, WorkloadError
from nvstage.compiler.manifest.model import load_build
from nvstage.compiler.manifest.triton_info import triton_info, EXTRA_PARAMS

MAX_BUILDS = 64  # keep folders one workload names


@dataclass(frozen=True)
class TritonKernel:
    """One kept Triton build as a workload uses it."""

    folder: str  # the keep folder, absolute
    name: str  # the kernel's symbol (what a launch names)
    arch: str  # "sm_90a": what its cubin runs on
    threads: int  # num_warps x warp size: every launch's block
    shared: int  # dynamic shared memory every launch passes
    num_ctas: int
    global_scratch_size: int
    profile_scratch_size: int
    cooperative: bool
    pdl: bool
    params: tuple[tuple[str, str], ...]  # the caller's parameters (name, Triton type)
    cubin: str  # the build's cubin and PTX, as its manifest vouches for them
    ptx: str

    @property
    def extra_args(self) -> int:

        return len(EXTRA_PARAMS)

    def unsupported(self) -> str | None:
        """Why ``nvstage run`` cannot launch it as Triton would (None: it can)."""
        if self.num_ctas != 1:
            return f"it runs in clusters of {self.num_ctas} CTAs (num_ctas)"
        if self.cooperative:
            return "it needs a cooperative launch"
        if self.pdl:
            return "it needs programmatic dependent launch (launch_pdl)"
        return None


def read_builds(value, base: Path, where: str) -> tuple[TritonKernel, ...]:
    """The keep folders ``[kernel] triton`` names (one path or a list), each read as the
    document it is: a real folder (no link) whose ``stages.json`` is a whole Triton build."""
    folders = [value] if isinstance(value, str) else value
    if not isinstance(folders, list) or not folders or \
            not all(isinstance(f, str) and f and "\0" not in f for f in folders):
        raise WorkloadError("must be a keep folder of nvstage compile --via triton, or a list "
                            "of them", where=where)
    if len(folders) > MAX_BUILDS:
        raise WorkloadError(f"{len(folders)} Triton builds: more than the {MAX_BUILDS} one "
                            "workload may name", where=where)
    out: list[TritonKernel] = []
    for f in folders:
        k = _read_one(f, base, where)
        if any(o.name == k.name for o in out):
            raise WorkloadError(f"two builds of kernel {k.name} ({f}): a launch could not "
                                "tell which one it means", where=where)
        out.append(k)
    return tuple(out)


def _read_one(given: str, base: Path, where: str) -> TritonKernel:

    p = base / given
    try:
        mode = os.lstat(p).st_mode
    except FileNotFoundError:
        raise WorkloadError(f"no such keep folder: {given} (looked in {base})", where=where,
                            hint="build it first: nvstage compile FILE.py --via triton ... "
                                 "--keep-dir DIR") from None
    except (OSError, ValueError) as e:
        raise WorkloadError(f"cannot use {given}: {getattr(e, 'strerror', None) or e}",
                            where=where) from None
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        raise WorkloadError(f"{given} is not a keep folder (a folder, not a link)",
                            where=where, hint="name the folder nvstage compile --via triton "
                                              "--keep-dir wrote")
    try:
        build = load_build(p)
    except NvstageError as e:
        raise WorkloadError(f"{given}: {e.message}", where=where) from None
    info = triton_info(build)
    if info is None:
        raise WorkloadError(f"{given} is a build through {build.via}, not Triton",
                            where=where, hint="a .cu source or a cubin goes in [kernel] "
                                              "source or cubin")
    if build.status != "ok":
        raise WorkloadError(f"{given}: the build's status is {build.status!r}, not 'ok'",
                            where=where)
    cubin = next((a.path for a in build.artifacts if a.kind == "cubin"), None)
    ptx = next((a.path for a in build.artifacts if a.kind == "ptx"), None)
    if cubin is None or ptx is None:
        raise WorkloadError(f"{given}: its cubin or PTX is gone or was rewritten since the "
                            "build", where=where, hint="build it again")
    return TritonKernel(str(p.resolve()), info.name, info.arch, info.threads, info.shared,
                        info.num_ctas, info.global_scratch_size, info.profile_scratch_size,
                        info.launch_cooperative_grid, info.launch_pdl, tuple(info.params),
                        cubin, ptx)


def launch_shape(launch, given, kernels: tuple[TritonKernel, ...], where: str):
    """``launch`` with Triton's block and dynamic shared memory for its kernel: a block or
    shared size the workload gives must be the one Triton launches with."""
    from dataclasses import replace

    k = next((k for k in kernels if k.name == launch.kernel), None)
    if k is None:
        raise WorkloadError(f"no Triton kernel named {launch.kernel!r} in the builds named "
                            f"(they hold: {', '.join(x.name for x in kernels)})",
                            where=f"{where} kernel")
    block = tuple(int(b) if isinstance(b, str) and b.strip().isdigit() else b
                  for b in launch.block)
    if "block" in given and block not in ((k.threads,), (k.threads, 1), (k.threads, 1, 1)):
        raise WorkloadError(f"Triton launches {k.name} with {k.threads} threads (its num_warps "
                            f"x 32), not {list(launch.block)}", where=f"{where} block",
                            hint="leave block out: it comes from the build")
    if "shared" in given and launch.shared != k.shared:
        raise WorkloadError(f"Triton launches {k.name} with {k.shared} bytes of dynamic "
                            f"shared memory (its metadata's), not {launch.shared}",
                            where=f"{where} shared", hint="leave shared out: it comes from "
                                                          "the build")
    return replace(launch, block=(k.threads,), shared=k.shared)
