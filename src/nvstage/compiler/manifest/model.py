"""One compile's manifest: what a build planned, ran and produced (``Build``, ``StageRun``,
``Artifact``), its manifest ``stages.json`` as written (``save_build``) and as read back
(``load_build``). The nvcc driver, the NVRTC path and a reloaded build give the same record.

A manifest may be someone else's file (a CI artifact of a pull request), so reading one treats
it as data: read with a size bound, checked field by field (a wrong shape is one
``ArtifactError``), and never a source of programs. Its argv are shown, not run; its toolkit
only names the CUDA that made the build (``RecordedToolkit`` refuses to hand out a tool); the
artifacts it names are used only while they are regular files, at most
``MAX_ARTIFACT_BYTES``, whose size and SHA-256 are still the ones it recorded (so it cannot
point a reader at any other file).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import stat
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from nvstage import __version__
from nvstage.files import (
    MAX_ARTIFACT_BYTES,
    open_regular,
    sha256_file,
    shown_path,
    write_json_atomic,
    is_folder,
)
from nvstage.compiler.nvcc import ptxas_report
from nvstage.compiler.nvcc.cubin_figures import KernelFigures
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.nvcc.plan import Plan, Stage, StageKind
from nvstage.compiler.toolkit.locate import Toolkit, ToolInfo, find_toolkit
from nvstage.errors import (
    ArtifactError,
    InputNotFound,
    NotRegularFile,
    NvstageError,
    ToolkitError,
    one_line,
)

MANIFEST = "stages.json"
SCHEMA = "nvstage.compile/1"

# --- the record ---------------------------------------------------------------------------------

# Longest suffix first: ".cudafe1.stub.c" before ".c".
KINDS: tuple[tuple[str, str], ...] = (
    ("_dlink.reg.c", "dlink-registration"),
    (".cudafe1.stub.c", "host-stub"),
    (".cudafe1.cpp", "host-source"),
    (".cudafe1.gpu", "device-source"),
    (".cudafe1.c", "cudafe-c"),
    (".cpp4.ii", "host-preprocessed"),
    (".cpp1.ii", "device-preprocessed"),
    (".module_id", "module-id"),
    (".fatbin.c", "fatbin-c"),
    (".fatbin", "fatbin"),
    (".cubin", "cubin"),
    (".ptx", "ptx"),
    (".ltoir", "ltoir"),
    (".optixir", "optixir"),
    (".o", "object"),
    (".obj", "object"),
    (".a", "library"),
    (".so", "shared-library"),
    (".cu", "cuda-source"),
    # Triton's stages (``compiler/triton/stages.py``), named as Triton names them
    (".source", "triton-ir"),
    (".ttir", "ttir"),
    (".ttgir", "ttgir"),
    (".llir", "llvm-ir"),
    (".py", "python-source"),
)
_ARCH_IN_NAME = re.compile(r"\.((?:sm|compute|lto)_\d+[af]?)(?=\.)")


def kind_of(path: str | os.PathLike) -> str:
    name = os.path.basename(os.fspath(path))
    for suffix, kind in KINDS:
        if name.endswith(suffix):
            return kind
    p = Path(path)
    if p.is_file() and os.access(p, os.X_OK):
        return "executable"
    return "file"


def arch_of(path: str | os.PathLike) -> str | None:
    """The arch a file name carries (``vadd.compute_90.sm_90.cubin`` -> ``sm_90``)."""
    found = _ARCH_IN_NAME.findall(os.path.basename(os.fspath(path)))
    return found[-1] if found else None


def stage_arch(stage: Stage) -> str | None:
    """The arch of what a stage writes, for the stages that compile for one arch; None: the
    file's name says it (``arch_of``)."""
    if stage.kind in (StageKind.CICC, StageKind.PTXAS, StageKind.DEVICE_LINK,
                      StageKind.DEVICE_PREPROCESS):
        return stage.arch
    return None


@dataclass(frozen=True)
class Artifact:
    path: str  # absolute
    kind: str
    arch: str | None
    size: int
    sha256: str
    stage: int | None = None  # index of the stage that wrote it; None for the source

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> Artifact:
        return cls(**d)

    @classmethod
    def of(cls, path: str | os.PathLike, *, stage: int | None = None,
           arch: str | None = None) -> Artifact:
        p = os.path.abspath(os.fspath(path))
        return cls(p, kind_of(p), arch or arch_of(p), os.path.getsize(p), sha256_file(p), stage)


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
    # ptxas's -v report, where the plan itself asked for one (-Xptxas -v, --resource-usage),
    # or NVRTC's and nvJitLink's. None when constructed: taken out of ``stderr`` then.
    # Manifests from before figures were read keep the report nvstage's own -v gave.
    resources: str | None = None
    # What ptxas wrote into each cubin this stage produced (``cubin_figures``): registers,
    # stack, spills, shared and constant memory, read after the stage ran (the driver).
    # None: not read (not a ptxas stage, or a manifest from before).
    figures: list[KernelFigures] | None = None
    # Where a distributed stage ran (``dist.Where``'s values: remote, remote-hit, local,
    # local-fallback, remote-or-local). None: not sent to a farm, an ordinary local run.
    where: str | None = None

    def __post_init__(self):
        if self.resources is None:
            self.stderr, self.resources = ptxas_report.split_run(self.stage, self.stdout,
                                                                 self.stderr)

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def tool_stderr(self) -> str:
        """What the tool printed on stderr, -v report included (``ptxas_report``)."""
        return ptxas_report.tool_stderr(self.stage, self.stderr, self.resources)

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
            **({} if self.figures is None else
               {"cubin_figures": [f.to_json() for f in self.figures]}),
            **({} if self.where is None else {"where": self.where}),
            "artifacts": [a.to_json() for a in self.artifacts],
        }


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
    via: str = "nvcc"  # "nvcc" (the staged driver), "nvrtc" (the runtime path) or "triton"
    jobs: int = 1  # stages allowed to run at once
    critical_path: list[int] = field(default_factory=list)  # stage indices, first to last
    critical_path_seconds: float = 0.0  # the chain's measured time: the wall-time floor
    cache: dict | None = None  # the cache folder and this build's hits and misses; None: off
    # A build read back (``load_build``): the artifacts its manifest names that are gone or
    # were rewritten since, left out of ``runs``. Not written: it is the reader's finding.
    stale: list[str] = field(default_factory=list)
    # The -fdevice-time-trace file written where nvcc writes it (an output: ``cache/command/
    # entry.outputs_of``), and what the manifest keeps of it (``Tracer.record``); None: untraced.
    time_trace: str | None = None
    time_trace_record: dict | None = None

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
            **({"time_trace": self.time_trace_record} if self.time_trace_record else {}),
        }


def save_build(build: Build, folder: str | os.PathLike, *, status: str | None = None) -> None:
    """Write ``build``'s manifest into ``folder``, whole or not at all. ``status``: what the
    manifest says instead of the build's own (``"running"`` while stages run)."""
    doc = build.to_json()
    if status is not None:
        doc["status"] = status
    write_json_atomic(Path(folder, MANIFEST), doc, in_document_folder=True)


@dataclass
class TritonBuild(Build):
    """A ``Build`` through Triton's own stages: nvcc's record plus a ``triton`` section
    (``triton_record.TritonInfo``, written and read there)."""

    triton: object | None = None  # TritonInfo

    def to_json(self) -> dict:
        d = super().to_json()
        d["triton"] = self.triton.to_json() if self.triton is not None else None
        return d


# --- the manifest read back ---------------------------------------------------------------------

# Far above any real build (a big one writes a few MB: most of it the tools' messages).
MAX_MANIFEST_BYTES = 64 << 20
# An artifact above MAX_ARTIFACT_BYTES (the bound of every artifact reader) is left out, not
# hashed. All artifacts of one manifest together: hashing is the one cost a manifest can ask for.
MAX_HASHED_BYTES = 8 << 30
MAX_STAGES = 10_000  # runs, planned stages, artifacts: real builds have tens
MAX_WORDS = 100_000  # argv, inputs, outputs of one stage; plan variables and messages
MAX_SECONDS = 1e7  # a stage time (four months): more is a damaged or crafted file
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class RecordedToolkit(Toolkit):
    """The toolkit a manifest says made the build: a name to show and to compare with the
    toolkit nvstage finds itself, never a place to take a program from."""

    def tool(self, name: str) -> str:
        raise ToolkitError(
            f"the build's recorded toolkit ({self.release}) is not used to run {name}: a "
            "manifest never chooses a program",
            hint="read it with the toolkit nvstage finds (or --nvcc)")


def reading_toolkit(build: Build, toolkit: Toolkit | None = None) -> Toolkit:
    """The toolkit whose tools read ``build``'s files: the one given, else the one that made
    a build of this process, else the one nvstage finds. Never a manifest's."""
    if toolkit is not None:
        return toolkit
    if not isinstance(build.toolkit, RecordedToolkit):
        return build.toolkit

    return find_toolkit()


def toolkit_note(build: Build, toolkit: Toolkit) -> str | None:
    """A line when a loaded build was made by another CUDA release than the one reading it."""
    if isinstance(build.toolkit, RecordedToolkit) and build.toolkit.release != toolkit.release:
        return (f"this build was made with CUDA {build.toolkit.version or '?'}; its files are "
                f"read with CUDA {toolkit.version} ({toolkit.nvcc})")
    return None


def partial_note(build: Build) -> str | None:
    """A line for a build read back that its manifest does not vouch for as whole: one
    still running (or killed mid-build: it says "running"), interrupted, or failed. What a
    reader shows of it comes from the stages that finished; None for a whole build."""
    status = build.status
    if status == "ok":
        return None
    where = os.path.join(build.keep_dir, MANIFEST) if build.keep_dir else build.source
    done = sum(1 for r in build.runs if r.ok)
    planned = len(build.plan.stages) or len(build.runs)
    if status == "running":
        what = ("is still running, or was killed before it finished (its manifest says "
                "\"running\")")
    elif status == "interrupted":
        what = "was interrupted (stopped before every stage ran)"
    elif status == "failed":
        err = build.error if isinstance(build.error, dict) else {}
        stage = err.get("stage_index")
        what = (f"failed at stage {stage} ({one_line(str(err.get('stage_kind', '?'))[:40])})"
                if isinstance(stage, int) else "failed")
    else:
        what = f"has the status {_show(one_line(status))}, not \"ok\""
    return (f"{one_line(where)}: this build {what}: what follows is partial, from the "
            f"{done} of {planned} stages that finished")


def manifest_path(path: str | os.PathLike) -> Path:

    p = Path(path)
    if is_folder(p):
        p = p / MANIFEST
    try:
        mode = p.stat().st_mode
    except (FileNotFoundError, NotADirectoryError, ValueError):
        mode = None
    except OSError as e:  # a name too long, a loop of links: not "no manifest"
        raise ArtifactError(f"cannot read the build manifest {shown_path(p)}: "
                            f"{e.strerror or e}") from None
    if mode is None or stat.S_ISDIR(mode):
        raise InputNotFound(f"no build manifest at {p}",
                            hint="give a folder made by nvstage compile --keep, or its "
                                 "stages.json")
    if not stat.S_ISREG(mode):  # a FIFO would block the read, a device never end
        raise ArtifactError(f"{p} is not a regular file: not a build manifest")
    return p


def load_build(path: str | os.PathLike) -> Build:
    """Rebuild the ``Build`` a keep folder records. Artifact paths that moved with the folder
    are found again beside the manifest; one gone or rewritten since is left out and named in
    ``build.stale``."""
    mpath = manifest_path(path)
    doc = _read_json(mpath)
    try:
        return _from_json(doc, mpath.parent)
    except _Bad as e:
        raise ArtifactError(f"{mpath} is not an nvstage build manifest: {e}",
                            hint="give a folder made by nvstage compile --keep, or its "
                                 "stages.json") from None


def _read_json(mpath: Path):
    try:
        f = open_regular(mpath)  # a FIFO swapped in must not block
    except NotRegularFile:
        raise ArtifactError(f"{mpath} is not a regular file: not a build manifest") from None
    except OSError as e:
        raise ArtifactError(f"cannot read the build manifest {mpath}: {e.strerror}") from None
    with f:
        data = f.read(MAX_MANIFEST_BYTES + 1)
    if len(data) > MAX_MANIFEST_BYTES:
        raise ArtifactError(f"{mpath} is larger than {MAX_MANIFEST_BYTES >> 20} MiB: not a "
                            "build manifest nvstage wrote")
    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:  # RecursionError: nesting no manifest has
        what = "nested too deeply" if isinstance(e, RecursionError) else str(e)
        raise ArtifactError(f"{mpath} is not an nvstage build manifest: not JSON ({what})"
                            ) from None


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number a manifest holds")


class _Bad(Exception):
    """A field of the wrong shape; ``load_build`` names the file."""


class DamagedManifest(ValueError):
    """A manifest document that does not read as one (``from_doc``): what is wrong, in words."""


def from_doc(doc, folder: Path) -> Build:
    """A manifest's document already read (a build log's entry holds one) as the ``Build`` it
    records, its artifacts looked for under ``folder``: the reader ``load_build`` uses.
    ``DamagedManifest`` says what is wrong; ``RecursionError`` for one nested too deeply."""
    try:
        return _from_json(doc, folder)
    except _Bad as e:
        raise DamagedManifest(str(e)) from None


def _check(ok: bool, where: str, want: str, value) -> None:
    if not ok:
        raise _Bad(f"{where} must be {want}, not {_show(value)}")


def _show(value) -> str:
    text = repr(value) if isinstance(value, (str, int, float, bool, type(None))) \
        else f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def _name(key: str) -> str:
    """A document's key in a message: quoted when it holds a newline or is long."""
    return key if key.isprintable() and len(key) <= 60 else repr(key[:60])


def _obj(d, where: str) -> dict:
    _check(isinstance(d, dict), where, "an object", d)
    return d


def _field(d: dict, key: str, where: str, kind: str, default=...):
    """``d[key]`` of one ``kind``: str, str?, int, int?, num, bool, strs, obj, obj?."""
    at = f"{where}.{key}" if where else key
    if key not in d:
        if default is ...:
            raise _Bad(f"{at} is missing")
        return default
    v = d[key]
    if kind.endswith("?") and v is None:
        return None
    kind = kind.rstrip("?")
    if kind == "str":
        _check(isinstance(v, str) and "\0" not in v, at, "a string", v)
    elif kind == "int":
        _check(isinstance(v, int) and not isinstance(v, bool) and -2**63 <= v < 2**63, at,
               "a whole number", v)
    elif kind == "num":
        # The range first: math.isfinite cannot take an int past a float's range (10**400).
        _check(isinstance(v, (int, float)) and not isinstance(v, bool)
               and 0 <= v <= MAX_SECONDS and math.isfinite(v), at,
               f"a number of seconds from 0 to {MAX_SECONDS:g}", v)
    elif kind == "bool":
        _check(isinstance(v, bool), at, "true or false", v)
    elif kind == "strs":
        _check(isinstance(v, list) and len(v) <= MAX_WORDS, at,
               f"a list of at most {MAX_WORDS} strings", v)
        for i, x in enumerate(v):
            _check(isinstance(x, str) and "\0" not in x, f"{at}[{i}]", "a string", x)
    elif kind == "obj":
        _check(isinstance(v, dict), at, "an object", v)
    else:  # pragma: no cover - a typo here
        raise AssertionError(kind)
    return v


def _list(d: dict, key: str, where: str, limit: int = MAX_STAGES, default=...) -> list:
    at = f"{where}.{key}" if where else key
    v = d.get(key, default)
    if v is ...:
        raise _Bad(f"{at} is missing")
    _check(isinstance(v, list) and len(v) <= limit, at, f"a list of at most {limit} items", v)
    return v


def _stage(d, where: str) -> Stage:
    d = _obj(d, where)
    kind = _field(d, "kind", where, "str")
    _check(kind in {k.value for k in StageKind}, f"{where}.kind", "a stage kind", kind)
    return Stage(_field(d, "index", where, "int"), StageKind(kind),
                 _field(d, "tool", where, "str"),
                 list(_field(d, "argv", where, "strs")), _field(d, "arch", where, "str?"),
                 list(_field(d, "inputs", where, "strs")),
                 list(_field(d, "outputs", where, "strs")))


def _plan(d, where: str = "plan") -> Plan:
    d = _obj(d, where)
    variables = _field(d, "variables", where, "obj")
    _check(len(variables) <= MAX_WORDS, f"{where}.variables",
           f"at most {MAX_WORDS} variables", variables)
    for k, v in variables.items():
        _check(isinstance(v, str), f"{where}.variables.{_name(k)}", "a string", v)
    stages = [_stage(s, f"{where}.stages[{i}]")
              for i, s in enumerate(_list(d, "stages", where))]
    return Plan(dict(variables), stages, list(_field(d, "messages", where, "strs", [])))


# CompileOptions fields by what their values are.
_STOPS = (None, "ptx", "cubin", "fatbin")


def _options(d) -> CompileOptions:
    d = _obj(d, "options")
    known = {f.name: f.default for f in fields(CompileOptions)}
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise _Bad(f"options has unknown field(s) {', '.join(map(repr, unknown[:5]))}")
    opts = {}
    for name, value in d.items():
        default = known[name]
        if default == ():
            opts[name] = tuple(_field(d, name, "options", "strs"))
        elif isinstance(default, bool):
            opts[name] = _field(d, name, "options", "bool")
        elif name == "maxrregcount":
            opts[name] = _field(d, name, "options", "int?")
        else:
            opts[name] = _field(d, name, "options", "str?")
    _check(opts.get("stop") in _STOPS, "options.stop", "ptx, cubin, fatbin or null",
           opts.get("stop"))
    try:
        return CompileOptions(**opts)
    except NvstageError as e:
        raise _Bad(f"options: {e.message}") from None


def _toolkit(d) -> RecordedToolkit:
    d = _obj(d, "toolkit")
    tools = {}
    for name, t in _field(d, "tools", "toolkit", "obj", {}).items():
        where = f"toolkit.tools.{_name(name)}"
        t = _obj(t, where)
        tools[name] = ToolInfo(name, _field(t, "path", where, "str?", None),
                               _field(t, "version", where, "str?", None))
    return RecordedToolkit(*(_field(d, k, "toolkit", "str") for k in
                             ("nvcc", "source", "version", "release", "root")), tools)


class _Files:
    """Finds each artifact a manifest names: at its recorded path, or beside the manifest
    when the folder moved; only a regular file whose size and hash are still the recorded
    ones. Each file is hashed once, and the hashing a manifest can ask for is bounded."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.hashed: dict[tuple[int, int], str | None] = {}  # (device, inode) -> sha256
        self.budget = MAX_HASHED_BYTES
        self.found: dict[str, str] = {}  # recorded path -> where it is now

    def find(self, a: Artifact) -> str | None:
        for p in (a.path, os.path.join(self.folder, a.name)):
            if self._same(p, a):
                self.found[a.path] = os.path.abspath(p)
                return self.found[a.path]
        return None

    def _same(self, path: str, a: Artifact) -> bool:
        try:
            st = os.stat(path)
        except (OSError, ValueError):
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_size != a.size or a.size > MAX_ARTIFACT_BYTES:
            return False
        key = (st.st_dev, st.st_ino)
        if key not in self.hashed:
            if st.st_size > self.budget:
                return False
            self.budget -= st.st_size
            self.hashed[key] = _sha256(path, st.st_size)
        return self.hashed[key] == a.sha256


def _sha256(path: str, size: int) -> str | None:
    """The hash of a regular file of ``size`` bytes, or None when it is not that any more."""
    try:
        f = open_regular(path)
    except OSError:  # gone, or no longer a regular file
        return None
    h = hashlib.sha256()
    with f:
        left = size + 1  # one byte more: a file that grew is not the recorded one
        while left and (block := f.read(min(left, 1 << 20))):
            h.update(block)
            left -= len(block)
    return h.hexdigest() if left == 1 else None


def _artifact(d, where: str) -> Artifact:
    d = _obj(d, where)
    sha = _field(d, "sha256", where, "str")
    _check(bool(_SHA256.match(sha)), f"{where}.sha256", "64 hex digits", sha)
    size = _field(d, "size", where, "int")
    _check(size >= 0, f"{where}.size", "a size in bytes", size)
    return Artifact(_field(d, "path", where, "str"), _field(d, "kind", where, "str"),
                    _field(d, "arch", where, "str?", None), size, sha,
                    _field(d, "stage", where, "int?", None))


def _run(d, where: str, files: _Files, stale: list[str], budget: list[int]) -> StageRun:
    d = _obj(d, where)
    stage = _stage(d, where)
    arts = []
    for i, a in enumerate(_list(d, "artifacts", where, default=[])):
        budget[0] -= 1
        if budget[0] < 0:
            raise _Bad(f"more than {MAX_STAGES} artifacts")
        art = _artifact(a, f"{where}.artifacts[{i}]")
        found = files.find(art)
        if found is None:  # gone or rewritten since the build (or never this build's)
            stale.append(art.path)
        else:
            arts.append(Artifact(found, art.kind, art.arch, art.size, art.sha256, art.stage))
    resources = _field(d, "resources", where, "str?", None)  # absent: written before it was
    figures = None
    if d.get("cubin_figures") is not None:  # absent: before nvstage read them, or no ptxas
        figures = []
        listed = _list(d, "cubin_figures", where, limit=MAX_STAGES)
        budget[0] -= len(listed)
        if budget[0] < 0:
            raise _Bad(f"more than {MAX_STAGES} artifacts and kernels")
        for i, f in enumerate(listed):
            try:
                figures.append(KernelFigures.from_json(f))
            except ArtifactError as e:
                raise _Bad(f"{where}.cubin_figures[{i}]: {e.message}") from None
    return StageRun(stage, _field(d, "seconds", where, "num"),
                    _field(d, "returncode", where, "int"), _field(d, "stdout", where, "str", ""),
                    _field(d, "stderr", where, "str", ""), arts,
                    _field(d, "started", where, "num", 0.0),
                    _field(d, "cached", where, "bool", False), resources, figures,
                    _where(_field(d, "where", where, "str?", None)))


def _where(value: str | None) -> str | None:
    """A stage's placement, one of ``dist.Where``'s values (anything else: unknown, None)."""
    from nvstage.compiler.manifest.where import Where

    return value if value in {w.value for w in Where} else None


def _from_json(doc, folder: Path) -> Build:
    doc = _obj(doc, "the document")
    schema = doc.get("schema")
    if not (isinstance(schema, str) and schema.startswith("nvstage.compile/")):
        raise _Bad(f"its schema is {_show(schema)}, not 'nvstage.compile/1'")
    options = _options(doc.get("options", {}))
    toolkit = _toolkit(_field(doc, "toolkit", "", "obj"))
    plan = _plan(_field(doc, "plan", "", "obj"))
    files, stale, budget = _Files(folder), [], [MAX_STAGES]
    runs = [_run(s, f"stages[{i}]", files, stale, budget)
            for i, s in enumerate(_list(doc, "stages", ""))]
    # The output is one of the artifacts (the last stage's): where that one was found, if
    # it was (a path that is no artifact is never read).
    output = files.found.get(_field(doc, "output", "", "str?", None))
    build = Build(_field(doc, "source", "", "str"), options, toolkit,
                 _field(doc, "cwd", "", "str"), plan, list(_field(doc, "dryrun_argv", "", "strs",
                                                                  [])),
                 _field(doc, "plan_seconds", "", "num", 0.0), runs,
                 _field(doc, "wall_seconds", "", "num", 0.0), str(folder), output,
                 _field(doc, "status", "", "str", "ok"), _field(doc, "error", "", "obj?", None),
                 _field(doc, "via", "", "str", "nvcc"), stale=stale)
    if build.via == "triton":  # its metadata: the launch convention, what Triton decided
        from nvstage.compiler.manifest.triton_info import SECTION, read_info

        try:
            info = read_info(doc.get(SECTION))
        except ArtifactError as e:
            raise _Bad(e.message) from None
        return TritonBuild(**{f.name: getattr(build, f.name) for f in fields(Build)},
                           triton=info)
    return build
