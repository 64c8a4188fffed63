// C = A * B for row-major float matrices (A: m x k, B: k x n), 32 x 32 tiles staged through
// static shared memory: each element of A and B is read from global memory k / 32 times
// fewer than in the naive kernel. Launch with block (32, 32) and grid (n / 32, m / 32).
#define TILE 32

__global__ void matmul_tiled(const float* __restrict__ A, const float* __restrict__ B,
                             float* __restrict__ C, int m, int n, int k) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];  // +1: no bank conflicts on the column reads
  int row = blockIdx.y * TILE + threadIdx.y;
  int col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.0f;
  for (int t = 0; t < k; t += TILE) {
    As[threadIdx.y][threadIdx.x] = (row < m && t + threadIdx.x < k) ? A[row * k + t + threadIdx.x] : 0.0f;
    Bs[threadIdx.y][threadIdx.x] = (col < n && t + threadIdx.y < k) ? B[(t + threadIdx.y) * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < TILE; ++j) acc += As[threadIdx.y][j] * Bs[j][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) C[row * n + col] = acc;
}
