// Several kernels in one file: a device function, a template with two instantiations,
// a kernel using static shared memory and one that uses a __constant__ table.
#include <cstdint>

__constant__ float kCoeffs[16];

__device__ __forceinline__ float poly(float x) {
  float acc = 0.0f;
#pragma unroll
  for (int k = 15; k >= 0; --k) acc = acc * x + kCoeffs[k];
  return acc;
}

__global__ void apply_poly(const float* in, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = poly(in[i]);
}

template <typename T>
__global__ void scale(T* data, T factor, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) data[i] *= factor;
}
template __global__ void scale<float>(float*, float, int);
template __global__ void scale<double>(double*, double, int);

// Block-wide sum with static shared memory; one partial sum per block.
__global__ void block_sum(const float* in, float* partial, int n) {
  __shared__ float tile[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = tile[0];
}

extern "C" __global__ void histogram(const uint8_t* in, unsigned* bins, int n) {
  __shared__ unsigned local[256];
  for (int b = threadIdx.x; b < 256; b += blockDim.x) local[b] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    atomicAdd(&local[in[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += blockDim.x) atomicAdd(&bins[b], local[b]);
}
