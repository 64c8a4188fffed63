"""One operation through two compilers, kernel by kernel: what ``build_diff`` adds when two
builds come from different compilers (nvcc, NVRTC, Triton). Kernels are paired by name where
their symbols differ, and each row gains the theoretical occupancy at its launch block and the
SASS instruction mix by class (``inspect.mix``)."""

from __future__ import annotations

import os

from nvstage.inspect.kernels import KernelRecord, base_name
from nvstage.compiler.manifest.triton_info import triton_info
from nvstage.inspect.elf import refine_arch
from nvstage.inspect.mix import mix
from nvstage.inspect.sass import disassemble
from nvstage.inspect.triton_view import launch_occupancy

MIX = "mix."  # a metric per instruction class: "mix.fp32", "mix.global_load", ...


def _ident(r: KernelRecord) -> tuple:
    """What two compilers' spellings of one kernel share: its bare name, the arch without
    its "a"/"f" suffix (Triton builds sm_90a where nvcc builds sm_90), finality."""
    return base_name(r.demangled or r.kernel), r.arch.rstrip("af"), r.final


def pair(ra: dict, rb: dict) -> dict[str, str]:
    """A key -> B key for the kernels named differently on each side whose bare name and arch
    agree, one on each side."""
    only_a = [k for k in ra if k not in rb]
    only_b = [k for k in rb if k not in ra]
    by_a: dict[tuple, list[str]] = {}
    by_b: dict[tuple, list[str]] = {}
    for k in only_a:
        by_a.setdefault(_ident(ra[k]), []).append(k)
    for k in only_b:
        by_b.setdefault(_ident(rb[k]), []).append(k)
    return {ka[0]: by_b[i][0] for i, ka in by_a.items() if len(ka) == 1
            and len(by_b.get(i, ())) == 1}


def launch_of(build, r: KernelRecord, block: int | None) -> tuple[int | None, int]:
    """(block size, dynamic shared memory) one launch of ``r`` from ``build`` has: a Triton
    kernel's own (num_warps x 32, its metadata's shared), else ``block`` and none."""
    info = triton_info(build)
    if info is not None and r.kernel == info.name:
        return info.threads, info.shared
    return block, 0


def occupancy_figures(build, r: KernelRecord, block: int | None) -> dict:
    """block, dynamic_shared and occupancy (percent of the SM's warps) for one record; the
    occupancy None when the block is unknown or the arch has no limits here."""
    threads, dynamic = launch_of(build, r, block)
    occ = launch_occupancy(r.arch, threads, dynamic, r) if threads is not None else None
    return {"block": threads, "dynamic_shared": dynamic,
            "occupancy": round(100 * occ.occupancy, 1) if occ is not None else None}


def mixes(build, toolkit) -> dict[tuple[str, str], dict[str, int]]:
    """(mangled kernel, arch) -> instructions per class, from each kept cubin's SASS."""
    out = {}
    for a in build.artifacts:
        if a.kind != "cubin" or not os.path.isfile(a.path):
            continue
        for k in disassemble(a.path, toolkit):
            if k.is_entry:
                out[(k.name, k.arch)] = mix(k.code).counts
    return out


def _with(figures: dict, build, r: KernelRecord, block, mixed: dict) -> dict:

    out = dict(figures)
    out.update(occupancy_figures(build, r, block))
    counts = mixed.get((r.kernel, r.arch)) or next(
        (v for (name, arch), v in mixed.items()
         if name == r.kernel and refine_arch(arch, r.arch) == r.arch), {})
    out.update({MIX + c: n for c, n in counts.items()})
    return out


def paired_rows(a, b, ra: dict, rb: dict, ka: dict, kb: dict, toolkit, block: int | None,
                notes: list[str], chosen: list[tuple[str, str]] | None = None
                ) -> list[tuple[str, dict, dict, str | None]]:
    """``build_diff``'s kernel rows for two builds from different compilers, as (A's kernel,
    A's figures, B's figures, B's kernel where it is named otherwise). ``chosen``: the
    (A key, B key) pairs asked for (``--pair``), the only rows then; else kernels pair by
    name."""
    ma, mb = mixes(a, toolkit), mixes(b, toolkit)
    ka = {k: _with(v, a, ra[k], block, ma) for k, v in ka.items()}
    kb = {k: _with(v, b, rb[k], block, mb) for k, v in kb.items()}
    if chosen is not None:
        rows = [(x, dict(ka[x]), dict(kb[y]), None if x == y else y) for x, y in chosen]
    else:
        pairs = pair(ra, rb)
        taken = set(pairs.values())
        rows = [(k, ka.get(k, {}), kb.get(pairs.get(k, k), {}), pairs.get(k))
                for k in dict.fromkeys([*ka, *kb]) if k not in taken]
    for _, fa, fb, _ in rows:
        for m in {m for m in (*fa, *fb) if m.startswith(MIX)}:  # a class one side lacks: 0
            if fa and fb:
                fa.setdefault(m, 0)
                fb.setdefault(m, 0)
    unknown = [name for name, build, recs in (("A", a, ra), ("B", b, rb))
               if any(launch_of(build, r, block)[0] is None for r in recs.values())]
    if unknown:
        notes.append(f"occupancy of {' and '.join(unknown)}'s nvcc/NVRTC kernels needs their "
                     "launch block: give --block N")
    return rows
