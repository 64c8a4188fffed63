"""diff across compilers: the bundled chain's kept Triton builds beside its nvcc build, kernel
by kernel (paired by name), with occupancy at each launch block and the SASS mix."""

from __future__ import annotations

import json

import pytest

from nvstage.inspect.build_diff import diff_builds


@pytest.fixture(scope="module")
def chain_nvcc(toolkit, kernels, tmp_path_factory):
    """kernels/fusion_chain.cu as nvstage compiles it for sm_90, kept."""
    import nvstage
    from nvstage.compiler.nvcc.options import CompileOptions

    root = tmp_path_factory.mktemp("chain-nvcc")
    nvstage.compile(kernels / "fusion_chain.cu",
                    CompileOptions(archs=("sm_90",), stop="cubin",
                                   output=str(root / "chain.cubin")),
                    toolkit=toolkit, keep=root / "chain.nvstage", cwd=root)
    return root / "chain.nvstage"


@pytest.mark.parametrize("kernel", ["scale", "add_bias", "gelu_act", "fused"])
def test_each_chain_kernel_pairs_with_nvcc_s(chain_nvcc, triton_chain, toolkit, kernel):
    from nvstage.compiler.manifest.model import load_build
    from nvstage.inspect.resources import build_resources

    d = diff_builds(chain_nvcc, triton_chain[kernel], toolkit, block=256)
    both = [r for r in d.kernels if r.a and r.b]
    assert len(both) == 1
    row = both[0]
    assert row.key.startswith(f"{kernel}(") and row.key.endswith("(sm_90)")
    assert row.b_key == f"{kernel} (sm_90a)"
    # B's figures are the Triton build's own: registers from its cubin, its launch block.
    trit = load_build(triton_chain[kernel])
    assert row.b["registers"] == build_resources(trit, toolkit)[0].registers
    assert row.b["block"] == trit.triton.threads == 128 and row.a["block"] == 256
    assert row.a["occupancy"] is not None and row.b["occupancy"] is not None
    mix = {m: v for m, v in row.b.items() if m.startswith("mix.")}
    assert sum(mix.values()) == row.b["instructions"]
    assert set(mix) == {m for m in row.a if m.startswith("mix.")}  # 0 where one lacks it
    doc = d.to_json()
    assert doc["kernels"][[r.key for r in d.kernels].index(row.key)]["b_key"] == row.b_key


def test_without_block_the_nvcc_occupancy_is_unknown(chain_nvcc, triton_chain, toolkit):
    d = diff_builds(chain_nvcc, triton_chain["fused"], toolkit)
    row = next(r for r in d.kernels if r.a and r.b)
    assert row.a["occupancy"] is None and row.b["occupancy"] is not None
    assert any("give --block N" in n for n in d.notes)


def test_two_nvcc_builds_stay_as_they_were(chain_nvcc, toolkit):
    d = diff_builds(chain_nvcc, chain_nvcc, toolkit)
    assert all("occupancy" not in r.a and r.b_key is None for r in d.kernels)
    assert "b_key" not in json.dumps(d.to_json())


def test_diff_cli_across(cli, chain_nvcc, triton_chain):
    r = cli("diff", chain_nvcc, triton_chain["fused"], "--block", "256")
    assert r.exit_code == 0, r.stderr
    assert "fused (sm_90) ~ fused (sm_90a)" in r.stdout
    assert "SASS mix" in r.stdout and "occupancy" in r.stdout
    assert "4 kernel(s) built on one side only are not shown" in r.stdout
    r = cli("diff", chain_nvcc, triton_chain["fused"], "--block", "2048")
    assert r.exit_code == 2 and "1 to 1024" in r.stderr
