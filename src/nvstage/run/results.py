"""What a run produced, as plain records (no GPU imports): safe to build, print and export.

The run document's schema is ``nvstage.run/1``. A failed run keeps everything measured
before the failure, with ``status = "failed"`` and the operation that failed named.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nvstage.run.decompose import Decomposition, spread
from nvstage.errors import NvstageError

SCHEMA = "nvstage.run/1"


class GpuRunFailed(NvstageError):
    """A kernel faulted, a copy or an allocation failed: the operation is named."""

    exit_code = 8

    def __init__(self, message: str, *, op: str, hint: str | None = None, result=None,
                 context_lost: bool = False):
        super().__init__(message, hint=hint)
        self.op = op
        self.result = result  # the RunResult so far: what ran before the failure
        # Work still running on the GPU that nothing can stop (a wait gave up): freeing
        # memory or tearing the context down would wait for it, so the process should end
        # without its finalizers once the report is written (the CLI does).
        self.context_lost = context_lost

    def to_json(self) -> dict:
        d = super().to_json()
        d["op"] = self.op
        d["context_lost"] = self.context_lost
        return d


@dataclass
class RunResult:
    workload: str
    mode: str
    arch: str
    device: dict = field(default_factory=dict)
    load: dict = field(default_factory=dict)  # module load / JIT time, reported apart
    decomposition: Decomposition | None = None
    checks: list = field(default_factory=list)  # CheckResult
    timeline: object | None = None  # report.trace.Timeline
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
