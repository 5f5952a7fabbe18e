// Scheme I, stage "accumulate" (ozsim.gemm.ozaki1.cuda.int8_zgemm_gpu): the INT32 slice
// products summed into the complex128 result in the CPU's order. No options.

#include "../../kernels/exact_int.cuh"  // (pow2, scale2)

// out[i, j] = ldexp(acc, eA[i] + eB[j]) with acc = sum over groups, t = s+1 down to 2, of
// P_t * 2**(-t bits), in that order (the CPU's _accumulate). prod holds G INT32 planes
// (2mp, 2nbp) (row stride 2nbp; A's imaginary rows from mp, B's imaginary columns from nbp);
// plane g belongs to group gt[g]; consecutive planes of one group are chunks of P_t and are
// summed exactly in INT64 first.
extern "C" __global__ void oz_accumulate(
    const int* __restrict__ prod, long long m, long long mp, long long nb, long long nbp, int G,
    const int* __restrict__ gt, int bits, const int* __restrict__ eA,
    const int* __restrict__ eB, double2* __restrict__ out, long long so_r, long long so_c)
{
    const long long total = m * nb;
    const long long ld = 2 * nbp;
    const long long plane = 4 * mp * nbp;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += stride) {
        const long long j = idx % nb, i = idx / nb;
        const long long o_rr = i * ld + j, o_ri = i * ld + nbp + j;
        const long long o_ir = (mp + i) * ld + j, o_ii = (mp + i) * ld + nbp + j;
        double ar = 0.0, ai = 0.0;
        bool first = true;
        int g = 0;
        while (g < G) {
            const int t = gt[g];
            long long rr = 0, ii = 0, ri = 0, ir = 0;
            do {
                const int* p = prod + (long long)g * plane;
                rr += p[o_rr]; ii += p[o_ii]; ri += p[o_ri]; ir += p[o_ir];
                ++g;
            } while (g < G && gt[g] == t);
            const double re = (double)(rr - ii), im = (double)(ri + ir);  // exact integers
            const double w = pow2(-t * bits);
            if (first) {
                ar = __dmul_rn(re, w); ai = __dmul_rn(im, w); first = false;
            } else {
                ar = __dadd_rn(ar, __dmul_rn(re, w)); ai = __dadd_rn(ai, __dmul_rn(im, w));
            }
        }
        const int e = eA[i] + eB[j];
        out[i * so_r + j * so_c] = make_double2(scale2(ar, e), scale2(ai, e));
    }
}
