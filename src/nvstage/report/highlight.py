"""Syntax highlighting for the code views, by hand: CUDA C++, SASS and PTX, one line at a time,
to escaped HTML with ``<span class="t-...">`` around each token (the page's CSS colours them).

Small on purpose: the page fetches nothing and carries no highlighting library, and the three
languages need only their tokens told apart (keywords and types, numbers, strings, comments,
preprocessor lines; SASS opcodes, registers, predicates, constant banks and labels; PTX
opcodes, registers, labels and directives). Every character of the input comes out escaped,
exactly once: the tests hold the text of the output to the input.
"""

from __future__ import annotations

import html
import re

_CPP_KEYWORDS = frozenset("""
alignas alignof asm auto break case catch class const constexpr consteval const_cast continue
decltype default delete do dynamic_cast else enum explicit export extern false for friend goto
if inline mutable namespace new noexcept nullptr operator private protected public register
reinterpret_cast requires return sizeof static static_assert static_cast struct switch template
this throw true try typedef typeid typename union using virtual volatile while
""".split())
_CPP_TYPES = frozenset("""
bool char char8_t char16_t char32_t double float int long short signed unsigned void wchar_t
size_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t half __half
__nv_bfloat16 half2 __half2 __nv_bfloat162 float2 float3 float4 int2 int3 int4 uint2 uint3
uint4 double2 dim3
""".split())
# CUDA's qualifiers and built-in variables and functions: what makes a line device code.
_CUDA = frozenset("""
__global__ __device__ __host__ __shared__ __constant__ __managed__ __restrict__
__forceinline__ __noinline__ __launch_bounds__ __grid_constant__ threadIdx blockIdx blockDim
gridDim warpSize __syncthreads __syncwarp __shfl_sync __shfl_down_sync __shfl_up_sync
__shfl_xor_sync __ballot_sync __any_sync __all_sync atomicAdd atomicCAS atomicExch atomicMax
atomicMin __ldg __fmaf_rn __expf __logf __sinf __cosf __fdividef
""".split())

_CPP = re.compile(r"""
   (?P<com>//.*)
 | (?P<bcom>/\*.*?(?:\*/|$))
 | (?P<str>"(?:\\.|[^"\\])*"?|'(?:\\.|[^'\\])*'?)
 | (?P<num>\b0[xX][0-9a-fA-F']+[uUlL]*\b|(?:\b\d[\d']*\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFuUlL]*)
 | (?P<id>[A-Za-z_]\w*)
""", re.X)
_PREPROCESSOR = re.compile(r"^\s*#\s*\w+")

_SASS = re.compile(r"""
   (?P<com>//.*)
 | (?P<lbl>`?\(?\.L_x_\d+\)?|\.L\w+:?)
 | (?P<cbank>\bc\[0x[0-9a-fA-F]+\]\[[^\]]*\]|\bdesc\[[^\]]*\])
 | (?P<reg>\b(?:U?R\d+|URZ|RZ|U?P\d|U?PT|SR_\w+|SRZ|B\d+)\b)
 | (?P<num>-?\b0x[0-9a-fA-F]+\b|-?(?<![\w.])\d+(?:\.\d+)?(?:[eE][+-]?\d+)?\b|[+-]?INF\b|\bQNAN\b)
""", re.X)
_SASS_HEAD = re.compile(r"^(\s*)(@!?U?P(?:T|\d+)\s+)?([A-Z][A-Z0-9_]*)((?:\.[A-Za-z0-9_]+)*)")

_PTX = re.compile(r"""
   (?P<com>//.*)
 | (?P<lbl>\$[A-Za-z_]\w*)
 | (?P<reg>%[A-Za-z_]\w*(?:\.[xyzw])?)
 | (?P<num>\b0[fFdD][0-9a-fA-F]+\b|-?\b0[xX][0-9a-fA-F]+\b|-?(?<![\w.%$])\d+(?:\.\d+)?\b)
""", re.X)
_PTX_HEAD = re.compile(r"^(\s*)(@!?%\w+\s+)?([a-z][a-z0-9_]*)((?:\.[A-Za-z0-9_]+)*)")


def _span(cls: str, text: str) -> str:
    return f'<span class="t-{cls}">{html.escape(text, quote=False)}</span>'


def _tokens(pattern, text: str, classify) -> str:
    """``text`` escaped, each match of ``pattern`` wrapped in the span ``classify`` names
    (``classify(match) -> class or None``)."""
    out, pos = [], 0
    for m in pattern.finditer(text):
        cls = classify(m)
        if cls is None:
            continue
        out.append(html.escape(text[pos:m.start()], quote=False))
        out.append(_span(cls, m.group(0)))
        pos = m.end()
    out.append(html.escape(text[pos:], quote=False))
    return "".join(out)


def cuda_lines(lines) -> list[str]:
    """CUDA C++ source lines, highlighted; a ``/* ... */`` comment may run over lines."""
    out = []
    in_comment = False
    for line in lines:
        line = "" if line is None else line
        head = ""
        if in_comment:
            end = line.find("*/")
            if end < 0:
                out.append(_span("com", line) if line else "")
                continue
            head, line, in_comment = _span("com", line[:end + 2]), line[end + 2:], False
        if _PREPROCESSOR.match(line) and not head:
            out.append(_span("pp", line))
            continue
        body = _tokens(_CPP, line, _cpp_class)
        last = None
        for m in _CPP.finditer(line):
            last = m
        if last is not None and last.group("bcom") and not last.group(0).endswith("*/"):
            in_comment = True
        out.append(head + body)
    return out


def _cpp_class(m) -> str | None:
    kind = m.lastgroup
    if kind in ("com", "bcom"):
        return "com"
    if kind != "id":
        return kind
    word = m.group(0)
    if word in _CPP_KEYWORDS:
        return "kw"
    if word in _CPP_TYPES:
        return "ty"
    if word in _CUDA:
        return "cu"
    return None


def sass(text: str) -> str:
    """One SASS instruction (``@!P0 LDG.E.128 R4, desc[UR4][R2.64]``), highlighted."""
    m = _SASS_HEAD.match(text)
    if not m:
        return _tokens(_SASS, text, lambda t: t.lastgroup)
    indent, pred, op, mods = m.groups()
    head = html.escape(indent, quote=False)
    if pred:
        head += _span("pred", pred.rstrip()) + html.escape(pred[len(pred.rstrip()):])
    head += _span("op", op) + (_span("mod", mods) if mods else "")
    return head + _tokens(_SASS, text[m.end():], lambda t: t.lastgroup)


def ptx(text: str) -> str:
    """One PTX statement (``@%p1 bra $L__BB0_2``, ``ld.global.nc.f32 %f1, [%rd8]``)."""
    m = _PTX_HEAD.match(text)
    if not m:
        return _tokens(_PTX, text, lambda t: t.lastgroup)
    indent, pred, op, mods = m.groups()
    head = html.escape(indent, quote=False)
    if pred:
        head += _span("pred", pred.rstrip()) + html.escape(pred[len(pred.rstrip()):])
    head += _span("op", op) + (_span("mod", mods) if mods else "")
    return head + _tokens(_PTX, text[m.end():], lambda t: t.lastgroup)


# The colours, for the page's stylesheet (light theme, as the rest of the page).
CSS = """
.t-kw{color:#a626a4;font-weight:600} .t-ty{color:#0b7285} .t-cu{color:#c2410c;font-weight:600}
.t-num{color:#b45309} .t-str{color:#2f7d32} .t-com{color:#8a8f98;font-style:italic}
.t-pp{color:#7c3aed} .t-op{color:#1d4ed8;font-weight:600} .t-mod{color:#6366f1}
.t-reg{color:#0f766e} .t-pred{color:#be123c;font-weight:600} .t-cbank{color:#9a3412}
.t-lbl{color:#a21caf;font-weight:600}
"""
