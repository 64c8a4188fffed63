// Our own kernel in the shape of llm.c dev/cuda/matmul_forward.cu kernel4 (karpathy/llm.c, MIT):
// out = inp x weight^T + bias, 8 x 8 outputs a thread, 128 x 128 a block, tiles of 32 in shared memory.
__device__ float4 ld_vec(const float* address) { return *reinterpret_cast<const float4*>(address); }
__device__ void st_vec(float* address, float4 val) { *reinterpret_cast<float4*>(address) = val; }

__global__ void __launch_bounds__(16*16) matmul_forward_kernel4(float* out,
        const float* inp, const float* weight, const float* bias, int C, int OC) {
    int oc = 8*(blockIdx.y * blockDim.y + threadIdx.y);
    __shared__ float lhs_s[128][32];
    __shared__ float rhs_s[128][32];
    inp += 128 * blockIdx.x * C;
    weight += 128 * blockIdx.y * C;
    out += 128 * blockIdx.x * OC + 128 * blockIdx.y;
    float vals[8][8] = {};
    if (bias != NULL) {
        for (int i = 0; i < 8; i++) {
            for (int j = 0; j < 8; j += 4) {
                float4 b = ld_vec(bias + oc + j);
                vals[i][j+0] = b.x; vals[i][j+1] = b.y; vals[i][j+2] = b.z; vals[i][j+3] = b.w;
            }
        }
    }
    int si_start = 4*(16 * threadIdx.y + threadIdx.x);
    for (int so = 0; so < C; so += 32) {
        __syncthreads();
        int xmod8 = threadIdx.x % 8;
        int xby8 = threadIdx.x / 8;
        int xo = 4 * xmod8;
        for (int y = 2 * threadIdx.y + xby8; y < 128; y += 32) {
            st_vec(&lhs_s[y][xo], ld_vec(inp + y * C + so + xo));
            st_vec(&rhs_s[y][xo], ld_vec(weight + y * C + so + xo));
        }
        __syncthreads();
        for (int si = si_start; si < si_start + 32; si += 4) {
            float4 rhs[8];
            for (int u = 0; u < 8; ++u) rhs[u] = ld_vec(&rhs_s[u + 8 * threadIdx.y][si % 32]);
            for (int ii = 0; ii < 8; ++ii) {
                float4 lhs = ld_vec(&lhs_s[ii + 8 * threadIdx.x][si % 32]);
                for (int ji = 0; ji < 8; ++ji) {
                    vals[ii][ji] += lhs.x * rhs[ji].x;
                    vals[ii][ji] += lhs.y * rhs[ji].y;
                    vals[ii][ji] += lhs.z * rhs[ji].z;
                    vals[ii][ji] += lhs.w * rhs[ji].w;
                }
            }
        }
    }
    for (int i = 0; i < 8; ++i) {
        for (int j = 0; j < 8; j += 4) {
            float4 result;
            result.x = vals[i][j + 0]; result.y = vals[i][j + 1];
            result.z = vals[i][j + 2]; result.w = vals[i][j + 3];
            st_vec(out + (8*threadIdx.x+i) * OC + 8*threadIdx.y + j, result);
        }
    }
}
