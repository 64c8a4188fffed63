extern __device__ float devlib_square(float x);

__global__ void squares(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = devlib_square(x[i]);
}

int devuse_ready() { return 1; }
