"""Kept Triton builds are one module each: every kernel of a Triton workload is estimated from
its own module's SASS (issue 46: the first build's alone was read, and the other kernels got
a false "no SASS" note and no latency or issue bounds)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "triton"


def test_every_triton_kernel_has_its_code(cli, triton_chain, tmp_path):
    for f in EXAMPLES.glob("chain_*.toml"):
        shutil.copy(f, tmp_path)
    for kernel, keep in triton_chain.items():
        shutil.copytree(keep, tmp_path / "build" / f"{kernel}.triton")
    r = cli("model", tmp_path / "chain_unfused.toml", "--gpu", "h200", "--json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(r.stdout)
    launches = doc["per_launch"]
    assert [x["kernel"] for x in launches] == ["scale", "add_bias", "gelu_act"]
    assert all(x["code"] is not None for x in launches)
    assert not [n for n in doc["notes"] if "no SASS" in n]
    for x in launches:
        names = {b["name"] for b in x["bounds"]["bounds"]}
        assert {"memory latency", "instruction issue"} <= names, x["kernel"]
    r = cli("compare", tmp_path / "chain_unfused.toml", tmp_path / "chain_fused.toml",
            "--gpu", "h200")
    assert r.exit_code == 0, r.stderr
    assert "no SASS" not in r.stdout
