"""SASS per kernel: nvdisasm on each cubin (fatbins, objects and executables are unpacked one
image at a time, so same-named images never overwrite each other), with opcode counts and,
for cubins built with -lineinfo, the source line of each instruction."""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from nvstage import proc
from nvstage.errors import ArtifactError, ToolkitError
from nvstage.inspect.names import demangle_all

_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_OTHER_ENTRY = re.compile(r"^\s*\.other\s+([^,\s]+),\s*@\"[^\"]*STO_CUDA_ENTRY")
_INSN = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*?)\s*;?\s*(?:/\*.*\*/)?\s*$")
_LABEL = re.compile(r"^\s*(\.L\w+):\s*$")
_LINE = re.compile(r'^\s*//## File "(.*)", line (\d+)(?:.*inlined at "(.*)", line (\d+))?')
_TARGET = re.compile(r"^\s*\.target\s+(\w+)")
_PRED = re.compile(r"^@!?U?P[T\d]+\s+")


@dataclass(frozen=True)
class SassInstruction:
    offset: int
    opcode: str  # the base opcode: "IMAD" for "IMAD.WIDE.U32"
    text: str  # the whole instruction as nvdisasm prints it, predicate included
    source: str | None = None  # "file.cu:12" with -lineinfo
    label: str | None = None  # the branch-target label just before it (".L_x_2")

    @property
    def mnemonic(self) -> str:
        """The opcode with its modifiers: "IMAD.WIDE.U32"."""
        return _PRED.sub("", self.text).split(" ", 1)[0].rstrip(";")

    def to_json(self) -> dict:
        return {"offset": self.offset, "opcode": self.opcode, "text": self.text,
                "source": self.source, "label": self.label}


@dataclass(frozen=True)
class SassKernel:
    name: str  # mangled
    arch: str
    instructions: tuple[SassInstruction, ...] = ()
    demangled: str = ""
    is_entry: bool = True  # False for a device function (an -rdc build keeps them apart)
    image: str = ""  # which cubin it came from

    @property
    def instruction_count(self) -> int:
        return len(self.instructions)

    @property
    def opcode_counts(self) -> dict[str, int]:
        return dict(Counter(i.opcode for i in self.instructions).most_common())

    def to_json(self, *, instructions: bool = True) -> dict:
        d = {"name": self.name, "demangled": self.demangled, "arch": self.arch,
             "is_entry": self.is_entry, "image": self.image,
             "instruction_count": self.instruction_count, "opcode_counts": self.opcode_counts}
        if instructions:
            d["instructions"] = [i.to_json() for i in self.instructions]
        return d


def parse_nvdisasm(text: str, *, arch: str | None = None, image: str = "",
                   demangle: bool = True) -> list[SassKernel]:
    """nvdisasm's listing (with or without -g) -> one ``SassKernel`` per function. Pure but for
    demangling."""
    if not isinstance(text, str):
        raise ArtifactError("nvdisasm output must be text")
    funcs: list[tuple[str, list[SassInstruction]]] = []
    entries: set[str] = set()
    source: str | None = None
    label: str | None = None
    for line in text.splitlines():
        m = _TARGET.match(line)
        if m and arch is None:
            arch = m.group(1)
            continue
        m = _SECTION.match(line)
        if m:
            funcs.append((m.group(1), []))
            source = label = None  # a label before .section ends the previous function
            continue
        m = _OTHER_ENTRY.match(line)
        if m:
            entries.add(m.group(1))
            continue
        m = _LINE.match(line)
        if m:
            source = f"{m.group(1)}:{m.group(2)}"
            continue
        m = _LABEL.match(line)
        if m:
            label = m.group(1)
            continue
        m = _INSN.match(line)
        if m and funcs:
            text_ = m.group(2).strip().rstrip(";").strip()
            if not text_:
                continue
            op = _PRED.sub("", text_).split(" ", 1)[0].split(".", 1)[0]
            funcs[-1][1].append(SassInstruction(int(m.group(1), 16), op, text_, source, label))
            label = None
    # No functions is a valid answer: a whole-program build's device-link cubin has no code.
    names = demangle_all(f for f, _ in funcs) if demangle else {f: f for f, _ in funcs}
    return [SassKernel(f, arch or "", tuple(ins), names[f], f in entries, image)
            for f, ins in funcs]


def _nvdisasm(cubin: Path, toolkit, lineinfo: bool) -> str:
    # Absolute: a relative name that starts with '-' would be read as an option.
    argv = [toolkit.tool("nvdisasm"), "-c"] + (["-g"] if lineinfo else []) + \
        [os.path.abspath(cubin)]
    cp = proc.run(argv, timeout=300)
    if cp.returncode != 0:
        msg = (cp.stderr or cp.stdout).strip()
        raise ArtifactError(f"nvdisasm cannot read {cubin.name}: {msg}") if "ELF" in msg \
            else ToolkitError(f"nvdisasm failed on {cubin.name}: {msg}")
    return cp.stdout


def disassemble(path: str | os.PathLike, toolkit, *, lineinfo: bool = False
                ) -> list[SassKernel]:
    """SASS of every function in a cubin, or in every cubin of a fatbin, object or executable.

    ``lineinfo``: interleave source lines (the cubin must be built with -lineinfo; without it
    there is simply no source to show).
    """
    from nvstage.inspect.elf import read_cubin
    from nvstage.inspect.fatbin import image_bytes, kind_of_file, read_bytes

    kind = kind_of_file(path)
    if kind == "cubin":
        arch = read_cubin(read_bytes(path), str(path)).arch
        return parse_nvdisasm(_nvdisasm(Path(path), toolkit, lineinfo), arch=arch,
                              image=Path(path).name)
    if kind == "ptx":
        raise ArtifactError(f"{path} is PTX: there is no SASS until ptxas compiles it",
                            hint="nvstage compile it with --cubin")
    if kind == "build":
        from nvstage.compiler.record import load_build

        return build_sass(load_build(path), toolkit, lineinfo=lineinfo)
    out: list[SassKernel] = []
    stem = Path(path).name.split(".")[0]
    listed: dict[bytes, str] = {}  # nvdisasm's text by the cubin's hash: copies run it once
    with tempfile.TemporaryDirectory(prefix="nvstage-sass-") as tmp:
        for im, data in image_bytes(path, toolkit, "cubin"):
            arch = read_cubin(data, f"{path} image {im.index}").arch
            name = f"{stem}.{im.index}.{arch}.cubin"  # the inventory's name: unique
            key = hashlib.sha256(data).digest()
            if key not in listed:
                one = Path(tmp, name)
                one.write_bytes(data)
                listed[key] = _nvdisasm(one, toolkit, lineinfo)
                one.unlink()
            out += parse_nvdisasm(listed[key], arch=arch, image=name)
    return out


def build_sass(build, toolkit=None, *, lineinfo: bool | None = None) -> list[SassKernel]:
    """SASS of the cubins a build made (the device link's too, when it has code)."""
    toolkit = toolkit or build.toolkit
    if lineinfo is None:
        lineinfo = bool(build.options.lineinfo)
    out: list[SassKernel] = []
    for a in build.artifacts:
        if a.kind == "cubin" and os.path.isfile(a.path):
            out += disassemble(a.path, toolkit, lineinfo=lineinfo)
    return out
