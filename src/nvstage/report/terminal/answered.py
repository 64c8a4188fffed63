"""``nvstage compile`` answered whole from the cache, on a pipe: what the build that made the
entry printed (``build.whole_view``), then the summary line of this answer. Standard library
only (and ``report.units``): the answer imports no rich, no plan, no toolkit search."""

from __future__ import annotations

import sys

from nvstage.report.units import fmt_time


def render_answered(view: dict, hits: int, seconds: float) -> None:
    """Print ``view`` (``before`` and ``after`` on stderr, ``table`` on stdout) and the line
    that says the command was answered at once, in ``seconds``, for ``hits`` stage hits."""
    for text, stream in ((view["before"], sys.stderr), (view["table"], sys.stdout),
                         (view["after"], sys.stderr)):
        if text:
            stream.write(text)
            stream.flush()
    sys.stderr.write(f"{view['stages']} stages in {fmt_time(seconds)}, cache {hits} "
                     f"hit{'s' if hits != 1 else ''}, 0 misses (the whole command at once)"
                     f"{view['tail']}\n")
    sys.stderr.flush()
