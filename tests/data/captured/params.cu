// Parameter shapes for the PTX reader: a 16-byte aligned struct, a char, a double,
// __launch_bounds__ (-> .maxntid) and a template with a mangled name.
struct Pair { double a; double b; };
struct __align__(16) Vec4 { float x, y, z, w; };

__global__ void __launch_bounds__(128) aggregates(Pair p, Vec4 v, char c, double d, float* out) {
  out[threadIdx.x] = p.a + p.b + v.x + v.w + c + d;
}

template <typename T>
__global__ void fill(T* out, T value, unsigned long long n) {
  for (unsigned long long i = threadIdx.x; i < n; i += blockDim.x) out[i] = value;
}
template __global__ void fill<short>(short*, short, unsigned long long);
