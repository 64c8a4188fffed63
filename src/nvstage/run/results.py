"""What a run produced, as plain records (no GPU imports): safe to build, print and export.

The timeline (one repetition laid out in time) lives here, not beside its renderer in
``report/trace.py``: the engine fills it in, and ``run/`` never imports from ``report/``.
The run document's schema is ``nvstage.run/1``. A failed run keeps everything measured
before the failure, with ``status = "failed"`` and the operation that failed named.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nvstage.run.decompose import Decomposition, spread

SCHEMA = "nvstage.run/1"


@dataclass(frozen=True)
class Span:
    op_index: int
    kind: str  # "launch" | "h2d" | "d2h"
    name: str
    start_ns: float
    dur_ns: float
    args: dict = field(default_factory=dict)


@dataclass
class Timeline:
    """One repetition laid out in time: what the host did and what the GPU did.

    ``gpu_placement`` says how GPU spans were placed on the host clock (events are only
    relative to each other): shown in the trace's metadata so nobody reads it as exact.
    """

    host: list[Span] = field(default_factory=list)
    gpu: list[Span] = field(default_factory=list)
    gpu_placement: str = "event offsets from a reference event recorded at the start"
    title: str = "nvstage run"


@dataclass
class RunResult:
    workload: str
    mode: str
    arch: str
    device: dict = field(default_factory=dict)
    load: dict = field(default_factory=dict)  # module load / JIT time, reported apart
    decomposition: Decomposition | None = None
    checks: list = field(default_factory=list)  # workload.data.ResultCheck
    timeline: Timeline | None = None
    cupti: dict | None = None  # per-op CUPTI kernel/copy times when the extra is there
    walls_ns: list[float] = field(default_factory=list)  # wall time of each repetition
    completed_ops: int = 0
    status: str = "ok"  # "ok" | "check-failed" | "failed"
    error: dict | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.status == "ok" and all(c.ok for c in self.checks)

    def to_json(self) -> dict:
        return {
            "workload": self.workload, "mode": self.mode, "arch": self.arch,
            "status": self.status, "error": self.error, "device": self.device,
            "load": self.load, "completed_ops": self.completed_ops,
            "wall_ns": spread(self.walls_ns).to_json() if self.walls_ns else None,
            "decomposition": self.decomposition.to_json() if self.decomposition else None,
            "checks": [c.to_json() for c in self.checks],
            "cupti": self.cupti, "notes": self.notes,
        }
