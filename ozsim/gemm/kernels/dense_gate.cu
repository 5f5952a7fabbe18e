// One-pass dense gate in FP64 on CUDA cores: psi <- U psi on d target qubits, in place.
//
// The state psi holds 2**n complex128 amplitudes. The d target qubits sit at bit positions
// pos_0 .. pos_{d-1} of the amplitude index (pos_j carries bit j of the gate's row/column
// index: Qiskit's little-endian convention). An amplitude group is the 2**d amplitudes that
// share the other n - d bits; group g's base index is g with a zero bit inserted at each target
// position (ascending), and member c sits at base + sum_j bit_j(c) << pos_j.
//
// SPLIT (1 or 2) threads take one group; each loads its 2**d / SPLIT members into registers,
// forms its part of every output row (FP64 fused multiply-adds over its members in order),
// the parts meet by a warp shuffle, and the thread owning row r writes it back over the input.
// Groups are disjoint, so the update is in place and the state crosses HBM once in and once
// out. The gate sits in constant memory: the threads of a warp read the same U[r][c] at the same
// time (a broadcast), and where the loops unroll its address is an immediate.
//
// Consecutive threads take consecutive groups: where no target is among the lowest bits a warp's
// loads are contiguous; where one is, the loads of members c and c ^ 1 touch the same sectors
// and meet in L1/L2, so DRAM still sees each sector once.
//
// Targets on the lowest address bits (dense_gate_low): a warp's loads of member c then stride by
// K amplitudes (all targets below bit 5) or by 2 (bit 0 a target), and measured on an H200 the
// kernel above takes 1.4x (d = 1, 2) to 2.1x (d = 3) the copy floor in FP64 and up to 7.9x in
// FP32 (1.03-1.06x with the targets on high bits). dense_gate_low stages the block's amplitudes
// through shared memory instead: the 256 groups of a block cover 2**(8+d) amplitudes that form
// 2**(3+d) aligned segments of 32 (the group index's low bits fill the non-target bits below 5),
// each loaded and stored by one warp instruction of 32 consecutive amplitudes; in between, each
// thread applies the gate to its group from shared memory. Needs groups % 256 == 0 and
// 2**(8+d) amplitudes of shared memory (d <= 3 in FP64, d <= 4 in FP32: 36 KiB with the pad).
//
// Compiled once per d: GATE_QUBITS = 1..6 (SPLIT = 2 at d = 6 keeps 64 values a thread), and
// per precision: SINGLE=1 takes complex64 amplitudes and gate (FP32 fused multiply-adds; cgemm's
// one-pass kernel), else complex128.
//
// Multiword gates (SINGLE=1, d <= 5; ozsim.gemm.single.onepass): WORDS=1 is tf32x3 (PRODUCTS=3)
// or tf32x4 (PRODUCTS=4), WORDS=2 is fp16-le. The gate's words (hi in gate_u, lo in gate_l; for
// fp16-le scaled by its rows' powers of two gate_s) are made once per gate on the host side;
// each thread splits its group's amplitudes into words in registers (TF32: hi = tf32(x), lo =
// tf32(x - hi); fp16-le: the group's Re and Im parts each scaled by a power of two into
// [2**14, 2**15) at their largest, hi = fp16(x), lo = fp16((x - hi) 2**10)), the very words of
// the GEMM path. The real products ArBr, AiBi, ArBi, AiBr of the stacked form each keep two FP32
// accumulators, hi*hi and the cross terms (hi*lo + lo*hi, + lo*lo for tf32x4): every word
// product is exact in FP32 and every sum rounds to nearest, as the schemes' papers assume; the
// tensor cores' FP32 sums are truncated instead, which at k = 2**d <= 16 leaves a bias of half
// a unit a gate that adds up over a circuit. Then p = c1 + c2 (fp16-le: (c1 + 2**-10 c2) times
// 2**-(sA + sB)), Re = ArBr - AiBi, Im = ArBi + AiBr (where SPLIT = 2 the two lanes' accumulators
// meet first). About 3x cgemm's FP32 work: 12 2**d fused multiply-adds an amplitude.

#ifndef GATE_QUBITS
#error "GATE_QUBITS must be defined (1..6)"
#endif
#define D GATE_QUBITS
#define K (1 << D)
#define SPLIT (D >= 6 ? 2 : 1)
#define KH (K / SPLIT)

#ifndef WORDS
#define WORDS 0
#endif
#ifndef PRODUCTS
#define PRODUCTS 3
#endif
#if SINGLE
typedef float real;
typedef float2 complex_t;
#else
typedef double real;
typedef double2 complex_t;
#endif
#if WORDS && (!SINGLE || D > 5)
#error "multiword gates (WORDS = 1, 2) are single precision, d <= 5 (U's two words: 64 KiB of constant memory at d = 6)"
#endif

__constant__ complex_t gate_u[K * K];  // row-major U (its hi words), little-endian over the targets
#include "gate_groups.cuh"

#if WORDS
#include "word_rounding.cuh"
__constant__ complex_t gate_l[K * K];  // the lo words of U's Re and Im
__constant__ int gate_s[2 * K];        // fp16-le: the shifts of Ar's rows, then of Ai's rows

// the words of the thread's KH members of a group (Re and Im each as hi + lo) and, fp16-le, the
// group's shifts of Re and Im
struct group_words {
    float hr[KH], lr[KH], hi[KH], li[KH];
    int sr, si;
};

// x 2**s, rounded once (ldexpf's result; a multiplication by a normal power of two where s
// allows, ldexpf's slower path beyond)
__device__ __forceinline__ float scale2f(float x, int s)
{
    return (s >= -126 && s <= 127) ? x * __int_as_float((s + 127) << 23) : ldexpf(x, s);
}

__device__ __forceinline__ int le_shift(float m)  // 2**14 <= m 2**s < 2**15; 0 for m = 0
{
    int e;
    frexpf(m, &e);
    return m > 0.0f ? 15 - e : 0;
}

__device__ __forceinline__ void two_words(float x, int shift, float& hi, float& lo)
{
#if WORDS == 1
    hi = ozs_round_tf32(x);
    lo = ozs_round_tf32(__fsub_rn(x, hi));
#else
    const float xs = scale2f(x, shift);  // exact: a power of two, |xs| < 2**15
    hi = ozs_round_fp16(xs);
    lo = ozs_round_fp16(__fmul_rn(__fsub_rn(xs, hi), 1024.0f));
#endif
}

__device__ __forceinline__ void split_group(const complex_t (&x)[KH], group_words& w)
{
    w.sr = w.si = 0;
#if WORDS == 2
    float mr = 0.0f, mi = 0.0f;
#pragma unroll
    for (int c = 0; c < KH; ++c) {
        mr = fmaxf(mr, fabsf(x[c].x));
        mi = fmaxf(mi, fabsf(x[c].y));
    }
#if SPLIT == 2
    mr = fmaxf(mr, __shfl_xor_sync(0xffffffffu, mr, 1));
    mi = fmaxf(mi, __shfl_xor_sync(0xffffffffu, mi, 1));
#endif
    w.sr = le_shift(mr);
    w.si = le_shift(mi);
#endif
#pragma unroll
    for (int c = 0; c < KH; ++c) {
        two_words(x[c].x, w.sr, w.hr[c], w.lr[c]);
        two_words(x[c].y, w.si, w.hi[c], w.li[c]);
    }
}

// one real product's accumulators: c1 += a_hi b_hi, c2 += a_hi b_lo + a_lo b_hi (+ a_lo b_lo)
__device__ __forceinline__ void word_fma(float ah, float al, float bh, float bl, float& c1,
                                         float& c2)
{
    c1 = fmaf(ah, bh, c1);
    c2 = fmaf(ah, bl, c2);
    c2 = fmaf(al, bh, c2);
#if WORDS == 1 && PRODUCTS == 4
    c2 = fmaf(al, bl, c2);
#endif
}

__device__ __forceinline__ float word_sum(float c1, float c2, int shift)
{
#if WORDS == 1
    return __fadd_rn(c1, c2);
#else
    return scale2f(__fadd_rn(c1, __fmul_rn(c2, 0x1p-10f)), -shift);
#endif
}

// row r of U times the group: the accumulators c1, c2 of ArBr, AiBi, ArBi, AiBr over the
// thread's members, summed over the SPLIT lanes of the group, then combined
__device__ __forceinline__ complex_t gate_row(int r, int part, const group_words& w)
{
    const complex_t* uh = gate_u + r * K + part * KH;
    const complex_t* ul = gate_l + r * K + part * KH;
    float c[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // rr1 rr2 ii1 ii2 ri1 ri2 ir1 ir2
#pragma unroll
    for (int i = 0; i < KH; ++i) {
        const complex_t h = uh[i], l = ul[i];
        word_fma(h.x, l.x, w.hr[i], w.lr[i], c[0], c[1]);  // Ar Br
        word_fma(h.y, l.y, w.hi[i], w.li[i], c[2], c[3]);  // Ai Bi
        word_fma(h.x, l.x, w.hi[i], w.li[i], c[4], c[5]);  // Ar Bi
        word_fma(h.y, l.y, w.hr[i], w.lr[i], c[6], c[7]);  // Ai Br
    }
#if SPLIT == 2
#pragma unroll
    for (int j = 0; j < 8; ++j) c[j] += __shfl_xor_sync(0xffffffffu, c[j], 1);
#endif
    const int sr = WORDS == 2 ? gate_s[r] : 0, si = WORDS == 2 ? gate_s[K + r] : 0;
    return complex_t{__fsub_rn(word_sum(c[0], c[1], sr + w.sr), word_sum(c[2], c[3], si + w.si)),
                     __fadd_rn(word_sum(c[4], c[5], sr + w.si), word_sum(c[6], c[7], si + w.sr))};
}
#else
// row r of U times the thread's KH members (part of SPLIT) of the group: fused multiply-adds
// over the members in order (dense_gate and dense_gate_low: the same sums, the same bits)
__device__ __forceinline__ complex_t gate_row(int r, int part, const complex_t (&x)[KH])
{
    const complex_t* u = gate_u + r * K + part * KH;
    real re = 0, im = 0;
#pragma unroll
    for (int i = 0; i < KH; ++i) {
        const complex_t w = u[i];
        re = fma(w.x, x[i].x, re);
        re = fma(-w.y, x[i].y, re);
        im = fma(w.x, x[i].y, im);
        im = fma(w.y, x[i].x, im);
    }
    return complex_t{re, im};
}
#endif

extern "C" __global__ void __launch_bounds__(256)
dense_gate(complex_t* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3, int p4,
           int p5)
{
    const int pos[6] = {p0, p1, p2, p3, p4, p5};  // target positions, bit j of the gate index
    const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long g = tid / SPLIT;
    const int part = (int)(tid % SPLIT);
    const bool active = g < groups;  // SPLIT lanes of a group are all active or all not
    int sorted[D];
    sort_positions(pos, sorted);
    const long long base = group_base(active ? g : 0, sorted);
    complex_t x[KH];
#pragma unroll
    for (int i = 0; i < KH; ++i)
        x[i] = active ? psi[base + member_offset(part * KH + i, pos)] : complex_t{0, 0};
#if WORDS
    group_words w;
    split_group(x, w);
#endif
#pragma unroll 1
    for (int r = 0; r < K; ++r) {
#if WORDS
        const complex_t y = gate_row(r, part, w);  // (the SPLIT lanes' sums met inside)
#else
        complex_t y = gate_row(r, part, x);
#if SPLIT == 2
        y.x += __shfl_xor_sync(0xffffffffu, y.x, 1);
        y.y += __shfl_xor_sync(0xffffffffu, y.y, 1);
#endif
#endif
        if (active && r / KH == part) psi[base + member_offset(r, pos)] = y;
    }
}

#if D <= 3 || (SINGLE && D <= 4)
// Segment seg of block b (module comment): tq = seg >> nhigh selects the block's groups
// 32 >> nlow apart (the non-target bits below 5 zero), ch = seg & ((1 << nhigh) - 1) the values
// of the targets at bits >= 5 (in gate-index order); its first amplitude's address.
__device__ __forceinline__ long long segment_address(long long g0, int seg, int nlow, int nhigh,
                                                     const int (&pos)[6], const int (&sorted)[D])
{
    const int tq = seg >> nhigh, ch = seg & ((1 << nhigh) - 1);
    int c = 0, k = 0;
#pragma unroll
    for (int j = 0; j < D; ++j)
        if (pos[j] >= 5) c |= ((ch >> k++) & 1) << j;
    return group_base(g0 + ((long long)tq << (5 - nlow)), sorted) + member_offset(c, pos);
}

__device__ __forceinline__ int padded(int i) { return i + (i >> D); }

extern "C" __global__ void __launch_bounds__(256)
dense_gate_low(complex_t* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3,
               int p4, int p5)
{
    // 2**(3+D) segments of 32 amplitudes, one pad slot after every K (element i at i + i / K):
    // with the targets on the lowest bits thread t reads elements t K .. t K + K - 1, and the
    // pad turns that stride of K into K + 1 (no bank conflicts)
    __shared__ complex_t tile[256 * K + 256];
    const int pos[6] = {p0, p1, p2, p3, p4, p5};
    int sorted[D];
    sort_positions(pos, sorted);
    int nlow = 0;
#pragma unroll
    for (int j = 0; j < D; ++j) nlow += pos[j] < 5;
    const int nhigh = D - nlow, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const long long g0 = (long long)blockIdx.x * 256;
    for (int seg = warp; seg < 8 * K; seg += 8)  // coalesced: 32 consecutive amplitudes
        tile[padded(seg * 32 + lane)] =
            psi[segment_address(g0, seg, nlow, nhigh, pos, sorted) + lane];
    __syncthreads();
    // thread t's group: its members' places in the tile
    const int t = threadIdx.x, tq = t >> (5 - nlow);
    const long long base = group_base(g0 + t, sorted);
    int at[K];
    complex_t x[K];
#pragma unroll
    for (int c = 0; c < K; ++c) {
        int ch = 0, k = 0;
#pragma unroll
        for (int j = 0; j < D; ++j)
            if (pos[j] >= 5) ch |= ((c >> j) & 1) << k++;
        at[c] = padded(((tq << nhigh) | ch) * 32 + (int)((base + member_offset(c, pos)) & 31));
        x[c] = tile[at[c]];
    }
#if WORDS
    group_words w;
    split_group(x, w);
#endif
#pragma unroll 1
    for (int r = 0; r < K; ++r)  // (only this thread reads or writes its group)
#if WORDS
        tile[at[r]] = gate_row(r, 0, w);
#else
        tile[at[r]] = gate_row(r, 0, x);
#endif
    __syncthreads();
    for (int seg = warp; seg < 8 * K; seg += 8)
        psi[segment_address(g0, seg, nlow, nhigh, pos, sorted) + lane] =
            tile[padded(seg * 32 + lane)];
}
#endif
