"""What a build tells as it goes: the progress sink both compile paths call."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nvstage.compiler.nvcc.plan import Plan, Stage
    from nvstage.compiler.manifest.model import StageRun


class Observer:
    """Progress sink; the CLI draws a live display from these calls. All methods optional.

    Every call comes from the thread that called ``compile``, one at a time, even when stages
    run at once: an observer needs no lock.
    """

    def on_plan(self, plan: Plan) -> None: ...
    def on_stage_start(self, stage: Stage) -> None: ...
    def on_stage_end(self, run: StageRun) -> None: ...

