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


# --- hunt finding 11: compressed images cost one tool run, not one each -----------------

@pytest.fixture(scope="module")
def compressed_copies(toolkit, kernels, tmp_path_factory):
    """(fatbin of 400 copies of one compressed sm_90 cubin, each header varied in an unused
    field, as the finding made it; a fatbin of two compressed arches with their PTX)."""
    import shutil
    import subprocess

    from nvstage.inspect.fatbin import _HEADER

    root = tmp_path_factory.mktemp("compressed")
    shutil.copy(kernels / "multi.cu", root)
    subprocess.run([toolkit.nvcc, "--fatbin", "-gencode", "arch=compute_80,code=[sm_80,"
                    "compute_80]", "-gencode", "arch=compute_90,code=[sm_90,compute_90]",
                    "--compress-mode=size", "multi.cu", "-o", "m.fatbin"], cwd=root,
                   check=True, capture_output=True)
    images = parse_fatbin((root / "m.fatbin").read_bytes())
    assert all(im.compressed for im in images)
    cub = next(im for im in images if im.kind == "cubin")
    body = b""
    for i in range(400):
        h = bytearray(cub.header)
        struct.pack_into("<Q", h, 48, struct.unpack_from("<Q", h, 48)[0] + i)
        body += bytes(h) + cub.payload
    (root / "cub400.fatbin").write_bytes(_HEADER.pack(MAGIC, 1, _HEADER.size, len(body)) + body)
    return root / "cub400.fatbin", root / "m.fatbin"


def _count_tool_runs(monkeypatch) -> list:
    """A record of every tool nvstage starts (the real tools still run)."""
    from nvstage import proc

    runs, real = [], proc.run

    def counting(argv, **kw):
        runs.append(argv)
        return real(argv, **kw)

    monkeypatch.setattr(proc, "run", counting)
    return runs


def test_copies_of_a_compressed_image_cost_one_tool_run_each_kind(cli, compressed_copies,
                                                                   monkeypatch):
    import time

    from nvstage.inspect import fatbin

    copies, _ = compressed_copies
    monkeypatch.setattr(fatbin, "_UNPACKED", {})
    runs = _count_tool_runs(monkeypatch)
    t0 = time.monotonic()
    r = cli("show", copies, "--json")
    assert r.exit_code == 0, r.output
    assert time.monotonic() - t0 < 60  # 146 s before
    doc = __import__("json").loads(r.stdout)
    assert len(doc["fatbin"]) == 400 and len(doc["sass"]) == 400 * 5
    tools = [a[0].rsplit("/", 1)[-1] for a in runs]
    assert tools.count("cuobjdump") <= 3 and tools.count("nvdisasm") <= 1, tools


def test_every_compressed_image_of_a_real_fatbin_unpacks_in_one_run(compressed_copies, toolkit,
                                                                     reference, tmp_path,
                                                                     monkeypatch):
    from nvstage.inspect import fatbin

    _, mixed = compressed_copies
    monkeypatch.setattr(fatbin, "_UNPACKED", {})
    runs = _count_tool_runs(monkeypatch)
    got = fatbin.image_bytes(mixed, toolkit, "cubin") + fatbin.image_bytes(mixed, toolkit, "ptx")
    assert len(runs) == 2  # one per kind
    reference("cuobjdump", "-xelf", "all", mixed, cwd=tmp_path)
    reference("cuobjdump", "-xptx", "all", mixed, cwd=tmp_path)
    want = sorted(p.read_bytes() for p in tmp_path.iterdir())
    assert sorted(data for _, data in got) == want


def test_too_many_compressed_images_are_refused_with_the_limit(compressed_copies, toolkit,
                                                                tmp_path, monkeypatch):
    from nvstage.errors import InputTooLarge
    from nvstage.inspect import fatbin

    _, mixed = compressed_copies
    # Four distinct payloads: over a limit of three.
    monkeypatch.setattr(fatbin, "_UNPACKED", {})
    monkeypatch.setattr(fatbin, "MAX_UNPACKED", 3)
    with pytest.raises(InputTooLarge, match="MAX_UNPACKED"):
        inventory(mixed, toolkit)


def test_a_damaged_image_among_several_is_named(compressed_copies, toolkit, tmp_path,
                                                monkeypatch):
    from nvstage.inspect import fatbin

    _, mixed = compressed_copies
    data = bytearray(mixed.read_bytes())
    images = parse_fatbin(bytes(data))
    bad = images[2]  # the sm_90 cubin: its compressed payload's middle, zeroed
    at = bytes(data).index(bad.header + bad.payload) + len(bad.header)
    data[at + 16:at + len(bad.payload) - 16] = bytes(len(bad.payload) - 32)
    (tmp_path / "bad.fatbin").write_bytes(bytes(data))
    monkeypatch.setattr(fatbin, "_UNPACKED", {})
    with pytest.raises(ArtifactError, match=r"image 2 \(cubin sm_90\) is damaged"):
        inventory(tmp_path / "bad.fatbin", toolkit)
