"""The arch limits and GPU presets: every number sourced, lookups, custom spec files."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import fields
from pathlib import Path

import pytest

from nvstage.errors import InputNotFound, UnknownArch, UsageError
from nvstage.errors import GpuSpecError
from nvstage.hw.gpus import (
    ARCHS,
    GPUS,
    ArchLimits,
    GpuSpec,
    arch_limits,
    gpu_spec_from_dict,
    load_gpu_spec,
    lookup_gpu,
    parse_arch,
    pcie_bytes_per_s,
    resolve_gpu,
)

SPECS = Path(__file__).parents[1] / "data" / "gpus"
KB = 1024


def test_every_arch_in_the_issue_is_there():
    for arch in ("sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_100", "sm_103",
                 "sm_120"):
        assert arch in ARCHS


def test_every_real_arch_this_nvcc_accepts_has_limits(toolkit):
    cp = subprocess.run([toolkit.nvcc, "--list-gpu-code"], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    real = re.findall(r"\bsm_\d+\b", cp.stdout)
    assert "sm_90" in real  # the list was read, not an empty answer
    missing = [a for a in real if a not in ARCHS]
    assert not missing, f"nvcc --list-gpu-code lists {missing}, which ARCHS lacks"
    for a in real:
        assert arch_limits(a) is ARCHS[a]
        assert ARCHS[a].compute_capability == f"{int(a[3:]) // 10}.{int(a[3:]) % 10}"


@pytest.mark.parametrize("arch", list(ARCHS))
def test_every_arch_value_has_a_source(arch):
    lim = ARCHS[arch]
    for f in fields(ArchLimits):
        if f.name in ("arch", "major", "minor", "sources"):
            continue
        assert lim.source(f.name), f"{arch}.{f.name} has no source"


@pytest.mark.parametrize("name", list(GPUS))
def test_every_preset_figure_has_a_source(name):
    g = GPUS[name]
    for f in fields(GpuSpec):
        if f.name in ("name", "arch", "display_name", "sources", "notes"):
            continue
        assert g.source(f.name), f"{name}.{f.name} has no source"
    assert g.to_json()["sources"]["pcie_bandwidth"]


# MEASURING.md's table, checked against the Programming Guide and cuda_occupancy.h.
@pytest.mark.parametrize("arch,warps,blocks,smem_sm,smem_block", [
    ("sm_80", 64, 32, 164 * KB, 163 * KB),
    ("sm_86", 48, 16, 100 * KB, 99 * KB),
    ("sm_89", 48, 24, 100 * KB, 99 * KB),
    ("sm_90", 64, 32, 228 * KB, 227 * KB),
])
def test_limits_match_the_measuring_table(arch, warps, blocks, smem_sm, smem_block):
    lim = arch_limits(arch)
    assert (lim.max_warps_per_sm, lim.max_blocks_per_sm, lim.shared_per_sm,
            lim.shared_per_block_optin) == (warps, blocks, smem_sm, smem_block)
    assert lim.registers_per_sm == 65536 and lim.max_registers_per_thread == 255
    assert lim.reserved_shared_per_block == 1024 and lim.register_alloc_unit == 256


# (arch, warps, blocks, shared per SM, opt-in per block, barrier factor): sm_88 and sm_107
# from cuda_occupancy.h and CCCL's arch_traits.h (the guide has no 8.8 or 10.7 column), sm_110
# from the guide's 11.0 column, which both headers agree with.
@pytest.mark.parametrize("arch,warps,blocks,smem_sm,smem_block,barrier_factor", [
    ("sm_88", 48, 16, 100 * KB, 99 * KB, None),
    ("sm_107", 32, 16, 328 * KB, 227 * KB, 1),
    ("sm_110", 48, 24, 228 * KB, 227 * KB, 1),
])
def test_limits_of_the_archs_cuda_13_added(arch, warps, blocks, smem_sm, smem_block,
                                           barrier_factor):
    lim = arch_limits(arch)
    assert (lim.max_warps_per_sm, lim.max_blocks_per_sm, lim.shared_per_sm,
            lim.shared_per_block_optin, lim.barrier_factor) == (
        warps, blocks, smem_sm, smem_block, barrier_factor)
    assert lim.reserved_shared_per_block == 1024 and lim.shared_alloc_unit == 128
    assert lim.registers_per_sm == 65536 and lim.max_registers_per_thread == 255


def test_new_archs_say_where_the_guide_is_silent_or_the_headers_disagree():
    src = arch_limits("sm_107").source("shared_per_sm")
    assert "cuda_occupancy.h" in src and "328 KB" in src and "228 KB" in src
    assert "Programming Guide" in arch_limits("sm_88").source("max_warps_per_sm")  # no column


def test_turing_has_no_reservation_and_coarser_shared_units():
    lim = arch_limits("sm_75")
    assert lim.reserved_shared_per_block == 0
    assert lim.shared_alloc_unit == 256
    assert lim.max_threads_per_sm == 1024
    assert arch_limits("sm_90").shared_alloc_unit == 128


@pytest.mark.parametrize("text,expected", [
    ("sm_90", (9, 0, "")), ("sm_90a", (9, 0, "a")), ("compute_100f", (10, 0, "f")),
    ("SM_120", (12, 0, "")), ("9.0", (9, 0, "")), ("86", (8, 6, "")), ("lto_90", (9, 0, "")),
])
def test_parse_arch(text, expected):
    assert parse_arch(text) == expected


def test_arch_variants_share_the_base_arch_limits():
    assert arch_limits("sm_90a") is ARCHS["sm_90"]
    assert arch_limits("compute_100f") is ARCHS["sm_100"]


@pytest.mark.parametrize("name,base", [
    ("sm_110a", "sm_110"), ("sm_110f", "sm_110"), ("compute_110f", "sm_110"),
    ("sm_107a", "sm_107"), ("sm_107f", "sm_107"), ("compute_88", "sm_88"), ("8.8", "sm_88"),
    ("sm_103f", "sm_103"), ("sm_121a", "sm_121"),
])
def test_cuda_13_variants_share_their_base_arch(name, base):
    assert arch_limits(name) is ARCHS[base]
    assert lookup_gpu(name).limits is ARCHS[base]


def test_unknown_arch_lists_known_ones():
    with pytest.raises(UnknownArch) as e:
        arch_limits("sm_50")
    assert "sm_90" in e.value.hint
    assert "sm_50" in e.value.message and "arch table" in e.value.hint


def test_a_variant_of_an_unknown_arch_names_the_base_the_table_lacks():
    with pytest.raises(UnknownArch) as e:
        lookup_gpu("sm_130f")
    assert "sm_130f (read as sm_130)" in e.value.message and "sm_110" in e.value.hint


@pytest.mark.parametrize("name", ["h200", "H200", " h200 ", "H200-SXM"])
def test_lookup_by_name_any_case(name):
    g = lookup_gpu(name)
    assert g.name == "h200" and g.arch == "sm_90" and g.sm_count == 132
    assert g.limits is ARCHS["sm_90"]


def test_lookup_an_arch_gives_limits_only():
    g = lookup_gpu("sm_90")
    assert g.arch == "sm_90" and not g.is_product
    assert g.sm_count is None and g.memory_bandwidth is None
    assert g.limits.max_warps_per_sm == 64
    assert lookup_gpu("sm_90a").name == "sm_90a"


def test_unknown_gpu_is_a_usage_error_listing_the_presets():
    with pytest.raises(UsageError) as e:
        lookup_gpu("h300")
    assert e.value.exit_code == 2
    for name in ("h200", "h100", "a100", "l4", "l40s", "rtx4090", "b200"):
        assert name in e.value.hint


def test_presets_have_the_issue_5_figures():
    for g in GPUS.values():
        assert g.sm_count and g.memory_bytes and g.memory_bandwidth
        assert g.fp32_flops and g.bf16_flops and g.pcie_gen and g.pcie_width
        assert g.bf16_flops > g.fp32_flops  # tensor cores, dense
        json.dumps(g.to_json())  # serialisable as is


def test_h200_matches_measuring_md():
    g = lookup_gpu("h200")
    assert g.memory_bandwidth == 4.8e12 and g.memory_bytes == 141 * 1024**3


def test_pcie_per_direction_matches_the_known_figures():
    # MEASURING.md: Gen4 x16 31.5 GB/s, Gen5 x16 63 GB/s per direction, theoretical.
    assert pcie_bytes_per_s(4, 16) / 1e9 == pytest.approx(31.5, abs=0.05)
    assert pcie_bytes_per_s(5, 16) / 1e9 == pytest.approx(63.0, abs=0.05)
    assert lookup_gpu("a100").pcie_bandwidth == pcie_bytes_per_s(4, 16)


def test_gpuspec_is_frozen():
    with pytest.raises(AttributeError):
        GPUS["h100"].sm_count = 1  # type: ignore[misc]


# --- custom specs --------------------------------------------------------------------------

def test_load_toml_spec():
    g = load_gpu_spec(SPECS / "custom.toml")
    assert g.name == "lab-card" and g.arch == "sm_89" and g.sm_count == 46
    assert g.memory_bytes == 12_000_000_000 and g.fp32_flops == 29.1e12
    assert g.pcie_bandwidth == pcie_bytes_per_s(4, 8)
    assert g.source("sm_count") == "vendor sheet (fixture)"
    assert g.source("fp32_flops").endswith("custom.toml")  # credited to the file


def test_load_json_spec_based_on_a_preset():
    g = load_gpu_spec(SPECS / "based_on_h100.json")
    assert g.name == "h100-pcie-gen4" and g.pcie_gen == 4
    assert g.memory_bandwidth == GPUS["h100"].memory_bandwidth
    assert g.source("memory_bandwidth") == GPUS["h100"].source("memory_bandwidth")


def test_resolve_gpu_takes_files_names_and_archs():
    assert resolve_gpu(str(SPECS / "custom.toml")).name == "lab-card"
    assert resolve_gpu("l4").name == "l4"
    assert resolve_gpu("sm_86").arch == "sm_86"


@pytest.mark.parametrize("fname,words", [
    ("missing_field.toml", ["missing", "memory_bandwidth", "fp32_flops"]),
    ("wrong_type.toml", ["sm_count", "integer"]),
    ("negative.json", ["memory_bandwidth", "positive"]),
    ("bad_arch.toml", ["arch", "sm_50"]),
    ("not_toml.toml", ["not valid TOML"]),
])
def test_malformed_specs_say_what_is_wrong(fname, words):
    with pytest.raises(GpuSpecError) as e:
        load_gpu_spec(SPECS / fname)
    msg = e.value.message
    assert fname in msg
    for w in words:
        assert w in msg


@pytest.mark.parametrize("data,words", [
    ({"name": "x", "arch": "sm_90", "sm_count": True, "memory_bandwidth": 1e12,
      "fp32_flops": 1e12}, ["sm_count", "integer"]),
    ({"name": "x", "arch": "sm_90", "sm_count": 1, "memory_bandwidth": 1e12,
      "fp32_flops": 1e12, "sm_cuont": 3}, ["unknown field", "sm_cuont"]),
    ({"base": "h900"}, ["base", "h900"]),
    ({"base": "h100", "pcie_gen": 7}, ["pcie_gen"]),
    ({"base": "h100", "fp32_flops": float("inf")}, ["fp32_flops", "positive"]),
    ([1, 2], ["table"]),
])
def test_spec_dict_validation(data, words):
    with pytest.raises(GpuSpecError) as e:
        gpu_spec_from_dict(data, origin="t")
    for w in words:
        assert w in e.value.message


def test_missing_spec_file():
    with pytest.raises(InputNotFound):
        load_gpu_spec(SPECS / "nope.toml")
