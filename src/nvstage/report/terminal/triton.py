"""What a Triton build decided, on a terminal: the kernel, its launch convention, FP fusion
and the ptxas that ran (``compiler.triton_record.TritonInfo``)."""

from __future__ import annotations

from nvstage.report.terminal.console import plain_table, say, notes
from nvstage.report.units import fmt_bytes


def triton_rows(info) -> list[tuple[str, str]]:
    """(what, value) for each line of the Triton table; what a record does not hold (a
    cache's metadata has no signature and names no ptxas) is left out."""
    consts = ", ".join(f"{k}={v}" for k, v in info.constexprs) or "none"
    params = ", ".join(f"{n}: {t}" for n, t in info.params)
    scratch = (f"global {fmt_bytes(info.global_scratch_size)}, profile "
               f"{fmt_bytes(info.profile_scratch_size)} per program")
    why = f" ({info.fp_fusion_from})" if info.fp_fusion_from else ""
    rows = [
        ("kernel", f"{info.kernel} -> {info.name} ({info.arch}, PTX {info.ptx_version or '?'})"),
        ("parameters", f"{params}; Triton appends global_scratch, profile_scratch"),
        ("constexprs", consts),
        ("launch", f"num_warps {info.num_warps} ({info.threads} threads per block), num_ctas "
                   f"{info.num_ctas}, dynamic shared memory {fmt_bytes(info.shared)}"),
        ("num_stages", str(info.num_stages)),
        ("scratch", scratch if info.global_scratch_size or info.profile_scratch_size
         else "none"),
        ("FP fusion", f"{'on' if info.fp_fusion else 'off'}{why}"),
        ("ptxas", f"{info.ptxas_version} ({'Triton' if info.ptxas == 'triton' else 'the toolkit'}"
                  f"'s: {info.ptxas_path})"),
        ("triton", info.version or "?"),
    ]
    skip = set() if info.signature else {"parameters", "constexprs"}
    if not info.ptxas:
        skip.add("ptxas")
    return [(w, v) for w, v in rows if w not in skip]


def render_triton(build, con) -> None:
    """The Triton table after the stage table (nothing for other builds)."""
    from nvstage.compiler.manifest.triton_info import triton_info

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

        say(f"note: {note}")


def render_section(section: dict, con) -> None:
    """``show``'s ``triton`` section: the metadata table, then each kernel's occupancy at the
    one launch shape Triton gives it."""
    from nvstage.compiler.manifest.triton_info import read_info

    t = plain_table(pad_edge=False)
    t.add_column("triton")
    t.add_column("")
    for what, value in triton_rows(read_info(section)):
        t.add_row(what, value)
    for what, means in (("reqntid", "threads per block, exactly"),
                        ("maxntid", "threads per block, at most")):
        if section.get(what):  # from a cache's PTX: the block Triton's launch must use
            t.add_row(f".{what} (PTX)", f"{section[what]} ({means})")
    for launch in section.get("launches", ()):
        occ = launch.get("occupancy")
        t.add_row(f"occupancy ({launch['arch']})", "unknown" if occ is None else
                  f"{occ['occupancy'] * 100:.0f}% at {launch['block']} threads and "
                  f"{fmt_bytes(launch['dynamic_shared'])} dynamic shared memory: "
                  f"{occ['active_blocks']} blocks, {occ['active_warps']}/{occ['max_warps']} "
                  f"warps per SM, limited by {', '.join(occ['limiters'])}")
    con.print(t)


def render_cache(cache, con) -> None:
    """``show TRITON_CACHE_DIR``: one row per kernel, then the notes."""
    from nvstage.errors import printable

    # Its folder's and entries' names are the document's: one line each, whatever they hold.
    t = plain_table(title=f"Triton cache {printable(cache.folder)}: {len(cache.kernels)} "
                          "kernel(s)",
                    title_justify="left", pad_edge=False)
    for col, just in (("kernel", "left"), ("target", "left"), ("warps", "right"),
                      ("stages", "right"), ("regs", "right"), ("spill st/ld", "right"),
                      ("smem", "right"), ("occupancy", "right"), ("entry", "left")):
        t.add_column(col, justify=just, overflow="fold")
    for k in cache.kernels:
        r, occ = k.record, k.occupancy
        spills = "-" if r is None else f"{r.spill_stores}/{r.spill_loads}"
        smem = fmt_bytes(k.shared + (r.shared_bytes if r is not None else 0))
        t.add_row(k.name, k.arch, str(k.num_warps), str(k.num_stages),
                  "-" if r is None else str(r.registers), spills, smem,
                  "-" if occ is None else f"{occ.occupancy * 100:.0f}%", printable(k.key[:12]))
    con.print(t)
    con.print("smem: static + dynamic shared memory per block; occupancy at Triton's launch "
              "(num_warps x 32 threads); entry: the start of its folder's name (--kernel "
              "takes it)", markup=False)
    notes(cache.notes)
