"""Workloads naming kept Triton builds (examples/triton/): read, validated against the
builds' own parameter lists, dry-run, modelled and compared offline, and run end to end on
the fake cuda.core with Triton's launch convention (block num_warps x 32, two null scratch
pointers after the workload's arguments). The real GPU run is in tests/gpu/."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from nvstage.errors import ValidationError, WorkloadError
from nvstage.run.workload import Workload

from . import fake_cuda

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "triton"


@pytest.fixture
def chain(triton_chain, tmp_path) -> Path:
    """examples/triton/ with its build/ folder made: the workloads, cost files and keep
    folders (copied: a keep folder moved with its files still reads)."""
    for f in EXAMPLES.glob("chain_*.toml"):
        shutil.copy(f, tmp_path)
    for kernel, keep in triton_chain.items():
        shutil.copytree(keep, tmp_path / "build" / f"{kernel}.triton")
    return tmp_path


def _small(folder: Path, name: str, edit=lambda t: t) -> Path:
    """The example workload, edited, with n = 5000, as FOLDER/NAME.toml."""
    p = folder / f"{name}.toml"
    p.write_text(edit((EXAMPLES / f"{name}.toml").read_text().replace('n = "1 << 24"',
                                                                      "n = 5000")))
    return p


def test_launch_shape_comes_from_the_build(chain):
    w = Workload.from_toml(chain / "chain_unfused.toml")
    assert w.code.kind == "triton" and [k.name for k in w.code.triton] == \
        ["scale", "add_bias", "gelu_act"]
    for i, k in enumerate(w.code.triton):
        d = w.dims(i)
        assert d["block"] == (128,) == (k.threads,) and d["shared"] == k.shared == 0
        assert d["grid"] == ((1 << 24) // 1024,)


def test_dry_run_and_validation(cli, chain):
    r = cli("run", chain / "chain_fused.toml", "--dry-run")
    assert r.exit_code == 0, r.stderr
    assert "launch fused grid=(16384,) block=(128,) shared=0" in r.stdout
    r = cli("run", chain / "chain_unfused.toml", "--dry-run", "--json", "-")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["arch"] == "sm_90a"  # no GPU: the builds' own arch


@pytest.mark.parametrize("edit,said", [
    (lambda t: t.replace('args = ["x", "b", "y", { f32 = "a" }, { i32 = "n" }]',
                         'args = ["x", "b", "y", { i32 = "n" }]'),
     "takes 5 argument(s), the workload passes 4"),
    (lambda t: t.replace('{ f32 = "a" }', '{ i32 = "n" }', 1), "is a floating-point"),
    (lambda t: t.replace('dtype = "float32"\ncount = "n"\ninit = { random = { seed = 12',
                         'dtype = "int32"\ncount = "n"\ninit = { random = { seed = 12'),
     "points to float, but buffer b is int32"),
])
def test_arguments_checked_against_the_build(chain, edit, said):
    from nvstage.run.prepare import load_and_validate

    with pytest.raises(ValidationError) as e:
        load_and_validate(_small(chain, "chain_fused", edit), "sm_90")
    assert said in str(e.value)


@pytest.mark.parametrize("edit,said", [
    (lambda t: t.replace('grid = "cdiv(n, 1024)"', 'grid = "cdiv(n, 1024)"\nblock = 256'),
     "Triton launches fused with 128 threads"),
    (lambda t: t.replace('grid = "cdiv(n, 1024)"', 'grid = "cdiv(n, 1024)"\nshared = 64'),
     "with 0 bytes of dynamic shared memory"),
    (lambda t: t.replace('"build/fused.triton"', '"build/none.triton"'), "no such keep folder"),
    (lambda t: t.replace('triton = "build/fused.triton"',
                         'triton = "build/fused.triton"\nsource = "x.cu"'),
     "kept Triton builds are the whole code"),
    (lambda t: t.replace('kernel = "fused"', 'kernel = "fused2"'),
     "no Triton kernel named 'fused2'"),
])
def test_workload_errors(chain, edit, said):
    with pytest.raises(WorkloadError) as e:
        Workload.from_toml(_small(chain, "chain_fused", edit))
    assert said in str(e.value)


def test_not_a_triton_build(chain, toolkit, kernels):
    import nvstage
    from nvstage.compiler.nvcc.options import CompileOptions

    nvstage.compile(kernels / "saxpy.cu", CompileOptions(archs=("sm_90",), stop="cubin",
                                                         output=str(chain / "s.cubin")),
                    toolkit=toolkit, keep=chain / "build" / "saxpy.nvstage", cwd=chain)
    with pytest.raises(WorkloadError) as e:
        Workload.from_toml(_small(chain, "chain_fused", lambda t: t.replace(
            "build/fused.triton", "build/saxpy.nvstage")))
    assert "a build through nvcc, not Triton" in str(e.value)
    (chain / "build" / "link.triton").symlink_to(chain / "build" / "fused.triton")
    with pytest.raises(WorkloadError) as e:
        Workload.from_toml(_small(chain, "chain_fused", lambda t: t.replace(
            "build/fused.triton", "build/link.triton")))
    assert "not a keep folder (a folder, not a link)" in str(e.value)


def test_another_arch_is_refused(cli, chain):
    r = cli("run", chain / "chain_fused.toml", "--dry-run", "--arch", "sm_80")
    assert r.exit_code == 2
    assert "built for sm_90a, which does not run on sm_80" in r.stderr


def test_model_and_compare_offline(cli, chain):
    r = cli("model", chain / "chain_fused.toml", "--gpu", "h200", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    (launch,) = doc["per_launch"]
    assert launch["resources"]["block_size"] == 128 and launch["resources"]["registers"] > 0
    r = cli("compare", chain / "chain_unfused.toml", chain / "chain_fused.toml", "--gpu",
            "h200")
    assert r.exit_code == 0, r.stderr
    assert "fused" in r.stdout


def _gelu(v):
    return 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v ** 3)))


def _elementwise(name, fn, n_buffers):
    """A fake Triton kernel: its buffers, then (a,) n, then Triton's two scratch pointers,
    which must be null."""
    def run(p, cfg):
        assert cfg.block == (128, 1, 1), cfg.block  # num_warps 4 x 32
        assert fake_cuda._ptr(p[-1]) == 0 and fake_cuda._ptr(p[-2]) == 0
        n = fake_cuda._i32(p[-3])
        views = [fake_cuda._view(fake_cuda._ptr(x), np.float32, n) for x in p[:n_buffers]]
        scalars = [fake_cuda._f32(x) for x in p[n_buffers:-3]]
        fn(views, scalars)
    sizes = (8,) * n_buffers + (4,) * (1 + (name in ("scale", "fused"))) + (8, 8)
    return fake_cuda.FakeKernelDef(name, sizes, run)


@pytest.mark.parametrize("name", ["chain_fused", "chain_unfused"])
def test_runs_on_the_fake_gpu_with_triton_s_convention(chain, monkeypatch, name):
    from nvstage.run.engine import Engine, Loaded
    from nvstage.run.prepare import prepare

    monkeypatch.setitem(sys.modules, "cuda.core", fake_cuda.module())
    gpu = fake_cuda.reset()
    defs = {
        "scale": (lambda v, s: v[1].__setitem__(slice(None), np.float32(s[0]) * v[0]), 2),
        "add_bias": (lambda v, s: v[2].__setitem__(slice(None), v[0] + v[1]), 3),
        "gelu_act": (lambda v, s: v[1].__setitem__(slice(None), _gelu(v[0])), 2),
        "fused": (lambda v, s: v[2].__setitem__(
            slice(None), _gelu(np.float32(s[0]) * v[0] + v[1])), 3),
    }
    for kernel, (fn, nb) in defs.items():
        gpu.kernels[kernel] = _elementwise(kernel, fn, nb)
    w = Workload.from_toml(_small(chain, name))
    prep = prepare(w, "sm_90")
    e = Engine(w, Loaded(prep.kind, prep.image, prep.mangled(), b"HELPERS", prep.modules,
                         prep.extra_args), mode="serialized", arch="sm_90")
    e.setup()
    r = e.run(reps=2, warmup=0)
    assert r.status == "ok" and r.passed, [c.to_json() for c in r.checks]
    cubins = [img for kind, img, _ in gpu.loaded if kind == "cubin" and img != b"HELPERS"]
    assert len(cubins) == len(w.code.triton)  # one module per kept build
    assert cubins[0] == (Path(w.code.triton[0].folder) / f"{w.code.triton[0].name}.cubin"
                         ).read_bytes()
