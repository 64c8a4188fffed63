"""nvstage model --init FILE.cu: a workload and a cost file to fill in, from the kernel's own
declaration (issue 46: a workload cost 25 minutes and 80 lines for layernorm)."""

from __future__ import annotations

import json
import re
import shutil
import tomllib
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"


def test_init_fill_in_and_estimate(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(DATA / "layernorm_rows.cu", tmp_path / "layernorm.cu")
    r = cli("model", "--init", "layernorm.cu")
    assert r.exit_code == 0, r.stderr
    assert "wrote layernorm.toml" in r.stderr and "wrote layernorm.cost.toml" in r.stderr
    w = tomllib.loads((tmp_path / "layernorm.toml").read_text())
    assert w["kernel"]["source"] == "layernorm.cu"
    assert w["params"] == {"N": "FILL", "C": "FILL"}  # the source's names
    assert list(w["buffers"]) == ["out", "mean", "rstd", "inp", "weight", "bias"]
    assert {b["dtype"] for b in w["buffers"].values()} == {"float32"}
    assert w["transfer"] == {"to_device": ["inp", "weight", "bias"],
                             "from_device": ["out", "mean", "rstd"]}  # const or not
    (launch,) = w["launch"]
    assert launch["args"][-2:] == [{"i32": "N", "counts": []}, {"i32": "C", "counts": []}]
    cost = tomllib.loads((tmp_path / "layernorm.cost.toml").read_text())
    assert cost["launch"][0]["reads"] == ["inp", "weight", "bias"]
    # not filled in: the error names the key
    r = cli("model", "layernorm.toml", "--gpu", "h100")
    assert r.exit_code != 0 and "[params] N: cannot evaluate 'FILL'" in r.stderr
    # filled in as a user would: sizes, launch, FLOPs
    text = (tmp_path / "layernorm.toml").read_text()
    text = text.replace('N = "FILL"', "N = 8192").replace('C = "FILL"', "C = 768")
    for name, count in (("out", "N * C"), ("mean", "N"), ("rstd", "N"), ("inp", "N * C"),
                        ("weight", "C"), ("bias", "C")):
        text = re.sub(rf'(\[buffers\.{name}\]\n[^\n]*\ncount = )"FILL"', rf'\1"{count}"', text)
    text = text.replace('grid = "FILL"', 'grid = "N / 256"').replace('block = "FILL"',
                                                                      "block = 256")
    (tmp_path / "layernorm.toml").write_text(text)
    c = (tmp_path / "layernorm.cost.toml").read_text().replace('flops = "FILL"',
                                                              'flops = "7 * N * C"')
    (tmp_path / "layernorm.cost.toml").write_text(c)
    r = cli("model", "layernorm.toml", "--gpu", "h100", "--json")
    assert r.exit_code == 0, r.stderr
    (x,) = json.loads(r.stdout)["per_launch"]
    assert [lp["trips"] for lp in x["code"]["loops"]] == [48, 0, 0] * 3  # 768 = 48 x 16
    # never over an existing file
    r = cli("model", "--init", "layernorm.cu")
    assert r.exit_code != 0 and "layernorm.toml exists" in r.stderr


def test_init_asks_which_kernel(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = tmp_path / "two.cu"
    src.write_text("__global__ void a(float* x, int n) { x[0] = n; }\n"
                   "__global__ void b(const double* __restrict__ y, float* z) { z[0] = y[0]; }\n")
    r = cli("model", "--init", "two.cu")
    assert r.exit_code != 0 and "defines 2 kernels: name one with --kernel" in r.stderr
    r = cli("model", "--init", "two.cu", "--kernel", "b", "-o", "bee")
    assert r.exit_code == 0, r.stderr
    w = tomllib.loads((tmp_path / "bee.toml").read_text())
    assert w["buffers"]["y"]["dtype"] == "float64" and w["launch"][0]["kernel"] == "b"


def test_init_takes_include_folders_and_flags(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "scale.h").write_text("#define SCALE 2.0f\n")
    (tmp_path / "k.cu").write_text('#include <scale.h>\n'
                                   "__global__ void k(float* y, const float* x, long n) "
                                   "{ y[0] = SCALE * x[n]; }\n")
    r = cli("model", "--init", "k.cu")
    assert r.exit_code != 0 and "scale.h: No such file" in r.stderr
    # its temporary keep folder is not offered: a command that keeps one is
    assert "nvstage compile k.cu --arch sm_90 --ptx --keep-dir DIR" in r.stderr.split("hint:")[-1]
    r = cli("model", "--init", "k.cu", "-I", "inc", "--flag=--use_fast_math")
    assert r.exit_code == 0, r.stderr
    w = tomllib.loads((tmp_path / "k.toml").read_text())
    assert w["kernel"]["include_dirs"] == ["inc"] and w["kernel"]["flags"] == ["--use_fast_math"]
    assert w["launch"][0]["args"] == ["y", "x", {"i64": "n", "counts": []}]
    r = cli("model", "--init", "k.cu", "-o", "other", "--flag=-ccbin=/bin/sh")
    assert r.exit_code != 0 and "is not a flag a workload may give nvcc" in r.stderr
