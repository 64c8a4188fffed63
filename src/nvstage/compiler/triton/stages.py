"""Triton's pipeline, stage by stage: a ``@triton.jit`` kernel from the user's Python file to a
cubin through Triton's own stages, each timed and kept, in the same ``Build`` record as nvcc's
and NVRTC's builds (plus a ``triton`` section: ``triton_record``).

Stages, as Triton 3.9's NVIDIA backend runs them (``triton/compiler/compiler.py``: a mapping of
named stages, each a function of the previous stage's output and a shared metadata record):

====  =========  ======  ============================================  =================
 #    stage      tool    what it does                                  kept as
====  =========  ======  ============================================  =================
 1    source     triton  the Python AST to Triton IR (``make_ir``)      NAME.source
 2    ttir       triton  Triton IR optimised (inliner, combine, CSE)   NAME.ttir
 3    ttgir      triton  to TritonGPU IR: layouts, warps, pipelining   NAME.ttgir
 4    llir       triton  to LLVM IR; shared memory and scratch sized   NAME.llir
 5    ptx        llvm    LLVM's NVPTX back end                         NAME.ptx
 6    ptxas      ptxas   PTX to SASS (Triton's ptxas, or the toolkit's) NAME.cubin, NAME.json
====  =========  ======  ============================================  =================

``triton.compile`` itself runs them: a hook Triton offers (``knobs.runtime.
add_stages_inspection_hook``) wraps each stage function to time it and catch what it prints, so
what is kept is what ``triton.compile`` returns for the same arguments. Triton is imported here
only, lazily; its cache is a private temporary folder (never the user's, never read), and
whatever it or ptxas writes to temporary files stays inside that folder.

The Python file is the user's own code, but its module is not imported: the kernel is read
from its AST with what it needs (``triton_source``), and only that is run, so a tutorial that
imports torch and asks the driver at import time compiles on a machine with neither. Nothing
read from a document (a keep folder, a Triton cache) is ever run.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from nvstage.compiler.pipeline.observer import Observer
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.nvcc.plan import Plan, Stage, StageKind
from nvstage.compiler.manifest.model import Artifact, StageRun, TritonBuild
from nvstage.compiler.toolkit.locate import Toolkit, find_toolkit
from nvstage.compiler.manifest.triton_info import TritonInfo, valid_type
from nvstage.compiler.pipeline.workdir import finish, work_folder
from nvstage.errors import InputNotFound, RuntimeCompileFailed, ToolkitError, UsageError
from nvstage.extras import TRITON
from nvstage.files import write_atomic
from nvstage.compiler.nvcc.cubin_figures import read_figures
from nvstage.compiler.nvcc.ptxas_report import split_ptxas_stderr

DEFAULT_ARCH = "sm_75"  # nvcc 13's default, as for --via nvrtc
# Triton's stage names (its file suffixes) and ours, in order.
STAGES = (("source", StageKind.TRITON_SOURCE, "triton"), ("ttir", StageKind.TTIR, "triton"),
          ("ttgir", StageKind.TTGIR, "triton"), ("llir", StageKind.LLIR, "triton"),
          ("ptx", StageKind.LLVM_PTX, "llvm"), ("cubin", StageKind.PTXAS, "ptxas"))
_ARCH = re.compile(r"^sm_(\d+)a?$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CAPTURE_LIMIT = 1 << 20  # what one stage printed, kept in the record
_FP_FUSION_ENV = ("TRITON_FORCE_DISABLE_FP_FUSION", "TRITON_DEFAULT_FP_FUSION")


@dataclass(frozen=True)
class TritonOptions:
    """What to ask Triton for. ``None``: Triton's own default."""

    kernel: str
    signature: tuple[tuple[str, str], ...] = ()  # the parameters' types, constexprs left out
    constexprs: tuple[tuple[str, object], ...] = ()
    arch: str = DEFAULT_ARCH
    num_warps: int | None = None
    num_stages: int | None = None
    fp_fusion: bool | None = None
    ptxas: str = "triton"  # "triton": the ptxas Triton ships; "toolkit": nvstage's toolkit's
    output: str | None = None  # -o: a copy of the cubin

    def __post_init__(self):
        if not _NAME.match(self.kernel or ""):
            raise UsageError(f"--kernel {self.kernel!r} is not a Python function name",
                             hint="name the @triton.jit function: --kernel add_kernel")
        if not _ARCH.match(self.arch):
            raise UsageError(f"Triton builds a cubin for one real arch, not {self.arch!r}",
                             hint="give --arch sm_80, sm_90, sm_100 (Triton adds the 'a' of "
                                  "sm_90a and newer itself)")
        if self.num_warps is not None and (self.num_warps < 1 or self.num_warps > 32
                                           or self.num_warps & (self.num_warps - 1)):
            raise UsageError(f"--num-warps {self.num_warps}: Triton takes a power of two, and "
                             "a block holds at most 32 warps (1024 threads)")
        if self.num_stages is not None and not 0 <= self.num_stages <= 64:
            raise UsageError(f"--num-stages {self.num_stages}: give 0 to 64")
        if self.ptxas not in ("triton", "toolkit"):
            raise UsageError(f"--ptxas {self.ptxas!r}: choose triton (the ptxas Triton ships) "
                             "or toolkit (nvstage's CUDA toolkit's)")

    @property
    def capability(self) -> int:
        return int(_ARCH.match(self.arch).group(1))

    def triton_options(self) -> dict:
        """The ``options`` ``triton.compile`` takes (unset ones left to Triton)."""
        out = {"num_warps": self.num_warps, "num_stages": self.num_stages,
               "enable_fp_fusion": self.fp_fusion}
        return {k: v for k, v in out.items() if v is not None}


def parse_signature(text: str) -> tuple[tuple[str, str], ...]:
    """``'x:*fp32,y:*fp32,n:i32'`` -> (("x", "*fp32"), ...): each type as Triton names it."""
    out, seen = [], set()
    for part in (p.strip() for p in (text or "").split(",")):
        if not part:
            continue
        name, colon, ty = (s.strip() for s in part.partition(":"))
        if not colon or not _NAME.match(name) or not ty:
            raise UsageError(f"--signature: {part!r} is not NAME:TYPE",
                             hint="e.g. --signature 'x:*fp32,y:*fp32,n:i32'")
        if not valid_type(ty):
            raise UsageError(f"--signature: {name} has the type {ty!r}, which Triton does not "
                             "know", hint="scalars i1 i8 i16 i32 i64 u8 u16 u32 u64 fp16 bf16 "
                                          "fp32 fp64; pointers *fp32, *i32, ...")
        if name in seen:
            raise UsageError(f"--signature names {name} twice")
        seen.add(name)
        out.append((name, ty))
    return tuple(out)


def parse_constexpr(text: str) -> tuple[str, object]:
    """``BLOCK=1024`` -> ("BLOCK", 1024): an integer, a float, true/false, or else a string."""
    name, eq, value = (s.strip() for s in text.partition("="))
    if not eq or not _NAME.match(name):
        raise UsageError(f"--constexpr {text!r} is not NAME=VALUE", hint="e.g. --constexpr "
                                                                         "BLOCK=1024")
    low = value.lower()
    if low in ("true", "false"):
        return name, low == "true"
    for kind in (int, float):
        try:
            return name, kind(value)
        except ValueError:
            pass
    if not value:
        raise UsageError(f"--constexpr {name}= has no value")
    return name, value


# --- Triton, imported here only ---------------------------------------------------------------

def import_triton():
    """The ``triton`` module, or one line saying what to install."""
    try:
        import triton
        import triton.backends.compiler  # noqa: F401  (a broken install fails here, not later)
    except ImportError as e:
        raise ToolkitError(f"--via triton needs Triton, which is not installed ({e.name or e})",
                           hint=TRITON) from None
    return triton


def load_kernel(path: Path, name: str):
    """The ``@triton.jit`` function ``name`` of the user's Python file, found without running
    the file: ``triton_source`` reads what the kernel needs from the module's AST and runs only
    that (the module's other top-level statements, a tutorial's torch import and benchmarks,
    never run)."""
    from nvstage.compiler.triton.triton_source import extract, load_extracted

    return load_extracted(extract(path, name), f"_nvstage_triton_{abs(hash(str(path)))}")


# Triton's launch passes one keyword both to the kernel (a parameter of that name) and to the
# compile options (``JITFunction.run``: ``binder(**kwargs)`` and ``parse_options(kwargs)``), as
# the fused-softmax tutorial's ``num_stages: tl.constexpr`` does: so do --num-stages and
# --constexpr num_stages=N here.
OPTION_CONSTEXPRS = ("num_warps", "num_stages")


def with_option_constexprs(fn, options: TritonOptions) -> TritonOptions:
    """``options`` with a constexpr named like a Triton option and the option agreeing: one
    given sets the other; both given and different is refused."""
    from dataclasses import replace

    params = {p.name: p for p in fn.params}
    consts = dict(options.constexprs)
    changes = {}
    for name in OPTION_CONSTEXPRS:
        p = params.get(name)
        if p is None or not p.is_constexpr:
            continue
        opt = getattr(options, name)
        if name in consts and opt is not None and consts[name] != opt:
            raise UsageError(f"--constexpr {name}={consts[name]} and --{name.replace('_', '-')} "
                             f"{opt} disagree", hint=f"Triton passes one {name} to both the "
                                                     "kernel and the compiler: give one")
        if name in consts and opt is None:
            if not isinstance(consts[name], int) or isinstance(consts[name], bool):
                raise UsageError(f"--constexpr {name}={consts[name]}: {name} is also Triton's "
                                 "option and takes an integer")
            changes[name] = consts[name]
        elif name not in consts and opt is not None:
            consts[name] = opt
    if changes or consts != dict(options.constexprs):
        options = replace(options, constexprs=tuple(consts.items()), **changes)
    return options


def full_signature(fn, options: TritonOptions) -> tuple[dict, dict]:
    """(signature, constexprs) as ``ASTSource`` takes them: every parameter in order, each
    constexpr listed as ``"constexpr"`` too (Triton 3.x wants both). A constexpr not given
    takes its default from the Python function."""
    given = dict(options.signature)
    consts = dict(options.constexprs)
    names = list(fn.arg_names)
    unknown = [n for n in [*given, *consts] if n not in names]
    if unknown:
        raise UsageError(f"{options.kernel} has no parameter {unknown[0]!r}",
                         hint=f"its parameters: {', '.join(names)}")
    both = [n for n in given if n in consts]
    if both:
        raise UsageError(f"{both[0]} is given a type in --signature and a value in --constexpr",
                         hint="a constexpr is compiled in: give it with --constexpr only")
    sig: dict[str, str] = {}
    for p in fn.params:
        if p.name in consts:
            sig[p.name] = "constexpr"
        elif p.is_constexpr:
            if p.default is p._param.empty:
                raise UsageError(f"{options.kernel}'s constexpr {p.name} has no value",
                                 hint=f"give it: --constexpr {p.name}=VALUE")
            consts[p.name] = p.default
            sig[p.name] = "constexpr"
        elif p.name in given:
            sig[p.name] = given[p.name]
        else:
            raise UsageError(f"--signature gives no type for {options.kernel}'s parameter "
                             f"{p.name}", hint="e.g. --signature 'x:*fp32,n:i32' (constexprs "
                                               "go in --constexpr)")
    return sig, consts


# --- running triton.compile with each stage timed ---------------------------------------------

@dataclass
class _StageOut:
    ext: str
    seconds: float = 0.0
    printed: str = ""
    error: BaseException | None = None
    started: float = 0.0


@contextlib.contextmanager
def _captured(into: list[str]):
    """What a stage prints, kept rather than mixed into nvstage's own output: on file
    descriptors 1 and 2 (Triton's C++ passes and ptxas print there) and on Python's
    ``sys.stdout``/``sys.stderr`` (Triton prints ptxas's report there, and the whole PTX when
    ptxas fails), which need not be those descriptors."""
    import io

    for s in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            s.flush()
    said = io.StringIO()
    with tempfile.TemporaryFile() as f:
        saved = [os.dup(1), os.dup(2)]
        try:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
            with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
                yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            f.seek(0)
            into.append(f.read(_CAPTURE_LIMIT).decode("utf-8", "replace"))
            into.append(said.getvalue()[:_CAPTURE_LIMIT])


class _Timer:
    """Triton's stage hook: wraps each stage function (and the front end, ``make_ir``) to time
    it and keep what it printed. Called with no arguments, Triton asks it for a key to add to
    its cache key."""

    def __init__(self, t_start: float):
        self.t_start = t_start
        self.outs: list[_StageOut] = []

    def __call__(self, *args):
        if not args:
            return "nvstage-stage-timer", "1"
        stages = args[1]
        for ext, fn in list(stages.items()):
            stages[ext] = self.wrap(ext, fn)
        return None

    def wrap(self, ext: str, fn):
        # Triton calls what it wraps with positional arguments only (3.9's compiler.py:
        # compile_ir(module, metadata) for a stage, src.make_ir(target, options, ...)).
        def timed(*args):
            out = _StageOut(ext, started=time.perf_counter() - self.t_start)
            self.outs.append(out)
            printed: list[str] = []
            t = time.perf_counter()
            try:
                with _captured(printed):
                    return fn(*args)
            except BaseException as e:
                out.error = e
                raise
            finally:
                out.seconds = time.perf_counter() - t
                out.printed = "".join(printed)
        return timed


@contextlib.contextmanager
def _scratch_tempdir(folder: str):
    """Python's temporary files in ``folder`` while Triton compiles: ptxas's input, output and
    log (Triton leaves the PTX behind when ptxas fails) go where nvstage removes them."""
    saved = tempfile.tempdir
    tempfile.tempdir = folder
    try:
        yield
    finally:
        tempfile.tempdir = saved


def _ptxas_tool(knobs, capability: int):
    """The ptxas Triton 3.9 runs for ``capability`` (``get_ptxas``: below 90 its ``ptxas``,
    from 90 on its ``ptxas-blackwell``)."""
    return knobs.nvidia.ptxas if capability < 90 else knobs.nvidia.ptxas_blackwell


def _fp_fusion_from(options: TritonOptions, triton_version: str) -> str:
    if options.fp_fusion is not None:
        return "--fp-fusion"
    for var in _FP_FUSION_ENV:
        if os.environ.get(var) is not None:
            return f"{var}={os.environ[var]}"
    return (f"Triton {triton_version}'s default, TRITON_DEFAULT_FP_FUSION being unset; "
            "Triton 3.10 turns it off")


def _ptxas_argv(tool_path: str, knobs, fp_fusion: bool, arch: str, ptx: str,
                cubin: str) -> list[str]:
    """ptxas's command line as Triton 3.9's ``make_cubin`` builds it (there, for a temporary
    file): the stage's argv in the record. The same knobs decide it."""
    if knobs.compilation.disable_line_info:
        debug = ["-lineinfo", "-suppress-debug-info"]
    elif knobs.nvidia.disable_ptxas_opt:
        debug = ["-g"]
    else:
        debug = ["-lineinfo"]
    fmad = [] if fp_fusion else ["--fmad=false"]
    opt = ["--opt-level", "0"] if knobs.nvidia.disable_ptxas_opt else []
    extra = knobs.nvidia.ptxas_options.split(" ") if knobs.nvidia.ptxas_options else []
    return [tool_path, *debug, *fmad, "-v", *opt, "--regAllocOptLevel=2", *extra,
            f"--gpu-name={arch}", ptx, "-o", cubin]


# --- the build --------------------------------------------------------------------------------

def compile_triton(source: str | os.PathLike, options: TritonOptions, *,
                   toolkit: Toolkit | None = None, keep: str | os.PathLike | None = None,
                   cwd: str | os.PathLike | None = None,
                   observer: Observer | None = None) -> TritonBuild:
    """Compile the ``@triton.jit`` function ``options.kernel`` of the Python file ``source``
    through Triton's stages for ``options.arch``.

    ``keep``: a folder for every stage's file, Triton's metadata JSON and ``stages.json``;
    without it they go to a temporary folder removed on return, and only ``options.output``
    (the cubin) is left. Raises ``ToolkitError`` when Triton is not installed,
    ``UsageError`` for a kernel or signature that does not fit the file, and
    ``RuntimeCompileFailed`` with Triton's message when a stage fails (the partial manifest is
    written first when ``keep`` is given).
    """
    t_start = time.perf_counter()
    observer = observer or Observer()
    cwd = os.path.abspath(cwd or os.getcwd())
    src = Path(cwd, source).resolve()
    if not src.is_file():
        raise InputNotFound(f"no such file: {source}",
                            hint="give the Python file that defines the @triton.jit kernel")
    triton = import_triton()
    from triton import knobs

    toolkit = toolkit or find_toolkit()
    fn = load_kernel(src, options.kernel)
    options = with_option_constexprs(fn, options)
    signature, constexprs = full_signature(fn, options)
    cap = options.capability
    arch = f"sm_{cap}a" if cap >= 90 else f"sm_{cap}"  # Triton's sm_arch_from_capability
    scratch = tempfile.mkdtemp(prefix="nvstage-triton-")
    try:
        with knobs.runtime.scope(), knobs.cache.scope(), knobs.nvidia.scope(), \
                knobs.compilation.scope(), _scratch_tempdir(scratch):
            knobs.cache.dir = os.path.join(scratch, "cache")
            knobs.nvidia.dump_ptxas_log = True  # ptxas -v's report, caught with the stage
            if options.ptxas == "toolkit":
                knobs.nvidia.ptxas = knobs.nvidia.ptxas_blackwell = toolkit.tool("ptxas")
            tool = _ptxas_tool(knobs, cap)
            if options.ptxas == "toolkit" and tool.path != toolkit.tool("ptxas"):
                raise ToolkitError(f"Triton did not take the toolkit's ptxas "
                                   f"({toolkit.tool('ptxas')}): it would run {tool.path}")
            return _build(_Job(triton, knobs, src, fn, options, signature, constexprs, arch,
                               tool, toolkit, keep, cwd, observer, scratch, t_start))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass(frozen=True)
class _Job:
    """One compile, decided: what ``_build`` runs."""

    triton: object  # the module
    knobs: object  # triton.knobs, scoped by the caller
    src: Path
    fn: object  # the JITFunction
    options: TritonOptions
    signature: dict
    constexprs: dict
    arch: str  # what ptxas builds: sm_90a
    tool: object  # Triton's NvidiaTool for the ptxas that runs
    toolkit: Toolkit
    keep: object
    cwd: str
    observer: Observer
    scratch: str  # Triton's cache and temporary files: removed by the caller
    t_start: float


def _build(job: _Job) -> TritonBuild:
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    triton, knobs, options, arch = job.triton, job.knobs, job.options, job.arch
    src, toolkit, keep, cwd, t_start = job.src, job.toolkit, job.keep, job.cwd, job.t_start
    observer, tool, signature, constexprs = job.observer, job.tool, job.signature, \
        job.constexprs
    name = options.kernel[:150]  # the name Triton gives its files
    with work_folder(keep, cwd, prefix="nvstage-triton-") as work:
        plan = _plan(src, work, name, arch)
        plan.stages[-1].argv = _ptxas_argv(tool.path, knobs, _fused(knobs, options), arch,
                                           plan.stages[-1].inputs[0],
                                           plan.stages[-1].outputs[0])
        build = TritonBuild(str(src), CompileOptions(archs=(arch,), output=options.output),
                            toolkit, cwd, plan, [], 0.0, [], 0.0,
                            str(work) if keep is not None else None, None, via="triton")
        observer.on_plan(plan)
        finish(build, work, t_start, running=True)
        timer = _Timer(t_start)
        knobs.runtime.add_stages_inspection_hook = timer
        ast = ASTSource(job.fn, signature=signature, constexprs=constexprs)
        ast.make_ir = timer.wrap("source", ast.make_ir)
        compiled, error = None, None
        with _warnings() as caught:
            try:
                compiled = triton.compile(ast, target=GPUTarget("cuda", options.capability, 32),
                                          options=options.triton_options())
            except Exception as e:  # Triton's own errors: said as the stage that failed
                error = e
        _record_runs(build, timer, _texts(compiled, job.scratch, name), work, observer)
        if error is not None:
            _fail(build, timer, error, work, t_start)
        build.triton = _info(triton.__version__, options, compiled, signature, constexprs,
                             arch, tool, caught)
        final = build.runs[-1].artifacts[0]
        if options.output:
            dest = Path(cwd, options.output)
            shutil.copyfile(final.path, dest)
            build.runs[-1].artifacts.append(Artifact.of(dest, stage=len(build.runs),
                                                        arch=arch))
            build.output = str(dest.resolve())
        elif keep is not None:
            build.output = final.path
        finish(build, work, t_start)
        return build


def _plan(src: Path, work: Path, name: str, arch: str) -> Plan:
    stages, prev = [], str(src)
    for i, (ext, kind, tool) in enumerate(STAGES, 1):
        out = str(work / f"{name}.{ext}")
        outs = [out] + ([str(work / f"{name}.json")] if ext == "cubin" else [])
        stage_arch = arch if ext == "cubin" else arch.replace("sm_", "compute_") \
            if ext == "ptx" else None
        stages.append(Stage(i, kind, tool, ["triton", f"make_{ext}", prev], stage_arch,
                            [prev], outs))
        prev = out
    return Plan(variables={}, stages=stages)


@contextlib.contextmanager
def _warnings():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught


def _fused(knobs, options: TritonOptions) -> bool:
    """Whether Triton will fuse multiplies and adds: what ``parse_options`` decides (it warns
    when the default decides; the warning is caught with the compile's)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return knobs.language.fp_fusion_enabled(options.fp_fusion)


def _texts(compiled, scratch: str, name: str) -> dict[str, str | bytes]:
    """Each stage's output: what ``triton.compile`` returned, or, when a stage failed, the
    files Triton's cache holds from the stages before it (it stores each as it finishes)."""
    if compiled is not None:
        out = dict(compiled.asm)
        for p in compiled.metadata_group.values():
            if p.endswith(f"{name}.json"):
                out["json"] = Path(p).read_text()
        return out
    out = {}
    for p in Path(scratch, "cache").glob(f"*/{name}.*"):
        ext = p.suffix[1:]
        if ext in {s for s, _, _ in STAGES} | {"json"}:
            out[ext] = p.read_bytes() if ext == "cubin" else p.read_text(errors="replace")
    return out


def _record_runs(build: TritonBuild, timer: _Timer, texts: dict, work: Path,
                 observer: Observer) -> None:
    """A ``StageRun`` for each stage that finished, its outputs written into ``work``."""
    timed = {o.ext: o for o in timer.outs}
    for stage, (ext, _, _) in zip(build.plan.stages, STAGES):
        out = timed.get(ext)
        if out is None or out.error is not None or ext not in texts:
            return
        observer.on_stage_start(stage)
        blobs = [texts[ext]] + ([texts.get("json", "{}")] if ext == "cubin" else [])
        for path, blob in zip(stage.outputs, blobs):
            write_atomic(path, blob if isinstance(blob, bytes) else blob.encode())
        run = StageRun(stage, out.seconds, 0, stderr=out.printed, started=out.started)
        if ext == "cubin":  # Triton runs ptxas with -v: its report is the record's, not noise

            run.stderr, run.resources = split_ptxas_stderr(out.printed, user_verbose=False)
        run.artifacts = [Artifact.of(stage.outputs[0], stage=stage.index, arch=stage.arch)]
        if ext == "cubin":
            run.artifacts.append(Artifact(*_of(stage.outputs[1]), stage=stage.index))
            run.figures = read_figures(texts[ext], stage.outputs[0])
        build.runs.append(run)
        observer.on_stage_end(run)


def _of(path: str) -> tuple:
    a = Artifact.of(path)
    return a.path, "triton-metadata", None, a.size, a.sha256


def _fail(build: TritonBuild, timer: _Timer, error: BaseException, work: Path,
          t_start: float) -> None:
    """Record the stage that failed and raise Triton's message as a failed stage."""
    failed = next((o for o in timer.outs if o.error is not None), None)
    if failed is None:  # before any stage: Triton refused the options or the signature
        build.status = "failed"
        build.error = {"error": type(error).__name__, "message": str(error)[:4096],
                       "hint": None}
        finish(build, work, t_start)
        raise UsageError(f"Triton refused to compile {build.plan.stages[0].inputs[0]}: "
                         f"{type(error).__name__}: {_first_line(str(error))}")
    index = [s for s, _, _ in STAGES].index(failed.ext)
    stage = build.plan.stages[index]
    log = "\n".join(t for t in (str(error).strip(), failed.printed.strip()) if t)
    run = StageRun(stage, failed.seconds, 1, stderr=log, started=failed.started)
    build.runs.append(run)
    err = RuntimeCompileFailed(
        stage_index=stage.index, stage_kind=stage.kind.value, tool=stage.tool, argv=stage.argv,
        result=type(error).__name__, log=log[:_CAPTURE_LIMIT], source=build.source,
        keep_dir=build.keep_dir, what=f"Triton's {failed.ext} stage failed",
        hint=(f"the files of the stages before it are kept in {build.keep_dir}"
              if build.keep_dir else "the message above is Triton's own; add --keep to see "
                                     "the stages before it"))
    build.status, build.error = "failed", err.to_json()
    finish(build, work, t_start)
    raise err


def _info(version: str, options: TritonOptions, compiled, signature: dict, constexprs: dict,
          arch: str, tool, caught) -> TritonInfo:
    md = compiled.metadata
    from triton._C.libtriton import get_cache_invalidating_env_vars

    ptx = compiled.asm.get("ptx", "")
    ptx_version = re.search(r"^\s*\.version\s+(\d+\.\d+)", ptx, re.M)
    env = {k: str(v) for k, v in get_cache_invalidating_env_vars().items() if v is not None}
    return TritonInfo(
        version=version, kernel=options.kernel, name=md.name,
        signature=tuple(signature.items()),
        constexprs=tuple((k, v if isinstance(v, (bool, int, float, str)) else str(v))
                         for k, v in constexprs.items()),
        arch=arch, warp_size=int(md.warp_size), num_warps=int(md.num_warps),
        num_ctas=int(md.num_ctas), num_stages=int(md.num_stages), shared=int(md.shared or 0),
        global_scratch_size=int(md.global_scratch_size or 0),
        profile_scratch_size=int(md.profile_scratch_size or 0),
        fp_fusion=bool(md.enable_fp_fusion), fp_fusion_from=_fp_fusion_from(options, version),
        ptxas=options.ptxas, ptxas_path=tool.path, ptxas_version=tool.version,
        ptx_version=ptx_version.group(1) if ptx_version else "",
        launch_cooperative_grid=bool(md.launch_cooperative_grid),
        launch_pdl=bool(md.launch_pdl), tmem_size=int(getattr(md, "tmem_size", 0) or 0),
        env=tuple(sorted(env.items())),
        notes=tuple(dict.fromkeys(_first_line(str(w.message)) for w in caught)))


def _first_line(text: str) -> str:
    line = (text or "").strip().splitlines()
    return line[0][:300] if line else ""
