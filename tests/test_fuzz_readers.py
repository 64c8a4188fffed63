"""Fuzzing every reader of a user's file that nvstage's workload, model and inspect commands
use: workloads, cost files, GPU specs, cubins, fatbins, objects (.o with an embedded fatbin)
and PTX. The only allowed outcomes are a result or one ``NvstageError`` whose message is one
line: never another exception, never a hang (each example runs under a time bound), and never
a read of a FIFO or device (every open is checked, and FIFOs and /dev/zero are among the
inputs).
"""

from __future__ import annotations

import builtins
import json
import math
import os
import signal
import stat
import struct
import tempfile
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nvstage.errors import NvstageError

ROOT = Path(__file__).resolve().parent.parent
CAPTURED = ROOT / "tests" / "data" / "captured"
SECONDS = 5  # per example: every reader here answers a small input in milliseconds

# NVSTAGE_FUZZ_SCALE=20 for a longer hunt; the default keeps the suite to seconds.
SCALE = float(os.environ.get("NVSTAGE_FUZZ_SCALE", "1"))


def examples(n: int) -> int:
    return max(1, int(n * SCALE))


FUZZ = settings(max_examples=examples(150), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


class Hung(Exception):
    pass


@contextmanager
def time_bound(seconds: float = SECONDS):
    """Fail (not wait) when the body runs past ``seconds``: a hang is a finding."""
    def alarm(signum, frame):
        raise Hung(f"still running after {seconds} s")

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _check_regular(path) -> None:
    if isinstance(path, int) or path == os.devnull:  # subprocess opens it for a tool's stdin
        return
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return  # the open itself will fail
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise AssertionError(f"a reader opened {path}, which is not a regular file")


@contextmanager
def regular_files_only():
    """Every open (os.open, open, Path.open) must be of a regular file (or a folder, which
    open_regular opens to fstat and refuse)."""
    real_os_open, real_open = os.open, builtins.open

    def os_open(path, *a, **k):
        _check_regular(path)
        return real_os_open(path, *a, **k)

    def open_(file, *a, **k):
        _check_regular(file)
        return real_open(file, *a, **k)

    with mock.patch("os.open", os_open), mock.patch("builtins.open", open_), \
            mock.patch("io.open", open_):
        yield


def outcome(fn, *args, **kwargs):
    """``fn(...)``'s result, or None after one NvstageError of a one-line message."""
    with time_bound(), regular_files_only():
        try:
            return fn(*args, **kwargs)
        except NvstageError as e:
            assert e.message and "\n" not in e.message, e.message
            assert "Traceback" not in e.message
            return None


# -- special files: every reader meets them ---------------------------------------------------

@pytest.fixture(scope="module")
def specials(tmp_path_factory):
    """A FIFO (no writer), /dev/zero, a folder, and a symlink to the FIFO."""
    d = tmp_path_factory.mktemp("specials")
    fifo = d / "pipe.toml"
    os.mkfifo(fifo)
    link = d / "link.cubin"
    link.symlink_to(fifo)
    folder = d / "folder.json"
    folder.mkdir()
    return [fifo, link, folder, Path("/dev/zero"), d / "missing.toml"]


def _readers(toolkit):
    from nvstage.hw.gpus import load_gpu_spec
    from nvstage.inspect.elf import read_cubin
    from nvstage.inspect.fatbin import inventory, kind_of_file, raw_images, read_bytes
    from nvstage.inspect.ptx import read_ptx
    from nvstage.model.costfile import load_cost, load_model_input
    from nvstage.run.workload import Workload

    w = Workload.from_dict({"kernel": {"ptx": str(CAPTURED / "params.sm_90.ptx")},
                            "launch": [{"kernel": "k", "grid": 1, "block": 1}]})
    return {
        "workload": Workload.from_toml,
        "model input": load_model_input,
        "cost file": lambda p: load_cost(p, w),
        "GPU spec": load_gpu_spec,
        "artifact kind": kind_of_file,
        "artifact bytes": read_bytes,
        "cubin": lambda p: read_cubin(read_bytes(p), str(p)),
        "fatbin images": raw_images,
        "inventory": lambda p: inventory(p, toolkit),
        "PTX": read_ptx,
    }


def test_no_reader_reads_a_fifo_or_device(specials, toolkit):
    for name, read in _readers(toolkit).items():
        for path in specials:
            assert outcome(read, path) is None, (name, path)


# -- TOML documents ---------------------------------------------------------------------------

def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) \
            else repr(v)
    if isinstance(v, str):
        return json.dumps(v)  # a TOML basic string reads JSON escapes the same way
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) \
            + "}"
    raise TypeError(type(v))


def to_toml(doc: dict) -> str:
    return "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in doc.items())


# Values that broke, or could break, a reader: huge and deep expressions, NaN and inf,
# integers past every width, absurd sizes, names that are not names.
HOSTILE_EXPR = st.sampled_from([
    "((10**4096)**4096)**4096", "+".join(["1"] * 100_000), "+".join(["1"] * 900),
    "-" * 3000 + "1", "(" * 150 + "1" + ")" * 150, "int(x)", "ceil(x)", "floor(y)",
    "1 << -1", "1 << 64 << 64 << 64 << 64 << 64 << 64 << 64 << 64 << 64", "(-8) ** 0.5",
    "(1,) * 10**9", "2**512", "9**9**9", "1e308 * 10", "cdiv(1, 0)", "min()", "n.__class__",
    "__import__('os')", "x if x else y", "n / 3", "n // 0", "2**31", "65536", "1025",
    "0", "-1", "n", "cdiv(n, 256)", "int(1e300)", "max(2**400, 2**500) * 4",
])
NUMBER = st.one_of(
    st.integers(-2**70, 2**70), st.integers(-10**4000, 10**4000).filter(lambda v: v > 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0, 1, 2**31, 65536]))
SCALAR = st.one_of(NUMBER, HOSTILE_EXPR, st.text(max_size=20), st.booleans())
NAME = st.one_of(st.sampled_from(["n", "x", "y", "a", "k", "np", "saxpy", "data"]),
                 st.text(max_size=8))
VALUE = st.recursive(SCALAR, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(NAME, inner, max_size=4)), max_leaves=12)


@st.composite
def workload_docs(draw):
    """Mostly well-formed workloads with hostile values, sometimes anything at all."""
    params = draw(st.dictionaries(st.sampled_from(["n", "x", "y", "m"]), SCALAR, max_size=4))
    dims = st.one_of(SCALAR, st.lists(SCALAR, min_size=1, max_size=4))
    doc = {
        "kernel": draw(st.sampled_from([
            {"ptx": str(CAPTURED / "params.sm_90.ptx")},
            {"cubin": "/dev/zero"}, {"ptx": "/nonexistent.ptx"},
            draw(st.dictionaries(NAME, VALUE, max_size=3))])),
        "params": params,
        "buffers": draw(st.dictionaries(st.sampled_from(["x", "y", "np"]), st.one_of(
            st.fixed_dictionaries({"dtype": st.sampled_from(["float32", "int32", "u8"]),
                                   "count": SCALAR}, optional={"init": VALUE}),
            VALUE), max_size=2)),
        "launch": draw(st.one_of(st.lists(st.one_of(
            st.fixed_dictionaries({"kernel": st.sampled_from(["k", "saxpy"]), "grid": dims,
                                   "block": dims},
                                  optional={"shared": SCALAR, "repeat": SCALAR,
                                            "args": st.lists(VALUE, max_size=3)}),
            VALUE), max_size=2), VALUE)),
        "run": draw(st.dictionaries(st.sampled_from(["reps", "warmup"]), SCALAR, max_size=2)),
    }
    if draw(st.booleans()):
        doc = {k: v for k, v in doc.items() if draw(st.booleans())}
    if draw(st.integers(0, 9)) == 0:
        doc[draw(NAME)] = draw(VALUE)
    return doc


def _evaluate(w):
    """What run --dry-run and model do with a parsed workload, short of compiling."""
    from nvstage.run.workload.dry_run import dry_run_plan
    from nvstage.run.workload.validate import validate

    validate(w, None)
    doc = dry_run_plan(w)
    json.dumps(doc, allow_nan=True)  # integers too large to print would raise here
    return doc


def _write(tmp: Path, name: str, data: str | bytes) -> Path:
    p = tmp / name
    p.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return p


@FUZZ
@given(doc=workload_docs())
def test_fuzz_workload(doc):
    from nvstage.run.workload import Workload

    with tempfile.TemporaryDirectory() as tmp:
        p = _write(Path(tmp), "w.toml", to_toml(doc))
        w = outcome(Workload.from_toml, p)
        if w is not None:
            outcome(_evaluate, w)


@FUZZ
@given(text=st.one_of(st.text(max_size=300), st.binary(max_size=300).map(
    lambda b: b.decode("latin-1")), st.sampled_from([
        "a = " + "[" * 5000, "a = " + "9" * 5000, "[kernel]\nptx = '/dev/zero'\n",
        "a = {" * 3000, "\x00", "[[launch]]\n" * 2000])))
def test_fuzz_workload_text(text):
    from nvstage.run.workload import Workload

    with tempfile.TemporaryDirectory() as tmp:
        outcome(Workload.from_toml, _write(Path(tmp), "w.toml", text))


@FUZZ
@given(cost=st.one_of(
    st.fixed_dictionaries({"launch": st.lists(st.fixed_dictionaries(
        {"kernel": st.sampled_from(["k", "x"]), "reads": st.one_of(
            st.lists(st.sampled_from(["x", "y", "z"]), max_size=2),
            st.dictionaries(st.sampled_from(["x", "y"]), SCALAR, max_size=2), VALUE),
         "writes": st.one_of(st.lists(st.sampled_from(["x", "y"]), max_size=2),
                             st.dictionaries(st.sampled_from(["x", "y"]), SCALAR, max_size=2)),
         "flops": SCALAR}), min_size=1, max_size=1)},
        optional={"host_memory": st.sampled_from(["pinned", "pageable", "x"])}),
    st.dictionaries(NAME, VALUE, max_size=3)), params=st.dictionaries(
        st.sampled_from(["n", "x", "y"]), SCALAR, max_size=3))
def test_fuzz_cost_file(cost, params):
    from nvstage.model.costfile import launch_counts, load_cost
    from nvstage.run.workload import Workload

    base = {"kernel": {"ptx": str(CAPTURED / "params.sm_90.ptx")}, "params": params,
            "buffers": {"x": {"dtype": "float32", "count": 1024},
                        "y": {"dtype": "float64", "count": "n"}},
            "launch": [{"kernel": "k", "grid": 1, "block": 1, "args": ["x", "y"]}]}
    w = outcome(Workload.from_dict, base)
    if w is None:
        return
    with tempfile.TemporaryDirectory() as tmp:
        spec = outcome(load_cost, _write(Path(tmp), "w.cost.toml", to_toml(cost)), w)
        if spec is not None:
            counts = outcome(launch_counts, w, spec)
            for c in counts or []:
                assert math.isfinite(c.flops) and c.bytes >= 0


GPU_FIELDS = ["name", "arch", "display_name", "notes", "sm_count", "memory_bytes", "pcie_gen",
              "pcie_width", "boost_clock_mhz", "base_clock_mhz", "memory_bandwidth",
              "fp32_flops", "bf16_flops", "base", "sources"]


@st.composite
def gpu_specs(draw):
    doc = {"base": "h100"} if draw(st.booleans()) else {
        "name": "g", "arch": draw(st.sampled_from(["sm_90", "sm_5", "90", "compute_90a",
                                                   "sm_999", ""])),
        "sm_count": 100, "memory_bandwidth": 1e12, "fp32_flops": 1e13}
    for k in draw(st.lists(st.one_of(st.sampled_from(GPU_FIELDS), NAME), max_size=4)):
        doc[k] = draw(st.one_of(NUMBER, SCALAR, VALUE, st.sampled_from([1e-300, 1e300])))
    return doc


def _use_spec(spec):
    """What model and occupancy do with a spec: its JSON, its link, the SVG scale."""
    from nvstage.report.bars import Bar, bars_svg

    doc = spec.to_json()
    json.dumps(doc, allow_nan=False)  # standard JSON: a non-finite figure raises here
    if spec.is_product and spec.memory_bandwidth and spec.pcie_bandwidth:
        t = 1 << 30
        bars_svg([Bar("w", {"kernel": t / spec.memory_bandwidth,
                            "transfer": t / spec.pcie_bandwidth})], title="t")


@FUZZ
@given(doc=gpu_specs(), fmt=st.sampled_from(["json", "toml"]))
def test_fuzz_gpu_spec(doc, fmt):
    from nvstage.hw.gpus import load_gpu_spec

    with tempfile.TemporaryDirectory() as tmp:
        text = json.dumps(doc) if fmt == "json" else to_toml(doc)
        spec = outcome(load_gpu_spec, _write(Path(tmp), f"g.{fmt}", text))
        if spec is not None:
            outcome(_use_spec, spec)


@FUZZ
@given(text=st.one_of(st.text(max_size=200), st.sampled_from([
    "[" * 100_000, '{"a": ' * 100_000, '{"sm_count": ' + "9" * 5000 + "}", "NaN",
    '{"base": "h100", "memory_bandwidth": Infinity}', '{"base": "h100", "sm_count": 1e400}'])),
    fmt=st.sampled_from(["json", "toml"]))
def test_fuzz_gpu_spec_text(text, fmt):
    from nvstage.hw.gpus import load_gpu_spec

    with tempfile.TemporaryDirectory() as tmp:
        outcome(load_gpu_spec, _write(Path(tmp), f"g.{fmt}", text))


RUN_NUMBER = st.one_of(NUMBER, st.text(max_size=4), st.none(), st.booleans(),
                      st.sampled_from([1 << 30, 1e-300, 10 ** 400, -5]))
SPREAD = st.one_of(st.fixed_dictionaries({"median": RUN_NUMBER}), VALUE)


@st.composite
def run_reports(draw):
    """Run documents (nvstage run --profile --json) with hostile figures."""
    op = st.one_of(st.fixed_dictionaries({
        "kind": st.sampled_from(["launch", "h2d", "d2h", "x"]), "name": NAME,
        "index": RUN_NUMBER, "bytes": RUN_NUMBER, "pinned": st.booleans(),
        "host_ns": SPREAD, "gpu_ns": SPREAD}), VALUE)
    return {"schema": "nvstage.run/1",
            "decomposition": {"operations": draw(st.lists(op, max_size=4)),
                              "noise_floor": draw(st.one_of(st.dictionaries(
                                  st.sampled_from(["empty_kernel_ns", "smallest_copy_ns"]),
                                  RUN_NUMBER), VALUE)),
                              **{f"{k}_ns": draw(SPREAD) for k in ("launch", "kernel", "wall")}},
            "workload": draw(st.one_of(VALUE, st.fixed_dictionaries({"file": st.one_of(
                NAME, st.just("/dev/zero"), st.just(str(CAPTURED / "params.sm_90.ptx")))}))),
            "device": draw(st.one_of(VALUE, st.fixed_dictionaries({"name": NAME})))}


@FUZZ
@given(doc=run_reports())
def test_fuzz_calibration_from_a_run_report(doc):
    # nvstage model --calibrate REPORT: every figure fitted is finite and positive.
    from nvstage.hw.gpus import lookup_gpu
    from nvstage.model.calibrate import calibrate

    with tempfile.TemporaryDirectory() as tmp:
        p = _write(Path(tmp), "run.json", json.dumps(doc))
        c = outcome(calibrate, p, lookup_gpu("h200"))
        if c is not None:
            for name in c.presets.names():
                v = getattr(c.presets, name)
                assert math.isfinite(v) and v >= 0, (name, v)
            json.dumps(c.to_json(), allow_nan=False)


# -- artifacts --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def samples(toolkit, tmp_path_factory):
    """A real cubin, a compressed and an uncompressed fatbin, and an object, from nvcc."""
    import subprocess

    d = tmp_path_factory.mktemp("samples")
    src = ROOT / "kernels" / "saxpy.cu"

    def nvcc(*args):
        cp = subprocess.run([toolkit.nvcc, *map(str, args)], cwd=d, capture_output=True,
                            text=True)
        assert cp.returncode == 0, cp.stderr

    nvcc("--cubin", "-arch=sm_90", src, "-o", "k.cubin")
    nvcc("--fatbin", "-gencode", "arch=compute_90,code=[sm_90,compute_90]", src, "-o",
         "k.fatbin")
    nvcc("--fatbin", "-arch=sm_90", "-Xfatbin", "-compress-all", src, "-o", "z.fatbin")
    nvcc("-c", "-arch=sm_90", src, "-o", "k.o")
    return {k: (d / f).read_bytes() for k, f in (("cubin", "k.cubin"), ("fatbin", "k.fatbin"),
                                                 ("zfatbin", "z.fatbin"), ("object", "k.o"))}


def mutations(max_edits: int = 8):
    """Edits to a real file: cuts, byte flips, 32-bit fields overwritten with extremes,
    insertions, and trailing zeros."""
    field = st.sampled_from([0, 1, 5, 0xFF, 0xFFFF, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000000])
    return st.tuples(
        st.one_of(st.none(), st.integers(0, 1 << 16)),
        st.lists(st.one_of(
            st.tuples(st.just("flip"), st.integers(0, 1 << 16), st.integers(1, 255)),
            st.tuples(st.just("u32"), st.integers(0, 1 << 16), field),
            st.tuples(st.just("u64"), st.integers(0, 1 << 16), st.sampled_from(
                [0, 1 << 40, (1 << 64) - 1, (1 << 63)])),
            st.tuples(st.just("insert"), st.integers(0, 1 << 16), st.binary(max_size=64))),
            max_size=max_edits),
        st.integers(0, 4096))


def apply(data: bytes, edit) -> bytes:
    cut, edits, pad = edit
    b = bytearray(data if cut is None else data[:cut])
    for kind, at, x in edits:
        if not b:
            break
        at %= len(b)
        if kind == "flip":
            b[at] ^= x
        elif kind == "u32" and at + 4 <= len(b):
            struct.pack_into("<I", b, at, x)
        elif kind == "u64" and at + 8 <= len(b):
            struct.pack_into("<Q", b, at, x)
        elif kind == "insert":
            b[at:at] = x
    return bytes(b) + b"\0" * pad


def _read_artifact(path, toolkit):
    """What show and occupancy read from a file: its kind, then the images or the cubin."""
    from nvstage.inspect.elf import read_cubin
    from nvstage.inspect.fatbin import inventory, kind_of_file, read_bytes

    kind = kind_of_file(path)
    if kind == "cubin":
        return read_cubin(read_bytes(path), str(path))
    if kind in ("fatbin", "object", "executable"):
        return inventory(path, toolkit)
    return kind


@settings(FUZZ, max_examples=examples(200))
@given(edit=mutations())
def test_fuzz_cubin(samples, tmp_path, toolkit, edit):
    from nvstage.inspect.elf import read_cubin

    data = apply(samples["cubin"], edit)
    outcome(read_cubin, data, "k.cubin")
    p = _write(tmp_path, "k.cubin", data)
    outcome(_read_artifact, p, toolkit)


@settings(FUZZ, max_examples=examples(60))  # a compressed image costs a cuobjdump run
@given(which=st.sampled_from(["fatbin", "zfatbin"]), edit=mutations())
def test_fuzz_fatbin(samples, tmp_path, toolkit, which, edit):
    from nvstage.inspect.fatbin import parse_fatbin

    data = apply(samples[which], edit)
    outcome(parse_fatbin, data, where="k.fatbin")
    outcome(_read_artifact, _write(tmp_path, "k.fatbin", data), toolkit)


@st.composite
def fatbin_containers(draw):
    """Containers built field by field: every header value, including nonsense."""
    images = b""
    for _ in range(draw(st.integers(0, 3))):
        payload = draw(st.binary(max_size=64))
        ehs = draw(st.sampled_from([64, 72, 0, 8, 1 << 20]))
        images += struct.pack(
            "<HHIQIIIIIIQQQ", draw(st.sampled_from([1, 2, 8, 0, 0xFFFF])), 0x101, ehs,
            draw(st.sampled_from([len(payload), 0, 1 << 40])), 0, 0,
            draw(st.integers(0, 0xFFFFFFFF)), draw(st.sampled_from([90, 80, 5, 0, 1000, 121])),
            0, 0, draw(st.sampled_from([0, 0x8000, 0x2000, 0x8011])), 0,
            draw(st.sampled_from([0, len(payload), 1 << 40]))) + b"\0" * max(0, ehs - 64) \
            if ehs <= 4096 else b""
        images += payload
    head = struct.pack("<IHHQ", 0xBA55ED50, 1, draw(st.sampled_from([16, 0, 8, 1 << 15])),
                       draw(st.sampled_from([len(images), 0, len(images) + 8, 1 << 62])))
    return (head + images) * draw(st.integers(1, 2)) + b"\0" * draw(st.integers(0, 64))


@settings(FUZZ, max_examples=examples(300))
@given(data=fatbin_containers())
def test_fuzz_fatbin_fields(data):
    from nvstage.inspect.fatbin import parse_fatbin

    images = outcome(parse_fatbin, data, where="k.fatbin")
    for im in images or []:
        assert im.kind in ("cubin", "ptx", "ltoir") or im.kind.startswith("kind-")
        if im.kind in ("cubin", "ptx", "ltoir"):
            assert 10 <= im.arch <= 999


@settings(FUZZ, max_examples=examples(60))
@given(edit=mutations())
def test_fuzz_object(samples, tmp_path, toolkit, edit):
    data = apply(samples["object"], edit)
    outcome(_read_artifact, _write(tmp_path, "k.o", data), toolkit)


def _fatbin_in_object(data: bytes) -> tuple[int, int]:
    from nvstage.inspect.fatbin import MAGIC

    at = data.find(struct.pack("<I", MAGIC))
    return at, struct.unpack_from("<Q", data, at + 8)[0] + 16


@settings(FUZZ, max_examples=examples(60))
@given(edit=mutations())
def test_fuzz_fatbin_inside_an_object(samples, tmp_path, toolkit, edit):
    # The edits land in the embedded fatbin, where the plain mutations above rarely reach.
    data = samples["object"]
    at, size = _fatbin_in_object(data)
    cut, edits, _ = edit
    inner = apply(data[at:at + size], (None, edits, 0))[:size].ljust(size, b"\0")
    outcome(_read_artifact, _write(tmp_path, "k.o", data[:at] + inner + data[at + size:]),
            toolkit)


PTX_TOKENS = st.sampled_from([
    ".version 9.5", ".version 8.0 ", ".target sm_90", ".target sm_90, texmode_independent",
    ".address_size 64", ".visible .entry k(", ".entry k", ".param .u64 p", ".param .align 8 "
    ".b8 s[16]", ".param .f32 .ptr x", ".param .bogus x", ".param .b7 x", ",", ")", "(", "{",
    "}", "/*", "*/", "//", "\n", " " * 50, "\t", ".maxntid 1024, 1, 1", "ret;", "\x00",
    ".align 3", "\n" * 40, "_Z4vaddPKfS0_Pfi", ".weak", ".extern", "9" * 5000,
    ".maxntid " + "9" * 5000, ".param .b" + "8" * 5000 + " x", ".param .b8 x[" + "9" * 40 + "]",
    ".address_size " + "6" * 5000])


@settings(FUZZ, max_examples=examples(300))
@given(text=st.one_of(st.lists(PTX_TOKENS, max_size=60).map(" ".join), st.text(max_size=300),
                      st.sampled_from(["\n" * 200_000, ".target " + " " * 200_000 + "!",
                                       "/*" * 100_000, ".entry a {\n" * 20_000])))
def test_fuzz_ptx(text, tmp_path):
    from nvstage.inspect.ptx import parse_ptx, read_ptx

    module = outcome(parse_ptx, text, demangle=False)
    if module is not None:
        assert all(p.size > 0 for e in module.entries for p in e.params)
    outcome(read_ptx, _write(tmp_path, "k.ptx", text))


@settings(FUZZ, max_examples=examples(100))
@given(edit=mutations())
def test_fuzz_real_ptx(tmp_path, edit):
    from nvstage.inspect.ptx import read_ptx

    data = apply((CAPTURED / "params.sm_90.ptx").read_bytes(), edit)
    outcome(read_ptx, _write(tmp_path, "k.ptx", data))
