// Scheme II, stage "crt" (ozsim.gemm.ozaki2.cuda._finish, where FINISH_TC): crt_finish_tc, the CRT
// reconstruction of finish.cu's crt_finish with its digit sums on the INT8 tensor cores. Same
// inputs, constants (finish_cst, filled by ozaki2.cuda._finish_kernel) and outputs bit for bit:
// the digit sums dd[c] = sum_l u_l digit_c(P/p_l) are the same exact integers, made as
// sum_j S_j 2**(8 j) from the byte digits' sums S_j = sum_l u_l byte_j(digit_c(P/p_l))
// (S_j <= 16 * 255 * 255 < 2**20) by mma.m16n8k16.u8.u8 (sm_80 and later), then crt_finish's
// tail (the quotient from the digit sums, the carries, the one rounding).
// Options: those of crt_common.cuh; -DNMODC (<= 16: one k16 step) -DNLIMBC; -DTC_UNITS
// (ozaki2.moduli.digit_units: at most 4 n-tiles of 8 columns, 16 units), -DTC_UNIT_LIMB=0x..
// and -DTC_UNIT_SHIFT=0x.. (hexadecimal, nibble k for unit k): unit k, the columns 2 (k % 4) and
// 2 (k % 4) + 1 of n-tile k / 4, holds S_a + 256 S_(a+1) (< 2**29) of digit TC_UNIT_LIMB[k],
// where byte a sits at bit 16 TC_UNIT_SHIFT[k] of the digit; -DTC_GROUPS (column groups a warp).
// tc_bfrag ([NT][32] words, ozaki2.cuda._finish_tc): lane (g, t)'s B fragment of n-tile n, the
// byte digits of moduli 4 t .. 4 t + 3 in column g of that tile.
// A warp takes one row i (blockIdx.y: i - i0) and groups of 32 stored columns s0 .. s0 + 31 of
// both parts; lane (g, t) (g = lane / 4, t = lane % 4) loads the words of moduli 4 t .. 4 t + 3
// at stored columns s0 + 4 g .. + 3 (ld % 4 == 0: a word never leaves its row), transposes the
// 4 x 4 bytes, and the two m16n8k16 tiles take columns 4 g + 0, 1 (rows g, g + 8 of tile 0) and
// 4 g + 2, 3 (tile 1). The units pass through shared memory (a lane quad's transpose) so that
// lane (g, t) finishes stored column s0 + 4 g + t, written to column c(s) with perm (finish.cu:
// bits 1-2 and 3-4 of s's place in its group of 32 swapped).
#include "crt_common.cuh"
#ifndef NMODC
#error "finish_tc.cu: -DNMODC"
#endif
#if NMODC > 16
#error "finish_tc.cu: at most 16 moduli (one k16 step)"
#endif
#define NT ((TC_UNITS + 3) / 4)
#if NT > 4
#error "finish_tc.cu: at most 16 units"
#endif
__constant__ double finish_cst[NMODC * (NLIMBC + 1) + 3 * NLIMBC];

__host__ __device__ constexpr int unit_limb(int k)
{
    return (int)(((unsigned long long)(TC_UNIT_LIMB) >> (4 * k)) & 15);
}
__host__ __device__ constexpr int unit_shift(int k)
{
    return 16 * (int)(((unsigned long long)(TC_UNIT_SHIFT) >> (4 * k)) & 15);
}
#ifndef TC_GROUPS
#define TC_GROUPS 4  // groups of 32 columns a warp (the B fragments' loads amortised over them)
#endif
// words of one lane quad's row of the exchange: 16 NT + 4 puts the 8 quads' rows on banks
// 4 g' (mod 32) apart, so that each store of a warp (word 16 n + 4 e + t of row g) is
// conflict-free, and 16-byte aligned for the quad's uint4 reads
#define XS (16 * NT + 4)

__device__ __forceinline__ void mma_u8_16(int (&c)[4], unsigned a0, unsigned a1, unsigned b)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.u8.u8.s32 {%0, %1, %2, %3}, {%4, %5}, "
                 "{%6}, {%0, %1, %2, %3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3]) : "r"(a0), "r"(a1), "r"(b));
}

// u (NMODC, 2, m, ld) UINT8 and the rest as finish.cu's crt_finish; grid (ceil(stored / (256
// TC_GROUPS)), rows), 256 threads; stored = nb, or nb rounded up to 32 with perm
extern "C" __global__ void __launch_bounds__(256) crt_finish_tc(
    const unsigned char* __restrict__ u, long long m, long long nb, long long ld,
    const int* __restrict__ fa, const int* __restrict__ fb, int gsum, double2* __restrict__ out,
    long long so_r, long long so_c, long long i0, int perm,
    const unsigned* __restrict__ tc_bfrag)
{
    __shared__ __align__(16) unsigned xch[8][2 * 8 * XS];  // [warp][part][quad row g]
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const long long i = i0 + blockIdx.y;
    const long long stored = perm ? (nb + 31) & ~31LL : nb;
    const double* lp = finish_cst + NMODC + NMODC * NLIMBC;
    const double* qw = lp + NLIMBC;
    unsigned bf[NT];
#pragma unroll
    for (int n = 0; n < NT; ++n) bf[n] = __ldg(tc_bfrag + n * 32 + lane);
    const long long plane = m * ld;
    unsigned* xw = xch[warp];
    const int sha = fa[i] - gsum;
    const long long c0 = (long long)blockIdx.x * 256 * TC_GROUPS + 32 * warp;
    if (c0 >= stored) return;  // (the whole warp)
    // a group's words (moduli 4 t + q, part pp: base + 256 it + (2 q + pp) plane) and the
    // exponent fb of the lane's column, loaded a group ahead of its work (two sets of
    // registers, no copies): the loads in flight that a DRAM latency needs
    const unsigned char* base = u + (8 * t) * plane + i * ld + c0 + 4 * g;
    auto column = [&](long long s0) {
        const long long s = s0 + 4 * g + t;
        return perm ? (s & ~31LL) + swap_col_bits((int)(s & 31)) : s;
    };
    auto load = [&](unsigned (&w)[2][4], int& e, long long s0) {
        const unsigned char* b = base + (s0 - c0);
        const bool in_row = s0 + 4 * g < ld;
#pragma unroll
        for (int pp = 0; pp < 2; ++pp)
#pragma unroll
            for (int q = 0; q < 4; ++q)
                w[pp][q] = ((NMODC == 16 || 4 * t + q < NMODC) && in_row)
                    ? __ldg(reinterpret_cast<const unsigned*>(b + (2 * q + pp) * plane)) : 0u;
        const long long j = column(s0);
        e = j < nb ? __ldg(fb + j) : 0;
    };
    auto finish = [&](const unsigned (&wc)[2][4], int e, long long s0) {
        double res[2];
        __syncwarp();  // (the previous group's reads of xw are done)
#pragma unroll
        for (int pp = 0; pp < 2; ++pp) {
            const unsigned* w = wc[pp];
            // a[c]: moduli 4 t .. 4 t + 3 of column 4 g + c (the 4 x 4 byte transpose)
            const unsigned lo01 = __byte_perm(w[0], w[1], 0x5140);
            const unsigned hi01 = __byte_perm(w[0], w[1], 0x7362);
            const unsigned lo23 = __byte_perm(w[2], w[3], 0x5140);
            const unsigned hi23 = __byte_perm(w[2], w[3], 0x7362);
            const unsigned a[4] = {
                __byte_perm(lo01, lo23, 0x5410), __byte_perm(lo01, lo23, 0x7632),
                __byte_perm(hi01, hi23, 0x5410), __byte_perm(hi01, hi23, 0x7632)};
            // the units of the 4 columns (entry e = 2 T + h: tile T, row g + 8 h) in n-tile n:
            // word 16 n + 4 e + t of the quad's row of part pp
            unsigned* x = xw + pp * 8 * XS + g * XS;
#pragma unroll
            for (int T = 0; T < 2; ++T) {
#pragma unroll
                for (int n = 0; n < NT; ++n) {
                    int c[4] = {0, 0, 0, 0};
                    mma_u8_16(c, a[2 * T], a[2 * T + 1], bf[n]);
#pragma unroll
                    for (int h = 0; h < 2; ++h)
                        x[16 * n + 4 * (2 * T + h) + t] =
                            (unsigned)c[2 * h] + 256u * (unsigned)c[2 * h + 1];
                }
            }
        }
        __syncwarp();
#pragma unroll
        for (int pp = 0; pp < 2; ++pp) {
            // this lane's column (entry t): units 4 n + t' at words 16 n + 4 t + t'
            const unsigned* x = xw + pp * 8 * XS + g * XS;
            unsigned long long acc[NLIMBC];
#pragma unroll
            for (int c = 0; c < NLIMBC; ++c) acc[c] = 0ull;
#pragma unroll
            for (int n = 0; n < NT; ++n) {
                const uint4 v = *reinterpret_cast<const uint4*>(x + 16 * n + 4 * t);
                const unsigned vv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int tp = 0; tp < 4; ++tp) {
                    const int k = 4 * n + tp;
                    if (k < TC_UNITS)
                        acc[unit_limb(k)] += (unsigned long long)vv[tp] << unit_shift(k);
                }
            }
            double dd[NLIMBC];
#pragma unroll
            for (int c = 0; c < NLIMBC; ++c)  // acc < 16 * 255 * 2**40 < 2**52: exact
                dd[c] = __longlong_as_double((long long)(acc[c] | 0x4330000000000000ull)) - 0x1p52;
            // finish.cu's tail (FINISH_SUMS): the quotient from the digit sums, the balanced
            // digits, the one rounding (crt_common.cuh)
            res[pp] = crt_value(dd, crt_quotient(dd, qw), lp);
        }
        const long long j = column(s0);
        if (j < nb) {
            const int sh = sha + e;
            out[i * so_r + j * so_c] = make_double2(scale2(res[0], sh), scale2(res[1], sh));
        }
    };
    unsigned wa[2][4], wb[2][4];
    int ea, eb;
    load(wa, ea, c0);
#pragma unroll 1
    for (int it = 0; it < TC_GROUPS; it += 2) {
        const long long s0 = c0 + 256LL * it;
        const bool more1 = it + 1 < TC_GROUPS && s0 + 256 < stored;  // (the whole warp)
        if (more1) load(wb, eb, s0 + 256);
        finish(wa, ea, s0);
        if (!more1) break;
        const bool more2 = it + 2 < TC_GROUPS && s0 + 512 < stored;
        if (more2) load(wa, ea, s0 + 512);
        finish(wb, eb, s0 + 256);
        if (!more2) break;
    }
}
