"""The pipeline's driver (``compiler/pipeline/``): run nvcc's own plan stage by stage, time each
stage, record every artifact, keep or clean.

nvcc is asked for its plan with the user's flags and ``--dryrun``. For a kept folder, with
``--keep --keep-dir DIR`` too, so the intermediate files get the names people read
(``vadd.ptx``, ``vadd.sm_90.cubin``). Otherwise as plain nvcc plans (``tmpxft_...`` names) in
a temporary folder removed afterwards: the names reach the object, which is then plain nvcc's
byte for byte.
The stages then run as a graph (``scheduler``), through the stage cache (``cache.stage``),
in a locked work folder (``workdir``), and make one ``Build`` record (``record``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import stat
import sys
import time
from pathlib import Path

from nvstage import proc, fsio
from nvstage.files import kind_of_mode, shown_path, read_regular
from nvstage.compiler import dist
from nvstage.compiler.cache.local import Cache
from nvstage.compiler.cache.stage.lazy import Diverged
from nvstage.compiler.cache.stage.stage_cache import Runner, StageCache, open_cache
from nvstage.compiler.nvcc.graph import build_graph
from nvstage.compiler.pipeline.observer import Observer
from nvstage.compiler.pipeline.planning import Ahead, make_plan, plan_words
from nvstage.compiler.pipeline.request import Callbacks, Planned, Request
from nvstage.compiler.nvcc.options import CompileOptions, check_archs
from nvstage.compiler.nvcc.plan import Plan, Stage, StageKind
from nvstage.compiler.nvcc.ptxas_report import with_figures
from nvstage.compiler.manifest.model import MANIFEST, Artifact, Build, StageRun, stage_arch
from nvstage.compiler.pipeline.scheduler import default_jobs, schedule
from nvstage.compiler.toolkit.locate import Toolkit, find_toolkit, missing_header_hint
from nvstage.compiler.pipeline.workdir import clear_planted, finish, finish_interrupted, work_folder
from nvstage.errors import (InputNotFound, NvstageError, PlanError, StageFailed, ToolMissing,
                            UsageError, WriteError)
from nvstage.compiler.buildlog.current import log_folder
from nvstage.compiler.nvcc.depfile import depfile_options, marked_files, render_marked
from nvstage.compiler.nvcc.grammar import grammar_for, last_value


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
    on_built=None,
    ahead: Ahead | None = None,
) -> Build:
    """Compile ``source`` as nvcc would, one stage at a time.

    ``keep``: a folder for every intermediate file and ``stages.json``; without it nothing but
    the requested output is left behind. Raises ``StageFailed`` when a tool fails (its partial
    manifest is written first when ``keep`` is given). ``jobs``: how many stages may run at
    once (None: one per core available); ``cache``: reuse stages whose inputs are unchanged
    (True: the user cache folder, ``$NVSTAGE_CACHE_DIR`` or ``~/.cache/nvstage``; a path or a
    ``Cache``: that one; False: off). ``on_built``: as ``compile_command``'s. ``ahead``: the
    plan asked before this was called (``planning.ask_ahead``), taken if it is this build's.
    """
    t_start = time.perf_counter()
    options = options or CompileOptions()
    observer = observer or Observer()
    cwd = os.path.abspath(cwd or os.getcwd())
    src = Path(cwd, source)
    check_source(src, source)
    if options.output:
        check_output_name(Path(cwd, options.output), options.output)
    if any(c in cwd for c in '"`\\'):
        raise UsageError(f"cannot build from a folder whose path contains quotes or backslashes: "
                         f"{cwd}", hint="cd to a folder with a plainer path")
    if jobs is not None and jobs < 1:
        raise UsageError(f"-j {jobs}: at least one stage must be allowed to run")
    jobs = jobs or default_jobs()
    toolkit = toolkit or find_toolkit()
    store = open_cache(cache)

    with work_folder(keep, cwd) as work:
        try:
            plan, dryrun_argv, plan_seconds = make_plan(os.fspath(source), options, toolkit,
                                                        work, cwd, remember=store is not None,
                                                        kept=keep is not None, ahead=ahead)
        except PlanError:
            # nvcc refused the plan: an arch it does not know is said in nvstage's words,
            # with the ones it does (asked only now: two nvcc processes a build would pay).
            check_archs(options, toolkit.nvcc)
            raise
        trace = _trace_request([*options.nvcc_args(), os.fspath(source)], options.output,
                               toolkit)
        depfile = _depfile_spec(options.nvcc_args(), os.fspath(source), toolkit) \
            if any(st.kind is StageKind.DEPFILE for st in plan.stages) else None
        request = Request(str(src), options, toolkit, cwd, keep=keep, jobs=jobs,
                          depfile=depfile, trace=trace)
        return _build(Planned(plan, dryrun_argv, plan_seconds), request, work, store,
                      Callbacks(observer, on_built), t_start=t_start)


def compile_command(
    args: list[str],
    *,
    toolkit: Toolkit,
    cwd: str | os.PathLike | None = None,
    source: str,
    depfile: tuple[str, bool, bool] | None = None,
    jobs: int = 1,
    slots=None,
    cache: bool | str | os.PathLike | Cache = True,
    callbacks: Callbacks | None = None,
    ahead: Ahead | None = None,
) -> Build:
    """Run an nvcc command line (``args``, as a build system gave it, without nvcc) stage by
    stage: the launcher's build. nvcc plans it with its words unchanged (and ``--dryrun``, its
    $TMPDIR a temporary folder); ``source`` is its one input, and
    ``depfile`` ``(target, -MMD, -MP)`` how to write a ``-MD`` dependency file.
    ``slots``: job slots lent by the build (``jobserver.JobServer``), up to ``jobs``.
    ``callbacks`` (``request.Callbacks``): ``on_built`` is where the launcher records what a
    later hit needs; with ``later`` the resident server's child answers its client first
    (``compiler/launcher/resident/server.py``). ``ahead``: as ``compile``'s."""
    t_start = time.perf_counter()
    callbacks = callbacks or Callbacks()
    later = callbacks.later
    cwd = os.path.abspath(cwd or os.getcwd())
    if any(c in cwd for c in '"`\\'):
        raise UsageError(f"cannot build from a folder whose path contains quotes or backslashes: "
                         f"{cwd}")
    store = open_cache(cache)
    folder = work_folder(None, cwd)
    work = folder.__enter__()
    try:
        plan, dryrun_argv, plan_seconds = plan_words(list(args), toolkit, work, cwd,
                                                     remember=store is not None, kept=False,
                                                     ahead=ahead, source=source)
        mine: list = []
        request = Request(str(Path(cwd, source)), CompileOptions(extra=tuple(args)), toolkit,
                          cwd, jobs=jobs, depfile=depfile,
                          trace=_trace_request(list(args), None, toolkit, cwd=cwd))
        build = _build(Planned(plan, dryrun_argv, plan_seconds), request, work, store,
                       dataclasses.replace(callbacks, later=mine if later is not None else None),
                       t_start=t_start, slots=slots,
                       direct=callbacks.on_built is None)  # the whole command's entry answers
    except BaseException:
        folder.__exit__(*sys.exc_info())
        raise

    def tail():
        try:
            for fn in mine:
                fn()
        finally:
            folder.__exit__(None, None, None)

    if later is None:
        tail()
    else:
        later.append(tail)
    return build


def _build(planned: Planned, request: Request, work: Path, store, callbacks: Callbacks, *,
           t_start: float, slots=None, direct: bool = True) -> Build:
    """Run a planned build's stages in ``work``: the part ``compile`` and ``compile_command``
    share. ``slots``: ``compile_command``'s; ``direct``: ``StageCache``'s."""
    plan, dryrun_argv, plan_seconds = planned.plan, planned.argv, planned.seconds
    source, options, toolkit, cwd = request.source, request.options, request.toolkit, request.cwd
    keep, jobs, depfile, trace = request.keep, request.jobs, request.depfile, request.trace
    observer, on_built, later = callbacks.observer, callbacks.on_built, callbacks.later
    check_outputs(plan, cwd)
    if keep is not None:
        removed = clear_planted(work, [o for s in plan.runnable for o in s.outputs]
                                + [MANIFEST], cwd)
        if removed:  # said with nvcc's own messages, and kept in the manifest
            plan.messages.append(
                f"nvstage: removed {', '.join(removed)} from the keep folder before "
                "building: a symbolic link, FIFO or device there is never written through")
    observer.on_plan(plan)
    build = Build(source, options, toolkit, cwd, plan, dryrun_argv, plan_seconds, [],
                  0.0, str(work) if keep is not None else None,
                  _final_output(plan, cwd), jobs=jobs)
    graph = build_graph(plan)
    # The cache runs stages through run_stage without importing the driver (and a test
    # may stand in for it).
    tracer = None
    if trace is not None:  # a traced build only: the trace's modules stay off the cold path
        from nvstage.compiler.nvcc.time_trace import Tracer

        tracer = Tracer(trace, str(work), plan.runnable)
    # One $TMPDIR for the build's tools, as nvcc gives its tools one, not one each: a folder
    # made, marked and removed per tool was about 0.8 ms of CPU a tool. What an ended tool
    # leaves there goes with the folder, once every tool of the build was waited for.
    with proc.tool_folder() as tools_tmp:
        runner = functools.partial(run_stage, depfile=depfile, tracer=tracer, tmpdir=tools_tmp)
        stages = StageCache(plan, graph, Runner(runner, stage_env(plan), cwd, t_start,
                                                traced=tracer is not None), str(work),
                            toolkit, store, keep=keep is not None, direct=direct)
        finish(build, work, t_start, running=True)
        runs: dict[int, StageRun] = {}
        try:
            failed = schedule(graph, lambda stage: with_figures(stages.run(stage)), jobs,
                              observer, runs, slots=slots,
                              remote=dist.remote_lane(stages.env, cwd))
            if later is None or failed:
                stages.settle()
        except KeyboardInterrupt as e:  # Ctrl-C, or a signal under proc.handle_signals
            stages.close()
            build.runs = [runs[i] for i in sorted(runs)]
            finish_interrupted(build, work, t_start, e)
            raise
        except Diverged:
            # A file made again was not the one its entry recorded: the cached results may
            # not fit together. The build runs again, all of it, without the cache.
            stages.close()
            return _build(planned, request, work, None, callbacks, t_start=t_start,
                          slots=slots, direct=direct)
        except BaseException:
            stages.close()
            raise
    if later is None or failed:
        stages.close()
    build.runs = [runs[i] for i in sorted(runs)]
    build.critical_path, build.critical_path_seconds = graph.critical_path(
        {i: runs[i].seconds if i in runs else 0.0 for i in graph.stages})
    if store is not None:
        build.cache = {"dir": str(store.root), **stages.counters.to_json()}
    if failed:
        stage = failed.stage
        err = StageFailed(
            stage_index=stage.index, stage_kind=stage.kind.value, tool=stage.tool,
            argv=stage.argv, returncode=failed.returncode, stdout=failed.stdout,
            stderr=failed.stderr, cwd=cwd, env_overrides=_repro_env(plan, stage),
            keep_dir=build.keep_dir,
        )

        err.hint = missing_header_hint(failed.stderr, toolkit.release) or err.hint
        build.status, build.error = "failed", err.to_json()
        finish(build, work, t_start)
        raise err
    if tracer is not None and not trace.own:
        written = _write_trace(tracer, build, cwd)
        build.time_trace = written.path
        build.time_trace_record = _trace_record(tracer, written)
    elif tracer is not None:  # nvstage's own: bookkeeping, never a failed build
        with contextlib.suppress(OSError):
            build.time_trace_record = _trace_record(tracer, tracer.write(build.runs, cwd))
    finish(build, work, t_start)
    # Bookkeeping after the answer reads the outputs as they are now: the build tool may
    # consume one first (Ninja removes a -MF dependency file once it has read it).
    taken = outputs_now(build, cwd, str(work)) \
        if later is not None and on_built is not None and store is not None else None

    def tail():
        if later is not None:  # what the stages that ran stored, and the cache's figures
            stages.settle()
            stages.close()
            if store is not None:
                build.cache = {"dir": str(store.root), **stages.counters.to_json()}
        if on_built is not None:
            seen = stages.seen() if store is not None else None
            if seen is not None and taken is not None:
                seen = dataclasses.replace(seen, taken=taken)
            on_built(build, str(work), seen)

    if later is None:
        tail()
    else:
        later.append(tail)
    return build


def outputs_now(build, cwd: str, work: str) -> dict[str, tuple[bytes, bool]]:
    """The build's outputs outside the work folder as they are now: bytes, and whether each is
    executable (``cache/command/entry.outputs_of``); those too large or unreadable are left out."""
    from nvstage.compiler.cache.command.entry import MAX_OUTPUT, outputs_of

    out = {}
    for rel in outputs_of(build, cwd, work):
        p = os.path.join(cwd, rel)
        data = fsio.read_or_none(p, MAX_OUTPUT)
        with contextlib.suppress(OSError):
            if data is not None:
                out[rel] = (data, bool(os.stat(p).st_mode & 0o111))
    return out


def without_temp_keep(err, command: list[str]):
    """``err`` (a failed stage) from a build whose keep folder was temporary and is removed
    on the way out: it must not send the user there. The hint gives instead ``command``
    (an ``nvstage compile`` of the same source with the same flags) with ``--keep-dir``."""
    import shlex

    err.keep_dir = None
    err.hint = ("the build ran in a temporary folder, now removed with what the earlier "
                "stages produced (the files the command above names); to keep them: "
                f"{shlex.join(command)} --keep-dir DIR")
    return err


def check_source(src: Path, given) -> None:
    """``src`` is a regular file, or one line says what it is instead: a FIFO or a device is
    not "no such file", and a name the system cannot look up (too long) is no traceback."""
    try:
        mode = os.stat(src).st_mode
    except FileNotFoundError:
        raise InputNotFound(f"no such file: {shown_path(given)}",
                            hint="check the path; it is taken relative to the current "
                                 "folder") from None
    except OSError as e:  # too long, a loop of links, no access to a folder above
        raise UsageError(f"cannot use the source {shown_path(given)}: {e.strerror or e}"
                         ) from None
    except ValueError:  # a NUL in the name: no file can have it (a library call's string)
        raise UsageError(f"the source name {shown_path(given)!r} holds a NUL byte",
                         hint="no file name can hold one: check how it was made") from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"{shown_path(given)} is a folder, not a source file",
                         hint="give the .cu file to compile")
    if not stat.S_ISREG(mode):
        raise UsageError(f"{shown_path(given)} is {kind_of_mode(mode)}, not a regular file: "
                         "nvstage compiles files", hint="copy what it holds into a .cu file "
                                                        "and give that")


def check_output_name(out: Path, given: str) -> None:
    """``-o``'s name can be made: a name too long for the file system, or one under a file,
    is one line here instead of a tool's failure after the build ran."""
    try:
        mode = os.stat(out).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise UsageError(f"cannot write -o {shown_path(given)}: {e.strerror or e}") from None
    if stat.S_ISDIR(mode):
        raise UsageError(f"-o {shown_path(given)} is a folder",
                         hint="give the output file's name")


def check_outputs(plan: Plan, cwd: str) -> None:
    """No stage may write over a file the build reads and does not make itself (the source,
    an object to link): ``-o c.cu`` would replace the source with the binary. nvcc itself
    does so; gcc refuses, and nvstage knows the plan before anything runs."""
    made: set[str] = set()  # what the stages so far (in plan order) write
    inputs = {}  # (device, inode) -> a file a stage reads that no earlier stage made
    for s in plan.runnable:
        if s.kind is not StageKind.CLEANUP:  # its "inputs" are leftovers it deletes
            for i in s.inputs:
                if os.path.abspath(os.path.join(cwd, i)) not in made:
                    with contextlib.suppress(OSError):
                        st = os.stat(os.path.join(cwd, i))
                        inputs[(st.st_dev, st.st_ino)] = i
        made.update(os.path.abspath(os.path.join(cwd, o)) for o in s.outputs)
    if not inputs:
        return
    for s in plan.runnable:
        for o in s.outputs:
            try:
                st = os.stat(os.path.join(cwd, o))
            except OSError:
                continue
            found = inputs.get((st.st_dev, st.st_ino))
            if found is not None:
                same = "" if os.path.abspath(os.path.join(cwd, o)) == \
                    os.path.abspath(os.path.join(cwd, found)) else f" ({shown_path(found)})"
                raise UsageError(f"the build would write {shown_path(o)} over its own input"
                                 f"{same}: stage {s.index} ({s.kind.value}) writes it",
                                 hint="give -o another name (nvcc would overwrite the input)")


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


def _depfile_spec(words: list[str], source: str,
                  toolkit: Toolkit) -> tuple[str, bool, bool] | None:
    """(target, -MMD, -MP) of the dependency file ``words`` ask nvcc for."""
    return depfile_options(grammar_for(toolkit.nvcc).parse(words), source)


def _write_depfile(stage: Stage, cwd: str, spec: tuple[str, bool, bool],
                   marks=None) -> tuple[int, str]:
    """nvcc's "-- Filter Dependencies --": the dependency file from the preprocessed outputs
    (``depfile.py``); ``marks(path)``: what a preprocessed output the cache left unwritten
    names, as its entry recorded it (None: read the file). (exit status, message)."""
    target, nonsystem, phony = spec
    try:
        lists = []
        for p in stage.inputs:
            got = marks(str(Path(cwd, p))) if marks is not None else None
            lists.append(got if got is not None else
                         marked_files(read_regular(Path(cwd, p))))
        text = render_marked(target, lists, nonsystem=nonsystem, phony=phony)
        if not stage.outputs:
            return 1, "nvstage: a dependency file with no name to write"
        with open(Path(cwd, stage.outputs[0]), "w", encoding="utf-8",
                  errors="surrogateescape") as f:
            f.write(text)
    except (OSError, NvstageError) as e:
        return 1, f"nvstage: cannot write the dependency file: {getattr(e, 'message', e)}"
    return 0, ""


def run_stage(stage: Stage, env: dict[str, str], cwd: str, t0: float,
              extra_args: tuple[str, ...] = (),
              depfile: tuple[str, bool, bool] | None = None, marks=None,
              tracer=None, tmpdir: str | None = None) -> StageRun:
    """Run one stage (a cleanup is done here, in-process) and record what it produced.

    ``extra_args`` go after the plan's arguments without becoming part of the stage (the
    cache's ``-MD -MF`` for the host compiler); ``marks``: ``_write_depfile``'s; ``tmpdir``:
    the tool's $TMPDIR (``proc.run``'s). ptxas runs as
    the plan says: a ``-v`` of
    nvstage's own would be written into the cubin's note of ptxas's options. Its figures are
    read from the cubin instead (``ptxas_report.with_figures``).
    """
    started = time.perf_counter() - t0
    if stage.kind is StageKind.DEPFILE:
        t = time.perf_counter()
        code, msg = _write_depfile(stage, cwd, depfile or ("", False, False), marks)
        run = StageRun(stage, time.perf_counter() - t, code, "", msg, started=started)
        if code == 0:
            run.artifacts = [Artifact.of(Path(cwd, p), stage=stage.index) for p in stage.outputs]
        return run
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
    # NVSTAGE_DIST: cicc and ptxas on a farm (compiler/dist); None: run here as always.
    # -fdevice-time-trace: cicc's and ptxas's words, not part of the stage (a traced build's
    # keys say it was traced: Runner.traced).
    traced, more_env = tracer.words(stage, started) if tracer is not None else ((), {})
    if traced:
        extra_args, env = (*extra_args, *traced), {**env, **more_env}
    # NVSTAGE_DIST: cicc and ptxas on a farm; not a traced one, whose part is written here.
    remote, where = (None, None) if traced else \
        dist.run_distributed(stage, env, cwd, extra_args)
    try:
        # A stage run again after its build (a hit's marks replayed in the tail) finds the
        # build's tools folder gone: it gets one of its own.
        cp = remote or proc.run([*stage.argv, *extra_args], cwd=cwd, env=env,
                                tmpdir=tmpdir if tmpdir and os.path.isdir(tmpdir) else None)
    except ToolMissing as e:
        return StageRun(stage, 0.0, 127, "", str(e), started=started)
    placed = remote.where if remote else where
    run = StageRun(stage, cp.seconds, cp.returncode, cp.stdout, cp.stderr, started=started,
                   where=None if placed is None else str(placed))
    if cp.returncode == 0:
        run.artifacts = [Artifact.of(Path(cwd, p), stage=stage.index, arch=stage_arch(stage))
                         for p in stage.outputs if Path(cwd, p).is_file()]
    return run


def _trace_request(words: list[str], output: str | None, toolkit: Toolkit, *,
                   cwd: str | None = None):
    """nvcc's -fdevice-time-trace in ``words`` (``time_trace.TraceRequest``), or None. With
    ``cwd`` (a launcher's command) and $NVSTAGE_TIME_TRACE=1, nvstage's own trace when the
    command asks for none."""
    own = cwd is not None and os.environ.get("NVSTAGE_TIME_TRACE") == "1"
    if not own and not any("time-trace" in w for w in words):
        return None  # no grammar read for the common case
    from nvstage.compiler.nvcc.time_trace import GRANULARITY, own_request, request_from_args

    grammar = grammar_for(toolkit.nvcc)
    args = grammar.parse(words)
    granular = grammar.lookup(GRANULARITY) is not None  # 13.5's option, not 13.0's
    asked = request_from_args(args, output or last_value(args, "--output-file"), granular)
    if asked is None and own:
        return own_request(args, log_folder(cwd, os.environ), cwd, granular)
    return asked


def _write_trace(tracer, build: Build, cwd: str):
    """Write the build's trace where nvcc would (``time_trace.Written``). A file that cannot
    be written fails the build as it fails nvcc's."""
    try:
        return tracer.write(build.runs, cwd)
    except OSError as e:
        raise WriteError(f"cannot write the trace file {tracer.request.path}: "
                         f"{e.strerror or e}",
                         hint="nvcc fails too (\"Failed to open trace file\"): check the "
                              "folder -fdevice-time-trace names") from None


def _trace_record(tracer, written) -> dict | None:
    """What the manifest keeps of the trace (``Tracer.record``: its file and the unit's
    summary); None when it cannot be made: bookkeeping never fails a build."""
    try:
        return tracer.record(written)
    except Exception:
        return None


def _final_output(plan: Plan, cwd: str) -> str | None:
    """The file the user asked for: the last stage's main output."""
    for s in reversed(plan.runnable):
        if s.outputs:
            return str(Path(cwd, s.outputs[0]))
    return None
