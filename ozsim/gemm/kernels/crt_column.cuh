// A scheme II one-pass gate's amplitude group as a column of B (crt_gate.cu, crt_gate_exact.cu):
// its amplitudes and its norm exponent (ozaki2.norm_exponents). The including file includes
// crt_gate.cuh first (D, K, NFRAC, norm_exponent_of).
#ifndef OZSIM_CRT_COLUMN_CUH
#define OZSIM_CRT_COLUMN_CUH
#include "gate_groups.cuh"
#include "exact_int.cuh"

// The group's amplitudes, its ozIMMU exponent e and norm exponent f (ozaki2.norm_exponents);
// false on NaN/Inf.
__device__ __forceinline__ bool load_column(const double2* __restrict__ psi, long long base,
                                            const int (&pos)[6], double2 (&x)[K], int& e, int& f)
{
    double mx;
    const bool finite = load_group(psi, base, pos, x, mx);
    frexp(mx, &e);
    double s = 0.0;
#pragma unroll
    for (int c = 0; c < K; ++c) {
        const double qr = ceil(scale2_up(fabs(x[c].x), NFRAC - e));  // exact, <= 2**13
        const double qi = ceil(scale2_up(fabs(x[c].y), NFRAC - e));
        s += qr * qr;  // integers below 2**53: exact in any order
        s += qi * qi;
    }
    f = norm_exponent_of(e, s);
    return finite;
}

// The group of this thread of a one-thread-a-group kernel (thread_group), loaded as a column
// (load_column): false past the last group, or on NaN/Inf in it (then *flag is set)
__device__ __forceinline__ bool thread_column(const double2* __restrict__ psi, long long groups,
                                              const int (&pos)[6], long long& base,
                                              double2 (&x)[K], int& e, int& f,
                                              int* __restrict__ flag)
{
    if (!thread_group(groups, pos, base)) return false;
    if (!load_column(psi, base, pos, x, e, f)) {
        atomicOr(flag, 1);
        return false;
    }
    return true;
}

#endif  // OZSIM_CRT_COLUMN_CUH
