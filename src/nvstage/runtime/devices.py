"""Device facts through NVML (pynvml from nvidia-ml-py): name, compute capability, memory, PCIe.

NVML needs only the driver, not a CUDA context, so this is safe to call from doctor.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class GpuFacts:
    index: int
    name: str
    compute_capability: str  # "9.0"
    memory_bytes: int
    pcie_generation: int | None  # current link; max below
    pcie_width: int | None
    pcie_max_generation: int | None
    pcie_max_width: int | None
    sm_clock_max_mhz: int | None
    mem_clock_max_mhz: int | None

    @property
    def arch(self) -> str:
        major, minor = self.compute_capability.split(".")
        return f"sm_{major}{minor}"

    def to_json(self) -> dict:
        d = asdict(self)
        d["arch"] = self.arch
        return d


def nvml_gpus() -> tuple[list[GpuFacts], str | None, str]:
    """(GPUs, driver version, a one-line note). Never raises: no NVML means no GPUs listed."""
    try:
        import pynvml
    except ImportError:
        return [], None, "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound and friends
        return [], None, f"NVML unavailable ({type(e).__name__})"
    try:
        driver = _s(pynvml.nvmlSystemGetDriverVersion())
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
            out.append(GpuFacts(
                index=i,
                name=_s(pynvml.nvmlDeviceGetName(h)),
                compute_capability=f"{major}.{minor}",
                memory_bytes=int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                pcie_generation=_try(pynvml.nvmlDeviceGetCurrPcieLinkGeneration, h),
                pcie_width=_try(pynvml.nvmlDeviceGetCurrPcieLinkWidth, h),
                pcie_max_generation=_try(pynvml.nvmlDeviceGetMaxPcieLinkGeneration, h),
                pcie_max_width=_try(pynvml.nvmlDeviceGetMaxPcieLinkWidth, h),
                sm_clock_max_mhz=_try(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_SM),
                mem_clock_max_mhz=_try(pynvml.nvmlDeviceGetMaxClockInfo, h,
                                       pynvml.NVML_CLOCK_MEM),
            ))
        return out, driver, f"{len(out)} GPU(s) via NVML"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _try(fn, *args):
    try:
        return int(fn(*args))
    except Exception:
        return None
