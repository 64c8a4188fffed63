// A kernel that needs many registers: 32 independent accumulators stay live across the
// loop. Built with a low -maxrregcount (CompileOptions(maxrregcount=16)) it must spill.
extern "C" __global__ void spill(const float* __restrict__ in, float* __restrict__ out,
                                 int n, int iters) {
  float acc[32];
#pragma unroll
  for (int k = 0; k < 32; ++k) acc[k] = in[(threadIdx.x + k * 37) % n];
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < 32; ++k) acc[k] = acc[k] * acc[(k + 1) % 32] + acc[(k + 7) % 32];
  }
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < 32; ++k) s += acc[k] * (k + 1);
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
