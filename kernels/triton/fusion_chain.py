"""The elementwise chain y = gelu(a * x + b) of kernels/fusion_chain.cu, written in Triton:
unfused (scale, add_bias, gelu_act: three kernels, two intermediate buffers) and fused (one
kernel). Same names, parameters and GELU (its tanh form) as the CUDA file, so a kept Triton
build and an nvcc build of the same operation can be set side by side:

    nvstage compile kernels/triton/fusion_chain.py --via triton --kernel fused \\
        --signature 'x:*fp32,b:*fp32,y:*fp32,a:fp32,n:i32' --constexpr BLOCK=1024 \\
        --arch sm_90 --keep-dir fused.triton

Each program (block) handles BLOCK elements; with Triton's default num_warps (4) that is
128 threads, each holding BLOCK / 128 elements.
"""

import triton
import triton.language as tl
from triton.language.extra import libdevice


@triton.jit
def gelu(v):
    k0 = 0.7978845608  # sqrt(2 / pi)
    k1 = 0.044715
    return 0.5 * v * (1.0 + libdevice.tanh(k0 * (v + k1 * v * v * v)))


@triton.jit
def scale(x, t1, a, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    tl.store(t1 + i, a * tl.load(x + i, mask=inside), mask=inside)


@triton.jit
def add_bias(t1, b, t2, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    tl.store(t2 + i, tl.load(t1 + i, mask=inside) + tl.load(b + i, mask=inside), mask=inside)


@triton.jit
def gelu_act(t2, y, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    tl.store(y + i, gelu(tl.load(t2 + i, mask=inside)), mask=inside)


@triton.jit
def fused(x, b, y, a, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    v = a * tl.load(x + i, mask=inside) + tl.load(b + i, mask=inside)
    tl.store(y + i, gelu(v), mask=inside)
