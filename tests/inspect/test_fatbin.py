"""The fatbin inventory against cuobjdump's listing and extraction; file sniffing; fuzzed."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvstage.errors import ArtifactError, NvstageError
from nvstage.inspect.fatbin import MAGIC, inventory, kind_of_file, parse_fatbin, raw_images


def test_object_inventory_matches_cuobjdump(built, toolkit, reference, tmp_path):
    root, _ = built
    images = inventory(root / "multi.o", toolkit)
    assert [(i.kind, i.arch, i.role) for i in images] == [
        ("cubin", "sm_80", "kernel"), ("cubin", "sm_90", "kernel"), ("ptx", "compute_90",
                                                                     "kernel")]
    assert len({i.name for i in images}) == len(images)
    listing = reference("cuobjdump", "-lelf", "-lptx", root / "multi.o")
    assert re.findall(r"ELF file\s+\d+: \S+\.(sm_\d+)\.cubin", listing) == ["sm_80", "sm_90"]
    assert images[2].ptx_version == "9.5"
    assert "code version = [9,5]" in reference("cuobjdump", "-res-usage", root / "multi.o")
    # Sizes: what cuobjdump extracts, image by image.
    reference("cuobjdump", "-xelf", "all", root / "multi.o", cwd=tmp_path)
    reference("cuobjdump", "-xptx", "all", root / "multi.o", cwd=tmp_path)
    sizes = sorted(p.stat().st_size for p in tmp_path.iterdir() if p.suffix == ".cubin")
    assert sorted(i.size for i in images if i.kind == "cubin") == sizes
    ptx = next(p for p in tmp_path.iterdir() if p.suffix == ".ptx")
    assert abs(images[2].size - ptx.stat().st_size) <= 1  # the stored PTX keeps its NUL
    kernels = {"histogram", "_Z9block_sumPKfPfi", "_Z5scaleIdEvPT_S0_i",
               "_Z5scaleIfEvPT_S0_i", "_Z10apply_polyPKfPfi"}
    assert all(set(i.kernels) == kernels for i in images)


def test_executable_has_kernel_and_device_link_images(built, toolkit):
    _, builds = built
    images = inventory(builds["vadd"].output, toolkit)
    roles = sorted((i.kind, i.role, i.kernels) for i in images)
    assert roles == [("cubin", "device-link", ()), ("cubin", "kernel", ("_Z4vaddPKfS0_Pfi",)),
                     ("ptx", "kernel", ("_Z4vaddPKfS0_Pfi",))]
    # The kept cubins are the same bytes as the images.
    kept = {a.name: a.size for a in builds["vadd"].artifacts if a.kind == "cubin"}
    assert sorted(kept.values()) == sorted(i.size for i in images if i.kind == "cubin")


def test_kinds(built, captured, tmp_path):
    root, builds = built
    assert kind_of_file(captured / "params.sm_90.ptx") == "ptx"
    assert kind_of_file(root / "saxpy.sm_90.cubin") == "cubin"
    assert kind_of_file(root / "multi.o") == "object"
    assert kind_of_file(builds["vadd"].output) == "executable"
    assert kind_of_file(builds["vadd"].keep_dir) == "build"


@pytest.mark.parametrize("make, message", [
    (lambda p, src: p.write_text("hello\n"), "not a CUDA artifact"),
    (lambda p, src: p.write_bytes(src.read_bytes()[:600]), "truncated"),
    (lambda p, src: p.write_bytes(b""), "empty"),
    (lambda p, src: p.write_bytes(struct.pack("<IHHQ", MAGIC, 1, 16, 0)), "empty"),
    (lambda p, src: p.write_bytes(struct.pack("<IHHQ", MAGIC, 1, 16, 4096)), "truncated"),
])
def test_bad_files_are_one_clear_error(built, tmp_path, make, message):
    root, _ = built
    bad = tmp_path / "bad.bin"
    make(bad, root / "saxpy.sm_90.cubin")
    with pytest.raises(ArtifactError, match=message):
        kind_of_file(bad)


def test_host_elf_without_device_code(tmp_path):
    with pytest.raises(ArtifactError, match="no CUDA device code"):
        kind_of_file("/bin/true")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.builds(
    lambda body: struct.pack("<IHHQ", MAGIC, 1, 16, len(body)) + body, st.binary(max_size=200)))
def test_fuzz_fatbin_container(data):
    try:
        images = parse_fatbin(data)
    except NvstageError as e:
        assert str(e)
    else:
        assert images


def test_fuzz_truncations_of_a_real_object(built, tmp_path):
    root, _ = built
    data = (root / "multi.o").read_bytes()
    for cut in (0, 3, 64, 1000, len(data) // 2, len(data) - 1):
        p = tmp_path / f"cut{cut}.o"
        p.write_bytes(data[:cut])
        try:
            raw_images(p)
        except NvstageError as e:
            assert str(e)


@settings(max_examples=200, deadline=None)
@given(cut=st.integers(0, 4096), flips=st.lists(st.tuples(st.integers(0, 4095),
                                                          st.integers(1, 255)), max_size=8))
def test_fuzz_damaged_cubins(built, cut, flips):
    # A real cubin cut short and with bytes flipped: read_cubin (sections, kernels, the
    # .nv.info barrier counts) gives a Cubin or one ArtifactError, never another exception.
    from nvstage.inspect.elf import read_cubin

    root, _ = built
    data = bytearray((root / "saxpy.sm_90.cubin").read_bytes())
    for at, x in flips:
        if at < len(data):
            data[at] ^= x
    try:
        cubin = read_cubin(bytes(data[:cut] if cut < len(data) else data))
    except ArtifactError as e:
        assert str(e)
    else:
        assert all(0 <= n <= 255 for n in cubin.barriers.values())
