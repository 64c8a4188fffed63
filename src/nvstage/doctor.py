"""What this machine can do: the toolkit and its tools, the host compiler, driver and GPUs."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from nvstage import proc
from nvstage.compiler.toolkit.nvcc_lookup import is_elf
from nvstage.errors import NvstageError, ToolMissing
from nvstage.run.devices import GpuFacts, nvml_gpus
from nvstage.run.probe import DriverProbe, probe
from nvstage.compiler.toolkit.locate import (
    ToolInfo,
    Toolkit,
    all_candidates,
    find_toolkit,
    host_compiler,
    tool_version,
)

_PACKAGES = ("cuda-toolkit", "nvidia-cuda-nvcc", "cuda-core", "cuda-bindings", "cuda-pathfinder",
             "nvidia-ml-py", "numpy")
_PROBE_KERNEL = "__global__ void nvstage_probe(float* x) { x[threadIdx.x] += 1.0f; }\n"


@dataclass(frozen=True)
class PathNvcc:
    """The nvcc on PATH: what ``nvstage nvcc ARGS``, Make's ``NVCC = nvstage nvcc`` and CMake's
    own search for a CUDA compiler run, whatever toolkit nvstage itself uses."""

    path: str
    version: str | None  # "13.0.88"; None when its --version says no release
    script: bool  # a wrapper script, not an nvcc binary: its commands are never answered whole
    same: bool  # the toolkit nvstage uses (the same file)

    def to_json(self) -> dict:
        return {"path": self.path, "version": self.version, "script": self.script,
                "same_toolkit": self.same}


def path_nvcc(tk: Toolkit | None) -> PathNvcc | None:
    """The nvcc on PATH, told apart from ``tk``'s; None where PATH has none."""
    import os
    import shutil

    found = shutil.which("nvcc")
    if found is None:
        return None
    try:
        script = not is_elf(os.path.realpath(found))
    except OSError:
        script = False
    same = tk is not None and os.path.realpath(found) == os.path.realpath(tk.nvcc)
    return PathNvcc(found, tk.version if same else tool_version(found), script, same)


@dataclass
class DoctorReport:
    toolkit: Toolkit | None
    toolkit_error: str | None
    other_toolkits: list[tuple[str, str]]
    host: ToolInfo
    driver: DriverProbe
    gpus: list[GpuFacts]
    nvml_note: str
    nvml_driver: str | None
    compile_check: str  # what the trial compile said
    can_compile: bool
    packages: dict[str, str | None] = field(default_factory=dict)
    runtime_compilers: dict[str, str | None] = field(default_factory=dict)  # NVRTC, nvJitLink
    on_path: PathNvcc | None = None  # the nvcc on PATH (nvstage nvcc's), None: PATH has none

    @property
    def can_run(self) -> bool:
        return self.driver.available

    def to_json(self) -> dict:
        return {
            "toolkit": self.toolkit.to_json() if self.toolkit else None,
            "toolkit_error": self.toolkit_error,
            "other_toolkits": [{"source": s, "nvcc": p} for s, p in self.other_toolkits],
            "host_compiler": {"name": self.host.name, "path": self.host.path,
                              "version": self.host.version},
            "driver": self.driver.to_json(),
            "nvml": {"note": self.nvml_note, "driver_version": self.nvml_driver},
            "gpus": [g.to_json() for g in self.gpus],
            "compile_check": self.compile_check,
            "can_compile": self.can_compile,
            "can_run": self.can_run,
            "runtime_compilers": self.runtime_compilers,
            "packages": self.packages,
            "path_nvcc": None if self.on_path is None else self.on_path.to_json(),
        }


def diagnose(nvcc: str | None = None, *, trial_compile: bool = True) -> DoctorReport:
    tk, tk_err = None, None
    try:
        tk = find_toolkit(nvcc)
    except NvstageError as e:
        tk_err = e.explain()
    host = host_compiler()
    gpus, nvml_driver, nvml_note = nvml_gpus()
    check, ok = "not tried: no toolkit", False
    if tk is not None and host.found:
        check, ok = _trial_compile(tk) if trial_compile else ("skipped", True)
    elif tk is not None:
        check = f"no host compiler ({host.name} not on PATH)"
    others = [(s, p) for s, p in all_candidates() if tk is None or Path(p).resolve()
              != Path(tk.nvcc).resolve()]
    return DoctorReport(tk, tk_err, others, host, probe(), gpus, nvml_note, nvml_driver, check,
                        ok, {p: _version(p) for p in _PACKAGES}, _runtime_compilers(),
                        path_nvcc(tk))


def _runtime_compilers() -> dict[str, str | None]:
    """NVRTC and nvJitLink (for compile --via nvrtc): libraries, loaded without a driver."""
    try:
        from nvstage.compiler.nvrtc import versions

        nvrtc, nvjitlink = versions()
        return {"nvrtc": nvrtc, "nvjitlink": nvjitlink}
    except Exception:  # a missing wheel or library: doctor reports it, never fails on it
        return {"nvrtc": None, "nvjitlink": None}


def _trial_compile(tk: Toolkit) -> tuple[str, bool]:
    """Compile a one-line kernel to a cubin: 'compile works' is measured, not assumed."""
    with tempfile.TemporaryDirectory(prefix="nvstage-doctor-") as d:
        src = Path(d, "probe.cu")
        src.write_text(_PROBE_KERNEL)
        try:
            cp = proc.run([tk.nvcc, "--cubin", "-arch=sm_75", str(src), "-o",
                           str(Path(d, "probe.cubin"))], cwd=d, timeout=120)
        except ToolMissing as e:  # includes a compile that never finished
            return f"a test kernel failed to compile: {e}", False
        if cp.returncode == 0 and Path(d, "probe.cubin").is_file():
            return f"a test kernel compiled to a cubin in {cp.seconds:.2f} s", True
        last = (cp.stderr or cp.stdout).strip().splitlines()[-1:] or ["no output"]
        return f"a test kernel failed to compile: {last[0]}", False


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
