"""One kernel, several compiler paths: nvcc, NVRTC, NVRTC + nvJitLink, and NVRTC + LTO (above
``inspect/``: it compiles, then reads what each path made).

``compare_paths`` builds the same source(s) each way into a temporary folder (or ``keep``),
then compares what came out: the PTX (identical or not, with a short diff), and per kernel the
registers, spills and SASS instruction count of each path's cubin, plus each stage's time.

Several sources (``compare_paths(["lto_a.cu", "lto_b.cu"], ...)``) are compiled separately
(``-rdc=true``) on the nvcc and NVRTC paths, and linked by nvJitLink; that is the case where
link-time optimisation can change a kernel: see kernels/lto_a.cu.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from nvstage.files import read_regular
from nvstage.errors import NvstageError, UsageError
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.toolkit.locate import Toolkit, find_toolkit
from nvstage.inspect.kernels import KernelRecord, select
from nvstage.compiler.nvrtc import compile_nvrtc, versions
from nvstage.compiler.pipeline.driver import compile as nvcc_compile
from nvstage.inspect.gather import with_code
from nvstage.inspect.resources import stage_resources

NVCC, NVRTC, NVJITLINK, LTO = "nvcc", "nvrtc", "nvrtc+nvjitlink", "nvrtc+lto"
_REAL = re.compile(r"^sm_\d+[af]?$")
DIFF_LINES = 40  # a "short" diff: beyond this the rest is counted, not shown


@dataclass
class StageTime:
    stage: str  # stage kind ("cicc", "ptxas", "nvrtc", "nvjitlink", ...)
    tool: str
    seconds: float
    outputs: list[str] = field(default_factory=list)


@dataclass
class PathResult:
    name: str  # nvcc | nvrtc | nvrtc+nvjitlink | nvrtc+lto
    how: str  # what ran, in a few words
    ptx: dict[str, str] = field(default_factory=dict)  # module name -> PTX text
    kernels: list[KernelRecord] = field(default_factory=list)  # with instructions and image
    stages: list[StageTime] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.stages)

    def kernel(self, name: str) -> KernelRecord | None:
        """The kernel ``name`` names (as ``inspect.kernels.matches`` reads names)."""
        return next(iter(select(self.kernels, name)), None)

    def to_json(self) -> dict:
        return {"name": self.name, "how": self.how, "seconds": round(self.seconds, 6),
                "ptx_modules": sorted(self.ptx),
                "kernels": [_kernel_json(k) for k in self.kernels],
                "stages": [asdict(s) for s in self.stages], "notes": self.notes}


def _kernel_json(k: KernelRecord) -> dict:
    """One kernel in one path's cubin, as the cross-path document has it."""
    return {"kernel": k.kernel, "demangled": k.demangled, "registers": k.registers,
            "spill_stores": k.spill_stores, "spill_loads": k.spill_loads,
            "sass_instructions": k.instructions, "cubin": k.image, "final": k.final}


@dataclass
class PtxComparison:
    a: str  # path name
    b: str
    module: str  # which PTX: a source's stem, or "linked"
    identical: bool
    normalised: list[str]  # what was set aside before comparing (empty: byte for byte)
    diff: str = ""  # unified diff, at most DIFF_LINES lines, after normalisation
    changed_lines: int = 0  # lines added + removed in the full diff

    def summary(self) -> str:
        if self.identical:
            how = ("byte for byte" if not self.normalised
                   else "after setting aside " + ", ".join(self.normalised))
            return f"PTX {self.module}: {self.a} = {self.b} ({how})"
        return f"PTX {self.module}: {self.a} != {self.b} ({self.changed_lines} lines differ)"


@dataclass
class PathComparison:
    sources: list[str]
    arch: str
    lto: bool
    versions: dict[str, str]  # toolkit (nvcc), nvrtc, nvjitlink
    paths: list[PathResult]
    ptx: list[PtxComparison]
    notes: list[str] = field(default_factory=list)

    def path(self, name: str) -> PathResult:
        for p in self.paths:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def kernel_names(self) -> list[str]:
        """Every kernel any path produced, in first-seen order (mangled)."""
        return list(dict.fromkeys(k.kernel for p in self.paths for k in p.kernels))

    def registers(self, kernel: str) -> dict[str, int | None]:
        """Path name -> registers of ``kernel`` (mangled or demangled) in that path."""
        out = {}
        for p in self.paths:
            k = p.kernel(kernel)
            out[p.name] = k.registers if k else None
        return out

    def resource_differences(self) -> list[str]:
        """One line per kernel whose registers, spills or SASS size differ between paths."""
        lines = []
        for name in self.kernel_names:
            for label, attr in (("registers", "registers"), ("SASS instructions",
                                                              "instructions"),
                                ("spill stores", "spill_stores"),
                                ("spill loads", "spill_loads")):
                vals = {}
                for p in self.paths:
                    k = p.kernel(name)
                    if k is not None and getattr(k, attr) is not None:
                        vals[p.name] = getattr(k, attr)
                if len(set(vals.values())) > 1:
                    demangled = next(k.demangled for p in self.paths for k in p.kernels
                                     if k.kernel == name)
                    lines.append(f"{demangled}: {label} " +
                                 ", ".join(f"{n} {v}" for n, v in vals.items()))
        return lines

    def to_json(self) -> dict:
        return {
            "schema": "nvstage.crosspath/1",
            "sources": self.sources, "arch": self.arch, "lto": self.lto,
            "versions": self.versions,
            "paths": [p.to_json() for p in self.paths],
            "ptx": [asdict(c) | {"summary": c.summary()} for c in self.ptx],
            "resource_differences": self.resource_differences(),
            "notes": self.notes,
        }


# --- running the paths --------------------------------------------------------------------------

def compare_paths(
    source: str | os.PathLike | Sequence[str | os.PathLike],
    *,
    arch: str,
    toolkit: Toolkit | None = None,
    lto: bool = False,
    name_expressions: Sequence[str] = (),
    maxrregcount: int | None = None,
    keep: str | os.PathLike | None = None,
    cwd: str | os.PathLike | None = None,
) -> PathComparison:
    """Build ``source`` (one file, or a list linked together) through every path and compare.

    Paths: ``nvcc`` (nvcc's own plan to a cubin), ``nvrtc`` (NVRTC's cubin),
    ``nvrtc+nvjitlink`` (NVRTC's PTX linked by nvJitLink), and with ``lto`` also
    ``nvrtc+lto`` (NVRTC's LTO-IR linked by nvJitLink with -lto). ``keep``: a folder that gets
    one subfolder per path with its artifacts and manifest; without it all is removed.
    ``maxrregcount`` applies to every path (a low one makes kernels/spill.cu spill).
    """
    if not _REAL.match(arch):
        raise UsageError(f"diff needs a real arch (sm_NN) to compare cubins, not {arch!r}",
                         hint="e.g. --arch sm_90")
    cwd = os.path.abspath(cwd or os.getcwd())
    given = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    srcs = [str(Path(cwd, s).resolve()) for s in given]
    toolkit = toolkit or find_toolkit()
    nvrtc_v, nvjitlink_v = versions()
    result = PathComparison(srcs, arch, lto, {"toolkit": toolkit.version, "nvrtc": nvrtc_v,
                                               "nvjitlink": nvjitlink_v}, [], [])
    if toolkit.release != nvrtc_v:
        result.notes.append(f"nvcc is CUDA {toolkit.release} but NVRTC is {nvrtc_v}: "
                            "differences may come from the versions, not the paths")
    multi = len(srcs) > 1
    if multi:
        result.notes.append("several sources: nvcc and NVRTC compile each with -rdc=true; "
                            "only nvJitLink's cubins are linked (their numbers are final)")
    if name_expressions:
        result.notes.append("nvcc compiles only the template instances the source names "
                            "explicitly; the name expressions apply to NVRTC")

    work = Path(cwd, keep).resolve() if keep is not None else Path(
        tempfile.mkdtemp(prefix="nvstage-diff-"))
    try:
        # nvcc: one build per source (nvcc's plan is per file), stopping at the cubin.
        nvcc_path = PathResult(NVCC, f"nvcc -arch={arch} --cubin" + (" -rdc=true" if multi
                                                                       else ""))
        (work / NVCC).mkdir(parents=True, exist_ok=True)
        for src in srcs:
            # -o into the work folder: nvcc would otherwise leave NAME.cubin in cwd.
            opts = CompileOptions(archs=(arch,), stop="cubin", rdc=multi, resource_usage=True,
                                  maxrregcount=maxrregcount,
                                  output=str(work / NVCC / f"{Path(src).stem}.cubin"))
            try:
                # cache=False: compile times are compared, so every stage really runs.
                b = nvcc_compile(src, opts, toolkit=toolkit, keep=work / NVCC, cwd=cwd,
                                 cache=False)
            except NvstageError as e:
                _not_kept(e, keep)
                raise
            _collect(nvcc_path, b, final=not multi, toolkit=toolkit)
        result.paths.append(nvcc_path)

        try:
            rb = compile_nvrtc(srcs, CompileOptions(archs=(arch,), resource_usage=True,
                                                    maxrregcount=maxrregcount),
                               toolkit=toolkit, keep=work / NVRTC,
                               name_expressions=name_expressions, cwd=cwd)
            if lto:
                lb = compile_nvrtc(srcs, CompileOptions(archs=(arch,), lto=True,
                                                        resource_usage=True,
                                                        maxrregcount=maxrregcount),
                                   toolkit=toolkit, keep=work / LTO,
                                   name_expressions=name_expressions, cwd=cwd)
        except NvstageError as e:
            _not_kept(e, keep)
            raise
        rtc = PathResult(NVRTC, f"NVRTC -arch={arch}" + (" -rdc=true" if multi else ""))
        _collect(rtc, rb, final=not multi, toolkit=toolkit, kinds=("nvrtc",))
        result.paths.append(rtc)
        linked = PathResult(NVJITLINK, f"NVRTC PTX, linked by nvJitLink -arch={arch}")
        _collect(linked, rb, final=True, toolkit=toolkit, kinds=("nvjitlink",),
                 ptx=False)
        # nvJitLink links NVRTC's PTX: that compile is part of this path's time too.
        linked.stages[:0] = [s for s in rtc.stages]
        result.paths.append(linked)
        if rb.name_map:
            result.notes.append("name map: " + ", ".join(f"{e} -> {m}"
                                                         for e, m in rb.name_map.items()))

        if lto:
            lpath = PathResult(LTO, f"NVRTC -dlto, linked by nvJitLink -lto -arch={arch}")
            _collect(lpath, lb, final=True, toolkit=toolkit)
            result.paths.append(lpath)

        for module in rtc.ptx:
            if module in nvcc_path.ptx:
                result.ptx.append(compare_ptx(nvcc_path, rtc, module))
        if lto:
            lpath = result.path(LTO)
            if not multi and "linked" in lpath.ptx and rtc.ptx:
                (only,) = rtc.ptx
                result.ptx.append(compare_ptx(rtc, lpath, only, "linked"))
            elif multi:
                result.notes.append("the LTO PTX is one linked module: no single source's "
                                    "PTX to compare it with")
        return result
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def _not_kept(err: NvstageError, keep) -> None:
    # The build said its artifacts were kept, but without ``keep`` this folder is removed.
    if keep is None:
        err.hint = ("the comparison's temporary folder is removed; pass keep= (or build this "
                    "path alone with nvstage compile --keep) to look at its artifacts")


def _collect(path: PathResult, build, *, final: bool, toolkit: Toolkit,
             kinds: Sequence[str] | None = None, ptx: bool = True) -> None:
    """Take a build's stage times, PTX texts and per-kernel records into ``path``.

    ``kinds``: only stages of these kinds (the nvrtc and nvrtc+nvjitlink paths share a build).
    ``final``: whether a kernel no tool reported is linked (its cubin's numbers are whole).
    """
    records: dict[tuple[str, str], KernelRecord] = {}
    cubins: list[str] = []
    for run in build.runs:
        if kinds is not None and run.stage.kind.value not in kinds:
            continue
        outs = [a.name for a in run.artifacts]
        path.stages.append(StageTime(run.stage.kind.value, run.stage.tool, run.seconds, outs))
        for a in run.artifacts:
            if a.kind == "ptx" and ptx:
                module = "linked" if run.stage.kind.value == "nvjitlink" else a.name.split(".")[0]
                path.ptx[module] = read_regular(a.path).decode(errors="replace")
            if a.kind == "cubin":
                cubins.append(a.path)
        # ptxas' report the build kept (with the spills), joined with cuobjdump's figures.
        records.update({(r.kernel, r.arch): r for r in stage_resources(run, toolkit)})
    for cubin in dict.fromkeys(cubins):
        path.kernels += with_code(cubin, toolkit, records, final=final)


# --- PTX ----------------------------------------------------------------------------------------

def _strip_header(text: str) -> tuple[str, int]:
    """Drop the leading ``//`` comment block (generator, build ID, release): (rest, lines)."""
    lines = text.splitlines()
    n = 0
    while n < len(lines) and (lines[n].startswith("//") or not lines[n].strip()):
        n += 1
    return "\n".join(lines[n:]), n


def compare_ptx(a: PathResult, b: PathResult, module: str,
                module_b: str | None = None) -> PtxComparison:
    """Compare one PTX module of two paths, setting aside only what must be."""
    ta, tb = a.ptx[module], b.ptx[module_b or module]
    label = module if module_b is None else f"{module} vs {module_b}"
    if ta == tb:
        return PtxComparison(a.name, b.name, label, True, [])
    normalised = []
    na, ha = _strip_header(ta)
    nb, hb = _strip_header(tb)
    normalised.append(f"the leading comment header ({ha} and {hb} lines: generator, build ID)")
    if na.rstrip() == nb.rstrip():
        return PtxComparison(a.name, b.name, label, True, normalised)
    full = list(difflib.unified_diff(na.splitlines(), nb.splitlines(),
                                     f"{a.name}/{module}.ptx", f"{b.name}/{module_b or module}.ptx",
                                     n=1, lineterm=""))
    changed = sum(1 for line in full[2:] if line[:1] in "+-")
    shown = full[:DIFF_LINES]
    if len(full) > DIFF_LINES:
        shown.append(f"... {len(full) - DIFF_LINES} more diff lines")
    return PtxComparison(a.name, b.name, label, False, normalised, "\n".join(shown), changed)
