#include "common.h"

__global__ void block_sum(const float* x, float* out, int n) {
  __shared__ float s[CUPROJECT_BLOCK];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = i < n ? x[i] : 0.0f;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = s[0];
}

int reduce_block() { return CUPROJECT_BLOCK; }
