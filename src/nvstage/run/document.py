"""The run document (schema ``nvstage.run/1``): written from the typed records of a run
(``run_document``) and read back here too, by every command that takes one: ``check --run``,
``model --calibrate`` and ``report --run`` (``load_run_report``).

A run document may come from anywhere (a CI artifact of someone else's pull request), so the
reader is lenient where the writer is strict: a field that is missing, of the wrong type or not
a finite number reads as absent, never as an error or a crash. Only what is not a run document
at all is refused (``load_run_report``: a bounded read, then the schema).

The layout is the writer's: ``decomposition`` and ``device`` at the top. A document that nests
them under ``run`` (an early layout the budgets gate accepted) reads the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nvstage import __version__
from nvstage.errors import ArtifactError
from nvstage.run.prepare import Prepared
from nvstage.run.results import SCHEMA, RunResult
from nvstage.run.workload import Workload
from nvstage.documents import load_run_doc
from nvstage.run.probe import probe as get_probe

TERMS = ("launch", "kernel", "transfer", "total", "wall", "overlap")


def run_document(result: RunResult | None, w: Workload, prep: Prepared, *, probe=None,
                 error: dict | None = None) -> dict:
    """The ``--json`` document: schema ``nvstage.run/1``."""
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


# -- reading it back ----------------------------------------------------------------------

def _number(v) -> float | None:
    """A finite number from the document, or None (a bool, NaN, a 400-digit integer)."""
    if isinstance(v, (int, float)) and not isinstance(v, bool) and -1e300 < v < 1e300:
        return float(v)
    return None


def _median(spread) -> float | None:
    return _number(spread.get("median")) if isinstance(spread, Mapping) else None


def _text(v) -> str | None:
    return v if isinstance(v, str) else None


def _section(doc: Mapping, key: str):
    """``doc[key]``, or the same under ``run`` when the top has none."""
    v = doc.get(key)
    if v is None and isinstance(doc.get("run"), Mapping):
        v = doc["run"].get(key)
    return v


@dataclass(frozen=True)
class OperationFigures:
    """One operation of the measured sequence: medians over the repetitions, in ns."""

    index: int | None
    kind: str | None  # "launch" | "h2d" | "d2h" as written; None when not a string
    name: str | None  # the kernel, or the buffer a copy moves
    host_ns: float | None  # host time inside the launch (or copy) call
    gpu_ns: float | None  # GPU time of the kernel or copy
    nbytes: int  # bytes a copy moves; 0 for a launch or when the document does not say
    pinned: bool  # a copy from pinned host memory (the default nvstage run uses)
    flags: tuple[str, ...]

    @classmethod
    def from_json(cls, op: Mapping) -> OperationFigures:
        index = op.get("index")
        nbytes = _number(op.get("bytes"))
        pinned = op.get("pinned")
        flags = op.get("flags")
        return cls(index=index if isinstance(index, int) and not isinstance(index, bool)
                   else None,
                   kind=_text(op.get("kind")), name=_text(op.get("name")),
                   host_ns=_median(op.get("host_ns")), gpu_ns=_median(op.get("gpu_ns")),
                   nbytes=int(nbytes) if nbytes is not None and nbytes > 0 else 0,
                   pinned=pinned if isinstance(pinned, bool) else True,
                   flags=tuple(map(str, flags)) if isinstance(flags, list) else ())


@dataclass(frozen=True)
class DecompositionFigures:
    """T = launch + kernel + transfer against the wall time, as medians (ns)."""

    medians_ns: dict[str, float]  # term ("launch", ..., "wall", "overlap") -> median
    operations: tuple[OperationFigures, ...] | None  # None: the document lists none
    empty_kernel_ns: float | None  # the run's noise floor
    smallest_copy_ns: float | None
    flags: tuple[str, ...]

    @classmethod
    def from_json(cls, dec: Mapping) -> DecompositionFigures:
        medians = {}
        for term in TERMS:
            m = _median(dec.get(f"{term}_ns"))
            # A time cannot be negative (a crafted report's was drawn as a bar and failed);
            # only the overlap credit, T minus the wall, may be.
            if m is not None and (m >= 0 or term == "overlap"):
                medians[term] = m
        ops = dec.get("operations")
        floor = dec.get("noise_floor") if isinstance(dec.get("noise_floor"), Mapping) else {}
        flags = dec.get("flags")
        return cls(
            medians_ns=medians,
            operations=tuple(OperationFigures.from_json(o) for o in ops
                             if isinstance(o, Mapping)) if isinstance(ops, list) else None,
            empty_kernel_ns=_number(floor.get("empty_kernel_ns")),
            smallest_copy_ns=_number(floor.get("smallest_copy_ns")),
            flags=tuple(map(str, flags)) if isinstance(flags, list) else ())


@dataclass(frozen=True)
class RunReport:
    """What a run document says, typed: the figures the gate, the calibration and the HTML
    report read."""

    schema: str | None
    workload: str | None  # its name
    workload_file: str | None  # the workload file the run was made from
    arch: str | None
    mode: str | None  # "serialized" | "pipelined"
    status: str | None  # "ok" | "check-failed" | "failed"
    device: str | None  # the device's name
    decomposition: DecompositionFigures | None  # None: not run with --profile

    @classmethod
    def from_json(cls, doc: Mapping) -> RunReport:
        """Any mapping: what is not there, or not of its type, reads as None."""
        workload = doc.get("workload")
        named = workload if isinstance(workload, Mapping) else {}
        device = _section(doc, "device")
        dec = _section(doc, "decomposition")
        return cls(
            schema=_text(doc.get("schema")),
            workload=_text(workload) or _text(named.get("name")),
            workload_file=_text(named.get("file")),
            arch=_text(doc.get("arch")), mode=_text(doc.get("mode")),
            status=_text(doc.get("status")),
            device=_text(device.get("name")) if isinstance(device, Mapping) else None,
            decomposition=DecompositionFigures.from_json(dec)
            if isinstance(dec, Mapping) else None)


def load_run_report(path_or_doc, what: str = "run report", err=ArtifactError) -> RunReport:
    """A run document from a file (bounded, as every document reader) or an already loaded
    dict: ``err`` when it is not a run document (``documents.load_run_doc``)."""
    if isinstance(path_or_doc, RunReport):
        return path_or_doc
    return RunReport.from_json(load_run_doc(path_or_doc, what, err))
