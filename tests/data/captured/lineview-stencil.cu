// A test kernel for the source <-> SASS view: a loop (branch labels), shared memory and a
// barrier, a device function inlined through another (two levels), and one long line.
__device__ __forceinline__ float smooth(float a, float b, float c) {
  return 0.25f * a + 0.5f * b + 0.25f * c;
}

__device__ __forceinline__ float clamp01(float v) {
  float s = smooth(v, v * v, v * v * v);
  return fminf(fmaxf(s, 0.0f), 1.0f);
}

__global__ void stencil(const float* __restrict__ in, float* __restrict__ out, int n, int steps) {
  __shared__ float tile[256 + 2];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int t = threadIdx.x + 1;
  tile[t] = i < n ? in[i] : 0.0f;
  if (threadIdx.x == 0) tile[0] = i > 0 && i - 1 < n ? in[i - 1] : 0.0f;
  if (threadIdx.x == blockDim.x - 1) tile[t + 1] = i + 1 < n ? in[i + 1] : 0.0f;
  __syncthreads();
  float acc = 0.0f;
  for (int s = 0; s < steps; ++s) {
    float v = clamp01(tile[t - 1] * 0.3f + tile[t] * 0.4f + tile[t + 1] * 0.3f + acc * 0.001f + (float)s * 0.0001f);
    acc += v;
  }
  if (i < n) out[i] = acc;
}
