// A scheme II one-pass gate's amplitude group as a column of B (crt_gate.cu, crt_gate_exact.cu):
// its amplitudes and its norm exponent (ozaki2.norm_exponents). The including file defines D, K
// and NFRAC (crt_gate.cuh).
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
    int bl;
    frexp(s, &bl);
    f = s > 0.0 ? e - NFRAC + (bl + 1) / 2 : 0;
    return finite;
}

#endif  // OZSIM_CRT_COLUMN_CUH
