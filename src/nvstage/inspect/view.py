"""What ``nvstage show`` collects for one artifact or build: pure data, no rendering."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from nvstage.errors import NvstageError, UsageError, ArtifactError
from nvstage.files import read_regular
from nvstage.compiler.manifest.model import load_build, partial_note, toolkit_note
from nvstage.compiler.toolkit.locate import find_toolkit
from nvstage.hw.gpus import resolve_gpu
from nvstage.inspect import compat
from nvstage.inspect.attribution import MODES, Attribution
from nvstage.inspect.compat import parse_driver
from nvstage.inspect.cudart import runtime_needed
from nvstage.inspect.elf import read_cubin, refine_arch
from nvstage.inspect.fatbin import inventory, image_bytes, kind_of_file
from nvstage.inspect.kernels import matches, display_name
from nvstage.inspect.lineview import lines_of, build_lines
from nvstage.inspect.ptx import _COMMENT, _block_end, read_ptx_text, parse_ptx, read_ptx
from nvstage.inspect.records import FatbinImage
from nvstage.inspect.resources import file_resources, build_resources
from nvstage.inspect.sass import disassemble, source_reader, build_sass
from nvstage.inspect.triton_view import triton_section

SECTIONS = ("ptx", "sass", "resources", "fatbin")
# Asked for by name only (or by --lineinfo with --kernel): two more disassemblies per cubin.
LINES = "lines"
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
    bad = [s for s in wanted if s not in SECTIONS and s != LINES]
    if bad:
        raise UsageError(f"unknown section {', '.join(map(repr, bad))}",
                         hint=f"choose from {', '.join(SECTIONS)}, {LINES} (or all)")
    return tuple(dict.fromkeys(wanted))


# -- PTX text --------------------------------------------------------------------------------

_ENTRY_AT = re.compile(r"^[ \t]*(?:\.(?:visible|weak|extern)[ \t]+)*\.entry[ \t]+"
                       r"([A-Za-z_$%][\w$%.]*)", re.M)


@dataclass(frozen=True)
class PtxText:
    """One PTX module's text, for ``--listing``: the whole module, or with ``--kernel`` the
    lines of the entries it names (``spans``: (mangled name, first line, last line), from 1)."""

    arch: str  # "compute_90", as the build or the fatbin names it
    name: str  # the file, or the fatbin image's name
    version: str  # PTX ISA
    text: str
    spans: tuple[tuple[str, int, int], ...] = ()
    narrowed: bool = False  # only the spans are wanted (--kernel)

    @property
    def line_count(self) -> int:
        return self.text.count("\n") + (0 if self.text.endswith("\n") else 1)

    def pieces(self) -> list[tuple[int, str]]:
        """(first line number, text) of what to print: the whole module, or each entry."""
        if not self.narrowed:
            return [(1, self.text)]
        lines = self.text.split("\n")
        return [(a, "\n".join(lines[a - 1:b])) for _, a, b in self.spans]

    def to_json(self) -> dict:
        return {"arch": self.arch, "name": self.name, "version": self.version,
                "entries": [{"name": n, "first_line": a, "last_line": b}
                            for n, a, b in self.spans],
                "text": "\n\n".join(t for _, t in self.pieces())}


def entry_spans(text: str) -> tuple[tuple[str, int, int], ...]:
    """Each ``.entry``'s (mangled name, first line, last line) in PTX text: from its
    ``.entry`` line to the ``}`` that closes its body. Comments are blanked first (their
    length kept), so a brace or ``.entry`` inside one counts for nothing. Pure; an entry cut
    short (no body, not closed) runs to the end."""
    code = _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
    out, pos = [], 0
    while (m := _ENTRY_AT.search(code, pos)) is not None:
        try:
            end = _block_end(code, m.end(), m.group(1))
        except ArtifactError:  # no body, or not closed
            end = len(code)
        first = code.count("\n", 0, m.start()) + 1
        out.append((m.group(1), first, first + code.count("\n", m.start(), max(end - 1,
                                                                             m.start()))))
        pos = max(end, m.end())
    return tuple(out)


def ptx_text(text: str, arch: str, name: str, version: str) -> PtxText:
    if "\x00" in text:
        text = text.split("\x00", 1)[0]  # extracted PTX may carry its C string terminator
    return PtxText(arch, name, version, text, entry_spans(text))


def _ptx_arch(target: str) -> str:
    return target.replace("sm_", "compute_") if target.startswith("sm_") else target


def _filter(items, kernel, key=lambda x: (x.kernel, x.demangled)):
    """``--kernel``: the items ``inspect.kernels.matches`` finds for that name."""
    return [x for x in items if matches(kernel, *key(x))]


def collect_file(path: str | os.PathLike, kind: str, sections, toolkit, *,
                 kernel: str | None = None, lineinfo: bool = False, source: str | None = None,
                 cwd: str = "", attribute: str = "user", library=()) -> dict:
    """The records for each section, for a ptx/cubin/fatbin/object/executable file.
    ``source``: the one file a build record names as this file's source, whose lines the
    line view may show (relative names against ``cwd``)."""
    out: dict = {}
    if "ptx" in sections:
        if kind != "ptx":
            out["ptx"], out["ptx_text"] = _ptx_in(path, toolkit)
        else:
            module, text = read_ptx_text(path)
            out["ptx"] = [module]
            out["ptx_text"] = [ptx_text(text, _ptx_arch(module.target), Path(path).name,
                                        module.version)]
    if "resources" in sections and kind != "ptx":
        out["resources"] = _filter(file_resources(path, toolkit), kernel)
    if "sass" in sections and kind != "ptx":
        out["sass"] = _filter(disassemble(path, toolkit, lineinfo=lineinfo), kernel,
                              key=lambda k: (k.name, k.demangled))
    if "fatbin" in sections and kind in ("fatbin", "object", "executable"):
        out["fatbin"] = inventory(path, toolkit)
    if LINES in sections and kind != "ptx":


        text = source_reader(source, cwd, indent=True)
        out[LINES] = _filter(lines_of(path, toolkit, source_text=text,
                                      attribution=_attribution(toolkit, attribute, library)),
                             kernel, key=lambda k: (k.name, k.demangled))
    return _filter_ptx(out, kernel)


def _ptx_in(path, toolkit) -> tuple[list, list]:
    """The PTX images inside a fatbin/object/executable, each read as a module, and their
    text."""
    try:
        pairs = image_bytes(path, toolkit, "ptx")
    except Exception:  # a cubin has no PTX images; fatbin errors surface in other sections
        return [], []
    stem = Path(path).name.split(".")[0] or "image"
    modules, texts = [], []
    for im, data in pairs:
        text = data.decode("utf-8", "replace")
        modules.append(parse_ptx(text))
        # the inventory's name for the image (inspect.fatbin.inventory)
        texts.append(ptx_text(text, im.arch_name, f"{stem}.{im.index}.{im.arch_name}.ptx",
                              modules[-1].version))
    return modules, texts


def _filter_ptx(out: dict, kernel: str | None) -> dict:
    if kernel and "ptx" in out:
        out["ptx"] = [replace(m, entries=tuple(_filter(m.entries, kernel,
                                                       key=lambda e: (e.name, e.demangled))))
                      for m in out["ptx"]]
    if kernel and "ptx_text" in out:
        # The entries the modules kept, by mangled name (the modules demangled them).
        kept = {e.name for m in out["ptx"] for e in m.entries}
        out["ptx_text"] = [replace(t, spans=tuple(s for s in t.spans if s[0] in kept),
                                   narrowed=True) for t in out["ptx_text"]]
    return out


def collect_build(build, sections, toolkit, *, kernel: str | None = None,
                  lineinfo: bool | None = None, attribute: str = "user", library=()) -> dict:
    """The same records for a finished ``Build`` (its kept artifacts must still exist for
    SASS and the fatbin; resources fall back to what the stages printed)."""
    out: dict = {}
    if "ptx" in sections:
        out["ptx"], out["ptx_text"] = [], []
        for a in build.artifacts:
            if a.kind == "ptx" and os.path.isfile(a.path):
                module, text = read_ptx_text(a.path)
                out["ptx"].append(module)
                out["ptx_text"].append(ptx_text(text, a.arch or _ptx_arch(module.target),
                                                Path(a.path).name, module.version))
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
    if LINES in sections:

        out[LINES] = _filter(build_lines(build, toolkit,
                                         attribution=_attribution(toolkit, attribute, library)),
                         kernel,
                             key=lambda k: (k.name, k.demangled))
    return _filter_ptx(out, kernel)


def _attribution(toolkit, attribute: str, library=()):
    """The line view's attribution (``inspect.attribution``): ``user`` or ``innermost``;
    ``library``: more folders whose files count as a library's (a vendored CUB)."""
    if attribute not in MODES:
        raise UsageError(f"--attribute {attribute}: not one of {', '.join(MODES)}",
                         hint="user (the default) rolls inlined library code up to your line; "
                              "innermost counts it where nvdisasm puts it")
    return Attribution.of(toolkit, attribute, library)


def _containers(build) -> list[str]:
    """The files that hold fatbins: the build's output if it is one, else its .fatbin files
    (not the _dlink fatbin of a device link: the object that embeds it is listed)."""
    if build.output and os.path.isfile(build.output) and \
            Path(build.output).suffix not in (".ptx", ".cubin"):
        return [build.output]
    return [a.path for a in build.artifacts if a.kind == "fatbin" and os.path.isfile(a.path)]


# Held for --listing, not part of --json: a module's text can be megabytes.
NOT_IN_JSON = ("ptx_text",)


def to_json(data: dict) -> dict:
    return {section: [x.to_json() for x in items] for section, items in data.items()
            if section not in NOT_IN_JSON}


@dataclass
class Shown:
    """What ``nvstage show`` found in one artifact or build."""

    artifact: str
    kind: str  # "ptx" | "cubin" | "fatbin" | "object" | "executable" | "build"
    data: dict  # section -> records
    notes: list[str] = field(default_factory=list)  # about the build read (toolkit, stale files)
    partial: dict | None = None  # {"status", "note"} for a build that is not whole
    will_it_run: object = None  # a ``compat.Verdict`` when a GPU was named
    triton: dict | None = None  # a Triton build's metadata and launch (``triton_view``)

    def to_json(self) -> dict:
        doc = {"artifact": self.artifact, "kind": self.kind, **to_json(self.data)}
        if self.partial:
            doc["partial"] = self.partial
        if self.triton is not None:
            doc["triton"] = self.triton
        if self.will_it_run is not None:
            doc["will_it_run"] = self.will_it_run.to_json()
        return doc


# Files of a build that are gone or rewritten: this many are named, the rest counted.
STALE_NAMED = 20


def show(artifact: str | os.PathLike, *, sections: str | None = None, kernel: str | None = None,
         lineinfo: bool = False, gpu: str | None = None, driver: str | None = None,
         toolkit=None, nvcc: str | None = None, attribute: str = "user",
         library=()) -> Shown:
    """The records of each section of ``artifact`` (a PTX file, cubin, fatbin, object,
    executable, keep folder or stages.json), only ``kernel``'s when one is named, and with
    ``gpu`` whether it would run there (``driver``: the CUDA version the driver supports).
    Read with ``toolkit``, else the toolkit of ``nvcc`` (else the pip wheels')."""
    check_gpu(gpu, driver)  # before any work: a typo should not cost a disassembly
    _attribution(None, attribute)
    kind = kind_of_file(artifact)
    wanted = parse_sections(sections, kind)
    if gpu and "fatbin" not in wanted and kind != "ptx":
        wanted = wanted + ("fatbin",)  # will-it-run reads the image list
    if lineinfo and kernel and LINES not in wanted and kind != "ptx":
        wanted = wanted + (LINES,)  # one kernel's source lines, SASS and live registers
    toolkit = toolkit or find_toolkit(nvcc)
    shown = Shown(str(artifact), kind, {})
    build = None
    if kind == "build":

        build = load_build(artifact)
        if note := toolkit_note(build, toolkit):
            shown.notes.append(note)
        if note := partial_note(build):
            shown.partial = {"status": build.status, "note": note}
            shown.notes.append(note)
        stale = getattr(build, "stale", [])
        shown.notes += [f"{path} is gone or was rewritten after this build; left out"
                        for path in stale[:STALE_NAMED]]
        if len(stale) > STALE_NAMED:
            shown.notes.append(f"and {len(stale) - STALE_NAMED} more files left out")
        shown.data = collect_build(build, wanted, toolkit, kernel=kernel,
                                   lineinfo=lineinfo or None, attribute=attribute,
                                   library=library)
        if getattr(build, "via", None) == "triton":

            shown.triton = triton_section(build, toolkit)
    else:
        shown.data = collect_file(artifact, kind, wanted, toolkit, kernel=kernel,
                                  lineinfo=lineinfo, attribute=attribute, library=library)
    if kernel and not _any_kernel(shown.data):

        everything = (collect_build(build, ("resources",), toolkit) if build is not None
                      else collect_file(artifact, kind, ("resources",), toolkit))
        names = sorted({display_name(r.demangled) for r in everything.get("resources") or []})
        raise UsageError(f"no kernel matches --kernel {kernel!r} in {artifact}",
                         hint=f"kernels there: {', '.join(names) or 'none'}")
    if gpu:
        shown.will_it_run = will_it_run(shown.data, kind, artifact, gpu, driver,
                                        partial=shown.partial and shown.partial["status"],
                                        build=build)
    return shown


def _any_kernel(data: dict) -> bool:
    """Whether the --kernel filter left anything in a section that lists kernels."""
    ptx_entries = [e for m in data.get("ptx") or [] for e in m.entries]
    return bool(ptx_entries or data.get("resources") or data.get("sass") or data.get(LINES))


def check_gpu(gpu: str | None, driver: str | None) -> None:
    """A GPU name and driver version that mean something, before any work."""
    if driver is not None and not gpu:
        raise UsageError("--driver says whether PTX can be JIT-compiled for a GPU: give --gpu "
                         "too", hint="e.g. --gpu b200 --driver 13.0")
    if gpu:
        resolve_gpu(gpu)
    if driver is not None:
        parse_driver(driver)


def will_it_run(data: dict, kind: str, artifact, gpu: str, driver: str | None, *,
                partial: str | None = None, build=None):
    """The ``compat.Verdict`` for the images ``data`` lists (a bare cubin or PTX file is one
    image; a ``build`` that made no fatbin, its cubins and PTX). ``partial``: the status of a
    build that is not whole."""
    images = data.get("fatbin")
    if images is None:
        images = _images_of_single(kind, Path(artifact))
    elif not images and build is not None and not partial:
        images = _images_of_build(build)
    verdict = compat.will_it_run(images, gpu, driver)
    verdict = compat.with_runtime(verdict, _runtime_of(kind, artifact, build), gpu)
    if partial and not images:
        # No fatbin because the build stopped before making one: that says nothing about
        # what a whole build would hold, so no verdict blames an image never built.
        return replace(verdict, runs=None, how=compat.UNKNOWN, image=None, reasons=(),
                       why_unknown=f"the build {_stopped(partial)} before any fatbin was made")
    return verdict


def _runtime_of(kind: str, artifact, build):
    """The CUDA runtime an executable needs (``cudart.RuntimeNeed``): the file shown, or a
    build's output when that is an executable; None for anything else."""
    path = Path(artifact)
    if kind == "build":
        out = getattr(build, "output", None)
        if not out or build.status != "ok":
            return None
        path = Path(build.cwd, out)
        try:
            if not path.is_file() or kind_of_file(path) != "executable":
                return None
        except (OSError, NvstageError):  # damaged or gone: the images' verdict stands alone
            return None
    elif kind != "executable":
        return None
    return runtime_needed(read_regular(path), str(path))


def _stopped(status: str) -> str:
    return {"running": "did not finish", "interrupted": "was interrupted",
            "failed": "failed"}.get(status, "stopped")


def _images_of_single(kind: str, artifact: Path, declared: str | None = None):
    """A bare cubin or PTX file is one image (``declared``: its arch as a build names it)."""
    if kind == "cubin":
        c = read_cubin(read_regular(artifact), str(artifact))
        return [FatbinImage("cubin", refine_arch(c.arch, declared), c.size, artifact.name,
                            "device-link" if c.from_device_link else "kernel",
                            kernels=c.kernels)]
    m = read_ptx(artifact)
    return [FatbinImage("ptx", declared or _ptx_arch(m.target), artifact.stat().st_size,
                        artifact.name, ptx_version=m.version,
                        kernels=tuple(e.name for e in m.entries))]


def _images_of_build(build) -> list:
    """A build that stopped at a cubin or PTX (--cubin, --ptx) made no fatbin: its output is
    what a program would load (not the PTX a --cubin build kept on the way)."""
    outputs = [a for a in build.artifacts if a.kind in ("cubin", "ptx")
               and os.path.isfile(a.path)]
    if build.output:
        named = [a for a in outputs if os.path.abspath(os.path.join(build.cwd, build.output))
                 == os.path.abspath(a.path)]
        outputs = named or [a for a in outputs if a.kind == "cubin"] or outputs
    out = []
    for a in outputs:
        out += _images_of_single(a.kind, Path(a.path), a.arch)
    return out
