// Separable compilation: a device function called from another translation unit.
__device__ float devlib_square(float x) { return x * x; }
