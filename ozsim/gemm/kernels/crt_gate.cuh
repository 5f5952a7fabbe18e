// Scheme II pieces of the one-pass gates (crt_gate.cu, crt_gate_mma.cu): the per-modulus
// constants, a scalar's 12-bit pieces, a residue from them, and the CRT reconstruction of
// ozaki2._CRTAccumulator's sums; first, the options both kernels take (-DGATE_QUBITS=d, -DNMOD,
// -DNLIMB, -DROUND, -DNPIECE and the scheme's constants -DNFRAC -DLBITS), D and K.
#ifndef OZSIM_CRT_GATE_CUH
#define OZSIM_CRT_GATE_CUH

#ifndef GATE_QUBITS
#error "GATE_QUBITS must be defined"
#endif
#if !defined(NFRAC) || !defined(LBITS)
#error "the scheme II gate kernels need -DNFRAC and -DLBITS (ozsim.gemm.ozaki2.moduli)"
#endif
#include "../ozaki2/kernels/crt_common.cuh"  // (pow2, rint_small, crt_quotient, crt_value)

#define D GATE_QUBITS
#define K (1 << D)
#ifndef NMOD
#define NMOD 2
#endif
#ifndef NLIMB
#define NLIMB 1
#endif
#ifndef ROUND
#define ROUND 1
#endif

#ifndef NPIECE
#define NPIECE 7  // enough for gB <= 83 (20 moduli: gB = 77)
#endif
#if NPIECE > 7
#error "NPIECE <= 7: sum_i |h_i w_i| < 7 * 2**12 * 128 < 2**22 keeps the residues' FP32 sums exact"
#endif
#define PBITS 12
#define RMAGIC32 12582912.0f  // 1.5 * 2**23: x + RMAGIC32 rounds x to an integer, kept in the low bits

#ifdef CRT_GATE_A_RESIDUES  // (crt_gate.cu's A operand in constant memory, declared first)
__constant__ float a_res[NMOD * 2 * K * K];  // [modulus][Ar, Ai][row][k], weighted residues
#endif
// per modulus: p, fl32(1/p), fl32(1/p) rounded up, RMAGIC32 - OFF (OFF: the least multiple of p
// at or above 2**21), and the pieces' weights 2**(12 i) mod p (symmetric)
__constant__ float mod_p[NMOD], mod_ip[NMOD], mod_ipu[NMOD], mod_moff[NMOD], mod_w[NMOD * NPIECE];
// per modulus: p and residue_double's c1s for PRODUCT_START = 0x4B400000, as integers (C1S_TABLE)
__constant__ unsigned mod_pc[2 * NMOD];
// per modulus: RMAGIC32 - OFF_S - (p - 1) / 2, OFF_S the least multiple of 256 p at or above 2**17
// (residue_byte)
__constant__ float mod_soff[NMOD];
// rows 0..15 (moduli; zero past NMOD): the INT8 weights 2**(8 i) mod p (symmetric) of the byte
// digits i = 0..3, 4..7 as two words (crt_gate_mma.cu, TC_SPLIT)
__constant__ unsigned mod_wd[32];
__constant__ double crt_invp[NMOD], crt_m[NMOD * NLIMB], crt_big_p[NLIMB];
// the CRT sums' starting values where each residue enters as 256 + u (residue_double):
// -256 sum_p fl(1/p) (rounded; only rint of the quotient estimate is used), then
// -256 sum_p (P/p)'s digit c (exact integers below 2**53)
__constant__ double crt_start[1 + NLIMB];
// fl(2**(LBITS c) / P): the quotient estimate from the digit sums (Q_FROM_LIMBS)
__constant__ double crt_qw[NLIMB];

__device__ __forceinline__ float rem32(float x, float p, float ip)
{
    const float q = fmaf(x, ip, RMAGIC32) - RMAGIC32;  // rint(x ip), |x ip| < 2**16
    return fmaf(-q, p, x);  // exact: integers below 2**24
}

#ifndef INT_PIECES
#define INT_PIECES 0  // 1 where gB <= 62: v fits an INT64 (scalar_pieces)
#endif
#ifndef SIGNED_MAGIC  // scalar_pieces' sign in the float bits (H200, N = 30, 15 moduli: 5.01-5.03x
#define SIGNED_MAGIC 1  // -> 4.87-4.88x the copy floor at d = 4, 5.38-5.46x -> 5.30-5.42x at 5,
#endif                  // level at 3 and 6; same bits)

// v = rnd(y) (rint, or trunc without ROUND: the one rounding of the scheme) cut exactly into
// NPIECE pieces of PBITS bits by truncation (|h_i| < 2**12, all of v's sign; |v| <= 2**gB <
// 2**(12 NPIECE)): with INT_PIECES the base-2**12 digits of |v| by integer shifts, each made a
// float by the 2**23 trick, signed as v (one conversion a scalar); else in FP64 (two
// conversions and two FP64 operations a piece). The same pieces either way.
__device__ __forceinline__ void scalar_pieces(double y, float (&h)[NPIECE])
{
#if INT_PIECES
    const long long vi = ROUND ? __double2ll_rn(y) : __double2ll_rz(y);
    const unsigned long long a = vi < 0 ? 0ull - (unsigned long long)vi : (unsigned long long)vi;
#if SIGNED_MAGIC  // the sign in the float's bits: -(2**23 + b) + 2**23 = -b, one logic operation
    // and one addition a piece instead of two, an addition and a select (same values; a zero
    // piece of a negative v is +0, not -0, which no sum tells apart)
    const int magic = vi < 0 ? (int)0xCB000000 : 0x4B000000;
    const float unbias = vi < 0 ? 0x1p23f : -0x1p23f;
#pragma unroll
    for (int i = 0; i < NPIECE; ++i)
        h[i] = __int_as_float(magic | (int)((a >> (PBITS * i)) & 0xFFFu)) + unbias;
#else
#pragma unroll
    for (int i = 0; i < NPIECE; ++i) {
        const float p = __int_as_float(0x4B000000 | (int)((a >> (PBITS * i)) & 0xFFFu)) - 0x1p23f;
        h[i] = vi < 0 ? -p : p;
    }
#endif
    return;
#endif
    double v = ROUND ? rint(y) : trunc(y);
#pragma unroll
    for (int i = NPIECE - 1; i > 0; --i) {
        const double hi = trunc(v * pow2(-PBITS * i));  // exact, |hi| < 2**12
        h[i] = (float)hi;
        v = fma(-hi, pow2(PBITS * i), v);  // exact: the bits of v below 2**(12 i)
    }
    h[0] = (float)v;
}

// RMAGIC32 + r for acc = RMAGIC32 + s (an integer |s| < 2**22, exact) and r = s - p rint(s ip),
// ip = fl32(1/p): the symmetric residue of s mod p (below)
__device__ __forceinline__ float reduce_magic(float acc, float p, float ip)
{
    const float q = fmaf(acc - RMAGIC32, ip, RMAGIC32) - RMAGIC32;
    return fmaf(-q, p, acc);
}

// The symmetric residue of R mod p (in [-(p - 1) / 2, p / 2]) in the low byte of the result, for
// w = 0x4B400000 + R, the bits of the float RMAGIC32 + R (|R| <= 2**17), soff = mod_soff's, ipu =
// fl32(1/p) rounded up, pi = p: x = R + OFF_S + h (h = (p - 1) / 2; exact, 0 <= x < 2**19), the
// round-down fma's bits 0x4B000000 + floor(x / p) (x ipu lies within x / (16 p) of x / p, below
// the next integer, as in mod_nonneg), and w less those bits times p: R - floor(x / p) p = (x mod
// p) - h - OFF_S, whose low byte is (x mod p) - h, as 0x4B400000, 0x4B000000 p and OFF_S are 0
// mod 256. Three operations where reduce_magic takes four; the same residue (the one in that
// range), so the same bytes.
__device__ __forceinline__ unsigned residue_byte(int w, float soff, float ipu, unsigned pi)
{
    const float x = __int_as_float(w) - soff;
    const unsigned qb = __float_as_uint(__fmaf_rd(x, ipu, 0x1p23f));
    return (unsigned)w - qb * pi;
}

// The balanced bytes b_i of an integer |v| <= 2**62 (sum_i b_i 2**(8 i) = v, b_i in [-128, 127])
// as two INT8x4 words: byte i of v + 0x80..80 less 128, which as an INT8 is that byte with its top
// bit flipped
__device__ __forceinline__ void balanced_bytes(long long v, unsigned& lo, unsigned& hi)
{
    const unsigned long long w = (unsigned long long)v + 0x8080808080808080ull;
    lo = (unsigned)w ^ 0x80808080u;
    hi = (unsigned)(w >> 32) ^ 0x80808080u;
}

// RMAGIC32 + r with r = sum_i h_i w_i - p rint(sum_i h_i w_i fl32(1/p)) for modulus l: every
// partial sum is an integer s with |s| < 2**22, so RMAGIC32 + s is exact; fl32(1/p) is within
// 2**-24 relative, so with |s / p| < 2**22 / 173 (p >= 173) s fl32(1/p) is within 0.0015 of s / p,
// nearer than the 1 / (2 p) >= 0.00196 between s / p and a tie for odd p: |r| <= (p - 1) / 2
// (p = 256: |r| <= 128, 128 as the byte -128), and the low byte of the result's bits is r as an
// INT8 residue
__device__ __forceinline__ float residue_magic(const float (&h)[NPIECE], int l)
{
    float acc = RMAGIC32;
#pragma unroll
    for (int i = 0; i < NPIECE; ++i) acc = fmaf(h[i], mod_w[l * NPIECE + i], acc);
    return reduce_magic(acc, mod_p[l], mod_ip[l]);
}

// The low bytes of four floats' bits, in order, as one word (INT8 residues from residue_magic)
__device__ __forceinline__ unsigned pack_low_bytes(float a, float b, float c, float d)
{
    return __byte_perm(__byte_perm(__float_as_uint(a), __float_as_uint(b), 0x0040),
                       __byte_perm(__float_as_uint(c), __float_as_uint(d), 0x0040), 0x5410);
}

// v mod p in [0, p) for an integer |v| <= 2**21 (moff = RMAGIC32 - OFF, ipu = fl32(1/p) rounded
// up): x = v + OFF in [0, 2**22 + p) exactly, and x ipu lies in [x / p, x / p + 0.003] (ipu
// within 2**-23 relative), below the next integer (x / p is at least 1 / p >= 0.0039 under it):
// the round-down fma is 2**23 + floor(x / p)
__device__ __forceinline__ float mod_nonneg(int v, float p, float ipu, float moff)
{
    const float x = __int_as_float(0x4B400000 + v) - moff;
    const float q = __fmaf_rd(x, ipu, 0x1p23f) - 0x1p23f;
    return fmaf(-q, p, x);
}

#ifndef CRT_CVT  // a residue to FP64 by the conversion unit (1), or as 256 + u by integer
#define CRT_CVT 0  // arithmetic (0): H200, N = 30, 15 moduli, with Q_FROM_LIMBS, 4.25x -> 4.15x the
#endif             // copy floor at d = 3, 5.24x -> 5.16x at 4, 5.52x -> 5.45x at 5; same bits

// Where the INT8 products' INT32 sums start: residue_double takes w = PRODUCT_START + v, which
// without CRT_CVT is the float 1.5 * 2**23 + v (|v| <= 2**21; 0x4B400000 + 2**21 < 2**31: no
// overflow), so that no addition makes it
#ifndef PRODUCT_START  // (H200, N = 30, 15 moduli, against 0: 5.16-5.24x -> 5.02-5.06x the copy
// floor at d = 4, 5.41-5.59x -> 5.38-5.54x at 5, level at 3; same bits)
#define PRODUCT_START (CRT_CVT ? 0 : 0x4B400000)
#endif

// The FP64 operand of the CRT sums for the product v of modulus p (|v| <= 2**21), given w =
// PRODUCT_START + v: with CRT_CVT the residue u = mod_nonneg(v) in [0, p) converted; else 256 +
// u = 2**8 (1 + u 2**-8), whose high word is 0x40700000 | u << 12 and whose low word is zero,
// made in INT32: mod_nonneg's floor(x / p) read from the bits 0x4B000000 + floor(x / p) of its
// round-down fma, u = v + OFF - floor(x / p) p = w + c1 - (0x4B000000 + floor(x / p)) p (c1 =
// OFF + 0x4B000000 p - PRODUCT_START, mod 2**32; OFF = RMAGIC32 - moff), the high word as
// (w - (0x4B000000 + floor(x / p)) p) << 12 plus c1s = c1 << 12 + 0x40700000 (mod 2**32: a
// multiply-add and a shift-add, residue_c1s; pi = p). The sums then
// start at crt_start (crt_sum_start), which takes the 256's back out: the digit sums stay exact
// integers below 2**53 for up to 20 moduli (20 * 2**8 * 2**40 and 20 * 255 * 2**40 are), the
// quotient estimate moves by a few units of 2**-48.
__device__ __forceinline__ double residue_double(int w, float p, float ipu, float moff,
                                                 unsigned c1s, unsigned pi)
{
#if CRT_CVT
    return (double)mod_nonneg(w - PRODUCT_START, p, ipu, moff);
#else
    const float x = __int_as_float(w + (0x4B400000 - PRODUCT_START)) - moff;
    const unsigned qb = __float_as_uint(__fmaf_rd(x, ipu, 0x1p23f));
    const unsigned t = (unsigned)w - qb * pi;  // u - c1
    return __hiloint2double((int)((t << 12) + c1s), 0);
#endif
}

#ifndef C1S_TABLE  // pi and c1s of modulus l from mod_pc (ozsim.gemm.ozaki2.onepass), not made
// from the float constants by conversions and integer arithmetic: H200, N = 30, 15 moduli,
// 4.02-4.05x -> 3.92x the copy floor at d = 3; level at 4, 5; 7.04-7.33x -> 7.18-7.42x at 6
#define C1S_TABLE (D == 3)
#endif
#if C1S_TABLE && PRODUCT_START != 0x4B400000
#error "C1S_TABLE: mod_pc's c1s are for PRODUCT_START = 0x4B400000"
#endif

// residue_double's c1s for modulus p (its p, moff)
__device__ __forceinline__ unsigned residue_c1s(float p, float moff)
{
    const unsigned c1 = (unsigned)(int)(RMAGIC32 - moff) + 0x4B000000u * (unsigned)p -
                        (unsigned)PRODUCT_START;
    unsigned c1s = (c1 << 12) + 0x40700000u;
    // opaque, else the compiler adds c1 before the shift (an instruction more an entry and
    // modulus: H200, N = 30, 15 moduli, 4.98-5.05x -> 4.92-4.97x the floor at d = 4, 5.38-5.46x
    // -> 5.30-5.44x at 5, level at 3)
    asm("mov.b32 %0, %0;" : "+r"(c1s));
    return c1s;
}

// The starting value of the quotient estimate (c = -1) and of digit sum c of the CRT sums
__device__ __forceinline__ double crt_sum_start(int c)
{
    return CRT_CVT ? 0.0 : crt_start[1 + c];
}

#ifndef Q_FROM_LIMBS  // the quotient from the digit sums (1), or from a sum of its own (0): H200,
#define Q_FROM_LIMBS 1  // N = 30, 15 moduli, 4.68x -> 4.26x the copy floor at d = 3, 5.28x -> 5.23x
#endif                  // at 4, 5.75x -> 5.52-5.65x at 5 (and no spills at 5); same bits

// The value of the CRT sums of one entry (q: the quotient estimate sum u fl(1/p), used only
// through rint; dd: the base-2**LBITS digit sums, exact integers): the carries and the one
// rounding in the CPU's order (ozaki2._CRTAccumulator.finish, finish.cu). With Q_FROM_LIMBS the
// estimate is sum_c dd[c] fl(2**(LBITS c) / P) instead (q unused, so its sum is never made: one
// FP64 multiply-add an entry and modulus fewer): X = sum_c dd[c] 2**(LBITS c) = sum_p u_p P/p is
// below N P, so X / P < N <= 20 is found within a few units of 2**-48, and rint gives the same
// exact quotient as the CPU's estimate (|C'| < P/2 (1 - 2**-40): the margin is 2**-41)
__device__ __forceinline__ double crt_finish(double q, double (&dd)[NLIMB])
{
#if Q_FROM_LIMBS
    const double qq = crt_quotient(dd, crt_qw);
#else
    const double qq = rint_small(q);
#endif
    return crt_value(dd, qq, crt_big_p);  // (crt_common.cuh; dd overwritten)
}

// A column's norm exponent f (ozaki2.norm_exponents) from its exponent e and the exact sum S of
// the squares of ceil(|x| 2**(NFRAC - e)) over its scalars: e - NFRAC + ceil(bl(S) / 2), 0 for
// a zero column
__device__ __forceinline__ int norm_exponent_of(int e, double s)
{
    int bl;
    frexp(s, &bl);
    return s > 0.0 ? e - NFRAC + (bl + 1) / 2 : 0;
}

// TC_SPLIT (crt_gate_mma.cu; crt_residues_tc.cu): a scalar's residues of every modulus from its
// 8 balanced bytes (balanced_bytes) by four m16n8k32 products, each lane one scalar a round.
// Product t's A operand, lane (g, tq)'s fragment: W's rows g and g + 8 (mod_wd, the weights
// 2**(8 i) mod p of moduli g, g + 8) in k columns 4 t..4 t + 3 and 16 + 4 t.. where t = tq, else
// zeros; its B operand each lane's (lo, hi) words; so lane (g, tq) gets, of moduli g and g + 8,
// the sums R = v mod p of the scalars of lanes 8 tq + t (column 2 tq) and 8 tq + 4 + t (2 tq + 1).
__device__ __forceinline__ uint4 tc_weights(int g, int tq, int t)
{
    return t == tq ? make_uint4(mod_wd[2 * g], mod_wd[2 * g + 16], mod_wd[2 * g + 1],
                                mod_wd[2 * g + 17])
                   : make_uint4(0u, 0u, 0u, 0u);
}

// residue_byte's constants of lane (g, .)'s moduli g and g + 8 (rows past NMOD: the last
// modulus's, whose bytes are never stored)
struct TcRows {
    float soff[2], ipu[2];
    unsigned p[2];
};
__device__ __forceinline__ TcRows tc_rows(int g)
{
    const int row0 = g < NMOD ? g : NMOD - 1, row1 = g + 8 < NMOD ? g + 8 : NMOD - 1;
    return TcRows{{mod_soff[row0], mod_soff[row1]}, {mod_ipu[row0], mod_ipu[row1]},
                  {(unsigned)mod_p[row0], (unsigned)mod_p[row1]}};
}

// The four products' accumulators c[t] (started at 0x4B400000, |R| <= 8 128**2 = 2**17) as
// residue words: wd[q] for (row g, col 2 tq), (g, 2 tq + 1), (g + 8, 2 tq), (g + 8, 2 tq + 1),
// the symmetric residues of the scalars of lanes 8 tq + 0..3 (q even) or 8 tq + 4..7 (q odd)
// as bytes 0..3
__device__ __forceinline__ void tc_residue_words(const int (&c)[4][4], const TcRows& k,
                                                 unsigned (&wd)[4])
{
#pragma unroll
    for (int q = 0; q < 4; ++q) {
        const int h = q < 2 ? 0 : 1;
        float r[4];
#pragma unroll
        for (int t = 0; t < 4; ++t)
            r[t] = __uint_as_float(residue_byte(c[t][q], k.soff[h], k.ipu[h], k.p[h]));
        wd[q] = pack_low_bytes(r[0], r[1], r[2], r[3]);
    }
}

#endif  // OZSIM_CRT_GATE_CUH
