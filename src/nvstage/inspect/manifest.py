"""A finished build read back from its keep folder or ``stages.json``, as a ``Build``."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..artifacts import Artifact, sha256_file
from ..errors import ArtifactError, InputNotFound
from ..options import CompileOptions
from ..pipeline import MANIFEST, Build, StageRun
from ..plan import Plan, Stage
from ..toolkit import Toolkit, ToolInfo


def manifest_path(path: str | os.PathLike) -> Path:
    p = Path(path)
    if p.is_dir():
        p = p / MANIFEST
    if not p.is_file():
        raise InputNotFound(f"no build manifest at {p}",
                            hint="give a folder made by nvstage compile --keep, or its "
                                 "stages.json")
    return p


def load_build(path: str | os.PathLike) -> Build:
    """Rebuild the ``Build`` a keep folder records. Artifact paths that moved with the folder
    are found again beside the manifest."""
    mpath = manifest_path(path)
    try:
        doc = json.loads(mpath.read_text())
        return _from_json(doc, mpath.parent)
    except (ValueError, KeyError, TypeError) as e:
        raise ArtifactError(f"{mpath} is not an nvstage build manifest: {e}") from e


def _artifact(d: dict, folder: Path) -> Artifact:
    a = Artifact.from_json(d)
    if not os.path.exists(a.path) and (folder / a.name).exists():
        a = Artifact(str(folder / a.name), a.kind, a.arch, a.size, a.sha256, a.stage)
    return a


def _unchanged(a: Artifact) -> bool:
    """Still the file the build wrote? (A later build may have written the same path.)"""
    try:
        return os.path.getsize(a.path) == a.size and sha256_file(a.path) == a.sha256
    except OSError:
        return False


def _from_json(doc: dict, folder: Path) -> Build:
    if not str(doc.get("schema", "")).startswith("nvstage.compile/"):
        raise ArtifactError(f"{folder / MANIFEST} is not an nvstage build manifest "
                            f"(schema {doc.get('schema')!r})")
    opts = {k: tuple(v) if isinstance(v, list) else v for k, v in doc["options"].items()}
    tk = doc["toolkit"]
    toolkit = Toolkit(tk["nvcc"], tk["source"], tk["version"], tk["release"], tk["root"],
                      {n: ToolInfo(n, t["path"], t["version"]) for n, t in
                       tk.get("tools", {}).items()})
    runs, stale = [], []
    for s in doc["stages"]:
        stage = Stage.from_json({k: s[k] for k in ("index", "kind", "tool", "argv", "arch",
                                                   "inputs", "outputs")})
        arts = [_artifact(a, folder) for a in s.get("artifacts", [])]
        unchanged = [_unchanged(a) for a in arts]  # each file hashed once
        stale += [a.path for a, ok in zip(arts, unchanged) if not ok]
        runs.append(StageRun(stage, s["seconds"], s["returncode"], s.get("stdout", ""),
                             s.get("stderr", ""), [a for a, ok in zip(arts, unchanged) if ok],
                             s.get("started", 0.0), s.get("cached", False)))
    build = Build(doc["source"], CompileOptions(**opts), toolkit, doc["cwd"],
                 Plan.from_json(doc["plan"]), doc["dryrun_argv"], doc["plan_seconds"], runs,
                 doc["wall_seconds"], str(folder), doc.get("output"),
                 doc.get("status", "ok"), doc.get("error"), doc.get("via", "nvcc"))
    # Artifacts gone or rewritten since the build are left out; say which.
    build.stale = stale  # type: ignore[attr-defined]
    return build
