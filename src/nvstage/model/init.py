"""``nvstage model --init FILE.cu``: a commented workload and cost file to fill in, written from
the kernels' own declarations, so a new workload starts from the source, not from a blank file.

The file is compiled to PTX as nvcc would compile it (its folder on the include path, the flags
given); each kernel's parameters come from the PTX (their sizes) and its declaration in the
source (their names and C types: ``const float* __restrict__ x`` is a buffer of float32,
``int n`` an i32 scalar). What only the user knows (sizes, the launch's grid and block, which
buffers are read and written, FLOPs) is left as ``FILL``: the workload does not evaluate until
each is filled, and the error names the key.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nvstage.files import read_regular
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.pipeline.driver import compile as run_compile, without_temp_keep
from nvstage.errors import StageFailed, UsageError
from nvstage.run.workload.reader import Reader
from nvstage.run.workload.signatures import kernel_signatures

# C types -> the workload's dtypes and scalar tags.
_DTYPES = {"float": "float32", "double": "float64", "half": "float16", "__half": "float16",
           "int": "int32", "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32",
           "int32_t": "int32", "long": "int64", "long long": "int64", "int64_t": "int64",
           "size_t": "uint64", "unsigned long": "uint64", "uint64_t": "uint64",
           "unsigned long long": "uint64", "short": "int16", "int16_t": "int16",
           "unsigned short": "uint16", "uint16_t": "uint16", "char": "int8", "int8_t": "int8",
           "signed char": "int8", "unsigned char": "uint8", "uint8_t": "uint8"}
_TAGS = {"float32": "f32", "float64": "f64", "float16": "f16", "int32": "i32",
         "uint32": "u32", "int64": "i64", "uint64": "u64", "int16": "i16", "uint16": "u16",
         "int8": "i8", "uint8": "u8"}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct"}
FILL = "FILL"


@dataclass(frozen=True)
class Param:
    name: str
    c_type: str  # as declared, qualifiers dropped: "float*", "int"
    pointer: bool
    dtype: str | None  # the pointee's or the scalar's dtype; None: not one nvstage knows
    readonly: bool = False  # a pointer to const: read, never written


def _declaration(source: str, kernel: str) -> list[str] | None:
    """The parameter declarations of ``__global__ ... kernel(...)`` in the source text."""
    m = re.search(r"__global__[^;{(]*?\b" + re.escape(kernel) + r"\s*\(", source)
    if m is None:
        return None
    depth, i, start = 1, m.end(), m.end()
    while i < len(source) and depth:
        depth += {"(": 1, ")": -1}.get(source[i], 0)
        i += 1
    inner = re.sub(r"/\*.*?\*/|//[^\n]*", " ", source[start:i - 1], flags=re.S)
    parts, depth, cur = [], 0, []
    for ch in inner:
        if ch in "<([":
            depth += 1
        elif ch in ">)]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return [p for p in parts if p and p != "void"]


def _param(decl: str, index: int) -> Param:
    decl = decl.split("=")[0].strip()  # a default argument
    m = re.match(r"^(.*?)([A-Za-z_]\w*)\s*(\[[^\]]*\])?$", decl)
    name, ctype = (m.group(2), m.group(1)) if m and m.group(1).strip() else (f"arg{index}",
                                                                            decl)
    pointer = "*" in ctype or bool(m and m.group(3))
    words = [w for w in ctype.replace("*", " ").replace("&", " ").split()
             if w not in _QUALIFIERS]
    base = " ".join(words)
    readonly = pointer and "const" in ctype.split("*")[0].split()
    return Param(name, ("const " if readonly else "") + base + ("*" if pointer else ""),
                 pointer, _DTYPES.get(base), readonly)


def kernels_of(path: Path, toolkit, *, flags: tuple[str, ...] = (),
               include_dirs: tuple[str, ...] = (), arch: str = "sm_90") -> dict[str, list[Param]]:
    """Each ``__global__`` kernel of the file -> its parameters (names and types from its
    declaration, checked against the PTX's count)."""
    with tempfile.TemporaryDirectory(prefix="nvstage-init-") as tmp:
        opts = CompileOptions(archs=(arch,), stop="ptx", extra=flags,
                              include_dirs=tuple(str(Path(d).resolve()) for d in include_dirs),
                              output=str(Path(tmp, f"{path.stem}.ptx")))
        try:
            build = run_compile(str(path), opts, toolkit=toolkit, keep=Path(tmp, "keep"),
                                cwd=path.parent)
        except StageFailed as e:  # its keep folder is temporary: say how to keep one
            argv = ["nvstage", "compile", str(path), "--arch", arch, "--ptx", *flags]
            argv += [f"-I{d}" for d in include_dirs]
            raise without_temp_keep(e, argv) from None
        ptx = read_regular(build.artifact("ptx").path).decode(errors="replace")
    source = read_regular(path, what="source").decode(errors="replace")
    sigs = kernel_signatures(ptx, str(path))
    out: dict[str, list[Param]] = {}
    seen = set()
    for name in sigs:
        sig = sigs[name]
        if sig.mangled in seen:
            continue
        seen.add(sig.mangled)
        short = re.sub(r"[(<].*$", "", sig.demangled or sig.mangled).split("::")[-1].split()[-1]
        decls = _declaration(source, short) or []
        params = []
        for p in sig.params:
            if p.index < len(decls) and len(decls) == len(sig.params):
                params.append(_param(decls[p.index], p.index))
            else:  # no declaration to read: the PTX's type alone
                ptr = p.is_pointer if p.is_pointer is not None else p.ptx_type == "u64"
                params.append(Param(f"arg{p.index}", p.describe(), bool(ptr),
                                    _DTYPES.get(p.pointee or "") if ptr else None))
        out[sig.demangled if "<" in (sig.demangled or "") else short] = params
    return out


def skeleton(path: Path, kernel: str, params: list[Param], out_dir: Path,
             flags: tuple[str, ...] = (), include_dirs: tuple[str, ...] = ()
             ) -> tuple[str, str]:
    """The workload's and the cost file's text for one kernel."""
    rel = os.path.relpath(path.resolve(), out_dir.resolve())
    scalars = [p for p in params if not p.pointer]
    buffers = [p for p in params if p.pointer]
    w = [f"# A workload for {kernel} of {path.name}, written by nvstage model --init: fill in",
         f"# each {FILL}, then check it with nvstage run THIS.toml --dry-run (the kernel's",
         "# parameters against the arguments below) and estimate it with nvstage model.",
         "[kernel]", f'source = "{rel}"']
    w.append(f"flags = {toml_list(flags)}" if flags else
             '# flags = ["--use_fast_math"]  # nvcc flags the code is built with')
    if include_dirs:
        dirs = [os.path.relpath(Path(d).resolve(), out_dir.resolve()) for d in include_dirs]
        w.append(f"include_dirs = {toml_list(dirs)}")
    w += ["", "[params]",
          "# one per integer argument, by its name in the source; later ones may use earlier"]
    for p in scalars:
        if p.dtype and p.dtype.startswith(("int", "uint")):
            w.append(f'{p.name} = "{FILL}"  # {p.c_type}')
        elif p.dtype:
            w.append(f"{p.name} = 1.0  # {p.c_type}: any value")
    for p in buffers:
        w += ["", f"[buffers.{p.name}]",
              f'dtype = "{p.dtype or FILL}"  # {p.c_type}',
              f'count = "{FILL}"  # its elements: an expression over [params]']
        w.append("init = { random = { seed = 1, low = -1.0, high = 1.0 } }" if p.readonly
                 else "# init: zeros (an output); { random = ... } if the kernel reads it too")
    reads = [p.name for p in buffers if p.readonly]
    writes = [p.name for p in buffers if not p.readonly]
    w += ["", "[transfer]", f"to_device = {toml_list(reads)}  # const: the buffers it reads",
          f"from_device = {toml_list(writes)}  # not const: the buffers it may write", "",
          "[[launch]]",
          f'kernel = "{kernel}"', f'grid = "{FILL}"  # blocks, e.g. "cdiv(n, 256)"',
          f'block = "{FILL}"  # threads per block, e.g. 256',
          "# An integer passed with buffers is read as the count of their elements (checked",
          "# against each buffer's count) unless counts names the buffers it counts:",
          '# counts = ["x"] for some, counts = [] for a size that counts none.',
          "args = [" + ", ".join(arg_text(p) for p in params) + "]"]
    return "\n".join(w) + "\n", cost_text(kernel, reads, writes)


def cost_text(kernel: str, reads: list[str], writes: list[str]) -> str:
    """The cost file's text for one launch of ``kernel``: its bytes named, its FLOPs a FILL."""
    c = ["# What each launch of the workload beside this file moves and computes, for nvstage",
         "# model: fill in each FILL. Loop trip counts are derived from the code; where one",
         "# cannot be, nvstage model names its line and asks for trips = [...] here.",
         "host_memory = \"pinned\"", "", "[[launch]]", f'kernel = "{kernel}"',
         f"reads = {toml_list(reads)}  # read once in full, or {{ name = \"elements\" }}",
         f"writes = {toml_list(writes)}  # written",
         f'flops = "{FILL}"  # floating-point operations of one launch (an FMA is 2)']
    return "\n".join(c) + "\n"


def arg_text(p: Param) -> str:
    """``p`` as one of a launch's ``args``: a buffer's name or a typed scalar."""
    if p.pointer:
        return f'"{p.name}"'
    tag = _TAGS.get(p.dtype or "")
    if tag is None:
        return f'{{ {FILL} = "{p.name}" }}'
    if tag.startswith("f"):
        return f'{{ {tag} = "{p.name}" }}'
    return f'{{ {tag} = "{p.name}", counts = [] }}'


def toml_list(items) -> str:
    """``["a", "b"]``: names as a TOML list of strings."""
    return "[" + ", ".join(f'"{i}"' for i in items) + "]"


def checked_flags(flags) -> tuple[str, ...]:
    """The --flag words, each one a workload's [kernel] flags accepts (else one line)."""
    reader = Reader({}, Path("."), "--flag")
    return reader.flags(list(flags))


def new_files(stem: str) -> tuple[Path, Path]:
    """The workload and cost file ``--init`` writes for ``stem`` (NAME or NAME.toml), neither
    there yet: it writes new files only."""
    target = Path(stem).with_suffix(".toml") if not stem.endswith(".toml") else Path(stem)
    cost = target.with_name(target.stem + ".cost.toml")
    for p in (target, cost):
        if p.exists():
            raise UsageError(f"{p} exists: model --init writes new files only",
                             hint="name others with -o NAME")
    return target, cost


def write_skeleton(path: Path, toolkit, *, kernel: str | None = None,
                   output: str | None = None, flags: tuple[str, ...] = (),
                   include_dirs: tuple[str, ...] = (), triton_words=()) -> list[Path]:
    """Write NAME.toml and NAME.cost.toml for ``kernel`` of ``path`` (the only kernel when
    not named); never over an existing file. Returns the two paths. ``triton_words``
    (--signature, --constexpr) are refused: they are a Triton file's."""
    if any(triton_words):
        raise UsageError(f"{path}: --signature and --constexpr are for a Triton file",
                         hint="a CUDA kernel's parameters come from its declaration")
    if path.suffix == ".py":
        raise UsageError(f"{path}: a Triton file: write_skeleton reads CUDA sources only",
                         hint="init_triton.write_triton_skeleton reads Triton files and "
                              "kept Triton builds")
    found = kernels_of(path, toolkit, flags=flags, include_dirs=include_dirs)
    if not found:
        raise UsageError(f"{path} defines no __global__ kernel")
    if kernel is None:
        if len(found) > 1:
            raise UsageError(f"{path} defines {len(found)} kernels: name one with --kernel",
                             hint="kernels: " + ", ".join(found))
        kernel = next(iter(found))
    if kernel not in found:
        raise UsageError(f"{path} has no kernel {kernel}", hint="kernels: " + ", ".join(found))
    target, cost = new_files(output or (path.stem if len(found) == 1
                                        else re.sub(r"\W", "_", kernel)))
    text, cost_text = skeleton(path, kernel, found[kernel], target.parent or Path("."),
                               flags, include_dirs)
    target.write_text(text)
    cost.write_text(cost_text)
    return [target, cost]
