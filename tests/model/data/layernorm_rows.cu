// in the shape of llm.c dev/cuda/layernorm_forward.cu kernel1: a thread per row, loops over C
__global__ void layernorm_rows(float* out, float* mean, float* rstd, const float* inp,
                               const float* weight, const float* bias, int N, int C) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    float eps = 1e-5f;
    if (idx < N) {
        const float* x = inp + idx * C;
        float m = 0.0f;
        for (int i = 0; i < C; i++) {
            m += x[i];
        }
        m = m / C;
        float v = 0.0f;
        for (int i = 0; i < C; i++) {
            float xshift = x[i] - m;
            v += xshift * xshift;
        }
        v = v / C;
        float s = 1.0f / sqrtf(v + eps);
        float* out_idx = out + idx * C;
        for (int i = 0; i < C; i++) {
            float n = (s * (x[i] - m));
            float o = n * weight[i] + bias[i];
            out_idx[i] = o;
        }
        mean[idx] = m;
        rstd[idx] = s;
    }
}
