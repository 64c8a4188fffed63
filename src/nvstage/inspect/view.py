"""What ``nvstage show`` collects for one artifact or build: pure data, no rendering."""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
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


def _filter(items, kernel, key=lambda x: (x.kernel, x.demangled)):
    """``--kernel``: the items ``inspect.kernels.matches`` finds for that name."""
    from nvstage.inspect.kernels import matches

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
        out["ptx"] = [replace(m, entries=tuple(_filter(m.entries, kernel,
                                                       key=lambda e: (e.name, e.demangled))))
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


@dataclass
class Shown:
    """What ``nvstage show`` found in one artifact or build."""

    artifact: str
    kind: str  # "ptx" | "cubin" | "fatbin" | "object" | "executable" | "build"
    data: dict  # section -> records
    notes: list[str] = field(default_factory=list)  # about the build read (toolkit, stale files)
    partial: dict | None = None  # {"status", "note"} for a build that is not whole
    will_it_run: object = None  # a ``compat.Verdict`` when a GPU was named

    def to_json(self) -> dict:
        doc = {"artifact": self.artifact, "kind": self.kind, **to_json(self.data)}
        if self.partial:
            doc["partial"] = self.partial
        if self.will_it_run is not None:
            doc["will_it_run"] = self.will_it_run.to_json()
        return doc


# Files of a build that are gone or rewritten: this many are named, the rest counted.
STALE_NAMED = 20


def show(artifact: str | os.PathLike, *, sections: str | None = None, kernel: str | None = None,
         lineinfo: bool = False, gpu: str | None = None, driver: str | None = None,
         toolkit=None, nvcc: str | None = None) -> Shown:
    """The records of each section of ``artifact`` (a PTX file, cubin, fatbin, object,
    executable, keep folder or stages.json), only ``kernel``'s when one is named, and with
    ``gpu`` whether it would run there (``driver``: the CUDA version the driver supports).
    Read with ``toolkit``, else the toolkit of ``nvcc`` (else the pip wheels')."""
    from nvstage.compiler.toolkit import find_toolkit
    from nvstage.inspect.fatbin import kind_of_file

    _check_gpu(gpu, driver)  # before any work: a typo should not cost a disassembly
    kind = kind_of_file(artifact)
    wanted = parse_sections(sections, kind)
    if gpu and "fatbin" not in wanted and kind != "ptx":
        wanted = wanted + ("fatbin",)  # will-it-run reads the image list
    toolkit = toolkit or find_toolkit(nvcc)
    shown = Shown(str(artifact), kind, {})
    build = None
    if kind == "build":
        from nvstage.compiler.record import load_build, partial_note, toolkit_note

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
                                   lineinfo=lineinfo or None)
    else:
        shown.data = collect_file(artifact, kind, wanted, toolkit, kernel=kernel,
                                  lineinfo=lineinfo)
    if kernel and not _any_kernel(shown.data):
        from nvstage.inspect.kernels import display_name

        everything = (collect_build(build, ("resources",), toolkit) if build is not None
                      else collect_file(artifact, kind, ("resources",), toolkit))
        names = sorted({display_name(r.demangled) for r in everything.get("resources") or []})
        raise UsageError(f"no kernel matches --kernel {kernel!r} in {artifact}",
                         hint=f"kernels there: {', '.join(names) or 'none'}")
    if gpu:
        shown.will_it_run = will_it_run(shown.data, kind, artifact, gpu, driver,
                                        partial=shown.partial and shown.partial["status"])
    return shown


def _any_kernel(data: dict) -> bool:
    """Whether the --kernel filter left anything in a section that lists kernels."""
    ptx_entries = [e for m in data.get("ptx") or [] for e in m.entries]
    return bool(ptx_entries or data.get("resources") or data.get("sass"))


def _check_gpu(gpu: str | None, driver: str | None) -> None:
    from nvstage.hw.gpus import resolve_gpu
    from nvstage.inspect.compat import parse_driver

    if driver is not None and not gpu:
        raise UsageError("--driver says whether PTX can be JIT-compiled for a GPU: give --gpu "
                         "too", hint="e.g. --gpu b200 --driver 13.0")
    if gpu:
        resolve_gpu(gpu)
    if driver is not None:
        parse_driver(driver)


def will_it_run(data: dict, kind: str, artifact, gpu: str, driver: str | None, *,
                partial: str | None = None):
    """The ``compat.Verdict`` for the images ``data`` lists (a bare cubin or PTX file is one
    image). ``partial``: the status of a build that is not whole."""
    from nvstage.inspect import compat

    images = data.get("fatbin")
    if images is None:
        images = _images_of_single(kind, Path(artifact))
    verdict = compat.will_it_run(images, gpu, driver)
    if partial and not images:
        # No fatbin because the build stopped before making one: that says nothing about
        # what a whole build would hold, so no verdict blames an image never built.
        return replace(verdict, runs=None, how=compat.UNKNOWN, image=None, reasons=(),
                       why_unknown=f"the build {_stopped(partial)} before any fatbin was made")
    return verdict


def _stopped(status: str) -> str:
    return {"running": "did not finish", "interrupted": "was interrupted",
            "failed": "failed"}.get(status, "stopped")


def _images_of_single(kind: str, artifact: Path):
    """A bare cubin or PTX file is one image."""
    from nvstage.artifacts import read_regular
    from nvstage.inspect.elf import read_cubin
    from nvstage.inspect.ptx import read_ptx
    from nvstage.inspect.records import FatbinImage

    if kind == "cubin":
        c = read_cubin(read_regular(artifact), str(artifact))
        return [FatbinImage("cubin", c.arch, c.size, artifact.name,
                            "device-link" if c.from_device_link else "kernel",
                            kernels=c.kernels)]
    m = read_ptx(artifact)
    arch = m.target.replace("sm_", "compute_")
    return [FatbinImage("ptx", arch, artifact.stat().st_size, artifact.name,
                        ptx_version=m.version, kernels=tuple(e.name for e in m.entries))]
