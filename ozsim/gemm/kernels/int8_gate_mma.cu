// One-pass gate by Ozaki scheme I on INT8 tensor cores (int8x{s}, int8-auto), 3 <= d <= 6:
// psi <- U psi in place, in one read and one write of the state.
//
// The same numbers as ozsim.gemm.ozaki1.scheme.int8_zgemm on U (the A operand, split once per
// gate on the host side into mma.sync fragments) and the state viewed as B = (2**d, 2**(n-d))
// through the target qubits (one column per amplitude group, gate_groups.cuh). A block takes a
// tile of NC consecutive columns at a time (a persistent grid):
//   1. split: TPC threads per column load its K amplitudes (MPT each) straight from psi (at
//      d <= 4 during the previous tile's products), reduce the column's largest |Re|, |Im| by
//      warp shuffles, e = its frexp exponent (row_exponents), and cut each scalar into S slices
//      as split_rows does, r = ldexp(x, BITS - e), q = clip(rint(r), +-(2**BITS - 1)), r = (r -
//      q) 2**BITS, here on r 2**(-BITS j) (the same numbers scaled by powers of two: 3 FP64
//      additions and a clip a slice, every step exact), four INT8 slices to a 32-bit
//      word, into shared memory as B_j[column][kk] (kk < K: Re of member kk, else Im of kk - K;
//      at d = 3 the inner dimension is KD = 32 and A's columns 16..31 are zero);
//   2. products: the real embedding [[Ar, -Ai], [Ai, Ar]] of each of A's slices times [Br; Bi]
//      by mma.sync m16n8k32 s8 x s8 -> s32. For t = S+1 down to 2 the INT32 accumulator holds
//      P_t = sum_{i+j=t} A_i B_j (|P_t| <= S * KD * 127**2 < 2**31: exact in any order); its
//      rows are Re P_t = ArBr - AiBi and Im P_t = ArBi + AiBr, the integers the CPU computes;
//   3. acc = acc + P_t 2**(-t BITS) in FP64 from t = S+1 down (the CPU's order; the product is
//      exact, so the fused multiply-add rounds as the CPU's add does), then ldexp(acc, eA[row] +
//      e), written back in place.
// A's fragments come from shared memory (ld.shared.v4), B's by ldmatrix.x4 (two n tiles a load).
// The products' i loop is unrolled, and at d <= 4, S <= 10 the t loop as well (UNROLL: every
// address an immediate offset; with two blocks an SM, 128 registers a thread): the loop's
// addressing and counters were half the kernel's instructions (H200, N = 30, S = 8: 3.1-3.2x
// the copy floor rolled, 2.2x unrolled; at d = 5, 6 the unrolled code spills).
// Rows of the embedding are ordered so that one mma tile's rows 0..7 are the real parts and rows
// 8..15 the imaginary parts of the same 8 members: a thread's accumulator fragment holds both
// parts of 2 output amplitudes, written straight to psi (no staging).
//
// WGMMA (d = 5, 6 on Hopper, compiled for sm_90a): the products by wgmma.mma_async m64n32k32
// (wgmma_s8.cuh) instead: a warpgroup multiplies 64 rows of A's slice (a 64-row block of the
// embedding, rows in the same order, so that warp w meets m tile 4 mi + w) by 32 columns of B's,
// both read by descriptor from shared memory, where A is a core-matrix image
// (ozsim.gemm._mma_gate.core_image) and the split writes B K-major in 8 x 16-byte core
// matrices. mma.sync had each warp read its operands from shared memory for every product
// (Nsight Compute, d = 5, S = 8: L1/shared-memory pipe 77% busy, 27 times the tile's state
// bytes read there); a warpgroup's wgmma reads B once for 64 rows: H200, N = 30, S = 8, the
// kernel alone 3.3x -> 2.9x the copy floor at d = 5 (128 threads, 4 blocks an SM), 5.3x -> 4.5x
// at d = 6 (256 threads, next tile's loads issued before the products). Same bits: P_t is the
// same integer, the accumulation unchanged.
//
// int8_gate_mma_stats: INT8-AUTO's statistics of B in one read, as int8_gate_stats (the loss
// histogram e - frexp exponent of each nonzero scalar, clamped at MAXD), with the same loads;
// losses 0..7 (most scalars of a state) are counted in registers, the rest by shared atomics.
// NaN or Inf in a column sets *flag and leaves the column as it was.
//
// Options: -DGATE_QUBITS=d (3..6) -DSPLITS=s (3..18); BITS = 7 (bits_per_slice(2**d)); WGMMA
// (0, 1: d >= 5, with THREADS = 128 or 256); UNROLL, MIN_BLOCKS, PREFETCH default as below.
// Shared memory (dynamic): B's slices, S * NC * W * 4 bytes (wgmma: S * NC * KD), and at d <= 5
// A's fragments (wgmma: A's image at both d), S * A_STRIDE * 16 bytes, copied once per block
// (ozsim.gemm.ozaki1.onepass.mma_smem_bytes).

#ifndef GATE_QUBITS
#error "GATE_QUBITS must be defined"
#endif
#define D GATE_QUBITS
#define K (1 << D)
#ifndef SPLITS
#define SPLITS 3
#endif
#define S SPLITS
#define BITS 7
#define MAXD 2200
#ifndef WGMMA
#define WGMMA 0
#endif
#if WGMMA && D < 5
#error "the wgmma form needs d >= 5 (a warpgroup's 64 rows of the embedding)"
#endif
#include "mma_gate.cuh"
#include "../ozaki1/kernels/histogram.cuh"  // oz_count_loss, oz_flush_counts
#if WGMMA
#include "wgmma_s8.cuh"
#if WNT != 4
#error "the wgmma form takes 32 columns a warpgroup"
#endif
#define A_SMEM 1  // A's core-matrix image in shared memory (wgmma reads it there)
// B's slices K-major in 8 x 16-byte core matrices (wgmma_s8.cuh), a word of 4 INT8 at (c, kk)
#define B_WORD(c, kk) (core_offset((c), (kk), KD) / 4)
#define B_PLANE_WORDS (NC * KD / 4)
#define MTILE(wm, mi) ((mi) * 4 + (wm))  // m block mi of 64 rows, warp wm's 16 of them
#else
#define A_SMEM (D <= 5)                // A's fragments in shared memory (d = 6: from L1/L2)
#define B_WORD(c, kk) ((c) * W + (kk) / 4)
#define B_PLANE_WORDS (NC * W)
#define MTILE(wm, mi) ((wm) * WMT + (mi))
#endif
#define RMAGIC 6755399441055744.0  // 1.5 * 2**52: (y + RMAGIC) - RMAGIC = rint(y), |y| < 2**51

// 1.5 * 2**(52 - BITS j): y = r + it rounds r to a multiple of 2**(-BITS j) (ties to even), and
// y's low word is that multiple in units of 2**(-BITS j)
__device__ __forceinline__ double round_magic(int j)
{
    return __longlong_as_double(((long long)(1023 + 52 - BITS * j) << 52) | (1LL << 51));
}

// (2**BITS - 1) 2**(-BITS j), the clip of slice j on the scaled r
__device__ __forceinline__ double slice_limit(int j)
{
    return (double)((1 << BITS) - 1) * __longlong_as_double((long long)(1023 - BITS * j) << 52);
}

// A's fragment f (uint4) of the lane: at a_base + 16 f in shared memory (A_SMEM), else
// a_frag[a_base + f] in global memory
__device__ __forceinline__ uint4 a_fragment(const uint4* __restrict__ a_frag, unsigned a_base, int f)
{
#if A_SMEM
    uint4 v;
    asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(a_base + 16u * f));
    return v;
#else
    return __ldg(a_frag + a_base + f);
#endif
}

#ifndef ACC_CVT  // P_t to FP64 by the conversion unit (1) or by the 2**52 + 2**31 trick (0):
// both exact; H200, N = 30, s = 8, the conversion unit 2.10 -> 2.00x the floor at d = 3, 2.19 ->
// 2.12x at 4, 2.98 -> 2.89x at 5 (wgmma), 4.58 -> 4.52x at 6 (wgmma); 5.27 -> 5.43x at 6 with
// mma.sync, which keeps the trick
#define ACC_CVT (WGMMA || D <= 5)
#endif
__device__ __forceinline__ double to_double(int v)
{
#if ACC_CVT
    return (double)v;  // (exact)
#else
    return small_to_double(v);
#endif
}

// x, opaque to the compiler: addresses derived from it are formed where they are used, not
// hoisted out of the tile loop (the unrolled products would hold every slice's address live)
__device__ __forceinline__ unsigned opaque(unsigned x)
{
    asm volatile("mov.b32 %0, %0;" : "+r"(x));
    return x;
}

#ifndef PREFETCH  // (d <= 4, and the wgmma form: at d = 5 2.92 -> 2.77x the copy floor, H200,
#define PREFETCH (MPT <= 4 || WGMMA)  // s = 8; mma.sync's d = 5, 6 hold too many registers)
#endif

#ifndef UNROLL  // the products' t loop unrolled as well as the i loop: at d <= 4 and S <= 10
#define UNROLL (D <= 4 && S <= 10)  // (beyond, the unrolled code spills registers)
#endif

#ifndef MIN_BLOCKS  // blocks an SM the registers must allow: 80 a thread (d <= 4 rolled), 128
// (wgmma at d = 5: four blocks of 128 threads)
#define MIN_BLOCKS (WGMMA ? (D == 5 ? 4 : 1) : UNROLL ? 2 : D <= 4 ? 3 : D == 5 ? 2 : 1)
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
int8_gate_mma(double2* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3, int p4,
              int p5, const uint4* __restrict__ a_frag, const int* __restrict__ a_exp,
              int* __restrict__ flag)
{
    extern __shared__ uint4 smem[];  // [A's fragments or image (A_SMEM)][B's slices, S planes]
    unsigned* b_slices = reinterpret_cast<unsigned*>(smem + (A_SMEM ? S * A_STRIDE : 0));
#if A_SMEM
    for (int i = threadIdx.x; i < S * A_STRIDE; i += THREADS) smem[i] = __ldg(a_frag + i);
#endif
    __shared__ long long moff[K], col_base[NC];
    __shared__ int col_e[NC];
    const int pos[6] = {p0, p1, p2, p3, p4, p5};  // bit j of the gate index at pos[j]
    int sorted[D];
    sort_positions(pos, sorted);
    member_table(moff, pos);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int scol = tid / TPC, sq = tid % TPC;  // the split's column and place in it
    const int wm = warp % WGM, wn = warp / WGM;  // the warp's place in the output tile
    const int g = lane >> 2, tq = lane & 3;      // mma fragment coordinates
#if WGMMA  // descriptors' low words: A's image (slice i, m block mi, k step ks: uniform
    // addresses), B's slices of the warpgroup's columns
    const u32 a_lo = desc_lo((u32)__cvta_generic_to_shared(smem));
    const u32 b_lo = desc_lo((u32)__cvta_generic_to_shared(b_slices)) + (u32)(wn * WNT * KD / 2);
#else
    const int a_lane = wm * WMT * KS * 32 + lane;  // the lane's A fragment (uint4) of slice 1
#if A_SMEM  // (its shared-memory address, else its index in a_frag)
    const unsigned a_base = (unsigned)__cvta_generic_to_shared(smem) + 16u * a_lane;
#else
    const unsigned a_base = a_lane;
#endif
    const unsigned b_lane = ldmatrix_lane(b_slices, wn, lane);  // in B's slice 1
#endif
    const long long tiles = (groups + NC - 1) / NC;
    __syncthreads();

    // 1. split a tile's columns into shared memory:
    //    r_j = 2**(-BITS j) (the CPU's r at step j), Q = clip(rint), r_{j+1} = r_j - Q (exact)
    auto split = [&](const double2 (&x)[MPT], long long base) {
        int e;
        bool finite;
        column_scale(x, e, finite);
        const bool live = base >= 0;
        if (sq == 0) {
            col_base[scol] = base;
            col_e[scol] = (live && finite) ? e : NOT_FINITE;
            if (live && !finite) atomicOr(flag, 1);
        }
#pragma unroll
        for (int part = 0; part < 2; ++part) {
#pragma unroll
            for (int i0 = 0; i0 < MPT; i0 += 4) {
                double r[4];
#pragma unroll
                for (int u = 0; u < 4; ++u)
                    r[u] = scale2(part ? x[i0 + u].y : x[i0 + u].x, BITS - e);  // |r| < 2**BITS
                unsigned* dst = b_slices + B_WORD(scol, part * K + sq * MPT + i0);
                bool clip = false;  // |r| >= 2**BITS - 1/2: a slice may reach the clip
#pragma unroll
                for (int u = 0; u < 4; ++u) clip = clip || !(fabs(r[u]) < (double)(1 << BITS) - 0.5);
                if (__any_sync(0xffffffffu, clip)) {
#pragma unroll
                    for (int j = 0; j < S; ++j) {
                        const double magic = round_magic(j);
                        const double lim = slice_limit(j);
                        unsigned word = 0;
#pragma unroll
                        for (int u = 0; u < 4; ++u) {
                            const double y = r[u] + magic;
                            const double q = fmin(fmax(y - magic, -lim), lim);
                            const int digit = max(min(__double2loint(y), (1 << BITS) - 1), 1 - (1 << BITS));
                            word |= ((unsigned)digit & 0xffu) << (8 * u);
                            r[u] -= q;  // exact
                        }
                        dst[j * B_PLANE_WORDS] = word;
                    }
                } else {  // no clip anywhere (|r_0| < 2**BITS - 1/2, then |r_j| <= 2**(BITS-1))
#pragma unroll
                    for (int j = 0; j < S; ++j) {
                        const double magic = round_magic(j);
                        unsigned word = 0;
#pragma unroll
                        for (int u = 0; u < 4; ++u) {
                            const double y = r[u] + magic;
                            word |= ((unsigned)__double2loint(y) & 0xffu) << (8 * u);
                            r[u] -= y - magic;  // exact
                        }
                        dst[j * B_PLANE_WORDS] = word;
                    }
                }
            }
        }
#if WGMMA  // (the slices, written by the generic proxy, are read by wgmma's async proxy)
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
    };

    // 2.-3. the grouped slice products, their FP64 accumulation, the write-back
    auto multiply = [&]() {
        double acc[WMT][WNT][4];
#if WGMMA
        // P_t of the warpgroup's 64 x 32 outputs a m block: wgmma m64n32k32 with A and B by
        // descriptor (B: slice t - i - 1 of the tile); the first product of each P_t overwrites
        // the accumulator. The i loop is unrolled (its guard uniform).
#pragma unroll 1
        for (int t = S + 1; t >= 2; --t) {
            int p[WMT][16];
            const u32 bt = b_lo + (u32)((t - 2) * NC * KD / 16);  // slice t - 2 (i = 1)
            wg_fence();
#pragma unroll
            for (int i = 1; i <= S; ++i) {
                if (i < t) {
#pragma unroll
                    for (int ks = 0; ks < KS; ++ks) {
                        const u32 db = bt - (u32)((i - 1) * NC * KD / 16) + 16 * ks;
#pragma unroll
                        for (int mi = 0; mi < WMT; ++mi) {
                            const u32 da = a_lo + (u32)(((i - 1) * 2 * K * KD + mi * 64 * KD) / 16 + 16 * ks);
                            wgmma_n32_ss(p[mi], da, db, DESC_HI(KD), i > 1 || ks > 0);
                        }
                    }
                }
            }
            wg_commit();
            wg_wait<0>();
#pragma unroll
            for (int mi = 0; mi < WMT; ++mi) fence_acc16(p[mi]);
            const double w = __longlong_as_double((long long)(1023 - t * BITS) << 52);
#pragma unroll
            for (int mi = 0; mi < WMT; ++mi)
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                    for (int v = 0; v < 4; ++v) {
                        const double pv = to_double(p[mi][4 * ni + v]);  // exact
                        acc[mi][ni][v] = (t == S + 1) ? pv * w : fma(pv, w, acc[mi][ni][v]);
                    }
        }
#else
        // mma.sync m16n8k32: the i loop is unrolled (each slice's address an immediate offset,
        // the guard uniform); with UNROLL the t loop too, so the guards and the accumulation's
        // first step are resolved at compile time.
#if UNROLL
#pragma unroll
#else
#pragma unroll 1
#endif
        for (int t = S + 1; t >= 2; --t) {
            int p[WMT][WNT][4];
#pragma unroll
            for (int mi = 0; mi < WMT; ++mi)
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                    for (int v = 0; v < 4; ++v) p[mi][ni][v] = 0;
            // B's slice t - i - 1 (0-based) sits at b_t - (i - 1) planes: an immediate offset
            const unsigned b_t = opaque(b_lane) + (unsigned)((t - 2) * NC * W * 4);
            const unsigned a_t = opaque(a_base);
#pragma unroll
            for (int i = 1; i <= S; ++i) {
                if (i < t) {  // (uniform; resolved at compile time with UNROLL)
#pragma unroll
                    for (int ks = 0; ks < KS; ++ks) {
                        uint4 a[WMT];
                        unsigned b[WNT][2];
#pragma unroll
                        for (int mi = 0; mi < WMT; ++mi)
                            a[mi] = a_fragment(a_frag, a_t, (i - 1) * A_STRIDE + (mi * KS + ks) * 32);
                        const unsigned bs = b_t - (unsigned)((i - 1) * NC * W * 4) + ks * 32;
#pragma unroll
                        for (int ni = 0; ni < WNT; ni += 2)  // two n tiles' fragments a load
                            ldmatrix_x4(bs + ni * 8 * W * 4, b[ni][0], b[ni][1], b[ni + 1][0],
                                        b[ni + 1][1]);
#pragma unroll
                        for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                            for (int mi = 0; mi < WMT; ++mi) mma_s8(p[mi][ni], a[mi], b[ni][0], b[ni][1]);
                    }
                }
            }
            const double w = __longlong_as_double((long long)(1023 - t * BITS) << 52);
#pragma unroll
            for (int mi = 0; mi < WMT; ++mi)
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                    for (int v = 0; v < 4; ++v) {
                        const double pv = to_double(p[mi][ni][v]);  // exact
                        acc[mi][ni][v] = (t == S + 1) ? pv * w : fma(pv, w, acc[mi][ni][v]);
                    }
        }
#endif
        // write back (member, out_column): acc 2**(eA[member] + e[column]), a multiplication
        // by a normal power of two wherever the warp's exponents allow (scale2 otherwise)
        bool normal = true;
#pragma unroll
        for (int mi = 0; mi < WMT; ++mi) {
            const int ea = __ldg(a_exp + 8 * MTILE(wm, mi) + g);
#pragma unroll
            for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int eb = col_e[out_column(wn, ni, tq, h)];
                    normal = normal && (eb == NOT_FINITE || (ea + eb >= -1022 && ea + eb <= 1023));
                }
        }
        const bool fast = __all_sync(0xffffffffu, normal);
#pragma unroll
        for (int mi = 0; mi < WMT; ++mi) {
            const int member = 8 * MTILE(wm, mi) + g;
            const int ea = __ldg(a_exp + member);
            const long long off = moff[member];
#pragma unroll
            for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int col = out_column(wn, ni, tq, h);
                    const int eb = col_e[col];
                    if (eb == NOT_FINITE) continue;
                    const int sh = ea + eb;
                    double2 out;
                    if (fast) {
                        const double f = __hiloint2double((sh + 1023) << 20, 0);
                        out = make_double2(acc[mi][ni][h] * f, acc[mi][ni][2 + h] * f);
                    } else {
                        out = make_double2(scale2(acc[mi][ni][h], sh), scale2(acc[mi][ni][2 + h], sh));
                    }
                    psi[col_base[col] + off] = out;
                }
        }
    };

    double2 x[MPT];
    long long base;
#if PREFETCH
    if (blockIdx.x < tiles) fetch(psi, blockIdx.x * (long long)NC + scol, groups, sorted, sq, moff, x, base);
#endif
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
#if !PREFETCH
        fetch(psi, tile * NC + scol, groups, sorted, sq, moff, x, base);
#endif
        split(x, base);
        group_sync();
#if PREFETCH
        const long long next = tile + gridDim.x;
        if (next < tiles) fetch(psi, next * NC + scol, groups, sorted, sq, moff, x, base);
#endif
        multiply();
        group_sync();  // the next tile's split overwrites the slices and the column tables
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
int8_gate_mma_stats(const double2* __restrict__ psi, long long groups, int p0, int p1, int p2,
                    int p3, int p4, int p5, unsigned long long* __restrict__ hist,
                    int* __restrict__ flag)
{
    __shared__ unsigned sh[MAXD + 1];
    __shared__ long long moff[K];
    const int pos[6] = {p0, p1, p2, p3, p4, p5};
    int sorted[D];
    sort_positions(pos, sorted);
    member_table(moff, pos);
    for (int i = threadIdx.x; i <= MAXD; i += blockDim.x) sh[i] = 0;
    __syncthreads();
    const int scol = threadIdx.x / TPC, sq = threadIdx.x % TPC;
    const long long tiles = (groups + NC - 1) / NC;
    // losses 0..7 (most scalars) counted in registers, 8 bits each, flushed before they can wrap
    unsigned lo = 0, hi = 0;
    int counted = 0;
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        double2 x[MPT];
        long long base;
        int e;
        bool finite;
        fetch(psi, tile * NC + scol, groups, sorted, sq, moff, x, base);
        column_scale(x, e, finite);
        if (base >= 0 && !finite && sq == 0) atomicOr(flag, 1);
        if (base < 0 || !finite) continue;
#pragma unroll
        for (int i = 0; i < MPT; ++i)
#pragma unroll
            for (int part = 0; part < 2; ++part)
                oz_count_loss(sh, lo, hi, e, part ? x[i].y : x[i].x);
        counted += 2 * MPT;
        if (counted > 255 - 2 * MPT) { oz_flush_counts(sh, lo, hi); counted = 0; }
    }
    oz_flush_counts(sh, lo, hi);
    oz_hist_flush(sh, hist);
}
