// Scheme I, stage "split" (ozsim.gemm.ozaki1.cuda.split): the INT8 slices of the rows of X.
// Options: -DCH=<4, 8 or 16> (k per thread: the largest that divides the stored k); -DTAB=1: X
// read through offset tables, X[r, kk] = x[roff[r] + koff[kk]] (as in analyse.cu).
#ifndef CH
#error "split.cu needs -DCH=<4, 8 or 16>"
#endif
#ifndef TAB
#define TAB 0
#endif

// Split the rows of X (rows, k) complex128, element strides (sr, sc), into ns INT8 slices of
// `bits` bits each ([ozIMMU] Alg. 3), written K-major to out (2 ra, ns, kpad): rows 0..rows-1
// real parts, ra..ra+rows-1 imaginary parts (ra >= rows; rows rows..ra-1 of each half and
// entries k..kpad-1 are zero); slice i at position i (rev: ns-1-i). Each thread handles CH
// consecutive k of one row and stores CH bytes per slice.
// qb == 0: adjacent threads take adjacent k-chunks of a row (rows contiguous along k, sc == 1).
// qb > 0 (rows adjacent in memory, |sr| == 1): a warp takes a tile of 32/qb rows x qb chunks,
// so that its loads cover 32/qb adjacent rows (full sectors) and its stores qb*CH contiguous
// bytes of each slice row.
#include "slices.cuh"

extern "C" __global__ void __launch_bounds__(256, 2) oz_split(
    const double2* __restrict__ x, long long rows, long long ra, long long k, long long kpad,
    long long sr, long long sc, const int* __restrict__ exps, int bits, int ns, int rev,
    signed char* __restrict__ out, int qb, const long long* __restrict__ roff,
    const long long* __restrict__ koff)
{
    const long long nq = kpad / CH;
    const int rb = qb ? 32 / qb : 1;
    const long long nrt = (ra + rb - 1) / rb;
    const long long total = qb ? nrt * ((nq + qb - 1) / qb) * 32 : ra * nq;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += stride) {
        long long r, q;
        if (qb) {
            const int lane = (int)(idx & 31);
            const long long tile = idx >> 5;
            r = (tile % nrt) * rb + lane / qb;
            q = (tile / nrt) * qb + lane % qb;
            if (r >= ra || q >= nq) continue;
        } else {
            q = idx % nq; r = idx / nq;
        }
        const bool valid = r < rows;
        double2 v[CH];
#pragma unroll
        for (int c = 0; c < CH; ++c) {
            long long kk = q * CH + c;
#if TAB
            v[c] = (valid && kk < k) ? x[roff[r] + koff[kk]] : make_double2(0.0, 0.0);
#else
            v[c] = (valid && kk < k) ? x[r * sr + kk * sc] : make_double2(0.0, 0.0);
#endif
        }
        split_values<CH>(v, valid ? bits - exps[r] : 0, out + (r * ns) * kpad + q * CH,
                         ra * ns * kpad, ns, bits, kpad, rev);
    }
}
