"""What a build measured: per kernel (``inspect.kernels.KernelRecord``: registers, spills,
static shared memory, where it is defined), the arches its fatbin carries, cubin and fatbin
sizes, stage times and, from a run report, median GPU times. The numbers ``nvstage check``
holds against budgets and baselines.

Sources: ptxas and cuobjdump via ``inspect.resources``, the fatbin inventory, the manifest's
stage times, and a run report's decomposition.
"""

from __future__ import annotations

import functools
import math
import os
import re
import stat
from dataclasses import dataclass, field, replace

from nvstage.check.budgets import RUN_TERMS
from nvstage.errors import ArtifactError
from nvstage.inspect.kernels import KernelRecord, base_name, final_rows
from nvstage.run.document import load_run_report
from nvstage.compiler.manifest.model import Build, load_build, reading_toolkit
from nvstage.inspect.fatbin import inventory
from nvstage.inspect.resources import build_resources


# Kernels (one per arch) one build may declare to ``check``: real builds have tens to a few
# thousand. The list comes from a manifest (its ptxas report) or a baseline, both documents.
MAX_KERNELS = 20_000


# A kernel in the check report: the record's figures that budgets bound, and where the source
# defines it. Read back (a baseline), the spill total stands as stores, loads unknown.
KERNEL_FIELDS = ("kernel", "demangled", "arch", "registers", "spill_bytes", "spill_kind",
                 "spill_source", "shared_bytes", "file", "line")


def kernel_to_json(k: KernelRecord) -> dict:
    return {f: getattr(k, f) for f in KERNEL_FIELDS}


@dataclass
class Measurements:
    """What a build (and optionally a run) measured: the numbers budgets are checked against
    and a later check's baseline."""

    source: str
    kernels: list[KernelRecord]
    arches: list[str]  # images present: sm_NN cubins, compute_NN PTX
    arches_from: str  # the file the arches were read from
    cubin_bytes: dict[str, int]  # arch -> size of each cubin the build made
    fatbin_bytes: int | None
    stages: list[dict]  # index, kind, arch, seconds, cached
    kernel_us: dict[str, float] = field(default_factory=dict)  # run report: kernel -> median
    terms_us: dict[str, float] = field(default_factory=dict)  # run report: term -> median

    def to_json(self) -> dict:
        return {
            "source": self.source, "kernels": [kernel_to_json(k) for k in self.kernels],
            "arches": self.arches, "arches_from": self.arches_from,
            "cubin_bytes": self.cubin_bytes, "fatbin_bytes": self.fatbin_bytes,
            "stages": self.stages, "kernel_us": self.kernel_us, "terms_us": self.terms_us,
        }

    @classmethod
    def from_json(cls, d: dict) -> Measurements:
        """What ``to_json`` wrote, every field checked: a baseline may be anyone's file, and
        a wrong shape must be one message, not a traceback three functions later. Raises
        ValueError naming the field."""
        d = _shape(d, dict, "measurements")
        kernels = []
        listed = _shape(d.get("kernels"), list, "kernels")
        if len(listed) > MAX_KERNELS:
            raise ValueError(f"kernels lists {len(listed)} kernels: more than the "
                             f"{MAX_KERNELS} nvstage checks (MAX_KERNELS)")
        for i, k in enumerate(listed):
            k = _shape(k, dict, f"kernels[{i}]")
            unknown = set(k) - set(KERNEL_FIELDS)
            if unknown:
                raise ValueError(f"kernels[{i}] has unknown field(s) {sorted(unknown)[:3]}")
            at = f"kernels[{i}]"
            kernels.append(KernelRecord(
                _shape(k.get("kernel"), str, f"{at}.kernel"),
                _shape(k.get("demangled"), str, f"{at}.demangled"),
                _shape(k.get("arch"), str, f"{at}.arch"),
                _count(k.get("registers"), f"{at}.registers"),
                spill_stores=_count(k.get("spill_bytes"), f"{at}.spill_bytes", none=True),
                spill_loads=None,
                spill_kind=_shape(k.get("spill_kind"), (str, type(None)), f"{at}.spill_kind"),
                # where the figure came from ("ptxas -v", "cubin", "SASS count"); a baseline
                # written before it was kept has none
                spill_source=_shape(k.get("spill_source"), (str, type(None)),
                                    f"{at}.spill_source"),
                shared_bytes=_count(k.get("shared_bytes"), f"{at}.shared_bytes"),
                file=_shape(k.get("file"), (str, type(None)), f"{at}.file"),
                line=_count(k.get("line"), f"{at}.line", none=True)))
        stages = []
        for i, s in enumerate(_shape(d.get("stages"), list, "stages")):
            s = _shape(s, dict, f"stages[{i}]")
            stages.append({"index": _count(s.get("index"), f"stages[{i}].index"),
                           "kind": _shape(s.get("kind"), str, f"stages[{i}].kind"),
                           "arch": _shape(s.get("arch"), (str, type(None)),
                                          f"stages[{i}].arch"),
                           "seconds": _amount(s.get("seconds"), f"stages[{i}].seconds"),
                           "cached": _shape(s.get("cached", False), bool,
                                            f"stages[{i}].cached")})
        arches = _shape(d.get("arches"), list, "arches")
        for i, a in enumerate(arches):
            _shape(a, str, f"arches[{i}]")
        fatbin = d.get("fatbin_bytes")
        return cls(source=_shape(d.get("source"), str, "source"), kernels=kernels,
                   arches=list(arches),
                   arches_from=_shape(d.get("arches_from", ""), str, "arches_from"),
                   cubin_bytes={k: _count(v, f"cubin_bytes.{k}") for k, v in
                                _shape(d.get("cubin_bytes"), dict, "cubin_bytes").items()},
                   fatbin_bytes=None if fatbin is None else _count(fatbin, "fatbin_bytes"),
                   stages=stages,
                   kernel_us={k: _amount(v, f"kernel_us.{k}") for k, v in
                              _shape(d.get("kernel_us") or {}, dict, "kernel_us").items()},
                   terms_us={k: _amount(v, f"terms_us.{k}") for k, v in
                             _shape(d.get("terms_us") or {}, dict, "terms_us").items()})


_KIND_WORDS = {dict: "an object", list: "a list", str: "a string", bool: "true or false",
               (str, type(None)): "a string or null"}
_JSON_WORDS = {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
               int: "a number", float: "a number", type(None): "null"}


def _shape(value, kind, where: str):
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ValueError(f"{where} must be {_KIND_WORDS[kind]}, not "
                         f"{_JSON_WORDS.get(type(value), type(value).__name__)}")
    return value


# Counts and sizes a real build has: far below this; more is a crafted or damaged file (and
# an integer of thousands of digits cannot even be printed).
_MAX_COUNT = 2**63


def _count(value, where: str, *, none: bool = False) -> int | None:
    if value is None and none:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < _MAX_COUNT:
        raise ValueError(f"{where} must be a whole number from 0 to 2**63, not {value!r:.40}")
    return value


def _amount(value, where: str) -> float:
    """A time (seconds or microseconds): finite, not negative."""
    if not isinstance(value, (int, float)) or isinstance(value, bool) or \
            not math.isfinite(value) or not 0 <= value < 1e15:
        raise ValueError(f"{where} must be a finite number >= 0, not {value!r:.40}")
    return float(value)


def load_build_from(manifest_or_build):
    """A ``Build``, given one or a keep folder / stages.json path."""
    if isinstance(manifest_or_build, Build):
        return manifest_or_build

    return load_build(manifest_or_build)


_DECL = re.compile(r"__global__")


# The source a manifest names is read only to find kernel lines: a regular file, this large
# at most (the largest .cu files seen are a few MB), never a FIFO or a device.
MAX_SOURCE_BYTES = 32 << 20


@functools.lru_cache(maxsize=16)  # every kernel of one source is looked up in the same lines
def _source_lines(path: str, _mtime_ns: int, _size: int) -> tuple[str, ...]:
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return ()
        data = f.read(MAX_SOURCE_BYTES + 1)
    if len(data) > MAX_SOURCE_BYTES:
        return ()
    return tuple(data.decode("utf-8", "replace").splitlines())


_IDENT = re.compile(r"\b[A-Za-z_]\w*")
_CALL_AFTER = re.compile(r"\s*(<[^;{]*>)?\s*\(")  # what follows a name called or declared


@functools.lru_cache(maxsize=16)
def _source_index(path: str, mtime_ns: int, size: int) -> dict[str, tuple[int | None, int]]:
    """name -> (the first line naming it as a function within three lines of __global__,
    else None; the first line naming it as a function at all), 1-based. Built in one pass
    over the source, so finding every kernel costs the source once, not once per kernel."""
    lines = _source_lines(path, mtime_ns, size)
    decl = [i for i, text in enumerate(lines) if _DECL.search(text)]
    out: dict[str, list] = {}
    d = 0  # decl[d] is the first __global__ line at or after i - 3
    for i, text in enumerate(lines):
        while d < len(decl) and decl[d] < i - 3:
            d += 1
        near = d < len(decl) and decl[d] <= i
        for m in _IDENT.finditer(text):
            if _CALL_AFTER.match(text, m.end()):
                entry = out.setdefault(m.group(), [None, i + 1])
                if near and entry[0] is None:
                    entry[0] = i + 1
    return {k: (v[0], v[1]) for k, v in out.items()}


def locate_kernel(source: str | os.PathLike, demangled: str) -> int | None:
    """The 1-based line where ``source`` defines the kernel: the first line naming it as a
    function within three lines of ``__global__``, else the first naming it at all. None
    when the file does not say."""
    try:
        st = os.stat(source)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SOURCE_BYTES:
            return None
        index = _source_index(os.path.abspath(source), st.st_mtime_ns, st.st_size)
    except (OSError, ValueError):  # ValueError: a NUL in the path
        return None
    found = index.get(base_name(demangled))
    if found is None:
        return None
    return found[0] or found[1]


def _image_arches(build, toolkit) -> tuple[list[str], str]:
    """The arches whose code the build's fatbin carries (its object or executable else, its
    cubins and PTX when it stopped before the fatbin)."""
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


def measure(manifest_or_build, *, toolkit=None, run_report=None,
            locate: bool = True) -> Measurements:
    """The numbers of one build (and run report, when given). ``locate``: each kernel's line
    looked for in the build's source (not for a source named by a document nvstage may not
    read: ``check.target.readable_source``)."""
    build = load_build_from(manifest_or_build)
    toolkit = reading_toolkit(build, toolkit)
    if build.status != "ok":
        raise ArtifactError(f"the build of {build.source} failed: there is nothing to check",
                            hint="fix the build first (nvstage compile shows why)")
    rows = final_rows(build_resources(build, toolkit))
    if len(rows) > MAX_KERNELS:
        raise ArtifactError(f"the build of {build.source} declares {len(rows)} kernels (per "
                            f"arch): more than the {MAX_KERNELS} nvstage checks (MAX_KERNELS)",
                            hint="real builds have tens to a few thousand; is its manifest "
                                 "the one nvstage wrote?")
    kernels = []
    for r in sorted(rows, key=lambda r: (r.demangled, r.arch)):
        line = locate_kernel(build.source, r.demangled) if locate else None
        kernels.append(replace(r, file=build.source if line else None, line=line))
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
    run report (``nvstage.run/1``: a path, a loaded dict or a ``RunReport``). Unknown or
    missing fields give empty figures; a document that is not a run report is an error."""
    dec = load_run_report(run_report, "run report").decomposition
    if dec is None:
        return {}, {}
    terms = {term: dec.medians_ns[term] / 1000.0 for term in RUN_TERMS.values()
             if term in dec.medians_ns}
    kernels: dict[str, float] = {}
    for op in dec.operations or ():
        if op.kind != "launch" or op.gpu_ns is None:
            continue
        # A kernel launched several times in the sequence: its slowest median counts.
        name = str(op.name)[:1000]
        kernels[name] = max(kernels.get(name, 0.0), op.gpu_ns / 1000.0)
    return kernels, terms
