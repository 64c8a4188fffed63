// Slow enough in cicc and ptxas (seconds here) for the signal tests to catch its build
// running (tests/cli/test_compile_signals.py, tests/compiler/test_launcher_signals.py).
template <int N> struct Step {
    __device__ static float apply(float x) {
        return Step<N - 1>::apply(x) * 1.0001f + __sinf(x + N);
    }
};
template <> struct Step<0> {
    __device__ static float apply(float x) { return x; }
};
template <int N> __device__ float chain(float x) {
    float acc = 0.f;
#pragma unroll
    for (int i = 0; i < 128; ++i) acc += Step<N>::apply(x + i);
    return acc;
}
__global__ void heavy(float *out, const float *in) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    out[i] = chain<150>(in[i]) + chain<149>(in[i] * 2.f);
}
