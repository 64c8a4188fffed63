"""Artifact records (what a stage produced) and atomic writes of files beside them."""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import WriteError

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


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


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


def write_atomic(path: str | os.PathLike, data: bytes | str) -> None:
    """Write ``data`` to ``path`` so readers see the old file or the new one, never half."""
    path = Path(path)
    if path.is_dir():
        raise WriteError(f"cannot write {path}: it is a folder", hint="give a file name")
    raw = data.encode() if isinstance(data, str) else data
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise WriteError(f"cannot write {path}: {e.strerror}",
                         hint="choose a folder you can write to") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; reports are meant to be shared
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError):  # a full disk, a quota: the old file is intact
            raise WriteError(f"cannot write {path}: {e.strerror}") from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    write_atomic(path, json.dumps(obj, indent=2, sort_keys=False) + "\n")
