"""What a build measured: per kernel (registers, spills, static shared memory, where it is
defined), the arches its fatbin carries, cubin and fatbin sizes, stage times and, from a run
report, median GPU times. The numbers ``nvstage check`` holds against budgets and baselines.

Sources: ptxas and cuobjdump via ``inspect.resources``, the fatbin inventory, the manifest's
stage times, and a run report's decomposition.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .budgets import RUN_TERMS, base_name
from .documents import load_run_doc
from .errors import ArtifactError


@dataclass(frozen=True)
class KernelFacts:
    kernel: str
    demangled: str
    arch: str
    registers: int
    spill_bytes: int | None  # stores + loads; None: unknown (no ptxas -v numbers)
    shared_bytes: int
    file: str | None = None
    line: int | None = None

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Measurements:
    """What a build (and optionally a run) measured: the numbers budgets are checked against
    and a later check's baseline."""

    source: str
    kernels: list[KernelFacts]
    arches: list[str]  # images present: sm_NN cubins, compute_NN PTX
    arches_from: str  # the file the arches were read from
    cubin_bytes: dict[str, int]  # arch -> size of each cubin the build made
    fatbin_bytes: int | None
    stages: list[dict]  # index, kind, arch, seconds, cached
    kernel_us: dict[str, float] = field(default_factory=dict)  # run report: kernel -> median
    terms_us: dict[str, float] = field(default_factory=dict)  # run report: term -> median

    def to_json(self) -> dict:
        return {
            "source": self.source, "kernels": [k.to_json() for k in self.kernels],
            "arches": self.arches, "arches_from": self.arches_from,
            "cubin_bytes": self.cubin_bytes, "fatbin_bytes": self.fatbin_bytes,
            "stages": self.stages, "kernel_us": self.kernel_us, "terms_us": self.terms_us,
        }

    @classmethod
    def from_json(cls, d: dict) -> Measurements:
        return cls(source=d["source"], kernels=[KernelFacts(**k) for k in d["kernels"]],
                   arches=list(d["arches"]), arches_from=d.get("arches_from", ""),
                   cubin_bytes=dict(d["cubin_bytes"]), fatbin_bytes=d.get("fatbin_bytes"),
                   stages=list(d["stages"]), kernel_us=dict(d.get("kernel_us") or {}),
                   terms_us=dict(d.get("terms_us") or {}))


def load_build_from(manifest_or_build):
    """A ``Build``, given one or a keep folder / stages.json path."""
    from .pipeline import Build

    if isinstance(manifest_or_build, Build):
        return manifest_or_build
    from .inspect.manifest import load_build

    return load_build(manifest_or_build)


_DECL = re.compile(r"__global__")


@functools.lru_cache(maxsize=16)  # every kernel of one source is looked up in the same lines
def _source_lines(path: str, _mtime_ns: int, _size: int) -> tuple[str, ...]:
    return tuple(Path(path).read_text(errors="replace").splitlines())


def locate_kernel(source: str | os.PathLike, demangled: str) -> int | None:
    """The 1-based line where ``source`` defines the kernel: the first line naming it as a
    function within three lines of ``__global__``. None when the file does not say."""
    try:
        st = os.stat(source)
        lines = _source_lines(os.path.abspath(source), st.st_mtime_ns, st.st_size)
    except OSError:
        return None
    name = base_name(demangled)
    if not name:
        return None
    call = re.compile(rf"\b{re.escape(name)}\s*(<[^;{{]*>)?\s*\(")
    fallback = None
    for i, text in enumerate(lines):
        if call.search(text):
            if any(_DECL.search(lines[j]) for j in range(max(0, i - 3), i + 1)):
                return i + 1
            fallback = fallback or i + 1
    return fallback


def _final_rows(rows):
    """Per (kernel, arch): the final numbers when there are any (after an -rdc device link),
    else the per-file ones."""
    best: dict[tuple[str, str], object] = {}
    for r in rows:
        key = (r.kernel, r.arch)
        if key not in best or (r.final and not best[key].final):
            best[key] = r
    return list(best.values())


def _image_arches(build, toolkit) -> tuple[list[str], str]:
    """The arches whose code the build's fatbin carries (its object or executable else, its
    cubins and PTX when it stopped before the fatbin)."""
    from .inspect.fatbin import inventory

    for kind in ("fatbin", "object", "executable"):
        for a in build.artifacts:
            if a.kind == kind and os.path.isfile(a.path):
                imgs = [im for im in inventory(a.path, toolkit) if im.loadable]
                return sorted({im.arch for im in imgs}), a.name
    found = set()
    for a in build.artifacts:
        if a.kind == "cubin" and a.arch:
            found.add(a.arch)
        elif a.kind == "ptx" and a.arch:
            found.add(a.arch.replace("sm_", "compute_"))
    return sorted(found), "the build's cubin and PTX files"


def measure(manifest_or_build, *, toolkit=None, run_report=None) -> Measurements:
    """The numbers of one build (and run report, when given)."""
    from .inspect.resources import build_resources

    build = load_build_from(manifest_or_build)
    toolkit = toolkit or build.toolkit
    if build.status != "ok":
        raise ArtifactError(f"the build of {build.source} failed: there is nothing to check",
                            hint="fix the build first (nvstage compile shows why)")
    rows = _final_rows(build_resources(build, toolkit))
    kernels = []
    for r in sorted(rows, key=lambda r: (r.demangled, r.arch)):
        spill = None if r.spill_stores is None and r.spill_loads is None else \
            (r.spill_stores or 0) + (r.spill_loads or 0)
        line = locate_kernel(build.source, r.demangled)
        kernels.append(KernelFacts(r.kernel, r.demangled, r.arch, r.registers, spill,
                                   r.shared_bytes, build.source if line else None, line))
    arches, arches_from = _image_arches(build, toolkit)
    cubins: dict[str, int] = {}
    fatbin = None
    for a in build.artifacts:
        if a.kind == "cubin":
            cubins[a.arch or a.name] = max(cubins.get(a.arch or a.name, 0), a.size)
        elif a.kind == "fatbin":
            fatbin = max(fatbin or 0, a.size)
    stages = [{"index": r.stage.index, "kind": r.stage.kind.value, "arch": r.stage.arch,
               "seconds": r.seconds, "cached": r.cached} for r in build.runs]
    m = Measurements(build.source, kernels, arches, arches_from, cubins, fatbin, stages)
    if run_report is not None:
        m.kernel_us, m.terms_us = run_figures(run_report)
    return m


def run_figures(run_report) -> tuple[dict[str, float], dict[str, float]]:
    """(median GPU microseconds per kernel, median microseconds per decomposition term) from a
    run report (``nvstage.run/1``). Unknown or missing fields give empty figures; a document
    that is not a run report is an error."""
    doc = load_run_doc(run_report, "run report")
    dec = doc.get("decomposition")
    if dec is None and isinstance(doc.get("run"), dict):
        dec = doc["run"].get("decomposition")
    if not isinstance(dec, dict):
        return {}, {}
    terms = {}
    for term in RUN_TERMS.values():
        s = dec.get(f"{term}_ns")
        if isinstance(s, dict) and isinstance(s.get("median"), (int, float)):
            terms[term] = s["median"] / 1000.0
    kernels: dict[str, float] = {}
    for op in dec.get("operations") or []:
        if not isinstance(op, dict) or op.get("kind") != "launch":
            continue
        g = op.get("gpu_ns")
        if isinstance(g, dict) and isinstance(g.get("median"), (int, float)):
            # A kernel launched several times in the sequence: its slowest median counts.
            name = str(op.get("name"))
            kernels[name] = max(kernels.get(name, 0.0), g["median"] / 1000.0)
    return kernels, terms
