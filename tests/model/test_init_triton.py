"""nvstage model --init for a Triton kernel (issue 46: "For a Triton file it uses the real-code
issue's reader (no import of the module) and needs --signature or a kept .triton build"): the
file is read, never run; the workload names a kept build; filled in, it is estimated."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOFTMAX = ROOT / "tests" / "data" / "triton" / "fused_softmax.py"
SIGNATURE = ("output_ptr:*fp32,input_ptr:*fp32,input_row_stride:i32,output_row_stride:i32,"
             "n_rows:i32,n_cols:i32")
RAN = "the module's top-level code ran"  # what the file says if anything runs it


def _fill(path: Path, values: dict[str, str]) -> None:
    """Each ``KEY = "FILL"`` (a [params] entry, or the count of [buffers.KEY]) set."""
    text = path.read_text()
    for key, v in values.items():
        text, n = re.subn(rf'(?m)^{key} = "FILL"', f"{key} = {v}", text)
        if not n:
            text, n = re.subn(rf'(\[buffers\.{key}\]\n[^\n]*\ncount = )"FILL"', rf"\g<1>{v}",
                              text)
        assert n == 1, key
    path.write_text(text)


def test_init_a_triton_file_build_fill_in_and_estimate(cli, triton_kit, tmp_path, monkeypatch):
    """Triton's fused-softmax tutorial's shape (torch imported and the driver asked at import
    time, then top-level code): read without running it, built with the command it writes."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(SOFTMAX, tmp_path / "softmax.py")
    r = cli("model", "--init", "softmax.py")
    assert r.exit_code == 2 and "defines 2 Triton kernels: name one with --kernel" in r.stderr
    assert "softmax_kernel, uses_the_device" in r.stderr
    r = cli("model", "--init", "softmax.py", "--kernel", "softmax_kernel")
    assert r.exit_code == 2
    assert r.stderr.splitlines()[0] == (
        "error: softmax.py: model --init needs the Triton type of each of softmax_kernel's "
        "parameters output_ptr, input_ptr, input_row_stride, output_row_stride, n_rows, n_cols"
        ": pass --signature, or name a kept build (nvstage model --init DIR.triton)")
    r = cli("model", "--init", "softmax.py", "--kernel", "softmax_kernel", "--signature",
            SIGNATURE.replace(",n_cols:i32", ""))
    assert r.exit_code == 2 and "gives no type for softmax_kernel's parameter n_cols" in r.stderr
    r = cli("model", "--init", "softmax.py", "--kernel", "softmax_kernel", "--signature",
            SIGNATURE, "--constexpr", "BLOCK_SIZE=1024", "--constexpr", "num_stages=4", "-o",
            "sm")
    assert r.exit_code == 0, r.stderr
    assert RAN not in r.stdout + r.stderr
    assert not (tmp_path / "sm.triton").exists()  # nothing built: the file was only read
    w = tomllib.loads((tmp_path / "sm.toml").read_text())
    assert w["kernel"] == {"triton": "sm.triton"}
    assert w["params"] == {"input_row_stride": "FILL", "output_row_stride": "FILL",
                           "n_rows": "FILL", "n_cols": "FILL", "BLOCK_SIZE": 1024,
                           "num_stages": 4}
    assert {n: b["dtype"] for n, b in w["buffers"].items()} == {"output_ptr": "float32",
                                                                 "input_ptr": "float32"}
    # stored through output_ptrs = output_row_start_ptr + ..., loaded through input_ptrs
    assert w["transfer"] == {"to_device": ["input_ptr"], "from_device": ["output_ptr"]}
    (launch,) = w["launch"]
    assert "block" not in launch  # the build's
    assert launch["args"][:2] == ["output_ptr", "input_ptr"]
    assert launch["args"][2] == {"i32": "input_row_stride", "counts": []}
    cost = tomllib.loads((tmp_path / "sm.cost.toml").read_text())
    assert cost["launch"][0] == {"kernel": "softmax_kernel", "reads": ["input_ptr"],
                                 "writes": ["output_ptr"], "flops": "FILL"}
    # the build the workload names, by the command --init wrote (in the workload, and said)
    (said,) = [line for line in r.stderr.splitlines() if line.startswith("then build")]
    command = said.split(": ", 1)[1]
    assert f"#   {command}\n" in (tmp_path / "sm.toml").read_text()
    argv = shlex.split(command)
    assert argv[:2] == ["nvstage", "compile"] and argv[-2:] == ["--keep-dir", "sm.triton"]
    r = cli(*argv[1:])
    assert r.exit_code == 0, r.stderr
    assert RAN not in r.stdout + r.stderr
    # not filled in: the error names the key
    r = cli("model", "sm.toml", "--gpu", "h100")
    assert r.exit_code != 0 and "cannot evaluate 'FILL'" in r.stderr
    _fill(tmp_path / "sm.toml", {"n_rows": "4096", "n_cols": "781",
                                 "input_row_stride": "781",
                                 "output_row_stride": "781",
                                 "output_ptr": '"n_rows * n_cols"',
                                 "input_ptr": '"n_rows * n_cols"'})
    text = (tmp_path / "sm.toml").read_text().replace('grid = "FILL"', "grid = 264")
    (tmp_path / "sm.toml").write_text(text)
    c = (tmp_path / "sm.cost.toml").read_text().replace('flops = "FILL"',
                                                        'flops = "5 * n_rows * n_cols"')
    (tmp_path / "sm.cost.toml").write_text(c)
    r = cli("run", "sm.toml", "--dry-run")
    assert r.exit_code == 0, r.stderr
    r = cli("model", "sm.toml", "--gpu", "h100", "--json")
    assert r.exit_code == 0, r.stderr
    (x,) = json.loads(r.stdout)["per_launch"]
    assert x["kernel"] == "softmax_kernel" and x["t_kernel_s"] > 0
    # its tl.range over rows is a grid-stride loop: 4096 rows over 264 programs, 16 for the
    # first (LLVM's PTX comments its labels: "$L__BB0_2:  // =>This Inner Loop Header")
    (loop,) = x["code"]["loops"]
    assert (loop["trips"], loop["expression"]) == (16, "cdiv(n_rows - blockIdx.x, gridDim.x)")
    # two reads of 4096 x 781 floats at least: never below the memory's physics
    assert x["t_kernel_s"] >= 2 * 4096 * 781 * 4 / 3.35e12


def test_init_from_a_kept_build_is_the_bundled_workload(cli, triton_chain, tmp_path,
                                                        monkeypatch):
    """From a kept build (its manifest: types, constexpr values, the source for loads and
    stores), filled in as examples/triton/chain_fused.toml is: the same estimate."""
    monkeypatch.chdir(tmp_path)
    shutil.copytree(triton_chain["fused"], tmp_path / "build" / "fused.triton")
    r = cli("model", "--init", "build/fused.triton", "--signature", "x:*fp32")
    assert r.exit_code == 2 and "is a kept build: its signature and constexprs" in r.stderr
    r = cli("model", "--init", "build/fused.triton", "-o", "mine")
    assert r.exit_code == 0, r.stderr
    assert "then build" not in r.stderr  # built already
    w = tomllib.loads((tmp_path / "mine.toml").read_text())
    assert w["kernel"] == {"triton": "build/fused.triton"}
    assert w["params"] == {"a": 1.0, "n": "FILL", "BLOCK": 1024}  # the constexpr as built
    assert w["transfer"] == {"to_device": ["x", "b"], "from_device": ["y"]}
    assert w["launch"][0]["args"] == ["x", "b", "y", {"f32": "a"},
                                      {"i32": "n", "counts": []}]
    _fill(tmp_path / "mine.toml", {"n": '"1 << 24"', "x": '"n"', "b": '"n"', "y": '"n"'})
    text = (tmp_path / "mine.toml").read_text().replace('grid = "FILL"',
                                                         'grid = "cdiv(n, BLOCK)"')
    (tmp_path / "mine.toml").write_text(text)
    c = (tmp_path / "mine.cost.toml").read_text().replace('flops = "FILL"', 'flops = "10 * n"')
    (tmp_path / "mine.cost.toml").write_text(c)
    for f in ("chain_fused.toml", "chain_fused.cost.toml"):
        shutil.copy(ROOT / "examples" / "triton" / f, tmp_path)
    mine = cli("model", "mine.toml", "--gpu", "h200", "--json")
    assert mine.exit_code == 0, mine.stderr
    bundled = cli("model", "chain_fused.toml", "--gpu", "h200", "--json")
    assert bundled.exit_code == 0, bundled.stderr
    a, b = json.loads(mine.stdout), json.loads(bundled.stdout)
    assert a["kernel_s"] == b["kernel_s"] and a["transfer_s"] == b["transfer_s"]


def test_init_keeps_nvcc_words_and_triton_words_apart(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(SOFTMAX, tmp_path / "softmax.py")
    r = cli("model", "--init", "softmax.py", "--kernel", "softmax_kernel", "--signature",
            SIGNATURE, "--flag=--use_fast_math")
    assert r.exit_code == 2 and "-I and --flag are nvcc's" in r.stderr
    (tmp_path / "k.cu").write_text("__global__ void k(float* y) { y[0] = 1; }\n")
    r = cli("model", "--init", "k.cu", "--signature", "y:*fp32")
    assert r.exit_code == 2 and "--signature and --constexpr are for a Triton file" in r.stderr
    assert not list(tmp_path.glob("*.toml"))


def test_init_an_autotuned_kernel_says_what_the_build_needs(cli, tmp_path, monkeypatch):
    """The matmul tutorial's shape (@triton.autotune over configs a function returns, a
    constexpr with no default): the build command leaves the constexpr to fill in and the
    workload says the tuner's options are the build's to give; an atomic reads and writes."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mm.py").write_text(
        "import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "def configs():\n    return [triton.Config({'BLOCK': 64}, num_warps=8)]\n\n\n"
        "@triton.autotune(configs=configs(), key=['M'])\n@triton.jit\n"
        "def hist(counts_ptr, idx_ptr, M, BLOCK: tl.constexpr):\n"
        "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    bins = tl.load(idx_ptr + i, mask=i < M)\n"
        "    tl.atomic_add(counts_ptr + bins, 1, mask=i < M)\n\n\n"
        f"raise SystemExit({RAN!r})\n")
    r = cli("model", "--init", "mm.py", "--signature", "counts_ptr:*i32,idx_ptr:*i32,M:i32")
    assert r.exit_code == 0, r.stderr
    text = (tmp_path / "hist.toml").read_text()
    assert "--constexpr BLOCK=FILL --arch sm_90 --keep-dir hist.triton" in text
    assert "# hist is under @triton.autotune, which the build leaves out" in text
    w = tomllib.loads(text)
    assert w["params"] == {"M": "FILL", "BLOCK": "FILL"}
    assert w["transfer"] == {"to_device": ["counts_ptr", "idx_ptr"],
                             "from_device": ["counts_ptr"]}
    assert w["buffers"]["counts_ptr"]["dtype"] == "int32"
    # the GPU named: its arch is the build's
    r = cli("model", "--init", "mm.py", "--signature", "counts_ptr:*i32,idx_ptr:*i32,M:i32",
            "--gpu", "a100", "-o", "on_a100")
    assert r.exit_code == 0, r.stderr
    assert "--arch sm_80 --keep-dir on_a100.triton" in (tmp_path / "on_a100.toml").read_text()
