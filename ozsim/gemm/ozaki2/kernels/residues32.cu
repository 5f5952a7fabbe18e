// Scheme II, stage "residues" in FP32 (ozsim.gemm.ozaki2.cuda.residues_gpu, plans keeping at
// most 70 bits): crt_residues32_<planes>[_tab].
// Options: those of crt_common.cuh; -DNP=<pieces> -DPB32=<bits per piece> (ozaki2.cuda.pieces32);
// -DNMODR=<moduli, 2..20> and, per modulus l < NMODR, its constants as float literals
// -DRES32_P<l>=<p> -DRES32_IP<l>=<fl32(1/p)> -DRES32_W<l>_<i>=<W_i>, i = 0..4
// (ozaki2.cuda._residue32_options; one value an option: nvcc would split a list at commas).
#ifndef NMODR
#error "residues32.cu needs -DNMODR and the constants -DRES32_P<l>, _IP<l>, _W<l>_<i>"
#endif
#include "pieces.cuh"

// The same residues for plans that keep at most 70 bits, in FP32 arithmetic (twice the FP64
// rate; the kernel is issue-bound): v is split exactly into NP balanced pieces of PB32 bits
// (crt_pieces<..., true>: |h_i| <= 2**(PB32 - 1) below the top piece, held as FP32), and per
// modulus acc = sum_i h_i W_i (W_i = 2**(PB32 i) * weight mod p, |W_i| <= 128) is an integer
// with |acc| < 2**23 (pieces32() picks NP and PB32 so): exact in FP32 in any order, FMAs
// included. The residue is r = acc - q p with q = rint(acc ip), ip = fl32(1/p), by magic-number
// rounding (acc ip + 1.5 2**23 rounds to the integer grid; |acc ip| < 2**16):
// |acc / p - q| <= 1/2 + |acc| 2**-24 / p, so |r| <= p/2 + |acc| 2**-24 < p/2 + 1/2. For odd p
// that is |r| <= (p - 1)/2, the symmetric residue itself; for p = 256, |r| <= 128, whose low
// byte is the residue (128 and -128 share the byte 0x80). No correction steps: the bytes equal
// those of symmod (and the CPU's ozaki2.residues). Re + Im: s = r_re + r_im (|s| < 2 p) by the
// same step. The per-modulus constants p, ip, W_i are literals in res32_all (the options
// -DRES32_P<l>, -DRES32_IP<l>, -DRES32_W<l>_<i>, made per N, PB32 and weighting by
// ozaki2.cuda._residue32_options), so the fully unrolled loop over moduli loads none.
#define RMAGIC32 12582912.0f  // 1.5 * 2**23

__device__ __forceinline__ float rem32(float x, float p, float ip)
{
    const float q = fmaf(x, ip, RMAGIC32) - RMAGIC32;  // rint(x ip)
    return fmaf(-q, p, x);  // exact: integers below 2**24
}

// the low bytes of 4 small integer-valued floats (|r| <= 2**22) as one little-endian word
__device__ __forceinline__ unsigned int pack4(const float (&r)[4])
{
    const unsigned int b0 = __float_as_uint(r[0] + RMAGIC32), b1 = __float_as_uint(r[1] + RMAGIC32);
    const unsigned int b2 = __float_as_uint(r[2] + RMAGIC32), b3 = __float_as_uint(r[3] + RMAGIC32);
    return __byte_perm(__byte_perm(b0, b1, 0x0040u), __byte_perm(b2, b3, 0x0040u), 0x5410u);
}

#ifndef NP
#define NP 5
#endif
#ifndef PB32
#define PB32 13
#endif
// One modulus: the residue planes of 4 values (h: [part][c][piece]) at d, planes ps apart:
// PLANES 2 [r, i], 3 [r, i, r + i], 4 [r, -i, r, i] (-i of -128 mod 256 is the same byte).
template <int PLANES>
__device__ __forceinline__ void res32_mod(const float (&h)[2][4][NP], signed char* d,
                                          long long ps, float p, float ip, float w0, float w1,
                                          float w2, float w3, float w4)
{
    const float w[5] = {w0, w1, w2, w3, w4};
    float rr[3][4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
#pragma unroll
        for (int part = 0; part < 2; ++part) {
            float acc = h[part][c][0] * w[0];
#pragma unroll
            for (int i = 1; i < NP; ++i) acc = fmaf(h[part][c][i], w[i], acc);  // exact
            rr[part][c] = rem32(acc, p, ip);
        }
        if (PLANES == 3) rr[2][c] = rem32(rr[0][c] + rr[1][c], p, ip);
        if (PLANES == 4) rr[2][c] = -rr[1][c];
    }
    const unsigned int wr = pack4(rr[0]), wi = pack4(rr[1]);
    *(unsigned int*)d = wr;
    if (PLANES == 4) {
        *(unsigned int*)(d + ps) = pack4(rr[2]);
        *(unsigned int*)(d + 2 * ps) = wr;
        *(unsigned int*)(d + 3 * ps) = wi;
    } else {
        *(unsigned int*)(d + ps) = wi;
        if (PLANES == 3) *(unsigned int*)(d + 2 * ps) = pack4(rr[2]);
    }
}

// All NMODR moduli, modulus l's planes ms bytes after modulus l - 1's, with its p, fl32(1/p) and
// W_0 .. W_4 as float literals (RES32_P<l>, RES32_IP<l>, RES32_W<l>_0 .. RES32_W<l>_4).
#if NMODR > 20
#error "residues32.cu holds at most 20 moduli"
#endif
#define RES32_MOD(l)                                                                         \
    res32_mod<PLANES>(h, d + l##LL * ms, ps, RES32_P##l, RES32_IP##l, RES32_W##l##_0,       \
                      RES32_W##l##_1, RES32_W##l##_2, RES32_W##l##_3, RES32_W##l##_4);
template <int PLANES>
__device__ __forceinline__ void res32_all(
    const float (&h)[2][4][NP], signed char* d, long long ps, long long ms)
{
#if NMODR > 0
    RES32_MOD(0)
#endif
#if NMODR > 1
    RES32_MOD(1)
#endif
#if NMODR > 2
    RES32_MOD(2)
#endif
#if NMODR > 3
    RES32_MOD(3)
#endif
#if NMODR > 4
    RES32_MOD(4)
#endif
#if NMODR > 5
    RES32_MOD(5)
#endif
#if NMODR > 6
    RES32_MOD(6)
#endif
#if NMODR > 7
    RES32_MOD(7)
#endif
#if NMODR > 8
    RES32_MOD(8)
#endif
#if NMODR > 9
    RES32_MOD(9)
#endif
#if NMODR > 10
    RES32_MOD(10)
#endif
#if NMODR > 11
    RES32_MOD(11)
#endif
#if NMODR > 12
    RES32_MOD(12)
#endif
#if NMODR > 13
    RES32_MOD(13)
#endif
#if NMODR > 14
    RES32_MOD(14)
#endif
#if NMODR > 15
    RES32_MOD(15)
#endif
#if NMODR > 16
    RES32_MOD(16)
#endif
#if NMODR > 17
    RES32_MOD(17)
#endif
#if NMODR > 18
    RES32_MOD(18)
#endif
#if NMODR > 19
    RES32_MOD(19)
#endif
}

template <int PLANES, bool TAB>
__device__ __forceinline__ void crt_residues32_body(
    const double2* __restrict__ x, long long rows, long long ra, long long k, long long kpad,
    long long sr, long long sc, const long long* __restrict__ roff,
    const long long* __restrict__ koff, const int* __restrict__ f, int bits,
    signed char* __restrict__ out, int qb, int rnd)
{
    const long long nq = kpad / 4;
    const int rb = qb ? 32 / qb : 1;
    const long long nrt = (ra + rb - 1) / rb;
    const long long total = qb ? nrt * ((nq + qb - 1) / qb) * 32 : ra * nq;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long ps = ra * kpad;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += stride) {
        long long r, q;
        if (!crt_item(idx, qb, nrt, nq, ra, r, q)) continue;
        float h[2][4][NP];
        crt_pieces<float, PB32, NP, true, TAB>(x, rows, k, sr, sc, roff, koff, f, bits, rnd, r,
                                               q, h);
        res32_all<PLANES>(h, out + r * kpad + q * 4, ps, PLANES * ps);
    }
}

#define RES32_KERNEL(PL, TAB, NAME)                                                           \
    extern "C" __global__ void NAME(                                                         \
        const double2* __restrict__ x, long long rows, long long ra, long long k,           \
        long long kpad, long long sr, long long sc, const long long* __restrict__ roff,    \
        const long long* __restrict__ koff, const int* __restrict__ f, int bits,           \
        signed char* __restrict__ out, int qb, int rnd)                                     \
    {                                                                                        \
        crt_residues32_body<PL, TAB>(x, rows, ra, k, kpad, sr, sc, roff, koff, f, bits, out, \
                                     qb, rnd);                                               \
    }
RES32_KERNEL(2, false, crt_residues32_2)
RES32_KERNEL(3, false, crt_residues32_3)
RES32_KERNEL(4, false, crt_residues32_4)
RES32_KERNEL(2, true, crt_residues32_2_tab)  // X through offset tables
RES32_KERNEL(3, true, crt_residues32_3_tab)
RES32_KERNEL(4, true, crt_residues32_4_tab)
