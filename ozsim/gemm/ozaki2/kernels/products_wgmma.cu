// Scheme II, fused INT8 products with the reduction mod p in the epilogue, on Hopper
// (ozsim.gemm.ozaki2.wgmma: crt_gemm_mod3, crt_gemm_mod4, their _c2 cluster forms). Compiled by
// NVRTC for sm_90a with -std=c++17. Options: the tile -DBM, -DBN, -DBK (rows of A, columns of B,
// bytes of K per stage) and -DSTAGES (the shared-memory ring): ozaki2.wgmma's BM, BN, BK, STAGES.
#if !defined(BM) || !defined(BN) || !defined(BK) || !defined(STAGES)
#error "products_wgmma.cu needs -DBM, -DBN, -DBK and -DSTAGES (ozsim.gemm.ozaki2.wgmma)"
#endif
#include "hopper.cuh"
// Diagnostics (wrong results): -DNO_EPI=1 leaves out the epilogue, -DNO_MMA=1 the products, both
// the TMA loads alone. H200, N = 30, 15 moduli, the direct form alone on random residues at the
// GEMM path's shapes, times the copy floor, whole / without the epilogue / without the products /
// loads alone: d = 7 2.90 / 1.23 / 2.70 / 1.22; d = 8 4.06 / 2.62 / 3.68 / 2.62 (clusters of 2:
// 3.94 and loads 1.64); d = 9 7.09 / 4.88 / 5.63 / 4.87 (clusters of 2: 6.35, loads 3.78). The
// products hide under the loads; the epilogue does not, and at d >= 8 the loads alone take
// longer than the products (B's tiles from L2 into shared memory: ozaki2.wgmma.DIRECT_CLUSTER).
#ifndef NO_EPI
#define NO_EPI 0
#endif
#ifndef NO_MMA
#define NO_MMA 0
#endif

#define A_BYTES (BM * BK)
#define STAGE_BYTES ((BM + BN) * BK)

// T mod p in [0, p), 128 < p <= 256, M = floor(2**39 / p) + 1: q = floor(a M / 2**39) is
// floor(a / p) for 0 <= a < 2**31 (crt_reduce's rule: the error a (M - 2**39/p) / 2**39 < 2**-8
// <= 1/p). BIASED (the direct form; |T| <= 2**28 a launch, LAUNCH_T_BITS): a = T + p 2**21,
// >= 0 (p 2**21 > 2**28), a multiple of p away and below 2**28 + 2**29: four instructions (add,
// mul.hi, shift, mad). Otherwise (|T| < 2**31) |T| and the sign: eight. The biased form made the
// direct form's products 3-7% faster at K = 256..1024 (the epilogue is a third of their time)
// but Karatsuba's slower at K >= 4096 (square 16384 by 18%, with the main loop's SASS unchanged:
// benchmarks/RESULTS.md section 7), so Karatsuba keeps the other.
// negp = -p mod 2**32, made opaque by the caller (the compiler rewrites q (-p) as (-q) p: a
// negation per output). With it, and the bytes packed by byte_perm instead of shifts and ors, the
// direct form's kernel issues 15% fewer instructions (Nsight Compute, H200, N = 28: d = 7 2.45G ->
// 2.08G, 9.17 -> 8.37 ms; d = 8 2.74G -> 2.37G, 11.77 -> 11.00 ms); same bits. SHORT (the direct
// form with K <= 256 a launch, |T| <= K 2**15 <= 2**23): a = T + b with b the least multiple of p
// >= 2**23 (`bias`), 0 <= a < 2**24 + p, and q = floor(a M32 / 2**32) with M32 = ceil(2**32 / p)
// (`m32`): p M32 = 2**32 + e, 0 <= e < p, and q is floor(a / p) while (floor(a / p) + 1) e < M32,
// that is for a < 2**32 / e + 1 - p >= 2**32 / 255 - 255 > 2**24 + 256 (e = 0, p = 256: every a):
// three instructions (add, mul.hi, mad), no shift (every p in (128, 256] checked exhaustively over
// |T| <= 2**23). Nsight Compute, H200, N = 28: d = 7 2.08G -> 1.86G instructions, 8.37 -> 7.92 ms;
// d = 8 2.37G -> 2.15G, 11.00 -> 10.60 ms; same bits.
template <bool BIASED, bool SHORT = false>
__device__ __forceinline__ u32 modp(int t, u32 p, u32 M, u32 negp, u32 bias = 0u, u32 m32 = 0u)
{
    if (SHORT) {
        const u32 a = (u32)t + bias;
        return a + __umulhi(a, m32) * negp;
    }
    if (BIASED) {  // a + q (-p) mod 2**32 = a - q p: one multiply-add
        const u32 a = (u32)t + (p << 21);
        return a + (__umulhi(a, M) >> 7) * negp;
    }
    const u32 a = t < 0 ? (u32)(-t) : (u32)t;
    const u32 r = a - (__umulhi(a, M) >> 7) * p;
    return (t < 0 && r) ? p - r : r;
}

// 4 x 4 transpose of 16-bit elements across the lanes of a quad (lane & 3 = q): lane q holds
// M[q][0..3] as w0 = M[q][0] | M[q][1] << 16, w1 = M[q][2] | M[q][3] << 16 and gets
// M[0..3][q] the same way. Two exchanges: 2 x 2 blocks of 32 bits with lane q ^ 2, then 16-bit
// elements with lane q ^ 1 (byte_perm selectors picked by the lane's bit).
__device__ __forceinline__ void quad_transpose(u32& w0, u32& w1, int lane)
{
    const bool b = lane & 2, c = lane & 1;
    const u32 r = __shfl_xor_sync(0xffffffffu, b ? w0 : w1, 2);
    if (b) w0 = r; else w1 = r;
    const u32 send = __byte_perm(w0, w1, c ? 0x5410 : 0x7632);  // c: elements 0, 2; else 1, 3
    const u32 t = __shfl_xor_sync(0xffffffffu, send, 1);
    w0 = __byte_perm(w0, t, c ? 0x3254 : 0x5410);
    w1 = __byte_perm(w1, t, c ? 0x3276 : 0x7610);
}

// (x + y) mod p for the 8 bytes of (w0, w1) and of prev, each in [0, p)
__device__ __forceinline__ void add_mod_bytes(u32& w0, u32& w1, uint2 prev, u32 p)
{
    u32 res[2] = {0u, 0u};
    const u32 a[2] = {w0, w1}, b[2] = {prev.x, prev.y};
#pragma unroll
    for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int y = 0; y < 4; ++y) {
            const u32 s = ((a[h] >> (8 * y)) & 0xffu) + ((b[h] >> (8 * y)) & 0xffu);
            res[h] |= (s >= p ? s - p : s) << (8 * y);
        }
    }
    w0 = res[0];
    w1 = res[1];
}

// a consumer warp is done with a stage: tell the producer of every CTA of the cluster that
// writes into it
template <int CL> __device__ __forceinline__ void release(u32 bar)
{
    if (CL == 1) {
        mbar_arrive(bar);
    } else {
#pragma unroll
        for (int r = 0; r < CL; ++r) mbar_arrive_cluster(bar, r);
    }
}

// work item w -> modulus l (slowest), then grouped raster: `group` column tiles x all row tiles
// per group, columns fastest inside a group (CTAs running together share A and B tiles in L2)
// (with clusters of CL CTAs a work item is CL row tiles: mtiles counts row tiles of CL BM rows)
template <int CL>
__device__ __forceinline__ void decode(int w, int per_mod, int mtiles, int ntiles, int group,
                                       int& l, int& m0, int& n0)
{
    l = w / per_mod;
    const int tile = w - l * per_mod;
    const int grp = tile / (group * mtiles);
    const int first = grp * group;
    const int gw = min(group, ntiles - first);
    const int rem = tile - grp * group * mtiles;
    m0 = (rem / gw) * (CL * BM);
    n0 = (first + rem % gw) * BN;
}

// The epilogue of chain t of a tile (TT = t for Karatsuba's chains; the direct form passes 0 and
// its runtime t, whose loop is unrolled anyway): reduce the accumulators mod p, combine with the
// kept bytes (Karatsuba), and write u_re / u_im in whole 32-byte sectors.
// bias, m32: modp's SHORT constants for p (gemm_mod_body makes them once per modulus).
// perm (ld % 32 == 0): no quad transpose; each lane stores its own 8 bytes, so that within each
// aligned group of 32 columns the byte of column c = 8 jj + 2 q + e lies at s = 8 q + 2 jj + e
// (bits 1-2 and 3-4 of the column swapped, an involution), which crt_finish undoes as it reads
// (finish.cu, perm): about an instruction an output byte less (the 2 shuffles and 4 byte_perms
// per 8 bytes), the same bytes. A template parameter (the _p kernels): H200, N = 30, 15 moduli,
// the GEMM path through StateVector.apply alternately with and without (2 target sets x 2),
// medians, times the copy floor: the products stage 3.66 -> 3.40 at d = 7, 5.00 -> 4.87 at 8,
// 13.51 -> 13.30 at 10; the whole gate 8.75 -> 8.29, 10.06 -> 9.84, 20.91 -> 19.95.
template <int FORM, int TT, bool SHORT, bool PERM, int NACC, int NKEEP>
__device__ __forceinline__ void epilogue(const int (&d)[NACC], u32 (&keep)[NKEEP], int t, u32 p,
                                         u32 M, u32 bias, u32 m32, unsigned char* __restrict__ ub,
                                         long long plane, int row0, int n0, int lane, int m,
                                         int ld, int acc)
{
    u32 negp;  // -p, opaque (modp)
    asm("mov.b32 %0, %1;" : "=r"(negp) : "r"(0u - p));
    // accumulator i = 4 j + 2 h + e: row row0 + 8 h, column n0 + 2 (lane % 4) + 8 j + e. Per
    // group of 4 column blocks j = 4 g .. 4 g + 3 and row half h, the quad (lanes 4r .. 4r + 3,
    // one row) holds 32 adjacent output bytes as 2 bytes per lane and block; a 4 x 4 transpose
    // of 16-bit elements inside the quad (quad_transpose) gives each lane 8 adjacent bytes, so
    // that the warp writes whole 32-byte sectors (2-byte stores wrote a quarter of each sector
    // they touched).
#pragma unroll
    for (int g = 0; g < 8; ++g) {
        u32 w[2][2];  // [h][word]: the u16 of block 4 g + jj in half jj % 2 of word jj / 2
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int i = 4 * (4 * g + jj) + 2 * h;
                u32 out[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int q = i + e;
                    const u32 r = modp<FORM == 4, SHORT>(d[q], p, M, negp, bias, m32);
                    if (FORM == 4) {
                        out[e] = r;
                        continue;
                    }
                    const int kq = FORM == 4 ? 0 : (q >> 2);
                    const u32 prev = (keep[kq] >> (8 * (q & 3))) & 0xffu;
                    u32 nk = r, o = 0u;
                    if (TT == 1) {
                        o = prev >= r ? prev - r : prev + p - r;  // (T1 - T2) mod p
                        nk = prev + r >= p ? prev + r - p : prev + r;  // (T1 + T2) mod p
                    } else if (TT == 2) {
                        o = r >= prev ? r - prev : r + p - prev;  // (T3 - T1 - T2) mod p
                    }
                    if (TT == 0 && (q & 3) == 0) {
                        keep[kq] = nk;
                    } else if (TT < 2) {
                        const u32 mask = 0xffu << (8 * (q & 3));
                        keep[kq] = (keep[kq] & ~mask) | (nk << (8 * (q & 3)));
                    }
                    out[e] = o;
                }
                // bytes out[0], out[1] (each < 256) into the 16-bit half jj % 2 of the word
                const u32 v = __byte_perm(out[0], out[1], 0x0040);
                w[h][jj >> 1] = (jj & 1) ? __byte_perm(w[h][jj >> 1], v, 0x5410) : v;
            }
        }
        if (FORM == 4 || TT > 0) {
            const int pl = FORM == 4 ? t : t - 1;
            const int col = n0 + 8 * (4 * g + (lane & 3));  // 8 bytes: col .. col + 7
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                if (!PERM) quad_transpose(w[h][0], w[h][1], lane);
                const int row = row0 + 8 * h;
                if (row < m && col < ld) {  // ld % 16 == 0: col + 7 < ld too
                    unsigned char* dst = ub + pl * plane + (long long)row * ld + col;
                    if (acc) {  // a later K chunk: add the residues of the earlier ones
                        add_mod_bytes(w[h][0], w[h][1], *(const uint2*)dst, p);
                    }
                    *(uint2*)dst = make_uint2(w[h][0], w[h][1]);
                }
            }
        }
    }
}

// Persistent: CTA b does work items b, b + gridDim.x, ...; the stage ring (and its mbarrier
// phases) runs on across items, so the producer loads the next tile during the epilogue.
// FORM 3 (Karatsuba): A planes [Ar, Ai, Ar+Ai], B planes [Br, Bi, Br+Bi]; chains T1, T2, T3 of
// one product each; u_re = (T1 - T2) mod p, u_im = (T3 - T1 - T2) mod p.
// FORM 4 (direct): A planes [Ar, -Ai, Ar, Ai], B planes [Br, Bi]; chains D1 = Ar Br + (-Ai) Bi
// and D2 = Ar Bi + Ai Br of two products each; u_re = D1 mod p, u_im = D2 mod p: a third more
// tensor-core work, a third less B traffic, and an epilogue of two reductions and no kept bytes.
// u[l] (2, m, ld) uint8 of modulus l; A residues rows (l PA + a) mpa + i of the (N PA mpa, kpad)
// tensor `ta`, B residues rows (l PB + b) nbp + j of `tb`; pm[l] = (p, M).
template <int FORM, int CL, bool SHORT = false, bool PERM = false>
__device__ __forceinline__ void gemm_mod_body(
    const TMap& ta, const TMap& tb, int mpa, int nbp, int m, int ld, int kb0, int kblocks,
    int mtiles, int ntiles, int num_moduli, int group, int acc,
    const int2* __restrict__ pm, unsigned char* __restrict__ u)
{
    constexpr int PA = FORM == 4 ? 4 : 3, PB = FORM == 4 ? 2 : 3;
    constexpr int CHAINS = FORM == 4 ? 2 : 3, LEN = FORM == 4 ? 2 : 1;
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) u64 bars[2 * STAGES];
    const u32 base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const u32 full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[STAGES]);
    // CL = 2: the two CTAs of a cluster take row tiles m0 and m0 + BM of the same column tile
    // and modulus, in lockstep; each loads its A tile and half of the B tile, multicast to both
    // (B from L2 once per pair). A stage is refilled only when the consumers of both CTAs have
    // released it: its empty barrier counts the consumer warps of the whole cluster.
    const u32 rank = CL == 1 ? 0u : cluster_rank();
    const int mgroups = (mtiles + CL - 1) / CL;
    const int per_mod = mgroups * ntiles, total = per_mod * num_moduli;
    const int first_item = blockIdx.x / CL, item_step = gridDim.x / CL;

    const int wg = threadIdx.x >> 7;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(full0 + 8 * s, 1);
            mbar_init(empty0 + 8 * s, 8 * CL);  // one arrival per consumer warp of the cluster
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    if (CL == 1) __syncthreads(); else cluster_sync();

    if (wg == 0) {  // producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            int it = 0;
            for (int w = first_item; w < total; w += item_step) {
                int l, m0, n0;
                decode<CL>(w, per_mod, mgroups, ntiles, group, l, m0, n0);
                m0 += rank * BM;
                for (int q = 0; q < CHAINS * LEN; ++q) {
                    const int bp = FORM == 4 ? ((q == 0 || q == 3) ? 0 : 1) : q;
                    const int ra = (l * PA + q) * mpa + m0, rb = (l * PB + bp) * nbp + n0;
                    for (int kb = 0; kb < kblocks; ++kb, ++it) {
                        const int s = it % STAGES;
                        if (it >= STAGES) mbar_wait(empty0 + 8 * s, ((it / STAGES) - 1) & 1);
                        const u32 full = full0 + 8 * s, sa = base + s * STAGE_BYTES;
                        mbar_expect_tx(full, STAGE_BYTES);
                        tma_load(sa, &ta, (kb0 + kb) * BK, ra, full);
                        if (CL == 1) {
                            tma_load(sa + A_BYTES, &tb, (kb0 + kb) * BK, rb, full);
                        } else {
                            constexpr int H = BN / CL;
                            tma_load_multicast(sa + A_BYTES + rank * H * BK, &tb,
                                               (kb0 + kb) * BK, rb + rank * H, full,
                                               (unsigned short)((1 << CL) - 1));
                        }
                    }
                }
            }
        }
        if (CL > 1) cluster_sync();  // no CTA leaves while its peer may still signal it
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wg - 1, wq = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    int d[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) d[i] = 0;
    constexpr int NKEEP = FORM == 4 ? 1 : 32;
    u32 keep[NKEEP];  // FORM 3: byte i of keep[i / 4]: T1 mod p, then (T1 + T2) mod p
#pragma unroll
    for (int i = 0; i < NKEEP; ++i) keep[i] = 0u;
    const long long plane = (long long)m * ld;
    int it = 0, lprev = -1;
    u32 bias = 0u, m32 = 0u;  // SHORT's constants (modp), made when the modulus changes
    for (int w = first_item; w < total; w += item_step) {
        int l, m0, n0;
        decode<CL>(w, per_mod, mgroups, ntiles, group, l, m0, n0);
        m0 += rank * BM;
        const int2 pmv = pm[l];
        const u32 p = (u32)pmv.x, M = (u32)pmv.y;
        if (SHORT && l != lprev) {  // the least multiple of p >= 2**23, ceil(2**32 / p)
            bias = ((1u << 23) + p - 1u) / p * p;
            m32 = 0xffffffffu / p + 1u;
            lprev = l;
        }
        unsigned char* ub = u + (long long)l * 2 * plane;
        const int row0 = m0 + c * 64 + 16 * wq + (lane >> 2);
#pragma unroll (FORM == 4 ? 2 : 1)  // FORM 3 unrolled spills (2 KB)
        for (int t = 0; t < CHAINS; ++t) {
            for (int j = 0; j < LEN; ++j) {
                for (int kb = 0; kb < kblocks; ++kb, ++it) {
                    const int s = it % STAGES;
                    mbar_wait(full0 + 8 * s, (it / STAGES) & 1);
                    const u32 sa = base + s * STAGE_BYTES;
                    const u64 da = desc(sa + c * 64 * BK), db = desc(sa + A_BYTES);
                    const bool more = j > 0 || kb > 0;  // accumulate onto this chain
                    fence_acc(d);
                    wg_fence();
#if !NO_MMA
                    mma(d, da, db, more);
                    mma(d, da + 2, db + 2, 1);  // +32 bytes of K: the next k32 step in the atom
                    mma(d, da + 4, db + 4, 1);
                    mma(d, da + 6, db + 6, 1);
#endif
                    wg_commit();
                    fence_acc(d);
                    if (more) {  // the previous stage's products are done: release it
                        wg_wait<1>();
                        fence_acc(d);
                        if (lane == 0) release<CL>(empty0 + 8 * ((it - 1) % STAGES));
                    }
                }
            }
            wg_wait<0>();
            fence_acc(d);
            if (lane == 0) release<CL>(empty0 + 8 * ((it - 1) % STAGES));

            // the epilogue of chain t, compiled once per chain (t a template argument)
            if (NO_EPI) {
            } else if (FORM == 4 || t == 0) {
                epilogue<FORM, 0, SHORT, PERM>(d, keep, t, p, M, bias, m32, ub, plane, row0, n0,
                                                   lane, m, ld, acc);
            } else if (t == 1) {
                epilogue<FORM, 1, SHORT, PERM>(d, keep, t, p, M, bias, m32, ub, plane, row0, n0,
                                                   lane, m, ld, acc);
            } else {
                epilogue<FORM, 2, SHORT, PERM>(d, keep, t, p, M, bias, m32, ub, plane, row0, n0,
                                                   lane, m, ld, acc);
            }
        }
    }
    if (CL > 1) cluster_sync();
}

#define GEMM_MOD_PARAMS const __grid_constant__ TMap ta, const __grid_constant__ TMap tb, \
    int mpa, int nbp, int m, int ld, int kb0, int kblocks, int mtiles, int ntiles, \
    int num_moduli, int group, int acc, const int2* __restrict__ pm, \
    unsigned char* __restrict__ u
#define GEMM_MOD_ARGS ta, tb, mpa, nbp, m, ld, kb0, kblocks, mtiles, ntiles, num_moduli, group, \
    acc, pm, u

// One kernel a module: -DKERNEL_NAME=<name> with its template arguments -DGEMM_FORM=3|4
// -DGEMM_CL=1|2|4 -DGEMM_SHORT=0|1 -DGEMM_PERM=0|1 (ozsim.gemm.ozaki2.wgmma._kernel_options:
// crt_gemm_mod3, crt_gemm_mod4, crt_gemm_mod4_short, each with _c2 or _c4 for clusters, _p for
// the permuted layout of u). Each layout is a body of its own, not one that tests a flag: with the
// flag at run time both epilogues lived in every kernel (about 25-45% more code) and Karatsuba's
// products at K = 4096 ran 33% slower. A process compiles only the kernels it launches (nvcc:
// about 1 s each).
#if !defined(KERNEL_NAME) || !defined(GEMM_FORM) || !defined(GEMM_CL) || !defined(GEMM_SHORT) \
    || !defined(GEMM_PERM)
#error "products_wgmma.cu needs -DKERNEL_NAME, -DGEMM_FORM, -DGEMM_CL, -DGEMM_SHORT, -DGEMM_PERM"
#endif
extern "C" __global__ void __launch_bounds__(384, 1) KERNEL_NAME(GEMM_MOD_PARAMS)
{
    gemm_mod_body<GEMM_FORM, GEMM_CL, (bool)GEMM_SHORT, (bool)GEMM_PERM>(GEMM_MOD_ARGS);
}
