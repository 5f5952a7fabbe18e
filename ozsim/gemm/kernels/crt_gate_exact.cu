// One-pass gate by Ozaki scheme II (int8-crt{N}, int8-crt-auto) for gates of d <= 3 qubits and
// plans whose integers fit (ozsim.gemm.ozaki2.exact_gate.exact_applies: up to 15 moduli), by
// exact integer products: psi <- U psi, the same bits as ozsim.gemm.ozaki2.scheme.int8_crt_zgemm.
//
// Scheme II forms the exact integer product C' = A' B' of the scaled operands (its residues
// determine C', |C'| < P/2) and rounds C' once (crt_value: balanced base-2**LBITS digits summed
// from the lowest up). The residues are a way to make C' from INT8 products; where the inner
// dimension is small they are most of the work (N residues a scalar, N products and 2 L CRT
// multiply-adds an entry). Here each entry of C' is made directly: a sum of 2 * 2**d products
// of integers below 2**60, in 64-bit integer arithmetic, and rounded as crt_value rounds it.
// Per amplitude group, in registers:
//   1. the column's norm exponent f and each scalar's integer v = rnd(ldexp(x, gB - f)) (rint,
//      or trunc without ROUND) as an INT64 (crt_gate.cu's steps 1 and 2), and Re v + Im v;
//   2. Gauss's three real products per gate entry (Re = S1 - S2, Im = S3 - S1 - S2 with S1 =
//      sum ar br, S2 = sum ai bi, S3 = sum (ar + ai)(br + bi)), each integer cut into a high
//      limb h = floor(v / 2**TBITS) (|h| < 2**31) and a low one l in [0, 2**TBITS), and each
//      product summed as three INT64 limb sums, hh = sum h h', hl = sum (h l' + l h'), ll = sum
//      l l' (32 x 32 -> 64-bit multiply-adds; with KARATSUBA hl = sum (h + l)(h' + l') - hh -
//      ll, three a product instead of four): the combined sums that make Re and Im stay below
//      2**63 (ozsim.gemm.ozaki2.exact_gate.exact_limb_bounds, by Cauchy-Schwarz on the rows'
//      and columns' norms, ||a'|| < 2**gA + 2**8), so sums that wrap mod 2**64 on the way do
//      no harm;
//   3. C' = hh 2**(2 TBITS) + hl 2**TBITS + ll as a 128-bit integer, its balanced digits (in
//      [-2**(LBITS-1), 2**(LBITS-1)), read from the bits of C' plus an offset), converted
//      exactly and summed from the lowest up as crt_value sums them: where no digit below the
//      top one is -2**(LBITS-1), the balanced digits are unique and crt_value's (its carries
//      make them balanced too), so the same sum and the same bits. Where one is (a tie, which
//      crt_value may resolve either way, by the digit sums it came from), the entry takes
//      crt_value's own path: its residues u_p = q_p C' mod p, the digit sums and crt_finish
//      (rare: a digit's low bits exactly 2**(LBITS-1));
//   4. ldexp by fA[row] + f - (gA + gB), written back in place.
// NaN or Inf in a group sets *flag (the caller raises NonFiniteError) and leaves it as it was.
//
// Options: -DGATE_QUBITS=d -DNMOD=N -DNLIMB=<digits of P> -DROUND=0|1 -DTBITS=<low limb bits>
// -DKARATSUBA=0|1 -DTHREADS -DMIN_BLOCKS and the scheme's constants -DNFRAC -DLBITS
// (ozsim.gemm.ozaki2.moduli); -DEXACT_TEST adds exact_value_test (the rounding of given C'
// values, for the tests).

#include "crt_gate.cuh"

#ifndef TBITS
#define TBITS 29
#endif

// A' of the gate, [product][row][k][h, l, h + l]: the limbs of Re A', Im A', Re A' + Im A'
__constant__ int a_limbs[3 * K * K * 3];
__constant__ int a_f[K];
#include "crt_column.cuh"
#include "crt_exact.cuh"

#ifndef KARATSUBA  // hl by Karatsuba's (h + l)(h' + l') - h h' - l l': 3 multiplies a product
#define KARATSUBA 1  // instead of 4
#endif

// An integer's limbs: h = floor(v / 2**TBITS), l = v mod 2**TBITS, m = h + l (|m| < 2**31:
// exact_limb_bounds)
struct Limbs {
    int h, l, m;
};
__device__ __forceinline__ Limbs limbs(long long v)
{
    const int h = (int)(v >> TBITS), l = (int)(v & ((1LL << TBITS) - 1));
    return Limbs{h, l, h + l};
}

// The three limb sums of one real product, as INT64 bit patterns (their sums and differences
// wrap mod 2**64 where they must: only the combined sums that make Re and Im are in range)
struct Sums {
    unsigned long long hh, hl, ll;
};
// acc + a b for INT32 a, b (mad.wide.s32: one IMAD.WIDE)
__device__ __forceinline__ unsigned long long mad_wide(int a, int b, unsigned long long acc)
{
    unsigned long long d;
    asm("mad.wide.s32 %0, %1, %2, %3;" : "=l"(d) : "r"(a), "r"(b), "l"(acc));
    return d;
}
// s += a b' for the limbs (h, l, h + l) of a at ah[0..2]; with KARATSUBA s.hl gathers
// sum (h + l)(h' + l') until karatsuba_done
__device__ __forceinline__ void mac(Sums& s, const int* ah, const Limbs& b)
{
    s.hh = mad_wide(ah[0], b.h, s.hh);
    s.ll = mad_wide(ah[1], b.l, s.ll);
#if KARATSUBA
    s.hl = mad_wide(ah[2], b.m, s.hl);
#else
    s.hl = mad_wide(ah[0], b.l, s.hl);
    s.hl = mad_wide(ah[1], b.h, s.hl);
#endif
}
__device__ __forceinline__ void karatsuba_done(Sums& s)
{
#if KARATSUBA
    s.hl -= s.hh + s.ll;
#endif
}
__device__ __forceinline__ i128 join(unsigned long long hh, unsigned long long hl,
                                     unsigned long long ll)
{
    return ((i128)(long long)hh << (2 * TBITS)) + ((i128)(long long)hl << TBITS) + (long long)ll;
}

#ifndef THREADS
#define THREADS 128
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
crt_gate_exact(double2* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3, int p4,
               int p5, int gb, int gsum, int* __restrict__ flag)
{
    const int pos[6] = {p0, p1, p2, p3, p4, p5};  // bit j of the gate index at pos[j]
    long long base;
    double2 x[K];
    int e, f;
    if (!thread_column(psi, groups, pos, base, x, e, f, flag)) return;
    Limbs br[K], bi[K], bs[K];
#pragma unroll
    for (int k = 0; k < K; ++k) {
        const double yr = scale2_up(x[k].x, gb - f), yi = scale2_up(x[k].y, gb - f);
        const long long vr = ROUND ? __double2ll_rn(yr) : __double2ll_rz(yr);
        const long long vi = ROUND ? __double2ll_rn(yi) : __double2ll_rz(yi);
        br[k] = limbs(vr);
        bi[k] = limbs(vi);
        bs[k] = limbs(vr + vi);
    }
#pragma unroll
    for (int r = 0; r < K; ++r) {
        Sums s1{0, 0, 0}, s2{0, 0, 0}, s3{0, 0, 0};
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int* a = a_limbs + 3 * (r * K + k);
            mac(s1, a, br[k]);
            mac(s2, a + 3 * K * K, bi[k]);
            mac(s3, a + 6 * K * K, bs[k]);
        }
        karatsuba_done(s1);
        karatsuba_done(s2);
        karatsuba_done(s3);
        const i128 re = join(s1.hh - s2.hh, s1.hl - s2.hl, s1.ll - s2.ll);
        const i128 im = join(s3.hh - s1.hh - s2.hh, s3.hl - s1.hl - s2.hl, s3.ll - s1.ll - s2.ll);
        const int sh = a_f[r] + f - gsum;
        const double vre = exact_value(re), vim = exact_value(im);
        psi[base + member_offset(r, pos)] = scale2_pair(vre, vim, sh);
    }
}

#ifdef EXACT_TEST
// out[i] = exact_value(C'_i) for C'_i = hi[i] 2**64 + lo[i] (lo unsigned), by the digits
// (force = 0: the tie path only at ties) or always by the residues (force = 1)
extern "C" __global__ void exact_value_test(const long long* __restrict__ hi,
                                            const unsigned long long* __restrict__ lo, int n,
                                            int force, double* __restrict__ out)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = exact_value(((i128)hi[i] << 64) + (i128)lo[i], force != 0);
}
#endif
