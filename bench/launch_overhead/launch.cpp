// Host-side cost of cuLaunchKernel from C++: the anchor for nvstage's per-launch overhead.
// Loads the same cubin nvstage launches (saxpy), launches it N times with a tiny grid, and
// times each call with steady_clock; prints the median, p25, p75 in ns as one JSON line.
//
// The driver is opened at run time (dlopen of libcuda.so.1, as the CUDA runtime does) rather
// than linked with -lcuda: GPU machines and containers often ship only libcuda.so.1, without
// the libcuda.so link a linker looks for, and the wheels bring no stub. A call through the
// pointer costs what a call through the PLT costs.
#include <cuda.h>
#include <dlfcn.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {
struct Driver {
  CUresult (*Init)(unsigned int);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*PrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*ModuleLoad)(CUmodule*, const char*);
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*StreamCreate)(CUstream*, unsigned int);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, unsigned, CUstream, void**, void**);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*GetErrorName)(CUresult, const char**);
};

template <typename F>
bool load(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!fn) std::fprintf(stderr, "libcuda.so.1 has no %s\n", name);
  return fn != nullptr;
}
}  // namespace

#define CHECK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_ = nullptr; \
  cu.GetErrorName(r_, &s_); std::fprintf(stderr, "%s failed: %s\n", #x, s_ ? s_ : "?"); \
  return 2; } } while (0)

int main(int argc, char** argv) {
  if (argc < 2) { std::fprintf(stderr, "usage: launch CUBIN [N]\n"); return 1; }
  const int n_launch = argc > 2 ? std::atoi(argv[2]) : 20000;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) { std::fprintf(stderr, "cannot open libcuda.so.1: %s\n", dlerror()); return 3; }
  Driver cu{};
  // The _v2 names are what cuda.h's macros select for these calls.
  if (!(load(lib, "cuInit", cu.Init) && load(lib, "cuDeviceGet", cu.DeviceGet) &&
        load(lib, "cuDevicePrimaryCtxRetain", cu.PrimaryCtxRetain) &&
        load(lib, "cuCtxSetCurrent", cu.CtxSetCurrent) &&
        load(lib, "cuModuleLoad", cu.ModuleLoad) &&
        load(lib, "cuModuleGetFunction", cu.ModuleGetFunction) &&
        load(lib, "cuStreamCreate", cu.StreamCreate) &&
        load(lib, "cuMemAlloc_v2", cu.MemAlloc) &&
        load(lib, "cuLaunchKernel", cu.LaunchKernel) &&
        load(lib, "cuStreamSynchronize", cu.StreamSynchronize) &&
        load(lib, "cuGetErrorName", cu.GetErrorName)))
    return 3;
  CHECK(cu.Init(0));
  CUdevice dev; CHECK(cu.DeviceGet(&dev, 0));
  CUcontext ctx; CHECK(cu.PrimaryCtxRetain(&ctx, dev));  // CUDA 13: primary context
  CHECK(cu.CtxSetCurrent(ctx));
  CUmodule mod; CHECK(cu.ModuleLoad(&mod, argv[1]));
  CUfunction fn; CHECK(cu.ModuleGetFunction(&fn, mod, "saxpy"));
  CUstream stream; CHECK(cu.StreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr x, y; CHECK(cu.MemAlloc(&x, 4096)); CHECK(cu.MemAlloc(&y, 4096));
  int n = 1024; float a = 2.0f;
  void* args[] = {&n, &a, &x, &y};
  std::vector<long long> ns; ns.reserve(n_launch);
  for (int i = 0; i < n_launch + 1000; ++i) {  // the first 1000 are warm-up
    auto t0 = std::chrono::steady_clock::now();
    CHECK(cu.LaunchKernel(fn, 4, 1, 1, 256, 1, 1, 0, stream, args, nullptr));
    auto t1 = std::chrono::steady_clock::now();
    if (i >= 1000) ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    if (i % 256 == 255) CHECK(cu.StreamSynchronize(stream));  // keep the queue from filling
  }
  CHECK(cu.StreamSynchronize(stream));
  std::sort(ns.begin(), ns.end());
  auto q = [&](double f) { return ns[(size_t)(f * (ns.size() - 1))]; };
  std::printf("{\"launches\": %zu, \"median_ns\": %lld, \"p25_ns\": %lld, \"p75_ns\": %lld}\n",
              ns.size(), q(0.5), q(0.25), q(0.75));
  return 0;
}
