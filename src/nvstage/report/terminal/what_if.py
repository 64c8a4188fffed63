"""``nvstage report BUILD --what-if-remote N``: the estimate as plain text (stdout)."""

from __future__ import annotations

from nvstage.report.units import fmt_time


def render_what_if(est) -> str:
    """``est``: ``compiler.dist.estimate.FarmEstimate``."""
    how = "measured in the record" if est.round_trip_measured else "assumed"
    rt = f"{fmt_time(est.round_trip)} ({how})"
    lines = [
        f"estimate: wall with {est.remote_cores} remote cores (cicc, ptxas) and "
        f"{est.local_cores} local: {fmt_time(est.wall)}",
        f"  recorded wall:          {fmt_time(est.recorded_wall)}",
        f"  longest unit (bound):   {fmt_time(est.critical_path)}",
        f"  local work:             {fmt_time(est.local_work)}",
        f"  remote work:            {fmt_time(est.remote_work)}",
        f"  round trip per stage:   {rt}",
    ]
    lines += [f"  note: {n}" for n in est.notes]
    return "\n".join(lines)
