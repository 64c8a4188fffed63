"""PTX text -> ``PtxModule``: ISA version, target, every ``.entry`` with its parameters. Pure
except for demangling (one c++filt call for all names)."""

from __future__ import annotations

import re

from nvstage.errors import ArtifactError
from nvstage.inspect.names import demangle_all
from nvstage.inspect.records import PtxEntry, PtxModule, PtxParam
from nvstage.files import read_regular

# Line-anchored patterns use [ \t], never \s: \s also matches newlines, and "^\s*" then
# re-scanned every run of blank lines from each of its lines (quadratic: 20,000 empty lines
# took a second, a long run of spaces after .target did not finish).
_VERSION = re.compile(r"^[ \t]*\.version[ \t]+(\d+\.\d+)[ \t]*$", re.M)
_TARGET = re.compile(r"^[ \t]*\.target[ \t]+(\w+(?:[ \t]*,[ \t]*\w+)*)[ \t]*$", re.M)
_ADDR = re.compile(r"^[ \t]*\.address_size[ \t]+(\d+)[ \t]*$", re.M)
_ENTRY = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern)\s+)*\.entry\s+([A-Za-z_$%][\w$%.]*)",
                    re.M)
_PARAM = re.compile(
    r"^\.param\s+(?P<mods>(?:\.\w+\s+|\.align\s+\d+\s+)*?)\.(?P<type>[a-z]+\d*(?:x\d+)?)"
    r"\s+(?P<mods2>(?:\.\w+\s+|\.align\s+\d+\s+)*)(?P<name>[A-Za-z_$%][\w$%]*)"
    r"\s*(?:\[\s*(?P<count>\d+)\s*\])?$")
_MAXNTID = re.compile(r"\.maxntid\s+(\d+(?:\s*,\s*\d+){0,2})")
_TYPE_BITS = re.compile(r"^[bsuf](\d+)(?:x(\d+))?$")
# An unclosed /* runs to the end of the text, in one match (trying each /* to the end
# again would be quadratic).
_COMMENT = re.compile(r"//[^\n]*|/\*.*?(?:\*/|\Z)", re.S)
_SPACE = re.compile(r"\s*")
_MAX_DECL = 4096  # characters in one .param declaration; real ones are under a hundred


def _num(digits: str) -> int:
    """A number written in the PTX. More than 18 digits is no size, count or alignment,
    and past 4300 digits int() itself raises a ValueError."""
    digits = digits.strip()
    if not digits.isdigit() or len(digits) > 18:
        raise ArtifactError(f"PTX has a number no reader expects: {digits[:20]!r}"
                            + ("..." if len(digits) > 20 else ""))
    return int(digits)


def _size_of(ptx_type: str) -> int:
    if ptx_type == "pred":
        return 1
    m = _TYPE_BITS.match(ptx_type) or (re.match(r"^bf(16)(?:x(2))?$", ptx_type))
    if not m:
        raise ArtifactError(f"PTX parameter has an unknown type .{ptx_type}")
    bits = _num(m.group(1)) * _num(m.group(2) or "1")
    if bits % 8:
        raise ArtifactError(f"PTX parameter type .{ptx_type} is not a whole number of bytes")
    return bits // 8


def parse_param(decl: str) -> PtxParam:
    """One ``.param`` declaration, e.g. ``.param .align 8 .b8 p[16]`` or ``.param .u64 .ptr
    .global .align 1 x``."""
    decl = " ".join(decl.split())
    m = _PARAM.match(decl) if len(decl) <= _MAX_DECL else None
    if not m:
        raise ArtifactError(f"cannot read PTX parameter declaration: {decl[:80]!r}")
    mods = (m.group("mods") + " " + m.group("mods2")).split()
    ptx_type = m.group("type")
    elem = _size_of(ptx_type)
    count = _num(m.group("count")) if m.group("count") is not None else 1
    align = elem
    if ".align" in mods:
        align = _num(mods[mods.index(".align") + 1])
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
    # Entries in order, each searched for after the previous body, and lines counted from
    # a cursor: one pass over the text whatever it holds.
    pos, line_pos, line = 0, 0, 0
    while (m := _ENTRY.search(code, pos)) is not None:
        name = m.group(1)
        open_ = m.end()
        params: tuple[PtxParam, ...] = ()
        head_end = open_
        p0 = _SPACE.match(code, open_).end()  # no slice of the rest: one copy per entry
        if code.startswith("(", p0):
            p1 = code.find(")", p0)
            if p1 < 0:
                raise ArtifactError(f"PTX entry {name}: parameter list is not closed")
            params = _split_params(code[p0 + 1:p1], name)
            head_end = p1 + 1
        end = _block_end(code, head_end, name)
        body_start = code.find("{", head_end)
        directives = code[head_end:body_start]
        nt = _MAXNTID.search(directives)
        max_ntid = tuple(_num(x) for x in nt.group(1).split(",")) if nt else None
        line += code.count("\n", line_pos, m.start())
        first = line
        line += code.count("\n", m.start(), end - 1)
        line_pos = end - 1
        raw.append((name, params, line - first + 1, max_ntid))
        pos = end
    names = demangle_all([r[0] for r in raw]) if demangle else {r[0]: r[0] for r in raw}
    entries = tuple(PtxEntry(n, names[n], p, lc, mt) for n, p, lc, mt in raw)
    return PtxModule(
        version=version.group(1),
        target=target.group(1).split(",")[0].strip(),
        address_size=_num(addr.group(1)) if addr else 64,
        entries=entries,
        line_count=len(text.splitlines()),
    )


def read_ptx(path) -> PtxModule:
    """A PTX file: a regular file of at most ``MAX_ARTIFACT_BYTES``; errors name it."""
    return read_ptx_text(path)[0]


def read_ptx_text(path) -> tuple[PtxModule, str]:
    """``read_ptx``'s module, and the text it was read from (read once)."""
    text = read_regular(path, what="PTX file").decode("utf-8", errors="replace")
    try:
        return parse_ptx(text), text
    except ArtifactError as e:  # the parser knows no file name
        raise ArtifactError(f"{path}: {e.message}", hint=e.hint) from None
