#include <cstdio>
#include <cuda_runtime_api.h>

int launch_probe();

// The runtime's version needs no driver: the program runs on a machine without a GPU.
int main() {
  int version = 0;
  if (cudaRuntimeGetVersion(&version) != cudaSuccess) return 1;
  std::printf("cudart %d, probe %d\n", version, launch_probe());
  return 0;
}
