"""Running the stage graph: every stage once its inputs exist, at most ``jobs`` at a time."""

from __future__ import annotations

import contextvars
import heapq
import os
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from nvstage import proc
from nvstage.compiler.nvcc.graph import Graph
from nvstage.compiler.pipeline.observer import Observer
from nvstage.compiler.nvcc.plan import Stage
from nvstage.compiler.manifest.model import StageRun


def default_jobs() -> int:
    """The cores this process may run on (affinity and cgroup cpusets included)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


# Stages on a farm at once, beside the local ones (``remote``): the farm's cores bound them.
REMOTE_LANES = 64


def schedule(graph: Graph, run: Callable[[Stage], StageRun], jobs: int, observer: Observer,
             runs: dict[int, StageRun], slots=None,
             remote: Callable[[Stage], bool] | None = None) -> StageRun | None:
    """Run every stage with ``run`` once its inputs exist, at most ``jobs`` at a time.

    ``slots`` (a make jobserver, ``jobserver.JobServer``): inside a build, one stage runs on
    the slot the build gave this command, and each further one only on a token taken from the
    build's pool (never waited for), given back as soon as it is not needed: nvstage under
    ``make -jN`` never runs more than N things at once.

    ``remote(stage)``: the stage runs on a build farm (``compiler/dist``): it takes neither a
    job nor a slot (up to ``REMOTE_LANES`` at once). One that falls back to a local run then
    runs beside the ``jobs``.

    Ready stages start longest-remaining-chain first (plan order with one job, as nvcc).
    After a failure nothing new starts; the stages already running are waited for.
    The observer hears from this thread only (see ``Observer``).
    Fills ``runs`` by index as stages finish (an interrupted build keeps what it did);
    returns the failing run with the lowest index, if any. An exception here (Ctrl-C, a
    signal) ends the running stages' tools before the pool waits for them.
    """
    after = graph.dependents()
    waiting = {i: len(ds) for i, ds in graph.deps.items()}
    rank = graph.bottom_levels() if jobs > 1 or slots else {i: 0.0 for i in graph.stages}
    ready = [(-rank[i], i) for i, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    failures: list[StageRun] = []

    far = {i: bool(remote and remote(s)) for i, s in graph.stages.items()}
    workers = jobs + (REMOTE_LANES if any(far.values()) else 0)
    # The scope exits first: on an exception its tools end, so the pool's wait is short.
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nvstage-stage") as pool, \
            proc.tool_scope():
        running: dict[Future, int] = {}
        while ready or running:
            here = sum(1 for i in running.values() if not far[i])
            if slots is not None:  # as many tokens as stages that could run beside the first
                waiting_here = sum(1 for _, i in ready if not far[i]) if not failures else 0
                want = min(jobs, here + waiting_here) - 1
                while slots.held < want and slots.acquire(timeout=0):
                    pass
                while slots.held > max(want, here - 1, 0):
                    slots.release()
            limit = jobs if slots is None else 1 + slots.held
            held_back = []
            while ready and not failures:
                entry = heapq.heappop(ready)
                i = entry[1]
                if far[i] and len(running) - here >= REMOTE_LANES or \
                        not far[i] and here >= limit:
                    held_back.append(entry)
                    continue
                here += not far[i]
                observer.on_stage_start(graph.stages[i])
                # Under the scope's context: its tools are the ones this build may end.
                running[pool.submit(contextvars.copy_context().run, run,
                                    graph.stages[i])] = i
            for entry in held_back:
                heapq.heappush(ready, entry)
            if not running:
                break
            # A timeout: a signal the kernel hands to a worker thread only sets a flag, and
            # the main thread runs Python's handler when it next wakes.
            done, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                i = running.pop(fut)
                result = fut.result()
                runs[i] = result
                observer.on_stage_end(result)
                if not result.ok:
                    failures.append(result)
                    continue
                for j in after[i]:
                    waiting[j] -= 1
                    if waiting[j] == 0:
                        heapq.heappush(ready, (-rank[j], j))
    return min(failures, key=lambda r: r.stage.index, default=None)
