"""``nvstage model --init FILE.py`` and ``--init DIR.triton``: a commented workload and cost
file to fill in for a ``@triton.jit`` kernel.

A workload names a kept Triton build, never the Python file (a workload is a document and runs
no code), and the Python file is only read here, never imported or run: the kernel's parameters
and which of them are ``tl.constexpr`` come from its AST (``triton_source``), each other
parameter's type from ``--signature`` (as ``nvstage compile --via triton`` takes it), and the
workload names the keep folder that the ``nvstage compile`` command written beside it keeps. A
kept build gives all of that from its manifest's ``triton`` section, constexpr values too.
Which buffers the kernel loads and which it stores is read from the AST: ``tl.load``,
``tl.store`` and atomics (and a tensor descriptor's ``load``/``store``) on expressions built
from the parameter.
"""

from __future__ import annotations

import ast
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

from nvstage.compiler.manifest.model import load_build
from nvstage.compiler.manifest.triton_info import triton_info
from nvstage.compiler.triton.stages import parse_constexpr, parse_signature
from nvstage.compiler.triton.triton_source import jit_functions
from nvstage.errors import NvstageError, UsageError
from nvstage.model.init import FILL, Param, arg_text, cost_text, new_files, toml_list

# Triton's types -> the workload's dtypes (bf16, fp8 and i1 have none: left to fill in).
_DTYPES = {"fp16": "float16", "fp32": "float32", "fp64": "float64", "i8": "int8",
           "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16",
           "u32": "uint32", "u64": "uint64"}
DEFAULT_ARCH = "sm_90"  # the H100's and H200's: the command's arch when none is known


@dataclass(frozen=True)
class TritonParam:
    """One parameter of a Triton kernel as a workload sees it."""

    name: str
    type: str  # Triton's ("*fp32", "i32"), or "constexpr": compiled in, not an argument
    value: object = None  # a constexpr's value; None: not known (a FILL)


@dataclass(frozen=True)
class TritonKernelSpec:
    """What the skeleton is written from."""

    kernel: str  # the Python function
    symbol: str  # what a launch names (Triton's metadata name)
    params: tuple[TritonParam, ...]
    source: Path | None  # the Python file (None: a build whose source is gone)
    build: Path | None  # a kept build, or None: the workload names the one to make
    arch: str
    threads: int | None = None  # num_warps x 32, from a build
    tuned: tuple[str, ...] = ()  # its @triton.autotune / @triton.heuristics, left out


def is_triton_input(path: Path) -> bool:
    """A Python file or a folder (a kept build): what this module initialises from."""
    return path.suffix == ".py" or path.is_dir()


def _is_constexpr(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.split(".")[-1] == "constexpr"  # a quoted "tl.constexpr"
    return (isinstance(annotation, ast.Attribute) and annotation.attr == "constexpr") or \
        (isinstance(annotation, ast.Name) and annotation.id == "constexpr")


def _literal(node: ast.expr | None) -> object:
    if node is None:
        return None
    try:
        v = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    return v if isinstance(v, (bool, int, float, str)) else None


def _source_params(fn: ast.FunctionDef) -> list[tuple[str, bool, object]]:
    """(name, is a constexpr, its default) for each parameter of ``fn``, in order."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out = [(x.arg, _is_constexpr(x.annotation), _literal(d))
           for x, d in zip(positional, defaults)]
    out += [(x.arg, _is_constexpr(x.annotation), _literal(d))
            for x, d in zip(a.kwonlyargs, a.kw_defaults)]
    return out


def _entry_points(jits: dict[str, ast.FunctionDef]) -> list[str]:
    """The ``@triton.jit`` functions no other one calls: the kernels a launch can name."""
    called = {n.func.id for fn in jits.values() for n in ast.walk(fn)
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    return [name for name in jits if name not in called] or list(jits)


def buffer_use(fn: ast.FunctionDef, pointers: list[str]) -> tuple[set[str], set[str]]:
    """(loaded, stored): the pointer parameters a ``tl.load``/``tl.store`` (or atomic, or a
    descriptor's ``load``/``store``) reaches through the kernel's own assignments."""
    derived = {p: {p} for p in pointers}
    changed = True
    while changed:  # to a fixed point: a loop's assignments may feed an earlier one
        changed = False
        for n in ast.walk(fn):
            if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value:
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                roots = _roots(n.value, derived)
                for t in targets:
                    for name in (x.id for x in ast.walk(t) if isinstance(x, ast.Name)):
                        if not roots <= derived.setdefault(name, set()):
                            derived[name] |= roots
                            changed = True
            elif isinstance(n, ast.For):  # for p in (a_ptr, b_ptr): p is either
                roots = _roots(n.iter, derived)
                for name in (x.id for x in ast.walk(n.target) if isinstance(x, ast.Name)):
                    if not roots <= derived.setdefault(name, set()):
                        derived[name] |= roots
                        changed = True
    loaded, stored = set(), set()
    for n in ast.walk(fn):
        if not isinstance(n, ast.Call):
            continue
        f, op = n.func, _op(n.func)
        if op not in ("load", "store") and not (op or "").startswith("atomic_"):
            continue
        on_descriptor = isinstance(f, ast.Attribute) and bool(_roots(f.value, derived))
        target = f.value if on_descriptor else (n.args[0] if n.args else next(
            (k.value for k in n.keywords if k.arg in ("pointer", "ptr", "desc")), None))
        roots = _roots(target, derived) if target is not None else set()
        if op == "load":
            loaded |= roots
        else:
            stored |= roots
            if op != "store":  # an atomic reads what it updates
                loaded |= roots
    return loaded, stored


def _roots(node: ast.AST, derived: dict[str, set[str]]) -> set[str]:
    """The pointer parameters ``node``'s value is built from; a value loaded through one is
    data, not that pointer (``tl.load(idx_ptr + i)`` used as an offset)."""
    out: set[str] = set()
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.Call) and _op(n.func) == "load":
            continue
        if isinstance(n, ast.Name):
            out |= derived.get(n.id, set())
        todo.extend(ast.iter_child_nodes(n))
    return out


def _op(f: ast.expr) -> str | None:
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def from_source(path: Path, kernel: str | None, signature: str | None,
                constexprs: tuple[str, ...] = (), arch: str | None = None
                ) -> tuple[TritonKernelSpec, ast.FunctionDef]:
    """The kernel of a Python file as its AST and ``--signature`` give it (nothing run);
    ``arch``: what its build command builds for (the H100's and H200's when None)."""
    jits = jit_functions(path)
    kernel = _which_kernel(path, jits, kernel)
    fn = jits[kernel]
    declared = _source_params(fn)
    names = [n for n, _, _ in declared]
    consts = {n: d for n, c, d in declared if c}
    if not signature:
        raise UsageError(f"{path.name}: model --init needs the Triton type of each of "
                         f"{kernel}'s parameters {', '.join(n for n in names if n not in consts)}"
                         ": pass --signature, or name a kept build (nvstage model --init "
                         "DIR.triton)", hint="--signature as nvstage compile --via triton takes "
                                             "it: 'x:*fp32,n:i32' (pointers *fp32, *fp16, ...; "
                                             "scalars i32, i64, fp32, ...)")
    types = dict(parse_signature(signature))
    given = dict(parse_constexpr(c) for c in constexprs)
    for n in [*types, *given]:
        if n not in names:
            raise UsageError(f"{kernel} has no parameter {n!r}",
                             hint=f"its parameters: {', '.join(names)}")
    for n in types:
        if n in consts:
            raise UsageError(f"--signature gives a type to {kernel}'s constexpr {n}",
                             hint=f"a constexpr is compiled in: --constexpr {n}=VALUE")
    for n in given:
        if n not in consts:
            raise UsageError(f"--constexpr {n}: {kernel}'s {n} is not a tl.constexpr",
                             hint=f"give its type in --signature: '{n}:i32'")
    missing = [n for n in names if n not in consts and n not in types]
    if missing:
        raise UsageError(f"--signature gives no type for {kernel}'s parameter "
                         f"{', '.join(missing)}", hint="e.g. --signature 'x:*fp32,n:i32' "
                                                       "(constexprs go in --constexpr)")
    params = tuple(TritonParam(n, "constexpr", given.get(n, consts[n])) if n in consts
                   else TritonParam(n, types[n]) for n in names)
    tuned = tuple(name for d in fn.decorator_list
                  if (name := _decorator_name(d)) in ("autotune", "heuristics"))
    return TritonKernelSpec(kernel, kernel, params, path, None, arch or DEFAULT_ARCH,
                            tuned=tuned), fn


def _decorator_name(d: ast.expr) -> str | None:
    target = d.func if isinstance(d, ast.Call) else d
    return target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)


def _which_kernel(path: Path, jits: dict, kernel: str | None) -> str:
    if not jits:
        raise UsageError(f"{path} defines no @triton.jit function")
    if kernel is None:
        entry = _entry_points(jits)
        if len(entry) > 1:
            raise UsageError(f"{path} defines {len(entry)} Triton kernels: name one with "
                             "--kernel", hint="kernels: " + ", ".join(entry))
        return entry[0]
    if kernel not in jits:
        raise UsageError(f"{path} has no @triton.jit function {kernel}",
                         hint="kernels: " + ", ".join(_entry_points(jits)))
    return kernel


def from_build(folder: Path, kernel: str | None) -> tuple[TritonKernelSpec, ast.FunctionDef | None]:
    """The kernel of a kept Triton build, as its manifest records it (read as a document)."""
    try:
        build = load_build(folder)
    except NvstageError as e:
        raise UsageError(f"{folder}: {e.message}",
                         hint="name a keep folder of nvstage compile --via triton") from None
    info = triton_info(build)
    if info is None:
        raise UsageError(f"{folder} is a build through {build.via}, not Triton",
                         hint="model --init reads a .cu file from its source")
    if build.status != "ok":
        raise UsageError(f"{folder}: the build's status is {build.status!r}, not 'ok'")
    if kernel is not None and kernel not in (info.kernel, info.name):
        raise UsageError(f"{folder} holds {info.kernel}, not {kernel}")
    consts = dict(info.constexprs)
    params = tuple(TritonParam(n, t, consts.get(n)) for n, t in info.signature)
    source = Path(build.source) if build.source else None
    fn = None
    if source is not None and source.suffix == ".py":
        try:
            fn = jit_functions(source).get(info.kernel)
        except UsageError:  # gone or changed since the build: loads and stores unknown
            fn = None
    return TritonKernelSpec(info.kernel, info.name, params, source, folder, info.arch,
                            info.threads), fn


def build_command(spec: TritonKernelSpec, source: str, keep: str) -> str:
    """The ``nvstage compile`` that keeps the build the workload names."""
    sig = ",".join(f"{p.name}:{p.type}" for p in spec.params if p.type != "constexpr")
    argv = ["nvstage", "compile", source, "--via", "triton", "--kernel", spec.kernel,
            "--signature", sig]
    for p in spec.params:
        if p.type == "constexpr":
            argv += ["--constexpr", f"{p.name}={FILL if p.value is None else _value(p.value)}"]
    return shlex.join([*argv, "--arch", spec.arch, "--keep-dir", keep])


def _value(v: object) -> str:
    return str(v).lower() if isinstance(v, bool) else str(v)


def skeleton(spec: TritonKernelSpec, fn: ast.FunctionDef | None, out_dir: Path,
             keep: str = "", command: str = "") -> tuple[str, str]:
    """The workload's and the cost file's text for one Triton kernel; ``keep`` and
    ``command``: the keep folder it names (beside it) and how to build it, for a source."""
    args = [p for p in spec.params if p.type != "constexpr"]
    buffers = [p for p in args if p.type.startswith("*")]
    loaded, stored = buffer_use(fn, [p.name for p in buffers]) if fn is not None \
        else (set(), set())
    unseen = [p.name for p in buffers if p.name not in loaded | stored]
    reads = [p.name for p in buffers if p.name in loaded or p.name in unseen]
    writes = [p.name for p in buffers if p.name in stored or p.name in unseen]
    where = spec.source.name if spec.source else "its source"
    w = [f"# A workload for {spec.kernel} of {where}, written by nvstage model --init: fill in",
         f"# each {FILL}, then check it with nvstage run THIS.toml --dry-run (the kernel's",
         "# parameters against the arguments below) and estimate it with nvstage model."]
    if spec.build is None:
        w += ["# It names a kept build of the kernel, never the Python file: build it first",
              "# (for the arch of the GPU you model; each constexpr as in [params]):",
              f"#   {command}"]
        for t in spec.tuned:
            w += [f"# {spec.kernel} is under @triton.{t}, which the build leaves out: give "
                  "one config's", "# constexprs, and its num_warps and num_stages as "
                  "--num-warps and --num-stages."]
        w += ["[kernel]", f'triton = "{keep}"']
    else:
        rel = os.path.relpath(spec.build.resolve(), out_dir.resolve())
        w += [f"# It names the kept build {spec.build.name}: {spec.symbol} for {spec.arch}, "
              f"{spec.threads} threads", "# a program; model it with a GPU of that arch.",
              "[kernel]", f'triton = "{rel}"']
    w += ["", "[params]",
          "# one per integer argument, by its name in the source; later ones may use earlier"]
    for p in args:
        if p.type.startswith("*"):
            continue
        if p.type[0] in "iu" and p.type != "i1":
            w.append(f'{p.name} = "{FILL}"  # {p.type}')
        else:
            w.append(f"{p.name} = 1.0  # {p.type}: any value")
    consts = [p for p in spec.params if p.type == "constexpr"]
    if consts:
        w.append("# tl.constexpr values, compiled into the build (not arguments): for grid")
    for p in consts:
        if p.value is None:
            w.append(f'{p.name} = "{FILL}"  # the build\'s --constexpr {p.name}; a number, '
                     "or delete the line")
        elif isinstance(p.value, (int, float)) and not isinstance(p.value, bool):
            w.append(f"{p.name} = {p.value}  # as " + ("built" if spec.build else "compiled"))
        else:
            w.append(f"# {p.name} = {_value(p.value)!r}  (not a number)")
    for p in buffers:
        dtype = _DTYPES.get(p.type.lstrip("*k"))
        w += ["", f"[buffers.{p.name}]", f'dtype = "{dtype or FILL}"  # {p.type}',
              f'count = "{FILL}"  # its elements: an expression over [params]']
        w.append("init = { random = { seed = 1, low = -1.0, high = 1.0 } }" if p.name in reads
                 else "# init: zeros (stored, never loaded); { random = ... } to start "
                      "from data")
    note = f"  # not seen loaded or stored in {spec.kernel}: check" if unseen else ""
    w += ["", "[transfer]", f"to_device = {toml_list(reads)}  # the buffers it loads{note}",
          f"from_device = {toml_list(writes)}  # the buffers it stores", "",
          "[[launch]]", f'kernel = "{spec.symbol}"',
          f'grid = "{FILL}"  # programs (blocks), e.g. "cdiv(n, BLOCK)"',
          "# block and dynamic shared memory come from the build (num_warps x 32 threads).",
          "# An integer passed with buffers is read as the count of their elements (checked",
          "# against each buffer's count) unless counts names the buffers it counts:",
          '# counts = ["x"] for some, counts = [] for a size that counts none.',
          "args = [" + ", ".join(arg_text(_as_param(p)) for p in args) + "]"]
    return "\n".join(w) + "\n", cost_text(spec.symbol, reads, writes)


def _as_param(p: TritonParam) -> Param:
    base = p.type.lstrip("*k")
    return Param(p.name, p.type, p.type.startswith("*"), _DTYPES.get(base))


def write_triton_skeleton(path: Path, *, kernel: str | None = None, output: str | None = None,
                          signature: str | None = None, constexprs: tuple[str, ...] = (),
                          nvcc_words: list[str] | tuple[str, ...] = (),
                          arch: str | None = None) -> tuple[list[Path], str | None]:
    """Write NAME.toml and NAME.cost.toml for a Triton kernel of ``path`` (a Python file,
    with ``signature``) or of a kept build (a folder); never over an existing file. Returns
    the two paths and, for a Python file, the command that keeps the build they name.
    ``nvcc_words`` (-I, --flag) are refused: Triton builds take none. ``arch``: the GPU's
    (``--gpu``), for the build command."""
    if nvcc_words:
        raise UsageError(f"{path}: -I and --flag are nvcc's, and a Triton kernel is not built "
                         "by nvcc", hint="leave them out (--signature and --constexpr are "
                                         "Triton's)")
    if path.is_dir():
        if signature or constexprs:
            raise UsageError(f"{path} is a kept build: its signature and constexprs are "
                             "its own", hint="leave out --signature and --constexpr")
        spec, fn = from_build(path, kernel)
    else:
        spec, fn = from_source(path, kernel, signature, constexprs, arch)
    target, cost = new_files(output or spec.kernel)
    keep, command = f"{target.stem}.triton", None
    if spec.build is None:
        command = build_command(spec, str(path), str(target.parent / keep))
    text, cost_text_ = skeleton(spec, fn, target.parent, keep, command or "")
    target.write_text(text)
    cost.write_text(cost_text_)
    return [target, cost], (f"then build what {target} names: {command}" if command else None)
