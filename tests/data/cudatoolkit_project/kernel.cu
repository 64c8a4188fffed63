__global__ void probe(int* x) { x[threadIdx.x] = 1; }

int launch_probe() { return sizeof(&probe) > 0 ? 1 : 0; }
