"""Getting a workload's device code for one arch, and what validation learns from it: the
one place a workload is compiled (``nvstage run`` and ``nvstage model`` both come here).

A source goes through the nvstage pipeline in a temporary folder (nothing is left beside
it); packaged code (cubin, fatbin, PTX) is read with a bound. Nothing here needs a GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nvstage.inspect.kernels import KernelNames
from nvstage.run.workload.signatures import kernel_signatures, KernelSig, ParamSig
from nvstage.run.workload.spec import CodeSpec, Workload
from nvstage.run.workload.validate import raise_on_errors, validate
from nvstage.errors import StageFailed, ArtifactError, WorkloadError
from nvstage.files import read_regular
from nvstage.compiler.manifest.model import load_build
from nvstage.compiler.manifest.triton_info import c_type
from nvstage.compiler.nvcc.options import CompileOptions
from nvstage.compiler.pipeline.driver import compile as run_compile, without_temp_keep as hint_keep
from nvstage.compiler.toolkit.locate import find_toolkit
from nvstage.hw.gpus import parse_arch
from nvstage.inspect.gather import resources_of
from nvstage.inspect.resources import build_resources


@dataclass
class Prepared:
    """The device code to load and what validation learnt from it."""

    kind: str  # what gets loaded: "cubin" | "fatbin" | "ptx"
    image: bytes
    arch: str
    sigs: KernelNames | None  # KernelSig by name; None: no PTX to read parameter lists from
    compile_seconds: float | None = None
    build: dict | None = None  # a short summary of the nvstage build, when one ran
    # Each kernel's resources for ``arch`` (``KernelRecord``), when asked for: ptxas -v
    # and cuobjdump for a source, cuobjdump for packaged code.
    resources: list | None = None
    # Kept Triton builds: one module per build, (kind, image, kernel names), and how many
    # arguments Triton appends to each kernel's own (its scratch pointers).
    modules: list | None = None
    extra_args: dict | None = None
    # The PTX of every module (one for a source, one per Triton build), for the model's
    # walk of each kernel's code (``model.ptx_walk``).
    ptx_texts: tuple[str, ...] = ()

    def mangled(self) -> Mapping[str, str]:
        """Each name a launch may give a kernel -> the symbol to load."""
        return self.sigs.map(lambda s: s.mangled) if self.sigs else {}


def prepare(w: Workload, arch: str, *, toolkit=None, resources: bool = False) -> Prepared:
    """Compile a source workload for ``arch`` (cubin or fatbin, PTX kept for validation), or
    read a packaged one. Nothing here needs a GPU.

    ``resources``: also read each kernel's resources (registers, shared memory, barriers,
    spills), as ``nvstage model`` needs; a source is then compiled with ``--resource-usage``
    and ``-lineinfo`` (the model's loop table names source lines; line info changes no
    instruction) and read while its temporary build folder still exists.
    """
    import tempfile
    import time


    code = w.code
    if code.kind == "triton":
        return prepare_triton(w, arch, toolkit=toolkit, resources=resources)
    if code.kind == "source":

        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="nvstage-run-") as tmp:
            # -o into the temporary folder: nvcc would leave NAME.cubin beside the source.
            opts = CompileOptions(archs=(arch,), stop=code.stop, defines=code.defines,
                                  include_dirs=code.include_dirs, resource_usage=resources,
                                  lineinfo=resources, extra=code.flags,
                                  output=str(Path(tmp, f"{Path(code.path).stem}.{code.stop}")))
            try:
                build = run_compile(code.path, opts, toolkit=toolkit, keep=Path(tmp, "keep"),
                                    cwd=Path(code.path).parent)
            except StageFailed as e:
                raise without_temp_keep(e, code, arch) from None
            image_art = build.artifact(code.stop)
            ptx_art = build.artifact("ptx")
            if image_art is None:

                raise ArtifactError(f"compiling {code.path} for {arch} left no {code.stop}")
            image = read_regular(image_art.path)
            ptx = read_regular(ptx_art.path).decode(errors="replace") if ptx_art else None
            rows = None
            if resources:  # from the build's own files: read before the folder goes

                rows = build_resources(build, toolkit)
        summary = {"source": code.path, "options": opts.to_json(),
                   "stages": len(build.runs), "wall_seconds": build.wall_seconds,
                   "toolkit": build.toolkit.to_json()}
        return Prepared(code.stop, image, arch,
                        kernel_signatures(ptx, code.path) if ptx else None,
                        time.perf_counter() - t0, summary, rows,
                        ptx_texts=(ptx,) if ptx else ())
    # Packaged code a workload names: regular files only, read with a bound.
    image = read_regular(code.path, what=code.kind)
    ptx_text, ptx_path = None, code.path
    if code.kind == "ptx":
        ptx_text = image.decode(errors="replace")
    elif code.ptx:
        ptx_path = code.ptx
        ptx_text = read_regular(code.ptx, what="PTX file").decode(errors="replace")
    rows = None
    if resources:

        rows = [r for r in resources_of(code.path, toolkit or find_toolkit()) if r.arch == arch]
    return Prepared(code.kind, image, arch,
                    kernel_signatures(ptx_text, ptx_path) if ptx_text else None,
                    resources=rows, ptx_texts=(ptx_text,) if ptx_text else ())


def prepare_triton(w: Workload, arch: str, *, toolkit=None, resources: bool = False
                   ) -> Prepared:
    """Kept Triton builds: each one's cubin (a module of its own), its parameter list from
    its PTX with Triton's types (the appended scratch pointers left out: the engine adds
    them), and its figures from the build record. A cubin runs on its own SM only."""
    sigs, modules, rows, extra, texts = [], [], [], {}, []
    for k in w.code.triton:
        if parse_arch(k.arch)[:2] != parse_arch(arch)[:2]:
            raise WorkloadError(f"{k.folder} holds {k.name} built for {k.arch}, which does "
                                f"not run on {arch}", where=w._where("kernel", "triton"),
                                hint=f"build it for {arch} (nvstage compile ... --via triton "
                                     f"--arch {arch.rstrip('af')}), or run with --arch "
                                     f"{k.arch}")
        texts.append(read_regular(k.ptx, what="PTX file").decode(errors="replace"))
        ptx = kernel_signatures(texts[-1], k.ptx)
        entry = ptx.get(k.name)
        if entry is None or len(entry.params) != len(k.params) + k.extra_args:
            raise WorkloadError(f"{k.ptx}: the PTX of {k.name} does not take its signature's "
                                f"{len(k.params)} parameters and Triton's {k.extra_args}",
                                where=w._where("kernel", "triton"))
        types = [c_type(t) for _, t in k.params]
        params = tuple(ParamSig(p.index, p.size, p.ptx_type, c)
                       for p, c in zip(entry.params, types))
        sigs.append(KernelSig(k.name, k.name, f"{k.name}({', '.join(types)})", params))
        modules.append(("cubin", read_regular(k.cubin, what="cubin"), (k.name,)))
        extra[k.name] = k.extra_args
        if resources:

            rows += build_resources(load_build(k.folder), toolkit)
    names = KernelNames(sigs, lambda s: (s.mangled, s.demangled))
    return Prepared("cubin", modules[0][1], arch, names, resources=rows if resources else None,
                    modules=modules, extra_args=extra, ptx_texts=tuple(texts),
                    build={"triton": [k.folder for k in w.code.triton]})


def without_temp_keep(e, code: CodeSpec, arch: str):
    """A stage failed while compiling a workload's source: its keep folder was temporary and
    is deleted on the way out, so the error must not send the user there. Say instead how
    to compile the same thing with the files kept."""
    argv = ["nvstage", "compile", code.path, "--arch", arch, f"--{code.stop}"]
    argv += [f"-D{d}" for d in code.defines] + [f"-I{i}" for i in code.include_dirs]
    argv += list(code.flags)
    return hint_keep(e, argv)


def load_and_validate(path_or_workload, arch: str, *, toolkit=None):
    """(workload, prepared, notes): parse, compile and validate; raises on any error."""
    w = (path_or_workload if isinstance(path_or_workload, Workload)
         else Workload.from_toml(path_or_workload))
    w.param_values()  # parameter errors first: they name the [params] key
    prep = prepare(w, arch, toolkit=toolkit)
    notes = raise_on_errors(validate(w, prep.sigs))
    return w, prep, notes
