"""Why a kernel changed between two builds: which stage the change reached, and what capped
its registers.

- **The stage.** Each kernel's PTX (its ``.entry`` in the PTX the build kept) and SASS (its
  ``.text.<kernel>`` section) are compared between the sides: PTX changed means the change
  reached cicc, the front end (``-maxrregcount`` does: nvcc passes it to cicc as ``-maxreg``
  as well as to ptxas, and llm.c's softmax_forward_kernel4 comes out of cicc otherwise);
  PTX the same and SASS changed means ptxas alone.
- **The register cap** is the one ptxas recorded in the cubin (EIATTR_MAXREG_COUNT,
  ``compiler.nvcc.cubin_figures``): ``-maxrregcount``'s, or the one ``__launch_bounds__``
  implies (the PTX's ``.maxntid``/``.minnctapersm``), or ``__maxnreg__``'s (``.maxnreg``).
  The CUDA Programming Guide: "the value of -maxrregcount is ignored for functions with
  launch bounds"; so a kernel with ``.maxntid`` whose cap is not the build's
  ``-maxrregcount`` is said to have overridden it.
- **Its own SASS bytes**: the kernel's ``.text`` section, not the cubin's size (which holds
  every kernel of the file).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import asdict, dataclass

from nvstage.errors import NvstageError
from nvstage.files import read_regular
from nvstage.compiler.nvcc.cubin_figures import read_figures
from nvstage.inspect.elf import _elf

NO_CAP = 255  # ptxas's cap when nothing limits it (EIATTR_MAXREG_COUNT reads 255)
_ENTRY = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.entry[ \t]+([\w$%.]+)", re.M)
_END = re.compile(r"^\}[ \t]*$", re.M)
_DIRECTIVE = re.compile(r"^[ \t]*\.(maxntid|minnctapersm|maxnreg|reqntid)[ \t]+"
                        r"(\d+(?:[ \t]*,[ \t]*\d+){0,2})", re.M)
_MAXRREG = re.compile(r"^-{1,2}maxrregcount(?:=(\d+))?$")
_ARCH_NUMBER = re.compile(r"_(\d+)")


@dataclass(frozen=True)
class Facts:
    """One kernel of one build, as ``why`` compares it."""

    sass_bytes: int | None = None  # its .text section (padding NOPs included)
    sass_sha256: str | None = None
    ptx_sha256: str | None = None  # its .entry in the kept PTX; None where none was kept
    register_cap: int | None = None  # ptxas's, from the cubin
    maxntid: tuple[int, ...] | None = None  # __launch_bounds__'s threads
    minnctapersm: int | None = None  # __launch_bounds__'s blocks per SM
    maxnreg: int | None = None  # __maxnreg__
    maxrregcount: int | None = None  # the build's -maxrregcount

    def to_json(self) -> dict:
        d = asdict(self)
        d["maxntid"] = list(self.maxntid) if self.maxntid else None
        return d


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def arch_number(arch: str | None) -> str:
    """"90" for sm_90, sm_90a and compute_90: what a kernel's PTX and cubin share."""
    m = _ARCH_NUMBER.search(arch or "")
    return m.group(1) if m else ""


def ptx_entries(text: str) -> dict[str, dict]:
    """Each ``.entry`` of a PTX text: its SHA-256 (from ``.entry`` to its closing brace) and
    its launch directives."""
    out = {}
    starts = list(_ENTRY.finditer(text))
    for m, after in zip(starts, [*starts[1:], None]):
        # to its closing brace, never past the next entry (a PTX with no braces stays linear)
        stop = after.start() if after is not None else len(text)
        end = _END.search(text, m.end(), stop)
        body = text[m.start():end.end() if end else stop]
        head = body.split("{", 1)[0]
        d: dict = {"ptx_sha256": _sha(body.encode())}
        for k, v in _DIRECTIVE.findall(head):
            nums = tuple(int(x) for x in re.split(r"[ \t]*,[ \t]*", v.strip()))
            d[k] = nums if k in ("maxntid", "reqntid") else nums[0]
        out[m.group(1)] = d
    return out


def maxrregcount(options) -> int | None:
    """The -maxrregcount a build gave: its option, or among the flags passed unchanged
    (``-maxrregcount=N``, ``--maxrregcount N``)."""
    given = getattr(options, "maxrregcount", None)
    if given is not None:
        return given
    words = list(getattr(options, "extra", ()) or ())
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name in ("-maxrregcount", "--maxrregcount"):
            value = value if eq else (words[i + 1] if i + 1 < len(words) else "")
            return int(value) if value.isdigit() else None
    return None


def build_facts(build) -> dict[tuple[str, str, bool], Facts]:
    """(mangled kernel, arch number, final) -> its ``Facts``, from the cubins and PTX ``build`` kept
    (a file gone or unreadable gives none for its kernels)."""
    ptx: dict[tuple[str, str], dict] = {}
    for a in build.artifacts:
        if a.kind != "ptx" or not os.path.isfile(a.path):
            continue
        try:
            text = read_regular(a.path, what="PTX file").decode("utf-8", "replace")
        except (NvstageError, OSError):
            continue
        for name, d in ptx_entries(text).items():
            ptx.setdefault((name, arch_number(a.arch or a.name)), d)
    limit = maxrregcount(build.options)
    out: dict[tuple[str, str, bool], Facts] = {}
    for a in build.artifacts:
        if a.kind != "cubin" or not os.path.isfile(a.path):
            continue
        try:
            data = read_regular(a.path)
            figures = read_figures(data, a.path)
            elf = _elf(data, a.path)
        except (NvstageError, OSError):
            continue
        for f in figures:
            number = arch_number(f.arch)
            section = elf.get_section_by_name(f".text.{f.kernel}")
            code = section.data() if section is not None else None
            p = ptx.get((f.kernel, number)) or next(
                (d for (n, _), d in ptx.items() if n == f.kernel), {})
            out.setdefault((f.kernel, number, f.final), Facts(
                f.code_bytes, _sha(code) if code is not None else None, p.get("ptx_sha256"),
                f.max_registers, p.get("maxntid"), p.get("minnctapersm"), p.get("maxnreg"),
                limit))
    return out


def _bounds(f: Facts) -> str:
    """``__launch_bounds__(1024)`` as written, from the PTX's ``.maxntid 1024, 1, 1`` (a
    block of several dimensions as the PTX has it)."""
    dims = list(f.maxntid or ())
    while len(dims) > 1 and dims[-1] == 1:
        dims.pop()
    if len(dims) > 1:
        return f".maxntid {', '.join(map(str, f.maxntid))}"
    blocks = f", {f.minnctapersm}" if f.minnctapersm else ""
    return f"__launch_bounds__({dims[0] if dims else '?'}{blocks})"


def _cap_line(f: Facts, registers: int | None) -> str | None:
    """What capped one side's registers, or None where nothing did."""
    if f.register_cap is None:
        return None
    at = registers is not None and registers >= f.register_cap
    tail = f" (it uses {registers}: at the cap)" if at else ""
    if f.maxnreg is not None:
        return f"__maxnreg__({f.maxnreg}) caps its registers at {f.register_cap}{tail}"
    if f.maxntid:
        if f.maxrregcount is not None and f.maxrregcount != f.register_cap:
            return (f"{_bounds(f)} overrides -maxrregcount={f.maxrregcount}: ptxas caps "
                    f"its registers at {f.register_cap}{tail}")
        if f.register_cap < NO_CAP:
            return f"{_bounds(f)} caps its registers at {f.register_cap}{tail}"
    if f.maxrregcount is not None and f.register_cap < NO_CAP:
        return f"-maxrregcount={f.maxrregcount} caps its registers at {f.register_cap}{tail}"
    return None


def explain(fa: Facts | None, fb: Facts | None, *, same_kernel: bool,
            registers: tuple[int | None, int | None] = (None, None)) -> dict:
    """What one row of a diff says about why: ``ptx`` and ``sass`` ("changed", "same", or
    None where a side lacks it or the two are different kernels), and ``lines``."""
    fa, fb = fa or Facts(), fb or Facts()
    doc: dict = {"ptx": None, "sass": None, "a": fa.to_json(), "b": fb.to_json(), "lines": []}
    lines = doc["lines"]

    def same(x, y):
        return None if x is None or y is None else ("same" if x == y else "changed")

    if same_kernel:
        doc["ptx"], doc["sass"] = same(fa.ptx_sha256, fb.ptx_sha256), \
            same(fa.sass_sha256, fb.sass_sha256)
        if doc["ptx"] == "changed":
            lines.append(("the PTX changed as well as the SASS" if doc["sass"] == "changed"
                          else "the PTX changed, the SASS did not")
                         + ": the change reached cicc, not ptxas alone"
                         + (" (nvcc passes -maxrregcount to cicc as well)"
                            if fa.maxrregcount != fb.maxrregcount else ""))
        elif doc["ptx"] == "same" and doc["sass"] == "changed":
            lines.append("the PTX is the same, the SASS changed: the change reached ptxas "
                         "alone")
        elif doc["ptx"] == "same" and doc["sass"] == "same":
            lines.append("the PTX and the SASS are the same")
    caps = [_cap_line(f, r) for f, r in zip((fa, fb), registers)]
    if caps[0] == caps[1]:
        if caps[0]:
            lines.append(f"both: {caps[0]}")
    else:
        lines += [f"{side}: {c}" for side, c in zip("AB", caps) if c]
    return doc
