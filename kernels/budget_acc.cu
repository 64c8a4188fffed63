// A kernel whose register use is set at build time: ACC independent accumulators stay live
// across the loop, so -DACC=4 needs few registers and -DACC=32 many (the budget tests'
// "a change that raises registers").
#ifndef ACC
#define ACC 4
#endif
extern "C" __global__ void budget_acc(const float* __restrict__ in, float* __restrict__ out,
                                      int n, int iters) {
  float acc[ACC];
#pragma unroll
  for (int k = 0; k < ACC; ++k) acc[k] = in[(threadIdx.x + k * 37) % n];
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < ACC; ++k) acc[k] = acc[k] * acc[(k + 1) % ACC] + acc[(k + 3) % ACC];
  }
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < ACC; ++k) s += acc[k] * (k + 1);
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
