"""Run a prepared workload: the driver probe first, then the engine. The library entry point.

``run_workload`` never touches cuda.core unless ``driver.require()`` passes (the hang hazard
seen with cuda.core 1.2.2 and no driver: a SystemError, then a hang); it raises ``NoDriver``
instead.
"""

from __future__ import annotations

from collections.abc import Callable

from nvstage.run.prepare import Prepared
from nvstage.run.probe import require
from nvstage.run.results import RunResult
from nvstage.run.workload import Workload


def run_workload(w: Workload, prep: Prepared, *, mode: str = "serialized",
                 reps: int | None = None, warmup: int | None = None, profile: bool = True,
                 use_cupti: bool = False, timeline: bool = True, toolkit=None,
                 log: Callable[[str], None] | None = None) -> RunResult:
    w.check_work(reps, warmup)  # the work as a whole, before the GPU is touched
    require()
    from nvstage.run.devices import device_facts
    from nvstage.run.engine import Engine, Loaded
    from nvstage.run.helpers import helper_cubin

    loaded = Loaded(prep.kind, prep.image, prep.mangled(), helper_cubin(prep.arch, toolkit))
    engine = Engine(w, loaded, mode=mode, arch=prep.arch, use_cupti=use_cupti, log=log)
    try:
        engine.setup()
    finally:  # never let a device query replace the error being raised
        try:
            engine.result.device = device_facts(getattr(engine, "dev", None))
        except Exception as e:
            engine.result.device = {"error": f"device facts unavailable ({e})"}
    return engine.run(reps=reps, warmup=warmup, timeline=timeline, profile=profile)
