// The exact rounding of scheme II's integer product C' (|C'| < P/2) as crt_value rounds it, for
// the one-pass gates that form C' without residues (crt_gate_exact.cu: 64-bit integer products
// on the CUDA cores; crt_gate_slices.cu: byte-slice products on the INT8 tensor cores). The
// including file includes crt_gate.cuh first (the moduli's constants, NMOD, NLIMB) and compiles
// with NVRTC's --device-int128.
#ifndef OZSIM_CRT_EXACT_CUH
#define OZSIM_CRT_EXACT_CUH

#if !Q_FROM_LIMBS
#error "crt_exact.cuh's tie path takes crt_finish's quotient from the digit sums"
#endif
#if NLIMB > 3
#error "crt_exact.cuh takes P of at most 3 digits (gA + gB <= 118: up to 15 moduli)"
#endif

// per modulus: q_p = (P / p)**-1 mod p (the CRT weight), and 2**(LBITS c) mod p, c = 1..L-1
__constant__ int crt_q[NMOD], crt_pow[NMOD * (NLIMB > 1 ? NLIMB - 1 : 1)];
typedef __int128 i128;

// crt_value's sum of the digits of C' (NLIMB <= 3 of them, the lower ones balanced; d1, d2 zero
// past NLIMB) by way of u_p = q_p C' mod p in [0, p) and the digit sums of the CRT, as the
// residue kernels make them (crt_gate.cu): the tie path of exact_value
__device__ __noinline__ double value_from_residues(long long d0, long long d1, long long d2)
{
    const long long dig[3] = {d0, d1, d2};
    double dd[NLIMB];
#pragma unroll
    for (int c = 0; c < NLIMB; ++c) dd[c] = 0.0;
    for (int l = 0; l < NMOD; ++l) {
        const long long p = (long long)mod_p[l];
        long long r = ((dig[0] % p) + p) % p;
#pragma unroll
        for (int c = 1; c < NLIMB; ++c)
            r = (r + (((dig[c] % p) + p) % p) * crt_pow[l * (NLIMB - 1) + c - 1]) % p;
        const double u = (double)((r * crt_q[l]) % p);
#pragma unroll
        for (int c = 0; c < NLIMB; ++c) dd[c] = fma(u, crt_m[l * NLIMB + c], dd[c]);  // exact
    }
    return crt_finish(0.0, dd);
}

// The digit offsets: sum_c 2**(LBITS c + LBITS - 1) over the balanced digits c < NLIMB - 1
__device__ __forceinline__ i128 digit_bias()
{
    i128 b = 0;
#pragma unroll
    for (int c = 0; c + 1 < NLIMB; ++c) b += (i128)1 << (LBITS * c + LBITS - 1);
    return b;
}

// crt_value's sum of the digits of E = C' + digit_bias(): bits[c] = bits [LBITS c, LBITS (c + 1))
// of E for c < L - 1, top = E >> (LBITS (L - 1)) (|top| < 2**51). The balanced digits are d_c =
// bits[c] - 2**(LBITS - 1) (a tie, d_c = -2**(LBITS - 1), where those bits are zero), each made a
// double exactly from its bits (the 2**52 trick), then summed as crt_value sums them; at a tie
// (or force_residues) the residues decide (value_from_residues, in value_of_digits; digits_sum
// returns the digits' sum, the digits and whether one is a tie)
__device__ __forceinline__ double digits_sum(const unsigned long long (&bits)[2], long long top,
                                             bool& tie, long long (&dig)[3])
{
    double v = 0.0;
    tie = false;
#pragma unroll
    for (int i = 0; i + 1 < NLIMB; ++i) {
        tie |= bits[i] == 0;
        dig[i] = (long long)bits[i] - (1LL << (LBITS - 1));
        const double di = __hiloint2double(0x43300000 | (int)(bits[i] >> 32), (int)bits[i]) -
                          (0x1p52 + (double)(1LL << (LBITS - 1)));  // exact
        v = i ? di * pow2(LBITS * i) + v : di;  // as crt_value
    }
    dig[NLIMB - 1] = top;
    const double t = __longlong_as_double(0x4338000000000000LL + top) -
                     6755399441055744.0;  // 1.5 * 2**52: exact
    return NLIMB > 1 ? t * pow2(LBITS * (NLIMB - 1)) + v : t;
}

__device__ __forceinline__ double value_of_digits(const unsigned long long (&bits)[2],
                                                  long long top, bool force_residues)
{
    bool tie;
    long long dig[3] = {0, 0, 0};
    const double v = digits_sum(bits, top, tie, dig);
    if (tie || force_residues) return value_from_residues(dig[0], dig[1], dig[2]);
    return v;
}

// C' rounded to FP64 as crt_value rounds it (|C'| < P/2): the digits of E = C' + digit_bias()
// (value_of_digits)
__device__ __forceinline__ double exact_value(i128 c, bool force_residues = false)
{
    const i128 e = c + digit_bias();
    unsigned long long bits[2] = {0, 0};
#pragma unroll
    for (int i = 0; i + 1 < NLIMB; ++i)
        bits[i] = (unsigned long long)(e >> (LBITS * i)) & ((1ull << LBITS) - 1);
    return value_of_digits(bits, (long long)(e >> (LBITS * (NLIMB - 1))), force_residues);
}

#if LBITS == 40
// exact_value of C' = g0 + 2**40 g1 + 2**80 g2 given as three 64-bit parts (|g_r| < 2**62;
// crt_gate_slices.cu's level sums, five levels of 8 bits a part): E's digits by carries in 64
// bits, u_c = g_c + 2**39 + carry (c < L - 1), bits[c] = u_c mod 2**40, carry = floor(u_c /
// 2**40); the top digit is the rest, formed modulo 2**64 (exact: |top| < 2**51)
__device__ __forceinline__ void parts_digits(long long g0, long long g1, long long g2,
                                             unsigned long long (&bits)[2], long long& top)
{
    const unsigned long long mask = (1ull << 40) - 1;
    bits[0] = bits[1] = 0;
    if (NLIMB == 1) {
        top = (long long)((unsigned long long)g0 + ((unsigned long long)g1 << 40));
    } else {
        const long long u0 = g0 + (1LL << 39);
        bits[0] = (unsigned long long)u0 & mask;
        if (NLIMB == 2) {
            top = (long long)((unsigned long long)g1 + (unsigned long long)(u0 >> 40) +
                              ((unsigned long long)g2 << 40));
        } else {
            const long long u1 = g1 + (1LL << 39) + (u0 >> 40);
            bits[1] = (unsigned long long)u1 & mask;
            top = g2 + (u1 >> 40);
        }
    }
}

__device__ __forceinline__ double exact_value_parts(long long g0, long long g1, long long g2)
{
    unsigned long long bits[2];
    long long top;
    parts_digits(g0, g1, g2, bits, top);
    return value_of_digits(bits, top, false);
}

// exact_value_parts where E's digits hold no tie (tie false); where they do, tie is set and the
// value is not crt_value's (the caller takes exact_value_parts for it)
__device__ __forceinline__ double exact_value_parts_fast(long long g0, long long g1, long long g2,
                                                         bool& tie)
{
    unsigned long long bits[2];
    long long top, dig[3];
    parts_digits(g0, g1, g2, bits, top);
    return digits_sum(bits, top, tie, dig);
}
#endif

#endif  // OZSIM_CRT_EXACT_CUH
