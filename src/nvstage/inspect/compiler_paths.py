"""One kernel, several compiler paths: nvcc, NVRTC, NVRTC + nvJitLink, and NVRTC + LTO.

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

from nvstage.artifacts import read_regular
from nvstage.errors import NvstageError, UsageError, indent
from nvstage.compiler.options import CompileOptions
from nvstage.compiler.toolkit import Toolkit, find_toolkit

NVCC, NVRTC, NVJITLINK, LTO = "nvcc", "nvrtc", "nvrtc+nvjitlink", "nvrtc+lto"
_REAL = re.compile(r"^sm_\d+[af]?$")
DIFF_LINES = 40  # a "short" diff: beyond this the rest is counted, not shown


@dataclass
class KernelStats:
    """One kernel in one path's cubin."""

    kernel: str  # mangled
    demangled: str
    registers: int | None
    spill_stores: int | None  # bytes; None when the reader could not say
    spill_loads: int | None
    sass_instructions: int | None
    cubin: str  # file name of the cubin it came from
    final: bool = True  # False in a -rdc cubin before linking: callees not yet accounted for


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
    kernels: list[KernelStats] = field(default_factory=list)
    stages: list[StageTime] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.stages)

    def kernel(self, name: str) -> KernelStats | None:
        for k in self.kernels:
            if name in (k.kernel, k.demangled) or k.demangled.split("(")[0] == name:
                return k
        return None

    def to_json(self) -> dict:
        return {"name": self.name, "how": self.how, "seconds": round(self.seconds, 6),
                "ptx_modules": sorted(self.ptx),
                "kernels": [asdict(k) for k in self.kernels],
                "stages": [asdict(s) for s in self.stages], "notes": self.notes}


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
                                                              "sass_instructions"),
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
    from nvstage.compiler.nvrtc import compile_nvrtc, versions
    from nvstage.compiler.driver import compile as nvcc_compile

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
    """Take a build's stage times, PTX texts and per-kernel numbers into ``path``.

    ``kinds``: only stages of these kinds (the nvrtc and nvrtc+nvjitlink paths share a build).
    """
    last_cubins, log = [], ""
    for run in build.runs:
        if kinds is not None and run.stage.kind.value not in kinds:
            continue
        outs = [a.name for a in run.artifacts]
        log += run.stderr + "\n" + run.stdout + "\n"
        path.stages.append(StageTime(run.stage.kind.value, run.stage.tool, run.seconds, outs))
        for a in run.artifacts:
            if a.kind == "ptx" and ptx:
                module = "linked" if run.stage.kind.value == "nvjitlink" else a.name.split(".")[0]
                path.ptx[module] = read_regular(a.path).decode(errors="replace")
            if a.kind == "cubin":
                last_cubins.append(a.path)
    spills = spills_from_log(log)
    for cubin in dict.fromkeys(last_cubins):
        for k in kernel_stats(cubin, toolkit, final=final):
            if k.spill_stores is None and k.kernel in spills:
                k.spill_stores, k.spill_loads = spills[k.kernel]
            path.kernels.append(k)


# ptxas -v, as nvcc --resource-usage, NVRTC -Xptxas=-v and nvJitLink -verbose print it.
_SPILLS = re.compile(r"Function properties for (\S+)\s*\n[^\n]*?(\d+) bytes spill stores, "
                     r"(\d+) bytes spill loads")


def spills_from_log(text: str) -> dict[str, tuple[int, int]]:
    """kernel -> (spill store bytes, spill load bytes) from a ptxas -v report.

    cuobjdump -res-usage has no spill figures; each path's own ptxas report does.
    """
    return {m.group(1): (int(m.group(2)), int(m.group(3))) for m in _SPILLS.finditer(text)}


# --- reading cubins -----------------------------------------------------------------------------

def kernel_stats(cubin: str, toolkit: Toolkit, *, final: bool = True) -> list[KernelStats]:
    """Registers, spills and SASS instruction count of every kernel in ``cubin``."""
    from nvstage.inspect.elf import read_cubin
    from nvstage.inspect.names import demangle_all

    # Only entries are compared: -rdc cubins also hold device functions.
    names = list(read_cubin(read_regular(cubin), os.path.basename(cubin)).kernels)
    res, sass = _read_resources(cubin, toolkit), _read_sass(cubin, toolkit)
    dem = demangle_all(names)
    out = []
    for n in names:
        regs, stores, loads = res.get(n, (None, None, None))
        out.append(KernelStats(n, dem.get(n, n), regs, stores, loads, sass.get(n),
                               os.path.basename(cubin), final))
    return out


def _read_resources(cubin: str, toolkit: Toolkit) -> dict[str, tuple]:
    """kernel -> (registers, spill store bytes, spill load bytes); spills may be None."""
    from nvstage.inspect.resources import resources_of

    return {r.kernel: (r.registers, r.spill_stores, r.spill_loads)
            for r in resources_of(cubin, toolkit)}


def _read_sass(cubin: str, toolkit: Toolkit) -> dict[str, int]:
    """kernel -> SASS instruction count."""
    from nvstage.inspect.sass import disassemble

    return {k.name: k.instruction_count for k in disassemble(cubin, toolkit)}


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


# --- showing ------------------------------------------------------------------------------------

def render(result: PathComparison, console) -> None:
    """Tables for a terminal: kernels x paths, PTX verdicts (with short diffs), stage times."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from nvstage.report.units import fmt_seconds

    console.print(Text(f"{', '.join(os.path.basename(s) for s in result.sources)} for "
                       f"{result.arch}: nvcc {result.versions['toolkit']}, NVRTC "
                       f"{result.versions['nvrtc']}, nvJitLink {result.versions['nvjitlink']}"))
    t = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=None)
    for col, just in (("kernel", "left"), ("path", "left"), ("registers", "right"),
                      ("spill st/ld", "right"), ("SASS instr", "right"), ("cubin", "left")):
        t.add_column(col, justify=just, overflow="fold")
    for name in result.kernel_names:
        first = True
        for p in result.paths:
            k = p.kernel(name)
            if k is None:
                t.add_row(_short_name(name, result) if first else "", p.name, "-", "-", "-",
                          "(absent)")
            else:
                spills = ("?" if k.spill_stores is None else
                          f"{k.spill_stores}/{k.spill_loads}")
                regs = "?" if k.registers is None else str(k.registers)
                if not k.final:
                    regs += "*"
                t.add_row(k.demangled if first else "", p.name, regs, spills,
                          "?" if k.sass_instructions is None else str(k.sass_instructions),
                          k.cubin)
            first = False
    console.print(t)
    if any(not k.final for p in result.paths for k in p.kernels):
        console.print(Text("* before linking (-rdc): callees not yet counted"))
    for c in result.ptx:
        console.print(Text(c.summary()))
        if c.diff:
            console.print(Text(indent(c.diff)))
    for line in result.resource_differences():
        console.print(Text("differs: " + line))
    st = Table(box=box.SIMPLE_HEAD, pad_edge=False, title=None)
    for col, just in (("path", "left"), ("stage", "left"), ("tool", "left"),
                      ("outputs", "left"), ("time", "right")):
        st.add_column(col, justify=just, overflow="fold")
    for p in result.paths:
        for i, s in enumerate(p.stages):
            st.add_row(p.name if i == 0 else "", s.stage, s.tool, ", ".join(s.outputs),
                       fmt_seconds(s.seconds))
        st.add_row("", "total", "", "", fmt_seconds(p.seconds))
    console.print(st)
    for n in result.notes:
        console.print(Text("note: " + n))


def _short_name(name: str, result: PathComparison) -> str:
    for p in result.paths:
        k = p.kernel(name)
        if k is not None:
            return k.demangled
    return name

