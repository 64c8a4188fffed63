// Sum of n floats in two launches: reduce_partial leaves one sum per block (grid-stride loop,
// then a shared-memory tree), reduce_final sums those partials in one block.
// Block size is fixed at 256 (the shared array and the tree assume it).

__global__ void reduce_partial(const float* __restrict__ in, float* __restrict__ partial, int n) {
  __shared__ float tile[256];
  float acc = 0.0f;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
    acc += in[i];
  tile[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = tile[0];
}

__global__ void reduce_final(const float* __restrict__ partial, float* __restrict__ out, int m) {
  __shared__ float tile[256];
  float acc = 0.0f;
  for (int i = threadIdx.x; i < m; i += blockDim.x) acc += partial[i];
  tile[threadIdx.x] = acc;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) tile[threadIdx.x] += tile[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[0] = tile[0];
}
