"""nvstage occupancy: theoretical occupancy per kernel, offline, from its real resources."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Optional

import typer

from nvstage.artifacts import json_safe
from nvstage.cli.common import data_console, emit_json, handled, stderr

_BYTES = re.compile(r"^\s*(\d+)\s*(k|kb|kib)?\s*$", re.IGNORECASE)


def parse_bytes(text: str, what: str) -> int:
    """``49152``, ``48K``, ``48KB`` or ``48KiB`` (all 1024-based, as CUDA counts shared memory)."""
    from nvstage.errors import UsageError

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
    nvcc: Annotated[Optional[str], typer.Option("--nvcc", envvar="NVSTAGE_NVCC",
        help="Read artifacts with this toolkit instead of the pip wheels.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Theoretical occupancy per kernel, and what limits it. No GPU needed.

    Active blocks and warps per SM, and what limits
    them (warps, registers, shared memory, blocks per SM), computed with the CUDA occupancy
    formulas from the kernel's registers and shared memory. No GPU needed.

    Examples:

          nvstage occupancy build/vadd.sm_90.cubin --block 256

          nvstage occupancy app.exe --gpu l4 --block 128 --smem 16K --sweep

          nvstage occupancy --registers 64 --shared 8192 --arch sm_86 --sweep
    """
    from nvstage.errors import UsageError
    from nvstage.hw.gpus import resolve_gpu
    from nvstage.hw.occupancy import occupancy, sweep

    with handled(json_out):
        if gpu and arch:
            raise UsageError("give --gpu or --arch, not both")
        target = resolve_gpu(gpu or arch) if (gpu or arch) else None
        if block is None and not sweep_:
            raise UsageError("give a block size with --block N, or --sweep to try them all")
        dyn = parse_bytes(smem, "--smem")
        partial: dict = {}
        rows = _kernels(artifact, registers, parse_bytes(shared, "--shared"), barriers,
                        kernel, target, nvcc, partial)

        results = []
        for k in rows:
            occ = (occupancy(k["arch"], block_size=block, registers=k["registers"],
                             shared_static=k["shared_static"], shared_dynamic=dyn,
                             barriers=k["barriers"]) if block is not None else None)
            sw = (sweep(k["arch"], registers=k["registers"], shared_static=k["shared_static"],
                        shared_dynamic=dyn, barriers=k["barriers"]) if sweep_ else None)
            results.append((k, occ, sw))

        if json_out:
            emit_json(json_safe({
                "gpu": target.name if target else None,
                "block": block,
                "dynamic_shared": dyn,
                "kernels": [{**k, "occupancy": occ.to_json() if occ else None,
                             "sweep": sw.to_json() if sw else None}
                            for k, occ, sw in results],
                **({"partial": partial} if partial else {}),
            }))
        _render(data_console(json_out), results, target)


def _kernels(artifact: Path | None, registers: int | None, shared_static: int, barriers: int,
             name: str | None, target, nvcc: str | None, partial: dict) -> list[dict]:
    """The kernels to compute for: from the artifact's resources, or the numbers given.
    ``partial`` is filled in when the artifact is a keep folder whose build is not whole."""
    from nvstage.errors import UsageError

    if artifact is None:
        if registers is None:
            raise UsageError("give an artifact, or the kernel's numbers with --registers N "
                             "[--shared BYTES]")
        if target is None:
            raise UsageError("with --registers, say which GPU: --gpu h200 or --arch sm_90")
        return [{"kernel": name or "(given)", "demangled": name or "(given)",
                 "arch": target.arch, "registers": registers, "shared_static": shared_static,
                 "barriers": barriers, "source": "command line", "resources_arch": None}]
    if registers is not None:
        raise UsageError("--registers describes a kernel without an artifact; give one or "
                         "the other")

    from nvstage.inspect.resources import resources_of
    from nvstage.compiler.toolkit import find_toolkit

    from nvstage.inspect.view import matches

    from nvstage.inspect.fatbin import kind_of_file

    if kind_of_file(artifact) == "build":
        from nvstage.compiler.record import load_build, partial_note
        from nvstage.inspect.resources import build_resources

        build = load_build(artifact)
        if note := partial_note(build):
            stderr().print(f"note: {note}", markup=False, soft_wrap=True)
            partial.update(status=build.status, note=note)
        res = build_resources(build, find_toolkit(nvcc))
    else:
        res = resources_of(artifact, find_toolkit(nvcc))
    if name:
        res = [r for r in res if matches(name, r.kernel, r.demangled)]
        if not res:
            raise UsageError(f"no kernel named {name!r} in {artifact}")
    if not res:
        raise UsageError(f"no kernels with resource usage in {artifact}")

    from nvstage.hw.gpus import parse_arch

    rows, borrowed = [], []
    for group in _groups(res, per_arch=target is None):
        chosen = _pick(group, target)
        arch = target.arch if target else chosen.arch
        if target and parse_arch(chosen.arch)[:2] != parse_arch(target.arch)[:2]:
            borrowed.append(f"{chosen.demangled} ({chosen.arch})")
        rows.append({
            "kernel": chosen.kernel, "demangled": chosen.demangled, "arch": arch,
            "registers": chosen.registers, "shared_static": chosen.shared_bytes,
            "barriers": chosen.barriers or 0, "source": chosen.source,
            "resources_arch": chosen.arch, "spills": chosen.spills, "final": chosen.final,
        })
    if borrowed:
        # Occupancy still says something useful, but the numbers belong to another build.
        stderr().print(f"note: {artifact} has no {target.arch} build of "
                       f"{', '.join(borrowed)}; using those builds' registers and shared "
                       f"memory, which an {target.arch} build may change")
    return rows


def _groups(res, *, per_arch: bool) -> list[list]:
    """Resource records per kernel (and per arch when no target GPU was named), in order."""
    groups: dict = {}
    for r in res:
        groups.setdefault((r.kernel, r.arch if per_arch else None), []).append(r)
    return list(groups.values())


def _pick(group, target):
    """The resource record for the target arch, or the nearest older one, or the newest."""
    from nvstage.hw.gpus import parse_arch

    if target is None:
        return max(group, key=lambda r: parse_arch(r.arch)[:2])
    want = parse_arch(target.arch)[:2]
    exact = [r for r in group if parse_arch(r.arch)[:2] == want]
    if exact:
        return max(exact, key=lambda r: r.final)  # after the device link, when there is one
    older = [r for r in group if parse_arch(r.arch)[:2] < want]
    return max(older or group, key=lambda r: parse_arch(r.arch)[:2])


def _bar(fraction: float, width: int = 20) -> str:
    n = round(fraction * width)
    return "#" * n + "." * (width - n)


def _render(con, results, target) -> None:
    from rich import box
    from rich.table import Table

    if target is not None and target.is_product:
        con.print(f"gpu: {target.display_name or target.name} ({target.arch}, "
                  f"{target.sm_count} SMs)")
    with_block = [(k, o) for k, o, _ in results if o is not None]
    if with_block:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="theoretical occupancy per SM")
        for col in ("kernel", "arch", "regs", "smem", "block", "blocks", "warps",
                    "occupancy", "limited by"):
            t.add_column(col, justify="left" if col in ("kernel", "arch", "limited by")
                         else "right", overflow="fold")
        for k, o in with_block:
            t.add_row(k["demangled"], o.arch, str(o.registers),
                      str(o.shared_static + o.shared_dynamic), str(o.block_size),
                      str(o.active_blocks), f"{o.active_warps}/{o.max_warps}",
                      f"{o.occupancy:.0%}", ", ".join(o.limiters))
        con.print(t)
        for k, o in with_block:
            for note in o.notes:
                con.print(f"{k['demangled']}: {note}")
            if k.get("spills"):
                con.print(f"{k['demangled']}: spills registers to local memory")
    # Kernels with the same arch, registers, shared memory and barriers sweep alike: one table.
    groups: dict[tuple, list] = {}
    for k, _, sw in results:
        if sw is not None:
            key = (k["arch"], k["registers"], k["shared_static"], k["barriers"])
            groups.setdefault(key, []).append((k, sw))
    for members in groups.values():
        k, sw = members[0]
        from nvstage.inspect.records import display_name

        names = ", ".join(display_name(m[0]["demangled"]) for m in members)
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False,
                  title=f"{names} on {sw.results[0].arch}: block size sweep")
        for col in ("block", "blocks", "warps", "occupancy", "", "limited by"):
            t.add_column(col, justify="right" if col in ("block", "blocks", "warps",
                                                         "occupancy") else "left")
        for r in sw.results:
            mark = " <- best" if sw.best is not None and r.block_size == sw.best.block_size \
                else ""
            t.add_row(str(r.block_size), str(r.active_blocks), str(r.active_warps),
                      f"{r.occupancy:.0%}", _bar(r.occupancy),
                      ", ".join(r.limiters) + mark)
        con.print(t)
        if sw.best is None:
            con.print(f"{k['demangled']}: no block size can launch")
        else:
            b = sw.best
            ties = [r.block_size for r in sw.results if r.occupancy == b.occupancy]
            tie = f" ({len(ties)} sizes tie: the largest is named)" if len(ties) > 1 else ""
            con.print(f"best: block {b.block_size}: {b.active_blocks} per SM, "
                      f"{b.active_warps}/{b.max_warps} warps ({b.occupancy:.0%}){tie}")
