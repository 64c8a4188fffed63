// Instruction issue, not memory: each thread loads one value, runs it through a dependent chain
// of `iters` FMAs (v = v * a + b) in a loop kept rolled (#pragma unroll 1: four instructions an
// iteration, one of them the FMA), and stores it. 8 bytes moved per 2 x iters FLOPs; on sm_90
// the schedulers' issue rate limits it (the FP32 pipe completes FMAs as fast as they issue).
// With a = 1 - 2^-9 and b = 2^-9 (exact in float) the chain tends to 1: numpy checks
// v = 1 + (x - 1) * a^iters.

__global__ void fma_chain(const float* __restrict__ x, float* __restrict__ y, float a, float b,
                          int iters, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = x[i];
#pragma unroll 1
  for (int k = 0; k < iters; ++k) v = fmaf(v, a, b);
  y[i] = v;
}
