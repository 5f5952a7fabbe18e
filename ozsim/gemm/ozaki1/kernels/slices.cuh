// Scheme I's split of C consecutive values of one row into INT8 slices ([ozIMMU] Alg. 3), the
// CPU's ozsim.gemm.ozaki1.split_rows bit for bit: used by split.cu (oz_split) and analyse.cu
// (oz_analyse_split, the split fused into the analysis).
#ifndef OZSIM_OZAKI1_SLICES_CUH
#define OZSIM_OZAKI1_SLICES_CUH

// C bytes of slices i = 0..ns-1 of C scaled values rem (|rem| <= 2**bits), stored at
// dst + (rev ? ns-1-i : i) kpad. The CPU's steps t = clip(rint(r), +-(2**bits - 1)),
// r = (r - t) 2**bits run on R_i = r_i 2**(-bits i), the same numbers scaled by powers of two:
// rint to a multiple of 2**(-bits i) is (R + M_i) - M_i with M_i = 1.5 * 2**(52 - bits i), and
// the low word of R + M_i is the digit (two's complement); every step is exact (as in
// int8_gate_mma.cu): two FP64 additions and a subtraction a slice instead of the conversion
// unit's rint and cvt (a quarter of the FP64 rate on Hopper). CLIP: some |r_0| >= 2**bits - 1/2,
// so a digit may reach the clip (a separate copy of the loop: predicated clip code still takes
// issue slots, and this kernel is issue-bound).
template <int C, bool CLIP>
__device__ __forceinline__ void store_slices(double (&rem)[C], signed char* __restrict__ dst,
                                             int ns, int bits, long long kpad, int rev)
{
    const double radix = (double)(1 << bits);
    for (int i = 0; i < ns; ++i) {
        const double magic = __longlong_as_double(
            ((long long)(1023 + 52 - bits * i) << 52) | (1LL << 51));
        const double lim = (radix - 1.0) * __longlong_as_double((long long)(1023 - bits * i) << 52);
        unsigned int w[C / 4];
#pragma unroll
        for (int c = 0; c < C / 4; ++c) w[c] = 0u;
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const double y = rem[c] + magic;
            int digit = __double2loint(y);
            double t = y - magic;
            if (CLIP) {
                t = fmin(fmax(t, -lim), lim);
                digit = max(min(digit, (1 << bits) - 1), 1 - (1 << bits));
            }
            w[c / 4] |= ((unsigned int)digit & 0xffu) << (8 * (c % 4));
            rem[c] -= t;  // exact; unused after the last slice
        }
        signed char* p = dst + (long long)(rev ? ns - 1 - i : i) * kpad;
        if constexpr (C == 16) {
            *(uint4*)p = make_uint4(w[0], w[1], w[2], w[3]);
        } else if constexpr (C == 8) {
            *(uint2*)p = make_uint2(w[0], w[1]);
        } else {
            static_assert(C == 4, "slices of 4, 8 or 16 values a thread");
            *(unsigned int*)p = w[0];
        }
    }
}

// The slices of C values v of one row scaled by 2**scale (scale = bits - the row's exponent):
// real parts at out + (rev ? ns-1-i : i) kpad, imaginary parts likewise at out + im_offset.
template <int C>
__device__ __forceinline__ void split_values(const double2 (&v)[C], int scale,
                                             signed char* __restrict__ out, long long im_offset,
                                             int ns, int bits, long long kpad, int rev)
{
    // x 2**scale, correctly rounded: one multiplication where 2**scale is a normal double
    const bool mul = scale >= -1022 && scale <= 1023;
    const double p2 = __longlong_as_double((long long)((mul ? scale : 0) + 1023) << 52);
    const double half_ulp_below = (double)(1 << bits) - 0.5;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        double rem[C];  // r_0 = ldexp(x, bits - e), |r_0| <= 2**bits
        bool clip = false;
#pragma unroll
        for (int c = 0; c < C; ++c) {
            const double xv = half ? v[c].y : v[c].x;
            rem[c] = mul ? xv * p2 : ldexp(xv, scale);
            clip = clip || !(fabs(rem[c]) < half_ulp_below);
        }
        signed char* dst = out + half * im_offset;
        if (clip) {
            store_slices<C, true>(rem, dst, ns, bits, kpad, rev);
        } else {
            store_slices<C, false>(rem, dst, ns, bits, kpad, rev);
        }
    }
}

#endif  // OZSIM_OZAKI1_SLICES_CUH
