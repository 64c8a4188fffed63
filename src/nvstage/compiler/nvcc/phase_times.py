"""nvcc's own phase times (``nvcc --time FILE``): the anchor our stage times are checked against.

The CSV has irregular padding and a header only when the file was empty; each row is one
phase: ``source, phase name, inputs, output, arch, tool, metric, unit``.
"""

from __future__ import annotations

import csv
import io
import os
from dataclasses import dataclass

from nvstage.errors import ArtifactError
from nvstage.compiler.nvcc.plan import StageKind

_PHASES = {
    "gcc (preprocessing 4)": StageKind.HOST_PREPROCESS,
    "cudafe++": StageKind.CUDAFE,
    "gcc (preprocessing 1)": StageKind.DEVICE_PREPROCESS,
    "cicc": StageKind.CICC,
    "ptxas": StageKind.PTXAS,
    "fatbinary": StageKind.FATBINARY,
    "gcc (compiling)": StageKind.HOST_COMPILE,
    "nvlink": StageKind.DEVICE_LINK,
    "gcc (linking)": StageKind.LINK,
}


@dataclass(frozen=True)
class Phase:
    phase: str  # as nvcc names it
    kind: StageKind | None  # the nvstage stage it corresponds to; None for "nvcc (driver)"
    inputs: tuple[str, ...]
    output: str
    arch: str | None
    seconds: float


def parse_time_csv(text: str) -> list[Phase]:
    """Parse ``nvcc --time`` output. Raises ArtifactError on rows that are not phase rows."""
    phases: list[Phase] = []
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as e:
        raise ArtifactError(f"nvcc --time output is not CSV: {e}") from None
    for lineno, row in enumerate(rows, 1):
        cells = [c.strip() for c in row]
        if not cells or not any(cells) or cells[0] == "source file name":
            continue
        if len(cells) < 8:
            raise ArtifactError(f"nvcc --time line {lineno}: expected 8 columns, got {len(cells)}")
        _src, phase, inputs, output, arch, _tool, metric, unit = cells[:8]
        try:
            value = float(metric)
        except ValueError:
            raise ArtifactError(f"nvcc --time line {lineno}: {metric!r} is not a number") from None
        scale = {"ms": 1e-3, "s": 1.0, "us": 1e-6}.get(unit)
        if scale is None:
            raise ArtifactError(f"nvcc --time line {lineno}: unknown unit {unit!r}")
        phases.append(Phase(phase, _kind(phase, inputs, output), tuple(inputs.split()),
                            output, arch or None, value * scale))
    return phases


def _kind(phase: str, inputs: str, output: str) -> StageKind | None:
    kind = _PHASES.get(phase)
    dlink = "_dlink" in os.path.basename(output)
    if kind is StageKind.FATBINARY and dlink:
        return StageKind.DLINK_FATBINARY
    if kind is StageKind.HOST_COMPILE and (dlink or "link.stub" in inputs):
        return StageKind.DLINK_COMPILE
    return kind


@dataclass(frozen=True)
class StageTimePair:
    kind: StageKind
    arch: str | None
    nvstage_seconds: float
    nvcc_seconds: float


def pair_with_stages(phases: list[Phase], runs) -> list[StageTimePair]:
    """Match nvcc's phases to nvstage's stage runs, in order within each kind."""
    pending: dict[StageKind, list[Phase]] = {}
    for p in phases:
        if p.kind is not None:
            pending.setdefault(p.kind, []).append(p)
    pairs = []
    for run in runs:
        queue = pending.get(run.stage.kind)
        if queue:
            p = queue.pop(0)
            pairs.append(StageTimePair(run.stage.kind, run.stage.arch, run.seconds, p.seconds))
    return pairs
