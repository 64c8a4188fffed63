// Kernels that spill in their own code and in the subroutines ptxas places after it in the
// same .text section: fp64 division, float division's slow path, 64-bit integer division and
// remainder, and a device function kept out of line. ptxas -v counts a kernel's own code only
// (a named device function gets its own "Function properties" line; the toolkit's internal
// routines get none). Written for nvstage's tests; online_max_sum is in the shape of llm.c's
// dev/cuda/softmax_forward.cu softmax_forward_online_kernel1 (karpathy/llm.c, MIT): a running
// max with a double sum, then a division by it.
#include <math.h>

__global__ void online_max_sum(float* y, const float* x, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* in = x + r * cols;
  float* out = y + r * cols;
  float running_max = -INFINITY;
  double total = 0.0;
  for (int c = 0; c < cols; ++c) {
    float before = running_max;
    float v = in[c];
    if (v > running_max) {
      running_max = v;
      total = total * expf(before - running_max) + expf(v - running_max);
    } else {
      total += expf(v - running_max);
    }
  }
  for (int c = 0; c < cols; ++c) out[c] = expf(in[c] - running_max) / total;
}

__global__ void fp64_ratios(const double* a, const double* b, double* out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  double acc[12];
#pragma unroll
  for (int k = 0; k < 12; ++k) acc[k] = a[(t + k * 33) % n];
  for (int it = 0; it < n; ++it) {
#pragma unroll
    for (int k = 0; k < 12; ++k) acc[k] = acc[k] / (b[(it + k) % n] + acc[(k + 5) % 12]);
  }
  double s = 0;
#pragma unroll
  for (int k = 0; k < 12; ++k) s += acc[k] * k;
  out[t] = s;
}

__global__ void fp32_ratios(const float* a, const float* b, float* out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  float acc[24];
#pragma unroll
  for (int k = 0; k < 24; ++k) acc[k] = a[(t + k * 33) % n];
  for (int it = 0; it < n; ++it) {
#pragma unroll
    for (int k = 0; k < 24; ++k) acc[k] = acc[k] / (b[(it + k) % n] + acc[(k + 5) % 24]);
  }
  float s = 0;
#pragma unroll
  for (int k = 0; k < 24; ++k) s += acc[k] * k;
  out[t] = s;
}

__global__ void int64_ratios(const long long* a, const long long* b, long long* out, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  long long acc[12];
#pragma unroll
  for (int k = 0; k < 12; ++k) acc[k] = a[(t + k * 33) % n];
  for (int it = 0; it < n; ++it) {
#pragma unroll
    for (int k = 0; k < 12; ++k)
      acc[k] = acc[k] / (b[(it + k) % n] | 1) + acc[(k + 5) % 12] % (b[it % n] | 3);
  }
  long long s = 0;
#pragma unroll
  for (int k = 0; k < 12; ++k) s += acc[k] * k;
  out[t] = s;
}

__device__ __noinline__ float4 out_of_line(const float4* p, int n) {
  float4 a[16];
#pragma unroll
  for (int k = 0; k < 16; ++k) a[k] = p[k * n];
  float4 s = make_float4(0, 0, 0, 0);
  for (int it = 0; it < n; ++it) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      s.x += a[k].x * a[(k + 1) % 16].y;
      s.y += a[k].z;
      s.z += a[k].w * s.x;
      s.w += a[(k + 3) % 16].x * s.y;
      a[k].x += s.w;
    }
  }
  return s;
}

__global__ void calls_out_of_line(const float4* p, float4* out, int n) {
  out[threadIdx.x] = out_of_line(p, n);
}

// Spills of its own, in vector widths (STL.64, STL.128), and no subroutine.
__global__ void tile8x8(float* out, const float* a, const float* b, int k_dim, int n_dim) {
  int col = 8 * (blockIdx.y * blockDim.y + threadIdx.y);
  float acc[8][8] = {};
  for (int k = 0; k < k_dim; k += 4) {
    float4 lhs[8], rhs[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) {
      lhs[u] = *(const float4*)(a + (threadIdx.x * 8 + u) * k_dim + k);
      rhs[u] = *(const float4*)(b + (col + u) * k_dim + k);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j)
        acc[i][j] += lhs[i].x * rhs[j].x + lhs[i].y * rhs[j].y + lhs[i].z * rhs[j].z
                     + lhs[i].w * rhs[j].w;
  }
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; j += 4)
      *(float4*)(out + (threadIdx.x * 8 + i) * n_dim + col + j) =
          make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
}
