#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;
__global__ void wmma_k(const half* a, const half* b, float* c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
__global__ void misc(const double* x, double* y, float* z, int n) {
  __shared__ float s[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  s[threadIdx.x] = z[i];
  __syncthreads();
  float v = __expf(s[255 - threadIdx.x]) + __shfl_down_sync(0xffffffff, z[i], 1);
  y[i] = x[i] * x[i] + 1.0;
  atomicAdd(z, v);
  half2 h = __floats2half2_rn(v, v);
  h = __hfma2(h, h, h);
  z[i + 1] = __low2float(h);
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
__global__ void wg(float* out, unsigned long long da, unsigned long long db) {
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile("wgmma.fence.sync.aligned;\n");
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(da), "l"(db), "r"(1));
  asm volatile("wgmma.commit_group.sync.aligned;\n");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n");
  out[threadIdx.x] = d0 + d1 + d2 + d3;
}
#endif
