// One-pass gate by Ozaki scheme II (int8-crt{N}, int8-crt-auto) for small gates: psi <- U psi.
//
// The same numbers as ozsim.gemm.ozaki2.scheme.int8_crt_zgemm on U (the A operand, analysed
// and reduced once per gate: its weighted residues and norm exponents) and the state viewed as
// B = (2**d, 2**(n-d)) through the target qubits (one column per amplitude group, as in
// dense_gate.cu), in one read and one write of the state. Per group, in registers:
//   1. the norm exponent f of the column (norm_exponents: e from the largest |Re|, |Im|, the
//      exact sum S of the squares of ceil(|x| 2**(NFRAC - e)), f = e - NFRAC + ceil(bl(S) / 2));
//   2. each scalar's integer v = rnd(ldexp(x, gB - f)) (rint, or trunc without ROUND), |v| <=
//      2**gB < 2**(12 NPIECE), cut exactly into NPIECE pieces of 12 bits by truncation;
//   3. per modulus p: a residue of each scalar, acc = sum_i h_i (2**(12 i) mod p) in FP32 (an
//      integer below 7 * 2**12 * 128 < 2**22: exact), less rint(acc fl32(1/p)) p (|r| <= p/2 +
//      1/2: a representative, which is all the products need); the products Re = Ar Br - Ai Bi,
//      Im = Ar Bi + Ai Br as FP32 fused multiply-adds of integers (below 2 * 2**d * 128 * 129 <
//      2**24: exact), and u = Re, Im mod p in [0, p): the unique residues of q_p C' that the GEMM
//      path's Karatsuba products reduce to as well;
//   4. the CRT sums of ozaki2._CRTAccumulator (the quotient estimate sum u fl(1/p), used only
//      through rint, and the base-2**LBITS digit sums, exact integers), then the carries and the
//      one rounding in the CPU's order (finish.cu), and ldexp by fA[row] + f - (gA + gB).
// Same bits as the CPU path. The per-modulus constants and A's residues sit in constant memory
// (the modulus loop index is the same across a warp: uniform loads).
// NaN or Inf in a group sets *flag (the caller raises NonFiniteError).
//
// Options: -DGATE_QUBITS=d -DNMOD=N -DNLIMB=<digits of P> -DROUND=0|1 -DNPIECE=ceil((gB + 1) / 12)
// and the scheme's constants -DNFRAC -DLBITS (ozsim.gemm.ozaki2.moduli).

#define CRT_GATE_A_RESIDUES  // a_res: [modulus][Ar, Ai][row][k], weighted residues
#include "crt_gate.cuh"

__constant__ int a_f[K];
#include "crt_column.cuh"

extern "C" __global__ void __launch_bounds__(128)
crt_gate(double2* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3, int p4,
         int p5, int gb, int gsum, int* __restrict__ flag)
{
    const int pos[6] = {p0, p1, p2, p3, p4, p5};  // bit j of the gate index at pos[j]
    long long base;
    double2 x[K];
    int e, f;
    if (!thread_column(psi, groups, pos, base, x, e, f, flag)) return;
    float h[2][K][NPIECE];  // [part][k][piece]
#pragma unroll
    for (int c = 0; c < K; ++c) {
#pragma unroll
        for (int part = 0; part < 2; ++part) {
            scalar_pieces(scale2(part ? x[c].y : x[c].x, gb - f), h[part][c]);  // (exact)
        }
    }
    double q[K][2], dl[K][2][NLIMB];
#pragma unroll
    for (int r = 0; r < K; ++r)
#pragma unroll
        for (int part = 0; part < 2; ++part) {
            q[r][part] = 0.0;
#pragma unroll
            for (int c = 0; c < NLIMB; ++c) dl[r][part][c] = 0.0;
        }
#pragma unroll 1
    for (int l = 0; l < NMOD; ++l) {
        const float p = mod_p[l], ip = mod_ip[l];
        float b[2][K];
#pragma unroll
        for (int c = 0; c < K; ++c)
#pragma unroll
            for (int part = 0; part < 2; ++part) {
                float acc = 0.0f;
#pragma unroll
                for (int i = 0; i < NPIECE; ++i) acc = fmaf(h[part][c][i], mod_w[l * NPIECE + i], acc);
                b[part][c] = rem32(acc, p, ip);
            }
#if !Q_FROM_LIMBS
        const double invp = crt_invp[l];
#endif
#pragma unroll
        for (int r = 0; r < K; ++r) {
            float tre = 0.0f, tim = 0.0f;
#pragma unroll
            for (int k = 0; k < K; ++k) {
                const float ar = a_res[((l * 2 + 0) * K + r) * K + k];
                const float ai = a_res[((l * 2 + 1) * K + r) * K + k];
                tre = fmaf(ar, b[0][k], tre);
                tre = fmaf(-ai, b[1][k], tre);
                tim = fmaf(ar, b[1][k], tim);
                tim = fmaf(ai, b[0][k], tim);
            }
#pragma unroll
            for (int part = 0; part < 2; ++part) {
                float u = rem32(part ? tim : tre, p, ip);
                if (u < 0.0f) u += p;  // [0, p)
                const double ud = (double)u;
#if !Q_FROM_LIMBS
                q[r][part] = fma(ud, invp, q[r][part]);  // only rint(q) is used
#endif
#pragma unroll
                for (int c = 0; c < NLIMB; ++c)
                    dl[r][part][c] = fma(ud, crt_m[l * NLIMB + c], dl[r][part][c]);  // exact
            }
        }
    }
#pragma unroll
    for (int r = 0; r < K; ++r) {
        double res[2];
#pragma unroll
        for (int part = 0; part < 2; ++part) res[part] = crt_finish(q[r][part], dl[r][part]);
        const int sh = a_f[r] + f - gsum;
        psi[base + member_offset(r, pos)] = make_double2(scale2(res[0], sh), scale2(res[1], sh));
    }
}
