// An elementwise chain y = gelu(a * x + b), three ways:
//  - unfused: scale, add_bias, gelu_act: three kernels, two intermediate buffers (t1, t2)
//    written to and read back from global memory;
//  - fused: one kernel, one load of x and b, one store of y, no intermediates;
//  - fused_wide: also one kernel, but each thread loads WIDE elements before computing any
//    of them. All WIDE inputs (and their biases) are live at once, which raises the register
//    count and so lowers the theoretical occupancy: fewer kernels is not automatically faster.
// GELU in its tanh form (Hendrycks & Gimpel), as numpy can check it with np.tanh.

#ifndef WIDE
#define WIDE 32
#endif

__device__ __forceinline__ float gelu(float v) {
  const float k0 = 0.7978845608f;  // sqrt(2 / pi)
  const float k1 = 0.044715f;
  return 0.5f * v * (1.0f + tanhf(k0 * (v + k1 * v * v * v)));
}

__global__ void scale(const float* __restrict__ x, float* __restrict__ t1, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) t1[i] = a * x[i];
}

__global__ void add_bias(const float* __restrict__ t1, const float* __restrict__ b,
                         float* __restrict__ t2, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) t2[i] = t1[i] + b[i];
}

__global__ void gelu_act(const float* __restrict__ t2, float* __restrict__ y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = gelu(t2[i]);
}

__global__ void fused(const float* __restrict__ x, const float* __restrict__ b,
                      float* __restrict__ y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = gelu(a * x[i] + b[i]);
}

// Each thread handles WIDE elements strided by blockDim.x (coalesced), loading all of them
// first: 2 * WIDE values stay live across the loads, then the math runs on registers.
__global__ void fused_wide(const float* __restrict__ x, const float* __restrict__ b,
                           float* __restrict__ y, float a, int n) {
  int base = blockIdx.x * blockDim.x * WIDE + threadIdx.x;
  float xv[WIDE], bv[WIDE];
#pragma unroll
  for (int k = 0; k < WIDE; ++k) {
    int i = base + k * blockDim.x;
    xv[k] = i < n ? x[i] : 0.0f;
    bv[k] = i < n ? b[i] : 0.0f;
  }
#pragma unroll
  for (int k = 0; k < WIDE; ++k) {
    int i = base + k * blockDim.x;
    if (i < n) y[i] = gelu(a * xv[k] + bv[k]);
  }
}
