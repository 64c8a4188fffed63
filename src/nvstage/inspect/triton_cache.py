"""A Triton cache folder (``TRITON_CACHE_DIR``, ``~/.triton/cache``; torch.compile fills it),
read as a document: every kernel in it, one record each, then any of them in detail.

Triton 3.x's ``FileCacheManager`` keeps one folder per compiled kernel, named by its cache key,
holding the stages' files (``NAME.source``, ``.ttir``, ``.ttgir``, ``.llir``, ``.ptx``,
``.cubin``), the metadata Triton collected (``NAME.json``) and ``__grp__NAME.json``, which
names those files by absolute path.

A cache may be anyone's (a CI artifact, a colleague's folder), so nothing in it runs and
nothing in it chooses a path: files are found by listing the kernel's own folder, never by a
name or path the metadata holds; no symbolic link is followed; every count and size is
bounded; and metadata of the wrong shape (too large, nested too deeply, a field of the wrong
type, a group file naming a file outside its folder) is one ``ArtifactError`` naming the file.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from nvstage.errors import ArtifactError, UsageError, one_line
from nvstage.compiler.manifest.triton_info import TritonInfo
from nvstage.compiler.nvcc.cubin_figures import read_figures
from nvstage.compiler.toolkit.locate import find_toolkit
from nvstage.inspect.resources import from_figures
from nvstage.inspect.triton_view import launch_occupancy
from nvstage.inspect.view import LINES, Shown, collect_file, parse_sections

MAX_ENTRIES = 10_000  # kernel folders in one cache (torch.compile's hold hundreds)
MAX_FILES = 64  # files in one kernel's folder (Triton writes 8)
MAX_METADATA_BYTES = 1 << 20  # Triton's own are 1 to 2 KB
MIN_PREFIX = 6  # an entry named by the start of its folder: this many characters at least
MAX_DEPTH = 16  # nesting of a metadata document (Triton's reach 3)
MAX_CUBIN_BYTES = 64 << 20  # one kernel's cubin
MAX_READ_BYTES = 2 << 30  # cubins read for one listing, together
STAGE_SUFFIXES = ("source", "ttir", "ttgir", "llir", "ptx", "cubin")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,1023}$")
_GROUP = "__grp__"


@dataclass(frozen=True)
class CachedKernel:
    """One kernel of a Triton cache: Triton's metadata, and its cubin's figures."""

    key: str  # the folder's name: Triton's cache key
    folder: str
    name: str
    backend: str
    capability: int  # the target's compute capability, 90
    warp_size: int
    num_warps: int
    num_stages: int
    num_ctas: int
    shared: int  # dynamic shared memory every launch passes
    global_scratch_size: int
    profile_scratch_size: int
    triton_version: str | None
    fp_fusion: bool | None
    files: tuple[str, ...]  # the stages' files present, by suffix
    record: object = None  # the cubin's ``KernelRecord`` (registers, spills, static shared)
    occupancy: object = None  # ``hw.occupancy.Occupancy`` at its launch, where known

    @property
    def arch(self) -> str:
        """What Triton 3.9 builds for the capability: sm_90a from sm_90 on."""
        return f"sm_{self.capability}{'a' if self.capability >= 90 else ''}"

    @property
    def threads(self) -> int:
        return self.num_warps * self.warp_size

    def path(self, suffix: str) -> str | None:
        """The kernel's file of a stage (its folder's own entry), or None."""
        stem = Path(self.files[0]).stem if self.files else self.name
        return os.path.join(self.folder, f"{stem}.{suffix}") if suffix in {
            Path(f).suffix[1:] for f in self.files} else None

    def to_json(self) -> dict:
        r, occ = self.record, self.occupancy
        return {"key": self.key, "name": self.name, "backend": self.backend,
                "arch": self.arch, "warp_size": self.warp_size, "num_warps": self.num_warps,
                "num_stages": self.num_stages, "num_ctas": self.num_ctas,
                "shared": self.shared, "triton_version": self.triton_version,
                "fp_fusion": self.fp_fusion, "files": list(self.files),
                "registers": getattr(r, "registers", None),
                "spill_stores": getattr(r, "spill_stores", None),
                "spill_loads": getattr(r, "spill_loads", None),
                "shared_static": getattr(r, "shared_bytes", None),
                "occupancy": occ.to_json() if occ is not None else None}


@dataclass
class TritonCache:
    folder: str
    kernels: list[CachedKernel] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"triton_cache": self.folder, "kernels": [k.to_json() for k in self.kernels],
                "notes": self.notes}


# --- finding one ------------------------------------------------------------------------------

def _entries(folder: Path) -> list[os.DirEntry]:
    try:
        with os.scandir(folder) as it:
            out = []
            for e in it:
                out.append(e)
                if len(out) > MAX_ENTRIES:
                    raise ArtifactError(f"{folder} holds more than {MAX_ENTRIES} entries: more "
                                        "than nvstage reads as one Triton cache (MAX_ENTRIES)")
            return sorted(out, key=lambda e: e.name)
    except OSError as e:
        raise ArtifactError(f"cannot read {folder}: {e.strerror or e}") from None


def is_triton_cache(path) -> bool:
    """Whether ``path`` is a folder (not a link) with no ``stages.json`` whose first
    subfolders look like Triton's: a ``__grp__*.json`` file, or a metadata JSON beside a
    stage's file. Looks at a few entries only."""
    p = Path(path)
    try:
        if not stat.S_ISDIR(os.lstat(p).st_mode) or (p / "stages.json").exists():
            return False
        with os.scandir(p) as it:
            for n, e in enumerate(it):
                if n >= 64:
                    break
                if not e.is_dir(follow_symlinks=False):
                    continue
                with os.scandir(e.path) as inner:
                    names = [x.name for _, x in zip(range(MAX_FILES), inner)]
                if any(x.startswith(_GROUP) and x.endswith(".json") for x in names):
                    return True
                stems = {x[:-5] for x in names if x.endswith(".json")}
                if any(x.rsplit(".", 1)[0] in stems for x in names
                       if x.rsplit(".", 1)[-1] in STAGE_SUFFIXES):
                    return True
    except (OSError, ValueError):
        return False
    return False


# --- reading metadata -------------------------------------------------------------------------

def _read_small(path: str, limit: int, what: str) -> bytes:
    """A regular file (never through a link) of at most ``limit`` bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise ArtifactError(f"{path}: cannot read the {what}: "
                            f"{'it is a symbolic link' if e.errno == errno.ELOOP else e.strerror}"
                            ) from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ArtifactError(f"{path}: the {what} is not a regular file")
        if st.st_size > limit:
            raise ArtifactError(f"{path}: the {what} is {st.st_size} bytes, more than the "
                                f"{limit} nvstage reads")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ArtifactError(f"{path}: the {what} is more than {limit} bytes")
    return data


def _depth(v, limit: int) -> int:
    """How deeply ``v`` nests (iteratively: a crafted document cannot exhaust the stack)."""
    deepest, todo = 0, [(v, 1)]
    while todo:
        x, d = todo.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(x, dict):
            todo += [(y, d + 1) for y in x.values()]
        elif isinstance(x, list):
            todo += [(y, d + 1) for y in x]
    return deepest


def _json(path: str, what: str):
    data = _read_small(path, MAX_METADATA_BYTES, what)
    try:
        doc = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except RecursionError:
        raise ArtifactError(f"{path}: the {what} is nested too deeply") from None
    except ValueError as e:
        raise ArtifactError(f"{path}: the {what} is not JSON ({str(e)[:80]})") from None
    if _depth(doc, MAX_DEPTH) > MAX_DEPTH:
        raise ArtifactError(f"{path}: the {what} is nested more than {MAX_DEPTH} levels deep: "
                            "not Triton's metadata")
    if not isinstance(doc, dict):
        raise ArtifactError(f"{path}: the {what} is not a JSON object")
    return doc


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number metadata holds")


def _int(doc: dict, key: str, path: str, low: int, high: int, default=None) -> int:
    v = doc.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not low <= v <= high:
        shown = repr(v)[:40] if isinstance(v, (str, int, float, type(None))) \
            else f"a {type(v).__name__}"
        raise ArtifactError(f"{path}: {key} must be a whole number from {low} to {high}, "
                            f"not {shown}")
    return v


def _check_group(path: str, key: str, names: set[str]) -> None:
    """``__grp__NAME.json`` names the kernel's files by absolute path. Nothing here follows
    them; a cache moved elsewhere still names its files by the same last two parts, so each
    must be a file of this folder: anything else is a crafted group file."""
    doc = _json(path, "group file")
    children = doc.get("child_paths")
    if not isinstance(children, dict) or len(children) > MAX_FILES:
        raise ArtifactError(f"{path}: child_paths must be an object of at most {MAX_FILES} "
                            "files")
    for name, p in children.items():
        if not isinstance(p, str) or len(p) > 4096:
            raise ArtifactError(f"{path}: child_paths.{str(name)[:40]} must be a path")
        parent, base = os.path.split(os.path.normpath(p))
        if os.path.basename(parent) != key or base not in names or base != name:
            raise ArtifactError(f"{path}: child_paths names {p[:120]!r}, outside its folder "
                                f"{key}: not followed")


def read_entry(folder: str, key: str) -> CachedKernel | None:
    """One kernel folder of the cache; None for a folder holding no kernel metadata."""
    names = []
    for e in _entries(Path(folder)):
        if len(names) >= MAX_FILES:
            raise ArtifactError(f"{folder} holds more than {MAX_FILES} files: not a Triton "
                                "cache entry")
        if e.is_symlink():
            raise ArtifactError(f"{e.path} is a symbolic link: a Triton cache holds none, and "
                                "nvstage follows none")
        names.append(e.name)
    present = set(names)
    metas = [n for n in names if n.endswith(".json") and not n.startswith(_GROUP)
             and not n.endswith(".autotune.json")]
    if not metas:
        return None
    stem = next((m[:-5] for m in metas if any(f"{m[:-5]}.{s}" in present
                                              for s in STAGE_SUFFIXES)), metas[0][:-5])
    meta_path = os.path.join(folder, f"{stem}.json")
    for n in names:
        if n.startswith(_GROUP) and n.endswith(".json"):
            _check_group(os.path.join(folder, n), key, present)
    md = _json(meta_path, "kernel metadata")
    name = md.get("name", stem)
    if not isinstance(name, str) or not _NAME.match(name):
        raise ArtifactError(f"{meta_path}: name must be a kernel name (letters, digits, _), "
                            f"not {str(name)[:60]!r}")
    target = md.get("target")
    if not isinstance(target, dict):
        raise ArtifactError(f"{meta_path}: target must be an object (backend, arch, "
                            "warp_size)")
    backend = target.get("backend")
    if not isinstance(backend, str) or len(backend) > 32:
        raise ArtifactError(f"{meta_path}: target.backend must be a name such as 'cuda'")
    version = md.get("triton_version")
    fusion = md.get("enable_fp_fusion")
    return CachedKernel(
        key=key, folder=folder, name=name, backend=backend,
        capability=_int(target, "arch", meta_path, 1, 1000) if backend == "cuda" else 0,
        warp_size=_int(target, "warp_size", meta_path, 1, 128, 32),
        num_warps=_int(md, "num_warps", meta_path, 1, 64),
        num_stages=_int(md, "num_stages", meta_path, 0, 1000, 0),
        num_ctas=_int(md, "num_ctas", meta_path, 1, 64, 1),
        shared=_int(md, "shared", meta_path, 0, 1 << 24, 0),
        global_scratch_size=_int(md, "global_scratch_size", meta_path, 0, 1 << 40, 0),
        profile_scratch_size=_int(md, "profile_scratch_size", meta_path, 0, 1 << 40, 0),
        triton_version=version if isinstance(version, str) and len(version) < 64 else None,
        fp_fusion=fusion if isinstance(fusion, bool) else None,
        files=tuple(n for n in names if n.startswith(f"{stem}.")
                    and n.rsplit(".", 1)[-1] in STAGE_SUFFIXES))


def _with_figures(k: CachedKernel, budget: list[int]) -> CachedKernel:
    """The kernel with its cubin's figures and its launch's occupancy."""
    from dataclasses import replace


    cubin = k.path("cubin")
    if cubin is None:
        return k
    data = _read_small(cubin, MAX_CUBIN_BYTES, "cubin")
    budget[0] -= len(data)
    if budget[0] < 0:
        raise ArtifactError(f"the cache's cubins are more than {MAX_READ_BYTES >> 30} GiB "
                            "together: more than nvstage reads for one listing")
    rows = [r for r in from_figures(read_figures(data, cubin), arch=k.arch)
            if r.kernel == k.name] or from_figures(read_figures(data, cubin), arch=k.arch)
    if not rows:
        return k
    r = rows[0]
    return replace(k, record=r, occupancy=launch_occupancy(r.arch, k.threads, k.shared, r))


def read_cache(folder) -> TritonCache:
    """Every kernel of a Triton cache folder, sorted by name, each with its cubin's figures."""
    root = Path(folder)
    out = TritonCache(str(folder))
    budget = [MAX_READ_BYTES]
    others: dict[str, int] = {}
    for e in _entries(root):
        if e.is_symlink():
            raise ArtifactError(f"{e.path} is a symbolic link: a Triton cache holds none, and "
                                "nvstage follows none")
        if not e.is_dir(follow_symlinks=False) or e.name.startswith("tmp."):
            continue  # Triton's half-written temporary folders (tmp.pid_...) hold nothing yet
        k = read_entry(e.path, e.name)
        if k is None:
            continue
        if k.backend != "cuda":
            others[k.backend] = others.get(k.backend, 0) + 1
            continue
        out.kernels.append(_with_figures(k, budget))
    out.kernels.sort(key=lambda k: (k.name, k.key))
    for backend, n in sorted(others.items()):
        out.notes.append(f"{n} kernel(s) for the {backend!r} backend are not shown")
    if not out.kernels and not others:
        out.notes.append(f"no Triton kernels in {one_line(str(folder))}")
    return out


def find_kernel(cache: TritonCache, wanted: str) -> CachedKernel:
    """The kernel ``wanted`` names: its name (when one entry has it), or its folder's key or
    the start of it (6 characters or more, as the listing shows 12)."""
    hits = [k for k in cache.kernels if wanted in (k.key, k.name)] or \
        [k for k in cache.kernels if len(wanted) >= MIN_PREFIX and k.key.startswith(wanted)]
    if len(hits) == 1:
        return hits[0]
    if not hits:
        names = sorted({k.name for k in cache.kernels})
        short = (f" (an entry is named by {MIN_PREFIX} or more characters of its folder; "
                 f"{wanted!r} has {len(wanted)})" if len(wanted) < MIN_PREFIX else "")
        raise UsageError(f"no kernel {wanted!r} in the Triton cache "
                         f"{one_line(cache.folder)}{short}",
                         hint=f"kernels there: {', '.join(names) or 'none'}; entries: "
                              + (", ".join(one_line(k.key[:12]) for k in cache.kernels[:5])
                                 or "none"))
    raise UsageError(f"{len(hits)} entries of {wanted!r} in {one_line(cache.folder)} (compiled for "
                     "different arguments)", hint="name one by its folder: --kernel "
                     + ", ".join(f"{one_line(k.key[:12])} ({k.arch})" for k in hits[:5]))


def kernel_info(k: CachedKernel, ptx_version: str = ""):
    """A ``TritonInfo`` of what a cache's metadata says (no signature or ptxas: Triton's
    metadata holds neither)."""
    return TritonInfo(
        version=k.triton_version or "", kernel=k.name, name=k.name, signature=(),
        constexprs=(), arch=k.arch, warp_size=k.warp_size, num_warps=k.num_warps,
        num_ctas=k.num_ctas, num_stages=k.num_stages, shared=k.shared,
        global_scratch_size=k.global_scratch_size,
        profile_scratch_size=k.profile_scratch_size, fp_fusion=bool(k.fp_fusion),
        fp_fusion_from="" if k.fp_fusion is not None else "not in the metadata", ptxas="",
        ptxas_path="", ptxas_version="", ptx_version=ptx_version)


def show_kernel(folder, wanted: str, *, sections: str | None = None, lineinfo: bool = False,
                toolkit=None, nvcc: str | None = None):
    """``show CACHE --kernel NAME``: one kernel of the cache in detail, as ``show`` sets out a
    cubin (its PTX too), with Triton's metadata and its launch's occupancy (a ``view.Shown``).
    The source its line info names is not read: a cache names no source nvstage may open."""
    cache = read_cache(folder)
    k = find_kernel(cache, wanted)
    toolkit = toolkit or find_toolkit(nvcc)
    wanted_sections = parse_sections(sections, "build")
    if lineinfo and LINES not in wanted_sections:
        wanted_sections = wanted_sections + (LINES,)
    shown = Shown(f"{folder}/{k.key}", "cubin", {})
    cubin, ptx = k.path("cubin"), k.path("ptx")
    if cubin is None:
        raise ArtifactError(f"{k.folder} holds no cubin of {k.name}",
                            hint="Triton left only its IR there (TRITON_STORE_BINARY_ONLY, or "
                                 "a failed compile)")
    on_cubin = tuple(s for s in wanted_sections if s not in ("ptx", "fatbin"))
    shown.data = collect_file(cubin, "cubin", on_cubin, toolkit, lineinfo=lineinfo)
    if k.record is not None and shown.data.get("resources"):
        # The listing's figures (spills from the SASS), not cuobjdump's, which has none.
        shown.data["resources"] = [k.record if r.kernel == k.record.kernel else r
                                   for r in shown.data["resources"]]
    version, threads = "", {}
    if ptx is not None:
        ptx_data = collect_file(ptx, "ptx", ("ptx",), toolkit)
        if ptx_data.get("ptx"):
            version = ptx_data["ptx"][0].version
        threads = _ptx_threads(_read_small(ptx, MAX_CUBIN_BYTES, "PTX").decode(
            "utf-8", "replace"))
        if "ptx" in wanted_sections:
            shown.data = {**ptx_data, **shown.data}
    info = kernel_info(k, version)
    launches = [{"kernel": k.name, "arch": k.arch, "block": k.threads,
                 "dynamic_shared": k.shared,
                 "occupancy": k.occupancy.to_json() if k.occupancy is not None else None}]
    shown.triton = {**info.to_json(), "launches": launches, "key": k.key, **threads}
    return shown


_NTID = re.compile(r"^\s*\.(reqntid|maxntid)\s+(\d+(?:\s*,\s*\d+){0,2})", re.M)


def _ptx_threads(text: str) -> dict:
    """The PTX's ``.reqntid`` (the block must be exactly this) and ``.maxntid`` (at most
    this), as "256" or "128, 2": Triton writes ``.reqntid num_warps x 32``."""
    out = {}
    for what, value in _NTID.findall(text):
        out.setdefault(what, ", ".join(v.strip() for v in value.split(",")))
    return out
