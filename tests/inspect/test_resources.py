"""Resource readers against ptxas -v and cuobjdump -res-usage; spills flagged; fuzzed."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nvstage.errors import NvstageError
from nvstage.inspect.gather import resources_of
from nvstage.inspect.resources import (build_resources, parse_ptxas_verbose, parse_res_usage,
                                       stage_resources)


def test_ptxas_verbose_captured(captured):
    rows = parse_ptxas_verbose((captured / "cuda13.5-multi-ptxas-v.txt").read_text())
    assert len(rows) == 10 and {r.arch for r in rows} == {"sm_80", "sm_90"}
    hist80 = next(r for r in rows if r.kernel == "histogram" and r.arch == "sm_80")
    assert (hist80.registers, hist80.barriers, hist80.shared_bytes, hist80.constant_bytes,
            hist80.compile_ms) == (8, 1, 1024, 372, 6.526)
    hist90 = next(r for r in rows if r.kernel == "histogram" and r.arch == "sm_90")
    assert hist90.registers == 12 and hist90.constant_bytes is None  # sm_90+ omits cmem[0]
    assert not any(r.spills for r in rows)
    assert next(r for r in rows if r.kernel == "_Z5scaleIfEvPT_S0_i").demangled == \
        "void scale<float>(float*, float, int)"


def test_spill_report_captured(captured):
    (r,) = parse_ptxas_verbose((captured / "cuda13.5-spill-sm80-ptxas-v.txt").read_text())
    assert (r.kernel, r.arch, r.registers) == ("spill", "sm_80", 24)
    assert r.spills and r.spill_stores > 0 and r.spill_loads > 0 and r.stack_frame > 0


def test_nvlink_verbose_captured(captured):
    text = (captured / "cuda13.5-rdc-ptxas-nvlink-v.txt").read_text()
    linked = [r for r in parse_ptxas_verbose(text, arch="sm_80") if r.compile_ms is None]
    assert [(r.kernel, r.registers, r.local_bytes) for r in linked] == \
        [("_Z4vaddPKfS0_Pfi", 12, 0)]


def test_res_usage_captured(captured):
    rows = parse_res_usage((captured / "cuda13.5-multi-res-usage.txt").read_text())
    assert len(rows) == 10
    h = next(r for r in rows if r.kernel == "histogram" and r.arch == "sm_90")
    assert (h.registers, h.shared_section_bytes, h.constant_bytes) == (12, 2048, 548)
    assert h.spill_stores is None  # cuobjdump does not report spills


def test_ptxas_and_cuobjdump_agree_on_the_same_object(built, reference):
    root, _ = built
    ptxas = {(r.kernel, r.arch): r for r in
             parse_ptxas_verbose((root / "multi_ptxas.txt").read_text())}
    dumped = {(r.kernel, r.arch): r for r in
              parse_res_usage(reference("cuobjdump", "-res-usage", root / "multi.o"))}
    assert set(ptxas) == set(dumped) and len(ptxas) == 10
    for key, p in ptxas.items():
        d = dumped[key]
        assert p.registers == d.registers and p.stack_frame == d.stack_frame
        if p.constant_bytes is not None:
            assert p.constant_bytes == d.constant_bytes
    # resources_of reads the same figures from the object itself.
    mine = {(r.kernel, r.arch): r for r in resources_of(root / "multi.o", None or _tk(built))}
    assert {k: (v.registers, v.constant_bytes, v.shared_section_bytes)
            for k, v in mine.items()} == \
        {k: (v.registers, v.constant_bytes, v.shared_section_bytes) for k, v in dumped.items()}


def _tk(built):
    return built[1]["vadd"].toolkit


def test_spilling_kernel_is_flagged(built, reference):
    _, builds = built
    rows = build_resources(builds["spill16"])
    (r,) = rows
    assert r.spills and r.final and r.registers <= 24
    # Read from the cubin; the user's own -v (resource_usage) gives the compile time.
    assert r.source == "cubin (.nv.info, SASS) + ptxas -v" and r.spill_kind == "spill"
    # The figures are ptxas' own, and cuobjdump agrees on registers and stack.
    ptxas_stage = next(run for run in builds["spill16"].runs if run.stage.tool == "ptxas")
    assert f"{r.spill_stores} bytes spill stores" in ptxas_stage.stderr
    cubin = next(a.path for a in builds["spill16"].artifacts if a.kind == "cubin")
    out = reference("cuobjdump", "-res-usage", cubin)
    assert f"REG:{r.registers} STACK:{r.stack_frame} " in out
    (plain,) = build_resources(builds["spill"])
    assert not plain.spills and plain.registers > r.registers


def test_build_without_resource_usage_has_ptxas_figures(built, monkeypatch):
    """ptxas ran as nvcc runs it (no -v), and the build kept the figures it wrote into the
    cubin: spills are known, and nothing is run again to learn them."""
    from nvstage import proc

    _, builds = built
    (ptxas,) = [r for r in builds["vadd"].runs if r.stage.tool == "ptxas"]
    assert ptxas.resources == "" and "Used " not in ptxas.stderr and ptxas.figures
    monkeypatch.setattr(proc, "run", lambda *a, **k: pytest.fail(f"ran {a[0]}"))
    rows = stage_resources(ptxas, None)  # no toolkit: nothing could run
    assert [(r.kernel, r.arch, r.spill_stores, r.spill_kind) for r in rows] == \
        [("_Z4vaddPKfS0_Pfi", "sm_90", 0, "spill")]
    assert rows[0].constant_bytes is not None  # the parameter bank: ptxas omits it on sm_90
    monkeypatch.undo()
    assert [r.kernel for r in build_resources(builds["vadd"])] == ["_Z4vaddPKfS0_Pfi"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([
    "ptxas info    : Compiling entry function 'k' for 'sm_90'",
    "ptxas info    : Function properties for k",
    "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads",
    "ptxas info    : Used 32 registers, used 1 barriers, 12 bytes smem",
    "ptxas info    : Compile time = 1.5 ms", "nvlink info    : Function properties for 'k':",
    "nvlink info    : used 3 registers, 0 stack", "junk", ""]), max_size=30).map("\n".join)
    | st.text(max_size=300))
def test_fuzz_ptxas_verbose(text):
    try:
        rows = parse_ptxas_verbose(text, arch="sm_90")
    except NvstageError as e:
        assert str(e)
    else:
        assert all(r.registers >= 0 for r in rows)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([
    "Fatbin elf code:", "Fatbin ptx code:", "arch = sm_90", " Function k:",
    "  REG:8 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:372", "Resource usage:", "REG:x", ""]),
    max_size=30).map("\n".join) | st.text(max_size=300))
def test_fuzz_res_usage(text):
    try:
        parse_res_usage(text)
    except NvstageError as e:
        assert str(e)


# --- shared memory: one meaning everywhere (the kernel's own, as ptxas prints it) ---------

def test_cuobjdump_shared_leaves_out_the_sm90_reservation(captured):
    # cuobjdump says SHARED:2048 for histogram on sm_90 and 1024 on sm_80; ptxas says 1024 on
    # both: the sm_90 section also holds the 1 KiB the system reserves per block.
    rows = {(r.kernel, r.arch): r for r in
            parse_res_usage((captured / "cuda13.5-multi-res-usage.txt").read_text())}
    ptxas = {(r.kernel, r.arch): r for r in
             parse_ptxas_verbose((captured / "cuda13.5-multi-ptxas-v.txt").read_text())}
    assert (rows[("histogram", "sm_90")].shared_bytes,
            rows[("histogram", "sm_90")].shared_section_bytes) == (1024, 2048)
    assert (rows[("histogram", "sm_80")].shared_bytes,
            rows[("histogram", "sm_80")].shared_section_bytes) == (1024, 1024)
    assert {k: r.shared_bytes for k, r in rows.items()} == \
        {k: r.shared_bytes for k, r in ptxas.items()}


def test_relocatable_cubin_shared_is_not_reduced():
    # An -rdc -c cubin's section holds no reservation (ptxas 100, cuobjdump SHARED:100; after
    # the device link SHARED:1124 and nvlink "1124 bytes smem").
    listing = " Function k:\n  REG:12 STACK:0 SHARED:{} LOCAL:0 CONSTANT[0]:536\n"
    (rel,) = parse_res_usage(listing.format(100), arch="sm_90", final=False)
    assert (rel.shared_bytes, rel.shared_section_bytes) == (100, 100)
    (rel,) = parse_res_usage(listing.format(4096), arch="sm_90", final=False)
    assert rel.shared_bytes == 4096
    (linked,) = parse_res_usage(listing.format(1124), arch="sm_90")
    assert (linked.shared_bytes, linked.shared_section_bytes) == (100, 1124)
    (linked,) = parse_res_usage(listing.format(0), arch="sm_100")  # no shared, no section
    assert linked.shared_bytes == 0


def test_nvlink_smem_leaves_out_the_sm90_reservation():
    text = ("nvlink info    : Function properties for '_Z4tinyPf':\n"
            "nvlink info    : used 12 registers, used 1 barriers, 0 stack, 1124 bytes smem, "
            "536 bytes cmem[0], 0 bytes lmem\n")
    (r,) = parse_ptxas_verbose(text, arch="sm_90", source="nvlink -v")
    assert (r.shared_bytes, r.shared_section_bytes) == (100, 1124)
    (r,) = parse_ptxas_verbose(text.replace("1124", "100"), arch="sm_80", source="nvlink -v")
    assert r.shared_bytes == 100


def test_object_shared_and_barriers_match_ptxas(built, toolkit):
    # What resources_of reads from the object alone (cuobjdump and the cubin's .nv.info) is
    # what ptxas -v printed when it compiled it, on sm_80 and sm_90.
    root, _ = built
    ptxas = {(r.kernel, r.arch): (r.shared_bytes, r.barriers) for r in
             parse_ptxas_verbose((root / "multi_ptxas.txt").read_text())}
    mine = {(r.kernel, r.arch): (r.shared_bytes, r.barriers) for r in
            resources_of(root / "multi.o", toolkit)}
    assert mine == ptxas and ptxas[("histogram", "sm_90")] == (1024, 1)


def test_device_link_rows_take_barriers_from_the_cubin(toolkit, tmp_path):
    # nvlink -v prints "used 3 barriers" for a kernel that has none (CUDA 13.5); ptxas and
    # the linked cubin say 0. The kernel's shared memory is ptxas' figure, not nvlink's.
    import nvstage
    from nvstage.compiler.nvcc.options import CompileOptions

    (tmp_path / "k.cu").write_text(
        "__global__ void none(float* a) { a[threadIdx.x] = 1.f; }\n"
        "__global__ void tiny(float* a) { __shared__ float s[25];\n"
        "  s[threadIdx.x % 25] = a[threadIdx.x]; __syncthreads();\n"
        "  a[threadIdx.x] = s[(threadIdx.x + 1) % 25]; }\n"
        "int main() { return 0; }\n")
    build = nvstage.compile("k.cu", CompileOptions(archs=("sm_90",), rdc=True,
                                                   resource_usage=True, output="k"),
                            toolkit=toolkit, keep="k.keep", cwd=tmp_path)
    rows = build_resources(build)
    per_file = {r.demangled.split("(")[0]: r for r in rows if not r.final}
    linked = {r.demangled.split("(")[0]: r for r in rows if r.final}
    assert set(linked) == {"none", "tiny"}
    assert linked["none"].barriers == per_file["none"].barriers == 0
    assert linked["tiny"].barriers == per_file["tiny"].barriers == 1
    assert linked["tiny"].shared_bytes == per_file["tiny"].shared_bytes == 100
    assert linked["tiny"].shared_section_bytes == 1124


def test_short_names_of_a_kernel():
    # show --kernel and occupancy --kernel share one matcher; a namespace may be left out.
    from nvstage.inspect.kernels import short_names

    assert short_names("void ns::scale<float>(float*, float, int)") == (
        "void ns::scale<float>", "ns::scale<float>", "ns::scale", "scale<float>", "scale")
    assert short_names("histogram") == ("histogram",)


def test_short_names_keep_template_arguments_with_blanks():
    from nvstage.inspect.kernels import display_name, short_names

    dem = "void scale<unsigned int>(unsigned int*, unsigned int, int)"
    assert short_names(dem) == ("void scale<unsigned int>", "scale<unsigned int>", "scale")
    assert display_name(dem) == "scale<unsigned int>"
