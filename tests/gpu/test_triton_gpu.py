"""On a GPU: the Triton chain's workloads (examples/triton/, from the chain's kept builds)
launch Triton's cubins with Triton's convention and pass their checks, unfused and fused.

Skipped with the probe's reason where there is no GPU (tests/conftest.py), and where Triton
is not installed (the builds need it)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "triton"


@pytest.fixture(scope="module")
def chain(triton_kit, toolkit, tmp_path_factory):
    """examples/triton/ with build/ made for GPU 0's arch."""
    from nvstage.run.devices import nvml_gpus

    gpus, _, _ = nvml_gpus()
    arch = (gpus[0].arch if gpus else "sm_90").rstrip("af")
    root = tmp_path_factory.mktemp("triton-gpu")
    for f in EXAMPLES.glob("chain_*.toml"):
        shutil.copy(f, root)
    triton_kit.build_chain(root / "build", toolkit, arch=arch)
    return root


@pytest.mark.parametrize("name", ["chain_unfused", "chain_fused"])
@pytest.mark.parametrize("mode", ["serialized", "pipelined"])
def test_triton_chain_runs_and_passes_its_check(chain, name, mode):
    from nvstage.run.session import open_session

    s = open_session(chain / f"{name}.toml", mode=mode, reps=3, warmup=1)
    r = s.run()
    s.raise_for_status()
    assert r.status == "ok" and r.checks and all(c.ok for c in r.checks)
    launches = [op for op in r.decomposition.ops if op.kind == "launch"]
    assert len(launches) == (3 if name == "chain_unfused" else 1)
    assert all(op.gpu.median > 0 for op in launches)


def test_triton_chain_cli_profile(cli, chain, tmp_path):
    out = tmp_path / "fused.json"
    r = cli("run", chain / "chain_fused.toml", "--profile", "--json", out)
    assert r.exit_code == 0, r.stderr
    assert out.is_file()
