"""The build log's folder, the build a command belongs to, and the entry a command cache hit
(or a step that is not nvcc, ``compiler/launcher/tool_step``) adds to it.

``buildlog`` reads and writes the record (one JSON file per command under ``tu/``); what a
hit needs of it is here, standard library only: where the folder is, how it is made, which
run of the build tool the command is part of (``build_identity``: its ancestors in /proc), and
the hit's own entry, written as text around the manifest the sealed entry kept, so that a hit
parses nothing it does not need.
"""

from __future__ import annotations

import os

from nvstage import fsio
from nvstage.compiler.store.layout import MAX_META

ENV = "NVSTAGE_BUILD_RECORD"
FOLDER = ".nvstage-build"
MARK = "NVSTAGE_BUILD_RECORD"
SCHEMA = "nvstage.build-record/1"


def log_folder(cwd: str, env) -> str:
    """Where the build log is: ``$NVSTAGE_BUILD_RECORD`` (relative to ``cwd``), else
    ``.nvstage-build`` in ``cwd``."""
    given = env.get(ENV, "").strip()
    return os.path.abspath(os.path.join(cwd, given)) if given else os.path.join(cwd, FOLDER)


def ready_log(folder: str) -> bool:
    """The record folder, its ``tu/`` and its mark, made if missing; False when they cannot
    be (a build log that cannot be written never fails the build)."""
    try:
        os.makedirs(os.path.join(folder, "tu"), exist_ok=True)
        mark = os.path.join(folder, MARK)
        if not os.path.exists(mark):
            with open(mark, "w") as f:
                f.write(f"{SCHEMA}: one file per nvcc command under tu/\n")
    except OSError:
        return False
    return True


# -- which build a command belongs to -----------------------------------------------------

# A build is one run of the build tool: the command's nearest ancestor that is one of these
# (past the shells between), or the outermost of a chain of them (``cmake --build`` running
# ninja, a make running make). Names as the kernel keeps them (``/proc/PID/stat``'s comm).
BUILD_TOOLS = frozenset({"ninja", "samu", "make", "gmake", "bmake", "remake", "cmake", "ctest",
                         "meson", "scons", "bazel", "buck", "buck2", "tup", "waf", "xmake"})
_SHELLS = frozenset({"sh", "bash", "dash", "ash", "zsh", "ksh", "mksh", "busybox", "fish",
                     "tcsh", "csh", "env", "nice", "time", "timeout", "nohup", "stdbuf"})
_MAX_ANCESTORS = 16
_identity: list[str | None] = []
_by_parent: dict[int, tuple[int, str | None]] = {}  # ppid -> (its start time, its build)


def _stat_of(pid: int) -> tuple[str, int, int] | None:
    """(comm, parent pid, start time in clock ticks since boot) of ``pid``, from
    ``/proc/PID/stat`` (its comm may hold blanks and parentheses: the last ")" ends it)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read(4096).decode("utf-8", "replace")
    except OSError:
        return None
    open_at, close_at = text.find("("), text.rfind(")")
    fields = text[close_at + 2:].split()
    if open_at < 0 or close_at < open_at or len(fields) < 20:
        return None
    try:
        return text[open_at + 1:close_at], int(fields[1]), int(fields[19])
    except ValueError:
        return None


def build_identity(ppid: int | None = None) -> str | None:
    """``TOOL:PID:START`` of the build tool run this process (or the one whose parent is
    ``ppid``: a launcher the resident nvstage answered) is part of; ``process:...`` of the
    nearest ancestor that is no shell where no build tool is among them (a script; the
    reader tells its builds apart by time); None where /proc cannot say (not Linux)."""
    if _identity and ppid is None:
        return _identity[0]
    found, nearest = None, None
    pid = os.getppid() if ppid is None else ppid
    first = _stat_of(pid) if pid > 1 else None
    if ppid is not None and first is not None:
        # A resident nvstage asks for each hit of a build, whose commands share a parent: the
        # same process (its pid and start time) has the same ancestors while it lives.
        got = _by_parent.get(ppid)
        if got is not None and got[0] == first[2]:
            return got[1]
    for n in range(_MAX_ANCESTORS):
        st = first if n == 0 else _stat_of(pid) if pid > 1 else None
        if st is None:
            break
        comm, parent, start = st
        name = comm.lower()
        if name in BUILD_TOOLS:
            found = f"{name}:{pid}:{start}"
        elif name not in _SHELLS:
            if found is not None:
                break  # the outermost of a chain of build tools (and shells) is the build
            nearest = nearest or f"process:{pid}:{start}"
        pid = parent
    if ppid is not None:
        if first is not None:
            if len(_by_parent) >= 256:
                _by_parent.clear()
            _by_parent[ppid] = (first[2], found or nearest)
        return found or nearest
    _identity.append(found or nearest)
    return _identity[0]


def belongs_to(ppid: int) -> None:
    """From now on this process's commands are the build's of the step whose parent is
    ``ppid`` (``build_identity(ppid)``): the resident nvstage's child runs its client's
    command, and its build log entry and the remote tiers' budget are that build's."""
    _identity[:] = [build_identity(ppid)]


def entry_text(fields: list[tuple[str, object]], build: bytes = b"null") -> bytes:
    """A build-record entry as JSON text, written without the json package (a hit and a
    step that is not nvcc import it for nothing else): ``fields`` hold str, int, float,
    bool, None or lists of str; ``build`` is the manifest's JSON as it was stored."""
    from _json import encode_basestring_ascii as q  # the C encoder: the json package is not

    def value(v) -> str:
        if v is None or isinstance(v, bool):
            return {None: "null", True: "true", False: "false"}[v]
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, list):
            return "[" + ",".join(map(q, v)) + "]"
        return q(v)

    body = ",".join(f"{q(k)}:{value(v)}" for k, v in [("schema", SCHEMA), *fields])
    return ("{" + body).encode() + b',"build":' + build + b"}"


def write_entry(cwd: str, env, started: float, tag: str, text: bytes,
                pid: int | None = None) -> None:
    """``text`` as the entry ``<start>-<pid>-<tag>.json`` of the record ``cwd`` and ``env``
    name (``pid``: the launcher's, where another process writes for it); a build log that
    cannot be written never fails the build."""
    folder = log_folder(cwd, env)
    name = f"{int(started * 1e6):017d}-{os.getpid() if pid is None else pid}-{tag}.json"
    for _ in range(2):  # made ready once a process; made again if it was removed since
        if folder not in _ready:
            if not ready_log(folder):
                return
            if len(_ready) >= 256:
                _ready.clear()
            _ready.add(folder)
        try:
            fsio.replace(os.path.join(folder, "tu", name), text)
            return
        except OSError:
            _ready.discard(folder)


_ready: set[str] = set()  # record folders this process made or found ready


def add_hit(served: dict, manifests: dict | None = None) -> None:
    """The build-record entry of a hit (``answer.try_hit``'s ``served``): the manifest the
    command's last staged run made, marked as answered whole from the cache. ``manifests``: a
    resident nvstage's manifests by their SHA-256, read and checked once (``answer.Memory``)."""
    import time

    s = served
    sha = s.get("build_sha")
    build = manifests.get(sha) if manifests is not None and sha else None
    if build is None:
        build = manifest(s["build"], sha)
        if manifests is not None and build is not None:
            manifests.keep(sha, build, len(build))
    if build is None:
        build = b"null"
    text = entry_text([("argv", s["argv"]), ("cwd", s["cwd"]), ("started", s["started"]),
                       ("seconds", round(time.perf_counter() - s["t0"], 6)), ("status", "ok"),
                       ("exit_code", 0), ("pid", s.get("pid", os.getpid())), ("reason", None),
                       ("hit", True), ("build_id", build_identity(s.get("ppid"))),
                       ("nvcc_from", s.get("nvcc_from"))], build)
    write_entry(s["cwd"], s["env"], s["started"], "h", text, s.get("pid"))


def manifest(path: str, sha: str | None) -> bytes | None:
    """The manifest a sealed entry names at ``path``, if its bytes are ``sha``'s (only that:
    a shared cache's folder is not trusted); None otherwise."""
    build = fsio.read_or_none(path, MAX_META)
    if build is not None:
        from nvstage.compiler.store import zstd

        try:
            build = zstd.decompress(build, MAX_META)
        except (ValueError, ImportError):
            build = None
    return build if build is not None and fsio.hexdigest(build) == sha else None
