"""Every launch of a workload checked against the kernels' real parameter lists, and every
buffer against the counts passed with it, before anything touches a GPU."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nvstage.errors import ValidationError
from nvstage.run.workload.signatures import KernelSig, ParamSig
from nvstage.run.workload.spec import BufferArg, Scalar, Workload
from nvstage.run.workload.data import check_npys

# Demangled C type -> (bytes, kind) where kind is "int" | "float" | "bool"
_C_TYPES = {
    "float": (4, "float"), "double": (8, "float"), "__half": (2, "float"),
    "half": (2, "float"), "int": (4, "int"), "unsigned int": (4, "int"),
    "unsigned": (4, "int"), "short": (2, "int"), "unsigned short": (2, "int"),
    "char": (1, "int"), "signed char": (1, "int"), "unsigned char": (1, "int"),
    "long": (8, "int"), "unsigned long": (8, "int"), "long long": (8, "int"),
    "unsigned long long": (8, "int"), "bool": (1, "bool"),
}
# Pointee C type -> compatible buffer dtypes
_POINTEES = {
    "float": {"float32"}, "double": {"float64"}, "__half": {"float16"}, "half": {"float16"},
    "int": {"int32"}, "unsigned int": {"uint32"}, "unsigned": {"uint32"},
    "short": {"int16"}, "unsigned short": {"uint16"}, "char": {"int8", "uint8"},
    "signed char": {"int8"}, "unsigned char": {"uint8"}, "long": {"int64"},
    "unsigned long": {"uint64"}, "long long": {"int64"}, "unsigned long long": {"uint64"},
}


@dataclass(frozen=True)
class Finding:
    """A validation result: an error stops the run, a note is printed and the run goes on."""

    level: str  # "error" | "note"
    message: str
    where: str = ""


def validate(w: Workload, sigs: Mapping[str, KernelSig] | None) -> list[Finding]:
    """Check every launch against the kernels' parameter lists and every buffer's size
    (and the contents of each buffer that starts from a .npy file: ``WorkloadError``).

    ``sigs`` None means no PTX was available (a cubin without a ptx key): names and
    arguments are then checked after the module is loaded, from the driver's own lists.
    """
    findings: list[Finding] = []
    values = w.param_values()
    counts = {b.name: w.element_count(b, values) for b in w.buffers}
    check_npys(w, values)  # a .npy of the wrong kind fails here, not on the GPU
    for i, lz in enumerate(w.launches):
        where = w._where(f"launch[{i}]")
        w.dims(i, values)
        scalar_values = {}
        for j, a in enumerate(lz.args):
            if isinstance(a, Scalar):
                scalar_values[j] = w.scalar_value(a, values, w._where(f"launch[{i}]",
                                                                     f"args[{j}]"))
        if sigs is None:
            findings.append(Finding("note", f"no PTX for {lz.kernel}: arguments are checked "
                                    "against the loaded module instead", where))
        else:
            sig = sigs.get(lz.kernel)
            if sig is None:
                known = sorted({s.demangled if s.demangled != s.mangled else s.mangled
                                for s in sigs.values()})
                findings.append(Finding("error", f"no kernel named {lz.kernel!r} in the "
                                        f"module (it has: {', '.join(known) or 'none'})",
                                        w._where(f"launch[{i}]", "kernel")))
                continue
            findings += _check_args(w, i, lz, sig, scalar_values, counts)
        findings += _check_counts(w, i, lz, scalar_values, counts)
    return findings


def _check_args(w, i, lz, sig: KernelSig, scalar_values, counts) -> list[Finding]:
    out = []
    kname = sig.demangled if sig.demangled != sig.mangled else sig.mangled
    if len(lz.args) != len(sig.params):
        out.append(Finding("error", f"kernel {kname} takes {len(sig.params)} argument(s), "
                           f"the workload passes {len(lz.args)}",
                           w._where(f"launch[{i}]", "args")))
        return out
    for j, (a, p) in enumerate(zip(lz.args, sig.params)):
        where = w._where(f"launch[{i}]", f"args[{j}]")
        label = f"kernel {kname} argument {j} ({p.describe()})"
        if isinstance(a, BufferArg):
            if p.size != 8 or p.is_pointer is False:
                out.append(Finding("error", f"{label} is not a pointer, but the workload "
                                   f"passes buffer {a.buffer}", where))
                continue
            b = w.buffer(a.buffer)
            pointee = p.pointee
            if pointee and pointee in _POINTEES and b.dtype not in _POINTEES[pointee]:
                out.append(Finding("error", f"{label} points to {pointee}, but buffer "
                                   f"{b.name} is {b.dtype}", where))
        else:
            if p.is_pointer:
                out.append(Finding("error", f"{label} is a pointer, but the workload passes "
                                   f"a scalar {a.tag}", where))
                continue
            if a.size != p.size:
                out.append(Finding("error", f"{label} is {p.size} bytes wide, but the "
                                   f"workload passes {a.tag} ({a.size} bytes)", where))
                continue
            kind = _param_kind(p)
            if kind and (kind == "float") != a.is_float:
                what = "a floating-point" if kind == "float" else "an integer"
                out.append(Finding("error", f"{label} is {what} parameter, but the workload "
                                   f"passes {a.tag}", where))
            elif p.c_type and p.c_type in _C_TYPES and a.tag.startswith("u") != \
                    p.c_type.startswith("unsigned") and _C_TYPES[p.c_type][1] == "int":
                out.append(Finding("note", f"{label}: signedness differs from {a.tag} "
                                   "(same width, passed as is)", where))
    return out


def _param_kind(p: ParamSig) -> str | None:
    if p.c_type and p.c_type in _C_TYPES:
        return _C_TYPES[p.c_type][1]
    if p.ptx_type.startswith("f"):
        return "float"
    if p.ptx_type.startswith(("s", "u")):
        return "int"
    return None  # .b32 and friends say nothing about the kind


def _check_counts(w, i, lz, scalar_values, counts) -> list[Finding]:
    """An integer scalar counts the elements of the buffers passed with it.

    By default a bare parameter name (``{i32 = "n"}``) counts every buffer in the launch;
    ``counts = [...]`` names the buffers it counts when that is not so (a reduction's output,
    a histogram's bins).
    """
    out = []
    buffers = [a.buffer for a in lz.args if isinstance(a, BufferArg)]
    for j, a in enumerate(lz.args):
        if not isinstance(a, Scalar) or a.is_float:
            continue
        if a.counts is not None:
            targets = a.counts
        elif isinstance(a.expr, str) and a.expr.strip().isidentifier():
            targets = tuple(buffers)
        else:
            continue
        value = scalar_values[j]
        for bname in targets:
            if bname not in buffers:
                out.append(Finding("error", f"counts names {bname}, which is not passed to "
                                   f"this launch", w._where(f"launch[{i}]", f"args[{j}]")))
            elif value > counts[bname]:
                how = ("" if a.counts is not None else
                       f" (a bare name counts the elements of every buffer the launch passes; "
                       f"if it is not a count, write {{ {a.tag} = \"{a.expr}\", counts = [] }}"
                       f", or name the buffers it counts: counts = [\"{buffers[-1]}\"])")
                out.append(Finding(
                    "error",
                    f"kernel {lz.kernel} argument {j} ({a.tag} {a.expr} = {value}) exceeds "
                    f"the {counts[bname]} elements of buffer {bname}{how}",
                    w._where(f"launch[{i}]", f"args[{j}]")))
    return out


def raise_on_errors(findings: list[Finding]) -> list[Finding]:
    """Raise ``ValidationError`` if any finding is an error; return the notes."""
    if any(f.level == "error" for f in findings):
        raise ValidationError(findings)
    return [f for f in findings if f.level != "error"]
