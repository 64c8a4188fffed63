// Kernels of internal linkage, as cuda-samples' clock.cu has them (tests/inspect/test_names.py):
// built with -rdc=true, nvcc names each after the module id, "__nv_static_<n>_<id>_<mangled>"
// (cuda13.5-static-rdc-ptxas-v.txt, nvcc 13.5: nvcc -c clock.cu -arch=sm_90 -rdc=true -Xptxas -v).
static __global__ void timedReduction(const float *input, float *output, long *timer) { output[0] = input[threadIdx.x]; timer[0] = 1; }
namespace { __global__ void anon_k(int *p) { p[0] = 1; } }
namespace ns { static __global__ void scale(float* x, float a) { x[0] *= a; } }
template <typename T> static __global__ void fillT(T* x) { x[0] = T(1); }
__global__ void plain(int* p) { p[0] = 2; }
int main() { timedReduction<<<1,1>>>(0,0,0); anon_k<<<1,1>>>(0); ns::scale<<<1,1>>>(0,1.f); fillT<float><<<1,1>>>(0); return 0; }
