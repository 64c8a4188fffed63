"""What a Triton build decided, on a terminal: the kernel, its launch convention, FP fusion
and the ptxas that ran (``compiler.triton_record.TritonInfo``)."""

from __future__ import annotations

from nvstage.report.terminal.console import plain_table
from nvstage.report.units import fmt_bytes


def triton_rows(info) -> list[tuple[str, str]]:
    """(what, value) for each line of the Triton table."""
    consts = ", ".join(f"{k}={v}" for k, v in info.constexprs) or "none"
    params = ", ".join(f"{n}: {t}" for n, t in info.params) or "none"
    scratch = (f"global {fmt_bytes(info.global_scratch_size)}, profile "
               f"{fmt_bytes(info.profile_scratch_size)} per program")
    return [
        ("kernel", f"{info.kernel} -> {info.name} ({info.arch}, PTX {info.ptx_version or '?'})"),
        ("parameters", f"{params}; Triton appends global_scratch, profile_scratch"),
        ("constexprs", consts),
        ("launch", f"num_warps {info.num_warps} ({info.threads} threads per block), num_ctas "
                   f"{info.num_ctas}, dynamic shared memory {fmt_bytes(info.shared)}"),
        ("num_stages", str(info.num_stages)),
        ("scratch", scratch if info.global_scratch_size or info.profile_scratch_size
         else "none"),
        ("FP fusion", f"{'on' if info.fp_fusion else 'off'} ({info.fp_fusion_from})"),
        ("ptxas", f"{info.ptxas_version} ({'Triton' if info.ptxas == 'triton' else 'the toolkit'}"
                  f"'s: {info.ptxas_path})"),
        ("triton", info.version),
    ]


def render_triton(build, con) -> None:
    """The Triton table after the stage table (nothing for other builds)."""
    from nvstage.compiler.triton_record import triton_info

    info = triton_info(build)
    if info is None:
        return
    t = plain_table(pad_edge=False)
    t.add_column("triton")
    t.add_column("")
    for what, value in triton_rows(info):
        t.add_row(what, value)
    con.print(t)
    for note in info.notes:
        from nvstage.report.terminal.console import say

        say(f"note: {note}")


def render_section(section: dict, con) -> None:
    """``show``'s ``triton`` section: the metadata table, then each kernel's occupancy at the
    one launch shape Triton gives it."""
    from nvstage.compiler.triton_record import read_info

    t = plain_table(pad_edge=False)
    t.add_column("triton")
    t.add_column("")
    for what, value in triton_rows(read_info(section)):
        t.add_row(what, value)
    for launch in section.get("launches", ()):
        occ = launch.get("occupancy")
        t.add_row(f"occupancy ({launch['arch']})", "unknown" if occ is None else
                  f"{occ['occupancy'] * 100:.0f}% at {launch['block']} threads and "
                  f"{fmt_bytes(launch['dynamic_shared'])} dynamic shared memory: "
                  f"{occ['active_blocks']} blocks, {occ['active_warps']}/{occ['max_warps']} "
                  f"warps per SM, limited by {', '.join(occ['limiters'])}")
    con.print(t)
