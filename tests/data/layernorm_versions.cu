// Three versions of one layer normalisation in one file, in the shape of llm.c's
// dev/cuda/layernorm_forward.cu (kernel3: a warp per row, two cg::reduce passes; kernel4: one
// pass with var = mean(x*x) - mean(x)^2; kernel5: a block per row with __launch_bounds__).
// Written for nvstage's tests, not copied: `nvstage diff` has to align two versions of one
// kernel by their source text, not by line number.
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>

namespace cg = cooperative_groups;

// two passes over the row: the mean, then the variance around it
__global__ void layernorm_forward_kernel3(float* __restrict__ out, float* __restrict__ mean,
                                          float* __restrict__ rstd,
                                          const float* __restrict__ inp,
                                          const float* __restrict__ weight,
                                          const float* __restrict__ bias, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (idx >= N) {
        return;
    }
    const float* x = inp + idx * C;

    // mean
    float sum = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        sum += x[i];
    }
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    float m = sum / C;
    if (warp.thread_rank() == 0 && mean != nullptr) {
        __stcs(mean + idx, m);
    }

    // rstd
    sum = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        float diff = x[i] - m;
        sum += diff * diff;
    }
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    float s = rsqrtf(sum / C + 1e-5f);
    if (warp.thread_rank() == 0 && rstd != nullptr) {
        __stcs(rstd + idx, s);
    }

    // normalise, scale and shift
    float* o = out + idx * C;
    for (int c = warp.thread_rank(); c < C; c += warp.size()) {
        float n = s * (__ldcs(x + c) - m);
        __stcs(o + c, n * weight[c] + bias[c]);
    }
}

// one pass: sum(x) and sum(x*x) together, var = mean(x*x) - mean(x)^2
__global__ void layernorm_forward_kernel4(float* __restrict__ out, float* __restrict__ mean,
                                          float* __restrict__ rstd,
                                          const float* __restrict__ inp,
                                          const float* __restrict__ weight,
                                          const float* __restrict__ bias, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    int idx = blockIdx.x * warp.meta_group_size() + warp.meta_group_rank();
    if (idx >= N) {
        return;
    }
    const float* x = inp + idx * C;

    float sum = 0.0f;
    float sum2 = 0.0f;
    for (int i = warp.thread_rank(); i < C; i += warp.size()) {
        float xi = x[i];
        sum += xi;
        sum2 += xi * xi;
    }
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    sum2 = cg::reduce(warp, sum2, cg::plus<float>{});
    float m = sum / C;
    float var = sum2 / C - m * m;
    float s = rsqrtf(var + 1e-5f);
    if (warp.thread_rank() == 0 && mean != nullptr) {
        __stcs(mean + idx, m);
    }
    if (warp.thread_rank() == 0 && rstd != nullptr) {
        __stcs(rstd + idx, s);
    }

    // normalise, scale and shift
    float* o = out + idx * C;
    for (int c = warp.thread_rank(); c < C; c += warp.size()) {
        float n = s * (__ldcs(x + c) - m);
        __stcs(o + c, n * weight[c] + bias[c]);
    }
}

// a block per row: warp sums, then the warps' sums through shared memory. At most 1024
// threads: ptxas caps its registers at 64 whatever -maxrregcount says.
__global__ void __launch_bounds__(1024) layernorm_forward_kernel5(
        float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd,
        const float* __restrict__ inp, const float* __restrict__ weight,
        const float* __restrict__ bias, int N, int C) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
    __shared__ float shared_sum[32];
    __shared__ float shared_sum2[32];
    int num_warps = blockDim.x / 32;
    int warp_id = threadIdx.x / 32;
    int lane_id = threadIdx.x % 32;
    int idx = blockIdx.x;
    const float* x = inp + idx * C;

    float sum = 0.0f;
    float sum2 = 0.0f;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        float xi = x[i];
        sum += xi;
        sum2 += xi * xi;
    }
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    sum2 = cg::reduce(warp, sum2, cg::plus<float>{});
    shared_sum[warp_id] = sum;
    shared_sum2[warp_id] = sum2;
    __syncthreads();
    sum = lane_id < num_warps ? shared_sum[lane_id] : 0.0f;
    sum2 = lane_id < num_warps ? shared_sum2[lane_id] : 0.0f;
    sum = cg::reduce(warp, sum, cg::plus<float>{});
    sum2 = cg::reduce(warp, sum2, cg::plus<float>{});
    float m = sum / C;
    float var = sum2 / C - m * m;
    float s = rsqrtf(var + 1e-5f);
    if (threadIdx.x == 0 && mean != nullptr) {
        __stcs(mean + idx, m);
    }
    if (threadIdx.x == 0 && rstd != nullptr) {
        __stcs(rstd + idx, s);
    }

    // normalise, scale and shift
    float* o = out + idx * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float n = s * (__ldcs(x + c) - m);
        __stcs(o + c, n * weight[c] + bias[c]);
    }
}
