"""--via triton reads the kernel from the module's AST and never runs the module's own
top-level code: a module in the shape of Triton's fused-softmax tutorial (torch imported, the
driver asked at import time, benchmarks at the bottom) compiles with no torch and no GPU."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from nvstage.errors import UsageError

SOFTMAX = Path(__file__).parents[2] / "data" / "triton" / "fused_softmax.py"
SIG = ("output_ptr:*fp32,input_ptr:*fp32,input_row_stride:i32,output_row_stride:i32,"
       "n_rows:i32,n_cols:i32")


def test_torch_is_not_installed():
    # The point of the tests below: keep it so.
    assert importlib.util.find_spec("torch") is None


def test_reads_what_the_kernel_needs_only():
    from nvstage.compiler.triton.triton_source import extract

    ex = extract(SOFTMAX, "softmax_kernel")
    kept = ex.text
    assert "import triton.language as tl" in kept and "import triton\n" in kept
    assert "torch" not in kept.replace("torch_device", "") and "DEVICE" not in kept
    assert "raise SystemExit" not in kept and "def is_hip" not in kept
    # Every kept line at its own line number: Triton reads the text and lines from the file.
    lines, original = kept.splitlines(), SOFTMAX.read_text().splitlines()
    assert len(lines) == len(original)
    assert all(a == b for a, b in zip(lines, original) if a)


def test_a_name_only_running_the_module_gives_is_one_line():
    from nvstage.compiler.triton.triton_source import extract

    with pytest.raises(UsageError) as e:
        extract(SOFTMAX, "uses_the_device")
    assert e.value.message.startswith("uses_the_device needs its module run: uses_the_device "
                                      "uses 'DEVICE', which fused_softmax.py computes at line")
    with pytest.raises(UsageError) as e:
        extract(SOFTMAX, "softmax")
    assert "its Triton kernels: softmax_kernel, uses_the_device" in e.value.hint


def test_helpers_and_constants_come_along(tmp_path):
    from nvstage.compiler.triton.triton_source import extract

    src = tmp_path / "k.py"
    src.write_text("import os\nimport triton\nimport triton.language as tl\n"
                   "SCALE = tl.constexpr(2)\nTWICE = SCALE * 2\nUNUSED = os.getcwd()\n\n"
                   "@triton.jit\ndef helper(v):\n    return v * TWICE\n\n"
                   "@triton.autotune(configs=[], key=[])\n@triton.jit\n"
                   "def k(x):\n    tl.store(x, helper(tl.load(x)))\n")
    ex = extract(src, "k")
    assert ex.helpers == ("helper",)
    assert "TWICE = SCALE * 2" in ex.text and "SCALE = tl.constexpr(2)" in ex.text
    assert "os" not in ex.text and "autotune" not in ex.text


def test_one_import_of_two_names_keeps_only_the_needed_one(triton_kit, toolkit, tmp_path):
    """`import torch, triton` keeps `import triton`; a sibling module still imports (as
    `python FILE` would find it); `from __future__` stays."""
    from nvstage.compiler.triton.stages import TritonOptions, compile_triton, parse_signature
    from nvstage.compiler.triton.triton_source import extract

    (tmp_path / "sibling.py").write_text(
        "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
        "def twice(v):\n    return v * 2\n")
    src = tmp_path / "k.py"
    src.write_text("from __future__ import annotations\nimport torch, triton\n"
                   "import triton.language as tl\nfrom sibling import twice\n\n"
                   "@triton.jit\ndef k(x):\n    tl.store(x, twice(tl.load(x)))\n")
    text = extract(src, "k").text
    assert text.splitlines()[:4] == ["from __future__ import annotations", "import triton",
                                     "import triton.language as tl", "from sibling import twice"]
    build = compile_triton(src, TritonOptions("k", parse_signature("x:*fp32"), arch="sm_80"),
                           toolkit=toolkit)
    assert build.status == "ok"


@pytest.fixture(scope="module")
def softmax(triton_kit, toolkit, tmp_path_factory):
    """softmax_kernel kept for sm_90 (BLOCK_SIZE 1024, num_stages 4 as --num-stages)."""
    from nvstage.compiler.triton.stages import TritonOptions, compile_triton, parse_signature

    keep = tmp_path_factory.mktemp("softmax") / "keep"
    build = compile_triton(SOFTMAX, TritonOptions(
        "softmax_kernel", parse_signature(SIG), (("BLOCK_SIZE", 1024),), arch="sm_90",
        num_stages=4), toolkit=toolkit, keep=keep)
    return build, keep


def test_the_tutorial_compiles_without_torch(softmax):
    build, keep = softmax
    assert build.status == "ok" and (keep / "softmax_kernel.cubin").is_file()
    info = build.triton
    # --num-stages reached the kernel's constexpr of that name too, as Triton's launch does.
    assert dict(info.constexprs) == {"BLOCK_SIZE": 1024, "num_stages": 4}
    assert info.num_stages == 4


def test_ptx_is_triton_compile_s(triton_kit, toolkit, tmp_path):
    """What triton.compile returns for the kernel copied alone, at the same path (the PTX's
    line table holds it) with the module's other lines blank (so every line number holds),
    is the kept PTX byte for byte."""
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from nvstage.compiler.triton.stages import TritonOptions, compile_triton, parse_signature
    from nvstage.compiler.triton.triton_source import extract

    path = tmp_path / "fused_softmax.py"
    path.write_text(SOFTMAX.read_text())
    compile_triton(path, TritonOptions("softmax_kernel", parse_signature(SIG),
                                       (("BLOCK_SIZE", 1024),), arch="sm_90", num_stages=4),
                   toolkit=toolkit, keep=tmp_path / "keep")
    path.write_text(extract(SOFTMAX, "softmax_kernel").text + "\n")  # the kernel alone
    spec = importlib.util.spec_from_file_location("_softmax_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sig = dict(part.split(":") for part in SIG.split(","))
    with knobs.cache.scope():
        knobs.cache.dir = str(tmp_path / "cache")
        src = ASTSource(module.softmax_kernel,
                        signature={**sig, "BLOCK_SIZE": "constexpr", "num_stages": "constexpr"},
                        constexprs={"BLOCK_SIZE": 1024, "num_stages": 4})
        ref = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_stages": 4})
    assert (tmp_path / "keep" / "softmax_kernel.ptx").read_text() == ref.asm["ptx"]


def test_option_and_constexpr_disagree(triton_kit, toolkit):
    from nvstage.compiler.triton.stages import TritonOptions, compile_triton, parse_signature

    with pytest.raises(UsageError) as e:
        compile_triton(SOFTMAX, TritonOptions(
            "softmax_kernel", parse_signature(SIG), (("BLOCK_SIZE", 1024), ("num_stages", 2)),
            arch="sm_90", num_stages=4), toolkit=toolkit)
    assert e.value.message == "--constexpr num_stages=2 and --num-stages 4 disagree"


def test_cli_compiles_the_tutorial(cli, triton_kit, tmp_path):
    r = cli("compile", SOFTMAX, "--via", "triton", "--kernel", "softmax_kernel", "--signature",
            SIG, "--constexpr", "BLOCK_SIZE=1024", "--constexpr", "num_stages=3", "--arch",
            "sm_80", "-o", tmp_path / "softmax.cubin", "--json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["triton"]["num_stages"] == 3 and (tmp_path / "softmax.cubin").is_file()
    assert "top-level code ran" not in r.output
    r = cli("compile", SOFTMAX, "--via", "triton", "--kernel", "uses_the_device",
            "--signature", "x:*fp32")
    assert r.exit_code != 0 and "needs its module run" in r.stderr
    assert "Traceback" not in r.output
