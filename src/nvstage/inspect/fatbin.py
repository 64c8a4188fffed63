"""Fatbin containers: what images a .fatbin, object or executable holds, and what kind of
artifact a file is.

The container is read directly (header, then one header per image: kind, version, arch, sizes,
flags), so every image is listed exactly once, LTO-IR included, with no names to collide.
Compressed payloads are unpacked by cuobjdump, one image per temporary fatbin.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
import stat
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from nvstage import proc
from nvstage.files import (
    MAX_ARTIFACT_BYTES,
    open_regular,
    read_regular,
    shown_path,
    size_text,
    is_folder,
    is_regular,
)
from nvstage.errors import ArtifactError, InputNotFound, InputTooLarge
from nvstage.inspect.elf import EM_CUDA, elf_machine, host_fatbins, read_cubin
from nvstage.inspect.records import FatbinImage
from nvstage.inspect.ptx import parse_ptx

MAGIC = 0xBA55ED50
_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of what follows
# kind, version, header size, payload size, compressed size, ?, code version, arch,
# name offset, name length, flags, ?, uncompressed size: 64 bytes, PTX/LTO headers add options
_ENTRY = struct.Struct("<HHIQIIIIIIQQQ")
KINDS = {1: "ptx", 2: "cubin", 8: "ltoir"}
_COMPRESSED = 0x8000 | 0x2000  # zstd (CUDA 13) and the older LZ4 flag
# The image's arch suffix (seen, CUDA 13.5: cuobjdump names such images sm_90a, sm_100f):
# arch-specific (sm_90a, compute_100a) and family-specific (sm_100f, compute_120f).
_ARCH_SPECIFIC, _FAMILY_SPECIFIC = 0x100000, 0x200000
_EXT = {"ptx": "ptx", "cubin": "cubin", "ltoir": "ltoir"}
# More images than any real container holds (a whole library has thousands): past this a
# file of tiny headers would only cost memory, one record each.
MAX_IMAGES = 1 << 18
_NONZERO = re.compile(rb"[^\x00]")


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
    where: str = field(default="", compare=False)  # the user's file, for messages

    @property
    def compressed(self) -> bool:
        return bool(self.flags & _COMPRESSED) and self.uncompressed_size > 0

    @property
    def arch_name(self) -> str:
        """"sm_90", "sm_90a", "compute_100f": the container's word for the image's target."""
        suffix = "a" if self.flags & _ARCH_SPECIFIC else \
            "f" if self.flags & _FAMILY_SPECIFIC else ""
        return f"{'sm' if self.kind == 'cubin' else 'compute'}_{self.arch}{suffix}"

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
            # Zero padding between containers in a section, skipped 8 bytes at a time up
            # to the next non-zero byte, found in one search (a file padded with zeros
            # would take a Python step per 8 bytes).
            nz = _NONZERO.search(data, off)
            if nz is None:
                break
            off += 8 * ((nz.start() - 16 - off) // 8 + 1)
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
            index = len(images) + first_index
            if ehs < _ENTRY.size or p + ehs + size > end:
                raise ArtifactError(f"{where}: image {index} runs past "
                                    "the end of its fatbin (truncated or damaged)")
            if kind in KINDS and not 10 <= arch <= 999:
                # Real arches are sm_75..sm_121; what is not two or three digits is damage
                # (it would surface later as "not an architecture" with no file named).
                raise ArtifactError(f"{where}: image {index} is damaged: its arch field "
                                    f"reads {arch}, not an architecture")
            if len(images) >= MAX_IMAGES:
                raise ArtifactError(f"{where} is damaged: more than {MAX_IMAGES} images")
            images.append(RawImage(
                index=index, section=section,
                kind=KINDS.get(kind, f"kind-{kind}"), arch=arch,
                version=(ver >> 16, ver & 0xFFFF), flags=flags,
                header=bytes(data[p:p + ehs]), payload=bytes(data[p + ehs:p + ehs + size]),
                uncompressed_size=usize, where=where))
            p += ehs + size
        off = end
    if not images:
        raise ArtifactError(f"{where} is an empty fatbin: it holds no images")
    return images


def _check_path(path: str | os.PathLike) -> None:
    """One line for a path that names no file: missing, a folder, or a name the system
    cannot look up (too long, a loop of links: not "no such file")."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InputNotFound(f"no such file: {shown_path(path)}") from None
    except (OSError, ValueError) as e:
        raise ArtifactError(f"cannot read {shown_path(path)}: "
                            f"{getattr(e, 'strerror', None) or e}") from None
    if stat.S_ISDIR(mode):
        raise ArtifactError(f"{path} is a folder, not an artifact",
                            hint="give a keep folder (with stages.json) to nvstage show")


def read_bytes(path: str | os.PathLike) -> bytes:
    """The whole artifact: a regular file of at most ``MAX_ARTIFACT_BYTES`` (FIFOs and
    devices are refused unread; see ``artifacts.read_regular``)."""
    _check_path(path)
    return read_regular(path)


@contextmanager
def _mapped(path: str | os.PathLike) -> Iterator[bytes | mmap.mmap]:
    """The file mapped read-only: a reader touches only the pages it parses (headers, the
    fatbin sections of a host ELF), so a 2 GiB file of zeros or a padded cubin costs what
    is read, not its size. Regular files only, as ``read_bytes``."""
    _check_path(path)
    try:
        f = open_regular(path)
    except FileNotFoundError:
        raise InputNotFound(f"no such file: {shown_path(path)}") from None
    except ArtifactError:
        raise
    except OSError as e:
        raise ArtifactError(f"cannot read {shown_path(path)}: {e.strerror or e}") from None
    with f:
        size = os.fstat(f.fileno()).st_size
        try:
            m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else None
        except (OSError, ValueError):  # no address space for it (ulimit -v), or no mmap
            m = None
        if m is None:  # empty (cannot be mapped; a /proc file says 0 bytes and is not),
            yield read_regular(path)  # or not mappable: read it, bounded
            return
        with m:
            yield m


def _check_whole_size(path, kind: str, size: int) -> None:
    """Cubins, fatbins and PTX are read whole by the next reader: bound them here, before
    any of them starts."""
    if kind in ("cubin", "fatbin", "ptx") and size > MAX_ARTIFACT_BYTES:
        raise InputTooLarge(f"{path} is {size_text(size)}: more than the "
                            f"{size_text(MAX_ARTIFACT_BYTES)} nvstage reads from one "
                            f"{kind} (MAX_ARTIFACT_BYTES)",
                            hint="is it the file you meant? real ones are far smaller")


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
    if is_folder(p) and is_regular(p / "stages.json"):
        return "build"
    if p.name == "stages.json" and is_regular(p):
        return "build"
    with _mapped(p) as data:
        kind = kind_of_data(data, str(path))
        _check_whole_size(path, kind, len(data))
        # Check the container now, so a damaged file fails here with one clear message.
        if kind == "cubin":
            read_cubin(data, str(path))
        elif kind == "fatbin":
            parse_fatbin(data, where=str(path))
        elif kind in ("object", "executable"):
            if not host_fatbins(data, str(path), names_only=True):
                raise ArtifactError(f"{path} is an ELF {kind} with no CUDA device code in "
                                    "it (no .nv_fatbin section)")
    return kind


def raw_images(path: str | os.PathLike) -> tuple[str, list[RawImage]]:
    """(kind of file, every fatbin image in it) for a .fatbin, object or executable.

    An object or executable is mapped and only its fatbin sections are read (at most
    ``MAX_ARTIFACT_BYTES`` of them), so a large host binary costs its device code only."""
    with _mapped(path) as data:
        kind = kind_of_data(data, str(path))
        _check_whole_size(path, kind, len(data))
        if kind == "fatbin":
            return kind, parse_fatbin(data, "", where=str(path))
        if kind not in ("object", "executable"):
            raise ArtifactError(f"{path} is a {kind}, not a fatbin, object or executable")
        sections = host_fatbins(data, str(path))
    images: list[RawImage] = []
    if not sections:
        raise ArtifactError(f"{path} has no CUDA device code in it (no .nv_fatbin section)")
    for name, blob in sections:
        images += parse_fatbin(blob, name, first_index=len(images), where=f"{path} {name}")
    return kind, images


# Unpacked images by ``_key``: show reads one image for its inventory, resources, SASS and
# PTX, and cuobjdump need unpack it only once.
_UNPACKED: dict[bytes, bytes] = {}
# Distinct compressed images one container may ask to have unpacked, and the bytes they may
# unpack to together: all of them in one cuobjdump run per kind, bounded. Real containers
# hold tens to a few thousand images; one run per image took 0.36 s each, so a crafted file
# of 262,144 images (about 270 MB) would have taken a day.
MAX_UNPACKED = 1 << 14
MAX_UNPACKED_BYTES = 4 << 30
# When a batch does not unpack, images are tried one by one to name the damaged one, up to
# this many; past it the message names the file.
_ONE_BY_ONE = 16


def _key(image: RawImage) -> bytes:
    """What decides an image's unpacked bytes: its kind, compression and payload. Header
    fields that change nothing (a crafted file varies them to defeat a cache) are left out,
    so copies of one payload are unpacked once, whatever their headers say."""
    h = hashlib.sha256(struct.pack("<16sQQ", image.kind.encode(), image.flags & _COMPRESSED,
                                   image.uncompressed_size))
    h.update(image.payload)
    return h.digest()


def payload(image: RawImage, toolkit) -> bytes:
    """The image itself, uncompressed (cuobjdump unpacks it; see ``unpack_all``)."""
    if not image.compressed:
        return image.payload
    key = _key(image)
    if key not in _UNPACKED:
        unpack_all([image], toolkit)
    return _UNPACKED[key]


def unpack_all(images: list[RawImage], toolkit) -> None:
    """Unpack every compressed cubin and PTX image of ``images`` not unpacked yet, in one
    cuobjdump run per kind (copies of one payload once): the work is bounded by the tool
    runs, not the images. ``InputTooLarge`` past ``MAX_UNPACKED`` distinct images or
    ``MAX_UNPACKED_BYTES`` in all; ``ArtifactError`` when one does not unpack."""
    todo: dict[bytes, RawImage] = {}
    for im in images:
        if im.compressed:
            key = _key(im)
            if key not in _UNPACKED and key not in todo:
                _check_unpackable(im)
                todo[key] = im
    if not todo:
        return
    where = next(iter(todo.values())).where or "the fatbin"
    total = sum(im.uncompressed_size for im in todo.values())
    if len(todo) > MAX_UNPACKED or total > MAX_UNPACKED_BYTES:
        raise InputTooLarge(f"{where} holds {len(todo)} distinct compressed images that "
                            f"unpack to {size_text(total)}: more than the {MAX_UNPACKED} "
                            f"images or {size_text(MAX_UNPACKED_BYTES)} nvstage unpacks "
                            "(MAX_UNPACKED, MAX_UNPACKED_BYTES)",
                            hint="is it the file you meant? real ones hold far fewer")
    for kind, flag in (("cubin", "-xelf"), ("ptx", "-xptx")):
        group = [(k, im) for k, im in todo.items() if im.kind == kind]
        if group:
            _UNPACKED.update(_unpack(group, flag, toolkit))


def _what(image: RawImage) -> str:
    return f"{image.where or 'fatbin'} image {image.index} ({image.kind} {image.arch_name})"


def _check_unpackable(image: RawImage) -> None:
    if image.kind not in ("cubin", "ptx"):
        raise ArtifactError(f"{_what(image)}: cuobjdump cannot extract {image.kind} images")
    if image.uncompressed_size > MAX_ARTIFACT_BYTES:  # a decompression bomb, or damage
        raise InputTooLarge(f"{_what(image)} says it unpacks to "
                            f"{size_text(image.uncompressed_size)}: more than the "
                            f"{size_text(MAX_ARTIFACT_BYTES)} nvstage reads "
                            "(MAX_ARTIFACT_BYTES)")


_EXTRACTED = re.compile(r"^all\.(\d+)\.")  # cuobjdump names image N of all.fatbin all.N.*


def _nameless(header: bytes) -> bytes:
    """An image header with its name's offset and length (bytes 32 to 40) zeroed."""
    h = bytearray(header)
    struct.pack_into("<II", h, 32, 0, 0)
    return bytes(h)


def _unpack(group: list[tuple[bytes, RawImage]], flag: str, toolkit) -> dict[bytes, bytes]:
    """{key: unpacked bytes} for images of one kind, from one fatbin holding them all:
    cuobjdump writes the Nth image of that kind as ``all.N.ARCH.EXT``. Only when the image
    has no name: one that has (the source's path, in nvcc's fatbins) is written as
    ``NAME.ARCH.EXT``, so copies of one name overwrite each other; the copies here lose it."""
    cuobjdump = toolkit.tool("cuobjdump")
    with tempfile.TemporaryDirectory(prefix="nvstage-fb-") as tmp:
        batch = Path(tmp, "all.fatbin")
        body = b"".join(_nameless(im.header) + im.payload for _, im in group)
        batch.write_bytes(_HEADER.pack(MAGIC, 1, _HEADER.size, len(body)) + body)
        cp = proc.run([cuobjdump, flag, "all", batch.name], cwd=tmp, timeout=600)
        out = {}
        for f in Path(tmp).iterdir():
            m = _EXTRACTED.match(f.name)
            if m and f.name != batch.name:
                out[int(m.group(1))] = f
        if cp.returncode == 0 and sorted(out) == list(range(1, len(group) + 1)):
            return {key: read_regular(out[n]) for n, (key, _) in enumerate(group, 1)}
        said = " ".join((cp.stderr or cp.stdout).replace(str(batch), "it")
                        .replace(batch.name, "it").split())[:200]  # one line
    if len(group) > 1 and len(group) <= _ONE_BY_ONE:
        found = {}
        for item in group:  # name the one that fails
            found.update(_unpack([item], flag, toolkit))
        return found
    # The container parsed, so a payload is what fails: the user's file is damaged, and the
    # temporary file cuobjdump names means nothing to them.
    what = _what(group[0][1]) if len(group) == 1 else \
        f"one of the {len(group)} compressed {group[0][1].kind} images of " \
        f"{group[0][1].where or 'the fatbin'}"
    raise ArtifactError(f"{what} is damaged: its compressed payload does not unpack"
                        + (f" (cuobjdump: {said})" if said else ""),
                        hint="rebuild it; a cuobjdump older than the toolkit that made it "
                             "may also not know its compression")


def _kernels(image: RawImage, data: bytes, path) -> tuple[str, ...]:
    what = f"{path} image {image.index}"
    if image.kind == "cubin":
        return read_cubin(data, what).kernels
    if image.kind == "ptx":

        try:
            module = parse_ptx(data.decode("utf-8", "replace"), demangle=False)
        except ArtifactError as e:  # the parser knows no file name: name the user's
            raise ArtifactError(f"{what} ({image.arch_name} PTX) is damaged: {e.message}",
                                hint=e.hint) from None
        return tuple(e.name for e in module.entries)
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
    unpack_all([im for im in images if im.kind != "ltoir"], toolkit)  # one tool run
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
    chosen = [im for im in images if im.kind == kind]
    unpack_all(chosen, toolkit)  # one tool run for all of them
    return [(im, payload(im, toolkit)) for im in chosen]
