"""Run a prepared workload: the driver probe first, then the engine. The library entry point.

``run_workload`` never touches cuda.core unless ``driver.require()`` passes (the hang hazard
seen with cuda.core 1.2.2 and no driver: a SystemError, then a hang); it raises ``NoDriver``
instead.
"""

from __future__ import annotations

from collections.abc import Callable

from nvstage import __version__
from nvstage.run.workload import Prepared, Workload
from nvstage.run.probe import require
from nvstage.run.results import SCHEMA, RunResult


def run_workload(w: Workload, prep: Prepared, *, mode: str = "serialized",
                 reps: int | None = None, warmup: int | None = None, profile: bool = True,
                 use_cupti: bool = False, timeline: bool = True, toolkit=None,
                 log: Callable[[str], None] | None = None) -> RunResult:
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


def run_document(result: RunResult | None, w: Workload, prep: Prepared, *, probe=None,
                 error: dict | None = None) -> dict:
    """The ``--json`` document: schema ``nvstage.run/1``."""
    from nvstage.run.probe import probe as get_probe

    p = probe or get_probe()
    doc = {
        "schema": SCHEMA,
        "nvstage": __version__,
        "workload": {"name": w.name, "file": w.file, "code": w.code.kind,
                     "path": w.code.path, "reps": w.reps, "warmup": w.warmup},
        "arch": prep.arch,
        "build": prep.build,
        "compile_seconds": prep.compile_seconds,
        "toolkit": (prep.build or {}).get("toolkit"),
        "driver": p.to_json(),
    }
    if result is not None:
        rj = result.to_json()
        rj.pop("workload", None)
        doc.update(rj)
    if error is not None:
        doc["status"] = "failed"
        doc["error"] = error
    return doc
