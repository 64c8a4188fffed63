"""SASS per kernel: nvdisasm on each cubin (fatbins, objects and executables are unpacked one
image at a time, so same-named images never overwrite each other), with opcode counts and,
for cubins built with -lineinfo, the source line of each instruction.

ptxas pads every function with NOPs up to a 128-byte boundary, after its last instruction
(the ``BRA`` to itself that ends it): 8 to 15 of them on sm_90, a third of a small kernel.
They are never issued, so they are counted apart (``padding``), not as instructions. A NOP
inside the code (sm_100 aligns some loop heads with them) is issued and counts.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from nvstage import proc
from nvstage.errors import ArtifactError, ToolkitError, NvstageError
from nvstage.inspect.names import demangle_all
from nvstage.files import read_regular
from nvstage.inspect.elf import read_cubin, refine_arch
from nvstage.inspect.fatbin import image_bytes, kind_of_file, read_bytes

_SECTION = re.compile(r"^\s*\.section\s+\.text\.([^,\s]+)")
_OTHER_ENTRY = re.compile(r"^\s*\.other\s+([^,\s]+),\s*@\"[^\"]*STO_CUDA_ENTRY")
# An instruction's line: its offset, then the rest, its /* encoding */ cut off in Python
# (``_instruction_text``). One pattern for the whole line backtracked cubically on a run of
# blanks: a crafted cubin whose called function's name holds 3,000 spaces hung show.
_INSN = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s+(.*)$")
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
    source_text: str | None = None  # that line of the source, where it could be read

    @property
    def mnemonic(self) -> str:
        """The opcode with its modifiers: "IMAD.WIDE.U32"."""
        return _PRED.sub("", self.text).split(" ", 1)[0].rstrip(";")

    def to_json(self) -> dict:
        d = {"offset": self.offset, "opcode": self.opcode, "text": self.text,
             "source": self.source, "label": self.label}
        if self.source_text is not None:
            d["source_text"] = self.source_text
        return d


@dataclass(frozen=True)
class SassKernel:
    name: str  # mangled
    arch: str
    instructions: tuple[SassInstruction, ...] = ()
    demangled: str = ""
    is_entry: bool = True  # False for a device function (an -rdc build keeps them apart)
    image: str = ""  # which cubin it came from

    @property
    def padding(self) -> int:
        """The NOPs after the function's last instruction, up to its 128-byte boundary."""
        n = 0
        for i in reversed(self.instructions):
            if i.opcode != "NOP" or i.text != "NOP":  # a predicated NOP is code
                break
            n += 1
        return n if n < len(self.instructions) else 0  # all NOPs: code, oddly

    @property
    def code(self) -> tuple[SassInstruction, ...]:
        """The instructions without the padding."""
        return self.instructions[:len(self.instructions) - self.padding]

    @property
    def instruction_count(self) -> int:
        """Instructions, the padding NOPs left out."""
        return len(self.instructions) - self.padding

    @property
    def opcode_counts(self) -> dict[str, int]:
        return dict(Counter(i.opcode for i in self.code).most_common())

    def to_json(self, *, instructions: bool = True) -> dict:
        d = {"name": self.name, "demangled": self.demangled, "arch": self.arch,
             "is_entry": self.is_entry, "image": self.image,
             "instruction_count": self.instruction_count, "padding_nops": self.padding,
             "opcode_counts": self.opcode_counts}
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
            text_ = _instruction_text(m.group(2))
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


def disassemble(path: str | os.PathLike, toolkit, *, lineinfo: bool = False,
                declared: str | None = None) -> list[SassKernel]:
    """SASS of every function in a cubin, or in every cubin of a fatbin, object or executable
    (a build folder is ``gather.sass_of``'s).

    ``lineinfo``: interleave source lines (the cubin must be built with -lineinfo; without it
    there is simply no source to show). ``declared``: a cubin's arch as its build record
    names it (the "f" of sm_100f is not in the ELF).
    """
    kind = kind_of_file(path)
    if kind == "cubin":
        arch = refine_arch(read_cubin(read_bytes(path), str(path)).arch, declared)
        return parse_nvdisasm(_nvdisasm(Path(path), toolkit, lineinfo), arch=arch,
                              image=Path(path).name)
    if kind == "ptx":
        raise ArtifactError(f"{path} is PTX: there is no SASS until ptxas compiles it",
                            hint="nvstage compile it with --cubin")
    if kind == "build":
        raise ArtifactError(f"{path} is a build: its SASS is read cubin by cubin",
                            hint="read it with inspect.gather.sass_of")
    out: list[SassKernel] = []
    stem = Path(path).name.split(".")[0]
    listed: dict[bytes, str] = {}  # nvdisasm's text by the cubin's hash: copies run it once
    with tempfile.TemporaryDirectory(prefix="nvstage-sass-") as tmp:
        for im, data in image_bytes(path, toolkit, "cubin"):
            # The container's word for the arch: it says "f" (sm_100f), the ELF cannot.
            arch = refine_arch(read_cubin(data, f"{path} image {im.index}").arch, im.arch_name)
            name = f"{stem}.{im.index}.{arch}.cubin"  # the inventory's name: unique
            key = hashlib.sha256(data).digest()
            if key not in listed:
                one = Path(tmp, name)
                one.write_bytes(data)
                listed[key] = _nvdisasm(one, toolkit, lineinfo)
                one.unlink()
            out += parse_nvdisasm(listed[key], arch=arch, image=name)
    return out


# -lineinfo listings show each location's line of source: from one regular file of at most
# this many bytes, each line cut to MAX_SOURCE_LINE characters.
MAX_SOURCE_BYTES = 8 << 20
MAX_SOURCE_LINE = 200
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]")  # a line's own escapes stay text


def source_lines(path: str | os.PathLike, *, indent: bool = False) -> list[str] | None:
    """The lines of a source file, shown as text (control characters replaced, tabs as four
    spaces, each cut to ``MAX_SOURCE_LINE``; ``indent``: the leading spaces kept, as the line
    view shows the code), or None where it cannot be read: gone, not a regular file (a FIFO
    is never opened), larger than ``MAX_SOURCE_BYTES``, no permission."""
    try:
        data = read_regular(path, limit=MAX_SOURCE_BYTES, limit_name="MAX_SOURCE_BYTES",
                            what="source file")
    except (NvstageError, OSError, ValueError):
        return None
    out = []
    for line in data.decode("utf-8", "replace").split("\n"):
        line = _CONTROL.sub("?", line.rstrip("\r").replace("\t", "    ")).rstrip()
        line = line if indent else line.lstrip()
        out.append(line if len(line) <= MAX_SOURCE_LINE else line[:MAX_SOURCE_LINE - 3] + "...")
    return out


def _instruction_text(body: str) -> str:
    """The instruction of what follows a listing line's offset: without a trailing
    ``/* ... */`` comment (the encoding) and its ``;``."""
    end = body.rstrip()
    start = body.find("/*")
    if end.endswith("*/") and 0 <= start <= len(end) - 4:
        body = body[:start]
    body = body.rstrip()
    body = body[:-1] if body.endswith(";") else body  # its ";", then any the text ends with
    return body.strip().rstrip(";").strip()


def _location(source: str) -> tuple[str, int] | None:
    file, _, line = source.rpartition(":")
    return (file, int(line)) if file and line.isdecimal() else None


# What a translation unit nvcc compiles is called (and a header, should a manifest name one):
# a manifest is a document, and one naming ~/.aws/credentials, with a cubin whose line info
# names it too (#line 1 "..."), had its text printed into the terminal and the HTML report.
# A Triton kernel's source is its Python file (compile --via triton).
SOURCE_SUFFIXES = frozenset({".cu", ".cup", ".cuh", ".c", ".cc", ".cp", ".cpp", ".cxx", ".c++",
                             ".h", ".hh", ".hpp", ".hxx", ".inl", ".i", ".ii", ".py"})


def is_source_name(path: str) -> bool:
    """Whether ``path``, by its real name (links followed), is called as a source file is."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        return False
    return os.path.splitext(real)[1].lower() in SOURCE_SUFFIXES


def source_reader(source: str | None, cwd: str = "", *, indent: bool = False):
    """``source_text`` for the views: the lines of ``source`` (the one file a manifest or build
    record names; relative against ``cwd``) for a location that names it, None for any other
    file (a document chooses no file to read), and for a file not called as a source is
    (``SOURCE_SUFFIXES``, by its real name). The file is read once, when first named.
    ``indent``: keep each line's leading spaces (``source_lines``)."""
    if not source:
        return None
    target = os.path.join(cwd or "", source)
    if not is_source_name(target):
        return lambda f: None
    named: dict[str, bool] = {}
    read: list = []  # [lines or None] once read

    def same(f: str) -> bool:
        path = os.path.join(cwd or "", f)
        if os.path.normpath(path) == os.path.normpath(target):
            return True
        try:
            return os.path.realpath(path) == os.path.realpath(target)
        except (OSError, ValueError):
            return False

    def text(f: str):
        if not named.setdefault(f, same(f)):
            return None
        if not read:
            read.append(source_lines(target, indent=indent))
        return read[0]

    return text


def with_source_text(kernels: list[SassKernel], source: str | None, cwd: str = ""
                     ) -> list[SassKernel]:
    """``kernels`` with the text of each instruction's source line, where the location names
    ``source`` (the file a build's manifest names; relative names against ``cwd``). Only that
    file is read, once and bounded (``source_reader``); a header's location, a line past the
    end, or a source that cannot be read keep the location alone."""
    from dataclasses import replace

    text = source_reader(source, cwd)
    if text is None or not any(i.source for k in kernels for i in k.instructions):
        return kernels
    out = []
    for k in kernels:
        ins = []
        for i in k.instructions:
            loc = _location(i.source) if i.source else None
            lines = text(loc[0]) if loc is not None else None
            if lines and 1 <= loc[1] <= len(lines):
                i = replace(i, source_text=lines[loc[1] - 1])
            ins.append(i)
        out.append(replace(k, instructions=tuple(ins)))
    return out


def build_sass(build, toolkit=None, *, lineinfo: bool | None = None) -> list[SassKernel]:
    """SASS of the cubins a build made (the device link's too, when it has code); with
    ``lineinfo``, each location's line of the source the manifest names."""
    toolkit = toolkit or build.toolkit
    if lineinfo is None:
        lineinfo = bool(build.options.lineinfo)
    out: list[SassKernel] = []
    for a in build.artifacts:
        if a.kind == "cubin" and os.path.isfile(a.path):
            out += disassemble(a.path, toolkit, lineinfo=lineinfo, declared=a.arch)
    return with_source_text(out, build.source, build.cwd) if lineinfo else out
