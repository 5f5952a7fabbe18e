// Scheme II, stage "residues": the work items and the exact scaled pieces of the values that
// both residue kernels (residues.cu in FP64, residues32.cu in FP32) start from.
#ifndef OZSIM_CRT_PIECES_CUH
#define OZSIM_CRT_PIECES_CUH
#include "crt_common.cuh"

// Grid-stride item idx of the residue kernels -> row r and 4-k chunk q: qb == 0: adjacent
// threads take adjacent chunks of a row (rows contiguous along k); qb > 0 (rows adjacent in
// memory): a warp takes a tile of 32/qb rows x qb chunks. False where the tile overhangs.
__device__ __forceinline__ bool crt_item(long long idx, int qb, long long nrt, long long nq,
                                         long long ra, long long& r, long long& q)
{
    if (!qb) { q = idx % nq; r = idx / nq; return true; }
    const int rb = 32 / qb, lane = (int)(idx & 31);
    const long long tile = idx >> 5;
    r = (tile % nrt) * rb + lane / qb;
    q = (tile / nrt) * qb + lane % qb;
    return r < ra && q < nq;
}

// The 4 values of chunk q of row r (zero outside the matrix), each part scaled to its integer
// v = rnd(ldexp(x, bits - f[r])) (rint if rnd, else trunc: the scheme's one rounding) and split
// exactly into NPC pieces of PB bits, v = sum_i h_i 2**(PB i), all of v's sign; T holds them
// exactly (|h_i| <= 2**PB). BAL: balanced pieces instead (each rounded to nearest by rint_small:
// |h_i| <= 2**(PB - 1) below the top one, |h_top| <= max(1, 2**(bits - PB (NPC - 1))), mixed
// signs), with FP64 adds where truncation takes the conversion unit. TAB: read X through the
// offset tables (roff, koff), a compile-time choice (a per-value test cost the issue-bound
// residue kernels 15-20%).
template <typename T, int PB, int NPC, bool BAL = false, bool TAB = false>
__device__ __forceinline__ void crt_pieces(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    const long long* __restrict__ roff, const long long* __restrict__ koff,
    const int* __restrict__ f, int bits, int rnd, long long r, long long q, T (&h)[2][4][NPC])
{
    const bool valid = r < rows;
    const int sh = valid ? bits - f[r] : 0;
    const bool fast = sh >= -1022 && sh <= 1023;
    const double scale = fast ? pow2(sh) : 0.0;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const long long kk = q * 4 + c;
        const double2 v = (valid && kk < k) ? x[TAB ? roff[r] + koff[kk] : r * sr + kk * sc]
                                                   : make_double2(0.0, 0.0);
#pragma unroll
        for (int part = 0; part < 2; ++part) {
            const double xv = part ? v.y : v.x;
            const double ys = fast ? xv * scale : ldexp(xv, sh);  // as ldexp: exact here
            double y = rnd ? rint(ys) : trunc(ys);
#pragma unroll
            for (int i = NPC - 1; i > 0; --i) {
                const double hi_ = BAL ? rint_small(y * pow2(-PB * i))  // |.| < 2**51
                                       : trunc(y * pow2(-PB * i));  // exact (|y| >= 1 or 0)
                h[part][c][i] = (T)hi_;  // exact
                y -= hi_ * pow2(PB * i);  // exact: the bits of y below 2**(PB i)
            }
            h[part][c][0] = (T)y;
        }
    }
}

#endif  // OZSIM_CRT_PIECES_CUH
