"""A Chrome / Perfetto trace of one run (pure: records in, a JSON-ready dict out).

Lanes: the host's launch and copy calls, the GPU's kernels and copies, and the sequential
baseline (every term of T laid end to end). Flow arrows (``s``/``f`` with a shared ``id``)
join each launch call to the kernel it started. Timestamps are microseconds, as the format
wants; the inputs are nanoseconds from the start of the traced repetition.
"""

from __future__ import annotations

from collections.abc import Sequence

from nvstage.run.decompose import Decomposition
from nvstage.report.units import trace_us
from nvstage.run.results import Span, Timeline

HOST_PID, GPU_PID, BASELINE_PID = 1, 2, 3
LAUNCH_TID, COPY_CALL_TID = 1, 2
KERNEL_TID, COPY_TID = 1, 2
BASELINE_TID = 1


def _meta(pid: int, tid: int | None, kind: str, name: str) -> dict:
    ev = {"name": kind, "ph": "M", "pid": pid, "args": {"name": name}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _complete(span: Span, pid: int, tid: int, cat: str) -> dict:
    return {"name": span.name, "cat": cat, "ph": "X", "ts": trace_us(ns=span.start_ns),
            "dur": trace_us(ns=span.dur_ns), "pid": pid, "tid": tid,
            "args": {"op": span.op_index, "kind": span.kind, **span.args}}


def baseline_spans(decomp: Decomposition) -> list[Span]:
    """The sequential baseline: each op's median terms end to end, in sequence order."""
    spans, t = [], 0.0
    for op in decomp.ops:
        if op.kind == "launch":
            if op.host:
                spans.append(Span(op.index, "launch", f"launch {op.name}", t, op.host.median,
                                  {"term": "t_launch"}))
                t += op.host.median
            if op.gpu:
                spans.append(Span(op.index, "launch", op.name, t, op.gpu.median,
                                  {"term": "t_kernel"}))
                t += op.gpu.median
        elif op.gpu:
            spans.append(Span(op.index, op.kind, f"{op.kind} {op.name}", t, op.gpu.median,
                              {"term": "t_transfer", "bytes": op.nbytes}))
            t += op.gpu.median
    return spans


def chrome_trace(timeline: Timeline, decomp: Decomposition | None = None,
                 metadata: dict | None = None) -> dict:
    """The trace as a dict ready for ``json.dump``."""
    events: list[dict] = [
        _meta(HOST_PID, None, "process_name", "host"),
        _meta(HOST_PID, LAUNCH_TID, "thread_name", "launch calls"),
        _meta(HOST_PID, COPY_CALL_TID, "thread_name", "copy calls"),
        _meta(GPU_PID, None, "process_name", "GPU"),
        _meta(GPU_PID, KERNEL_TID, "thread_name", "kernels"),
        _meta(GPU_PID, COPY_TID, "thread_name", "copies"),
    ]
    for s in timeline.host:
        tid = LAUNCH_TID if s.kind == "launch" else COPY_CALL_TID
        events.append(_complete(s, HOST_PID, tid, "host"))
    for s in timeline.gpu:
        tid = KERNEL_TID if s.kind == "launch" else COPY_TID
        events.append(_complete(s, GPU_PID, tid, "kernel" if s.kind == "launch" else "copy"))
    events += flow_events(timeline.host, timeline.gpu)
    if decomp is not None:
        events.append(_meta(BASELINE_PID, None, "process_name",
                            "sequential baseline (T, medians end to end)"))
        events.append(_meta(BASELINE_PID, BASELINE_TID, "thread_name", "T"))
        for s in baseline_spans(decomp):
            events.append(_complete(s, BASELINE_PID, BASELINE_TID, "baseline"))
    meta = {"title": timeline.title, "gpu_placement": timeline.gpu_placement}
    meta.update(metadata or {})
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": meta}


def flow_events(host: Sequence[Span], gpu: Sequence[Span]) -> list[dict]:
    """One arrow per launch: from the launch call (``s``) to its kernel (``f``)."""
    kernels = {s.op_index: s for s in gpu if s.kind == "launch"}
    out = []
    for flow_id, h in enumerate((s for s in host if s.kind == "launch"), start=1):
        k = kernels.get(h.op_index)
        if k is None:
            continue
        out.append({"name": "launch", "cat": "flow", "ph": "s", "id": flow_id,
                    "ts": trace_us(ns=h.start_ns), "pid": HOST_PID, "tid": LAUNCH_TID})
        out.append({"name": "launch", "cat": "flow", "ph": "f", "bp": "e", "id": flow_id,
                    "ts": trace_us(ns=k.start_ns), "pid": GPU_PID, "tid": KERNEL_TID})
    return out
