"""The figures read from a cubin (compiler.cubin_figures) are ptxas -v's, on real ptxas runs.

A corpus of PTX (the bundled kernels, templates, a spilling kernel, local arrays with and
without spills, an -rdc device function) is compiled by ptxas -v for several arches; every
kernel's registers, stack frame, cumulative stack, spills, barriers, smem and cmem[0] (where
ptxas prints it) must be what the reader finds in the cubin ptxas wrote.
"""

from __future__ import annotations

import re
import shutil
import struct
from concurrent.futures import ThreadPoolExecutor

import pytest

from nvstage import proc
from nvstage.compiler.nvcc.cubin_figures import SPILL, SPILL_OR_LOCAL, KernelFigures, read_figures
from nvstage.errors import ArtifactError
from nvstage.inspect.resources import parse_ptxas_verbose

ARCHES = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100", "sm_120")

# Local arrays of every access size (dynamic indexing keeps them in local memory), with and
# without spills; a non-inlined device function for -rdc.
LOCAL_ARRAYS = r"""
__global__ void locals(const int* idx, int* out) {
  volatile signed char c[64]; volatile short s[64]; volatile int w[64];
  volatile double d[64]; volatile unsigned char uc[64]; volatile unsigned short us[64];
  int t = threadIdx.x;
  int j = idx[t] & 63;
  c[j] = t; s[j] = t; w[j] = t; d[j] = t; uc[j] = t; us[j] = t;
  int4 q[8]; for (int k = 0; k < 8; ++k) q[k] = make_int4(t, k, t * k, t + k);
  long long ll[8]; for (int k = 0; k < 8; ++k) ll[k] = t * (long long)k;
  out[t] = c[idx[t + 1] & 63] + s[idx[t + 2] & 63] + w[idx[t + 3] & 63] + (int)d[idx[t + 4] & 63]
           + uc[idx[t + 5] & 63] + us[idx[t + 6] & 63] + q[j & 7].y + (int)ll[j & 7];
}
__global__ void wide(const int* idx, float4* o4, double* od, short* os) {
  float4 q[32]; double d[64]; short s[64];
  int t = threadIdx.x;
  for (int k = 0; k < 32; ++k) q[k] = make_float4(k, t, k + t, k * t);
  for (int k = 0; k < 64; ++k) { d[k] = k * 1.5 * t; s[k] = (short)(k + t); }
  int j = idx[t] & 63;
  o4[t] = q[j & 31]; od[t] = d[j]; os[t] = s[j];
}
__device__ __noinline__ float helper(const float* p, int n) {
  float a[16];
  for (int k = 0; k < 16; ++k) a[k] = p[k * n];
  return a[n & 15];
}
__global__ void calls(const float* p, float* out, int n) { out[threadIdx.x] = helper(p, n); }
"""

_CUMULATIVE = re.compile(r"(\d+) bytes cumulative stack size")
_USED = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'|[Uu]sed \d+ registers.*")


def _cumulative(report: str) -> dict[tuple[str, str], int | None]:
    """(kernel, arch) -> ptxas's cumulative stack size (None when the line has none)."""
    out, current = {}, None
    for m in _USED.finditer(report):
        if m.group(1):
            current = (m.group(1), m.group(2))
        elif current is not None:
            c = _CUMULATIVE.search(m.group(0))
            out[current] = int(c.group(1)) if c else None
            current = None
    return out


@pytest.fixture(scope="module")
def corpus(toolkit, kernels, tmp_path_factory):
    """[(label, ptxas -v's report, the cubin's bytes)]: each PTX through ptxas for each arch
    (compute_75 PTX serves every arch: one cicc per source)."""
    root = tmp_path_factory.mktemp("figures")
    (root / "locals.cu").write_text(LOCAL_ARRAYS)
    for k in ("multi.cu", "templates.cu", "spill.cu", "reduce.cu", "matmul_tiled.cu"):
        shutil.copy(kernels / k, root)
    sources = ["multi", "templates", "spill", "reduce", "matmul_tiled", "locals"]

    def ptx(name: str, out: str = "", *flags: str) -> str:
        out = out or f"{name}.ptx"
        cp = proc.run([toolkit.nvcc, "-ptx", "-arch=compute_75", *flags, f"{name}.cu",
                       "-o", out], cwd=root, timeout=300)
        assert cp.returncode == 0, cp.stderr
        return out

    def ptxas(job) -> tuple[str, str, bytes]:
        label, ptx_file, arch, flags = job
        out = root / f"{label}.{arch}.cubin"
        cp = proc.run([toolkit.tool("ptxas"), "-v", f"-arch={arch}", *flags, ptx_file,
                       "-o", str(out)], cwd=root, timeout=300)
        assert cp.returncode == 0, cp.stderr
        return f"{label} {arch}", cp.stderr + cp.stdout, out.read_bytes()

    with ThreadPoolExecutor(2) as pool:
        files = dict(zip(sources, pool.map(ptx, sources)))
        rdc = pool.submit(ptx, "locals", "locals_rdc.ptx", "-rdc=true")
        debug = pool.submit(ptx, "spill", "spill_G.ptx", "-G")
        rdc.result(), debug.result()
        jobs = [(s, files[s], a, ()) for s in ("multi", "spill", "locals") for a in ARCHES]
        jobs += [(s, files[s], a, ()) for s in ("templates", "reduce", "matmul_tiled")
                 for a in ("sm_75", "sm_90", "sm_120")]
        jobs += [("spill32", files["spill"], a, ("-maxrregcount=32",)) for a in ARCHES]
        jobs += [("locals32", files["locals"], a, ("-maxrregcount=32",))
                 for a in ("sm_75", "sm_90", "sm_100")]
        jobs += [("rdc", "locals_rdc.ptx", a, ("-c",)) for a in ("sm_80", "sm_90")]
        jobs += [("G", "spill_G.ptx", "sm_90", ("-g",))]
        return list(pool.map(ptxas, jobs))


def test_figures_are_ptxas_verbose_figures(corpus):
    compared = 0
    for label, report, data in corpus:
        ptxas = {(r.kernel, r.arch): r for r in parse_ptxas_verbose(report)}
        cumulative = _cumulative(report)
        figures = read_figures(data, label)
        assert {(f.kernel, f.arch) for f in figures} == set(ptxas), label
        for f in figures:
            p = ptxas[(f.kernel, f.arch)]
            where = f"{label} {f.kernel}"
            assert f.registers == p.registers, where
            assert (f.spill_stores, f.spill_loads) == (p.spill_stores, p.spill_loads), where
            assert f.spill_kind == SPILL, where
            assert f.stack_frame == p.stack_frame, where
            printed = cumulative[(f.kernel, f.arch)]  # sm_75 and sm_8x leave out a 0
            assert f.stack_size == printed if printed is not None else f.stack_size in (0, None)
            assert f.barriers == p.barriers, where
            assert f.shared_bytes == p.shared_bytes, where
            if p.constant_bytes is not None:  # sm_75 and sm_8x print cmem[0]
                assert f.constant_bytes == p.constant_bytes, where
            assert f.final is not label.startswith("rdc"), where
            compared += 1
    assert compared > 100


def test_the_corpus_spills_and_has_local_arrays(corpus):
    """The corpus holds what the reader must tell apart: kernels that spill, kernels whose
    local arrays are stored and loaded but do not spill, and kernels that do both."""
    seen = {"spills": 0, "local only": 0, "both": 0}
    for label, _, data in corpus:
        for f in read_figures(data, label):
            arrays = f.local_stores > f.spill_stores or f.local_loads > f.spill_loads
            spills = f.spill_stores > 0
            if spills and arrays:
                seen["both"] += 1
            elif spills:
                seen["spills"] += 1
            elif arrays:
                seen["local only"] += 1
    assert all(seen.values()), seen


def test_the_spill_kernel_at_32_registers(corpus):
    label, report, data = next(c for c in corpus if c[0] == "spill32 sm_90")
    (f,) = read_figures(data, label)
    (p,) = parse_ptxas_verbose(report)
    assert (f.registers, f.max_registers) == (32, 32)
    # compute_75 PTX: 372 and 404 bytes (nvcc -arch=sm_90's compute_90 PTX: 364 and 392)
    assert (f.spill_stores, f.spill_loads) == (p.spill_stores, p.spill_loads) == (372, 404)
    assert f.spill_kind == SPILL and f.stack_frame == p.stack_frame > 0


def test_a_ptxas_that_marks_no_spill_leaves_them_undecided(corpus):
    """Where the cubin's ptxas is not one seen to mark every spill and some local-memory
    instruction is unmarked, the figures are every local store and load, called "spill or
    local array"."""
    data = next(d for label, _, d in corpus if label == "locals32 sm_90")
    unknown = data.replace(b"Cuda compilation tools, release 13.",
                           b"Cuda compilation tools, release 99.")
    by_name = {f.kernel: f for f in read_figures(unknown)}
    kept = {f.kernel: f for f in read_figures(data)}
    arrays = by_name["_Z6localsPKiPi"]
    assert arrays.spill_kind == SPILL_OR_LOCAL
    assert (arrays.spill_stores, arrays.spill_loads) == (arrays.local_stores, arrays.local_loads)
    assert kept["_Z6localsPKiPi"].spill_kind == SPILL


def test_round_trip_through_json(corpus):
    for label, _, data in corpus[:5]:
        for f in read_figures(data, label):
            assert KernelFigures.from_json(f.to_json()) == f


@pytest.mark.parametrize("field,value", [("registers", "32"), ("spill_kind", "maybe"),
                                         ("final", 1), ("stack_size", -1),
                                         ("registers", True)])
def test_a_wrong_field_is_an_artifact_error(corpus, field, value):
    f = read_figures(corpus[0][2])[0].to_json()
    with pytest.raises(ArtifactError):
        KernelFigures.from_json({**f, field: value})


def test_damaged_cubins_are_artifact_errors(corpus):
    data = corpus[0][2]
    for bad in (b"", b"\x7fELF", data[:100], b"\x7fELF\x01" + data[5:],
                data[:0x3C] + struct.pack("<H", 0xFFFF) + data[0x3E:]):
        with pytest.raises(ArtifactError):
            read_figures(bad)


def test_instruction_words_captured():
    """STL/LDL words as cuobjdump -sass printed them (sm_90, CUDA 13.5): opcode and size."""
    from nvstage.compiler.nvcc.cubin_figures import _local_traffic

    words = [(0x0000000825007387, 0x000fe40000100000, "st", 1),   # STL.U8 [R37], R8
             (0x0000400817007387, 0x000fe20000100400, "st", 2),   # STL.U16 [R23+0x40], R8
             (0x0000c0080b007387, 0x0003e20000100800, "st", 4),   # STL [R11+0xc0], R8
             (0x0001c00609007387, 0x0011e20000100a00, "st", 8),   # STL.64 [R9+0x1c0], R6
             (0x0004800801007387, 0x0001e20000100c00, "st", 16),  # STL.128 [R1+0x480], R8
             (0x0000000003037983, 0x000ea80000100200, "ld", 1),   # LDL.S8 R3, [R3]
             (0x000040000a0a7983, 0x000ea80000100600, "ld", 2),   # LDL.S16 R10, [R10+0x40]
             (0x0000c0000b0b7983, 0x000ea80000100800, "ld", 4),   # LDL R11, [R11+0xc0]
             (0x0001c00008087983, 0x000ee20000100a00, "ld", 8),   # LDL.64 R8, [R8+0x1c0]
             (0x0003c00000007983, 0x000f240000100000, "ld", 1),   # LDL.U8 R0, [R0+0x3c0]
             (0x000400000e067983, 0x000f680000100400, "ld", 2),   # LDL.U16 R6, [R14+0x400]
             (0x0003c00004047983, 0x000ee80000100c00, "ld", 16),  # LDL.128 R4, [R4+0x3c0]
             (0x0000140001057983, 0x002ea40000300800, "ld", 4),   # LDL.LU R5, [R1+0x14]
             (0x0000900001047983, 0x0003680000300a00, "ld", 8),   # LDL.LU.64 R4, [R1+0x90]
             (0x00000003080e7824, 0x040fe400078e02ff, "", 0),     # IMAD R14, R8.reuse, 0x3, RZ
             (0x000000ffff167224, 0x000fe400078e0a16, "", 0),     # IMAD.MOV R22, RZ, RZ, -R22
             (0x0000000404047825, 0x010fca00078e0010, "", 0)]     # IMAD.WIDE.U32 R4, R4, 0x4
    text = b"".join(struct.pack("<QQ", lo, hi) for lo, hi, _, _ in words)
    spilled = {0, 16 * 12}  # the STL.U8 and the LDL.LU marked as spills
    stores, loads, spilled_st, spilled_ld = _local_traffic(text, spilled)
    assert stores == sum(n for *_, kind, n in words if kind == "st") == 31
    assert loads == sum(n for *_, kind, n in words if kind == "ld") == 46
    assert (spilled_st, spilled_ld) == (1, 4)
    # The same words off the 16-byte grid are no instructions.
    assert _local_traffic(b"\x00" * 8 + text[:-8], set())[:2] == (0, 0)
