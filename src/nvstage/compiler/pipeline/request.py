"""A build as the driver is asked for it: what to build (``Request``), nvcc's plan for it
(``Planned``), and what the caller is told on the way (``Callbacks``). ``compile`` and
``compile_command`` make them; ``driver._build`` runs them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.nvcc.plan import Plan
from nvstage.compiler.pipeline.observer import Observer
from nvstage.compiler.toolkit.locate import Toolkit

if TYPE_CHECKING:  # imported where a build is traced
    from nvstage.compiler.nvcc.time_trace import TraceRequest


@dataclass(frozen=True)
class Request:
    """One build: ``source`` (its absolute path) compiled with ``options`` by ``toolkit``, run
    from ``cwd``. ``keep``: the folder every intermediate file is kept in (None: a temporary
    one, removed afterwards); ``jobs``: how many stages may run at once; ``depfile``:
    ``(target, -MMD, -MP)``, how to write a ``-MD`` dependency file; ``trace``: a
    ``time_trace.TraceRequest`` (nvcc's -fdevice-time-trace), None for none."""

    source: str
    options: CompileOptions
    toolkit: Toolkit
    cwd: str
    keep: str | os.PathLike | None = None
    jobs: int = 1
    depfile: tuple[str, bool, bool] | None = None
    trace: TraceRequest | None = None


@dataclass(frozen=True)
class Planned:
    """nvcc's plan for a request, as it was asked for: the plan, the ``--dryrun`` command
    that printed it, and how long that took."""

    plan: Plan
    argv: list[str]
    seconds: float


@dataclass(frozen=True)
class Callbacks:
    """What a build tells its caller. ``observer``: each stage as it starts and ends.
    ``on_built(build, work, seen)``: called after a successful build, while the work folder
    and its intermediates still exist (``seen``: what the stage cache learnt of the files
    read, ``cache.stage.Seen``, None without a cache). ``later``: a successful build's
    bookkeeping (storing what ran, ``on_built``, removing the work folder) is appended to it
    as one callable rather than done before the build returns."""

    observer: Observer = field(default_factory=Observer)
    on_built: Callable[..., None] | None = None
    later: list | None = None
