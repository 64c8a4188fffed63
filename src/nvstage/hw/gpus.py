"""Named GPU presets (for the model's estimates), each number with where it came from, and
custom specs read from a file.

``GPUS`` holds product facts, which differ between parts of one arch (an H100 and an H200
are both sm_90): SM count, clocks, memory, peak rates, the PCIe link, the memory latency. The
SM's own limits are the arch's (``nvstage.hw.archs``). ``lookup_gpu`` accepts either a preset
name or an arch; ``load_gpu_spec`` reads a custom spec from a TOML or JSON file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from nvstage.errors import GpuSpecError, UsageError
# The arch half of the hardware tables, named here too for the callers that look both up.
from nvstage.hw.archs import ARCHS, ArchLimits, arch_limits, parse_arch  # noqa: F401
from nvstage.documents import parse_toml_text, read_text_doc

# ---------------------------------------------------------------------------------------------
# GPU presets: product facts.
# ---------------------------------------------------------------------------------------------
# Theoretical PCIe rate per lane and direction: GT/s times the line-code efficiency.
# Gen3..5 use 128b/130b; Gen6 uses PAM4 with FLIT mode (1b/1b line code; FLIT CRC/FEC
# overhead ignored here, as datasheets do).
_PCIE_GTS = {3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
_PCIE_CODE = {3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 1.0}
PCIE_SOURCE = ("PCI-SIG base specifications: 8/16/32/64 GT/s per lane for Gen3/4/5/6, "
               "128b/130b encoding for Gen3-5 (Gen4 x16 = 31.5 GB/s, Gen5 x16 = 63 GB/s)")


def pcie_bytes_per_s(gen: int, width: int) -> float:
    """Theoretical bytes per second in one direction of a PCIe link."""
    if gen not in _PCIE_GTS:
        raise GpuSpecError(f"unknown PCIe generation {gen}",
                           hint=f"known: {', '.join(map(str, _PCIE_GTS))}")
    return _PCIE_GTS[gen] * 1e9 * _PCIE_CODE[gen] * width / 8


@dataclass(frozen=True)
class GpuSpec:
    """One GPU: its arch (and so its SM limits) plus, for a named product, the datasheet
    figures a roofline model needs. Units are SI: bytes, bytes/s, FLOP/s, MHz.

    A spec made from an arch alone (``lookup_gpu("sm_90")``) has only ``arch``; the product
    fields are None.
    """

    name: str  # "h200", or the arch for an arch-only spec
    arch: str  # "sm_90"
    display_name: str = ""
    sm_count: int | None = None
    boost_clock_mhz: float | None = None
    base_clock_mhz: float | None = None
    memory_bytes: int | None = None  # datasheet "GB" read as GiB, as nvidia-smi reports
    memory_bandwidth: float | None = None  # bytes/s, datasheet peak
    fp32_flops: float | None = None  # FLOP/s, non-tensor FP32 peak
    bf16_flops: float | None = None  # FLOP/s, dense (no sparsity) BF16 tensor peak
    pcie_gen: int | None = None
    pcie_width: int | None = None
    memory_latency_s: float | None = None  # a load's round trip to DRAM, unloaded (published)
    sources: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    notes: str = ""

    @property
    def limits(self) -> ArchLimits:
        return arch_limits(self.arch)

    @property
    def is_product(self) -> bool:
        return self.sm_count is not None

    @property
    def pcie_bandwidth(self) -> float | None:
        """Theoretical bytes/s per direction of the host link."""
        if self.pcie_gen is None or self.pcie_width is None:
            return None
        return pcie_bytes_per_s(self.pcie_gen, self.pcie_width)

    def source(self, name: str) -> str:
        return self.sources.get(name, "")

    def to_json(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "sources"}
        d["pcie_bandwidth"] = self.pcie_bandwidth
        d["sources"] = dict(self.sources)
        if self.pcie_bandwidth is not None:
            d["sources"]["pcie_bandwidth"] = PCIE_SOURCE
        d["limits"] = self.limits.to_json()
        return d


TB = 1e12
GB = 1e9
GIB = 1024 ** 3
NS = 1e-9

_H100_DS = "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column)"
_H200_DS = "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column)"
_A100_DS = "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM column)"
_L4_DS = "NVIDIA L4 Tensor Core GPU datasheet"
_L40S_DS = "NVIDIA L40S GPU datasheet"
_ADA_WP = "NVIDIA Ada GPU Architecture whitepaper v2.1, Appendix A (GeForce RTX 4090)"
_B200_DS = "NVIDIA HGX B200 / DGX B200 datasheet (per-GPU share of the 8-GPU figures)"
_BW_BRIEF = "NVIDIA Blackwell Architecture Technical Brief (HGX B200, 1000 W)"
_HOPPER_WP = "NVIDIA H100 Tensor Core GPU Architecture whitepaper (H100 SXM5: 132 SMs)"
_TPU = "TechPowerUp GPU Database (clock not in NVIDIA's datasheet)"
_SPARSE = "; the datasheet's figure is with 2:4 sparsity, halved here for dense"
# Published pointer-chasing measurements (one warp walks a buffer far larger than L2 in a
# random order): te42kyfo/gpu-benches, the files named, last row (cycles at the clock given).
_BENCHES = "te42kyfo/gpu-benches (github.com/te42kyfo/gpu-benches)"
_LAT_GH100 = (f"{_BENCHES} gpu-latency/h100_pcie.txt: 658 cycles at 1755 MHz = 375 ns to "
              "DRAM, measured on an H100 PCIe")
_LAT_GA100 = (f"{_BENCHES} cuda-latency/a100_80.txt: 572 cycles at 1410 MHz = 405 ns to "
              "DRAM, measured on an A100 80GB")
_LAT_AD102 = (f"{_BENCHES} gpu-latency/l40.txt: 632 cycles at 2490 MHz = 254 ns to DRAM, "
              "measured on an L40 (AD102, GDDR6)")


def _family(fields: dict, sources: dict) -> dict:
    """Values shared by every product of one chip configuration, with their sources."""
    return {"fields": fields, "sources": sources}


def _product(family: dict | None = None, *, sources: dict, **fields) -> GpuSpec:
    """One GPU preset: its family's values, then its own (which win), each with a source."""
    merged = dict(family["fields"]) if family else {}
    merged.update(fields)
    src = dict(family["sources"]) if family else {}
    src.update(sources)
    return GpuSpec(**merged, sources=src)


# GH100 as the SXM5 parts configure it: H100 SXM and H200 SXM differ only in their memory.
_GH100_SXM = _family(
    dict(arch="sm_90", sm_count=132, boost_clock_mhz=1980, base_clock_mhz=1590,
         fp32_flops=67 * TB, bf16_flops=989.5 * TB, pcie_gen=5, pcie_width=16,
         memory_latency_s=375 * NS),
    {"sm_count": _HOPPER_WP, "boost_clock_mhz": _TPU, "base_clock_mhz": _TPU,
     "memory_latency_s": f"{_LAT_GH100} (the same GH100 die and L2; ASSUMPTION for HBM3 and "
                         "HBM3e, not measured on them)"})
_AD102_LAT = f"{_LAT_AD102}; ASSUMPTION for this part (same Ada memory system, GDDR6/6X)"

GPUS: dict[str, GpuSpec] = {g.name: g for g in (
    _product(
        _GH100_SXM, name="h200", display_name="NVIDIA H200 SXM 141GB",
        memory_bytes=141 * GIB, memory_bandwidth=4.8 * TB,
        sources={
            "sm_count": f"{_HOPPER_WP}; H200 uses the same GH100 configuration",
            "memory_bytes": f"{_H200_DS}: 141 GB HBM3e",
            "memory_bandwidth": f"{_H200_DS}: 4.8 TB/s",
            "fp32_flops": f"{_H200_DS}: 67 TFLOPS",
            "bf16_flops": f"{_H200_DS}: 1,979 TFLOPS BF16 Tensor Core{_SPARSE}",
            "pcie_gen": f"{_H200_DS}: PCIe Gen5 128 GB/s (both directions)",
            "pcie_width": f"{_H200_DS}: x16 (128 GB/s at Gen5)",
        }),
    _product(
        _GH100_SXM, name="h100", display_name="NVIDIA H100 SXM5 80GB",
        memory_bytes=80 * GIB, memory_bandwidth=3.35 * TB,
        sources={
            "memory_bytes": f"{_H100_DS}: 80 GB HBM3",
            "memory_bandwidth": f"{_H100_DS}: 3.35 TB/s",
            "fp32_flops": f"{_H100_DS}: 67 TFLOPS",
            "bf16_flops": f"{_H100_DS}: 1,979 TFLOPS BF16 Tensor Core{_SPARSE}",
            "pcie_gen": f"{_H100_DS}: PCIe Gen5 128 GB/s (both directions)",
            "pcie_width": f"{_H100_DS}: x16 (128 GB/s at Gen5)",
        }),
    _product(
        name="a100", arch="sm_80", display_name="NVIDIA A100 SXM4 80GB",
        sm_count=108, boost_clock_mhz=1410, base_clock_mhz=1275,
        memory_bytes=80 * GIB, memory_bandwidth=2039 * GB,
        fp32_flops=19.5 * TB, bf16_flops=312 * TB, pcie_gen=4, pcie_width=16,
        memory_latency_s=405 * NS,
        sources={
            "sm_count": "NVIDIA A100 Tensor Core GPU Architecture whitepaper: 108 SMs",
            "boost_clock_mhz": "NVIDIA A100 Tensor Core GPU Architecture whitepaper: 1410 MHz",
            "base_clock_mhz": _TPU,
            "memory_bytes": f"{_A100_DS}: 80 GB HBM2e",
            "memory_bandwidth": f"{_A100_DS}: 2,039 GB/s",
            "fp32_flops": f"{_A100_DS}: 19.5 TFLOPS",
            "bf16_flops": f"{_A100_DS}: 312 TFLOPS BF16 Tensor Core (624 with sparsity)",
            "pcie_gen": f"{_A100_DS}: PCIe Gen4 64 GB/s (both directions)",
            "pcie_width": f"{_A100_DS}: x16 (64 GB/s at Gen4)",
            "memory_latency_s": _LAT_GA100,
        }),
    _product(
        name="l4", arch="sm_89", display_name="NVIDIA L4 24GB",
        sm_count=58, boost_clock_mhz=2040, base_clock_mhz=795,
        memory_bytes=24 * GIB, memory_bandwidth=300 * GB,
        fp32_flops=30.3 * TB, bf16_flops=121 * TB, pcie_gen=4, pcie_width=16,
        memory_latency_s=254 * NS,
        sources={
            "sm_count": f"{_TPU}; AD104 as configured for L4 (7,424 CUDA cores / 128)",
            "boost_clock_mhz": _TPU, "base_clock_mhz": _TPU,
            "memory_bytes": f"{_L4_DS}: 24 GB GDDR6",
            "memory_bandwidth": f"{_L4_DS}: 300 GB/s",
            "fp32_flops": f"{_L4_DS}: 30.3 TFLOPS",
            "bf16_flops": f"{_L4_DS}: 242 TFLOPS BF16 Tensor Core{_SPARSE}",
            "pcie_gen": f"{_L4_DS}: PCIe Gen4 x16 64 GB/s",
            "pcie_width": f"{_L4_DS}: x16",
            "memory_latency_s": _AD102_LAT,
        }),
    _product(
        name="l40s", arch="sm_89", display_name="NVIDIA L40S 48GB",
        sm_count=142, boost_clock_mhz=2520, base_clock_mhz=1110,
        memory_bytes=48 * GIB, memory_bandwidth=864 * GB,
        fp32_flops=91.6 * TB, bf16_flops=362.05 * TB, pcie_gen=4, pcie_width=16,
        memory_latency_s=254 * NS,
        sources={
            "sm_count": f"{_TPU}; AD102 as configured for L40S (18,176 CUDA cores / 128)",
            "boost_clock_mhz": _TPU, "base_clock_mhz": _TPU,
            "memory_bytes": f"{_L40S_DS}: 48 GB GDDR6 with ECC",
            "memory_bandwidth": f"{_L40S_DS}: 864 GB/s",
            "fp32_flops": f"{_L40S_DS}: 91.6 TFLOPS",
            "bf16_flops": f"{_L40S_DS}: 733 TFLOPS BF16 Tensor Core{_SPARSE}",
            "pcie_gen": f"{_L40S_DS}: PCIe Gen4 x16 64 GB/s bidirectional",
            "pcie_width": f"{_L40S_DS}: x16",
            "memory_latency_s": _AD102_LAT,
        }),
    _product(
        name="rtx4090", arch="sm_89", display_name="NVIDIA GeForce RTX 4090",
        sm_count=128, boost_clock_mhz=2520, base_clock_mhz=2235,
        memory_bytes=24 * GIB, memory_bandwidth=1008 * GB,
        fp32_flops=82.6 * TB, bf16_flops=165.2 * TB, pcie_gen=4, pcie_width=16,
        memory_latency_s=254 * NS,
        sources={
            "sm_count": f"{_ADA_WP}: 128 SMs",
            "boost_clock_mhz": f"{_ADA_WP}: 2520 MHz", "base_clock_mhz": f"{_ADA_WP}: 2235 MHz",
            "memory_bytes": f"{_ADA_WP}: 24 GB GDDR6X",
            "memory_bandwidth": f"{_ADA_WP}: 1008 GB/s",
            "fp32_flops": f"{_ADA_WP}: 82.6 TFLOPS",
            "bf16_flops": f"{_ADA_WP}: 165.2 TFLOPS BF16 with FP32 accumulate, dense",
            "pcie_gen": "NVIDIA GeForce RTX 4090 product specifications: PCIe Gen4",
            "pcie_width": "NVIDIA GeForce RTX 4090 product specifications: x16",
            "memory_latency_s": _AD102_LAT,
        }),
    _product(
        name="b200", arch="sm_100", display_name="NVIDIA B200 (HGX B200, 1000 W)",
        sm_count=148, boost_clock_mhz=None, base_clock_mhz=None,
        memory_bytes=180 * GIB, memory_bandwidth=8 * TB,
        fp32_flops=80 * TB, bf16_flops=2250 * TB, pcie_gen=5, pcie_width=16,
        memory_latency_s=375 * NS,
        sources={
            "sm_count": "cudaDevAttrMultiProcessorCount as reported on B200 (148); "
                        "NVIDIA's datasheet does not list SMs",
            "boost_clock_mhz": "not published by NVIDIA", "base_clock_mhz": "not published",
            "memory_bytes": f"{_B200_DS}: 1,440 GB HBM3e per 8 GPUs",
            "memory_bandwidth": f"{_B200_DS}: 64 TB/s per 8 GPUs",
            "fp32_flops": f"{_BW_BRIEF}: 80 TFLOPS FP32",
            "bf16_flops": f"{_BW_BRIEF}: 2.25 PFLOPS BF16 dense (4.5 with sparsity)",
            "pcie_gen": f"{_B200_DS}: host links are PCIe Gen5 (the GPU itself supports Gen6)",
            "pcie_width": f"{_B200_DS}: x16",
            "memory_latency_s": f"ASSUMPTION: no published DRAM latency of a B200 found; "
                                f"the H100's ({_LAT_GH100})",
        },
        notes="HGX B200 part at 1000 W; the GB200 part runs faster."),
)}

_ALIASES = {"h200-sxm": "h200", "h100-sxm": "h100", "h100sxm": "h100", "a100-sxm": "a100",
            "a100-80gb": "a100", "rtx-4090": "rtx4090", "4090": "rtx4090",
            "geforce-rtx-4090": "rtx4090"}



def lookup_gpu(name_or_arch: str) -> GpuSpec:
    """A preset by name (any case: "h200", "H200"), or an arch-only spec ("sm_90", "9.0")."""
    key = name_or_arch.strip().lower().replace(" ", "-")
    key = _ALIASES.get(key, key)
    if key in GPUS:
        return GPUS[key]
    try:
        major, minor, suffix = parse_arch(key)
    except UsageError:
        pass
    else:
        limits = arch_limits(key)  # raises UnknownArch with the known list
        return GpuSpec(name=f"sm_{major}{minor}{suffix}", arch=limits.arch,
                       display_name=f"any sm_{major}{minor}{suffix} GPU (arch limits only)")
    raise UsageError(f"unknown GPU {name_or_arch!r}",
                     hint=f"known GPUs: {', '.join(GPUS)}; or an arch such as sm_90 "
                          f"({', '.join(ARCHS)}); or the path of a .toml/.json spec file")


def resolve_gpu(text: str) -> GpuSpec:
    """What a ``--gpu`` option names: a spec file (.toml/.json), a preset, or an arch."""
    if text.lower().endswith((".toml", ".json")) or Path(text).is_file():
        return load_gpu_spec(text)
    return lookup_gpu(text)


def choose_gpu(name: str | None = None, spec_file: str | Path | None = None) -> GpuSpec:
    """The GPU a ``--gpu`` preset names or a ``--gpu-spec`` file describes (one of them at
    most; the H200 when neither is given)."""
    if name and spec_file:

        raise UsageError("give --gpu or --gpu-spec, not both")
    return load_gpu_spec(spec_file) if spec_file else resolve_gpu(name or "h200")


# ---------------------------------------------------------------------------------------------
# Custom specs from a file.
# ---------------------------------------------------------------------------------------------
_INT_FIELDS = ("sm_count", "memory_bytes", "pcie_gen", "pcie_width")
_NUM_FIELDS = ("boost_clock_mhz", "base_clock_mhz", "memory_bandwidth", "fp32_flops",
               "bf16_flops", "memory_latency_s")
_STR_FIELDS = ("name", "arch", "display_name", "notes")
_REQUIRED = ("name", "arch", "sm_count", "memory_bandwidth", "fp32_flops")
# What a real GPU can be, generously: (lowest, highest, unit). A value outside passed the
# old "positive" check and then broke the model (memory_bandwidth = 1e-300 made times of
# 1e+300 s: an SVG that overflowed, JSON with Infinity). Widths of 12 and 32 lanes exist.
_RANGES: dict[str, tuple[float, float, str]] = {
    "sm_count": (1, 10_000, "SMs"),
    "memory_bytes": (1 << 20, 1 << 50, "bytes (1 MiB to 1 PiB)"),
    "pcie_width": (1, 32, "lanes"),
    "boost_clock_mhz": (1, 100_000, "MHz"),
    "base_clock_mhz": (1, 100_000, "MHz"),
    "memory_bandwidth": (1e6, 1e16, "bytes/s (1 MB/s to 10 PB/s)"),
    "fp32_flops": (1e6, 1e19, "FLOP/s"),
    "bf16_flops": (1e6, 1e19, "FLOP/s"),
    "memory_latency_s": (1e-9, 1e-4, "seconds (1 ns to 100 us)"),
}
_ALLOWED = set(_INT_FIELDS) | set(_NUM_FIELDS) | set(_STR_FIELDS) | {"sources", "base"}


def load_gpu_spec(path: str | Path) -> GpuSpec:
    """Read a GPU spec from a TOML (``.toml``) or JSON file.

    Keys are GpuSpec's field names, in SI units (bytes, bytes/s, FLOP/s, MHz). Required:
    name, arch, sm_count, memory_bandwidth, fp32_flops -- unless ``base = "h100"`` names a
    preset to start from, in which case every key only overrides. An optional ``[sources]``
    table gives a source per field; fields without one are credited to the file.
    """
    p = Path(path)
    text = read_text_doc(p, "GPU spec", GpuSpecError)
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise GpuSpecError(f"{p}: not valid JSON: {e.msg} (line {e.lineno})") from None
        except ValueError as e:  # an integer past Python's 4300-digit conversion limit
            raise GpuSpecError(f"{p}: not valid JSON: {e}") from None
        except RecursionError:
            raise GpuSpecError(f"{p}: not valid JSON: nested too deeply") from None
    else:
        data = parse_toml_text(text, f"{p}: not valid TOML", GpuSpecError,
                               hint="use .json for a JSON spec")
    return gpu_spec_from_dict(data, origin=str(p))


def _show(v) -> str:
    """A number for a message: an integer of thousands of digits is shown by its size."""
    if isinstance(v, int) and v.bit_length() > 64:
        return f"an integer of {len(str(abs(v)))} digits" if v.bit_length() < 10_000 \
            else f"an integer of about {int(v.bit_length() * 0.30103)} digits"
    return f"{v:g}" if isinstance(v, float) else str(v)


def gpu_spec_from_dict(data: Any, *, origin: str = "custom spec") -> GpuSpec:
    """Validate a mapping as a GPU spec; each problem names the field and the file."""
    if not isinstance(data, dict):
        raise GpuSpecError(f"{origin}: a GPU spec must be a table of fields, "
                           f"not {type(data).__name__}")
    unknown = sorted(set(data) - _ALLOWED)
    if unknown:
        raise GpuSpecError(f"{origin}: unknown field(s) {', '.join(unknown)}",
                           hint=f"allowed: {', '.join(sorted(_ALLOWED))}")
    base: GpuSpec | None = None
    if "base" in data:
        if not isinstance(data["base"], str):
            raise GpuSpecError(f"{origin}: field 'base' must be a preset name (a string)")
        try:
            base = GPUS[data["base"].strip().lower()]
        except KeyError:
            raise GpuSpecError(f"{origin}: base {data['base']!r} is not a known GPU",
                               hint=f"known GPUs: {', '.join(GPUS)}") from None
    if base is None:
        missing = [k for k in _REQUIRED if k not in data]
        if missing:
            raise GpuSpecError(f"{origin}: missing required field(s) {', '.join(missing)}",
                               hint=f"required: {', '.join(_REQUIRED)} (or base = \"h100\" "
                                    f"to start from a preset)")
    values: dict[str, Any] = {}
    for k, v in data.items():
        if k in ("sources", "base"):
            continue
        if k in _STR_FIELDS:
            if not isinstance(v, str) or (k in ("name", "arch") and not v.strip()):
                raise GpuSpecError(f"{origin}: field {k!r} must be a non-empty string, "
                                   f"got {v!r}")
        elif k in _INT_FIELDS:
            # bool is an int in Python; a spec saying sm_count = true is a mistake.
            if isinstance(v, bool) or not isinstance(v, int):
                raise GpuSpecError(f"{origin}: field {k!r} must be an integer, got {v!r}")
            if v <= 0:
                raise GpuSpecError(f"{origin}: field {k!r} must be positive, got {_show(v)}")
        else:  # numbers
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise GpuSpecError(f"{origin}: field {k!r} must be a number, got {v!r}")
            try:
                as_float = float(v)
            except OverflowError:  # an integer past any float
                as_float = math.inf
            if not math.isfinite(as_float) or as_float <= 0:
                raise GpuSpecError(f"{origin}: field {k!r} must be a positive number, "
                                   f"got {_show(v)}")
            v = as_float
        if k in _RANGES:
            lo, hi, unit = _RANGES[k]
            if not lo <= v <= hi:
                raise GpuSpecError(f"{origin}: field {k!r} must be between {lo:g} and "
                                   f"{hi:g} {unit}, got {_show(v)}",
                                   hint="units are SI: bytes, bytes/s, FLOP/s, MHz")
        values[k] = v
    if "arch" in values:
        try:
            limits = arch_limits(values["arch"])
        except UsageError as e:
            raise GpuSpecError(f"{origin}: field 'arch': {e.message}", hint=e.hint) from None
        values["arch"] = limits.arch
    if "pcie_gen" in values and values["pcie_gen"] not in _PCIE_GTS:
        raise GpuSpecError(f"{origin}: field 'pcie_gen' must be one of "
                           f"{', '.join(map(str, _PCIE_GTS))}, got {values['pcie_gen']}")
    given_sources = data.get("sources", {})
    if not isinstance(given_sources, dict) or not all(
            isinstance(s, str) for s in given_sources.values()):
        raise GpuSpecError(f"{origin}: 'sources' must be a table of field = \"source\" strings")
    sources = dict(base.sources) if base else {}
    for k in values:
        sources[k] = given_sources.get(k, origin)
    if base is not None:
        spec = replace(base, **values, sources=sources)
        if "name" not in values:
            spec = replace(spec, name=f"{base.name}-custom")
        return spec
    return GpuSpec(**values, sources=sources)
