"""Will it run: the driver's choice among fatbin images, from constructed inventories."""

from __future__ import annotations

import json

import pytest

from nvstage.errors import UsageError
from nvstage.inspect.compat import (
    NONE,
    PTX_JIT,
    SASS_COMPATIBLE,
    SASS_EXACT,
    driver_needed_for_ptx,
    max_ptx_for_driver,
    parse_driver,
    will_it_run,
)
from nvstage.inspect.records import FatbinImage


def cubin(arch: str, role: str = "kernel") -> FatbinImage:
    return FatbinImage(kind="cubin", arch=arch, size=4096, name=f"k.{arch}.cubin", role=role)


def ptx(arch: str, version: str = "9.0") -> FatbinImage:
    return FatbinImage(kind="ptx", arch=arch, size=2048, name=f"k.{arch}.ptx",
                       ptx_version=version)


def ltoir(arch: str) -> FatbinImage:
    return FatbinImage(kind="ltoir", arch=arch, size=1024, name=f"k.{arch}.ltoir")


# The default `nvcc -arch=sm_90` build: SASS and PTX for 9.0, and a device-link cubin.
DEFAULT_SM90 = [cubin("sm_90"), ptx("compute_90", "9.5"), cubin("sm_90", role="device-link")]


def test_exact_sass():
    v = will_it_run(DEFAULT_SM90, "h200")
    assert v.runs and v.how == SASS_EXACT and v.image.arch == "sm_90"
    assert v.image.role == "kernel"
    assert "h200 (sm_90)" in v.explain() and "exactly" in v.explain()


def test_exact_wins_over_compatible_and_ptx():
    v = will_it_run([cubin("sm_80"), cubin("sm_86"), ptx("compute_80")], "sm_86")
    assert v.how == SASS_EXACT and v.image.arch == "sm_86"


def test_compatible_sass_same_major_newer_minor():
    # An sm_80 cubin runs on an sm_86 / sm_89 GPU (L4 is sm_89).
    v = will_it_run([cubin("sm_80")], "l4")
    assert v.runs and v.how == SASS_COMPATIBLE and v.image.arch == "sm_80"


def test_compatible_picks_the_newest_fitting_minor():
    v = will_it_run([cubin("sm_80"), cubin("sm_86"), cubin("sm_90")], "sm_89")
    assert v.how == SASS_COMPATIBLE and v.image.arch == "sm_86"


def test_compatible_sass_is_preferred_over_ptx_jit():
    v = will_it_run([cubin("sm_80"), ptx("compute_86")], "sm_89")
    assert v.how == SASS_COMPATIBLE


def test_sass_does_not_cross_majors():
    # sm_90 SASS does not run on Blackwell; with no PTX there is no kernel image.
    v = will_it_run([cubin("sm_90")], "b200")
    assert not v.runs and v.how == NONE and v.image is None
    assert "no kernel image for sm_100" in v.explain()
    assert "major" in v.explain()


def test_sass_never_runs_on_an_older_gpu():
    v = will_it_run([cubin("sm_90")], "a100")
    assert not v.runs


def test_arch_specific_sass_does_not_carry_forward():
    # sm_90a runs only on 9.0; on sm_100 it is not even "compatible".
    assert will_it_run([cubin("sm_90a")], "h100").how == SASS_EXACT
    v = will_it_run([cubin("sm_100a")], "sm_103")
    assert not v.runs and "arch-specific" in v.explain()


def test_family_sass_runs_within_its_family_only():
    # sm_100f: 10.0 and 10.3, not 12.0.
    assert will_it_run([cubin("sm_100f")], "sm_103").how == SASS_COMPATIBLE
    assert will_it_run([cubin("sm_100f")], "b200").how == SASS_EXACT
    assert not will_it_run([cubin("sm_100f")], "sm_120").runs


def test_ptx_jit_for_a_newer_gpu():
    # The default sm_90 build on a B200: PTX 9.5 JITs with a 13.5 driver.
    v = will_it_run(DEFAULT_SM90, "b200", driver="13.5")
    assert v.runs and v.how == PTX_JIT and v.image.kind == "ptx"
    assert "JIT" in v.explain() and "13.5" in v.explain()


def test_ptx_too_new_for_the_driver():
    # TOOLCHAIN_FACTS: PTX from a 13.5 compiler is .version 9.5 and needs a 13.5 driver.
    v = will_it_run(DEFAULT_SM90, "b200", driver="13.0")
    assert not v.runs and v.how == NONE
    text = v.explain()
    assert "9.5" in text and "13.5" in text and "up to PTX 9.0" in text


def test_without_a_driver_version_ptx_is_assumed_loadable():
    assert will_it_run(DEFAULT_SM90, "b200").how == PTX_JIT


def test_the_cubin_does_not_care_about_the_ptx_version():
    v = will_it_run(DEFAULT_SM90, "h200", driver="13.0")
    assert v.how == SASS_EXACT


def test_ptx_for_a_newer_arch_cannot_jit_down():
    v = will_it_run([ptx("compute_90")], "a100")
    assert not v.runs and "newer" in v.explain()


def test_ptx_newest_fitting_arch_is_chosen():
    v = will_it_run([ptx("compute_75"), ptx("compute_80"), ptx("compute_100")], "sm_90")
    assert v.how == PTX_JIT and v.image.arch == "compute_80"


def test_arch_specific_and_family_ptx():
    assert not will_it_run([ptx("compute_90a")], "b200").runs
    assert will_it_run([ptx("compute_100f")], "sm_103").how == PTX_JIT
    assert not will_it_run([ptx("compute_100f")], "sm_120").runs
    assert will_it_run([ptx("compute_75")], "sm_120").how == PTX_JIT


def test_ltoir_only_is_no_kernel_image():
    v = will_it_run([ltoir("compute_90")], "h200")
    assert not v.runs and "nvJitLink" in v.explain()


def test_empty_inventory():
    v = will_it_run([], "h200")
    assert not v.runs and "no images" in v.explain()


def test_device_link_images_are_ignored_when_kernel_images_exist():
    # Non-rdc executable built for sm_80 with PTX: the dlink cubin has no kernels.
    images = [cubin("sm_80"), ptx("compute_80", "9.0"), cubin("sm_80", role="device-link")]
    v = will_it_run(images, "sm_90", driver="13.0")
    assert v.how == PTX_JIT and v.image.role == "kernel"


def test_device_link_images_are_used_when_alone():
    v = will_it_run([cubin("sm_90", role="device-link")], "h100")
    assert v.how == SASS_EXACT


def test_gpu_by_arch_and_unknown_gpu():
    assert will_it_run([cubin("sm_90")], "sm_90").gpu == "sm_90"
    with pytest.raises(UsageError):
        will_it_run([cubin("sm_90")], "h300")


def test_json():
    d = json.loads(json.dumps(will_it_run(DEFAULT_SM90, "b200", driver="13.0").to_json()))
    assert d["runs"] is False and d["how"] == "none" and d["image"] is None
    assert d["gpu_arch"] == "sm_100" and d["driver"] == "13.0" and d["explain"]


# --- driver and PTX versions (cuda.bindings.utils' table, from the PTX ISA release notes) --

@pytest.mark.parametrize("text,expected", [
    ("13.0", (13, 0)), ("13", (13, 0)), ("12.8", (12, 8)), (13050, (13, 5)), ("13000", (13, 0)),
])
def test_parse_driver(text, expected):
    assert parse_driver(text) == expected


@pytest.mark.parametrize("bad", ["580.65.06", "thirteen", ""])
def test_bad_driver_version(bad):
    with pytest.raises(UsageError):
        parse_driver(bad)


@pytest.mark.parametrize("driver,ptx_max", [
    ("12.0", "8.0"), ("12.4", "8.4"), ("12.6", "8.5"), ("12.8", "8.7"), ("13.0", "9.0"),
    ("13.5", "9.5"), ("11.0", "7.0"),
])
def test_max_ptx_for_driver(driver, ptx_max):
    assert max_ptx_for_driver(driver) == ptx_max


def test_ptx_version_needs():
    assert driver_needed_for_ptx("9.5") == (13, 5)
    assert driver_needed_for_ptx("8.8") == (12, 9)
    # Newer than the table: PTX 9.N has shipped with CUDA 13.N.
    assert driver_needed_for_ptx("9.9") == (13, 9)
    with pytest.raises(UsageError):
        driver_needed_for_ptx("10.7")
