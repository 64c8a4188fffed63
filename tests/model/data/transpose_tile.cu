// Our own kernel in the shape of the CUDA samples' transpose (cuda-samples Samples/6_Performance/transpose:
// transposeCoalesced, and with PAD=1 transposeNoBankConflicts): a 32 x 32 tile through shared memory.
#define TILE_DIM 32
#define BLOCK_ROWS 8
#ifndef PAD
#define PAD 0
#endif
__global__ void transpose_tile(float *odata, const float *idata, int width, int height)
{
    __shared__ float tile[TILE_DIM][TILE_DIM + PAD];
    int xIndex = blockIdx.x * TILE_DIM + threadIdx.x;
    int yIndex = blockIdx.y * TILE_DIM + threadIdx.y;
    int index_in = xIndex + yIndex * width;
    xIndex = blockIdx.y * TILE_DIM + threadIdx.x;
    yIndex = blockIdx.x * TILE_DIM + threadIdx.y;
    int index_out = xIndex + yIndex * height;
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS)
        tile[threadIdx.y + i][threadIdx.x] = idata[index_in + i * width];
    __syncthreads();
    for (int i = 0; i < TILE_DIM; i += BLOCK_ROWS)
        odata[index_out + i * height] = tile[threadIdx.x][threadIdx.y + i];
}
