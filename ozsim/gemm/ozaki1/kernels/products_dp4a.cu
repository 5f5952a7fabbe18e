// Scheme I, stage "INT8 GEMMs" for A of at most 32 rows (ozsim.gemm.ozaki1.cuda.int8_zgemm_gpu):
// the slice products on the CUDA cores (__dp4a) instead of cuBLAS.
// Options: -DMP2=<rows of A as stored, real and imaginary halves: 4, 8, ..., 32>.
#ifndef MP2
#error "products_dp4a.cu needs -DMP2=<stored rows of A>"
#endif

// The slice products for a small A (2mp = MP2 <= 32 rows), on the CUDA cores: cuBLAS's INT8
// GEMMs are slow for such skinny shapes (N = 2mp). a: (MP2, wpr) and b: (nrows, wpr) INT32
// words (4 INT8 each, wpr = s kpad / 4); plane g of prod is (MP2, ld) INT32 with
// P_g[ii, jj] = sum_w dp4a(a[ii, aoff_g + w], b[jj, boff_g + w]), w < nw_g, gdesc[g] =
// (aoff_g, boff_g, nw_g) in words: the same planes as the cuBLAS path, exact in INT32 (the plan
// keeps every plane within INT32). A is kept in shared memory; each block stages the B rows of
// its TB threads (one row a thread) transposed in shared memory; each thread accumulates all
// MP2 rows of a plane in registers.
extern "C" __global__ void oz_small_gemm(
    const int* __restrict__ a, const int* __restrict__ b, long long nrows, int wpr,
    const int* __restrict__ gdesc, int G, int* __restrict__ prod, long long ld)
{
    extern __shared__ int smem[];
    int* sa = smem;
    int* sb = smem + MP2 * wpr;
    const int TB = blockDim.x, TBp = blockDim.x + 1;
    for (int i = threadIdx.x; i < MP2 * wpr; i += TB) sa[i] = a[i];
    const long long plane = (long long)MP2 * ld;
    for (long long j0 = (long long)blockIdx.x * TB; j0 < nrows; j0 += (long long)gridDim.x * TB) {
        __syncthreads();
        const long long left = nrows - j0;
        const int nr = left < TB ? (int)left : TB;
        const int* src = b + j0 * wpr;
        for (long long i = threadIdx.x; i < (long long)nr * wpr; i += TB) {
            const int row = (int)(i / wpr), w = (int)(i - (long long)row * wpr);
            sb[w * TBp + row] = src[i];
        }
        __syncthreads();
        if (threadIdx.x < nr) {
            const int* mb = sb + threadIdx.x;
            for (int g = 0; g < G; ++g) {
                const int aoff = gdesc[3 * g], boff = gdesc[3 * g + 1], nw = gdesc[3 * g + 2];
                int acc[MP2];
#pragma unroll
                for (int ii = 0; ii < MP2; ++ii) acc[ii] = 0;
                for (int w = 0; w < nw; ++w) {
                    const int bw = mb[(boff + w) * TBp];
                    const int* aw = sa + aoff + w;
#pragma unroll
                    for (int ii = 0; ii < MP2; ++ii) acc[ii] = __dp4a(aw[ii * wpr], bw, acc[ii]);
                }
                int* dst = prod + g * plane + j0 + threadIdx.x;
#pragma unroll
                for (int ii = 0; ii < MP2; ++ii) dst[ii * ld] = acc[ii];
            }
        }
    }
}
