"""A live stage display on stderr for terminals; silent for pipes and --json consumers."""

from __future__ import annotations

import contextlib
import sys

from nvstage.compiler.pipeline.observer import Observer
from nvstage.compiler.manifest.model import StageRun
from nvstage.compiler.nvcc.plan import Plan, Stage
from nvstage.report.terminal.console import load, stderr


class LiveStages(Observer):
    """Shows the running stage and a bar over the plan; only when stderr is a terminal."""

    def __init__(self, enabled: bool | None = None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._progress = None
        self._task = None
        self._warming = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def on_plan(self, plan: Plan) -> None:
        if not self.enabled:
            return
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                  TextColumn("{task.completed}/{task.total}"),
                                  TimeElapsedColumn(), console=stderr(), transient=True)
        self._progress.start()
        self._task = self._progress.add_task("planning", total=len(plan.stages))

    def on_stage_start(self, stage: Stage) -> None:
        if self._progress is not None:
            arch = f" {stage.arch}" if stage.arch else ""
            self._progress.update(self._task, description=f"{stage.kind.value}{arch}")

    def on_stage_end(self, run: StageRun) -> None:
        if self._progress is not None:
            self._progress.advance(self._task)
        elif not self._warming:  # after the first stage: a core is free of preprocessing
            self._warming = True
            warm_up()


def warm_up() -> None:
    """Import what drawing the build's table needs (rich, 35 to 45 ms) in a thread of its own,
    while the stages' tools run: the table is drawn after the last one, on the critical path."""
    import threading

    def loading():
        with contextlib.suppress(Exception):  # the drawing imports them again, and says why
            load()
            import nvstage.report.terminal.build  # noqa: F401
            import nvstage.report.terminal.table  # noqa: F401

    threading.Thread(target=loading, name="nvstage-warm-up", daemon=True).start()
