// Link-time optimisation demo, kernel half: the work is in lto_b.cu, another module.
// Compiled separately, the call to shade() is a real ABI call and the kernel's register count
// must cover shade()'s heavy branch. With LTO (-dlto, then nvJitLink -lto) the call is
// inlined, mode == 0 is folded, the heavy branch disappears and the kernel needs far fewer.
extern __device__ float shade(float x, int mode);

extern "C" __global__ void lto_apply(const float* __restrict__ in, float* __restrict__ out,
                                     int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = shade(in[i], 0);
}
