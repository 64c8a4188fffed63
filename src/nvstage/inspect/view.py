"""What ``nvstage show`` collects for one artifact or build: pure data, no rendering."""

from __future__ import annotations

import os
from pathlib import Path

from nvstage.errors import UsageError

SECTIONS = ("ptx", "sass", "resources", "fatbin")
# What applies to each kind of file when no --sections is given.
DEFAULTS = {
    "ptx": ("ptx",),
    "cubin": ("resources", "sass"),
    "fatbin": ("fatbin", "resources", "sass"),
    "object": ("fatbin", "resources", "sass"),
    "executable": ("fatbin", "resources", "sass"),
    "build": ("ptx", "resources", "sass", "fatbin"),
}


def parse_sections(text: str | None, kind: str) -> tuple[str, ...]:
    if not text:
        return DEFAULTS[kind]
    wanted = [s.strip().lower() for s in text.split(",") if s.strip()]
    if wanted == ["all"]:
        return SECTIONS
    bad = [s for s in wanted if s not in SECTIONS]
    if bad:
        raise UsageError(f"unknown section {', '.join(map(repr, bad))}",
                         hint=f"choose from {', '.join(SECTIONS)} (or all)")
    return tuple(dict.fromkeys(wanted))


def matches(wanted: str | None, name: str, demangled: str = "") -> bool:
    """``--kernel``: the mangled name, the demangled signature, or its bare function name
    (``scale<float>`` or ``scale``)."""
    from nvstage.inspect.records import short_names

    return not wanted or wanted in (name, demangled) or wanted in short_names(demangled)


def _filter(items, kernel, key=lambda x: (x.kernel, x.demangled)):
    return [x for x in items if matches(kernel, *key(x))]


def collect_file(path: str | os.PathLike, kind: str, sections, toolkit, *,
                 kernel: str | None = None, lineinfo: bool = False) -> dict:
    """The records for each section, for a ptx/cubin/fatbin/object/executable file."""
    from nvstage.inspect.fatbin import inventory
    from nvstage.inspect.ptx import read_ptx
    from nvstage.inspect.resources import resources_of
    from nvstage.inspect.sass import disassemble

    out: dict = {}
    if "ptx" in sections:
        if kind != "ptx":
            out["ptx"] = _ptx_in(path, toolkit)
        else:
            out["ptx"] = [read_ptx(path)]
    if "resources" in sections and kind != "ptx":
        out["resources"] = _filter(resources_of(path, toolkit), kernel)
    if "sass" in sections and kind != "ptx":
        out["sass"] = _filter(disassemble(path, toolkit, lineinfo=lineinfo), kernel,
                              key=lambda k: (k.name, k.demangled))
    if "fatbin" in sections and kind in ("fatbin", "object", "executable"):
        out["fatbin"] = inventory(path, toolkit)
    return _filter_ptx(out, kernel)


def _ptx_in(path, toolkit) -> list:
    """The PTX images inside a fatbin/object/executable, each read as a module."""
    from nvstage.inspect.fatbin import image_bytes
    from nvstage.inspect.ptx import parse_ptx

    try:
        pairs = image_bytes(path, toolkit, "ptx")
    except Exception:  # a cubin has no PTX images; fatbin errors surface in other sections
        return []
    return [parse_ptx(data.decode("utf-8", "replace")) for _, data in pairs]


def _filter_ptx(out: dict, kernel: str | None) -> dict:
    if kernel and "ptx" in out:
        from dataclasses import replace

        out["ptx"] = [replace(m, entries=tuple(e for e in m.entries
                                               if matches(kernel, e.name, e.demangled)))
                      for m in out["ptx"]]
    return out


def collect_build(build, sections, toolkit, *, kernel: str | None = None,
                  lineinfo: bool | None = None) -> dict:
    """The same records for a finished ``Build`` (its kept artifacts must still exist for
    SASS and the fatbin; resources fall back to what the stages printed)."""
    from nvstage.inspect.fatbin import inventory, kind_of_file
    from nvstage.inspect.ptx import read_ptx
    from nvstage.inspect.resources import build_resources
    from nvstage.inspect.sass import build_sass

    out: dict = {}
    if "ptx" in sections:
        out["ptx"] = [read_ptx(a.path) for a in build.artifacts
                      if a.kind == "ptx" and os.path.isfile(a.path)]
    if "resources" in sections:
        out["resources"] = _filter(build_resources(build, toolkit), kernel)
    if "sass" in sections:
        out["sass"] = _filter(build_sass(build, toolkit, lineinfo=lineinfo), kernel,
                              key=lambda k: (k.name, k.demangled))
    if "fatbin" in sections:
        images = []
        for p in _containers(build):
            if kind_of_file(p) in ("fatbin", "object", "executable"):
                images += inventory(p, toolkit)
        out["fatbin"] = images
    return _filter_ptx(out, kernel)


def _containers(build) -> list[str]:
    """The files that hold fatbins: the build's output if it is one, else its .fatbin files
    (not the _dlink fatbin of a device link: the object that embeds it is listed)."""
    if build.output and os.path.isfile(build.output) and \
            Path(build.output).suffix not in (".ptx", ".cubin"):
        return [build.output]
    return [a.path for a in build.artifacts if a.kind == "fatbin" and os.path.isfile(a.path)]


def to_json(data: dict) -> dict:
    return {section: [x.to_json() for x in items] for section, items in data.items()}
