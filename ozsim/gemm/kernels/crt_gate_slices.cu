// One-pass gate by Ozaki scheme II (int8-crt{N}, int8-crt-auto) for gates of d = 3..6 qubits and
// plans whose integers fit (ozsim.gemm.ozaki2.exact_gate.slices_apply: up to 15 moduli), by exact
// products of byte slices on the INT8 tensor cores: psi <- U psi, the same bits as
// ozsim.gemm.ozaki2.scheme.int8_crt_zgemm.
//
// Scheme II's residues are one way to form its exact integer product C' = A' B'; C' then rounds
// once (crt_value). Where the inner dimension is small the residues and their CRT sums are most
// of the work (15 residues a scalar, 15 products and 45 FP64 multiply-adds an entry). Here C'
// comes from the integers' balanced bytes instead (v = sum_i b_i 2**(8 i), b_i in [-128, 127],
// 8 of them for |v| <= 2**62), as in Ozaki scheme I but with every slice pair kept, so exact:
//   C' = sum_{i, j} 2**(8 (i + j)) A'_i B'_j, and level t = i + j, L_t = sum_{i + j = t} A'_i B'_j,
// is one INT32 accumulator of mma.sync m16n8k32 products (|L_t| <= 8 KD 128**2 <= 2**24 at
// KD = 2 K = 128: exact). A' is the real embedding [[Re A', -Im A'], [Im A', Re A']] of the
// gate's scaled integers (rows as mma_gate.cuh orders them; -Im A' sliced as an integer of its
// own), its 8 slices ready-made A fragments in shared memory (ozsim.gemm.ozaki2.onepass
// slice_fragments). Per warp and tile of 8 amplitude groups (the columns of B), in registers:
//   1. lane (g, tq) loads 2**d / 4 amplitudes of column g: members 16 c + 4 tq + i (d >= 4), the
//      ones whose Re and Im its B fragments hold, so the slices need no shared memory (d = 3:
//      members 2 tq + i, the embedding's columns ordered Re, Im of each member: k = 2 m + part,
//      one m16n8k16 step); the column's norm exponent f (ozaki2.norm_exponents) over its 4
//      lanes; each scalar's integer v = rnd(ldexp(x, gB - f)) (rint, or trunc without ROUND) as
//      8 balanced bytes, transposed into B fragments;
//   2. per m tile of 8 output members, 64 products a k step into the 15 level sums, folded
//      exactly into C' as three 64-bit parts of five levels (fold_parts);
//   3. C' rounded as crt_value rounds it (crt_exact.cuh, exact_value_parts), ldexp by fA[row] +
//      f - (gA + gB), written back in place; the write-back takes the digits' sum without the
//      tie branch, and a lane with a tied digit in an m tile (rare) rounds its two columns again
//      after it, the tied entries by way of the residues (H200, N = 30, 15 moduli, x copy floor: d = 3 2.16 -> 2.07, d = 4
//      2.31 -> 2.28, d = 5 3.03 -> 2.98, d = 6 5.04 level; same bits).
// Same bits as the CPU path. NaN or Inf in a column sets *flag and leaves the column as it was.
//
// Options: -DGATE_QUBITS=d (3..6) -DNMOD=N -DNLIMB=<digits of P> -DROUND=0|1 -DTHREADS
// -DMIN_BLOCKS and the scheme's constants -DNFRAC -DLBITS (ozsim.gemm.ozaki2.moduli); each
// measured option (PREFETCH, K16, NO_PAIRS) says what it measured where it is defined. Shared
// memory (dynamic): A's fragments, 8 * (K / 8) * (KD / 32) * 512 bytes (d = 6: 128 KiB).

#include "crt_gate.cuh"
#include "gate_groups.cuh"
#include "exact_int.cuh"
#include "mma_s8.cuh"
#include "crt_exact.cuh"

#if GATE_QUBITS < 3 || GATE_QUBITS > 6
#error "crt_gate_slices.cu takes gates of 3 to 6 qubits"
#endif
#if LBITS != 40
#error "crt_gate_slices.cu folds five 8-bit levels into one CRT digit: LBITS must be 40"
#endif
#define NSL 8                         // balanced bytes of an integer |v| <= 2**62
#define NLEV (2 * NSL - 1)            // levels t = i + j of the slice products
#define KD (2 * K < 32 ? 32 : 2 * K)  // the embedding's inner dimension, padded to the mma's k
#define KS (KD / 32)                  // k steps
#define MT (K / 8)                    // m tiles: 16 rows, Re and Im of 8 members
#define GPL (K >= 16 ? K / 16 : 1)    // groups of members a lane loads
#define MPG (D >= 4 ? 4 : 2)          // members a group (d = 3: 2, Re and Im interleaved)
#ifndef THREADS
#define THREADS 256
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1
#endif
#ifndef PREFETCH  // the next tile's amplitudes loaded before this tile's products (H200, N = 30,
#define PREFETCH (D == 3)  // 15 moduli, x copy floor, with d = 3's lanes on 4 members, 2 of them
#endif  // the neighbour's: d = 3 2.74 -> 2.61 (256 threads, 2 blocks an SM); d = 4 2.58 -> 2.88,
        // 5 3.53 -> 3.44 (256 x 1: 200 registers; 3.17 without at 512 threads), 6 level (250
        // registers); same bits)
#ifndef NO_PAIRS  // fold_parts without its INT32 pairs (H200, N = 30, 15 moduli, x copy floor:
#define NO_PAIRS 0  // pairs into a 128-bit C' took d = 3 2.69 -> 2.52, d = 4 2.53 -> 2.37; this
#endif  // fold, pairs at d = 5 too, then 2.23 -> 2.14, 2.38 -> 2.34, 3.28 -> 3.09, d = 6 5.14 ->
        // 5.09; same bits)
#ifndef K16  // d = 3: m16n8k16 products (the embedding's 16 columns), not m16n8k32 with 16 zero
#define K16 1  // columns (H200, N = 30, 15 moduli: 2.89x -> 2.66x the copy floor; same bits)
#endif

// The lane's amplitudes of column gc (zeros past the last group): members 16 c + 4 tq + i
// (d >= 4) or 2 tq + i (d = 3)
__device__ __forceinline__ void fetch_lane(const double2* __restrict__ psi, long long gc,
                                           long long groups, const int (&sorted)[D],
                                           const long long* moff, int tq,
                                           double2 (&x)[GPL][MPG], long long& base)
{
    const bool live = gc < groups;
    base = live ? group_base(gc, sorted) : 0;
#pragma unroll
    for (int c = 0; c < GPL; ++c)
#pragma unroll
        for (int i = 0; i < MPG; ++i) {
            const int m = D >= 4 ? 16 * c + 4 * tq + i : 2 * tq + i;
            x[c][i] = live ? psi[base + moff[m]] : make_double2(0.0, 0.0);
        }
}

// The 4 x 4 byte transpose: o[j] byte i = w[i] byte j (slice j of scalars i = 0..3)
__device__ __forceinline__ void transpose_bytes(const unsigned (&w)[4], unsigned* o)
{
    const unsigned t0 = __byte_perm(w[0], w[1], 0x5140), t1 = __byte_perm(w[0], w[1], 0x7362);
    const unsigned t2 = __byte_perm(w[2], w[3], 0x5140), t3 = __byte_perm(w[2], w[3], 0x7362);
    o[0] = __byte_perm(t0, t2, 0x5410);
    o[1] = __byte_perm(t0, t2, 0x7632);
    o[2] = __byte_perm(t1, t3, 0x5410);
    o[3] = __byte_perm(t1, t3, 0x7632);
}

// C' = sum_t L_t 2**(8 t) from the level sums L_t = acc[t][v] (|L_t| <= n_t KD 128**2, n_t =
// min(t + 1, 15 - t) slice pairs on level t) as three 64-bit parts of five levels each, g_r =
// sum_q L_{5r+q} 2**(8 q) (|g_r| < 2**57), C' = g0 + 2**40 g1 + 2**80 g2: crt_exact.cuh's
// exact_value_parts takes E's digits from them by 64-bit carries (no 128-bit arithmetic). Where
// KD <= 64 (d <= 5) each part's levels 5r, 5r + 1 and 5r + 2, 5r + 3 pair first in INT32 (|L_t +
// 2**8 L_t+1| <= (n_t + 256 n_t+1) KD 2**14 < 2**31: n_t+1 <= 7 on every such pair; one
// multiply-add a pair)
#define PAIRS (KD <= 64 && !NO_PAIRS)
__device__ __forceinline__ void fold_parts(const int (&acc)[NLEV][4], int v, long long (&g)[3])
{
#pragma unroll
    for (int r = 0; r < 3; ++r) {
        const int t = 5 * r;
#if PAIRS
        const int wa = acc[t][v] + acc[t + 1][v] * 256;
        const int wb = acc[t + 2][v] + acc[t + 3][v] * 256;
        g[r] = (long long)wa + (long long)wb * 65536 + (long long)acc[t + 4][v] * (1LL << 32);
#else
        long long sum = 0;
#pragma unroll
        for (int q = 0; q < 5; ++q) sum += (long long)acc[t + q][v] * (1LL << (8 * q));
        g[r] = sum;
#endif
    }
}

__device__ __forceinline__ double level_value(const int (&acc)[NLEV][4], int v)
{
    long long g[3];
    fold_parts(acc, v, g);
    return exact_value_parts(g[0], g[1], g[2]);
}

// level_value where C''s digits hold no tie (tie false); where they do, tie is set and the value
// is not crt_value's (level_value then)
__device__ __forceinline__ double level_value_fast(const int (&acc)[NLEV][4], int v, bool& tie)
{
    long long g[3];
    fold_parts(acc, v, g);
    return exact_value_parts_fast(g[0], g[1], g[2], tie);
}

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
crt_gate_slices(double2* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3,
                int p4, int p5, const uint4* __restrict__ a_frag, const int* __restrict__ a_f,
                int gb, int gsum, int* __restrict__ flag)
{
    extern __shared__ uint4 smem[];  // A's fragments [slice][mt][ks][lane]
    __shared__ long long moff[K];
    for (int i = threadIdx.x; i < NSL * MT * KS * 32; i += THREADS) smem[i] = __ldg(a_frag + i);
    const int pos[6] = {p0, p1, p2, p3, p4, p5};  // bit j of the gate index at pos[j]
    int sorted[D];
    sort_positions(pos, sorted);
    member_table(moff, pos);
    __syncthreads();
    const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
    const long long tiles = (groups + 7) / 8;
    const long long step = (long long)gridDim.x * (THREADS / 32);
    const long long first = (long long)blockIdx.x * (THREADS / 32) + (threadIdx.x >> 5);
    double2 x[GPL][MPG];
    long long base;
#if PREFETCH
    if (first < tiles) fetch_lane(psi, first * 8 + g, groups, sorted, moff, tq, x, base);
#endif
    for (long long tile = first; tile < tiles; tile += step) {
        // 1. the lane's amplitudes of column g, the column's scale, B's slice fragments
        const long long gc = tile * 8 + g;
        const bool live = gc < groups;
#if !PREFETCH
        fetch_lane(psi, gc, groups, sorted, moff, tq, x, base);
#endif
        double mx = 0.0;
        int fin = 1;
#pragma unroll
        for (int c = 0; c < GPL; ++c)
#pragma unroll
            for (int i = 0; i < MPG; ++i) {
                fin &= isfinite(x[c][i].x) && isfinite(x[c][i].y);
                mx = fmax(mx, fmax(fabs(x[c][i].x), fabs(x[c][i].y)));
            }
#pragma unroll
        for (int o = 1; o < 4; o <<= 1) {
            mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            fin &= __shfl_xor_sync(0xffffffffu, fin, o);
        }
        int e;
        frexp(mx, &e);
        double s = 0.0;  // the exact sum of the squares of ceil(|x| 2**(NFRAC - e)) (any order)
#pragma unroll
        for (int c = 0; c < GPL; ++c)
#pragma unroll
            for (int i = 0; i < MPG; ++i) {
                const double qr = ceil(scale2_up(fabs(x[c][i].x), NFRAC - e));
                const double qi = ceil(scale2_up(fabs(x[c][i].y), NFRAC - e));
                s += qr * qr;
                s += qi * qi;
            }
#pragma unroll
        for (int o = 1; o < 4; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        const int f = norm_exponent_of(e, s);
        if (live && !fin && tq == 0) atomicOr(flag, 1);
        unsigned bw[NSL][KS][2];  // B's fragments: slice, k step, k half
#pragma unroll
        for (int c = 0; c < GPL; ++c)
#pragma unroll
            for (int part = 0; part < (D >= 4 ? 2 : 1); ++part) {
                unsigned lo[4], hi[4];
#pragma unroll
                for (int i = 0; i < 4; ++i) {  // (d = 3: Re, Im of member 2 tq, then 2 tq + 1)
                    const double2 xm = x[c][D >= 4 ? i : i / 2];
                    const bool im = D >= 4 ? part == 1 : (i & 1);
                    const double y = scale2_up(im ? xm.y : xm.x, gb - f);
                    const long long v = ROUND ? __double2ll_rn(y) : __double2ll_rz(y);
                    balanced_bytes(v, lo[i], hi[i]);
                }
                unsigned sl[NSL];
                transpose_bytes(lo, sl);
                transpose_bytes(hi, sl + 4);
                // the group's place in the embedding's k order (d >= 4: Re of member m at k = m,
                // Im at K + m; d = 3: Re at 2 m, Im at 2 m + 1): k step p / 32, half (p % 32) / 16
                const int p = D >= 4 ? part * K + 16 * c : 0;
#pragma unroll
                for (int j = 0; j < NSL; ++j) {
                    bw[j][p / 32][(p % 32) / 16] = sl[j];
                    if (D == 3) bw[j][0][1] = 0u;
                }
            }
        // the columns this lane writes, 2 tq and 2 tq + 1: base, f, and whether to write
        long long cbase[2];
        int cf[2];
        bool cok[2];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int src = 4 * (2 * tq + h);
            cbase[h] = __shfl_sync(0xffffffffu, base, src);
            cf[h] = __shfl_sync(0xffffffffu, f, src);
            cok[h] = __shfl_sync(0xffffffffu, (int)(live && fin), src);
        }
#if PREFETCH
        if (tile + step < tiles)
            fetch_lane(psi, (tile + step) * 8 + g, groups, sorted, moff, tq, x, base);
#endif
        // 2.-3. per m tile: the level sums, C', its rounding, the write-back
#pragma unroll 1
        for (int mt = 0; mt < MT; ++mt) {
            int acc[NLEV][4];
#pragma unroll
            for (int t = 0; t < NLEV; ++t) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = 0;
#pragma unroll
            for (int ks = 0; ks < KS; ++ks)
#pragma unroll
                for (int i = 0; i < NSL; ++i) {
                    const uint4 a = smem[((i * MT + mt) * KS + ks) * 32 + lane];
#pragma unroll
                    for (int j = 0; j < NSL; ++j) {
                        if (D == 3 && K16) mma_s8_k16(acc[i + j], a, bw[j][ks][0]);
                        else mma_s8(acc[i + j], a, bw[j][ks][0], bw[j][ks][1]);
                    }
                }
            const int member = 8 * mt + g;
            const int fa = __ldg(a_f + member);
            const long long off = moff[member];
            bool tied = false;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                bool t0, t1;
                const double vre = level_value_fast(acc, h, t0);
                const double vim = level_value_fast(acc, 2 + h, t1);
                tied |= cok[h] && (t0 || t1);
                if (cok[h] && !(t0 || t1))
                    psi[cbase[h] + off] = scale2_pair(vre, vim, fa + cf[h] - gsum);
            }
            if (tied) {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    if (!cok[h]) continue;
                    psi[cbase[h] + off] = scale2_pair(level_value(acc, h),
                                                      level_value(acc, 2 + h), fa + cf[h] - gsum);
                }
            }
        }
    }
}
