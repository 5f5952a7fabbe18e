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
// CH bytes of slices i = 0..ns-1 of CH scaled values rem (|rem| <= 2**bits), stored at
// dst + (rev ? ns-1-i : i) kpad. The CPU's steps t = clip(rint(r), +-(2**bits - 1)),
// r = (r - t) 2**bits run on R_i = r_i 2**(-bits i), the same numbers scaled by powers of two:
// rint to a multiple of 2**(-bits i) is (R + M_i) - M_i with M_i = 1.5 * 2**(52 - bits i), and
// the low word of R + M_i is the digit (two's complement); every step is exact (as in
// int8_gate_mma.cu): two FP64 additions and a subtraction a slice instead of the conversion
// unit's rint and cvt (a quarter of the FP64 rate on Hopper). CLIP: some |r_0| >= 2**bits - 1/2,
// so a digit may reach the clip (a separate copy of the loop: predicated clip code still takes
// issue slots, and this kernel is issue-bound).
template <bool CLIP>
__device__ __forceinline__ void store_slices(double (&rem)[CH], signed char* __restrict__ dst,
                                             int ns, int bits, long long kpad, int rev)
{
    const double radix = (double)(1 << bits);
    for (int i = 0; i < ns; ++i) {
        const double magic = __longlong_as_double(
            ((long long)(1023 + 52 - bits * i) << 52) | (1LL << 51));
        const double lim = (radix - 1.0) * __longlong_as_double((long long)(1023 - bits * i) << 52);
        unsigned int w[CH / 4];
#pragma unroll
        for (int c = 0; c < CH / 4; ++c) w[c] = 0u;
#pragma unroll
        for (int c = 0; c < CH; ++c) {
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
#if CH == 16
        *(uint4*)p = make_uint4(w[0], w[1], w[2], w[3]);
#elif CH == 8
        *(uint2*)p = make_uint2(w[0], w[1]);
#else
        *(unsigned int*)p = w[0];
#endif
    }
}

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
    const double half_ulp_below = (double)(1 << bits) - 0.5;
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
        const int scale = valid ? bits - exps[r] : 0;
        // x 2**scale, correctly rounded: one multiplication where 2**scale is a normal double
        const bool mul = scale >= -1022 && scale <= 1023;
        const double p2 = __longlong_as_double((long long)((mul ? scale : 0) + 1023) << 52);
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
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            double rem[CH];  // r_0 = ldexp(x, bits - e), |r_0| <= 2**bits
            bool clip = false;
#pragma unroll
            for (int c = 0; c < CH; ++c) {
                const double xv = half ? v[c].y : v[c].x;
                rem[c] = mul ? xv * p2 : ldexp(xv, scale);
                clip = clip || !(fabs(rem[c]) < half_ulp_below);
            }
            signed char* dst = out + ((half * ra + r) * ns) * kpad + q * CH;
            if (clip) {
                store_slices<true>(rem, dst, ns, bits, kpad, rev);
            } else {
                store_slices<false>(rem, dst, ns, bits, kpad, rev);
            }
        }
    }
}
