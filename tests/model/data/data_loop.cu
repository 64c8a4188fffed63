// A loop whose count is read from memory (a CSR row's length): not derivable from the code.
__global__ void row_sums(const int* row_start, const float* values, float* sums, int rows) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float s = 0.0f;
    for (int k = row_start[r]; k < row_start[r + 1]; ++k) {
        s += values[k];
    }
    sums[r] = s;
}
