"""Issue 12, causes 4, 6 and 7 in the readers: each exact input that hung, ran away with memory,
printed a traceback, or was reported wrongly, now a one-line error (or a result), fast.

Large inputs are sparse files (``os.truncate``): they cost no disk, and reading one whole
is exactly what must not happen, which ``tracemalloc`` and a wall-clock bound check.
"""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

from nvstage.errors import (ArtifactError, InputTooLarge, NotRegularFile, StageFailed,
                            UsageError)

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
TWO_GIB = 2 << 30


def _nvstage(*args, timeout=120):
    """The CLI in a subprocess: its timeout turns a hang into a failure, not a stall."""
    env = dict(os.environ, NO_COLOR="1", COLUMNS="200", NVSTAGE_NO_GPU="1")
    t0 = time.monotonic()
    cp = subprocess.run([sys.executable, "-m", "nvstage", *map(str, args)],
                        capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)
    return cp, time.monotonic() - t0


def _one_error(cp, code: int) -> str:
    assert cp.returncode == code, cp.stderr
    assert "Traceback" not in cp.stderr, cp.stderr
    errors = [line for line in cp.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, cp.stderr
    return errors[0]


class _Peak:
    """Python's own allocations (bytes objects, lists) during the block, at their peak."""

    def __enter__(self):
        tracemalloc.start()
        self.t0 = time.monotonic()
        return self

    def __exit__(self, *exc):
        self.seconds = time.monotonic() - self.t0
        self.bytes = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


@pytest.fixture(scope="module")
def built(toolkit, tmp_path_factory):
    """saxpy as a cubin, a plain and a compressed fatbin, and an object, from real nvcc."""
    d = tmp_path_factory.mktemp("hostile")

    def nvcc(*args):
        cp = subprocess.run([toolkit.nvcc, *map(str, args)], cwd=d, capture_output=True,
                            text=True)
        assert cp.returncode == 0, cp.stderr

    src = KERNELS / "saxpy.cu"
    nvcc("--cubin", "-arch=sm_90", src, "-o", "saxpy.cubin")
    nvcc("--fatbin", "-arch=sm_90", "-Xfatbin", "-compress-all", src, "-o", "saxpy.z.fatbin")
    nvcc("-c", "-arch=sm_90", src, "-o", "saxpy.o")
    return d


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "pipe.cubin"
    os.mkfifo(p)
    return p


# -- cause 4: hangs and runaway memory --------------------------------------------------------

def test_show_refuses_a_fifo_at_once(fifo):
    cp, seconds = _nvstage("show", fifo, timeout=60)
    line = _one_error(cp, 6)
    assert f"{fifo} is a FIFO (named pipe), not a regular file" in line
    assert seconds < 30


def test_occupancy_refuses_a_fifo_at_once(fifo):
    cp, _ = _nvstage("occupancy", fifo, "--block", "128", timeout=60)
    assert "is a FIFO (named pipe)" in _one_error(cp, 6)


def test_show_refuses_dev_zero():
    # It died of MemoryError after reading gigabytes of zeros.
    cp, _ = _nvstage("show", "/dev/zero", timeout=60)
    assert "/dev/zero is a character device, not a regular file" in _one_error(cp, 6)


def test_every_reader_refuses_special_files_unread(fifo, tmp_path):
    from nvstage.files import read_regular, sha256_file
    from nvstage.hw.gpus import load_gpu_spec
    from nvstage.inspect.fatbin import kind_of_file, raw_images
    from nvstage.inspect.ptx import read_ptx
    from nvstage.run.workload import Workload

    for read in (kind_of_file, raw_images, read_ptx, read_regular):
        for path in (fifo, "/dev/zero"):
            with pytest.raises(NotRegularFile, match="not a regular file"):
                read(path)
    with pytest.raises(OSError):  # what the cache and the manifest's stale check expect
        sha256_file(fifo)
    spec = tmp_path / "gpu.toml"
    os.mkfifo(spec)
    with pytest.raises(UsageError, match="is a FIFO .*, not a GPU spec"):
        load_gpu_spec(spec)
    wl = tmp_path / "w.toml"
    os.mkfifo(wl)
    with pytest.raises(UsageError, match="is a FIFO .*, not a workload"):
        Workload.from_toml(wl)
    # A workload naming a FIFO as its cubin: refused when read, before anything waits on it.
    with pytest.raises(UsageError, match="not a regular file"):
        Workload.from_dict({"kernel": {"cubin": str(fifo)},
                            "launch": [{"kernel": "k", "grid": 1, "block": 1}]})


def test_sparse_2gib_file_is_rejected_fast_and_small(tmp_path):
    from nvstage.inspect.fatbin import kind_of_file

    p = tmp_path / "sparse.bin"
    with p.open("wb") as f:
        f.truncate(TWO_GIB)
    with _Peak() as peak, pytest.raises(ArtifactError, match="not a CUDA artifact"):
        kind_of_file(p)
    # It took 2.1 GB and 11 s: the file is mapped and only its first bytes are looked at.
    assert peak.seconds < 2 and peak.bytes < 16 << 20
    cp, _ = _nvstage("show", p, timeout=60)
    assert "not a CUDA artifact" in _one_error(cp, 6)


def test_cubin_padded_to_2gib_is_refused_by_its_size(built, tmp_path):
    from nvstage.files import MAX_ARTIFACT_BYTES
    from nvstage.inspect.fatbin import kind_of_file, read_bytes

    p = tmp_path / "padded.cubin"
    p.write_bytes((built / "saxpy.cubin").read_bytes())
    os.truncate(p, TWO_GIB)
    with _Peak() as peak, pytest.raises(InputTooLarge, match="MAX_ARTIFACT_BYTES"):
        kind_of_file(p)
    assert peak.seconds < 2 and peak.bytes < 16 << 20  # it took 8.4 GB and 52 s
    with pytest.raises(InputTooLarge, match=r"2 GiB: more than the 1 GiB"):
        read_bytes(p)
    assert MAX_ARTIFACT_BYTES == 1 << 30
    cp, _ = _nvstage("show", p, timeout=60)
    assert "more than the 1 GiB nvstage reads from one cubin" in _one_error(cp, 6)


def test_a_large_object_costs_only_its_device_code(built, tmp_path, toolkit):
    # Objects and executables are mapped: 2 GiB of host bytes after the sections are never
    # read, and the fatbin inside is listed as in the plain object.
    from nvstage.inspect.fatbin import inventory

    p = tmp_path / "big.o"
    p.write_bytes((built / "saxpy.o").read_bytes())
    os.truncate(p, TWO_GIB)
    with _Peak() as peak:
        images = inventory(p, toolkit)
    assert [(i.kind, i.arch) for i in images] == \
        [(i.kind, i.arch) for i in inventory(built / "saxpy.o", toolkit)]
    assert peak.seconds < 10 and peak.bytes < 64 << 20


def test_a_section_name_table_without_nuls_is_damage(built):
    # pyelftools reads a name 64 bytes at a time to its NUL, past the end of the table: a
    # table of no NULs made every section's name a crawl to the end of the file.
    from elftools.elf.elffile import ELFFile

    from nvstage.inspect.elf import read_cubin

    data = bytearray((built / "saxpy.cubin").read_bytes())
    import io

    elf = ELFFile(io.BytesIO(bytes(data)))
    table = elf.get_section(elf["e_shstrndx"])
    start, size = table["sh_offset"], table["sh_size"]
    data[start:start + size] = b"A" * size
    with pytest.raises(ArtifactError, match="name does not end inside the section-name table"):
        read_cubin(bytes(data), "damaged.cubin")


@pytest.mark.parametrize("text", [
    "\n" * 200_000,  # "^\s*" re-scanned every run of blank lines: quadratic
    ".version 9.5\n.target " + " " * 200_000 + "!\n",  # did not finish
    "/*" * 100_000,  # each unclosed comment scanned to the end
    ".version 9.5\n.target sm_90\n" + ".entry a {\n" * 20_000 + "}\n" * 20_000,
])
def test_pathological_ptx_is_answered_in_linear_time(text):
    from nvstage.inspect.ptx import parse_ptx

    t0 = time.monotonic()
    try:
        parse_ptx(text, demangle=False)
    except ArtifactError:
        pass
    assert time.monotonic() - t0 < 2


def test_a_document_past_its_bound_is_refused_unread(tmp_path):
    from nvstage.documents import MAX_DOCUMENT_BYTES
    from nvstage.run.workload import Workload

    p = tmp_path / "huge.toml"
    with p.open("wb") as f:
        f.truncate(MAX_DOCUMENT_BYTES + 1)
    with _Peak() as peak, pytest.raises(UsageError, match="MAX_DOCUMENT_BYTES"):
        Workload.from_toml(p)
    assert peak.bytes < 16 << 20


def _w(**params):
    from nvstage.run.workload import Workload

    return Workload.from_dict({
        "kernel": {"source": str(KERNELS / "saxpy.cu")}, "params": params,
        "buffers": {"x": {"dtype": "float32", "count": 1024}},
        "launch": [{"kernel": "saxpy", "grid": 4, "block": 256,
                    "args": [{"i32": 1024}, {"f32": 2.0}, "x", "x"]}]})


@pytest.mark.parametrize("expr, message", [
    ("((10**4096)**4096)**4096", "exceeds 2**512"),  # computed for minutes
    ("+".join(["1"] * 100_000), "longer than 2000 characters"),  # RecursionError
    ("+".join(["1"] * 500), "nested more than 100 levels"),
    ("-" * 1500 + "1", "nested more than 100 levels"),
    ("1 << 64 << 64 << 64 << 64 << 64 << 64 << 64 << 64", "exceeds 2**512"),
    ("(1,) * 10**9", "tuple"),
    ("9**9**9", "exponent too large"),
])
def test_expressions_are_bounded_in_size_and_depth(expr, message):
    from nvstage.errors import WorkloadError

    t0 = time.monotonic()
    with pytest.raises(WorkloadError, match=message.replace("*", r"\*")):
        _w(m=expr).param_values()
    assert time.monotonic() - t0 < 1


# -- cause 6: tracebacks ------------------------------------------------------------------

@pytest.mark.parametrize("params, message", [
    ({"x": math.nan, "m": "int(x)"}, "nan is not a finite number"),  # ValueError
    ({"x": math.inf, "m": "ceil(x)"}, "inf is not a finite number"),  # OverflowError
    ({"x": math.nan, "m": "floor(x)"}, "nan is not a finite number"),
    ({"m": "1 << -1"}, "negative shift count"),  # ValueError
    ({"m": "(-8) ** 0.5"}, "not a real number"),  # a complex number
    ({"m": 10 ** 4000}, "exceeds 2**512"),  # a literal too large to print or convert
])
def test_nan_inf_and_huge_values_are_one_error(params, message):
    from nvstage.errors import WorkloadError

    with pytest.raises(WorkloadError, match=message.replace("*", r"\*")):
        _w(**params).param_values()


def test_a_toml_integer_past_pythons_digit_limit_is_one_error(tmp_path):
    from nvstage.errors import WorkloadError
    from nvstage.run.workload import Workload

    p = tmp_path / "w.toml"
    p.write_text("[params]\nn = " + "9" * 5000 + "\n")  # tomllib raised a bare ValueError
    with pytest.raises(WorkloadError, match="not valid TOML"):
        Workload.from_toml(p)


@pytest.mark.parametrize("entry, message", [
    ({"flops": math.nan}, "nan is not a finite number"),
    ({"flops": math.inf}, "inf is not a finite number"),
    ({"flops": "1e308 * 10"}, "is inf, not a finite number"),
    ({"writes": {"x": "1e308 * 10"}}, "is inf, not a finite number"),  # reached int()
    ({"writes": {"x": "n / 3"}}, "an element count is a whole number"),
    ({"flops": "2**4000"}, "exceeds 2**512"),
])
def test_cost_files_refuse_non_finite_counts(entry, message):
    from nvstage.errors import CostSpecError
    from nvstage.model.costfile import cost_from_dict

    w = _w(n=1024)
    launch = {"kernel": "saxpy", "reads": ["x"], "writes": ["x"], "flops": "n", **entry}
    with pytest.raises(CostSpecError, match=message.replace("*", r"\*")):
        cost_from_dict({"launch": [launch]}, w, origin="c.cost.toml")


@pytest.mark.parametrize("text, suffix, message", [
    ('base = "h100"\nmemory_bandwidth = 1e-300\n', "toml",
     "'memory_bandwidth' must be between 1e\\+06 and 1e\\+16 bytes/s"),
    ('{"base": "h100", "memory_bandwidth": Infinity}', "json", "must be a positive number"),
    ('{"base": "h100", "fp32_flops": 1e30}', "json", "'fp32_flops' must be between"),
    ('{"base": "h100", "sm_count": 10000000}', "json", "'sm_count' must be between"),
    ('{"base": "h100", "memory_bandwidth": 1' + "0" * 400 + "}", "json",
     "must be a positive number"),  # an int too large for a float: OverflowError
    ('{"base": "h100", "sm_count": ' + "9" * 5000 + "}", "json", "not valid JSON"),
    ("[" * 100_000, "json", "nested too deeply"),
])
def test_absurd_gpu_specs_are_refused_at_the_reader(tmp_path, text, suffix, message):
    from nvstage.errors import GpuSpecError
    from nvstage.hw.gpus import load_gpu_spec

    p = tmp_path / f"absurd.{suffix}"
    p.write_text(text)
    with pytest.raises(GpuSpecError, match=message):
        load_gpu_spec(p)


def test_absurd_gpu_spec_on_the_command_line(tmp_path):
    # It passed validation, then --svg overflowed and --json printed Infinity.
    spec = tmp_path / "absurd.toml"
    spec.write_text('base = "h100"\nmemory_bandwidth = 1e-300\n')
    cp, _ = _nvstage("model", ROOT / "examples" / "model" / "reduce.toml", "--gpu-spec",
                     spec, "--json", "--svg", tmp_path / "r.svg")
    assert "'memory_bandwidth' must be between" in _one_error(cp, 2)
    assert not (tmp_path / "r.svg").exists()


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_json_written_by_nvstage_is_standard(tmp_path):
    from nvstage.files import json_safe, write_json_atomic

    doc = {"t": math.nan, "rows": [math.inf, -math.inf, 1.5], "n": (1, 2)}
    write_json_atomic(tmp_path / "d.json", doc)
    assert _strict((tmp_path / "d.json").read_text()) == \
        {"t": None, "rows": [None, None, 1.5], "n": [1, 2]}
    assert json_safe(doc)["rows"] == [None, None, 1.5]


def test_model_json_is_standard_json(toolkit):
    cp, _ = _nvstage("model", ROOT / "examples" / "model" / "reduce.toml", "--gpu", "h200",
                     "--json", timeout=300)
    assert cp.returncode == 0, cp.stderr
    assert _strict(cp.stdout)["per_launch"]


def test_a_bar_that_cannot_be_drawn_is_one_error(tmp_path):
    from nvstage.report.bars import Bar, write_svg

    with pytest.raises(UsageError, match="not finite"):
        write_svg(tmp_path / "x.svg", [Bar("w", {"kernel": math.inf})], title="t")
    assert not (tmp_path / "x.svg").exists()


# -- cause 7: wrong or silent --------------------------------------------------------------

@pytest.mark.parametrize("grid, block, message", [
    ("2**31", 256, "grid x is 2147483648: CUDA allows at most 2147483647"),
    ([1, 65536], 256, "grid y is 65536: CUDA allows at most 65535"),
    ([1, 1, 65536], 256, "grid z is 65536"),
    (1, [1025], "block x is 1025: CUDA allows at most 1024"),
    (1, [1, 1, 65], "block z is 65: CUDA allows at most 64"),
    (1, [32, 32, 2], "a block holds at most 1024 threads, got 2048"),
])
def test_grid_and_block_limits_are_checked_at_validation(grid, block, message):
    from nvstage.errors import WorkloadError
    from nvstage.run.workload import Workload
    from nvstage.run.workload.validate import validate

    w = Workload.from_dict({
        "kernel": {"source": str(KERNELS / "saxpy.cu")},
        "buffers": {"x": {"dtype": "float32", "count": 1024}},
        "launch": [{"kernel": "saxpy", "grid": grid, "block": block,
                    "args": [{"i32": 1024}, {"f32": 2.0}, "x", "x"]}]})
    with pytest.raises(WorkloadError, match=message):
        validate(w, None)  # no compile, no GPU: the limits are CUDA's, not a device's


def test_grid_limit_on_the_command_line(tmp_path):
    p = tmp_path / "w.toml"
    p.write_text(f"""[kernel]
source = "{KERNELS / 'saxpy.cu'}"
[buffers.x]
dtype = "float32"
count = 1024
[[launch]]
kernel = "saxpy"
grid = [1, 70000]
block = 256
args = [{{ i32 = 1024 }}, {{ f32 = 2.0 }}, "x", "x"]
""")
    cp, _ = _nvstage("run", p, "--dry-run")
    assert "grid y is 70000: CUDA allows at most 65535" in _one_error(cp, 2)


def test_failed_stage_in_run_names_no_deleted_folder(tmp_path, toolkit):
    from nvstage.run.prepare import load_and_validate
    from nvstage.run.workload import Workload

    src = tmp_path / "bad.cu"
    src.write_text("__global__ void k(int *x) { x[0] = ; }\n")
    w = Workload.from_dict({"kernel": {"source": str(src)},
                            "launch": [{"kernel": "k", "grid": 1, "block": 1}]})
    with pytest.raises(StageFailed) as e:
        load_and_validate(w, "sm_90", toolkit=toolkit)
    assert e.value.keep_dir is None
    assert "nvstage-run-" not in e.value.hint and "--keep-dir DIR" in e.value.hint
    assert f"nvstage compile {src} --arch sm_90 --cubin" in e.value.hint


def test_damaged_compressed_image_is_an_input_error_naming_the_file(built, tmp_path):
    from nvstage.inspect.fatbin import _ENTRY, _HEADER

    data = bytearray((built / "saxpy.z.fatbin").read_bytes())
    ehs = struct.unpack_from("<HHI", data, _HEADER.size)[2]
    assert ehs >= _ENTRY.size
    payload = _HEADER.size + ehs
    for i in range(payload + 16, payload + 80):
        data[i] ^= 0x5A
    p = tmp_path / "damaged.fatbin"
    p.write_bytes(bytes(data))
    cp, _ = _nvstage("show", p, timeout=120)
    line = _one_error(cp, 6)  # was exit 3, a toolkit failure naming cuobjdump's temp file
    assert f"{p} image 0 (cubin sm_90) is damaged" in line
    assert "one.fatbin" not in cp.stderr


def test_an_image_arch_that_is_no_architecture_names_the_file(built, tmp_path):
    from nvstage.inspect.fatbin import _HEADER

    data = bytearray((built / "saxpy.z.fatbin").read_bytes())
    struct.pack_into("<I", data, _HEADER.size + 28, 5)  # the arch field of image 0
    p = tmp_path / "badarch.fatbin"
    p.write_bytes(bytes(data))
    cp, _ = _nvstage("show", p, "--gpu", "h200", timeout=120)
    line = _one_error(cp, 6)  # was "not an architecture: 'compute_5'" with no file named
    assert f"{p}: image 0 is damaged: its arch field reads 5" in line


# -- a NUL byte in a document's path or argument (no system call takes one) --------------

_SAXPY_WORKLOAD = (ROOT / "examples" / "run" / "saxpy.toml").read_text().replace(
    "../../kernels/saxpy.cu", str(KERNELS / "saxpy.cu"))


@pytest.mark.parametrize("edit, where", [
    (lambda t: t.replace(f'source = "{KERNELS / "saxpy.cu"}"', 'source = "k\\u0000.cu"'),
     "[kernel] source: a file path cannot hold a NUL byte"),
    (lambda t: t.replace(f'source = "{KERNELS / "saxpy.cu"}"', 'cubin = "k\\u0000.cubin"'),
     "[kernel] cubin: a file path cannot hold a NUL byte"),
    (lambda t: t.replace("[kernel]\n", '[kernel]\ninclude_dirs = ["inc\\u0000"]\n'),
     "[kernel] include_dirs: a string here cannot hold a NUL byte"),
    (lambda t: t.replace("[kernel]\n", '[kernel]\ndefines = ["N=1\\u0000"]\n'),
     "[kernel] defines: a string here cannot hold a NUL byte"),
    (lambda t: t.replace("init = { range = { start = 0.0, step = 0.5 } }",
                         'init = { npy = "y\\u0000.npy" }'),
     "init.npy: a file path cannot hold a NUL byte"),
])
def test_a_nul_in_a_workload_path_is_one_error(tmp_path, edit, where):
    # `source = "k\u0000.cu"` was a traceback: ValueError: embedded null byte (os.stat).
    text = edit(_SAXPY_WORKLOAD)
    assert text != _SAXPY_WORKLOAD
    p = tmp_path / "w.toml"
    p.write_text(text)
    cp, _ = _nvstage("run", "--dry-run", p)
    assert where in _one_error(cp, 2)
    cp, _ = _nvstage("model", p, "--gpu", "h200")  # the same reader
    assert where in _one_error(cp, 2)


@pytest.mark.parametrize("config, where", [
    ('[tool.nvstage]\nsource = "k\\u0000.cu"\n[tool.nvstage.budgets]\nmax_registers = 64\n',
     "source: a file path cannot hold a NUL byte"),
    ('[tool.nvstage.compile]\ninclude_dirs = ["a\\u0000"]\n'
     "[tool.nvstage.budgets]\nmax_registers = 64\n",
     "compile.include_dirs: a string here cannot hold a NUL byte"),
    ('[tool.nvstage.compile]\ndefines = ["A\\u0000B"]\n'
     "[tool.nvstage.budgets]\nmax_registers = 64\n",
     "compile.defines: a string here cannot hold a NUL byte"),
])
def test_a_nul_in_a_budgets_file_is_one_error(tmp_path, config, where):
    (tmp_path / "pyproject.toml").write_text(config)
    target = [] if "source" in config else [KERNELS / "saxpy.cu"]
    cp, _ = _nvstage("check", *target, "--config", tmp_path / "pyproject.toml")
    assert where in _one_error(cp, 2)


def test_a_nul_in_a_manifest_path_is_never_a_traceback(toolkit, tmp_path):
    """A kept build's stages.json naming its source, output or an artifact with a NUL."""
    import nvstage
    from nvstage.compiler.nvcc.options import CompileOptions

    keep = tmp_path / "k"
    nvstage.compile(KERNELS / "saxpy.cu", CompileOptions(archs=("sm_90",), stop="cubin",
                                                        output=str(tmp_path / "s.cubin")),
                    toolkit=toolkit, keep=keep)
    doc = json.loads((keep / "stages.json").read_text())
    (tmp_path / "b.toml").write_text("[budgets]\nmax_registers = 64\n")
    for key in ("source", "output", "cwd", "artifact"):
        bad = json.loads(json.dumps(doc))
        if key == "artifact":
            bad["artifacts"][0]["path"] += "\0x"
        else:
            bad[key] = (bad[key] or "x") + "\0"
        (keep / "stages.json").write_text(json.dumps(bad))
        for args in (["show", keep], ["check", keep, "--config", tmp_path / "b.toml"],
                     ["report", keep, "-o", tmp_path / "r.html"]):
            cp, _ = _nvstage(*args)
            assert "Traceback" not in cp.stderr and cp.returncode in (0, 1, 2, 6), \
                (key, args, cp.stderr[-2000:])


def test_a_nul_in_a_library_compiles_source_is_one_usage_error():
    import nvstage
    from nvstage.errors import UsageError

    with pytest.raises(UsageError, match="NUL"):
        nvstage.compile("k\0.cu")
