"""Triton builds the tests share: the bundled chain (kernels/triton/fusion_chain.py) and the
tests' own kernel (tests/data/triton/rms_rows.py), compiled through ``--via triton``'s
library call. Loaded by path from conftest.py (the tests run in importlib mode)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHAIN = ROOT / "kernels" / "triton" / "fusion_chain.py"
RMS = ROOT / "tests" / "data" / "triton" / "rms_rows.py"
# The chain's kernels, each with its parameters' types: those of kernels/fusion_chain.cu.
CHAIN_SIGNATURES = {
    "scale": "x:*fp32,t1:*fp32,a:fp32,n:i32",
    "add_bias": "t1:*fp32,b:*fp32,t2:*fp32,n:i32",
    "gelu_act": "t2:*fp32,y:*fp32,n:i32",
    "fused": "x:*fp32,b:*fp32,y:*fp32,a:fp32,n:i32",
}
RMS_SIGNATURE = "x:*fp32,y:*fp32,cols:i32,eps:fp32"


def chain_options(kernel: str, arch: str = "sm_90"):
    from nvstage.compiler.triton.stages import TritonOptions, parse_signature

    return TritonOptions(kernel, parse_signature(CHAIN_SIGNATURES[kernel]),
                         (("BLOCK", 1024),), arch=arch)


def rms_options(arch: str, **kw):
    from nvstage.compiler.triton.stages import TritonOptions, parse_signature

    return TritonOptions("rms_rows", parse_signature(RMS_SIGNATURE), (("COLS", 2048),),
                         arch=arch, num_warps=8, **kw)


def build_chain(folder: Path, toolkit, arch: str = "sm_90") -> dict[str, Path]:
    """Each chain kernel kept in FOLDER/KERNEL.triton; returns kernel -> keep folder."""
    from nvstage.compiler.triton.stages import compile_triton

    out = {}
    for kernel in CHAIN_SIGNATURES:
        keep = folder / f"{kernel}.triton"
        compile_triton(CHAIN, chain_options(kernel, arch), toolkit=toolkit, keep=keep)
        out[kernel] = keep
    return out
