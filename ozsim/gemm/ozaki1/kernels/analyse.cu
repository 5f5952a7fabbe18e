// Scheme I, stage "analyse" (ozsim.gemm.ozaki1.cuda.analyse): the scaling exponent of every
// row, a NaN/Inf flag and, for INT8-AUTO, the loss histogram.
// Options: -DMAXD=<ozaki1.cuda.MAX_EXP_DIFF> (the histogram's last bin); -DVPT=<values a thread
// of oz_analyse_r> (default 8); -DTAB=1: X read
// through offset tables, X[r, kk] = x[roff[r] + koff[kk]] (the state through a gate's qubit
// permutation, ozaki2.cuda.GatheredMatrix; a compile-time choice: a per-value test costs issue
// slots), else X[r, kk] = x[r sr + kk sc].
#ifndef MAXD
#error "analyse.cu needs -DMAXD=<MAX_EXP_DIFF>"
#endif
#ifndef TAB
#define TAB 0
#endif
#if TAB
#define OZ_AT(r, kk) (roff[r] + koff[kk])
#else
#define OZ_AT(r, kk) ((r) * sr + (kk) * sc)
#endif
#ifndef VPT
#define VPT 8
#endif
#define DMAX 1.7976931348623157e308
#include "histogram.cuh"

#include "slices.cuh"

// Exponents, NaN/Inf flag and (hist != 0) the loss histogram of the rows of X (rows, k), each
// value read once and held in registers; SPLIT: also X's ns slices of `bits` bits as split.cu
// stores them with rev = 1 (out (2 ra, ns, k); rows rows..ra-1 of each half zero). A warp takes
// 32 / tpr rows, tpr = k / VPT lanes a row (k = tpr VPT, tpr a power of two <= 32): lane j tpr + q
// holds values kk = c tpr + q of row j, or with SPLIT kk = q VPT + c (its slices are then VPT
// contiguous bytes; VPT = 4, 8 or 16). For rows adjacent in memory (|sr| == 1) each load covers
// 32 / tpr adjacent rows. Losses 0..7 are counted in registers (oz_count_loss).
template <bool SPLIT>
__device__ __forceinline__ void analyse_rows(
    const double2* __restrict__ x, long long rows, long long ra, long long k, long long sr,
    long long sc, int* __restrict__ exps, unsigned long long* __restrict__ hist,
    int* __restrict__ flag, const long long* __restrict__ roff,
    const long long* __restrict__ koff, int bits, int ns, signed char* __restrict__ out)
{
    __shared__ unsigned int sh[MAXD + 1];
    const bool want = hist != 0;
    if (want) {
        for (int i = threadIdx.x; i <= MAXD; i += blockDim.x) sh[i] = 0u;
        __syncthreads();
    }
    const int tpr = (int)(k / VPT), lane = threadIdx.x & 31;
    const int j = lane / tpr, q = lane % tpr, rw = 32 / tpr;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    const long long ngroups = (ra + rw - 1) / rw;
    unsigned lo = 0, hi = 0;
    int counted = 0;
    for (long long g = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; g < ngroups;
         g += nwarps) {
        const long long r = g * rw + j;
        const bool valid = r < rows;
        double2 v[VPT];
#pragma unroll
        for (int c = 0; c < VPT; ++c) {
            const long long kk = SPLIT ? q * VPT + c : c * tpr + q;
            v[c] = valid ? x[OZ_AT(r, kk)] : make_double2(0.0, 0.0);
        }
        double mx = 0.0;
        int fin = 1;
#pragma unroll
        for (int c = 0; c < VPT; ++c) {
            fin &= (fabs(v[c].x) <= DMAX) & (fabs(v[c].y) <= DMAX);
            mx = fmax(mx, fmax(fabs(v[c].x), fabs(v[c].y)));
        }
        for (int o = 1; o < tpr; o <<= 1) {
            mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            fin &= __shfl_xor_sync(0xffffffffu, fin, o);
        }
        if (r >= ra) continue;
        int e = 0;
        if (!fin) mx = 0.0;
        if (mx != 0.0) frexp(mx, &e);
        if (valid && q == 0) {
            exps[r] = e;
            if (!fin) *flag = 1;
        }
        if (want && valid && fin) {
#pragma unroll
            for (int c = 0; c < VPT; ++c) {
                oz_count_loss(sh, lo, hi, e, v[c].x);
                oz_count_loss(sh, lo, hi, e, v[c].y);
            }
            counted += 2 * VPT;
            if (counted > 255 - 2 * VPT) { oz_flush_counts(sh, lo, hi); counted = 0; }
        }
        if (SPLIT)
            split_values<VPT>(v, valid ? bits - e : 0, out + (r * ns) * k + q * VPT,
                              ra * ns * k, ns, bits, k, 1);
    }
    if (want) {
        oz_flush_counts(sh, lo, hi);
        oz_hist_flush(sh, hist);
    }
}

// analyse_rows without the split: one read where the kernels below read each value twice (the
// row's exponent first, then each value's loss against it). VPT trades registers (occupancy)
// against adjacent rows a load: ozsim.gemm.ozaki1.cuda._analyse_vpt gives the measured choice.
extern "C" __global__ void __launch_bounds__(256) oz_analyse_r(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    int* __restrict__ exps, unsigned long long* __restrict__ hist, int* __restrict__ flag,
    const long long* __restrict__ roff, const long long* __restrict__ koff)
{
    analyse_rows<false>(x, rows, rows, k, sr, sc, exps, hist, flag, roff, koff, 0, 0, nullptr);
}

// Scaling exponents (and optionally the loss histogram) of the rows of X (rows, k), complex128
// with element strides (sr, sc). One thread per row: for rows adjacent in memory (|sr| == 1).
extern "C" __global__ void oz_analyse_t(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    int* __restrict__ exps, unsigned long long* __restrict__ hist, int* __restrict__ flag,
    const long long* __restrict__ roff, const long long* __restrict__ koff)
{
    __shared__ unsigned int sh[MAXD + 1];
    const bool want = hist != 0;
    if (want) {
        for (int i = threadIdx.x; i <= MAXD; i += blockDim.x) sh[i] = 0u;
        __syncthreads();
    }
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride) {
        double mx = 0.0;
        bool bad = false;
        long long kk = 0;
        for (; kk + 4 <= k; kk += 4) {
            double2 v0 = x[OZ_AT(r, kk)], v1 = x[OZ_AT(r, kk + 1)], v2 = x[OZ_AT(r, kk + 2)],
                    v3 = x[OZ_AT(r, kk + 3)];
            double a0 = fmax(fabs(v0.x), fabs(v0.y)), a1 = fmax(fabs(v1.x), fabs(v1.y));
            double a2 = fmax(fabs(v2.x), fabs(v2.y)), a3 = fmax(fabs(v3.x), fabs(v3.y));
            bad |= !(fabs(v0.x) <= DMAX) | !(fabs(v0.y) <= DMAX) | !(fabs(v1.x) <= DMAX)
                 | !(fabs(v1.y) <= DMAX) | !(fabs(v2.x) <= DMAX) | !(fabs(v2.y) <= DMAX)
                 | !(fabs(v3.x) <= DMAX) | !(fabs(v3.y) <= DMAX);
            mx = fmax(mx, fmax(fmax(a0, a1), fmax(a2, a3)));
        }
        for (; kk < k; ++kk) {
            double2 v = x[OZ_AT(r, kk)];
            bad |= !(fabs(v.x) <= DMAX) | !(fabs(v.y) <= DMAX);
            mx = fmax(mx, fmax(fabs(v.x), fabs(v.y)));
        }
        int e = 0;
        if (bad) { *flag = 1; mx = 0.0; }
        if (mx != 0.0) frexp(mx, &e);
        exps[r] = e;
        if (want && !bad) {
            for (kk = 0; kk < k; ++kk) {
                double2 v = x[OZ_AT(r, kk)];
                oz_hist_add(sh, e, v.x);
                oz_hist_add(sh, e, v.y);
            }
        }
    }
    if (want) oz_hist_flush(sh, hist);
}

// The same, one warp per row: for rows contiguous along k (|sc| == 1). blockDim.x % 32 == 0.
extern "C" __global__ void oz_analyse_w(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    int* __restrict__ exps, unsigned long long* __restrict__ hist, int* __restrict__ flag,
    const long long* __restrict__ roff, const long long* __restrict__ koff)
{
    __shared__ unsigned int sh[MAXD + 1];
    const bool want = hist != 0;
    if (want) {
        for (int i = threadIdx.x; i <= MAXD; i += blockDim.x) sh[i] = 0u;
        __syncthreads();
    }
    const int lane = threadIdx.x & 31;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows;
         r += nwarps) {
        double mx = 0.0;
        int bad = 0;
        for (long long kk = lane; kk < k; kk += 32) {
            double2 v = x[OZ_AT(r, kk)];
            bad |= !(fabs(v.x) <= DMAX) | !(fabs(v.y) <= DMAX);
            mx = fmax(mx, fmax(fabs(v.x), fabs(v.y)));
        }
        for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        bad = __any_sync(0xffffffffu, bad);
        int e = 0;
        if (bad) mx = 0.0;
        if (mx != 0.0) frexp(mx, &e);
        if (lane == 0) {
            exps[r] = e;
            if (bad) *flag = 1;
        }
        if (want && !bad) {
            for (long long kk = lane; kk < k; kk += 32) {
                double2 v = x[OZ_AT(r, kk)];
                oz_hist_add(sh, e, v.x);
                oz_hist_add(sh, e, v.y);
            }
        }
    }
    if (want) oz_hist_flush(sh, hist);
}

// INT8-AUTO's analysis and the split of X in one read (ozsim.gemm.ozaki1.cuda.analyse_split):
// analyse_rows with the split, for an ns guessed before the histogram is known (the caller
// checks the guess).
extern "C" __global__ void __launch_bounds__(256, 2) oz_analyse_split(
    const double2* __restrict__ x, long long rows, long long ra, long long k, long long sr,
    long long sc, int* __restrict__ exps, unsigned long long* __restrict__ hist,
    int* __restrict__ flag, const long long* __restrict__ roff,
    const long long* __restrict__ koff, int bits, int ns, signed char* __restrict__ out)
{
    analyse_rows<true>(x, rows, ra, k, sr, sc, exps, hist, flag, roff, koff, bits, ns, out);
}
