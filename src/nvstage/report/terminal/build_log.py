"""A whole build (its build record) on a terminal: the last build's summary line and how it
differs from the one before, the record's builds, the slowest steps and stages of the last
build, time and cache hits per stage kind, the commands nvstage did not stage, the kinds of
step the record did not see, and every kernel of the project with its figures and
occupancy."""

from __future__ import annotations

from nvstage.compiler.nvcc.step_kind import label
from nvstage.report.terminal.console import notes, plain_table
from nvstage.report.units import fmt_known, fmt_parallel, fmt_share, fmt_time, plural


def summary_line(view) -> str:
    """The last build in one line: its steps by kind, wall time, parallelism and hits."""
    counts, cache = view.counts(), view.cache_totals()
    kinds = ", ".join(label(k, n) for k, n in view.step_kinds().items())
    states = ", ".join(f"{counts[s]} {s}" for s in ("ok", "hit", "fallback", "failed", "ran")
                       if counts.get(s))
    last = view.last_build
    which = "" if last is None else \
        f"build {last.number} of {len(view.builds)}" + (f" ({last.tool})" if last.tool else "")
    par = fmt_parallel(view.parallelism)
    return (f"{which}: {plural(counts['units'], 'step')} ({kinds or 'none'}; "
            f"{states or 'none'}) in {fmt_time(view.wall_seconds)}, "
            f"{fmt_time(view.unit_seconds)} in all" + (f" ({par})" if par else "")
            + f"; command cache hits {cache['command_hits']}/{cache['commands']}, "
            f"stage cache hit rate {fmt_share(cache['stage_hit_rate'])}")


def nvcc_line(view) -> str | None:
    """Which nvcc the last build's nvcc commands ran, found where (``PATH``, the pip wheels
    where PATH had none, named by the command), at which CUDA version."""
    from nvstage.compiler.toolkit.nvcc_lookup import where

    rows = view.nvccs()
    if not rows:
        return None

    def one(r: dict) -> str:
        about = ", ".join(x for x in (r["version"] and f"CUDA {r['version']}",
                                      r["from"] and where(r["from"])) if x)
        return r["nvcc"] + (f" ({about})" if about else "") + \
            (f" for {r['commands']} command{'s' * (r['commands'] != 1)}" if len(rows) > 1
             else "")

    return "nvcc: " + "; ".join(map(one, rows))


def since_line(view, changes) -> str | None:
    """How the last build differs from the one before (``record_diff.since_previous``)."""
    before = view.previous_build
    if before is None or changes is None:
        return None
    doc = before.to_json()
    rebuilt = [u.name for u in changes.units if u.changed and u.b is not None]
    kernels = [k for k in changes.kernels if k.status != "same"]
    shown = "; ".join(
        f"{k.name} ({k.arch}) {k.status}" + "".join(
            f", {m.replace('_', ' ')} {k.a[m]} -> {k.b[m]}" for m in ("registers",
                                                                       "spill_stores",
                                                                       "shared_bytes")
            if k.a and k.b and k.a.get(m) != k.b.get(m))
        for k in kernels[:6])
    par = fmt_parallel(before.parallelism)
    return (f"the build before (build {before.number}): {plural(doc['steps'], 'step')} in "
            f"{fmt_time(before.wall_seconds)}" + (f" ({par})" if par else "")
            + f", command cache hits {doc['command_hits']}/{doc['commands']}; since then "
            f"{len(rebuilt)} ran again ({', '.join(rebuilt[:8])}"
            + (" ..." if len(rebuilt) > 8 else "") + "); kernels: "
            + (shown + (f" and {len(kernels) - 6} more" if len(kernels) > 6 else "")
               if kernels else "no figure changed"))


def not_seen_note(view) -> str | None:
    missing = view.not_seen()
    if not missing:
        return None
    return ("the record saw no " + ", ".join(label(k) for k in missing) + ": a build that "
            "has them ran them outside nvstage (route them through it with "
            "CMAKE_CXX_COMPILER_LAUNCHER and the RULE_LAUNCH_LINK property; nvstage doctor "
            "--cmake-toolchain FILE --launcher writes both)")


def render_view(view, con, *, changes=None) -> None:
    """A ``build_view.BuildView``: tables on ``con``, its notes on stderr. ``changes``: what
    the last build changed (``record_diff.since_previous``), when worked out."""
    if not view.units:
        con.print(f"the build record {view.folder} holds no readable entry", markup=False)
        notes(view.notes)
        return
    con.print(summary_line(view) + f"; record {view.folder}", markup=False, soft_wrap=True)
    nvcc = nvcc_line(view)
    if nvcc:
        con.print(nvcc, markup=False, soft_wrap=True)
    since = since_line(view, changes)
    if since:
        con.print(since, markup=False, soft_wrap=True)
    if len(view.builds) > 1:
        t = plain_table(title="builds in the record", title_justify="left", pad_edge=False)
        for col in ("build", "tool", "steps", "wall", "in all", "parallel", "command hits"):
            t.add_column(col, justify="left" if col == "tool" else "right")
        for b in view.builds:
            doc = b.to_json()
            t.add_row(str(b.number), b.tool or "(by time)", str(doc["steps"]),
                      fmt_time(b.wall_seconds), fmt_time(b.step_seconds),
                      fmt_parallel(b.parallelism, cell=True),
                      f"{doc['command_hits']}/{doc['commands']}")
        con.print(t)
    t = plain_table(title="slowest steps of the last build", title_justify="left",
                    pad_edge=False)
    for col in ("step", "kind", "status", "time", "stages", "kernels"):
        t.add_column(col, justify="right" if col in ("time", "stages", "kernels") else "left")
    for u in view.slowest_units():
        t.add_row(u.name, label(u.kind), u.state, fmt_time(u.seconds), str(len(u.stages)),
                  str(len(u.kernels)))
    con.print(t)
    totals = view.kind_totals()
    if totals:
        t = plain_table(title="stage kinds", title_justify="left", pad_edge=False)
        for col in ("kind", "stages", "ran", "cached", "in hits", "hit rate", "time",
                    "slowest"):
            t.add_column(col, justify="left" if col == "kind" else "right")
        for k in totals:
            t.add_row(k.kind, str(k.stages), str(k.ran), str(k.cached), str(k.whole),
                      fmt_share(k.hit_rate), fmt_time(k.seconds), fmt_time(k.max_seconds))
        con.print(t)
    others = [u for u in view.units if u.status in ("fallback", "failed")]
    if others:
        t = plain_table(title="not staged", title_justify="left", pad_edge=False)
        t.add_column("unit")
        t.add_column("status")
        t.add_column("why", prose=True)
        for u in others:
            t.add_row(u.name, u.state, u.reason or "")
        con.print(t)
    if view.kernels:
        t = plain_table(title="kernels", title_justify="left", pad_edge=False)
        for col in ("kernel", "arch", "unit", "regs", "spill st/ld", "smem", "bar",
                    f"occ@{view.block}", "best block"):
            t.add_column(col, justify="left" if col in ("kernel", "arch", "unit") else "right")
        for k in view.kernels:
            r = k.record
            t.add_row(r.name, r.arch, view.units[k.unit].name, fmt_known(r.registers),
                      f"{fmt_known(r.spill_stores)}/{fmt_known(r.spill_loads)}"
                      + (" SPILLS" if r.spills else ""), str(r.shared_bytes), fmt_known(r.barriers),
                      "-" if k.occupancy is None else f"{k.occupancy.occupancy:.0%}",
                      "-" if k.best is None else f"{k.best.block_size}")
        con.print(t)
    missing = not_seen_note(view)
    notes(view.notes + ([missing] if missing else []))
