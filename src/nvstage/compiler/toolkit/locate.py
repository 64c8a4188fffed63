"""Finding nvcc and its tools, and saying which toolkit, from where, at which version.

Order: an explicit path (``--nvcc``), then ``$NVSTAGE_NVCC``, then the PyPI wheels through
cuda-pathfinder (which itself falls back to conda, ``CUDA_PATH``/``CUDA_HOME``), then ``PATH``.
Every tool comes from the same toolkit as nvcc; a tool that can only be found elsewhere must
report the same release, or we refuse: a 13.0 ptxas behind a 13.5 nvcc is a silent trap. Patch
numbers may differ: one release ships components built apart (CUDA 13.0 update 2 pairs nvcc
13.0.88 with cuobjdump and nvdisasm 13.0.85).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from nvstage import proc
from nvstage.compiler.toolkit import nvcc_lookup
from nvstage.errors import ToolkitError, ToolMissing
from nvstage.extras import NVSTAGE

ENV_NVCC = "NVSTAGE_NVCC"
_VERSION = re.compile(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)")

# Where each tool lives relative to the toolkit root (the folder above nvcc's bin/).
TOOL_PATHS = {
    "nvcc": "bin/nvcc",
    "cudafe++": "bin/cudafe++",
    "cicc": "nvvm/bin/cicc",
    "ptxas": "bin/ptxas",
    "fatbinary": "bin/fatbinary",
    "nvlink": "bin/nvlink",
    "cuobjdump": "bin/cuobjdump",
    "nvdisasm": "bin/nvdisasm",
}
# Tools whose --version prints the toolkit release (cicc prints an older build line: skip it).
VERSIONED = ("nvcc", "cudafe++", "ptxas", "fatbinary", "nvlink", "cuobjdump", "nvdisasm")


@dataclass(frozen=True)
class ToolInfo:
    name: str
    path: str | None
    version: str | None  # "13.5.37", or None when the tool does not say / is missing

    @property
    def found(self) -> bool:
        return self.path is not None


@dataclass(frozen=True)
class Toolkit:
    """One CUDA toolkit, anchored at its nvcc."""

    nvcc: str
    source: str  # how it was found: "--nvcc", "$NVSTAGE_NVCC", "pip wheels", "PATH", ...
    version: str  # full version, "13.5.37"
    release: str  # "13.5"
    root: str
    tools: dict[str, ToolInfo] = field(default_factory=dict, compare=False, hash=False)

    @property
    def major(self) -> int:
        return int(self.release.split(".")[0])

    def tool(self, name: str) -> str:
        info = self.tools.get(name) or _locate(self, name)
        if info.found and info.version and _older(info.version, self.release):
            # Found outside this toolkit (cuobjdump and nvdisasm are separate wheels, and a
            # system toolkit may lack them): a newer one reads an older release's cubins, an
            # older one may not know a newer release's formats, so that is refused.
            raise ToolkitError(
                f"mixed CUDA toolkit: nvcc is {self.version} but {name} is {info.version} "
                f"({info.path})",
                hint=f"install {name} {self.release} beside this nvcc, or use the toolkit "
                     f"{name} belongs to (--nvcc)",
            )
        if not info.found:
            raise ToolkitError(
                f"{name} is not part of the toolkit at {self.root}",
                hint=f"install it (pip install 'cuda-toolkit[{_extra(name)}]') or choose "
                     f"another toolkit with --nvcc",
            )
        return info.path  # type: ignore[return-value]

    def describe(self) -> str:
        return f"CUDA {self.version} ({self.source}: {self.nvcc})"

    def to_json(self) -> dict:
        return {
            "nvcc": self.nvcc,
            "source": self.source,
            "version": self.version,
            "release": self.release,
            "root": self.root,
            "tools": {k: {"path": v.path, "version": v.version} for k, v in self.tools.items()},
        }


def _older(version: str, release: str) -> bool:
    """Whether a tool at ``version`` comes from a release older than ``release``."""
    def key(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split(".")[:2] if x.isdigit())

    return key(version) < key(release)


def _release(version: str) -> str:
    """"13.0.85" -> "13.0": the part that must agree across one toolkit's tools."""
    return ".".join(version.split(".")[:2])


def _extra(name: str) -> str:
    return {"cuobjdump": "cuobjdump", "nvdisasm": "nvdisasm"}.get(name, "nvcc")


def tool_version(path: str) -> str | None:
    try:
        text = proc.output([path, "--version"], timeout=30)
    except ToolMissing:
        return None
    m = _VERSION.search(text)
    return m.group(2) if m else None


def _candidates(explicit: str | None) -> list[tuple[str, str]]:
    """(source, nvcc path) in search order; the first that exists wins."""
    if explicit:
        return [("--nvcc", explicit)]
    out = []
    if os.environ.get(ENV_NVCC):
        return [("$" + ENV_NVCC, os.environ[ENV_NVCC])]
    try:
        # cuda-pathfinder's first place, looked at without it: importing it costs 40 to 50 ms
        # and an `ldconfig -p` (bench/floor.py), before nvcc's first process.
        found = nvcc_lookup.wheel_nvcc()
        if found is None:
            from cuda import pathfinder

            found = pathfinder.find_nvidia_binary_utility("nvcc")
        if found:
            out.append(("pip wheels" if "site-packages" in found else "cuda-pathfinder", found))
    except Exception:  # pathfinder missing or confused: fall through to PATH
        pass
    on_path = shutil.which("nvcc")
    if on_path:
        out.append(("PATH", on_path))
    return out


def all_candidates() -> list[tuple[str, str]]:
    """Every distinct nvcc this machine offers (for doctor): the chosen one first."""
    found = _candidates(None)
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            found.append((f"${var}", os.path.join(os.environ[var], "bin", "nvcc")))
    seen, out = set(), []
    for source, path in found:
        real = os.path.realpath(path)
        if real not in seen and os.path.isfile(real):
            seen.add(real)
            out.append((source, path))
    return out


def find_toolkit(nvcc: str | None = None) -> Toolkit:
    """Find the toolkit, check that its tools agree on one version, and describe it."""
    cands = _candidates(nvcc)
    if not cands:
        raise ToolkitError(
            "no CUDA toolkit found: nvcc is not in the pip wheels, $CUDA_HOME or PATH",
            hint=f"{NVSTAGE}, or pass --nvcc PATH",
        )
    source, path = cands[0]
    return _load(source, os.path.abspath(path))


@functools.lru_cache(maxsize=8)
def _load(source: str, nvcc: str) -> Toolkit:
    if not os.path.isfile(nvcc) or not os.access(nvcc, os.X_OK):
        what = "is not an executable" if os.path.exists(nvcc) else "not found at"
        raise ToolkitError(
            f"nvcc {what} {nvcc} (from {source})" if what == "not found at"
            else f"{nvcc} {what} (from {source})",
            hint="point --nvcc or $NVSTAGE_NVCC at an nvcc executable, or unset it",
        )
    root = str(Path(nvcc).resolve().parent.parent)
    paths = {name: _find(root, name) for name in TOOL_PATHS}
    # Every version at once: in a fresh cache folder (a CI runner's) the tools are asked
    # together, not one after another (20 ms rather than 85 on two cores).
    versions = _cached_versions([nvcc, *(p for n, p in paths.items() if p and n in VERSIONED)])
    version = versions.get(nvcc)
    if version is None:
        raise ToolkitError(f"{nvcc} --version did not print a CUDA release")
    tk = Toolkit(nvcc, source, version, ".".join(version.split(".")[:2]), root, {})
    for name, path in paths.items():
        tk.tools[name] = ToolInfo(name, path, versions.get(path) if path and name in VERSIONED
                                  else None)
    # Inside one toolkit root every tool must agree: a mismatch there is a broken install.
    mixed = {n: t for n, t in tk.tools.items() if n in VERSIONED and t.found and t.version
             and _release(t.version) != tk.release and t.path.startswith(root + os.sep)}
    if mixed:
        detail = ", ".join(f"{n} {t.version} at {t.path}" for n, t in mixed.items())
        raise ToolkitError(
            f"mixed CUDA toolkit: nvcc is {version} but {detail}",
            hint="install the matching wheels (pip install 'cuda-toolkit[...]=="
                 f"{tk.release}.*') or choose one toolkit with --nvcc",
        )
    return tk


def _locate(tk: Toolkit, name: str) -> ToolInfo:
    path = _find(tk.root, name)
    version = _cached_version(path) if (path and name in VERSIONED) else None
    return ToolInfo(name, path, version)


def _find(root: str, name: str) -> str | None:
    own = Path(root) / TOOL_PATHS.get(name, f"bin/{name}")
    path: str | None = str(own) if own.is_file() else None
    if path is None and name in ("cuobjdump", "nvdisasm"):
        # The inspection tools are separate wheels; pathfinder may find them elsewhere.
        try:
            from cuda import pathfinder

            path = pathfinder.find_nvidia_binary_utility(name)
        except Exception:
            path = None
        path = path or shutil.which(name)
    return path


def _cached_version(path: str) -> str | None:
    return _cached_versions([path]).get(path)


def _cached_versions(paths: list[str]) -> dict[str, str | None]:
    """``tool --version`` of each path, remembered per (path, size, mtimes, inode): every
    command would otherwise start seven tools just to learn what it already knew. Kept in the
    stage cache's ``tools/`` notes (sealed, read within a bound, and only in a folder nvstage
    made: see ``store.tool_note``); where there is no such folder it is simply asked again.
    The tools not remembered are asked concurrently."""
    import hashlib

    from nvstage.compiler.cache.local.tool_notes import set_tool_note, tool_note

    out: dict[str, str | None] = {}
    ask: dict[str, list[str]] = {}  # note name -> the paths that name it (one tool)
    for path in dict.fromkeys(paths):
        try:
            st = os.stat(path)
        except OSError:
            out[path] = None
            continue
        # Inode and ctime too: a tool replaced in place (by a rename, or a copy that keeps size
        # and mtime, as ``cp -p`` does) gets a new inode or ctime, so it is asked again.
        key = hashlib.sha256(f"{os.path.realpath(path)}:{st.st_size}:{st.st_mtime_ns}:"
                             f"{st.st_ino}:{st.st_ctime_ns}".encode())
        name = key.hexdigest()[:24]
        if name in ask:  # the same tool by another spelling (a linked folder): asked once
            ask[name].append(path)
            continue
        note = tool_note(name)
        if isinstance(note, dict) and isinstance(note.get("version"), str) and \
                _VERSION_ONLY.fullmatch(note["version"]):
            out[path] = note["version"]
        else:
            ask[name] = [path]
    firsts = [same[0] for same in ask.values()]
    if len(firsts) > 1:
        import contextvars
        import signal
        import threading

        failed: list[BaseException] = []
        finished = {p: threading.Event() for p in firsts}

        def probe(p: str) -> None:
            try:
                out[p] = tool_version(p)
            except BaseException as e:  # a timeout or a signal: raised here as when serial
                failed.append(e)
            finally:
                finished[p].set()

        # Each in this thread's context: proc's tool scope ends them with the command.
        threads = [threading.Thread(target=contextvars.copy_context().run, args=(probe, p),
                                    daemon=True) for p in firsts]
        # A signal raised in this thread ends the probes' tools; waiting for the probes then
        # lets each remove its scratch folder (a daemon thread cut off at exit left
        # nvstage-tool-* in $TMPDIR). So the signals wait while the threads start (one
        # raised inside Thread.start left a started probe unwaited for), and the waits are
        # on events (an interrupted Thread.join takes the thread for finished: Python 3.11,
        # bpo-45274). A later signal raises nothing (``proc``).
        started: list[str] = []
        try:
            held = signal.pthread_sigmask(signal.SIG_BLOCK, proc.SIGNALS)
            try:
                for th, p in zip(threads, firsts):
                    th.start()
                    started.append(p)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
            for p in started:
                finished[p].wait()
        finally:
            for p in started:
                finished[p].wait()
        if failed:
            raise failed[0]
    else:
        out.update((p, tool_version(p)) for p in firsts)
    for name, same in ask.items():
        version = out[same[0]]
        out.update(dict.fromkeys(same, version))
        if version is not None:
            set_tool_note(name, {"path": same[0], "version": version})
    return out


_VERSION_ONLY = re.compile(r"\d+\.\d+\.\d+")


def host_compiler(name: str = "gcc") -> ToolInfo:
    """The host compiler nvcc will call (gcc unless -ccbin says otherwise)."""
    path = shutil.which(name)
    if not path:
        return ToolInfo(name, None, None)
    try:
        text = proc.output([path, "--version"], timeout=30)
    except ToolMissing:
        text = ""
    first = text.splitlines()[0] if text else ""
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)\s*$", first) or re.search(r"(\d+\.\d+\.\d+)", first)
    return ToolInfo(name, path, m.group(1) if m else None)


# Headers real code includes that the toolkit's core wheels do not ship, and the
# cuda-toolkit extra (one of its Provides-Extra) whose wheel does (read from the wheels' names:
# nvidia-cuda-profiler-api, nvidia-cublas, ...).
HEADER_EXTRAS = {
    "cuda_profiler_api.h": "profiler", "cudaProfiler.h": "profiler",
    "cublas_v2.h": "cublas", "cublas.h": "cublas", "cublasLt.h": "cublas",
    "cublasXt.h": "cublas", "cufft.h": "cufft", "cufftXt.h": "cufft", "curand.h": "curand",
    "curand_kernel.h": "curand", "cusparse.h": "cusparse", "cusolverDn.h": "cusolver",
    "cusolverSp.h": "cusolver", "cusolver_common.h": "cusolver", "nvToolsExt.h": "nvtx",
    "nvtx3/nvToolsExt.h": "nvtx", "nvtx3/nvtx3.hpp": "nvtx", "npp.h": "npp",
    "nppi.h": "npp", "nvjpeg.h": "nvjpeg", "cupti.h": "cupti", "nvml.h": "nvml",
    "cufile.h": "cufile", "nvJitLink.h": "nvjitlink", "nvfatbin.h": "nvfatbin",
    "nvPTXCompiler.h": "nvptxcompiler", "CL/cl.h": "opencl", "sanitizer.h": "sanitizer",
}
_MISSING = re.compile(r"fatal error: ([^\s:]+): No such file or directory")


def missing_header_hint(stderr: str, release: str) -> str | None:
    """For gcc's "fatal error: X: No such file or directory" where a toolkit wheel ships X:
    which extra brings it."""
    m = _MISSING.search(stderr)
    if m is None:
        return None
    extra = HEADER_EXTRAS.get(m.group(1))
    if extra is None:
        return None
    return (f"{m.group(1)} comes with the cuda-toolkit wheel's '{extra}' extra: "
            f"pip install 'cuda-toolkit[{extra}]=={release}.*'")
