"""The runtime-compilation path: NVRTC (source -> PTX, cubin or LTO-IR) then nvJitLink (-> cubin).

Everything runs in-process through ``cuda.bindings`` and needs no GPU or driver. cuda.core's
``Program`` is not used because its ``compile("ptx")`` asks the driver for its version (and
fails with no driver), and because it compiles once per target: one NVRTC compile with
``-arch=sm_NN`` yields the PTX *and* the cubin, and that single compile is what we time.

Stages, each recorded as a ``StageRun`` of the same ``Build`` the nvcc path returns:

- ``nvrtc`` (one per source): ``-arch=sm_NN`` gives ``NAME.ptx`` + ``NAME.sm_NN.cubin``;
  ``compute_NN`` gives PTX only; with LTO (``-dlto``) it gives ``NAME.ltoir`` only.
- ``nvjitlink``: links the PTX (or, with LTO, the LTO-IR) of every source into
  ``NAME.nvjitlink.sm_NN.cubin``. Linking the PTX rather than NVRTC's cubin is deliberate: it
  is what a runtime JIT does, and it shows nvJitLink's own code generation.
- with LTO, a second ``nvjitlink -lto -ptx`` writes ``NAME.nvjitlink.ptx``: the PTX after
  link-time optimisation, for diffs against the PTX of the other paths.
"""

from __future__ import annotations

import os
import re
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nvstage.files import write_atomic
from nvstage.compiler.pipeline.observer import Observer
from nvstage.compiler.nvcc.options import CompileOptions, render_flags
from nvstage.compiler.nvcc.plan import Plan, Stage, StageKind
from nvstage.compiler.manifest.model import Artifact, Build, StageRun
from nvstage.compiler.toolkit.locate import Toolkit, find_toolkit
from nvstage.compiler.pipeline.workdir import finish, work_folder
from nvstage.errors import NvstageError, RuntimeCompileFailed, UsageError

DEFAULT_ARCH = "sm_75"  # nvcc 13's default; NVRTC's own default (compute_75) gives PTX only
_REAL = re.compile(r"^sm_(\d+)([af]?)$")
_VIRTUAL = re.compile(r"^compute_(\d+)([af]?)$")
# "saxpy.cu(12): error: ..." and "__nv_name_map(2): error: ..." in NVRTC's log.
_LOG_LOC = re.compile(r"^(?P<file>[^\s(][^()]*)\((?P<line>\d+)\): (?P<sev>[a-z ]*error|warning)")
_MISSING_HEADER = re.compile(r'(?:could not|cannot) open source file "([^"]+)"')
_NAME_MAP_FILE = "__nv_name_map"  # NVRTC's pseudo-file holding the name expressions
_HOST_HEADERS = frozenset(
    """cstdio stdio.h cstdlib stdlib.h iostream cstring string.h cstdint stdint.h cmath math.h
    vector string algorithm memory cassert assert.h chrono thread""".split())


# --- option tables (declarative: one row per CompileOptions field) -----------------------------

def _paths(flag: str) -> Callable[[tuple[str, ...]], list[str]]:
    return lambda v: [f"{flag}{x}" for x in v]


# CompileOptions field -> NVRTC options. Fields absent here and in _REFUSED are handled apart
# (archs, stop, output) or mean nothing to NVRTC.
_NVRTC_FLAGS: dict[str, Callable] = {
    "rdc": lambda v: ["-rdc=true"],
    "lineinfo": lambda v: ["-lineinfo"],
    "include_dirs": _paths("-I"),
    "defines": _paths("-D"),
    "resource_usage": lambda v: ["-Xptxas=-v"],
    "maxrregcount": lambda v: [f"-maxrregcount={v}"],
    "lto": lambda v: ["-dlto"],
    "extra": lambda v: list(v),
}
# CompileOptions field -> nvJitLink options (the link must agree with the compile).
_LINK_FLAGS: dict[str, Callable] = {
    "lineinfo": lambda v: ["-lineinfo"],
    "resource_usage": lambda v: ["-verbose"],
    "maxrregcount": lambda v: [f"-maxrregcount={v}"],
    "lto": lambda v: ["-lto"],
}
# Fields NVRTC has no equivalent for: refuse rather than silently ignore.
_REFUSED = {
    "gencodes": "NVRTC compiles one program for one arch and rejects -gencode: "
                "give a single --arch (sm_90, or compute_90 for PTX only)",
    "compile_only": "-c makes a host object file; NVRTC compiles device code only",
    "opt_level": "-O is nvcc's host optimisation level; NVRTC compiles no host code",
}




# --- records ------------------------------------------------------------------------------------

@dataclass
class RuntimeBuild(Build):
    """A ``Build`` of the runtime path, plus what only this path has (versions, name map).

    ``to_json`` is the nvcc manifest with one more section, ``runtime``.
    """

    sources: list[str] = field(default_factory=list)
    nvrtc_version: str = ""
    nvjitlink_version: str = ""
    name_expressions: tuple[str, ...] = ()
    name_map: dict[str, str] = field(default_factory=dict)  # expression -> mangled name
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        d = super().to_json()
        d["runtime"] = {
            "sources": self.sources,
            "nvrtc_version": self.nvrtc_version,
            "nvjitlink_version": self.nvjitlink_version,
            "name_expressions": list(self.name_expressions),
            "name_map": dict(self.name_map),
            "notes": list(self.notes),
        }
        return d


# --- the bindings, wrapped ----------------------------------------------------------------------

def versions() -> tuple[str, str]:
    """(NVRTC, nvJitLink) versions as "13.5"."""
    from cuda.bindings import nvjitlink, nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    jl = nvjitlink.version()
    return f"{major}.{minor}", f"{jl[0]}.{jl[1]}"


def _text(buf: bytes) -> str:
    # NVRTC and nvJitLink sizes include the C string's terminating NUL.
    return buf.rstrip(b"\0").decode(errors="replace")


@dataclass
class _NvrtcOut:
    result: str  # "NVRTC_SUCCESS" or the error's name
    log: str
    seconds: float
    ptx: bytes | None = None
    cubin: bytes | None = None
    ltoir: bytes | None = None
    lowered: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.result == "NVRTC_SUCCESS"


def _nvrtc_compile(text: str, name: str, opts: list[str], exprs: Sequence[str]) -> _NvrtcOut:
    from cuda.bindings import nvrtc

    ok = nvrtc.nvrtcResult.NVRTC_SUCCESS

    def check(res, what):
        if res[0] != ok:  # failures other than the compile itself are our bug or an OOM
            raise NvstageError(f"NVRTC {what} failed: {res[0].name}")
        return res[1:] if len(res) > 2 else (res[1] if len(res) == 2 else None)

    prog = check(nvrtc.nvrtcCreateProgram(text.encode(), name.encode(), 0, [], []),
                 "nvrtcCreateProgram")
    try:
        for e in exprs:
            check(nvrtc.nvrtcAddNameExpression(prog, e.encode()), "nvrtcAddNameExpression")
        t = time.perf_counter()
        (res,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        seconds = time.perf_counter() - t
        size = check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        # Fresh, writable buffers: NVRTC writes into them. ``b" " * 1`` is CPython's shared
        # one-byte b" ", and an empty log (its NUL) written there made " ".encode() give b"\0"
        # for the rest of the process.
        buf = bytearray(size)
        check(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
        out = _NvrtcOut(res.name, _text(bytes(buf)), seconds)
        if res != ok:
            return out
        for attr, get_size, get in (
                ("ptx", nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX),
                ("cubin", nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN),
                ("ltoir", nvrtc.nvrtcGetLTOIRSize, nvrtc.nvrtcGetLTOIR)):
            n = check(get_size(prog), attr)
            if n > 1:  # an absent output has size 0 (PTX under -dlto reports 1: the NUL)
                buf = bytearray(n)
                check(get(prog, buf), attr)
                data = bytes(buf)
                setattr(out, attr, data.rstrip(b"\0") if attr == "ptx" else data)
        for e in exprs:
            res_name, lowered = nvrtc.nvrtcGetLoweredName(prog, e.encode())
            if res_name == ok and lowered:
                out.lowered[e] = lowered.decode()
            else:
                out.result = res_name.name
                out.log += (f"{_NAME_MAP_FILE}: error: no lowered name for name expression "
                            f"{e!r}\n")
                return out
        return out
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


@dataclass
class _LinkOut:
    result: str
    log: str  # the info log, then the error log
    seconds: float
    data: bytes | None = None

    @property
    def ok(self) -> bool:
        return self.result == "SUCCESS"


def _link(opts: list[str], inputs: list[tuple[str, bytes, str]], want: str) -> _LinkOut:
    """nvJitLink ``inputs`` ((kind, data, name), kind in ptx/cubin/ltoir); ``want``: cubin|ptx."""
    from cuda.bindings import nvjitlink

    kinds = {"ptx": nvjitlink.InputType.PTX, "cubin": nvjitlink.InputType.CUBIN,
             "ltoir": nvjitlink.InputType.LTOIR}
    t = time.perf_counter()
    handle = nvjitlink.create(len(opts), opts)
    try:
        result, data = "SUCCESS", None
        try:
            for kind, blob, name in inputs:
                nvjitlink.add_data(handle, kinds[kind], blob, len(blob), name)
            nvjitlink.complete(handle)
            if want == "ptx":
                buf = bytearray(nvjitlink.get_linked_ptx_size(handle))
                nvjitlink.get_linked_ptx(handle, buf)
                data = bytes(buf).rstrip(b"\0")
            else:
                buf = bytearray(nvjitlink.get_linked_cubin_size(handle))
                nvjitlink.get_linked_cubin(handle, buf)
                data = bytes(buf)
        except nvjitlink.nvJitLinkError as e:
            result = str(e) or type(e).__name__
        seconds = time.perf_counter() - t
        log = ""
        for get_size, get in ((nvjitlink.get_info_log_size, nvjitlink.get_info_log),
                              (nvjitlink.get_error_log_size, nvjitlink.get_error_log)):
            n = get_size(handle)
            if n > 1:
                buf = bytearray(n)
                get(handle, buf)
                log += _text(bytes(buf))
        return _LinkOut(result, log, seconds, data)
    finally:
        nvjitlink.destroy(handle)


# --- arch and options ---------------------------------------------------------------------------

def _arch(options: CompileOptions) -> str:
    """The one arch NVRTC gets; a clear refusal for what NVRTC cannot take."""
    if len(options.archs) > 1:
        raise UsageError(
            f"NVRTC compiles for one arch per program, not {len(options.archs)} "
            f"({', '.join(options.archs)})",
            hint="give one --arch, or use --via nvcc for a multi-arch fatbin")
    arch = options.archs[0] if options.archs else DEFAULT_ARCH
    if arch in ("native", "all", "all-major"):
        raise UsageError(f"NVRTC rejects -arch={arch}: it needs one named arch",
                         hint="give e.g. --arch sm_90 (nvstage doctor says which GPU is here)")
    if not (_REAL.match(arch) or _VIRTUAL.match(arch)):
        raise UsageError(f"NVRTC cannot compile for {arch!r}",
                         hint="use sm_NN (PTX and a cubin) or compute_NN (PTX only); "
                              "LTO-IR comes from --lto")
    return arch


def _link_arch(arch: str) -> str:
    m = _VIRTUAL.match(arch)
    return f"sm_{m.group(1)}{m.group(2)}" if m else arch


def nvrtc_options(options: CompileOptions, *, arch: str, include_dirs: Sequence[str] = (),
                  rdc: bool = False) -> list[str]:
    """The NVRTC option list standing for ``options`` (what the manifest shows as argv)."""
    for name, why in _REFUSED.items():
        if options.given(name):
            raise UsageError(f"--via nvrtc: {why}")
    if options.stop == "fatbin":
        raise UsageError("--via nvrtc: NVRTC makes no fatbin",
                         hint="stop at --ptx or --cubin, or use --via nvcc")
    opts = [f"-arch={arch}"]
    if rdc and not options.rdc and not options.lto:
        opts.append("-rdc=true")  # several sources: each may call into the others
    opts += render_flags(_NVRTC_FLAGS, options)
    # Dropping -I of the implicit folders the user already named keeps argv readable.
    opts += [f"-I{d}" for d in include_dirs if f"-I{d}" not in opts]
    return opts


def _implicit_includes(sources: list[Path], toolkit: Toolkit, nvrtc_version: str) -> list[str]:
    """What nvcc adds on its own: each source's folder, and the toolkit's include folders.

    The toolkit's headers are added only when its release matches NVRTC's: NVRTC's built-in
    headers and another release's crt headers do not mix.
    """
    dirs = list(dict.fromkeys(str(s.parent) for s in sources))
    if toolkit.release == nvrtc_version:
        inc = Path(toolkit.root, "include")
        dirs += [str(d) for d in (inc, inc / "cccl") if d.is_dir()]
    return dirs


# --- the build ----------------------------------------------------------------------------------

def compile_nvrtc(
    source: str | os.PathLike | Sequence[str | os.PathLike],
    options: CompileOptions | None = None,
    *,
    toolkit: Toolkit | None = None,
    keep: str | os.PathLike | None = None,
    name_expressions: Sequence[str] = (),
    cwd: str | os.PathLike | None = None,
    observer: Observer | None = None,
) -> RuntimeBuild:
    """Compile ``source`` (one .cu file, or several to be linked) through NVRTC and nvJitLink.

    ``keep``: a folder for every file written and ``stages.json``; without it they go to a
    temporary folder removed on return, and only ``options.output`` (if given) is left.
    ``name_expressions``: template kernels to instantiate (``"scale<float>"``); the build's
    ``name_map`` maps each to its mangled name. Raises ``RuntimeCompileFailed`` with the
    compiler's log when NVRTC or nvJitLink refuses (the partial manifest is written first when
    ``keep`` is given), ``UsageError`` for options NVRTC has no equivalent for.
    """
    t_start = time.perf_counter()
    options = options or CompileOptions()
    observer = observer or Observer()
    cwd = os.path.abspath(cwd or os.getcwd())
    given = [source] if isinstance(source, (str, os.PathLike)) else list(source)
    if not given:
        raise UsageError("no source to compile")
    srcs = [Path(cwd, s).resolve() for s in given]
    out = Path(cwd, options.output) if options.output else None
    from nvstage.compiler.pipeline.driver import check_source  # the pipeline: where compiled

    for s, g in zip(srcs, given):
        check_source(s, g)
        if out is not None and _same_file(out, s):
            raise UsageError(f"-o {options.output} is the source: the build would overwrite it",
                             hint="give -o another name")
    stems = [s.name.rsplit(".", 1)[0] for s in srcs]
    if len(set(stems)) != len(stems):
        raise UsageError(f"two sources share a name ({', '.join(map(str, given))}): their "
                         "artifacts would overwrite each other", hint="rename one of them")
    arch = _arch(options)
    link_arch = _link_arch(arch)
    toolkit = toolkit or find_toolkit()
    nvrtc_v, nvjitlink_v = versions()
    opts = nvrtc_options(options, arch=arch,
                         include_dirs=_implicit_includes(srcs, toolkit, nvrtc_v),
                         rdc=len(srcs) > 1)
    link_opts = [f"-arch={link_arch}"] + render_flags(_LINK_FLAGS, options)
    # Stop after NVRTC when it already made what was asked for.
    stop_at_nvrtc = options.stop == "ptx" or (options.stop == "cubin" and not options.lto
                                              and len(srcs) == 1 and _REAL.match(arch))

    notes = []
    if toolkit.release != nvrtc_v:
        notes.append(f"NVRTC is {nvrtc_v} but the toolkit (nvcc) is {toolkit.release}: "
                     "the toolkit's headers were not added to NVRTC's include path")
    with work_folder(keep, cwd, prefix="nvstage-nvrtc-") as work:
        plan = Plan(variables={}, stages=[])
        build = RuntimeBuild(
            str(srcs[0]), options, toolkit, cwd, plan, [], 0.0, [], 0.0,
            str(work) if keep is not None else None, None, via="nvrtc",
            sources=[str(s) for s in srcs], nvrtc_version=nvrtc_v,
            nvjitlink_version=nvjitlink_v, name_expressions=tuple(name_expressions),
            notes=notes)
        # Plan first (the stages are known before anything runs), as the nvcc path does.
        for i, (src, stem) in enumerate(zip(srcs, stems), 1):
            outs = ([f"{stem}.ltoir"] if options.lto else
                    [f"{stem}.ptx"] + ([f"{stem}.{arch}.cubin"] if _REAL.match(arch) else []))
            plan.stages.append(Stage(i, StageKind.NVRTC, "nvrtc", ["nvrtc", *opts, str(src)],
                                     arch, [str(src)], [str(work / o) for o in outs]))
        link_stem = "+".join(stems)
        if not stop_at_nvrtc:
            kind = "ltoir" if options.lto else "ptx"
            ins = [o for s in plan.stages for o in s.outputs if o.endswith("." + kind)]
            cubin = str(work / f"{link_stem}.nvjitlink.{link_arch}.cubin")
            plan.stages.append(Stage(len(plan.stages) + 1, StageKind.NVJITLINK, "nvjitlink",
                                     ["nvjitlink", *link_opts, *ins], link_arch, ins, [cubin]))
            if options.lto:
                ptx = str(work / f"{link_stem}.nvjitlink.ptx")
                plan.stages.append(Stage(len(plan.stages) + 1, StageKind.NVJITLINK, "nvjitlink",
                                         ["nvjitlink", *link_opts, "-ptx", *ins], link_arch,
                                         ins, [ptx]))
        observer.on_plan(plan)
        finish(build, work, t_start, running=True)  # no stale "ok" over a part-made folder
        _run_stages(build, work, observer, t_start)
        final = _final_artifact(build, options)
        if options.output and final is not None:
            dest = Path(cwd, options.output)
            shutil.copyfile(final.path, dest)
            build.runs[-1].artifacts.append(Artifact.of(dest, stage=build.runs[-1].stage.index,
                                                        arch=final.arch))
            build.output = str(dest.resolve())
        elif keep is not None and final is not None:
            build.output = final.path
        finish(build, work, t_start)
        return build


def _run_stages(build: RuntimeBuild, work: Path, observer: Observer, t_start: float) -> None:
    """Run the planned stages in order, each writing its outputs into ``work``."""
    plan, name_expressions = build.plan, build.name_expressions
    srcs = [Path(s) for s in build.sources]

    def fail(run: StageRun, err: RuntimeCompileFailed):
        build.runs.append(run)
        observer.on_stage_end(run)
        build.status, build.error = "failed", err.to_json()
        finish(build, work, t_start)
        raise err

    produced: dict[str, bytes] = {}  # path -> contents, the inputs of later stages
    texts = {s.name: s.read_text(errors="replace") for s in srcs}
    for stage in plan.stages:
        observer.on_stage_start(stage)
        started = time.perf_counter() - t_start
        if stage.kind is StageKind.NVRTC:
            src = Path(stage.inputs[0])
            opts = stage.argv[1:-1]  # "nvrtc", the options, the source
            out = _nvrtc_compile(texts[src.name], src.name, opts, name_expressions)
            run = StageRun(stage, out.seconds, 0 if out.ok else 1,
                           stdout=_name_map_text(out.lowered), stderr=out.log,
                           started=started)
            if not out.ok:
                fail(run, _nvrtc_error(stage, out, texts, name_expressions, build.keep_dir))
            build.name_map.update(out.lowered)
            for path in stage.outputs:
                blob = {".ptx": out.ptx, ".cubin": out.cubin,
                        ".ltoir": out.ltoir}[os.path.splitext(path)[1]]
                if blob is None:  # NVRTC did not make what its arch promised: say so
                    fail(run, RuntimeCompileFailed(
                        stage_index=stage.index, stage_kind=stage.kind.value, tool="nvrtc",
                        argv=stage.argv, result="NO_OUTPUT", log=out.log,
                        source=str(src), keep_dir=build.keep_dir,
                        what=f"NVRTC wrote no {os.path.basename(path)}"))
                produced[path] = blob
        else:
            want = "ptx" if "-ptx" in stage.argv else "cubin"
            kinds = [os.path.splitext(p)[1][1:] for p in stage.inputs]
            names = ", ".join(os.path.basename(p) for p in stage.inputs)
            out = _link(stage.argv[1:len(stage.argv) - len(stage.inputs)],
                        [(k, produced[p], os.path.basename(p))
                         for k, p in zip(kinds, stage.inputs)], want)
            run = StageRun(stage, out.seconds, 0 if out.ok else 1, stdout=out.log,
                           started=started)
            if not out.ok:
                run.stderr, run.stdout = out.log, ""
                fail(run, RuntimeCompileFailed(
                    stage_index=stage.index, stage_kind=stage.kind.value, tool="nvjitlink",
                    argv=stage.argv, result=out.result, log=out.log,
                    source=names, keep_dir=build.keep_dir,
                    what=f"nvJitLink failed to link {names}",
                    hint="an undefined reference needs the source that defines it in the "
                         "same link: pass every source together" if "Undefined reference"
                         in out.log else None))
            produced[stage.outputs[0]] = out.data or b""
        for path in stage.outputs:
            write_atomic(path, produced[path])
        run.artifacts = [Artifact.of(p, stage=stage.index, arch=stage.arch)
                         for p in stage.outputs]
        build.runs.append(run)
        observer.on_stage_end(run)


def _final_artifact(build: Build, options: CompileOptions) -> Artifact | None:
    want = "ptx" if options.stop == "ptx" else "cubin"
    for run in reversed(build.runs):
        for a in run.artifacts:
            if a.kind == want:
                return a
    return None


def _name_map_text(lowered: dict[str, str]) -> str:
    return "".join(f"{e} -> {m}\n" for e, m in lowered.items())


# --- failures -----------------------------------------------------------------------------------

def _nvrtc_error(stage: Stage, out: _NvrtcOut, texts: dict[str, str],
                 exprs: Sequence[str], keep_dir: str | None) -> RuntimeCompileFailed:
    src = stage.inputs[0]
    name = os.path.basename(src)
    hint, what = None, None
    missing = [h for h in _MISSING_HEADER.findall(out.log)]
    if out.result == "NVRTC_ERROR_INVALID_OPTION":
        what = "NVRTC rejected an option"
        hint = ("NVRTC's options are not nvcc's: it rejects -gencode, -arch=native, -keep, "
                "--dryrun and host options; pass NVRTC options after --, or use --via nvcc")
    elif _NAME_MAP_FILE in out.log:
        bad = [e for e in exprs if e in out.log or e.replace(" ", "") in out.log] or list(exprs)
        what = f"name expression {', '.join(repr(e) for e in bad)} does not resolve in {name}"
        hint = ("a name expression must name a __global__ function (template instance) of the "
                "source, as C++ would: e.g. --name-expr 'scale<float>'")
    elif missing:
        host = [h for h in missing if h in _HOST_HEADERS]
        what = f"NVRTC cannot open <{missing[0]}> included by {name}"
        if host:
            hint = (f"NVRTC compiles device code only and has no C++ standard library "
                    f"(<{host[0]}> here); a file with main() or host calls cannot go through "
                    f"NVRTC at all. Use a device-only file (e.g. kernels/saxpy.cu), "
                    f"<cuda/std/...> headers in place of <c...> ones, or --via nvcc")
        else:
            hint = "add its folder with -I"
    return RuntimeCompileFailed(
        stage_index=stage.index, stage_kind=stage.kind.value, tool="nvrtc", argv=stage.argv,
        result=out.result, log=out.log, source=src, excerpt=source_excerpt(out.log, texts),
        keep_dir=keep_dir, hint=hint, what=what)


def source_excerpt(log: str, texts: dict[str, str], context: int = 1, limit: int = 40) -> str:
    """The source lines a compiler log names, numbered, the named ones marked with ``>``.

    ``texts`` maps the file names used in the log (NVRTC's program names) to their contents;
    other files named in the log are read from disk when they exist.
    """
    wanted: dict[str, set[int]] = {}
    for line in log.splitlines():
        m = _LOG_LOC.match(line)
        if m and m.group("file") != _NAME_MAP_FILE:
            wanted.setdefault(m.group("file"), set()).add(int(m.group("line")))
    chunks = []
    for fname, lines in wanted.items():
        text = texts.get(fname)
        if text is None and os.path.isfile(fname):
            text = Path(fname).read_text(errors="replace")
        if text is None:
            continue
        src_lines = text.splitlines()
        show = sorted({n for ln in lines for n in range(ln - context, ln + context + 1)
                       if 1 <= n <= len(src_lines)})
        width = len(str(show[-1])) if show else 1
        out, prev = [f"  {fname}:"], None
        for n in show:
            if prev is not None and n != prev + 1:
                out.append("  " + " " * (width + 2) + "...")
            mark = ">" if n in lines else " "
            out.append(f"  {mark} {n:>{width}} | {src_lines[n - 1]}")
            prev = n
        chunks.append("\n".join(out[: limit + 1]))
    return "\n".join(chunks)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        return False
