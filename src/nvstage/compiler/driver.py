"""Run nvcc's own plan stage by stage: time each stage, record every artifact, keep or clean.

nvcc is asked for its plan with ``--dryrun --keep --keep-dir DIR`` and the user's flags, so the
intermediate files get readable names (``vadd.ptx``, ``vadd.sm_90.cubin``) instead of
``/tmp/tmpxft_...``. Without ``--keep``, DIR is a temporary folder removed afterwards.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import heapq
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from nvstage import __version__, proc
from nvstage.artifacts import Artifact, arch_of, kind_of, write_json_atomic
from nvstage.compiler.cache.store import HOST_ENV, Cache, Counters, FileHasher, Paths, Scratch, Work, digest, \
    mentions, parse_depfile, tool_identity
from nvstage.errors import CacheError, InputNotFound, PlanError, StageFailed, ToolkitError, \
    UsageError
from nvstage.compiler.graph import Graph, build_graph
from nvstage.compiler.cache.headers import Existence, Trees, builtin_dirs, include_search, present, search_layout, \
    shadow_candidates, uses_time_macros
from nvstage.compiler.options import CompileOptions, check_archs
from nvstage.compiler.plan import Plan, Stage, StageKind, parse_dryrun
from nvstage.compiler.toolkit import Toolkit, find_toolkit

MANIFEST = "stages.json"
SCHEMA = "nvstage.compile/1"
# nvcc's --dryrun does not escape quotes, backslashes or $ in what it prints, and blanks need
# quoting: a user string holding any of them is replaced by a placeholder while nvcc plans, and
# put back into the parsed argument lists afterwards.
_UNSAFE = re.compile(r"[\s\"'\\$`]")


def _safe(text: str) -> bool:
    return not _UNSAFE.search(text)


@dataclass
class StageRun:
    """What one stage did: the stage, how long it took, what it printed and produced."""

    stage: Stage
    seconds: float
    returncode: int
    stdout: str = ""
    stderr: str = ""
    artifacts: list[Artifact] = field(default_factory=list)
    started: float = 0.0  # seconds since the build started
    cached: bool = False
    # A ptxas stage's -v report (nvstage always asks for it; ``stderr`` shows it only when the
    # user did too). None when constructed: taken out of ``stderr`` then.
    resources: str | None = None

    def __post_init__(self):
        if self.resources is None:
            self.resources = ""
            if self.stage.kind is StageKind.PTXAS:
                from nvstage.inspect.resources import split_ptxas_stderr

                self.stderr, self.resources = split_ptxas_stderr(
                    self.stderr, user_verbose=_user_verbose(self.stage))
            elif self.stage.kind in (StageKind.NVRTC, StageKind.NVJITLINK):
                # Their logs hold ptxas' report when --resource-usage asked for it (nvJitLink's
                # in stdout): the same record, its log left as the library wrote it.
                from nvstage.inspect.resources import split_ptxas_stderr

                self.resources = split_ptxas_stderr(f"{self.stderr}\n{self.stdout}",
                                                    user_verbose=True)[1]

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def tool_stderr(self) -> str:
        """What the tool printed on stderr, -v report included: what the cache keeps, so a
        restored stage splits into the same ``stderr`` and ``resources``."""
        if not self.resources or _user_verbose(self.stage):
            return self.stderr
        return self.resources + ("" if self.resources.endswith("\n") else "\n") + self.stderr

    def to_json(self) -> dict:
        return {
            "index": self.stage.index,
            "kind": self.stage.kind.value,
            "tool": self.stage.tool,
            "arch": self.stage.arch,
            "argv": self.stage.argv,
            "inputs": self.stage.inputs,
            "outputs": self.stage.outputs,
            "seconds": round(self.seconds, 6),
            "started": round(self.started, 6),
            "returncode": self.returncode,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "cached": self.cached,
            "resources": self.resources,
            "artifacts": [a.to_json() for a in self.artifacts],
        }


def _user_verbose(stage: Stage) -> bool:
    """Whether the plan itself runs ptxas with -v (--resource-usage, -Xptxas -v)."""
    from nvstage.inspect.resources import USER_VERBOSE

    return any(a in USER_VERBOSE for a in stage.argv[1:])


class Observer:
    """Progress sink; the CLI draws a live display from these calls. All methods optional.

    Every call comes from the thread that called ``compile``, one at a time, even when stages
    run at once: an observer needs no lock.
    """

    def on_plan(self, plan: Plan) -> None: ...
    def on_stage_start(self, stage: Stage) -> None: ...
    def on_stage_end(self, run: StageRun) -> None: ...


@dataclass
class Build:
    """The result of ``compile``: the plan, each stage as it ran, and every artifact."""

    source: str
    options: CompileOptions
    toolkit: Toolkit
    cwd: str
    plan: Plan
    dryrun_argv: list[str]
    plan_seconds: float
    runs: list[StageRun]
    wall_seconds: float
    keep_dir: str | None
    output: str | None
    status: str = "ok"
    error: dict | None = None
    via: str = "nvcc"  # "nvcc" (the staged driver) or "nvrtc" (the runtime path)
    jobs: int = 1  # stages allowed to run at once
    critical_path: list[int] = field(default_factory=list)  # stage indices, first to last
    critical_path_seconds: float = 0.0  # the chain's measured time: the wall-time floor
    cache: dict | None = None  # the cache folder and this build's hits and misses; None: off

    @property
    def artifacts(self) -> list[Artifact]:
        return [a for r in self.runs for a in r.artifacts]

    @property
    def stage_seconds(self) -> float:
        return sum(r.seconds for r in self.runs)

    def artifact(self, kind: str, arch: str | None = None) -> Artifact | None:
        for a in self.artifacts:
            if a.kind == kind and (arch is None or a.arch == arch):
                return a
        return None

    def to_json(self) -> dict:
        return {
            "schema": SCHEMA,
            "nvstage": __version__,
            "via": self.via,
            "status": self.status,
            "error": self.error,
            "source": self.source,
            "cwd": self.cwd,
            "options": self.options.to_json(),
            "toolkit": self.toolkit.to_json(),
            "dryrun_argv": self.dryrun_argv,
            "plan_seconds": round(self.plan_seconds, 6),
            "plan": self.plan.to_json(),
            "stages": [r.to_json() for r in self.runs],
            "stage_seconds": round(self.stage_seconds, 6),
            "wall_seconds": round(self.wall_seconds, 6),
            "jobs": self.jobs,
            "critical_path": self.critical_path,
            "critical_path_seconds": round(self.critical_path_seconds, 6),
            "cache": self.cache,
            "keep_dir": self.keep_dir,
            "output": self.output,
            "artifacts": [a.to_json() for a in self.artifacts],
        }


class _Placeholders:
    """Swap unsafe user strings for plain tokens while nvcc plans; swap them back after."""

    def __init__(self):
        self.table: dict[str, str] = {}

    def sub(self, value: str) -> str:
        if _safe(value):
            return value
        token = f"__nvstage_ph{len(self.table)}__"
        self.table[token] = value
        return token

    def sub_path(self, path: str) -> str:
        """Keep a path's suffix: nvcc picks the phase from it and derives names from the stem."""
        if _safe(path):
            return path
        head, tail = os.path.split(path)
        stem, suffix = os.path.splitext(tail)
        parts = [self.sub(head)] if head else []
        parts.append(self.sub(stem) + (suffix if _safe(suffix) else ""))
        return os.path.join(*parts)

    def restore(self, text: str) -> str:
        for token, value in self.table.items():
            text = text.replace(token, value)
        return text

    def restore_plan(self, plan: Plan) -> Plan:
        if not self.table:
            return plan
        for s in plan.stages:
            s.argv = [self.restore(a) for a in s.argv]
            s.inputs = [self.restore(a) for a in s.inputs]
            s.outputs = [self.restore(a) for a in s.outputs]
        plan.messages = [self.restore(m) for m in plan.messages]
        return plan


def compile(  # noqa: A001 - the verb users expect
    source: str | os.PathLike,
    options: CompileOptions | None = None,
    *,
    toolkit: Toolkit | None = None,
    keep: str | os.PathLike | None = None,
    cwd: str | os.PathLike | None = None,
    observer: Observer | None = None,
    jobs: int | None = None,
    cache: bool | str | os.PathLike | Cache = True,
) -> Build:
    """Compile ``source`` as nvcc would, one stage at a time.

    ``keep``: a folder for every intermediate file and ``stages.json``; without it nothing but
    the requested output is left behind. Raises ``StageFailed`` when a tool fails (its partial
    manifest is written first when ``keep`` is given). ``jobs``: how many stages may run at
    once (None: one per core available); ``cache``: reuse stages whose inputs are unchanged
    (True: the user cache folder, ``$NVSTAGE_CACHE_DIR`` or ``~/.cache/nvstage``; a path or a
    ``Cache``: that one; False: off).
    """
    t_start = time.perf_counter()
    options = options or CompileOptions()
    observer = observer or Observer()
    cwd = os.path.abspath(cwd or os.getcwd())
    src = Path(cwd, source)
    if src.is_dir():
        raise UsageError(f"{source} is a folder, not a source file",
                         hint="give the .cu file to compile")
    if not src.is_file():
        raise InputNotFound(f"no such file: {source}",
                            hint="check the path; it is taken relative to the current folder")
    if any(c in cwd for c in '"`\\'):
        raise UsageError(f"cannot build from a folder whose path contains quotes or backslashes: "
                         f"{cwd}", hint="cd to a folder with a plainer path")
    if jobs is not None and jobs < 1:
        raise UsageError(f"-j {jobs}: at least one stage must be allowed to run")
    jobs = jobs or default_jobs()
    toolkit = toolkit or find_toolkit()
    check_archs(options, toolkit.nvcc)
    store = _open_cache(cache)

    with work_folder(keep, cwd) as work:
        plan, dryrun_argv, plan_seconds = make_plan(os.fspath(source), options, toolkit, work,
                                                    cwd)
        observer.on_plan(plan)
        build = Build(str(src), options, toolkit, cwd, plan, dryrun_argv, plan_seconds, [],
                      0.0, str(work) if keep is not None else None,
                      _final_output(plan, cwd), jobs=jobs)
        graph = build_graph(plan)
        ctx = _Context(plan, graph, stage_env(plan), cwd, str(work), toolkit, store, t_start)
        finish(build, work, t_start, running=True)
        runs: dict[int, StageRun] = {}
        try:
            failed = _schedule(graph, ctx, jobs, observer, runs)
        except KeyboardInterrupt as e:  # Ctrl-C, or a signal under proc.handle_signals
            # The manifest lists what this build finished; no reader may take it for whole.
            build.runs = [runs[i] for i in sorted(runs)]
            build.status = "interrupted"
            build.error = {"error": type(e).__name__, "hint": None,
                           "message": f"the build stopped before every stage ran ({e})"}
            with contextlib.suppress(OSError):
                finish(build, work, t_start)
            raise
        finally:
            ctx.close()
        build.runs = [runs[i] for i in sorted(runs)]
        build.critical_path, build.critical_path_seconds = graph.critical_path(
            {i: runs[i].seconds if i in runs else 0.0 for i in graph.stages})
        if store is not None:
            build.cache = {"dir": str(store.root), **ctx.counters.to_json()}
        if failed:
            stage = failed.stage
            err = StageFailed(
                stage_index=stage.index, stage_kind=stage.kind.value, tool=stage.tool,
                argv=stage.argv, returncode=failed.returncode, stdout=failed.stdout,
                stderr=failed.stderr, cwd=cwd, env_overrides=_repro_env(plan, stage),
                keep_dir=build.keep_dir,
            )
            build.status, build.error = "failed", err.to_json()
            finish(build, work, t_start)
            raise err
        finish(build, work, t_start)
        return build


@contextlib.contextmanager
def work_folder(keep: str | os.PathLike | None, cwd: str,
                prefix: str = "nvstage-") -> Iterator[Path]:
    """The folder a build writes its intermediate files to.

    ``keep`` (relative to ``cwd``) is created if needed and locked for the build: a second
    build given the same folder at once would overwrite the first one's files mid-build, so it
    is refused. Without ``keep``: a new temporary folder, removed afterwards.
    """
    if keep is None:
        work = Path(tempfile.mkdtemp(prefix=prefix))
        try:
            yield work
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return
    work = Path(cwd, keep).resolve()
    try:
        work.mkdir(parents=True, exist_ok=True)
        fd = os.open(work, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as e:
        raise UsageError(f"cannot use {keep} as the keep folder: {e.strerror}",
                         hint="give a folder you can write to") from e
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"another nvstage build is using the keep folder {keep} right now",
                             hint="give each concurrent build its own --keep folder") from None
        yield work
    finally:
        os.close(fd)  # releases the lock


def finish(build: Build, work: Path, t_start: float, *, running: bool = False) -> None:
    """Stop the build's clock and, when the folder is kept, write its manifest beside it.

    ``running``: a manifest with status "running", written before the first stage. Should
    the build stop part way (a signal, a crash), the folder's earlier "ok" manifest must not
    vouch for a mix of old and new files.
    """
    build.wall_seconds = time.perf_counter() - t_start
    if build.keep_dir is not None:
        doc = build.to_json()
        if running:
            doc["status"] = "running"
        write_json_atomic(work / MANIFEST, doc)


def default_jobs() -> int:
    """The cores this process may run on (affinity and cgroup cpusets included)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _open_cache(cache: bool | str | os.PathLike | Cache) -> Cache | None:
    """The cache a build uses, made and marked when new. Raises ``CacheError`` for a bad
    size or a folder that cannot be nvstage's (a file, somebody else's folder): a build
    silently uncached there would look like a working cache."""
    if cache is False or cache is None:
        return None
    store = cache if isinstance(cache, Cache) else Cache(None if cache is True else cache)
    try:
        return store.open()
    except CacheError as e:
        # A read-only home is no reason to fail a build nobody asked to cache anywhere in
        # particular; a folder the user named, a file or somebody's folder is.
        cause = e.__cause__
        if store.default and isinstance(cause, OSError) and \
                cause.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return None
        raise


def _schedule(graph: Graph, ctx: _Context, jobs: int, observer: Observer,
              runs: dict[int, StageRun]) -> StageRun | None:
    """Run every stage once its inputs exist, at most ``jobs`` at a time.

    Ready stages start longest-remaining-chain first (plan order with one job, as nvcc).
    After a failure nothing new starts; the stages already running are waited for.
    The observer hears from this thread only (see ``Observer``).
    Fills ``runs`` by index as stages finish (an interrupted build keeps what it did);
    returns the failing run with the lowest index, if any. An exception here (Ctrl-C, a
    signal) ends the running stages' tools before the pool waits for them.
    """
    after = graph.dependents()
    waiting = {i: len(ds) for i, ds in graph.deps.items()}
    rank = graph.bottom_levels() if jobs > 1 else {i: 0.0 for i in graph.stages}
    ready = [(-rank[i], i) for i, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    failures: list[StageRun] = []

    # The scope exits first: on an exception its tools end, so the pool's wait is short.
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="nvstage-stage") as pool, \
            proc.tool_scope():
        running: dict[Future, int] = {}
        while ready or running:
            while ready and len(running) < jobs and not failures:
                _, i = heapq.heappop(ready)
                observer.on_stage_start(graph.stages[i])
                # Under the scope's context: its tools are the ones this build may end.
                running[pool.submit(contextvars.copy_context().run, ctx.run,
                                    graph.stages[i])] = i
            if not running:
                break
            # A timeout: a signal the kernel hands to a worker thread only sets a flag, and
            # the main thread runs Python's handler when it next wakes.
            done, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                i = running.pop(fut)
                run = fut.result()
                runs[i] = run
                observer.on_stage_end(run)
                if not run.ok:
                    failures.append(run)
                    continue
                for j in after[i]:
                    waiting[j] -= 1
                    if waiting[j] == 0:
                        heapq.heappush(ready, (-rank[j], j))
    return min(failures, key=lambda r: r.stage.index, default=None)


def make_plan(source: str, options: CompileOptions, toolkit: Toolkit, work: Path,
              cwd: str) -> tuple[Plan, list[str], float]:
    """Ask nvcc for its plan with the same flags, and parse it.

    ``source`` is passed as the user wrote it (relative stays relative): nvcc derives
    ``__FILE__`` and its diagnostics from it, and what we build must be what nvcc builds.
    """
    # A name that starts with '-' is spelt ./-dash.cu, or nvcc (and its tools) read it as an
    # option; the CLI's path type drops the "./" the user wrote. nvcc still derives -dash.o
    # from it. nvcc's own check of the PTX it wrote (ptxas -arch=compute_90 -dash.ptx) fails
    # on the derived name, plain nvcc too: that name is given as ./-dash.ptx instead.
    output = options.output
    if not output and options.stop == "ptx" and os.path.basename(source).startswith("-"):
        output = os.path.splitext(os.path.basename(source))[0] + ".ptx"
    source, output = (os.path.join(os.curdir, p) if p and p.startswith("-") else p
                      for p in (source, output))
    ph = _Placeholders()
    argv = [toolkit.nvcc, "--dryrun", "--keep", "--keep-dir", ph.sub(str(work))]
    argv += _sub_options(options, ph)
    argv.append(ph.sub_path(source))
    if output:
        argv += ["-o", ph.sub_path(output)]
    try:
        cp = proc.run(argv, cwd=cwd, timeout=120)
    except proc.ToolMissing as e:
        raise ToolkitError(str(e), hint="check --nvcc / $NVSTAGE_NVCC") from e
    if cp.returncode != 0:
        msg = "\n".join(line for line in (cp.stderr + cp.stdout).splitlines()
                        if not line.startswith("#$ ")).strip()
        said = ph.restore(msg) or f"exit {cp.returncode}"
        raise PlanError(f"nvcc rejected the build: {said}",
                        hint="check the flags; nvcc's own message is above")
    plan = ph.restore_plan(parse_dryrun(cp.stderr))
    _resolve_tools(plan)
    _check_fatbinary_names(plan)
    shown = [ph.restore(a) for a in argv]
    return plan, shown, cp.seconds


def _resolve_tools(plan: Plan) -> None:
    """Name each stage's program by its full path, found on the PATH nvcc's plan sets.

    The manifest then says exactly which binary ran, and a reproduction needs no PATH.
    """
    search = plan.variables.get("PATH", os.environ.get("PATH", ""))
    for s in plan.runnable:
        if os.sep not in s.argv[0]:
            found = shutil.which(s.argv[0], path=search)
            if found:
                s.argv[0] = os.path.normpath(found)


def _check_fatbinary_names(plan: Plan) -> None:
    # fatbinary splits --image3=kind=..,file=PATH on commas and drops double quotes itself, so
    # such names fail there (plain nvcc fails too); say so before any stage runs.
    for s in plan.runnable:
        if s.kind in (StageKind.FATBINARY, StageKind.DLINK_FATBINARY):
            for p in s.inputs:
                if '"' in p or "," in p:
                    raise UsageError(
                        f"fatbinary cannot take a file name containing a double quote or a "
                        f"comma: {p}",
                        hint="rename the file (or the --keep-dir folder); nvcc fails on it too")


# Options whose value nvcc opens or runs itself: a placeholder there names nothing.
_NVCC_READS = frozenset({"-ccbin", "--compiler-bindir", "-optf", "--options-file"})
# Suffixes nvcc takes as inputs: such a word keeps its suffix (nvcc picks the phase by it).
_INPUT_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c", ".o", ".obj", ".a", ".so", ".ptx",
                   ".cubin", ".fatbin", ".ltoir", ".gpu", ".ii")


def _sub_options(options: CompileOptions, ph: _Placeholders) -> list[str]:
    out: list[str] = []
    for a in options.nvcc_args():
        prev = out[-1] if out else ""
        opt = a.split("=", 1)[0]
        if _safe(a):
            out.append(a)
        elif prev in _NVCC_READS or opt in _NVCC_READS:
            raise UsageError(
                f"nvcc reads {a!r} itself, and its plan cannot carry a path with blanks, "
                f"quotes, $ or backslashes", hint="use a path without them (a symlink will do)")
        elif not a.startswith("-"):
            # An input file keeps its suffix; any other value word (of -I DIR, -D NAME=VALUE,
            # -Xcompiler LIST) is swapped piece by piece, so nvcc still splits lists on commas.
            out.append(ph.sub_path(a) if a.endswith(_INPUT_SUFFIXES) else _pieces(a, ph))
        elif a[:2] in ("-D", "-I", "-U", "-L") and len(a) > 2:
            out.append(a[:2] + ph.sub(a[2:]))
        elif "=" in a:
            out.append(f"{opt}={_pieces(a.split('=', 1)[1], ph)}")
        else:
            out.append(_pieces(a, ph))
    return out


def _pieces(value: str, ph: _Placeholders) -> str:
    """Each unsafe comma-separated piece replaced: ``-Wl,-rpath,/a b`` keeps its commas."""
    return ",".join(p if _safe(p) else ph.sub(p) for p in value.split(","))


def stage_env(plan: Plan) -> dict[str, str]:
    """The environment nvcc gives its tools: ours, overlaid with the plan's NAME=value lines."""
    env = dict(os.environ)
    env.update(plan.variables)
    return env


def _repro_env(plan: Plan, stage: Stage) -> dict[str, str]:
    """The part of the plan's environment a stage needs to be rerun by hand."""
    if stage.kind in (StageKind.CICC, StageKind.PTXAS, StageKind.DEVICE_LINK):
        return {k: v for k, v in plan.variables.items()
                if k in ("LD_LIBRARY_PATH", "NVVMIR_LIBRARY_DIR")}
    return {}


def run_stage(stage: Stage, env: dict[str, str], cwd: str, t0: float,
              extra_args: tuple[str, ...] = ()) -> StageRun:
    """Run one stage (a cleanup is done here, in-process) and record what it produced.

    ``extra_args`` go after the plan's arguments without becoming part of the stage (the
    cache's ``-MD -MF`` for the host compiler). ptxas always gets ``-v``: its report is kept
    in ``StageRun.resources`` (and shown only when the plan asked for it), so no reader ever
    has to run a tool again from what a manifest says.
    """
    started = time.perf_counter() - t0
    if stage.kind is StageKind.CLEANUP:
        t = time.perf_counter()
        try:
            for p in stage.inputs:
                target = Path(cwd, p)
                if target.is_file():
                    target.unlink()
        except OSError as e:
            return StageRun(stage, time.perf_counter() - t, 1, "", f"rm: {e}", started=started)
        return StageRun(stage, time.perf_counter() - t, 0, started=started)
    try:
        if stage.kind is StageKind.PTXAS and not _user_verbose(stage):
            extra_args = (*extra_args, "-v")
        cp = proc.run([*stage.argv, *extra_args], cwd=cwd, env=env)
    except proc.ToolMissing as e:
        return StageRun(stage, 0.0, 127, "", str(e), started=started)
    run = StageRun(stage, cp.seconds, cp.returncode, cp.stdout, cp.stderr, started=started)
    if cp.returncode == 0:
        run.artifacts = [Artifact.of(Path(cwd, p), stage=stage.index, arch=_arch_for(stage, p))
                         for p in stage.outputs if Path(cwd, p).is_file()]
    return run


# Stages whose outputs follow from their key. Not the final link (it searches for system
# libraries by name) nor anything unclassified.
_CACHEABLE = frozenset({
    StageKind.HOST_PREPROCESS, StageKind.CUDAFE, StageKind.DEVICE_PREPROCESS, StageKind.CICC,
    StageKind.PTXAS, StageKind.FATBINARY, StageKind.HOST_COMPILE, StageKind.DEVICE_LINK,
    StageKind.DLINK_FATBINARY, StageKind.DLINK_COMPILE})
# The host compiler's stages read headers no command line names: they use the direct mode.
_HOST_COMPILER = frozenset({StageKind.HOST_PREPROCESS, StageKind.DEVICE_PREPROCESS,
                            StageKind.HOST_COMPILE, StageKind.DLINK_COMPILE})


def _key_args(stage: Stage, paths: Paths) -> list[list[str] | None]:
    """The arguments as a key sees them: each cut at the work folder's path and, for the host
    compiler, the ``-o`` file as an empty slot (an object or .ii does not depend on its own
    name; None, which no argument can be)."""
    out: list[list[str] | None] = [paths.norm(a) for a in stage.argv[1:]]
    if stage.kind in _HOST_COMPILER:
        for n, a in enumerate(stage.argv[1:-1]):
            if a == "-o" and stage.argv[n + 2] in stage.outputs:
                out[n + 1] = None
    return out


def _libraries(stage: Stage, cwd: str) -> list[str] | None:
    """The archives a device link reads through ``-lNAME`` (nvlink searches the ``-L``
    folders in order, as a linker does); None when one is not found there."""
    dirs, names = [], []
    args = iter(stage.argv[1:])
    for a in args:
        for flag, into in (("-L", dirs), ("--library-path", dirs), ("-l", names),
                           ("--library", names)):
            if a == flag:
                into.append(next(args, ""))
            elif a.startswith(flag + "=") or (len(flag) == 2 and a.startswith(flag)):
                into.append(a[len(flag):].removeprefix("="))
            else:
                continue
            break
    found = []
    for name in names:
        path = next((p for d in dirs if os.path.isfile(p := os.path.join(cwd, d,
                                                                          f"lib{name}.a"))),
                    None)
        if path is None:
            return None
        found.append(path)
    return found


# A file the stage read that changed after (or this close before) its start may have changed
# while the tool read it: the result is not stored (ccache's "file too new"). The margin covers
# file timestamps taken from the kernel's coarse clock (one tick, at most 10 ms), and stays below
# the time nvcc --dryrun takes, so files written just before nvstage started still count.
_SETTLE_NS = 10_000_000
# Tools that may carry what they read into their outputs in another form (PTX byte lists, a
# fatbinary's C array, a linked or compressed image): the work folder's path in a file they read
# can reach their outputs where no offset finds it.
_REENCODE = frozenset({StageKind.CICC, StageKind.PTXAS, StageKind.FATBINARY,
                       StageKind.DEVICE_LINK, StageKind.DLINK_FATBINARY})
# The tools that write cudafe++'s host stub, which names its own path in a #line marker.
_STUB_WRITERS = frozenset({StageKind.CUDAFE, StageKind.CICC})
# Flags that compress debug sections, and the work folder's path in them (gcc -gz, as's).
_COMPRESS = re.compile(r"-gz|.*compress-debug-sections")


class _Context:
    """What every stage of one build shares: environment, folders, the cache and counters."""

    def __init__(self, plan: Plan, graph: Graph, env: dict[str, str], cwd: str, work: str,
                 toolkit: Toolkit, cache: Cache | None, t0: float):
        self.plan, self.graph, self.env, self.cwd = plan, graph, env, cwd
        self.work = os.path.abspath(work)
        self.toolkit, self.cache, self.t0 = toolkit, cache, t0
        self.counters = Counters()
        self._lock = threading.Lock()
        self.hasher = FileHasher(work)
        self.paths = Paths(work, cwd)
        self.where = Work(self.work)
        self._scratch: Scratch | None = None
        self._shadows: dict[tuple, str] = {}  # (headers, search folders) -> shadow digest
        self._exists = Existence()
        host_env = {k: os.environ[k] for k in HOST_ENV if k in os.environ}
        # The current folder is part of every key: nvcc gives cudafe++ and cicc the source's
        # absolute path, and outputs (module id, #line markers) depend on it.
        self.env_part = [cwd, sorted(plan.variables.items()), sorted(host_env.items())]
        # Every key is bound to this folder when a tool may write its path escaped, or when
        # what keys keep whole (the current folder, the environment) holds it: an output may
        # then hold the path where it did not come from the path.
        self._bound = not self.where.plain or mentions(self.env_part, self.work)

    def close(self) -> None:
        if self._scratch:
            self._scratch.close()
        if self.cache is not None:
            try:
                if self.counters.hits or self.counters.misses:
                    self.cache.record(self.counters)
                if self.counters.stored:
                    self.cache.evict()
            except OSError:
                pass  # bookkeeping only: never fail a build over it

    def count(self, **kw: int) -> None:
        with self._lock:
            for k, v in kw.items():
                setattr(self.counters, k, getattr(self.counters, k) + v)

    def run(self, stage: Stage) -> StageRun:
        if self.cache is None or stage.kind not in _CACHEABLE or not stage.outputs:
            return run_stage(stage, self.env, self.cwd, self.t0)
        try:
            return self._cached(stage)
        except OSError:
            # The cache folder is unusable (full disk, permissions) before the stage ran:
            # build as if it were off. (Failures after it ran are caught where they happen.)
            return run_stage(stage, self.env, self.cwd, self.t0)

    def _scratch_dir(self) -> str:
        """This build's scratch folder in the cache's tmp/, held (locked) until ``close``:
        a ``cache --clear`` meanwhile leaves it alone."""
        with self._lock:
            if self._scratch is None:
                self._scratch = self.cache.scratch()
        return self._scratch.path

    def _pinned(self, stage: Stage, looks) -> bool:
        """Whether this stage's keys must be bound to the work folder before it runs: the
        folder's path may reach an output where no offset finds it (escaped, re-encoded,
        compressed, or inside a binary whose layout follows the path's length), or as text
        that did not come from the path (a file outside the folder naming it)."""
        if self._bound or mentions(tool_identity(stage.argv[0]), self.work):
            return True
        if any(_COMPRESS.match(a) for a in stage.argv):
            return True
        return any(look is not None and look.mentions and
                   (not look.inside or look.binary or stage.kind in _REENCODE)
                   for look in looks)

    def _keys(self, parts: list, pinned: bool) -> tuple[str, ...]:
        """The keys to look under, in order: the one any folder may use (unless ``pinned``),
        then the one bound to this folder (``Cache.put`` picks between them by the outputs)."""
        bound = digest([*parts, ["at", self.work]])
        return (bound,) if pinned else (digest(parts), bound)

    def _cached(self, stage: Stage) -> StageRun:
        started = time.perf_counter() - self.t0
        t = time.perf_counter()
        paths = self.paths
        reads = self.graph.reads(stage.index)
        if stage.kind is StageKind.DEVICE_LINK:
            libs = _libraries(stage, self.cwd)
            if libs is None:  # a library we cannot find cannot be keyed: just run it
                return run_stage(stage, self.env, self.cwd, self.t0)
            reads = reads + libs
        inputs, looks = [], []
        for p in reads:
            look = self.hasher.look(paths.abs(p))
            if look is None and p in stage.inputs:
                return run_stage(stage, self.env, self.cwd, self.t0)  # let the tool complain
            inputs.append([paths.norm(p), look and look.digest])
            looks.append(look)
        # stage/3: no text stands for the work folder any more; ptxas's -v report is in stderr.
        base = ["stage/3", self.toolkit.version, stage.kind.value, tool_identity(stage.argv[0]),
                _key_args(stage, paths), self.env_part, inputs]
        pinned = self._pinned(stage, looks)
        if stage.kind in _HOST_COMPILER and not any(a.startswith("-M") for a in stage.argv):
            # A direct key bound from the start binds every key found through it.
            dkey = digest([*base, "direct/4", *([["at", self.work]] if pinned else [])])
            return self._direct(stage, dkey, reads, started, t)
        keys = self._keys(base, pinned)
        hit = self._restore(stage, keys, started, t)
        if hit is not None:
            return hit
        since = time.time_ns()
        run = run_stage(stage, self.env, self.cwd, self.t0)
        self.count(misses=1)
        if run.ok and self._settled(reads, since):
            # The stub's marker naming itself is the path's own doing only while nothing the
            # stage read spelt the path (a marker copied from an input is the input's).
            self._store(stage, keys, run, own_markers=stage.kind in _STUB_WRITERS and
                        not any(look is not None and look.mentions for look in looks))
        return run

    def _direct(self, stage: Stage, dkey: str, reads: list[str], started: float,
                t: float) -> StageRun:
        """A host-compiler stage: found through the headers it read last time, or run with
        ``-MD`` and stored under the headers it reads now (ccache's direct mode). A header set
        matches only while no new file would hide one of its headers (``headers.py``)."""
        paths = self.paths
        builtin = builtin_dirs(stage.argv, self.env, self.cache)
        search = include_search(stage.argv, self.cwd, self.env, builtin)
        fixed = [*builtin, self.toolkit.root]
        for headers, shadow in self.cache.header_sets(dkey):
            named = [paths.real(name) for name in headers]
            if None in named:
                continue
            files = [paths.abs(f) for f in named]
            looks = [self.hasher.look(f) for f in files]
            if all(look is not None and look.digest == sha
                   for look, sha in zip(looks, headers.values())) and \
                    self._shadow(files, search, fixed) == shadow:
                keys = self._keys([dkey, sorted(headers.items())], self._pinned(stage, looks))
                hit = self._restore(stage, keys, started, t)
                if hit is not None:
                    self.count(direct_hits=1)
                    return hit
        depfile = os.path.join(self._scratch_dir(), f"{stage.index}.d")
        since = time.time_ns()
        run = run_stage(stage, self.env, self.cwd, self.t0, ("-MD", "-MF", depfile))
        self.count(misses=1)
        if not run.ok:
            return run
        try:
            names = parse_depfile(Path(depfile).read_text(errors="replace"))
        except OSError:
            return run
        looks = [self.hasher.look(paths.abs(n)) for n in names]
        headers = {paths.name(n): look and look.digest for n, look in zip(names, looks)}
        # The places a hiding file could be, as they are now (not the build's memory): one
        # that appeared while the compiler ran may or may not have been seen, so the result
        # is not stored (ccache's "file too new", for the places nobody read). Time macros
        # are looked for in the user's files only: the compiler's and toolkit's name none.
        files = [paths.abs(n) for n in names]
        shown = present(shadow_candidates(files, search, self.cwd, fixed))
        trees = Trees(fixed)
        if all(headers.values()) and self._settled([*reads, *names, *shown], since) and \
                not uses_time_macros(f for f in files if f not in trees):
            self._store(stage, self._keys([dkey, sorted(headers.items())],
                                          self._pinned(stage, looks)), run)
            with contextlib.suppress(OSError):  # the stage ran: never run it again over this
                self.cache.add_header_set(dkey, headers,
                                          digest([search_layout(search), shown]))
        return run

    def _shadow(self, files: list[str], search: list[str], fixed: list[str]) -> str:
        """The digest of the places where a new file would hide one of these headers, once
        per build for a header set: every arch's preprocessing asks about the same ones."""
        key = (tuple(files), tuple(search))
        state = self._shadows.get(key)
        if state is None:
            state = self._shadows[key] = digest([search_layout(search), present(
                shadow_candidates(files, search, self.cwd, fixed), self._exists)])
        return state

    def _settled(self, reads: list[str], since_ns: int) -> bool:
        """No file the stage read outside the work folder changed since it started."""
        for p in reads:
            path = os.path.abspath(self.paths.abs(p))
            if path.startswith(self.hasher.volatile):
                continue  # written by this build's earlier stages, before this one started
            try:
                st = os.stat(path)
            except OSError:
                return False
            if max(st.st_mtime_ns, st.st_ctime_ns) >= since_ns - _SETTLE_NS:
                return False
        return True

    def _restore(self, stage: Stage, keys: tuple[str, ...], started: float,
                 t: float) -> StageRun | None:
        """The first entry found under ``keys``, copied into place with this build's work
        folder at its sites; None when there is none (a damaged one is dropped)."""
        for key in keys:
            entry = self.cache.get(key, self.where)
            if entry is None:
                continue
            restored = None
            if entry is not False:
                try:  # each file is stored under its place in the stage's outputs
                    dests = [self.paths.abs(stage.outputs[int(f["name"])])
                             for f in entry.files]
                except (ValueError, IndexError, KeyError, TypeError):
                    dests = None
                if dests is not None:
                    restored = self.cache.restore(entry, dests, self.where)
            if restored is None:  # damaged: drop it; the stage runs and stores a good one
                self.cache.discard(key)
                self.count(corrupt=1)
                continue
            return self._hit(stage, entry, restored, started, t)
        return None

    def _hit(self, stage: Stage, entry, restored, started: float, t: float) -> StageRun:
        self.count(hits=1)
        run = StageRun(stage, time.perf_counter() - t, 0, entry.stdout, entry.stderr,
                       started=started, cached=True)
        run.artifacts = [Artifact(os.path.abspath(d), kind_of(d),
                                  _arch_for(stage, d) or arch_of(d), size, sha, stage.index)
                         for d, (sha, size) in restored.files.items()]
        return run

    def _store(self, stage: Stage, keys: tuple[str, ...], run: StageRun, *,
               own_markers: bool = False) -> None:
        """Store under ``keys[0]``, or under the key bound to this folder (the last) when
        the outputs hold its path where another folder could not trust it (``Cache.put``)."""
        slots = [n for n, p in enumerate(stage.outputs) if Path(self.cwd, p).is_file()]
        try:
            if self.cache.put(keys[0], [self.paths.abs(stage.outputs[n]) for n in slots],
                              names=[str(n) for n in slots], stdout=run.stdout,
                              stderr=run.tool_stderr, seconds=run.seconds,
                              about={"kind": stage.kind.value, "arch": stage.arch},
                              work=self.where, pinned=keys[-1], own_markers=own_markers):
                self.count(stored=1)
        except OSError:
            pass  # an output vanished or the disk is full: the build itself is fine


def _arch_for(stage: Stage, path: str) -> str | None:
    if stage.kind in (StageKind.CICC, StageKind.PTXAS, StageKind.DEVICE_LINK,
                      StageKind.DEVICE_PREPROCESS):
        return stage.arch
    return None


def _final_output(plan: Plan, cwd: str) -> str | None:
    """The file the user asked for: the last stage's main output."""
    for s in reversed(plan.runnable):
        if s.outputs:
            return str(Path(cwd, s.outputs[0]))
    return None
