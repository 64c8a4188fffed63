"""Arch-specific and family-specific targets keep their suffix: sm_90a is shown as sm_90a in
the resources, the SASS and the will-it-run verdict, not as sm_90 (the ELF's e_flags do not
say it in CUDA 13; its .nv.compat section does, and a fatbin's image header says a and f)."""

from __future__ import annotations

import json
import struct

import pytest

from nvstage.inspect.elf import read_cubin, refine_arch


def test_sm_90a_cubin_through_the_cli(cli, workdir, kernels):
    r = cli("compile", kernels / "saxpy.cu", "-arch=sm_90a", "--cubin", "-o", "x.cubin")
    assert r.exit_code == 0, r.output
    assert read_cubin((workdir / "x.cubin").read_bytes()).arch == "sm_90a"
    r = cli("show", "x.cubin")
    assert r.exit_code == 0, r.output
    rows = [line.split() for line in r.stdout.splitlines() if line.strip().startswith("saxpy")]
    assert len(rows) == 2 and all(row[1] == "sm_90a" for row in rows), r.stdout  # both tables
    r = cli("show", "x.cubin", "--gpu", "h200", "--json")
    doc = json.loads(r.stdout)
    assert {k["arch"] for k in doc["resources"] + doc["sass"]} == {"sm_90a"}
    assert doc["will_it_run"]["runs"] is True
    assert "the sm_90a cubin x.cubin matches exactly" in doc["will_it_run"]["explain"]
    r = cli("show", "x.cubin", "--gpu", "b200")
    assert "Will not run on b200" in r.stdout and "sm_90a is arch-specific" in r.stdout


def test_kept_builds_show_one_row_with_their_suffix(cli, workdir, kernels):
    # the build record names the arch as asked; the cubin's figures take its name (one row)
    for arch in ("sm_90a", "sm_100f"):
        r = cli("compile", kernels / "saxpy.cu", f"-arch={arch}", "--cubin", "-o",
                f"{arch}.cubin", "--keep-dir", f"{arch}.keep")
        assert r.exit_code == 0, r.output
        doc = json.loads(cli("show", f"{arch}.keep", "--json").stdout)
        assert [(k["arch"], k["spill_stores"]) for k in doc["resources"]] == [(arch, 0)]
        assert doc["resources"][0]["source"] == "cubin (.nv.info, SASS)"
        assert [k["arch"] for k in doc["sass"]] == [arch]
    # a build that stopped at its cubin: the cubin is what would load
    r = cli("show", "sm_100f.keep", "--gpu", "b200")
    assert "Runs on b200 (sm_100): the sm_100f cubin sm_100f.cubin matches exactly" in r.stdout
    r = cli("show", "sm_90a.keep", "--gpu", "h100")
    assert "the sm_90a cubin sm_90a.cubin matches exactly" in r.stdout


def test_fatbin_images_carry_a_and_f(cli, workdir, kernels, toolkit):
    import subprocess

    subprocess.run([toolkit.nvcc, "--fatbin", "-gencode", "arch=compute_90a,code=[sm_90a,"
                    "compute_90a]", "-gencode", "arch=compute_100f,code=[sm_100f,compute_100f]",
                    str(kernels / "saxpy.cu"), "-o", "s.fatbin"], check=True, cwd=workdir)
    doc = json.loads(cli("show", "s.fatbin", "--sections", "all", "--json").stdout)
    assert [i["arch"] for i in doc["fatbin"]] == ["sm_90a", "compute_90a", "sm_100f",
                                                  "compute_100f"]
    assert sorted(k["arch"] for k in doc["resources"]) == ["sm_100f", "sm_90a"]
    assert sorted(k["arch"] for k in doc["sass"]) == ["sm_100f", "sm_90a"]
    assert all(i["name"].split(".")[2] == i["arch"] for i in doc["fatbin"])


def test_refine_arch():
    assert refine_arch("sm_100", "sm_100f") == "sm_100f"
    assert refine_arch("sm_100", "compute_100f") == "sm_100f"
    assert refine_arch("sm_90a", "sm_90") == "sm_90a"  # the ELF's own word stands
    assert refine_arch("sm_90", "sm_80") == "sm_90"  # another SM: no change
    assert refine_arch("sm_90", None) == "sm_90"


@pytest.mark.parametrize("flags, arch", [(0x5A055A, "sm_90"), (0x5A055A | 0x800, "sm_90a"),
                                         (0x500550, "sm_80")])
def test_cuda_12_cubin_header_layout(built, flags, arch):
    """CUDA 12's ELF ABI (version 7): the SM in the low byte, 'a' in bit 11."""
    root, _ = built
    data = bytearray((root / "saxpy.sm_90.cubin").read_bytes())
    data[8] = 7  # EI_ABIVERSION
    struct.pack_into("<I", data, 48, flags)  # e_flags of an ELF64 header
    assert read_cubin(bytes(data)).arch == arch
