// Scheme II pieces of the one-pass gates (crt_gate.cu, crt_gate_mma.cu): the per-modulus
// constants, a scalar's 13-bit pieces, a residue from them, and the CRT reconstruction of
// ozaki2._CRTAccumulator's sums; first, the options both kernels take (-DGATE_QUBITS=d, -DNMOD,
// -DNLIMB, -DROUND and the scheme's constants -DNFRAC -DLBITS), D and K.
#ifndef OZSIM_CRT_GATE_CUH
#define OZSIM_CRT_GATE_CUH

#ifndef GATE_QUBITS
#error "GATE_QUBITS must be defined"
#endif
#if !defined(NFRAC) || !defined(LBITS)
#error "the scheme II gate kernels need -DNFRAC and -DLBITS (ozsim.gemm.ozaki2.moduli)"
#endif
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

#define NPIECE 6
#define PBITS 13
#define RMAGIC32 12582912.0f  // 1.5 * 2**23
// 2**(13 i) and 2**(-13 i), i < NPIECE: the pieces' weights (exact powers of two)
__device__ constexpr double kScale[NPIECE] = {0x1p0, 0x1p13, 0x1p26, 0x1p39, 0x1p52, 0x1p65};
__device__ constexpr double kInvScale[NPIECE] = {0x1p0, 0x1p-13, 0x1p-26, 0x1p-39, 0x1p-52, 0x1p-65};

#ifdef CRT_GATE_A_RESIDUES  // (crt_gate.cu's A operand in constant memory, declared first)
__constant__ float a_res[NMOD * 2 * K * K];  // [modulus][Ar, Ai][row][k], weighted residues
#endif
__constant__ float mod_p[NMOD], mod_ip[NMOD], mod_w[NMOD * NPIECE];
__constant__ double crt_invp[NMOD], crt_m[NMOD * NLIMB], crt_big_p[NLIMB];

__device__ __forceinline__ float rem32(float x, float p, float ip)
{
    const float q = fmaf(x, ip, RMAGIC32) - RMAGIC32;  // rint(x ip), |x ip| < 2**16
    return fmaf(-q, p, x);  // exact: integers below 2**24
}

// v = rnd(y) (rint, or trunc without ROUND: the one rounding of the scheme) cut exactly into
// NPIECE pieces of PBITS bits by truncation (|h_i| < 2**13; |v| < 2**78)
__device__ __forceinline__ void scalar_pieces(double y, float (&h)[NPIECE])
{
    double v = ROUND ? rint(y) : trunc(y);
#pragma unroll
    for (int i = NPIECE - 1; i > 0; --i) {
        const double hi = trunc(v * kInvScale[i]);  // exact, |hi| < 2**13
        h[i] = (float)hi;
        v -= hi * kScale[i];  // exact: the bits below 2**(13 i)
    }
    h[0] = (float)v;
}

// The value of the CRT sums of one entry (q: the quotient estimate, used only through rint;
// dd: the base-2**LBITS digit sums, exact integers): the carries and the one rounding in the
// CPU's order (ozaki2._CRTAccumulator.finish, finish.cu)
__device__ __forceinline__ double crt_finish(double q, double* dd)
{
    const double radix = ldexp(1.0, LBITS), iradix = ldexp(1.0, -LBITS);
    const double qq = rint(q);
#pragma unroll
    for (int c = 0; c < NLIMB; ++c) dd[c] -= qq * crt_big_p[c];  // exact
#pragma unroll
    for (int c = 0; c + 1 < NLIMB; ++c) {  // balanced digits, exact
        const double carry = rint(dd[c] * iradix);
        dd[c] -= carry * radix;
        dd[c + 1] += carry;
    }
    double v = dd[0];
#pragma unroll
    for (int c = 1; c < NLIMB; ++c) v = dd[c] * ldexp(1.0, LBITS * c) + v;  // exact product
    return v;
}

#endif  // OZSIM_CRT_GATE_CUH
