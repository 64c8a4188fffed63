"""PTX text -> ``PtxModule``: ISA version, target, every ``.entry`` with its parameters. Pure
except for demangling (one c++filt call for all names)."""

from __future__ import annotations

import re

from ..errors import ArtifactError
from .names import demangle_all
from .records import PtxEntry, PtxModule, PtxParam

_VERSION = re.compile(r"^\s*\.version\s+(\d+\.\d+)\s*$", re.M)
_TARGET = re.compile(r"^\s*\.target\s+([\w, ]+?)\s*$", re.M)
_ADDR = re.compile(r"^\s*\.address_size\s+(\d+)\s*$", re.M)
_ENTRY = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern)\s+)*\.entry\s+([A-Za-z_$%][\w$%.]*)",
                    re.M)
_PARAM = re.compile(
    r"^\.param\s+(?P<mods>(?:\.\w+\s+|\.align\s+\d+\s+)*?)\.(?P<type>[a-z]+\d*(?:x\d+)?)"
    r"\s+(?P<mods2>(?:\.\w+\s+|\.align\s+\d+\s+)*)(?P<name>[A-Za-z_$%][\w$%]*)"
    r"\s*(?:\[\s*(?P<count>\d+)\s*\])?$")
_MAXNTID = re.compile(r"\.maxntid\s+(\d+(?:\s*,\s*\d+){0,2})")
_TYPE_BITS = re.compile(r"^[bsuf](\d+)(?:x(\d+))?$")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def _size_of(ptx_type: str) -> int:
    if ptx_type == "pred":
        return 1
    m = _TYPE_BITS.match(ptx_type) or (re.match(r"^bf(16)(?:x(2))?$", ptx_type))
    if not m:
        raise ArtifactError(f"PTX parameter has an unknown type .{ptx_type}")
    bits = int(m.group(1)) * int(m.group(2) or 1)
    if bits % 8:
        raise ArtifactError(f"PTX parameter type .{ptx_type} is not a whole number of bytes")
    return bits // 8


def parse_param(decl: str) -> PtxParam:
    """One ``.param`` declaration, e.g. ``.param .align 8 .b8 p[16]`` or ``.param .u64 .ptr
    .global .align 1 x``."""
    decl = " ".join(decl.split())
    m = _PARAM.match(decl)
    if not m:
        raise ArtifactError(f"cannot read PTX parameter declaration: {decl[:80]!r}")
    mods = (m.group("mods") + " " + m.group("mods2")).split()
    ptx_type = m.group("type")
    elem = _size_of(ptx_type)
    count = int(m.group("count")) if m.group("count") is not None else 1
    align = elem
    if ".align" in mods:
        align = int(mods[mods.index(".align") + 1])
        if align <= 0 or align & (align - 1):
            raise ArtifactError(f"PTX parameter {m.group('name')} has alignment {align}, "
                                "not a power of two")
    # .ptr is explicit; nvcc writes plain pointers as .u64, so a 64-bit integer may be one.
    is_pointer = ".ptr" in mods or (ptx_type in ("u64", "b64", "s64") and count == 1)
    return PtxParam(m.group("name"), ptx_type, elem * count, align, is_pointer)


def _split_params(body: str, entry: str) -> tuple[PtxParam, ...]:
    body = body.strip()
    if not body:
        return ()
    return tuple(parse_param(p) for p in body.split(",") if p.strip() or _bad(entry))


def _bad(entry: str) -> bool:
    raise ArtifactError(f"PTX entry {entry} has an empty parameter in its list")


def _block_end(text: str, start: int, entry: str) -> int:
    """Index just past the ``}`` closing the body that opens at or after ``start``."""
    depth, i = 0, text.find("{", start)
    if i < 0:
        raise ArtifactError(f"PTX entry {entry} has no body")
    for j in range(i, len(text)):
        c = text[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    raise ArtifactError(f"PTX entry {entry} is not closed (is the file truncated?)")


def parse_ptx(text: str, *, demangle: bool = True) -> PtxModule:
    """Read a PTX module. Raises ``ArtifactError`` for text that is not PTX or is cut short."""
    if not isinstance(text, str):
        raise ArtifactError("PTX must be text")
    if "\x00" in text:
        text = text.split("\x00", 1)[0]  # extracted PTX may carry its C string terminator
    code = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    version, target = _VERSION.search(code), _TARGET.search(code)
    if not version or not target:
        missing = " and ".join(n for n, v in ((".version", version), (".target", target))
                               if not v)
        raise ArtifactError(f"not PTX: no {missing} directive")
    addr = _ADDR.search(code)
    raw = []
    for m in _ENTRY.finditer(code):
        name = m.group(1)
        open_ = m.end()
        rest = code[open_:]
        params: tuple[PtxParam, ...] = ()
        head_end = open_
        stripped = rest.lstrip()
        if stripped.startswith("("):
            p0 = open_ + (len(rest) - len(stripped))
            p1 = code.find(")", p0)
            if p1 < 0:
                raise ArtifactError(f"PTX entry {name}: parameter list is not closed")
            params = _split_params(code[p0 + 1:p1], name)
            head_end = p1 + 1
        end = _block_end(code, head_end, name)
        body_start = code.find("{", head_end)
        directives = code[head_end:body_start]
        nt = _MAXNTID.search(directives)
        max_ntid = tuple(int(x) for x in nt.group(1).split(",")) if nt else None
        first = code.count("\n", 0, m.start())
        last = code.count("\n", 0, end - 1)
        raw.append((name, params, last - first + 1, max_ntid))
    names = demangle_all([r[0] for r in raw]) if demangle else {r[0]: r[0] for r in raw}
    entries = tuple(PtxEntry(n, names[n], p, lc, mt) for n, p, lc, mt in raw)
    return PtxModule(
        version=version.group(1),
        target=target.group(1).split(",")[0].strip(),
        address_size=int(addr.group(1)) if addr else 64,
        entries=entries,
        line_count=len(text.splitlines()),
    )


def read_ptx(path) -> PtxModule:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return parse_ptx(f.read())
    except OSError as e:
        raise ArtifactError(f"cannot read {path}: {e.strerror}") from e
