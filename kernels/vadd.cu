// Vector add with a host main: the bundled "whole program" for `nvstage compile`.
// Without a GPU the program says so and exits 2, so its behaviour is comparable anywhere.
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void vadd(const float* __restrict__ a, const float* __restrict__ b,
                     float* __restrict__ c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 1 << 20;
  int count = 0;
  cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    printf("vadd: no CUDA device (%s)\n", cudaGetErrorName(err));
    return 2;
  }
  size_t bytes = n * sizeof(float);
  float *a = (float*)malloc(bytes), *b = (float*)malloc(bytes), *c = (float*)malloc(bytes);
  for (int i = 0; i < n; ++i) { a[i] = (float)i; b[i] = 2.0f * i; }
  float *da, *db, *dc;
  cudaMalloc(&da, bytes); cudaMalloc(&db, bytes); cudaMalloc(&dc, bytes);
  cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice);
  cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice);
  vadd<<<(n + 255) / 256, 256>>>(da, db, dc, n);
  err = cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost);
  if (err != cudaSuccess) { printf("vadd: %s\n", cudaGetErrorString(err)); return 1; }
  int bad = 0;
  for (int i = 0; i < n; ++i) bad += c[i] != 3.0f * i;
  printf("vadd: n=%d mismatches=%d\n", n, bad);
  cudaFree(da); cudaFree(db); cudaFree(dc); free(a); free(b); free(c);
  return bad ? 1 : 0;
}
