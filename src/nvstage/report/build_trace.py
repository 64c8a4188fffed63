"""The whole build's timeline as a Chrome trace (trace-event JSON, what Perfetto and
chrome://tracing open), as ninjatracing draws a Ninja build. Pure: a ``BuildView`` in, a
JSON-ready dict out.

One process (the build); one thread per row of the timeline (``TranslationUnit.lane``: the
commands that ran at once get different rows); each nvcc command a complete event (``X``)
and its stages complete events inside it. Stages that ran at the same time within one
command (``-j``, job-server tokens) go to rows of their own below the command's, so every
row nests properly. A command answered whole from the cache has no stages: none ran.
Timestamps are microseconds from the build's first command.
"""

from __future__ import annotations

from nvstage.inspect.build_view import BuildView, StageTime, first_free_rows
from nvstage.report.units import trace_us

BUILD_PID = 1
# Rows for a command's parallel stages: its row's id plus this times the stage row.
PARALLEL_TID = 10_000
MAX_COMMAND_CHARS = 1000  # the command an event carries (the report has it whole)


def stage_rows(stages: list[StageTime]) -> list[int]:
    """For each stage (in start order), the first row where it does not overlap an earlier
    one: 0 for stages that ran one after another."""
    return first_free_rows([(s.start, s.start + s.seconds) for s in stages])


def chrome_build_trace(view: BuildView) -> dict:
    """The trace as a dict ready for ``json.dump``."""
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": BUILD_PID,
                           "args": {"name": f"build ({view.folder})"}}]
    named: set[int] = set()

    def thread(tid: int, name: str) -> None:
        if tid not in named:
            named.add(tid)
            events.append({"name": "thread_name", "ph": "M", "pid": BUILD_PID, "tid": tid,
                           "args": {"name": name}})
            events.append({"name": "thread_sort_index", "ph": "M", "pid": BUILD_PID,
                           "tid": tid, "args": {"sort_index": tid}})

    # A command's parallel stage rows sit above every command row (a record of more rows
    # than PARALLEL_TID must not share a thread between a command and another's stages).
    stride = max(PARALLEL_TID, view.lanes + 1)
    for u in sorted(view.last_units, key=lambda u: (u.start, u.index)):  # the last build's
        tid = u.lane + 1
        thread(tid, f"slot {tid}")
        events.append({
            "name": u.name, "cat": f"command,{u.state}", "ph": "X", "ts": trace_us(u.start),
            "dur": trace_us(u.seconds), "pid": BUILD_PID, "tid": tid,
            "args": {"kind": u.kind, "source": u.source, "output": u.output,
                     "status": u.status,
                     "hit": u.hit, "reason": u.reason, "process": u.pid,
                     "kernels": len(u.kernels),
                     "overhead_seconds": u.overhead_seconds,
                     "command": u.command[:MAX_COMMAND_CHARS]}})
        ran = sorted((s for s in u.stages if s.ran), key=lambda s: (s.start, s.index))
        for s, row in zip(ran, stage_rows(ran)):
            stid = tid if row == 0 else tid + stride * row
            if row:
                thread(stid, f"slot {tid}: parallel stages {row + 1}")
            events.append({
                "name": s.label, "cat": f"stage,{s.kind}" + (",cached" if s.cached else ""),
                "ph": "X", "ts": trace_us(s.start), "dur": trace_us(s.seconds), "pid": BUILD_PID,
                "tid": stid, "args": {"unit": u.name, "stage": s.index, "cached": s.cached}})
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"record": view.folder, "started_unix": view.started,
                          "wall_seconds": view.wall_seconds, "units": len(view.last_units),
                          "build": view.last_build.number if view.last_build else None,
                          "generator": "nvstage report --build-trace"}}
