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
    out: list[GpuFacts] = []
    driver = None
    try:
        driver = _s(pynvml.nvmlSystemGetDriverVersion())
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
    except Exception as e:  # a query this GPU or driver does not answer: keep what we have
        return out, driver, f"NVML stopped answering ({type(e).__name__}: {e})"
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


def cuda_device_facts(dev) -> dict:
    """What cuda.core says about a device (after ``driver.require()``): SMs, clocks, memory."""
    p = dev.properties
    cc = dev.compute_capability
    facts = {"name": dev.name, "compute_capability": f"{cc.major}.{cc.minor}",
             "arch": f"sm_{cc.major}{cc.minor}", "pci_bus_id": _safe(lambda: dev.pci_bus_id)}
    for key, attr in (("sm_count", "multiprocessor_count"),
                      ("sm_clock_khz", "clock_rate"),
                      ("memory_clock_khz", "memory_clock_rate"),
                      ("memory_bus_width_bits", "global_memory_bus_width"),
                      ("l2_cache_bytes", "l2_cache_size"),
                      ("max_shared_memory_per_block_optin", "max_shared_memory_per_block_optin"),
                      ("async_engine_count", "async_engine_count")):
        facts[key] = _safe(lambda a=attr: int(getattr(p, a)))
    return facts


def device_facts(dev=None) -> dict:
    """cuda.core's facts (when a device object is given) merged with NVML's for GPU 0."""
    gpus, driver, note = nvml_gpus()
    out: dict = {"nvml": gpus[0].to_json() if gpus else None, "nvml_note": note,
                 "driver_version": driver}
    if dev is not None:
        out.update(cuda_device_facts(dev))
    elif gpus:
        out.update(name=gpus[0].name, compute_capability=gpus[0].compute_capability,
                   arch=gpus[0].arch)
    if gpus:
        g = gpus[0]
        out.update(memory_bytes=g.memory_bytes, pcie_generation=g.pcie_generation,
                   pcie_width=g.pcie_width, pcie_max_generation=g.pcie_max_generation,
                   pcie_max_width=g.pcie_max_width, sm_clock_max_mhz=g.sm_clock_max_mhz,
                   mem_clock_max_mhz=g.mem_clock_max_mhz)
    return out


def _safe(fn):
    try:
        return fn()
    except Exception:
        return None
