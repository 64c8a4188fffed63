// Device-only kernels for the runtime path (NVRTC has no host code and no C++ standard
// library, so multi.cu's <cstdint> and vadd.cu's main() cannot go through it).
// scale<T> is a template: nvcc compiles the explicit instantiations below; NVRTC compiles
// whatever the name expressions ask for (--name-expr 'scale<float>').
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
