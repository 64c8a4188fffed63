// A tiled matrix product with an 8x8 accumulator array per thread, written for nvstage's
// tests in the shape of llm.c's dev/cuda/matmul_forward.cu kernel 4 (karpathy/llm.c, MIT):
// each thread keeps float acc[8][8] live across the loop over the shared tiles.
__device__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }

__device__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

__global__ void __launch_bounds__(16 * 16) matmul_acc(float* out, const float* a,
                                                      const float* b, const float* bias,
                                                      int k_dim, int n_dim) {
  int col = 8 * (blockIdx.y * blockDim.y + threadIdx.y);
  __shared__ float a_tile[128][32];
  __shared__ float b_tile[128][32];
  a += 128 * blockIdx.x * k_dim;
  b += 128 * blockIdx.y * k_dim;
  out += 128 * blockIdx.x * n_dim + 128 * blockIdx.y;

  float acc[8][8] = {};
  if (bias != nullptr) {
    for (int i = 0; i < 8; i++) {
      for (int j = 0; j < 8; j += 4) {
        float4 v = load4(bias + col + j);
        acc[i][j + 0] = v.x;
        acc[i][j + 1] = v.y;
        acc[i][j + 2] = v.z;
        acc[i][j + 3] = v.w;
      }
    }
  }

  int k_start = 4 * (16 * threadIdx.y + threadIdx.x);
  for (int ko = 0; ko < k_dim; ko += 32) {
    __syncthreads();
    int x_mod8 = threadIdx.x % 8;
    int x_by8 = threadIdx.x / 8;
    int xo = 4 * x_mod8;
    for (int y = 2 * threadIdx.y + x_by8; y < 128; y += 32) {
      store4(&a_tile[y][xo], load4(a + y * k_dim + ko + xo));
      store4(&b_tile[y][xo], load4(b + y * k_dim + ko + xo));
    }
    __syncthreads();

    for (int k = k_start; k < k_start + 32; k += 4) {
      float4 rhs[8];
      for (int u = 0; u < 8; ++u) {
        rhs[u] = load4(&b_tile[u + 8 * threadIdx.y][k % 32]);
      }
      for (int ii = 0; ii < 8; ++ii) {
        float4 lhs = load4(&a_tile[ii + 8 * threadIdx.x][k % 32]);
        for (int ji = 0; ji < 8; ++ji) {
          acc[ii][ji] += lhs.x * rhs[ji].x;
          acc[ii][ji] += lhs.y * rhs[ji].y;
          acc[ii][ji] += lhs.z * rhs[ji].z;
          acc[ii][ji] += lhs.w * rhs[ji].w;
        }
      }
    }
  }

  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; j += 4) {
      float4 result;
      result.x = acc[i][j + 0];
      result.y = acc[i][j + 1];
      result.z = acc[i][j + 2];
      result.w = acc[i][j + 3];
      store4(out + (8 * threadIdx.x + i) * n_dim + 8 * threadIdx.y + j, result);
    }
  }
}
