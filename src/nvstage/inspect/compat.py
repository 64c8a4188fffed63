"""Will it run: which image of a fatbin the driver would load on a given GPU, before launching.

The rules (CUDA C++ Programming Guide, "Binary Compatibility" and "PTX Compatibility";
nvcc manual, "GPU Feature List" for the ``a`` and ``f`` suffixes):

- A cubin for ``sm_XY`` runs on a GPU of compute capability X.Z with Z >= Y: same major,
  same or newer minor. Never across majors (sm_90 SASS does not run on sm_100).
- ``sm_XYa`` (arch-specific) runs only on exactly X.Y.
- ``sm_XYf`` (family-specific) runs on the family: same major X, minor >= Y.
- PTX for ``compute_XY`` is JIT-compiled by the driver for any GPU of capability >= X.Y;
  ``compute_XYa`` only for exactly X.Y, ``compute_XYf`` only within major X. The driver must
  understand the PTX ISA version: PTX 9.0 needs a CUDA 13.0 driver, 9.5 a 13.5 driver
  (the table in cuda.bindings.utils, from the PTX ISA release history).
- The driver prefers SASS that runs as is over JIT-compiling PTX; among candidates it takes
  the newest arch that fits. LTO-IR cannot be loaded by the driver at all.

Pure: no driver is asked anything. ``driver`` is the CUDA version the driver supports
(``nvidia-smi`` shows it as "CUDA Version: 13.0"), not the driver's own release number.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from nvstage.errors import UsageError
from nvstage.hw.gpus import GpuSpec, parse_arch, resolve_gpu
from nvstage.inspect.records import FatbinImage
from nvstage.inspect.cudart import runtime_runs

SASS_EXACT = "sass-exact"
SASS_COMPATIBLE = "sass-compatible"
PTX_JIT = "ptx-jit"
NONE = "none"
UNKNOWN = "unknown"  # nothing to judge: a build that stopped before its fatbin


@dataclass(frozen=True)
class Verdict:
    runs: bool | None  # None: cannot tell (``UNKNOWN``)
    how: str  # "sass-exact" | "sass-compatible" | "ptx-jit" | "none" | "unknown"
    image: FatbinImage | None  # the image the driver would load
    gpu: str  # "h200 (sm_90)" or "sm_90"
    gpu_arch: str  # "sm_90"
    driver: str | None = None  # "13.0", as given
    reasons: tuple[str, ...] = field(default=())  # why the other images were passed over
    why_unknown: str = ""  # with UNKNOWN: what there was to judge
    # An executable's CUDA runtime (``cudart.RuntimeNeed``) and, with a driver named, whether
    # that driver starts it (``cudart.RuntimeVerdict``): ``runs`` already includes it.
    runtime: object = None
    runtime_verdict: object = None

    def explain(self) -> str:
        """One sentence a user can act on (two when the runtime has its own say)."""
        images = self._explain_images()
        rv = self.runtime_verdict
        if rv is not None:
            if rv.runs is False:
                return (f"Will not run on {self.gpu} with a {self.driver} driver: {rv.text}. "
                        f"(Images: {images})")
            if rv.runs is None:
                return (f"Cannot tell whether it runs on {self.gpu}: {rv.text}. "
                        f"(Images: {images})")
            return f"{images} Runtime: {rv.text}."
        if self.runtime is not None and self.runtime.linkage != "none":
            need = self.runtime
            drv = (f"a driver of CUDA {need.major} or newer" if need.major is not None
                   else "a driver nvstage cannot name")
            return f"{images} It needs {need.describe()}: {drv} (give --driver to check)."
        return images

    def _explain_images(self) -> str:
        img = self.image
        if self.how == UNKNOWN:
            return f"Cannot tell whether it runs on {self.gpu}: {self.why_unknown}"
        if self.how == SASS_EXACT:
            return f"Runs on {self.gpu}: the {img.arch} cubin {img.name} matches exactly."
        if self.how == SASS_COMPATIBLE:
            return (f"Runs on {self.gpu}: the {img.arch} cubin {img.name} is binary-compatible "
                    f"(same major architecture, older minor).")
        if self.how == PTX_JIT:
            drv = f" a {self.driver} driver" if self.driver else " the driver"
            return (f"Runs on {self.gpu} after{drv} JIT-compiles the {img.arch} PTX "
                    f"{img.name} (PTX ISA {img.ptx_version or 'unknown'}); expect a one-time "
                    f"compile at module load.")
        why = "; ".join(self.reasons) if self.reasons else "the fatbin holds no images"
        return (f"Will not run on {self.gpu}: no kernel image for {self.gpu_arch} ({why}); "
                f"rebuild with -gencode arch=compute_{self.gpu_arch[3:]},"
                f"code={self.gpu_arch} or include PTX for an older arch.")

    def to_json(self) -> dict:
        return {
            "runs": self.runs,
            "how": self.how,
            "image": self.image.to_json() if self.image else None,
            "gpu": self.gpu,
            "gpu_arch": self.gpu_arch,
            "driver": self.driver,
            "reasons": list(self.reasons),
            "runtime": None if self.runtime is None else {
                **self.runtime.to_json(),
                "runs": None if self.runtime_verdict is None else self.runtime_verdict.runs,
                "why": None if self.runtime_verdict is None else self.runtime_verdict.text},
            "explain": self.explain(),
        }


# ---------------------------------------------------------------------------------------------
# Driver versions and PTX ISA versions.
# ---------------------------------------------------------------------------------------------
_DRIVER_RE = re.compile(r"^(\d{1,2})(?:\.(\d{1,2}))?(?:\.\d+)?$")


def parse_driver(driver: str | int) -> tuple[int, int]:
    """The CUDA version a driver supports: "13.0", "13", or 13000 (cuDriverGetVersion)."""
    if isinstance(driver, int) or (isinstance(driver, str) and driver.strip().isdigit()
                                   and int(driver) >= 1000):
        v = int(driver)
        return v // 1000, (v % 1000) // 10
    m = _DRIVER_RE.match(str(driver).strip())
    if not m:
        raise UsageError(f"not a CUDA driver version: {driver!r}",
                         hint="give the CUDA version the driver supports, as nvidia-smi "
                              "prints it ('CUDA Version: 13.0'), e.g. --driver 13.0")
    return int(m.group(1)), int(m.group(2) or 0)


def driver_needed_for_ptx(ptx_version: str) -> tuple[int, int]:
    """The oldest CUDA driver that can JIT PTX of this ISA version."""
    from cuda.bindings.utils import get_minimal_required_cuda_ver_from_ptx_ver

    try:
        v = get_minimal_required_cuda_ver_from_ptx_ver(ptx_version)
    except ValueError:
        # Newer than cuda.bindings' table. From 13.0 on, PTX ISA 9.N has shipped with
        # CUDA 13.N; assume the pattern holds rather than refuse.
        m = re.match(r"^9\.(\d)$", ptx_version or "")
        if not m:
            raise UsageError(f"unknown PTX ISA version {ptx_version!r}") from None
        return 13, int(m.group(1))
    return v // 1000, (v % 1000) // 10


def max_ptx_for_driver(driver: str | int) -> str | None:
    """The newest PTX ISA version a driver of this CUDA version can JIT (None: too old)."""
    want = parse_driver(driver)
    best: tuple[int, int] | None = None
    for major in range(1, 10):
        for minor in range(0, 10):
            try:
                need = driver_needed_for_ptx(f"{major}.{minor}")
            except UsageError:
                continue
            if need <= want and (best is None or (major, minor) > best):
                best = (major, minor)
    return f"{best[0]}.{best[1]}" if best else None


# ---------------------------------------------------------------------------------------------
# The choice.
# ---------------------------------------------------------------------------------------------
def _fits(image_arch: str, gpu: tuple[int, int], *, sass: bool) -> tuple[bool, str]:
    """Whether code for ``image_arch`` can run on capability ``gpu``, and if not, why."""
    major, minor, suffix = parse_arch(image_arch)
    g_major, g_minor = gpu
    if suffix == "a":
        if (major, minor) == gpu:
            return True, ""
        return False, f"{image_arch} is arch-specific and runs only on {major}.{minor}"
    if sass or suffix == "f":
        if major != g_major:
            return False, (f"{image_arch} {'SASS' if sass else 'PTX'} does not run across "
                           f"major architectures ({major}.x vs {g_major}.x)")
        if minor > g_minor:
            return False, f"{image_arch} is newer than {g_major}.{g_minor}"
        return True, ""
    if (major, minor) > gpu:
        return False, f"{image_arch} PTX is newer than {g_major}.{g_minor}"
    return True, ""


def _rank(image: FatbinImage) -> tuple[int, int, int]:
    major, minor, suffix = parse_arch(image.arch)
    # Newest arch first; at equal arch prefer a specific build (a, f) over the generic one,
    # since it was compiled for exactly this kind of GPU.
    return major, minor, 1 if suffix else 0


def will_it_run(images: list[FatbinImage], gpu: str | GpuSpec,
                driver: str | int | None = None) -> Verdict:
    """Which image the driver would pick for ``gpu`` ("h200", "sm_90", a spec), or none.

    Device-link images are considered only when there are no kernel images: in a program
    built without -rdc they hold no kernels, and their absence for an arch does not stop
    the kernels from loading.
    """
    spec = gpu if isinstance(gpu, GpuSpec) else resolve_gpu(gpu)
    g_major, g_minor, _ = parse_arch(spec.arch)
    gpu_cc = (g_major, g_minor)
    gpu_arch = f"sm_{g_major}{g_minor}"
    label = gpu_arch if spec.name == gpu_arch or spec.name.startswith("sm_") \
        else f"{spec.name} ({gpu_arch})"
    drv = parse_driver(driver) if driver is not None else None
    driver_text = f"{drv[0]}.{drv[1]}" if drv else None

    # Copies in __nv_relfatbin are kept for nvlink; the driver never loads them.
    images = [i for i in images if i.loadable] or list(images)
    kernel_images = [i for i in images if i.role == "kernel"]
    pool = kernel_images or list(images)
    reasons: list[str] = []

    def verdict(runs: bool, how: str, image: FatbinImage | None) -> Verdict:
        return Verdict(runs=runs, how=how, image=image, gpu=label, gpu_arch=gpu_arch,
                       driver=driver_text, reasons=tuple(reasons))

    cubins = [i for i in pool if i.kind == "cubin"]
    exact = [i for i in cubins if parse_arch(i.arch)[:2] == gpu_cc
             and _fits(i.arch, gpu_cc, sass=True)[0]]
    if exact:
        return verdict(True, SASS_EXACT, max(exact, key=_rank))

    compatible = []
    for i in cubins:
        ok, why = _fits(i.arch, gpu_cc, sass=True)
        (compatible.append(i) if ok else reasons.append(why))
    if compatible:
        return verdict(True, SASS_COMPATIBLE, max(compatible, key=_rank))

    ptx_ok = []
    for i in (i for i in pool if i.kind == "ptx"):
        ok, why = _fits(i.arch, gpu_cc, sass=False)
        if not ok:
            reasons.append(why)
            continue
        if drv is not None and i.ptx_version:
            try:
                need = driver_needed_for_ptx(i.ptx_version)
            except UsageError:  # the version comes from the image header: damage, likely
                reasons.append(f"{i.name} says PTX ISA {i.ptx_version}, which no known "
                               "driver JIT-compiles (a damaged image?)")
                continue
            if need > drv:
                reasons.append(f"{i.arch} PTX is ISA {i.ptx_version}, which needs a "
                               f"{need[0]}.{need[1]} driver; a {driver_text} driver JITs up "
                               f"to PTX {max_ptx_for_driver(driver_text) or 'none'}")
                continue
        ptx_ok.append(i)
    if ptx_ok:
        return verdict(True, PTX_JIT, max(ptx_ok, key=_rank))

    if any(i.kind == "ltoir" for i in pool):
        reasons.append("LTO-IR images need nvJitLink; the driver cannot load them")
    if not pool:
        reasons.append("the fatbin holds no images")
    elif not any(i.kind == "ptx" for i in pool):
        reasons.append("there is no PTX to JIT-compile")
    return verdict(False, NONE, None)


def with_runtime(verdict: Verdict, need, gpu: str | GpuSpec) -> Verdict:
    """``verdict`` (the images') joined with the CUDA runtime an executable needs
    (``cudart.RuntimeNeed``): with a driver named, a runtime it refuses is a "no" and one
    nvstage cannot read a "cannot tell", whatever the images say."""
    from dataclasses import replace


    if need is None:
        return verdict
    if verdict.driver is None:
        return replace(verdict, runtime=need)
    spec = gpu if isinstance(gpu, GpuSpec) else resolve_gpu(gpu)
    data_center = None if spec.display_name == "" else "GeForce" not in spec.display_name
    rv = runtime_runs(need, parse_driver(verdict.driver), data_center=data_center)
    runs = verdict.runs
    if rv.runs is False or runs is False:
        runs = False
    elif rv.runs is None:
        runs = None
    return replace(verdict, runs=runs, runtime=need, runtime_verdict=rv)
