__device__ __noinline__ float twice(float v) {
  return 2.0f * v;
}
__global__ void caller(float* y) {
  y[threadIdx.x] = twice(y[threadIdx.x]);
}
