// A row softmax in CUDA, in the shape of llm.c's dev/cuda/softmax_forward.cu
// (softmax_forward_kernel4: a block per row, warp shuffles, the warps' results through shared
// memory), to pair with tests/data/triton/fused_softmax.py's softmax_kernel. Written for
// nvstage's tests, not copied.
#include <math.h>

__device__ float warp_max(float v) {
    for (int offset = 16; offset > 0; offset /= 2) {
        v = fmaxf(v, __shfl_down_sync(0xffffffff, v, offset));
    }
    return v;
}

__device__ float warp_sum(float v) {
    for (int offset = 16; offset > 0; offset /= 2) {
        v += __shfl_down_sync(0xffffffff, v, offset);
    }
    return v;
}

__global__ void softmax_forward_kernel(float* out, const float* inp, int N, int C) {
    extern __shared__ float shared[];
    int idx = blockIdx.x;
    int tid = threadIdx.x;
    int warp_id = threadIdx.x / 32;
    int lane_id = threadIdx.x % 32;
    int warps = blockDim.x / 32;
    const float* x = inp + idx * C;

    float maxval = -INFINITY;
    for (int i = tid; i < C; i += blockDim.x) {
        maxval = fmaxf(maxval, x[i]);
    }
    maxval = warp_max(maxval);
    if (lane_id == 0) shared[warp_id] = maxval;
    __syncthreads();
    if (tid == 0) {
        float val = shared[0];
        for (int i = 1; i < warps; i++) val = fmaxf(val, shared[i]);
        shared[0] = val;
    }
    __syncthreads();
    float offset = shared[0];

    float sumval = 0.0f;
    for (int i = tid; i < C; i += blockDim.x) {
        float e = expf(x[i] - offset);
        out[idx * C + i] = e;
        sumval += e;
    }
    sumval = warp_sum(sumval);
    __syncthreads();
    if (lane_id == 0) shared[warp_id] = sumval;
    __syncthreads();
    if (tid == 0) {
        float val = shared[0];
        for (int i = 1; i < warps; i++) val += shared[i];
        shared[0] = val;
    }
    __syncthreads();
    float sum = shared[0];
    for (int i = tid; i < C; i += blockDim.x) {
        out[idx * C + i] = out[idx * C + i] / sum;
    }
}
