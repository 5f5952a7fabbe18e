// Scheme II, stage "residues" in FP64 (ozsim.gemm.ozaki2.cuda.residues_gpu, plans keeping more
// than 70 bits): crt_residues, crt_residues_tab.
// Options: those of crt_common.cuh; -DNH=<26-bit halves of a scaled integer, 1..6>.
#ifndef NH
#define NH 1
#endif
#include "pieces.cuh"

// Symmetric INT8 residues of the rows of X (rows, k) complex128, element strides (sr, sc) or
// offset tables (roff, koff: as the analysis),
// scaled to integers v = rint(ldexp(x, bits - f[r])) (rnd != 0; else trunc), for nmod moduli:
// out is (nmod, 3, ra, kpad) int8, [Re, Im, Re + Im] per modulus, rows >= rows and k >= k zero.
// v (|v| <= 2**bits, bits <= 26 NH) is split exactly into NH halves of 26 bits,
// v = sum_i h_i 2**(26 i) (|h_i| <= 2**26, one sign), so that per modulus
// v mod p = symmod(sum_i h_i W_i) with W_i = 2**(26 i) * weight mod p (|W_i| <= 128): the sum is
// an integer below NH 2**33 (exact FMAs), and one symmod per part and modulus suffices.
// cst is (nmod, 12) double: p, 1/p, hi, lo, W_0 .. W_5, 0, 0. Each thread handles 4 consecutive
// k of one row. qb == 0: adjacent threads take adjacent chunks of a row (rows contiguous along
// k); qb > 0 (rows adjacent in memory): a warp takes a tile of 32/qb rows x qb chunks (loads
// cover adjacent rows, stores qb*4 contiguous bytes).
#define CRT_RESIDUES_PARAMS                                                                   \
    const double2* __restrict__ x, long long rows, long long ra, long long k, long long kpad, \
    long long sr, long long sc, const long long* __restrict__ roff,                           \
    const long long* __restrict__ koff, const int* __restrict__ f, int bits, int nmod,        \
    const double* __restrict__ cst, signed char* __restrict__ out, int qb, int rnd, int planes
template <bool TAB>
__device__ __forceinline__ void crt_residues_body(CRT_RESIDUES_PARAMS)
{
    const long long nq = kpad / 4;
    const int rb = qb ? 32 / qb : 1;
    const long long nrt = (ra + rb - 1) / rb;
    const long long total = qb ? nrt * ((nq + qb - 1) / qb) * 32 : ra * nq;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long mstride = planes * ra * kpad;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += stride) {
        long long r, q;
        if (!crt_item(idx, qb, nrt, nq, ra, r, q)) continue;
        double h[2][4][NH];
        crt_pieces<double, 26, NH, false, TAB>(x, rows, k, sr, sc, roff, koff, f, bits, rnd, r,
                                               q, h);
        signed char* dst = out + r * kpad + q * 4;
        for (int l = 0; l < nmod; ++l) {
            const double* cl = cst + 12 * l;
            const double p = cl[0], ip = cl[1], hi = cl[2], lo = cl[3];
            double w[NH];
#pragma unroll
            for (int i = 0; i < NH; ++i) w[i] = cl[4 + i];
            unsigned int wr = 0u, wi = 0u, ws = 0u;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                double rr[2];
#pragma unroll
                for (int part = 0; part < 2; ++part) {
                    double acc = h[part][c][0] * w[0];
#pragma unroll
                    for (int i = 1; i < NH; ++i) acc += h[part][c][i] * w[i];  // exact
                    rr[part] = symmod(acc, p, ip, hi, lo);
                }
                // planes 4: -i (for p = 256, -(-128) = 128 wraps to -128, the same residue)
                const double rs = planes == 4 ? -rr[1] : symmod(rr[0] + rr[1], p, ip, hi, lo);
                wr |= ((unsigned int)int_small(rr[0]) & 0xffu) << (8 * c);
                wi |= ((unsigned int)int_small(rr[1]) & 0xffu) << (8 * c);
                ws |= ((unsigned int)int_small(rs) & 0xffu) << (8 * c);
            }
            signed char* d = dst + (long long)l * mstride;
            *(unsigned int*)d = wr;
            if (planes == 4) {  // [r, -i, r, i]: the direct form of the fused products
                *(unsigned int*)(d + ra * kpad) = ws;
                *(unsigned int*)(d + 2 * ra * kpad) = wr;
                *(unsigned int*)(d + 3 * ra * kpad) = wi;
            } else {
                *(unsigned int*)(d + ra * kpad) = wi;
                if (planes == 3) *(unsigned int*)(d + 2 * ra * kpad) = ws;
            }
        }
    }
}
extern "C" __global__ void crt_residues(CRT_RESIDUES_PARAMS)
{
    crt_residues_body<false>(x, rows, ra, k, kpad, sr, sc, roff, koff, f, bits, nmod, cst, out,
                             qb, rnd, planes);
}
extern "C" __global__ void crt_residues_tab(CRT_RESIDUES_PARAMS)  // X through offset tables
{
    crt_residues_body<true>(x, rows, ra, k, kpad, sr, sc, roff, koff, f, bits, nmod, cst, out,
                            qb, rnd, planes);
}
