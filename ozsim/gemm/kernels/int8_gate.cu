// One-pass gate by Ozaki scheme I (int8x{s}, int8-auto) for small gates: psi <- U psi in place.
//
// The same numbers as ozsim.gemm.ozaki1.scheme.int8_zgemm on U (the A operand, split once per
// gate) and the state viewed as B = (2**d, 2**(n-d)) through the target qubits (one column per
// amplitude group, as in dense_gate.cu), in one read and one write of the state:
//   1. the column's exponent e: frexp of the largest |Re|, |Im| of the group (row_exponents);
//   2. its slices: r = ldexp(x, BITS - e); S times q = clip(rint(r), +-(2**BITS - 1)),
//      r = (r - q) 2**BITS (split_rows; every step exact);
//   3. P_t = sum_{i+j=t} A_i B_j for t = S+1 down to 2, by Karatsuba's three real products
//      ArBr, AiBi, (Ar+Ai)(Br+Bi) as FP32 fused multiply-adds of integers (|partial sum| <=
//      17 * 4 * 254**2 < 2**24: exact in any order); Re P_t and Im P_t are then the same
//      integers as the CPU's four products give;
//   4. acc = acc + (Re P_t) 2**(-t BITS) in FP64, t from S+1 down (the CPU's fixed order; the
//      product is exact, so contraction cannot change it), then ldexp(acc, eA[row] + e).
// A's slices (as FP32) and exponents sit in constant memory: every thread of a warp reads the
// same one at the same time, and with the loops unrolled its address is an immediate.
// NaN or Inf in a group sets *flag (the caller raises NonFiniteError).
//
// int8_gate_stats: INT8-AUTO's statistics of B in one read: the loss histogram
// (ozaki1.loss_histogram: e - frexp exponent of each nonzero scalar, clamped at MAXD) summed in
// shared memory, then into hist; NaN/Inf set *flag.
//
// Options: -DGATE_QUBITS=d (1..2) -DSPLITS=s (3..18) -DBITS=b (bits per slice, 7 here).

#ifndef GATE_QUBITS
#error "GATE_QUBITS must be defined"
#endif
#define D GATE_QUBITS
#define K (1 << D)
#ifndef SPLITS
#define SPLITS 3
#endif
#define S SPLITS
#ifndef BITS
#define BITS 7
#endif
#define MAXD 2200
#include "gate_groups.cuh"
#include "exact_int.cuh"

__constant__ float a_slices[3 * K * S * K];  // [Re, Im, Re + Im][row][slice][k] (split_rows')
#define RMAGIC 6755399441055744.0  // 1.5 * 2**52: (y + RMAGIC) - RMAGIC = rint(y), |y| < 2**51
#define RMAGIC32 12582912.0f       // 1.5 * 2**23

// Small integers between FP32, FP64 and INT32 by exponent tricks (exact for |v| < 2**22), not
// the conversion unit (a quarter of the FP64 rate on Hopper); small_to_double is in
// exact_int.cuh.
__device__ __forceinline__ float small_to_float(int v) { return __int_as_float(0x4B400000 + v) - RMAGIC32; }
#if SPLITS * K * 254 * 254 < (1 << 22)  // every |P| < 2**22: the exponent trick is exact
__device__ __forceinline__ int float_to_small(float v) { return __float_as_int(v + RMAGIC32) - 0x4B400000; }
#else  // (d = 2, s > 16) products up to 2**24: the conversion unit
__device__ __forceinline__ int float_to_small(float v) { return __float2int_rn(v); }
#endif
__constant__ int a_exp[K];

extern "C" __global__ void __launch_bounds__(256)
int8_gate(double2* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3, int p4,
          int p5, int* __restrict__ flag)
{
    const int pos[6] = {p0, p1, p2, p3, p4, p5};  // bit j of the gate index at pos[j]
    long long base;
    if (!thread_group(groups, pos, base)) return;
    double2 x[K];
    double mx;
    if (!load_group(psi, base, pos, x, mx)) { atomicOr(flag, 1); return; }
    int e;
    frexp(mx, &e);  // 0 for mx = 0
    const double lim = (double)((1 << BITS) - 1);
    float b[3][K][S];  // [Re, Im, Re + Im][k][slice]
#pragma unroll
    for (int c = 0; c < K; ++c) {
#pragma unroll
        for (int part = 0; part < 2; ++part) {
            double r = scale2(part ? x[c].y : x[c].x, BITS - e);  // exact, |r| < 2**BITS
#pragma unroll
            for (int j = 0; j < S; ++j) {
                // rint by the magic constant (|r| <= 2**BITS + 1): exact, ties to even
                const double q = fmin(fmax((r + RMAGIC) - RMAGIC, -lim), lim);
                b[part][c][j] = small_to_float(__double2loint(q + RMAGIC));
                r = (r - q) * (double)(1 << BITS);  // exact
            }
        }
#pragma unroll
        for (int j = 0; j < S; ++j) b[2][c][j] = b[0][c][j] + b[1][c][j];  // exact
    }
#pragma unroll 1
    for (int row = 0; row < K; ++row) {
        double ar = 0.0, ai = 0.0;
#pragma unroll
        for (int t = S + 1; t >= 2; --t) {
            // Karatsuba: P1 = Ar Br, P2 = Ai Bi, P3 = (Ar + Ai)(Br + Bi); Re = P1 - P2,
            // Im = P3 - P1 - P2 (|partial sums| <= 17 * 4 * 254**2 < 2**24: exact in FP32)
            float p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
#pragma unroll
            for (int i = 1; i < t; ++i) {
                const int j = t - i;
#pragma unroll
                for (int k = 0; k < K; ++k) {
                    const int ia = (row * S + (i - 1)) * K + k;
                    p1 = fmaf(a_slices[ia], b[0][k][j - 1], p1);
                    p2 = fmaf(a_slices[K * S * K + ia], b[1][k][j - 1], p2);
                    p3 = fmaf(a_slices[2 * K * S * K + ia], b[2][k][j - 1], p3);
                }
            }
            const int i1 = float_to_small(p1), i2 = float_to_small(p2), i3 = float_to_small(p3);
            const double re = small_to_double(i1 - i2), im = small_to_double(i3 - i1 - i2);  // exact
            const double w = pow2(-t * BITS);
            // acc + P_t 2**(-t BITS): the product is exact, so a fused multiply-add rounds once,
            // as the CPU's multiply-then-add does
            ar = (t == S + 1) ? re * w : fma(re, w, ar);
            ai = (t == S + 1) ? im * w : fma(im, w, ai);
        }
        const int sh = a_exp[row] + e;
        psi[base + member_offset(row, pos)] = make_double2(scale2(ar, sh), scale2(ai, sh));
    }
}

extern "C" __global__ void __launch_bounds__(256)
int8_gate_stats(const double2* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3,
                int p4, int p5, unsigned long long* __restrict__ hist, int* __restrict__ flag)
{
    const int pos[6] = {p0, p1, p2, p3, p4, p5};
    __shared__ unsigned int sh[MAXD + 1];
    for (int i = threadIdx.x; i <= MAXD; i += blockDim.x) sh[i] = 0;
    __syncthreads();
    int sorted[D];
    sort_positions(pos, sorted);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < groups; g += stride) {
        const long long base = group_base(g, sorted);
        double2 x[K];
        double mx;
        if (!load_group(psi, base, pos, x, mx)) { atomicOr(flag, 1); continue; }
        int e;
        frexp(mx, &e);
#pragma unroll
        for (int c = 0; c < K; ++c) {
#pragma unroll
            for (int part = 0; part < 2; ++part) {
                const double v = part ? x[c].y : x[c].x;
                if (v != 0.0) {
                    int ev;
                    frexp(v, &ev);
                    atomicAdd(&sh[min(e - ev, MAXD)], 1u);
                }
            }
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i <= MAXD; i += blockDim.x)
        if (sh[i]) atomicAdd(&hist[i], (unsigned long long)sh[i]);
}
