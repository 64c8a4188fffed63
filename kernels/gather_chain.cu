// Memory latency with no parallelism to hide it: each thread follows `steps` links of a random
// table (i = next[i]), every load's address the previous load's value, so a warp has one load
// in flight and waits a whole memory round trip per step. Few warps (one block of 64 threads
// per SM) and a table (256 MiB) far larger than L2: neither bandwidth nor the SM limits it.
// `mask` is the table's size less one (a power of two): any int32 a link holds stays inside.

__global__ void gather_chain(const int* __restrict__ next, int* __restrict__ out, int steps,
                             int mask) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  int i = t & mask;
#pragma unroll 1
  for (int s = 0; s < steps; ++s) i = next[i] & mask;
  out[t] = i;
}
