"""Run a workload: ``open_session`` reads, compiles and validates it (no GPU needed), and the
``Session`` runs it (``run_workload`` does both); ``run_prepared`` runs a prepared one, the
driver probe first, then the engine.

``run_prepared`` never touches cuda.core unless ``driver.require()`` passes (the hang hazard
seen with cuda.core 1.2.2 and no driver: a SystemError, then a hang); it raises ``NoDriver``
instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nvstage.run.prepare import Prepared, load_and_validate
from nvstage.run.probe import require, probe
from nvstage.run.results import RunResult
from nvstage.run.workload import Workload
from nvstage.errors import WorkloadError, UsageError, GpuRunFailed, NoDriver, CheckFailed
from nvstage.run.workload.spec import MAX_REPS
from nvstage.compiler.toolkit.locate import find_toolkit
from nvstage.run.devices import device_facts, nvml_gpus
from nvstage.run.document import run_document
from nvstage.run.engine import Engine, Loaded
from nvstage.run.helpers import helper_cubin
from nvstage.run.workload.dry_run import dry_run_plan


def run_prepared(w: Workload, prep: Prepared, *, mode: str = "serialized",
                 reps: int | None = None, warmup: int | None = None, profile: bool = True,
                 use_cupti: bool = False, timeline: bool = True, toolkit=None,
                 log: Callable[[str], None] | None = None) -> RunResult:
    w.check_work(reps, warmup)  # the work as a whole, before the GPU is touched
    for k in w.code.triton:  # launch shapes Triton makes and nvstage does not (yet)
        if why := k.unsupported():

            raise WorkloadError(f"nvstage run cannot launch {k.name} as Triton does: {why}",
                                where=w._where("kernel", "triton"))
    require()

    loaded = Loaded(prep.kind, prep.image, prep.mangled(), helper_cubin(prep.arch, toolkit),
                    prep.modules, prep.extra_args)
    engine = Engine(w, loaded, mode=mode, arch=prep.arch, use_cupti=use_cupti, log=log)
    try:
        engine.setup()
    finally:  # never let a device query replace the error being raised
        try:
            engine.result.device = device_facts(getattr(engine, "dev", None))
        except Exception as e:
            engine.result.device = {"error": f"device facts unavailable ({e})"}
    return engine.run(reps=reps, warmup=warmup, timeline=timeline, profile=profile)


# -- a workload file, from reading it to its exit status (``nvstage run``) ----------------------

DEFAULT_ARCH = "sm_90"  # validated (and dry-run) for when no --arch is given and no GPU is seen
MODES = ("serialized", "pipelined")


def default_arch(p) -> tuple[str, str]:
    """The arch to compile for when none is given: GPU 0's (the driver's answer, else NVML's),
    else ``DEFAULT_ARCH`` with a note saying so."""
    if p.available and getattr(p, "arch", None):
        return p.arch, ""
    if p.available:

        gpus, _, _ = nvml_gpus()
        if gpus:
            return gpus[0].arch, ""
    return DEFAULT_ARCH, (f"note: no GPU seen; validated for {DEFAULT_ARCH} (pass --arch to "
                          "choose)")


@dataclass
class Session:
    """A workload read, compiled and validated for one arch: what ``nvstage run`` checks in
    this order, so a bad workload is reported the same way on any machine:

    1. the workload file is parsed (errors name the file, table and key; exit 2);
    2. the code is compiled (or read) and every launch validated against the kernels' real
       parameter lists (exit 2), with no GPU needed (``open_session``);
    3. a dry run stops here (``plan``);
    4. only then is the driver asked for (``run``): no driver or GPU is ``NoDriver`` (exit 7),
       never a hang;
    5. the run itself: a failing kernel, copy or allocation is ``failure`` (exit 8), with
       what ran before it kept in ``result``; a failed check exits 9 (``raise_for_status``).
    """

    workload: Workload
    prep: Prepared
    probe: object  # the ``DriverProbe``
    findings: list  # validation notes (``Finding``)
    mode: str = "serialized"
    reps: int | None = None
    warmup: int | None = None
    toolkit: object = None
    arch_note: str = ""  # why the arch is the default one
    result: RunResult | None = None
    failure: object = None  # the ``GpuRunFailed`` that ended the run

    @property
    def arch(self) -> str:
        return self.prep.arch

    def plan(self) -> dict:
        """What one repetition would do (``--dry-run``), evaluated: ``nvstage.run-plan/1``."""
        return {"schema": "nvstage.run-plan/1", "arch": self.arch, **dry_run_plan(self.workload)}

    def run(self, *, profile: bool = True, use_cupti: bool = False, timeline: bool = False,
            log: Callable[[str], None] | None = None) -> RunResult | None:
        """Run on GPU 0. A failure of the GPU's is kept in ``failure`` (with the result so
        far), not raised: the reports are still written; ``raise_for_status`` raises it."""
        if not self.probe.available:  # one line: what is missing and what still works
            raise NoDriver(f"cannot run on a GPU: {self.probe.reason}; compile, show and the "
                           "offline tools still work (the workload is valid)")
        try:
            self.result = run_prepared(self.workload, self.prep, mode=self.mode,
                                       reps=self.reps, warmup=self.warmup, profile=profile,
                                       use_cupti=use_cupti, timeline=timeline,
                                       toolkit=self.toolkit, log=log)
        except GpuRunFailed as e:
            self.failure, self.result = e, e.result
        return self.result

    def document(self) -> dict:
        """The run document (``nvstage.run/1``), the failure in it when there was one."""
        return run_document(self.result, self.workload, self.prep, probe=self.probe,
                            error=self.failure.to_json() if self.failure else None)

    def raise_for_status(self) -> None:
        """The run's failure, or ``CheckFailed`` when the results did not match the check."""
        if self.failure:
            raise self.failure
        if self.result is not None and self.result.status == "check-failed":
            raise CheckFailed("the results do not match the check: " + "; ".join(
                f"{c.buffer}: {c.mismatches}/{c.elements} differ"
                f"{' (' + c.message + ')' if c.message else ''}"
                for c in self.result.checks if not c.ok))


def open_session(workload, *, arch: str | None = None, mode: str = "serialized",
                 reps: int | None = None, warmup: int | None = None, toolkit=None,
                 nvcc: str | None = None) -> Session:
    """Read, compile (for ``arch``; default: GPU 0's, else ``DEFAULT_ARCH``) and validate a
    workload file (or ``Workload``); nothing here needs a GPU. ``reps`` and ``warmup``
    replace the file's."""
    if mode not in MODES:
        raise UsageError(f"unknown --mode {mode!r}", hint="choose serialized or pipelined")
    for name, v in (("--reps", reps), ("--warmup", warmup)):
        if v is not None and not (1 if name == "--reps" else 0) <= v <= MAX_REPS:
            raise UsageError(f"{name} must be {'>= 1' if name == '--reps' else '>= 0'} and "
                             f"at most {MAX_REPS}")
    w = workload if isinstance(workload, Workload) else Workload.from_toml(workload)
    w.check_work(reps, warmup)  # --reps/--warmup replace the file's: bound them as a whole
    p = probe()
    arch_note = ""
    if arch is None:
        arch, arch_note = default_arch(p)
        if w.code.triton and not p.available:  # kept Triton builds run on one arch: theirs
            arch, arch_note = w.code.triton[0].arch, ""
    toolkit = toolkit or find_toolkit(nvcc)
    w, prep, findings = load_and_validate(w, arch, toolkit=toolkit)
    return Session(w, prep, p, findings, mode, reps, warmup, toolkit, arch_note)


def run_workload(workload, *, arch: str | None = None, mode: str = "serialized",
                 reps: int | None = None, warmup: int | None = None, profile: bool = True,
                 use_cupti: bool = False, timeline: bool = False, toolkit=None,
                 log: Callable[[str], None] | None = None) -> Session:
    """Read, compile, validate and run a workload file (or ``Workload``) on GPU 0: the
    ``Session``, its ``result`` and ``document()`` filled in. A failure on the GPU is kept in
    ``failure`` with what ran before it; ``raise_for_status()`` raises it (or ``CheckFailed``).
    No driver or GPU: ``NoDriver``, before anything touches cuda.core."""
    session = open_session(workload, arch=arch, mode=mode, reps=reps, warmup=warmup,
                           toolkit=toolkit)
    session.run(profile=profile, use_cupti=use_cupti, timeline=timeline, log=log)
    return session
