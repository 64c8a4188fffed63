// Grid-, block- and warp-stride loops in the shapes real code writes them (our own kernels,
// written for nvstage's tests; the shapes, not the code, are those of the files named).
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

#define BLOCK 256

// The CUDA samples' reduction (Samples/2_Concepts_and_Techniques/reduction/reduction_kernel.cu,
// reduce6): unsigned indices, two elements a thread per pass, the grid's stride computed first.
__global__ void reduce_pairs(const float* __restrict__ g_idata, float* __restrict__ g_odata,
                             unsigned int n) {
    __shared__ float sdata[BLOCK];
    unsigned int tid = threadIdx.x;
    unsigned int gridSize = BLOCK * 2 * gridDim.x;
    unsigned int i = blockIdx.x * BLOCK * 2 + threadIdx.x;
    float mySum = 0.0f;
    while (i < n) {
        mySum += g_idata[i];
        if (i + BLOCK < n) mySum += g_idata[i + BLOCK];
        i += gridSize;
    }
    sdata[tid] = mySum;
    __syncthreads();
    for (unsigned int s = BLOCK / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] = mySum = mySum + sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) g_odata[blockIdx.x] = mySum;
}

// The grid-stride loop of NVIDIA's "CUDA Pro Tip: Write Flexible Kernels with Grid-Stride
// Loops", with a 64-bit index as code for large arrays writes it.
__global__ void saxpy_wide(float a, const float* __restrict__ x, float* __restrict__ y,
                           long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)blockDim.x * gridDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

// The same with int indices and the stride written gridDim.x * blockDim.x.
__global__ void scale_grid(float* __restrict__ y, const float* __restrict__ x, float a, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = a * x[i];
    }
}

// llm.c dev/cuda/layernorm_forward.cu, layernorm_forward_kernel3: a warp per row, its lanes
// striding by the warp's size (cooperative groups).
__global__ void rows_mean_warp(float* __restrict__ mean, const float* __restrict__ inp,
                               int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (idx >= N) return;
    const float* x = inp + idx * C;
    float sum = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        sum += x[i];
    }
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    if (warp.thread_rank() == 0) mean[idx] = sum / C;
}

// llm.c dev/cuda/softmax_forward.cu, softmax_forward_kernel2: a block per row, its threads
// striding by blockDim.x, then a tree in shared memory.
__global__ void rows_max_block(float* __restrict__ out, const float* __restrict__ inp,
                               int N, int C) {
    extern __shared__ float shared[];
    int idx = blockIdx.x;
    int tid = threadIdx.x;
    const float* x = inp + idx * C;
    float maxval = -INFINITY;
    for (int i = tid; i < C; i += blockDim.x) {
        maxval = fmaxf(maxval, x[i]);
    }
    shared[tid] = maxval;
    for (int stride = blockDim.x / 2; stride >= 1; stride /= 2) {
        __syncthreads();
        if (tid < stride) shared[tid] = fmaxf(shared[tid], shared[tid + stride]);
    }
    __syncthreads();
    if (tid == 0) out[idx] = shared[0];
}

// llm.c's vectorised kernels (train_gpt2.cu's x128 loads, C / x128::size of them a row): a
// block per row, its threads striding over the row's float4s by blockDim.x.
__global__ void rows_sum_vec4(float* __restrict__ out, const float4* __restrict__ inp,
                              int N, int C) {
    int idx = blockIdx.x;
    const float4* x = inp + (size_t)idx * (C / 4);
    float s = 0.0f;
    for (int i = threadIdx.x; i < C / 4; i += blockDim.x) {
        float4 v = x[i];
        s += v.x + v.y + v.z + v.w;
    }
    atomicAdd(out + idx, s);
}
