"""Run nvcc's own plan stage by stage: time each stage, record every artifact, keep or clean.

nvcc is asked for its plan with ``--dryrun --keep --keep-dir DIR`` and the user's flags, so the
intermediate files get readable names (``vadd.ptx``, ``vadd.sm_90.cubin``) instead of
``/tmp/tmpxft_...``. Without ``--keep``, DIR is a temporary folder removed afterwards.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import __version__, proc
from .artifacts import Artifact, write_json_atomic
from .errors import InputNotFound, PlanError, StageFailed, ToolkitError, UsageError
from .options import CompileOptions, check_archs
from .plan import Plan, Stage, StageKind, parse_dryrun
from .toolkit import Toolkit, find_toolkit

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

    @property
    def ok(self) -> bool:
        return self.returncode == 0

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
            "artifacts": [a.to_json() for a in self.artifacts],
        }


class Observer:
    """Progress sink; the CLI draws a live display from these calls. All methods optional."""

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
    cache: bool = True,
) -> Build:
    """Compile ``source`` as nvcc would, one stage at a time.

    ``keep``: a folder for every intermediate file and ``stages.json``; without it nothing but
    the requested output is left behind. Raises ``StageFailed`` when a tool fails (its partial
    manifest is written first when ``keep`` is given). ``jobs``: how many stages may run at
    once (None: one per core); ``cache``: reuse stages whose inputs are unchanged.
    """
    t_start = time.perf_counter()
    options = options or CompileOptions()
    observer = observer or Observer()
    cwd = os.path.abspath(cwd or os.getcwd())
    src = Path(cwd, source)
    if not src.is_file():
        raise InputNotFound(f"no such file: {source}",
                            hint="check the path; it is taken relative to the current folder")
    if any(c in cwd for c in '"`\\'):
        raise UsageError(f"cannot build from a folder whose path contains quotes or backslashes: "
                         f"{cwd}", hint="cd to a folder with a plainer path")
    toolkit = toolkit or find_toolkit()
    check_archs(options, toolkit.nvcc)

    if keep is not None:
        work = Path(cwd, keep).resolve()
        work.mkdir(parents=True, exist_ok=True)
    else:
        work = Path(tempfile.mkdtemp(prefix="nvstage-"))
    try:
        plan, dryrun_argv, plan_seconds = make_plan(os.fspath(source), options, toolkit, work,
                                                    cwd)
        observer.on_plan(plan)
        build = Build(str(src), options, toolkit, cwd, plan, dryrun_argv, plan_seconds, [],
                      0.0, str(work) if keep is not None else None,
                      _final_output(plan, cwd))
        env = stage_env(plan)
        for stage in plan.stages:
            observer.on_stage_start(stage)
            run = run_stage(stage, env, cwd, t_start)
            build.runs.append(run)
            observer.on_stage_end(run)
            if not run.ok:
                err = StageFailed(
                    stage_index=stage.index, stage_kind=stage.kind.value, tool=stage.tool,
                    argv=stage.argv, returncode=run.returncode, stdout=run.stdout,
                    stderr=run.stderr, cwd=cwd, env_overrides=_repro_env(plan, stage),
                    keep_dir=build.keep_dir,
                )
                build.status, build.error = "failed", err.to_json()
                build.wall_seconds = time.perf_counter() - t_start
                if keep is not None:
                    write_json_atomic(work / MANIFEST, build.to_json())
                raise err
        build.wall_seconds = time.perf_counter() - t_start
        if keep is not None:
            write_json_atomic(work / MANIFEST, build.to_json())
        return build
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def make_plan(source: str, options: CompileOptions, toolkit: Toolkit, work: Path,
              cwd: str) -> tuple[Plan, list[str], float]:
    """Ask nvcc for its plan with the same flags, and parse it.

    ``source`` is passed as the user wrote it (relative stays relative): nvcc derives
    ``__FILE__`` and its diagnostics from it, and what we build must be what nvcc builds.
    """
    ph = _Placeholders()
    argv = [toolkit.nvcc, "--dryrun", "--keep", "--keep-dir", ph.sub(str(work))]
    argv += _sub_options(options, ph)
    argv.append(ph.sub_path(source))
    if options.output:
        argv += ["-o", ph.sub_path(options.output)]
    try:
        cp = proc.run(argv, cwd=cwd, timeout=120)
    except proc.ToolMissing as e:
        raise ToolkitError(str(e), hint="check --nvcc / $NVSTAGE_NVCC") from e
    if cp.returncode != 0:
        msg = "\n".join(l for l in (cp.stderr + cp.stdout).splitlines()
                        if not l.startswith("#$ ")).strip()
        raise PlanError(f"nvcc rejected the build: {ph.restore(msg) or 'exit ' + str(cp.returncode)}",
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


def _sub_options(options: CompileOptions, ph: _Placeholders) -> list[str]:
    args = options.nvcc_args()
    out = []
    for a in args:
        if _safe(a):
            out.append(a)
        elif not a.startswith("-"):
            out.append(ph.sub(a))  # the value word of "-I DIR", "-D NAME=VALUE", ...
        elif a[:2] in ("-D", "-I", "-U", "-L"):
            out.append(a[:2] + ph.sub(a[2:]))
        elif a.startswith("--") and "=" in a:
            opt, value = a.split("=", 1)
            out.append(f"{opt}={ph.sub(value)}")
        else:
            out.append(a)
    return out


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


def run_stage(stage: Stage, env: dict[str, str], cwd: str, t0: float) -> StageRun:
    """Run one stage (a cleanup is done here, in-process) and record what it produced."""
    started = time.perf_counter() - t0
    if stage.kind is StageKind.CLEANUP:
        t = time.perf_counter()
        for p in stage.inputs:
            target = Path(cwd, p)
            if target.is_file():
                target.unlink()
        return StageRun(stage, time.perf_counter() - t, 0, started=started)
    try:
        cp = proc.run(stage.argv, cwd=cwd, env=env)
    except proc.ToolMissing as e:
        return StageRun(stage, 0.0, 127, "", str(e), started=started)
    run = StageRun(stage, cp.seconds, cp.returncode, cp.stdout, cp.stderr, started=started)
    if cp.returncode == 0:
        run.artifacts = [Artifact.of(Path(cwd, p), stage=stage.index, arch=_arch_for(stage, p))
                         for p in stage.outputs if Path(cwd, p).is_file()]
    return run


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
