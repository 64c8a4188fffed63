// Link-time optimisation demo, device-function half (see lto_a.cu). No kernel here.
__device__ float shade(float x, int mode) {
  if (mode == 0) return 2.0f * x;  // the only branch lto_a.cu ever takes
  // A deliberately register-hungry branch: eight values live across six mixing rounds.
  float acc[8];
#pragma unroll
  for (int k = 0; k < 8; ++k) acc[k] = x * (k + 1) + mode;
#pragma unroll
  for (int r = 0; r < 6; ++r)
#pragma unroll
    for (int k = 0; k < 8; ++k) acc[k] = __sinf(acc[k]) * acc[(k + r + 1) % 8] + acc[(k + 3) % 8];
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += acc[k] * acc[7 - k];
  return s;
}
