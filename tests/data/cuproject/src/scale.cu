#include <cstdio>
#include "common.h"

__global__ void scale_kernel(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = cuproject_twice(x[i]);
}

// The host side runs anywhere: it reports whether a GPU is there to launch on.
float scale_on_host(float v) { return cuproject_twice(v); }

int scale_devices() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;
  return n;
}
