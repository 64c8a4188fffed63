"""The one kernel record, and the one way a user's name finds a kernel.

``KernelRecord`` is one kernel on one arch: its resources (registers, spills, stack, shared and
constant memory, barriers) as ptxas and cuobjdump report them, whether those numbers are final
(after an ``-rdc`` device link) or per file, and, where a view reads them too, the SASS
instruction count and the cubin it sits in, and where the source defines it. show, occupancy,
diff, the cross-path comparison, check and the model all hold these records.

A kernel is named the same way everywhere (``matches``, ``KernelNames``): by its mangled
symbol, its demangled signature, or a shorter spelling of it (``ns::scale<float>``,
``scale<float>``, ``scale``), blanks inside template arguments and parameter lists not
counting (``scale<unsigned int>`` as c++filt spells it, ``k<a<int> >`` as ``k<a<int>>``).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass
from nvstage.hw.gpus import parse_arch


# -- names ----------------------------------------------------------------------------------

def top_level(signature: str) -> Iterator[tuple[int, str]]:
    """(index, character) of each character of a C++ signature outside ``<...>`` and
    ``(...)``, the brackets that open a group included (the one scan every reader of a
    demangled name uses: its name, qualifiers and parameter list)."""
    depth = 0
    for i, ch in enumerate(signature):
        if ch in "<(":
            if depth == 0:
                yield i, ch
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            yield i, ch


# How ``inspect.names`` shows a kernel of internal linkage: "clock.cu: f(int*) (static)".
_DECORATED = re.compile(r"^([\w.+-]{1,255}): (.+) \(static\)$", re.S)


def bare(signature: str) -> str:
    """``clock.cu: f(int*) (static)`` -> ``f(int*)``: the signature without the decoration
    ``inspect.names`` gives a kernel of internal linkage; any other name as it is."""
    m = _DECORATED.match(signature.strip())
    return m.group(2) if m else signature


def static_file(signature: str) -> str | None:
    """The file a decorated (internal-linkage) kernel's name names, else None."""
    m = _DECORATED.match(signature.strip())
    return m.group(1) if m else None


def params_at(signature: str) -> int | None:
    """Where a signature's parameter list opens: its last top-level ``(``, when the
    signature ends with the group it opens; None when there is none."""
    s = signature.rstrip()
    if not s.endswith(")"):
        return None
    return max((i for i, ch in top_level(s) if ch == "("), default=None)


def _without_params(demangled: str) -> str:
    """The signature up to its parameter list (the last top-level ``(...)`` group)."""
    s = bare(demangled).strip()
    at = params_at(s)
    return s if at is None else s[:at].strip()


def qualified_name(demangled: str) -> str:
    """``void ns::scale<float>(float*, float, int)`` -> ``ns::scale<float>``: the demangled
    signature without its return type (template functions have one) and parameter list."""
    s = _without_params(demangled)
    # The return type ends at the last top-level space.
    start = max((i + 1 for i, ch in top_level(s) if ch == " "), default=0)
    return s[start:].strip()


def unqualified_name(name: str) -> str:
    """``ns::scale<x::y>`` -> ``scale<x::y>``: after the last "::" outside <...> and (...)."""
    start = max((i + 2 for i, ch in top_level(name) if name.startswith("::", i)), default=0)
    return name[start:]


def base_name(demangled: str) -> str:
    """``void ns::scale<float>(float*, float, int)`` -> ``scale``: what a source file spells."""
    return unqualified_name(qualified_name(demangled)).split("<", 1)[0].strip()


def display_name(demangled: str) -> str:
    """``void ns::scale<unsigned int>(...)`` -> ``scale<unsigned int>``: short, for tables
    (``clock.cu: f (static)`` for a kernel of internal linkage)."""
    short = unqualified_name(qualified_name(demangled)) or bare(demangled)
    file = static_file(demangled)
    return f"{file}: {short} (static)" if file else short


def short_names(demangled: str) -> tuple[str, ...]:
    """``void ns::scale<float>(float*, float, int)`` -> (``void ns::scale<float>``,
    ``ns::scale<float>``, ``ns::scale``, ``scale<float>``, ``scale``): the shorter ways a user
    may name a kernel. Template arguments may hold blanks (``scale<unsigned int>``)."""
    qualified = qualified_name(demangled)
    names = (_without_params(demangled), qualified, qualified.split("<", 1)[0],
             unqualified_name(qualified), base_name(demangled))
    return tuple(dict.fromkeys(n for n in names if n))


def kernel_names(kernel: str, demangled: str = "") -> tuple[str, ...]:
    """Every name a user may give the kernel, the most specific first: the mangled symbol,
    the demangled signature, that without its return type (``ns::scale<float>(float*, int)``),
    then ``short_names``."""
    signature = bare(demangled or kernel).strip()
    head = _without_params(signature)
    no_return = qualified_name(signature) + signature[len(head):].lstrip()
    return tuple(dict.fromkeys(n for n in (kernel, demangled, signature, no_return,
                                           *short_names(signature)) if n))


# A blank matters only between two parts of a word ("unsigned int", "void ns::f"); next to
# punctuation it is spelling (c++filt writes "k<a<int> >" and "f(float*, int)").
_BLANKS = re.compile(r"\s+")
_LOOSE = re.compile(r" ?([<>(),*&:\[\]]) ?")


def spelling(name: str) -> str:
    """``name`` with the blanks that do not separate two words taken out: the form names are
    compared in."""
    return _LOOSE.sub(r"\1", _BLANKS.sub(" ", name.strip()))


def matches(wanted: str | None, kernel: str, demangled: str = "", *,
            glob: bool = False) -> bool:
    """Whether ``wanted`` names the kernel (no name wants every kernel). ``glob``: ``wanted``
    may hold ``*``, ``?`` and ``[...]`` (budget patterns)."""
    if not wanted:
        return True
    want = spelling(wanted)
    names = {spelling(n) for n in kernel_names(kernel, demangled)}
    if glob:
        return any(fnmatch.fnmatchcase(n, want) for n in names)
    return want in names


class KernelNames(Mapping):
    """Kernels by every name ``kernel_names`` gives them, read in ``spelling``. A name two
    kernels share (``scale`` for ``scale<float>`` and ``scale<int>``) names the first; a
    full name always names its own kernel."""

    def __init__(self, items: Iterable = (), names: Callable = lambda x: (x.kernel, x.demangled)):
        self._items: dict[str, object] = {}
        items = list(items)
        named = [(item, kernel_names(*names(item))) for item in items]
        depth = max((len(n) for _, n in named), default=0)
        for level in range(depth):  # the most specific names first, for every kernel
            for item, all_names in named:
                if level < len(all_names):
                    self._items.setdefault(spelling(all_names[level]), item)

    def __getitem__(self, name: str):
        return self._items[spelling(name)]

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and spelling(name) in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def map(self, fn: Callable) -> KernelNames:
        """The same names, each to ``fn(kernel)``."""
        out = KernelNames()
        out._items = {k: fn(v) for k, v in self._items.items()}
        return out


# -- the record ------------------------------------------------------------------------------

# Facts a record carries only when a view (or the cubin) gave them: left out of its JSON when
# absent.
_READ_BY_VIEWS = ("instructions", "image", "image_size", "file", "line",
                  "subroutine_spill_stores", "subroutine_spill_loads")


@dataclass(frozen=True)
class KernelRecord:
    """One kernel on one arch."""

    kernel: str  # mangled
    demangled: str
    arch: str  # "sm_90"
    registers: int | None  # None only where no tool reported the kernel (a cross-path row)
    spill_stores: int | None = 0  # bytes; None: unknown (cuobjdump alone does not say)
    spill_loads: int | None = 0  # bytes; None: unknown
    stack_frame: int = 0  # bytes
    shared_bytes: int = 0  # the kernel's own static shared memory, as ptxas -v prints it
    constant_bytes: int | None = None  # cmem[0]; sm_90+ ptxas omits it, cuobjdump has it
    local_bytes: int | None = None
    barriers: int | None = None
    compile_ms: float | None = None
    source: str = ""  # which tool(s) the numbers came from
    final: bool = True  # False for -rdc per-file numbers before the device link
    # The .nv.shared section as cuobjdump's SHARED (or nvlink -v's smem) prints it: in a linked
    # sm_90+ cubin it also holds the 1 KiB the system reserves per block, which shared_bytes
    # leaves out. None when only ptxas reported.
    shared_section_bytes: int | None = None
    # What the spill figures count. None: ptxas -v's report said so. "spill": read from the
    # cubin, where ptxas marks each spill and refill instruction. "spill or local array":
    # every local-memory store and load of the kernel's SASS (``compiler.cubin_figures``).
    spill_kind: str | None = None
    # Where spill_stores/spill_loads come from: "ptxas -v" (the build's own report, or NVRTC's,
    # nvlink's: the tool named), "cubin" (the spills ptxas marked in the kernel's own code, the
    # rule its -v counts by), "SASS count" (every local store and load, or a manifest from
    # before subroutines were counted apart); None where unknown (``inspect.resources``).
    spill_source: str | None = None
    # What the subroutines ptxas placed after the kernel spill (ptxas -v leaves them out).
    subroutine_spill_stores: int | None = None
    subroutine_spill_loads: int | None = None
    instructions: int | None = None  # SASS instructions, where the view disassembled it
    image: str | None = None  # the cubin's file name, where the view read one
    image_size: int | None = None  # that cubin's size, bytes
    file: str | None = None  # the source that defines it, where the view looked
    line: int | None = None

    @property
    def spills(self) -> bool:
        return (self.spill_stores or 0) > 0 or (self.spill_loads or 0) > 0

    @property
    def spill_bytes(self) -> int | None:
        """Stores plus loads; None when neither is known."""
        if self.spill_stores is None and self.spill_loads is None:
            return None
        return (self.spill_stores or 0) + (self.spill_loads or 0)

    @property
    def name(self) -> str:
        """For tables: ``scale<float>``, or the symbol when it does not demangle."""
        return display_name(self.demangled) or self.kernel

    def to_json(self) -> dict:
        d = asdict(self)
        for key in _READ_BY_VIEWS:
            if d[key] is None:
                del d[key]
        d["spills"] = self.spills
        return d


def preferred(records: Iterable[KernelRecord]) -> KernelRecord:
    """Of one kernel's records for one arch, the one to use: the first final one (after an
    ``-rdc`` device link, the linked cubin's numbers), else the first."""
    records = list(records)
    return next((r for r in records if r.final), records[0])


def final_rows(rows: Iterable[KernelRecord]) -> list[KernelRecord]:
    """One record per kernel and arch (``preferred``), in first-seen order."""
    groups: dict[tuple[str, str], list[KernelRecord]] = {}
    for r in rows:
        groups.setdefault((r.kernel, r.arch), []).append(r)
    return [preferred(g) for g in groups.values()]


def for_arch(records: Iterable[KernelRecord], arch: str | None) -> KernelRecord:
    """Of one kernel's records, the one to use for ``arch``: that arch's, else the nearest
    older arch's, else the newest arch's (no arch: the newest); of that arch's, the
    ``preferred`` one."""
    def version(r: KernelRecord) -> tuple[int, int]:
        return parse_arch(r.arch)[:2]

    records = list(records)
    if arch is not None:
        want = parse_arch(arch)[:2]
        records = ([r for r in records if version(r) == want]
                   or [r for r in records if version(r) < want] or records)
    newest = max(map(version, records))
    return preferred(r for r in records if version(r) == newest)


def select(records: Iterable[KernelRecord], wanted: str | None) -> list[KernelRecord]:
    """The records ``wanted`` names (all of them when it names none)."""
    return [r for r in records if matches(wanted, r.kernel, r.demangled)]
