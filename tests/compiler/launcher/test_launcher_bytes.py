"""What the launcher hands back (``nvstage NVCC ARGS``) is plain nvcc's object, up to what two
plain nvcc runs of one command differ in.

Two plain runs are compared first, byte for byte with only nvcc's per-run tokens masked (the
temporary files' pid and the module id's names, each the same length in both), to prove the
mask hides nvcc's own nondeterminism and nothing else. The launcher's object is then compared
whole, with the same mask, and section by section: every section's bytes, every fatbin image
(each cubin's sections, its note of ptxas's options among them: an added ``-v`` shows there),
every symbol. The launcher plans as plain nvcc does (its temporary names, pid ``00000000``):
gcc writes the name of the file it compiles into the host object's file symbol, and ptxas,
with ``-G``, the PTX and cubin names into the cubin. A ``-G`` fatbin is compressed, so the pid
inside changes its size: there the images are compared unpacked, as two plain runs' are.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from nvstage import proc

INTERNAL = r"""
namespace {
__global__ void anon_k(float* p) { p[threadIdx.x] *= 2.0f; }
}
static __device__ int counter;
static __global__ void static_k(float* p) { p[threadIdx.x] += atomicAdd(&counter, 1); }
__global__ void plain_k(float* p, int n) { if (threadIdx.x < n) p[threadIdx.x] -= 1.0f; }
void launch(float* p) { anon_k<<<1, 32>>>(p); static_k<<<1, 32>>>(p); plain_k<<<1, 32>>>(p, 3); }
"""

CASES = {
    "single": ("-c", "-arch=sm_90", "internal.cu"),
    "gencodes": ("-c", "-gencode", "arch=compute_80,code=sm_80", "-gencode",
                 "arch=compute_90,code=[sm_90,compute_90]", "multi.cu"),
    "rdc-c": ("-rdc=true", "-c", "-arch=sm_90", "internal.cu"),
    "dc": ("-dc", "-arch=sm_80", "templates.cu"),
    "debug": ("-c", "-G", "-arch=sm_90", "vadd.cu"),
}

# nvcc's per-run tokens, each as long in one run as in another: the pid in temporary names,
# and the module id cudafe++ puts into internal-linkage names (with the mangled length before
# it, which changes when the id's length does).
_RUN_TOKENS = re.compile(rb"tmpxft_[0-9a-f]{8}_|\d*_INTERNAL_[0-9a-f]{8}_\d+_\w+?_[0-9a-f]{8}"
                         rb"(?:_\d+)?|\d*_GLOBAL__N__[0-9a-f]{8}_\d+_\w+?_[0-9a-f]{8}(?:_\d+)?"
                         rb"|__nv_module_id_\w+")


def _mask(data: bytes) -> bytes:
    return _RUN_TOKENS.sub(b"<run>", data)


def _launcher() -> list[str]:
    script = Path(sys.executable).parent / "nvstage"
    return [str(script)] if script.exists() else [sys.executable, "-m", "nvstage"]


@pytest.fixture(scope="module")
def objects(toolkit, kernels, tmp_path_factory):
    """case -> (plain nvcc's object, a second plain run's, the launcher's, the launcher's
    again from its cache)."""
    root = tmp_path_factory.mktemp("bytes")
    (root / "internal.cu").write_text(INTERNAL)
    for k in ("multi.cu", "templates.cu", "vadd.cu"):
        shutil.copy(kernels / k, root)
    env = dict(os.environ, NVSTAGE_CACHE_DIR=str(root / "cache"),
               XDG_CONFIG_HOME=str(root / "config"))

    def build(job) -> bytes:
        case, who = job
        out = root / f"{case}.{who}.o"
        argv = [toolkit.nvcc, *CASES[case], "-o", out.name]
        if who == "verbose":  # what nvstage's own -v made ptxas write into the cubin
            argv[1:1] = ["-Xptxas", "-v"]
        if who.startswith("nvstage"):
            argv = [*_launcher(), *argv]
        cp = proc.run(argv, cwd=root, env=env, timeout=600)
        assert cp.returncode == 0, cp.stderr
        return out.read_bytes()

    jobs = [(c, w) for c in CASES for w in ("plain1", "plain2", "nvstage")]
    jobs.append(("single", "verbose"))
    with ThreadPoolExecutor(2) as pool:
        done = dict(zip(jobs, pool.map(build, jobs)))
    warm = {c: build((c, "nvstage-warm")) for c in CASES}  # after the cold ones: from the cache
    built = {c: (done[c, "plain1"], done[c, "plain2"], done[c, "nvstage"], warm[c])
             for c in CASES}
    built["verbose"] = done["single", "verbose"]
    return built


def _same_but_run_tokens(one: bytes, two: bytes, toolkit, tmp_path: Path) -> None:
    """``one`` and ``two`` are the same file but for nvcc's per-run tokens: byte for byte
    once masked, or, where a compressed fatbin (``-G``) holds them, every other section so
    and each of its images unpacked so."""
    if _mask(one) == _mask(two):
        return
    from elftools.elf.elffile import ELFFile

    from nvstage.inspect.fatbin import image_bytes

    a, b = ELFFile(io.BytesIO(one)), ELFFile(io.BytesIO(two))
    fatbins = {".nv_fatbin", "__nv_relfatbin"}
    assert any(s.name in fatbins for s in a.iter_sections()), "not only a fatbin differs"
    for x, y in zip(a.iter_sections(), b.iter_sections(), strict=True):
        assert x.name == y.name
        if x.name not in fatbins:
            assert _mask(x.data()) == _mask(y.data()), x.name
    (tmp_path / "one.o").write_bytes(one)
    (tmp_path / "two.o").write_bytes(two)
    for kind in ("cubin", "ptx"):
        ia, ib = (image_bytes(tmp_path / n, toolkit, kind) for n in ("one.o", "two.o"))
        assert len(ia) == len(ib)
        for (_, x), (_, y) in zip(ia, ib):
            assert len(x) == len(y) and _mask(x) == _mask(y)


@pytest.mark.parametrize("case", list(CASES))
def test_two_plain_runs_differ_only_in_run_tokens(objects, case, toolkit, tmp_path):
    one, two, _, _ = objects[case]
    if case != "debug":  # a -G fatbin is compressed: nvcc's pid inside can change its length
        assert len(one) == len(two)
    _same_but_run_tokens(one, two, toolkit, tmp_path)


@pytest.mark.parametrize("case", list(CASES))
def test_whole_file_is_plain_nvccs(objects, case, toolkit, tmp_path):
    plain, _, nvstage, _ = objects[case]
    if case != "debug":  # uncompressed: the whole file, masked, byte for byte
        assert _mask(plain) == _mask(nvstage)
    _same_but_run_tokens(plain, nvstage, toolkit, tmp_path)


def _sections(data: bytes) -> list[tuple]:
    """(name, type, flags, masked contents) of each section, the symbol table as symbols
    with masked names (its string table's offsets move with a name's length)."""
    from elftools.elf.elffile import ELFFile

    elf = ELFFile(io.BytesIO(data))
    out = []
    for s in elf.iter_sections():
        if s["sh_type"] == "SHT_SYMTAB":
            body = [(_mask(sym.name.encode()), sym["st_info"]["type"],
                     sym["st_info"]["bind"], sym["st_other"]["visibility"], sym["st_shndx"],
                     sym["st_value"], sym["st_size"]) for sym in s.iter_symbols()]
        elif s.name == ".strtab":
            continue  # its names are the symbols'
        elif s.name == ".note.nv.tkinfo":
            # Note header (name size, desc size, type, "NVIDIA Corp"), the note's version (8
            # bytes), the offsets of its strings (16), the strings (the file, the tool, its
            # version, its branch, its options), padding. A longer file name among the
            # options moves the sizes, offsets and padding alone.
            note = s.data()
            body = (note[:4], note[8:32],
                    [_mask(t) for t in note[48:].rstrip(b"\0").split(b"\0")])
        else:
            body = _mask(b"" if s["sh_type"] == "SHT_NOBITS" else s.data())
        out.append((s.name, s["sh_type"], s["sh_flags"], s["sh_size"]
                     if s["sh_type"] == "SHT_NOBITS" else None, body))
    return out


def _images(path: Path, toolkit) -> list[tuple]:
    from nvstage.inspect.fatbin import image_bytes

    out = []
    for kind in ("cubin", "ptx"):
        for im, data in image_bytes(path, toolkit, kind):
            out.append((kind, im.arch_name, im.section,
                        _sections(data) if kind == "cubin" else _mask(data)))
    return out


def _compare(a: bytes, b: bytes, toolkit, tmp_path: Path) -> None:
    left, right = _sections(a), _sections(b)
    assert [s[:2] for s in left] == [s[:2] for s in right]
    fatbins = {".nv_fatbin", "__nv_relfatbin"}
    for x, y in zip(left, right):
        if x[0] in fatbins:  # images compared one by one below (a name moves their offsets)
            continue
        assert x == y, f"section {x[0]} differs"
    pa, pb = tmp_path / "a.o", tmp_path / "b.o"
    pa.write_bytes(a)
    pb.write_bytes(b)
    ia, ib = _images(pa, toolkit), _images(pb, toolkit)
    assert ia and len(ia) == len(ib)
    for x, y in zip(ia, ib):
        assert x[:3] == y[:3]
        if x[0] == "cubin":
            assert [s[:2] for s in x[3]] == [s[:2] for s in y[3]]
            for sx, sy in zip(x[3], y[3]):
                assert sx == sy, f"{x[1]} cubin: section {sx[0]} differs"
        else:
            assert x[3] == y[3], f"{x[1]} PTX differs"


@pytest.mark.parametrize("case", list(CASES))
def test_launcher_object_is_plain_nvccs(objects, case, toolkit, tmp_path):
    plain, again, nvstage, warm = objects[case]
    _compare(plain, again, toolkit, tmp_path)  # the comparison itself: two plain runs pass
    _compare(plain, nvstage, toolkit, tmp_path)
    assert warm == nvstage  # a hit hands back what the miss built


def test_an_added_ptxas_option_is_caught(objects, toolkit, tmp_path):
    """The comparison sees one word more in ptxas's note of its options: plain nvcc with
    -Xptxas -v, as nvstage's own -v used to make every object (``-v  -arch sm_90``)."""
    plain, _, nvstage, _ = objects["single"]
    verbose = objects["verbose"]
    assert b"-v  -arch sm_90 -m 64" in verbose and b"-v  -arch" not in nvstage
    with pytest.raises(AssertionError, match="tkinfo"):
        _compare(plain, verbose, toolkit, tmp_path)


def test_compile_is_plain_nvccs_and_kept_is_nvcc_keeps(toolkit, kernels, tmp_path):
    """``nvstage.compile`` plans as plain nvcc does without a keep folder (its object is plain
    nvcc's), and as ``nvcc -keep`` does with one (its object is ``nvcc -keep``'s)."""
    from nvstage.compiler.pipeline.driver import compile
    from nvstage.compiler.nvcc.options import CompileOptions

    shutil.copy(kernels / "vadd.cu", tmp_path)

    def nvcc(*extra: str, out: str) -> bytes:
        cp = proc.run([toolkit.nvcc, *extra, "-c", "-arch=sm_90", "vadd.cu", "-o", out],
                      cwd=tmp_path, timeout=600)
        assert cp.returncode == 0, cp.stderr
        return (tmp_path / out).read_bytes()

    def ours(out: str, keep: str | None) -> bytes:
        compile("vadd.cu", CompileOptions(archs=("sm_90",), compile_only=True, output=out),
                toolkit=toolkit, cwd=tmp_path, keep=keep, cache=False)
        return (tmp_path / out).read_bytes()

    (tmp_path / "k").mkdir()
    assert _mask(ours("a.o", None)) == _mask(nvcc(out="b.o"))
    assert ours("c.o", "kept") == nvcc("-keep", "-keep-dir", "k", out="d.o")
