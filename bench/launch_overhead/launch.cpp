// Host-side cost of cuLaunchKernel from C++: the anchor for nvstage's per-launch overhead.
// Loads the same cubin nvstage launches (saxpy), launches it N times with a tiny grid, and
// times each call with steady_clock; prints the median, p25, p75 in ns as one JSON line.
#include <cuda.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x) do { CUresult r_ = (x); if (r_ != CUDA_SUCCESS) { const char* s_ = nullptr; \
  cuGetErrorName(r_, &s_); std::fprintf(stderr, "%s failed: %s\n", #x, s_ ? s_ : "?"); \
  return 2; } } while (0)

int main(int argc, char** argv) {
  if (argc < 2) { std::fprintf(stderr, "usage: launch CUBIN [N]\n"); return 1; }
  const int n_launch = argc > 2 ? std::atoi(argv[2]) : 20000;
  CHECK(cuInit(0));
  CUdevice dev; CHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx; CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));  // CUDA 13: primary context
  CHECK(cuCtxSetCurrent(ctx));
  CUmodule mod; CHECK(cuModuleLoad(&mod, argv[1]));
  CUfunction fn; CHECK(cuModuleGetFunction(&fn, mod, "saxpy"));
  CUstream stream; CHECK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  CUdeviceptr x, y; CHECK(cuMemAlloc(&x, 4096)); CHECK(cuMemAlloc(&y, 4096));
  int n = 1024; float a = 2.0f;
  void* args[] = {&n, &a, &x, &y};
  std::vector<long long> ns; ns.reserve(n_launch);
  for (int i = 0; i < n_launch + 1000; ++i) {  // the first 1000 are warm-up
    auto t0 = std::chrono::steady_clock::now();
    CHECK(cuLaunchKernel(fn, 4, 1, 1, 256, 1, 1, 0, stream, args, nullptr));
    auto t1 = std::chrono::steady_clock::now();
    if (i >= 1000) ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    if (i % 256 == 255) CHECK(cuStreamSynchronize(stream));  // keep the queue from filling
  }
  CHECK(cuStreamSynchronize(stream));
  std::sort(ns.begin(), ns.end());
  auto q = [&](double f) { return ns[(size_t)(f * (ns.size() - 1))]; };
  std::printf("{\"launches\": %zu, \"median_ns\": %lld, \"p25_ns\": %lld, \"p75_ns\": %lld}\n",
              ns.size(), q(0.5), q(0.25), q(0.75));
  return 0;
}
