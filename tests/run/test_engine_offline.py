"""The run engine end to end on a fake cuda.core (tests/run/fake_cuda.py): no GPU needed.

The fake keeps cuda.core 1.2.2's signatures (checked here against the installed package) and
its real argument packing, so these tests catch a wrong keyword, a scalar of the wrong width,
a copy in the wrong direction, and the fault and failure paths, before a GPU session.
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from nvstage.run.engine import Engine, Loaded, kernel_args
from nvstage.errors import GpuRunFailed
from nvstage.run.workload import Workload

from . import fake_cuda

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "run"


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.core", fake_cuda.module())
    return fake_cuda.reset()


_WORK: list[Path] = []  # this test's tmp_path (autouse fixture below)


@pytest.fixture(autouse=True)
def _work_folder(tmp_path):
    _WORK[:] = [tmp_path]
    yield
    _WORK.clear()


def _engine(name="vadd", mode="serialized", *, n=4096, kind="cubin", edit=None, **kw):
    text = (EXAMPLES / f"{name}.toml").read_text()
    text = text.replace('n = "1 << 24"', f"n = {n}")
    if edit:
        text = edit(text)
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="workload-", dir=_WORK[0]))
    (d / "k.cu").write_text("// not compiled: the fake GPU runs numpy kernels\n")
    text = text.replace("../../kernels/saxpy.cu", "k.cu").replace("../../kernels/vadd.cu",
                                                                    "k.cu")
    (d / f"{name}.toml").write_text(text)
    w = Workload.from_toml(d / f"{name}.toml")
    return Engine(w, Loaded(kind, b"IMAGE", {}, b"HELPERS"), mode=mode, arch="sm_90", **kw)


def test_fake_signatures_match_cuda_core():
    import cuda.core as real
    from cuda.core._memory._buffer import Buffer as RealBuffer

    pairs = [
        (fake_cuda.Device.allocate, real.Device.allocate),
        (fake_cuda.Device.create_stream, real.Device.create_stream),
        (fake_cuda.Device.set_current, real.Device.set_current),
        (fake_cuda.Stream.record, real.Stream.record),
        (fake_cuda.Stream.sync, real.Stream.sync),
        (fake_cuda.Event.sync, real.Event.sync),
        (fake_cuda.Buffer.copy_from, RealBuffer.copy_from),
        (fake_cuda.Buffer.copy_to, RealBuffer.copy_to),
        (fake_cuda.Buffer.fill, RealBuffer.fill),
        (fake_cuda.launch, real.launch),
        (fake_cuda.ObjectCode.from_cubin, real.ObjectCode.from_cubin),
        (fake_cuda.ObjectCode.from_fatbin, real.ObjectCode.from_fatbin),
        (fake_cuda.ObjectCode.from_ptx, real.ObjectCode.from_ptx),
        (fake_cuda.ObjectCode.get_kernel, real.ObjectCode.get_kernel),
        (fake_cuda.LegacyPinnedMemoryResource.allocate,
         real.LegacyPinnedMemoryResource.allocate),
    ]
    for fake, true in pairs:
        def shape(f):
            return [(p.name, p.kind) for p in inspect.signature(f).parameters.values()]

        assert shape(fake) == shape(true), true.__qualname__
    # The properties the engine reads exist on the real classes.
    for cls, attr in ((real.Kernel, "num_arguments"), (real.Kernel, "handle"),
                      (RealBuffer, "handle"), (RealBuffer, "size"), (real.Device, "properties"),
                      (real.Device, "compute_capability"), (real.Device, "pci_bus_id"),
                      (real.Device, "device_id")):
        assert hasattr(cls, attr), (cls, attr)
    assert "timing_enabled" in {f for f in real.EventOptions.__dataclass_fields__}


def test_kernel_args_pack_at_the_declared_width():
    """numpy scalars through cuda.core's own ParamHolder: 4-byte int, 4-byte float."""
    import ctypes

    from cuda.core._kernel_arg_handler import ParamHolder

    w = Workload.from_toml(EXAMPLES / "saxpy.toml")
    values = w.param_values()
    args = kernel_args(w, 0, values, {"x": "X", "y": "Y"})
    assert args[2:] == ("X", "Y")
    n, a = args[:2]
    assert (type(n), type(a)) == (np.int32, np.float32)
    holder = ParamHolder([n, a])
    p = (ctypes.c_void_p * 2).from_address(holder.ptr)
    assert ctypes.c_int32.from_address(p[0]).value == 1 << 24
    assert ctypes.c_float.from_address(p[1]).value == 2.5


@pytest.mark.parametrize("mode", ["serialized", "pipelined"])
def test_vadd_runs_checks_and_decomposes(gpu, mode):
    e = _engine("vadd", mode)
    e.setup()
    r = e.run(reps=3, warmup=1, timeline=True)
    assert r.status == "ok" and r.passed, [c.to_json() for c in r.checks]
    d = r.decomposition
    assert [o.kind for o in d.ops] == ["h2d", "h2d", "launch", "d2h"]
    assert len(d.reps) == 3 and d.total.median > 0 and d.wall.median > 0
    kernel = d.ops[2]
    assert kernel.gpu.median == pytest.approx(fake_cuda.KERNEL_NS + 10, rel=0.01)
    assert d.ops[0].bandwidth_gbs > 0 and d.ops[0].nbytes == 4096 * 4
    assert r.load["kind"] == "cubin" and r.load["seconds"] >= 0
    assert r.completed_ops == 3 * 4
    # the helpers ran once, released, before any timed hold
    names = [n for n, _ in gpu.launches]
    assert names[:2] == ["nvstage_empty", "nvstage_hold"]
    from nvstage.report.trace import chrome_trace

    doc = json.loads(json.dumps(chrome_trace(r.timeline, d)))
    assert sum(1 for ev in doc["traceEvents"] if ev["ph"] == "s") == 1


def test_scalars_reach_the_kernel_with_their_values(gpu):
    e = _engine("saxpy", "pipelined")
    e.setup()
    r = e.run(reps=2, warmup=0)
    assert r.passed, [c.to_json() for c in r.checks]
    cfg = [c for n, c in gpu.launches if n == "saxpy"][0]
    assert cfg.grid == (16, 1, 1) and cfg.block == (256, 1, 1) and cfg.shmem_size == 0


def test_a_python_float_would_be_caught(gpu, monkeypatch):
    """The fake refuses an 8-byte double where the kernel declares a 4-byte float."""
    import nvstage.run.engine as ex

    monkeypatch.setattr(ex, "kernel_args", lambda w, li, v, b: (4096, 2.5, b["x"], b["y"]))
    e = _engine("saxpy")
    e.setup()
    with pytest.raises(GpuRunFailed) as err:
        e.run(reps=1, warmup=0)
    assert "4 bytes declared, 8 packed" in err.value.message


def test_fault_names_the_kernel_and_keeps_what_ran(gpu):
    """saxpy told n is larger than its buffers: the fault surfaces at the next sync."""
    e = _engine("saxpy", edit=lambda t: t.replace('args = [{ i32 = "n" }',
                                                  'args = [{ i32 = 100000, counts = [] }'))
    e.setup()
    with pytest.raises(GpuRunFailed) as err:
        e.run(reps=2, warmup=0)
    assert "saxpy" in err.value.op and "ILLEGAL_ADDRESS" in err.value.message
    r = err.value.result
    assert r.status == "failed" and r.completed_ops >= 2  # the two copies in ran
    assert r.decomposition is not None and r.decomposition.floor.empty_kernel_ns


def test_a_launch_that_raises_releases_the_hold(gpu):
    gpu.fail_launch = "vadd"
    e = _engine("vadd")
    e.setup()
    with pytest.raises(GpuRunFailed) as err:
        e.run(reps=1, warmup=0)
    assert err.value.op == "kernel vadd (op 2)"
    assert e.flag[0] == 1  # released, not left spinning until its timeout


def test_failed_allocation_names_the_buffer(gpu):
    gpu.alloc_limit = 1000
    e = _engine("vadd")
    with pytest.raises(GpuRunFailed) as err:
        e.setup()
    assert err.value.op.startswith("allocating buffer a (16384 bytes)")
    assert "OUT_OF_MEMORY" in err.value.message


def test_unknown_symbol_and_wrong_count_from_the_loaded_module(gpu):
    e = _engine("vadd", edit=lambda t: t.replace('kernel = "vadd"', 'kernel = "vad"'))
    with pytest.raises(GpuRunFailed, match="cannot load kernel vad"):
        e.setup()
    from nvstage.errors import WorkloadError

    fake_cuda.GPU.kernels["vadd"].sizes = (8, 8, 8)
    with pytest.raises(WorkloadError, match="takes 3 argument"):
        _engine("vadd").setup()


def test_ptx_is_nul_terminated_and_timed_as_jit(gpu):
    e = _engine("vadd", kind="ptx")
    e.setup()
    kind, image, _ = gpu.loaded[-1]
    assert kind == "ptx" and image.endswith(b"\0")
    assert e.result.load["includes_ptx_jit"] is True


def test_large_dynamic_shared_memory_is_opted_in(gpu, monkeypatch):
    import cuda.bindings

    calls = []

    class FakeDriver:
        class CUfunction_attribute:
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8

        class CUresult:
            CUDA_SUCCESS = 0

        @staticmethod
        def CUdevice(i):
            return i

        @staticmethod
        def cuKernelSetAttribute(attr, val, kernel, dev):
            calls.append((attr, val, dev))
            return (0,)

    monkeypatch.setattr(cuda.bindings, "driver", FakeDriver, raising=False)
    e = _engine("vadd", edit=lambda t: t.replace("block = 256\n", "block = 256\nshared = "
                                                 "65536\n"))
    e.setup()
    assert calls == [(8, 65536, 0)]


def test_static_shared_memory_lowers_the_opt_in_threshold(gpu, monkeypatch):
    """40 KB static + 16 KB dynamic needs the opt-in although 16 KB < 48 KB."""
    import cuda.bindings

    calls = []
    drv = type("D", (), {
        "CUfunction_attribute": type("A", (), {
            "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES": 8}),
        "CUresult": type("R", (), {"CUDA_SUCCESS": 0}),
        "CUdevice": staticmethod(lambda i: i),
        "cuKernelSetAttribute": staticmethod(lambda a, v, k, d: calls.append(v) or (0,))})
    monkeypatch.setattr(cuda.bindings, "driver", drv, raising=False)
    gpu.kernels["vadd"].static_shared = 40 * 1024
    e = _engine("vadd", edit=lambda t: t.replace("block = 256\n", "block = 256\nshared = "
                                                 "16384\n"))
    e.setup()
    assert calls == [16384]


def test_a_scalar_width_the_loaded_kernel_disagrees_with_is_refused(gpu):
    from nvstage.errors import WorkloadError

    gpu.kernels["saxpy"].sizes = (4, 8, 8, 8)  # the module's saxpy takes a double
    with pytest.raises(WorkloadError) as err:
        _engine("saxpy").setup()
    assert ("kernel saxpy argument 1 is 8 bytes in the loaded module, the workload passes "
            "f32 (4 bytes)") in err.value.message


def test_an_image_the_driver_refuses_is_named_as_the_image(gpu):
    gpu.bad_image = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION: the provided PTX was compiled with " \
        "an unsupported toolchain"
    with pytest.raises(GpuRunFailed) as err:
        _engine("vadd", kind="ptx").setup()
    assert err.value.message.startswith("loading the ptx (5 bytes) failed")
    assert "load a cubin" in err.value.hint


def test_a_kernel_that_never_ends_is_given_up_not_waited_for(gpu, monkeypatch):
    import time

    monkeypatch.setenv("NVSTAGE_GPU_TIMEOUT_S", "0.2")
    e = _engine("vadd")
    e.setup()
    gpu.hang = True
    t0 = time.monotonic()
    with pytest.raises(GpuRunFailed) as err:
        e.run(reps=2, warmup=0)
    assert time.monotonic() - t0 < 5
    assert "did not finish within 0.2 s" in err.value.message
    assert err.value.context_lost and err.value.to_json()["context_lost"] is True
    assert "NVSTAGE_GPU_TIMEOUT_S" in err.value.hint
    assert err.value.result.status == "failed"


def test_holds_that_keep_expiring_are_given_up_with_a_note(gpu):
    def expiring_hold(params, cfg):  # writes flag[1] = 1, as the real one does on timeout
        fake_cuda._view(fake_cuda._ptr(params[0]), np.uint32, 2)[1] = 1

    gpu.kernels["nvstage_hold"].fn = expiring_hold
    e = _engine("vadd")
    e.setup()
    r = e.run(reps=2, warmup=0)
    assert r.passed and not e.use_hold
    assert any("hold kernel expired in 5 of 5 samples" in n for n in r.notes)


def test_profile_off_times_whole_passes(gpu):
    e = _engine("vadd")
    e.setup()
    r = e.run(reps=3, warmup=1, profile=False)
    assert r.passed and len(r.walls_ns) == 3 and r.decomposition is None
    assert r.completed_ops == 4 * 4


def test_cli_run_with_json_trace_and_svg(gpu, cli, tmp_path, monkeypatch):
    """The whole CLI path on the fake GPU: compile (real nvcc), validate, run, export."""
    _patch_driver(monkeypatch)
    j, t, s = tmp_path / "r.json", tmp_path / "t.json", tmp_path / "r.svg"
    r = cli("run", EXAMPLES / "saxpy.toml", "--profile", "--reps", "2", "--warmup", "0",
            "--json", j, "--trace", t, "--svg", s)
    assert r.exit_code == 0, r.output
    assert "check y: pass" in r.stdout and "overlap = T - wall" in r.stdout
    doc = json.loads(j.read_text())
    assert doc["status"] == "ok" and doc["device"]["sm_count"] == 132
    assert doc["decomposition"]["total_ns"]["median"] > 0
    assert json.loads(t.read_text())["traceEvents"]
    svg = s.read_text()
    assert svg.startswith("<svg") and "measured" in svg and "saxpy" in svg


def test_cli_fault_keeps_the_partial_report(gpu, cli, tmp_path, monkeypatch):
    _patch_driver(monkeypatch)
    src = (EXAMPLES / "saxpy.toml").read_text().replace(
        "../../kernels/saxpy.cu", str(ROOT / "kernels" / "saxpy.cu")).replace(
        'args = [{ i32 = "n" }', 'args = [{ i32 = 2000000000, counts = [] }').replace(
        'n = "1 << 24"', "n = 1024")
    wf = tmp_path / "fault.toml"
    wf.write_text(src)
    j = tmp_path / "r.json"
    r = cli("run", wf, "--profile", "--reps", "1", "--warmup", "0", "--json", j)
    assert r.exit_code == 8, r.output
    assert "Traceback" not in r.output and "saxpy" in r.stderr
    doc = json.loads(j.read_text())
    assert doc["status"] == "failed" and "saxpy" in doc["error"]["op"]
    assert doc["completed_ops"] >= 2


def test_trace_svg_and_cupti_need_profile(cli, tmp_path):
    for flag, extra in (("--trace", [tmp_path / "t.json"]), ("--svg", [tmp_path / "s.svg"]),
                        ("--cupti", [])):
        r = cli("run", EXAMPLES / "vadd.toml", flag, *extra)
        assert r.exit_code == 2 and f"{flag} needs --profile" in r.stderr, r.output


def _patch_driver(monkeypatch):
    from nvstage.run import helpers, probe as driver
    from nvstage.run.probe import DriverProbe

    p = DriverProbe(True, "fake driver", "13.0", 1, "sm_90")
    driver.probe.cache_clear()
    from nvstage.run import document, session

    # Each name where it is looked up: its module, and the modules that import it by name.
    monkeypatch.setattr(driver, "probe", lambda: p)
    monkeypatch.setattr(session, "probe", lambda: p)
    monkeypatch.setattr(document, "get_probe", lambda: p)
    monkeypatch.setattr(helpers, "helper_cubin", lambda arch, toolkit=None: b"HELPERS")
    monkeypatch.setattr(session, "helper_cubin", lambda arch, toolkit=None: b"HELPERS")
    monkeypatch.setattr("nvstage.run.devices.nvml_gpus", lambda: ([], None, "fake"))
    monkeypatch.setattr(session, "nvml_gpus", lambda: ([], None, "fake"))


def test_cli_gives_up_on_a_hung_kernel_after_writing_the_report(gpu, cli, tmp_path,
                                                                  monkeypatch):
    """The process must not wait for the hung work at exit: it ends through os._exit once
    the report is written (patched here, so pytest survives)."""
    import os

    _patch_driver(monkeypatch)
    monkeypatch.setenv("NVSTAGE_GPU_TIMEOUT_S", "0.2")
    exits = []

    def fake_exit(code):
        exits.append(code)
        raise SystemExit(code)

    monkeypatch.setattr(os, "_exit", fake_exit)
    real_launch = fake_cuda.launch

    def launch_then_hang(stream, config, kernel, *args):  # saxpy never ends
        real_launch(stream, config, kernel, *args)
        if kernel._d.name == "saxpy":
            fake_cuda.GPU.hang = True

    monkeypatch.setattr(sys.modules["cuda.core"], "launch", launch_then_hang)
    j = tmp_path / "r.json"
    r = cli("run", EXAMPLES / "saxpy.toml", "--profile", "--reps", "1", "--warmup", "0",
            "--json", j)
    assert exits == [8] and r.exit_code == 8
    assert "did not finish within 0.2 s" in r.stderr and "Traceback" not in r.output
    doc = json.loads(j.read_text())
    assert doc["status"] == "failed" and doc["error"]["context_lost"] is True
    # A report that cannot be written must not keep the process from ending either.
    fake_cuda.reset()
    exits.clear()
    r = cli("run", EXAMPLES / "saxpy.toml", "--profile", "--reps", "1", "--warmup", "0",
            "--json", tmp_path)
    assert exits == [8] and "did not finish" in r.stderr and "Traceback" not in r.output


def test_measured_wall_passes_wait_with_a_plain_sync(gpu, monkeypatch):
    """Only the first pass over the ops polls an extra event (bounded); the measured passes
    after it synchronise plainly, so the serialized wall time carries no polling."""
    polled = []
    real_record = fake_cuda.Stream.record

    def record(self, event=None, options=None):
        if options is None:  # _wait's untimed event
            polled.append(1)
        return real_record(self, event, options)

    monkeypatch.setattr(fake_cuda.Stream, "record", record)
    counts = []
    for reps in (2, 6):
        e = _engine("vadd")
        e.setup()
        polled.clear()
        e.run(reps=reps, warmup=1, profile=False)
        counts.append(len(polled))
    assert counts[0] == counts[1] == 1 + 4  # before the first pass, then after each op


def test_packed_launch_passes_each_argument_at_its_width(monkeypatch):
    # The packed path (real cuda.core only) without a driver: cuLaunchKernel replaced by a
    # reader of the argument array it is handed.
    import ctypes

    import numpy as np
    from cuda.bindings import driver as cu

    from nvstage.run.engine import packed_launch

    seen = {}

    def fake_launch(fn, gx, gy, gz, bx, by, bz, shared, stream, argp, extra):
        ptrs = (ctypes.c_uint64 * 3).from_address(argp)
        seen.update(fn=int(fn), stream=int(stream), grid=(gx, gy, gz), block=(bx, by, bz),
                    shared=shared, buf=ctypes.c_uint64.from_address(ptrs[0]).value,
                    n=ctypes.c_int32.from_address(ptrs[1]).value,
                    a=ctypes.c_float.from_address(ptrs[2]).value)
        return (cu.CUresult.CUDA_SUCCESS,)

    monkeypatch.setattr(cu, "cuLaunchKernel", fake_launch)

    class H:
        def __init__(self, h):
            self.handle = h

    issue = packed_launch(H(0x20), 4, (8, 2), 128, H(0x10),
                          (H(0x1234), np.int32(7), np.float32(2.5)))
    issue()
    assert seen == {"fn": 0x10, "stream": 0x20, "grid": (4, 1, 1), "block": (8, 2, 1),
                    "shared": 128, "buf": 0x1234, "n": 7, "a": 2.5}
