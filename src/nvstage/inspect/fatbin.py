"""Fatbin containers: what images a .fatbin, object or executable holds, and what kind of
artifact a file is.

The container is read directly (header, then one header per image: kind, version, arch, sizes,
flags), so every image is listed exactly once, LTO-IR included, with no names to collide.
Compressed payloads are unpacked by cuobjdump, one image per temporary fatbin.
"""

from __future__ import annotations

import hashlib
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..errors import ArtifactError, InputNotFound, ToolkitError
from .elf import EM_CUDA, elf_machine, host_fatbins, read_cubin
from .records import FatbinImage

MAGIC = 0xBA55ED50
_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of what follows
# kind, version, header size, payload size, compressed size, ?, code version, arch,
# name offset, name length, flags, ?, uncompressed size: 64 bytes, PTX/LTO headers add options
_ENTRY = struct.Struct("<HHIQIIIIIIQQQ")
KINDS = {1: "ptx", 2: "cubin", 8: "ltoir"}
_COMPRESSED = 0x8000 | 0x2000  # zstd (CUDA 13) and the older LZ4 flag
_EXT = {"ptx": "ptx", "cubin": "cubin", "ltoir": "ltoir"}


@dataclass(frozen=True)
class RawImage:
    """One image as the container describes it."""

    index: int  # position in the file, from 0
    section: str  # ".nv_fatbin", "__nv_relfatbin", or "" for a bare .fatbin
    kind: str  # "cubin" | "ptx" | "ltoir" | "kind-N"
    arch: int  # 90
    version: tuple[int, int]  # (9, 5): the PTX ISA for PTX; the ELF format for cubins
    flags: int
    header: bytes
    payload: bytes  # as stored (compressed when ``compressed``)
    uncompressed_size: int

    @property
    def compressed(self) -> bool:
        return bool(self.flags & _COMPRESSED) and self.uncompressed_size > 0

    @property
    def arch_name(self) -> str:
        return f"sm_{self.arch}" if self.kind == "cubin" else f"compute_{self.arch}"

    @property
    def size(self) -> int:
        """Bytes of the image itself (uncompressed)."""
        return self.uncompressed_size if self.compressed else len(self.payload)


def parse_fatbin(data: bytes, section: str = "", *, first_index: int = 0,
                 where: str | None = None) -> list[RawImage]:
    """Every image in one or more concatenated fatbin containers. Pure.

    Raises ``ArtifactError`` for a bad magic number, a truncated container or no images.
    """
    images: list[RawImage] = []
    off = 0
    where = where or section or "fatbin"
    while off < len(data):
        if not any(data[off:off + 16]) and off:
            off += 8  # zero padding between containers in a section
            continue
        if len(data) - off < _HEADER.size:
            raise ArtifactError(f"{where} is truncated: {len(data) - off} bytes where a "
                                "16-byte header should be")
        magic, _version, hsize, fsize = _HEADER.unpack_from(data, off)
        if magic != MAGIC:
            raise ArtifactError(f"{where} is not a fatbin (magic {magic:#010x} at byte {off})")
        if hsize < _HEADER.size:
            raise ArtifactError(f"{where}: fatbin header size {hsize} is too small")
        p, end = off + hsize, off + hsize + fsize
        if end > len(data):
            raise ArtifactError(f"{where} is truncated: the fatbin says {fsize} bytes follow, "
                                f"the file has {len(data) - off - hsize}")
        while p < end:
            if end - p < _ENTRY.size:
                raise ArtifactError(f"{where} is truncated inside an image header")
            (kind, _v, ehs, size, _csize, _x, ver, arch, _no, _nl, flags, _z, usize
             ) = _ENTRY.unpack_from(data, p)
            if ehs < _ENTRY.size or p + ehs + size > end:
                raise ArtifactError(f"{where}: image {len(images) + first_index} runs past "
                                    "the end of its fatbin (truncated or damaged)")
            images.append(RawImage(
                index=len(images) + first_index, section=section,
                kind=KINDS.get(kind, f"kind-{kind}"), arch=arch,
                version=(ver >> 16, ver & 0xFFFF), flags=flags,
                header=bytes(data[p:p + ehs]), payload=bytes(data[p + ehs:p + ehs + size]),
                uncompressed_size=usize))
            p += ehs + size
        off = end
    if not images:
        raise ArtifactError(f"{where} is an empty fatbin: it holds no images")
    return images


def read_bytes(path: str | os.PathLike) -> bytes:
    p = Path(path)
    if not p.exists():
        raise InputNotFound(f"no such file: {path}")
    if p.is_dir():
        raise ArtifactError(f"{path} is a folder, not an artifact",
                            hint="give a keep folder (with stages.json) to nvstage show")
    try:
        return p.read_bytes()
    except OSError as e:
        raise ArtifactError(f"cannot read {path}: {e.strerror}") from e


def kind_of_data(data: bytes, what: str) -> str:
    """"ptx", "cubin", "fatbin", "object" or "executable"; ``ArtifactError`` otherwise."""
    if not data:
        raise ArtifactError(f"{what} is empty")
    if len(data) >= 4 and struct.unpack_from("<I", data)[0] == MAGIC:
        return "fatbin"
    mach = elf_machine(data)
    if data[:4] == b"\x7fELF":
        if mach is None:
            raise ArtifactError(f"{what} is truncated: not even a whole ELF header")
        machine, e_type = mach
        if machine == EM_CUDA:
            return "cubin"
        return "object" if e_type == 1 else "executable"
    head = data[:65536].decode("utf-8", errors="replace")
    if ".version" in head and ".target" in head:
        return "ptx"
    raise ArtifactError(f"{what} is not a CUDA artifact (not PTX, a cubin, a fatbin, an "
                        "object file or an executable)")


def kind_of_file(path: str | os.PathLike) -> str:
    """What artifact ``path`` is: "ptx", "cubin", "fatbin", "object", "executable" or "build"
    (a keep folder or stages.json). Raises ``ArtifactError`` for anything else, a truncated
    cubin or an empty fatbin."""
    p = Path(path)
    if p.is_dir() and (p / "stages.json").is_file():
        return "build"
    if p.name == "stages.json" and p.is_file():
        return "build"
    data = read_bytes(p)
    kind = kind_of_data(data, str(path))
    # Check the container now, so a damaged file fails here with one clear message.
    if kind == "cubin":
        read_cubin(data, str(path))
    elif kind == "fatbin":
        parse_fatbin(data, where=str(path))
    elif kind in ("object", "executable"):
        if not host_fatbins(data, str(path)):
            raise ArtifactError(f"{path} is an ELF {kind} with no CUDA device code in it "
                                "(no .nv_fatbin section)")
    return kind


def raw_images(path: str | os.PathLike) -> tuple[str, list[RawImage]]:
    """(kind of file, every fatbin image in it) for a .fatbin, object or executable."""
    data = read_bytes(path)
    kind = kind_of_data(data, str(path))
    if kind == "fatbin":
        return kind, parse_fatbin(data, "", where=str(path))
    if kind not in ("object", "executable"):
        raise ArtifactError(f"{path} is a {kind}, not a fatbin, object or executable")
    images: list[RawImage] = []
    sections = host_fatbins(data, str(path))
    if not sections:
        raise ArtifactError(f"{path} has no CUDA device code in it (no .nv_fatbin section)")
    for name, blob in sections:
        images += parse_fatbin(blob, name, first_index=len(images))
    return kind, images


# Unpacked images by the hash of their packed bytes: show reads one image for its inventory,
# resources, SASS and PTX, and cuobjdump need unpack it only once.
_UNPACKED: dict[bytes, bytes] = {}


def payload(image: RawImage, toolkit) -> bytes:
    """The image itself, uncompressed (cuobjdump unpacks it from a one-image fatbin)."""
    if not image.compressed:
        return image.payload
    blob = image.header + image.payload
    key = hashlib.sha256(blob).digest()
    if key not in _UNPACKED:
        _UNPACKED[key] = _unpack(image, blob, toolkit)
    return _UNPACKED[key]


def _unpack(image: RawImage, blob: bytes, toolkit) -> bytes:
    cuobjdump = toolkit.tool("cuobjdump")
    with tempfile.TemporaryDirectory(prefix="nvstage-fb-") as tmp:
        one = Path(tmp, "one.fatbin")
        one.write_bytes(_HEADER.pack(MAGIC, 1, _HEADER.size, len(blob)) + blob)
        flag = {"cubin": "-xelf", "ptx": "-xptx"}.get(image.kind)
        if flag is None:
            raise ArtifactError(f"cuobjdump cannot extract {image.kind} images")
        cp = proc.run([cuobjdump, flag, "all", one.name], cwd=tmp, timeout=120)
        out = [f for f in Path(tmp).iterdir() if f.name != one.name]
        if cp.returncode != 0 or len(out) != 1:
            raise ToolkitError(f"cuobjdump could not unpack image {image.index}: "
                               f"{(cp.stderr or cp.stdout).strip()}")
        return out[0].read_bytes()


def _kernels(image: RawImage, data: bytes, path) -> tuple[str, ...]:
    what = f"{path} image {image.index}"
    if image.kind == "cubin":
        return read_cubin(data, what).kernels
    if image.kind == "ptx":
        from .ptx import parse_ptx

        return tuple(e.name for e in parse_ptx(data.decode("utf-8", "replace"),
                                               demangle=False).entries)
    return ()  # LTO-IR: no tool of the toolkit lists what is inside


def _role(image: RawImage, data: bytes) -> str:
    if image.kind == "cubin" and read_cubin(data).from_device_link:
        return "device-link"
    return "kernel"


def inventory(path: str | os.PathLike, toolkit=None) -> list[FatbinImage]:
    """Every image in a .fatbin, object or executable, each with a unique name.

    Images in ``__nv_relfatbin`` are the relocatable copies kept for a later device link
    (``section`` says so); the driver loads only the ``.nv_fatbin`` ones.
    """
    _, images = raw_images(path)
    stem = Path(path).name.split(".")[0] or "image"
    out = []
    for im in images:
        data = payload(im, toolkit) if (im.compressed and im.kind != "ltoir") else im.payload
        known = im.kind in ("cubin", "ptx")
        size = read_cubin(data, f"{path} image {im.index}").size if im.kind == "cubin" \
            else im.size
        out.append(FatbinImage(
            kind=im.kind, arch=im.arch_name, size=size,
            name=f"{stem}.{im.index}.{im.arch_name}.{_EXT.get(im.kind, 'bin')}",
            role=_role(im, data) if known else "kernel",
            ptx_version=f"{im.version[0]}.{im.version[1]}" if im.kind == "ptx" else None,
            kernels=_kernels(im, data, path) if known else (),
            section=im.section or ".nv_fatbin", compressed=im.compressed,
            stored_size=len(im.payload), index=im.index))
    return out


def image_bytes(path: str | os.PathLike, toolkit, kind: str = "cubin"
                ) -> list[tuple[RawImage, bytes]]:
    """(image, uncompressed bytes) for every image of ``kind`` in a fatbin/object/executable."""
    _, images = raw_images(path)
    return [(im, payload(im, toolkit)) for im in images if im.kind == kind]
