// Scheme II (CRT): definitions shared by the stages (analyse.cu, residues.cu, residues32.cu,
// finish.cu, finish_tc.cu) and the one-pass gates (ozsim/gemm/kernels/crt_gate.cuh). The scheme's constants come from ozsim.gemm.ozaki2.moduli as options of every
// scheme II module (ozaki2/cuda.py, _CONSTANTS): -DNFRAC=<NORM_FRAC_BITS>,
// -DLBITS=<LIMB_BITS>.
#ifndef OZSIM_CRT_COMMON_CUH
#define OZSIM_CRT_COMMON_CUH
#if !defined(NFRAC) || !defined(LBITS)
#error "scheme II kernels need -DNFRAC and -DLBITS (ozsim.gemm.ozaki2.moduli)"
#endif

#include "../../kernels/exact_int.cuh"  // (pow2, scale2)

#define DMAX 1.7976931348623157e308
#define EMIN_ (-2147483647 - 1)
// (y + RMAGIC) - RMAGIC = rint(y) for |y| < 2**51 (two FP64 adds instead of a conversion-unit
// rounding), and the low 32 bits of y + RMAGIC are rint(y) as a two's-complement int32.
#define RMAGIC 6755399441055744.0

__device__ __forceinline__ double rint_small(double y) { return (y + RMAGIC) - RMAGIC; }
__device__ __forceinline__ int int_small(double y) { return __double2loint(y + RMAGIC); }

__device__ __forceinline__ double symmod(double x, double p, double ip, double hi, double lo)
{
    // exact for integer-valued |x| <= 2**45 (ozaki2.sym_mod): q is within 1 of round(x / p)
    // (with or without FMA contraction), q*p and x - q*p are exact; one correction each way
    double r = x - rint_small(x * ip) * p;
    if (r > hi) r -= p;
    if (r < lo) r += p;
    return r;
}


// Column c's place in its aligned group of 32 in the permuted u (products_wgmma.cu's stores
// without their quad transpose), and the column at a place: bits 1-2 and 3-4 of t (0 <= t < 32)
// swapped, an involution (finish.cu, finish_tc.cu)
__device__ __forceinline__ int swap_col_bits(int t)
{
    return ((t & 6) << 2) | ((t >> 2) & 6) | (t & 1);
}

// The CRT reconstruction's quotient from the exact digit sums dd[c] = sum_p u_p digit_c(P/p)
// (ozaki2.moduli.quotient_weights: qw[c] = fl(2**(LBITS c) / P)): rint(sum_c dd[c] qw[c]),
// summed from the top digit down (finish.cu, FINISH_SUMS; finish_tc.cu)
template <int L, typename W>
__device__ __forceinline__ double crt_quotient(const double (&dd)[L], const W& qw)
{
    double qe = dd[L - 1] * qw[L - 1];
#pragma unroll
    for (int c = L - 2; c >= 0; --c) qe = fma(dd[c], qw[c], qe);
    return rint_small(qe);
}

// C' from the digit sums and the quotient qq (scheme II step 5, ozaki2.scheme): dd[c] - qq
// P_c (lp: P's digits; exact), carries that balance the lower digits (exact), then C' summed
// from the lowest digit up, each term exact: the scheme's one rounding. dd is overwritten.
template <int L, typename P>
__device__ __forceinline__ double crt_value(double (&dd)[L], double qq, const P& lp)
{
    const double radix = pow2(LBITS), iradix = pow2(-LBITS);
#pragma unroll
    for (int c = 0; c < L; ++c) dd[c] -= qq * lp[c];  // exact
#pragma unroll
    for (int c = 0; c + 1 < L; ++c) {  // balanced digits, exact
        const double carry = rint_small(dd[c] * iradix);
        dd[c] -= carry * radix;
        dd[c + 1] += carry;
    }
    double v = dd[0];
#pragma unroll
    for (int c = 1; c < L; ++c) v = dd[c] * pow2(LBITS * c) + v;  // exact
    return v;
}

#endif  // OZSIM_CRT_COMMON_CUH
