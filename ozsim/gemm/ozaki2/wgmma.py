"""Scheme II's INT8 products with the reduction mod p in the epilogue, on Hopper (private).

One kernel, ``crt_gemm_mod3``, replaces the per-modulus sequence of three cuBLAS INT8 GEMMs (INT32
planes ``T1, T2, T3`` written to HBM) and ``crt_reduce`` (the planes read back) of
:mod:`ozsim.gemm.ozaki2.cuda`: per output tile it computes the three Karatsuba products of one
modulus with ``wgmma`` (INT8 -> INT32 on the tensor cores), reduces each mod ``p`` in registers and
writes only the two UINT8 residues ``u_re = (T1 - T2) mod p`` and ``u_im = (T3 - T1 - T2) mod p``:
2 bytes per output and modulus reach HBM instead of 12 written and 12 read back. The integers are
the cuBLAS path's (exact INT32 sums, ``|T| <= k 2**14``), so results are bitwise equal.

Structure (NVIDIA Hopper, ``sm_90a``; the usual warp-specialised TMA + ``wgmma`` pipeline):

* persistent CTAs (one per multiprocessor) loop over work items = ``128 x 256`` output tiles of
  one modulus, moduli slowest, tiles in groups of :data:`GROUP_N` column tiles so that CTAs
  running together share operand tiles in L2; the stage ring runs on across work items, so the
  next tile's operands load during the epilogue;
* warpgroup 0 (one thread) loads ``128 x 128`` A tiles and ``256 x 128`` B tiles of INT8
  residues (K-major, 128-byte swizzle) with the tensor memory accelerator (TMA) into a ring of
  :data:`STAGES` shared-memory stages, each guarded by a *full* and an *empty* mbarrier;
* warpgroups 1 and 2 each own 64 rows: ``wgmma.m64n256k32.s32.s8.s8`` into 128 INT32 accumulators
  per thread. The three products run one after another over K (``T1 = Ar Br``, then
  ``T2 = Ai Bi``, then ``T3 = (Ar+Ai)(Br+Bi)``), so one accumulator set suffices: after ``T1`` its
  residues stay in registers (one byte per output), after ``T2`` ``u_re`` is written and
  ``(T1 + T2) mod p`` kept, after ``T3`` ``u_im`` is written;
* K longer than :data:`K_CHUNK` runs as several launches; each later one adds its residues to
  ``u`` mod p in the epilogue (1 byte read per output and modulus more per launch);
* ``crt_gemm_mod3_c2`` runs the same in clusters of two CTAs (``cuLaunchKernelEx``) that take
  row tiles ``m0`` and ``m0 + 128`` of one column tile in lockstep: each loads its A tile and
  half of the B tile, which TMA multicasts into both CTAs' shared memory, so B leaves L2 once per
  pair; a stage's *empty* barrier counts the consumer warps of both CTAs (remote arrivals through
  ``mapa``), and both CTAs meet at a cluster barrier before either exits. Opt-in
  (:data:`CLUSTER`): not faster on any shape measured since the epilogue stores are coalesced.

``crt_gemm_mod4`` is the *direct* form: ``u_re = (Ar Br + (-Ai) Bi) mod p`` and ``u_im = (Ar Bi +
Ai Br) mod p`` as two INT32 chains of two products each, so B needs two residue planes instead
of three and the epilogue two reductions and no kept bytes, for a third more tensor-core work:
the default for ``K <= 1024`` (``_cuda_crt.DIRECT_MAX_K``), where the epilogue bounds the
kernel (1.8x faster than Karatsuba's form at K = 256 on the H100), Karatsuba's above.

The epilogue writes whole 32-byte sectors: a thread's accumulators hold 2 adjacent output bytes
every 8 columns, so each quad of lanes (one row) transposes its 4 x 4 block of 16-bit pieces
with two shuffles (``quad_transpose``) and every lane stores 8 adjacent bytes. With 2-byte stores
(ncu: 75% of the written sectors excess) the direct form took 25.5 ms at N = 28, d = 8; 10.2 ms
after (RESULTS.md 3.4).

Launched through the driver API (:mod:`ctypes`): the TMA descriptors are built by
``cuTensorMapEncodeTiled`` and passed by value (``__grid_constant__``). Compiled once per process
by NVRTC for ``sm_90a`` (``wgmma`` and ``setmaxnreg`` exist only there); on any other GPU
:func:`available` is False and ozsim keeps the cuBLAS path.

Status: the default for ``K <= 8192`` (:func:`ozsim.gemm.ozaki2.cuda._fused_form`: the direct form
for ``K <= 1024``, Karatsuba's above; override with ``OZSIM_CRT_FUSED=0/1/3/4``). 168 registers, no
spills. Checked on an H100 (2026-11-23/24) against exact FP64 products
(``benchmarks/crt_fused_probe.py``, incl. ``|T| = 2**30``; direct: over launches of ``2**28``) and
bitwise against the CPU (``tests/test_gpu_crt.py``); timings in ``benchmarks/RESULTS.md`` 3.3-3.4.
Karatsuba's epilogue is compiled once per chain (``epilogue<FORM, t>``: 9.0k instructions instead
of 5.6k): with the whole-sector stores that made it 10-20% faster at every K measured (N = 28, d =
8..12; square 8192); with 2-byte stores (RESULTS.md 3.3) it had been slower at K = 1024-2048.

References:
    [Ozaki2] K. Ozaki, Y. Uchino, T. Imamura, arXiv:2504.08009 (2025): one exact GEMM per
        modulus. NVIDIA PTX ISA 8.x, "Asynchronous warpgroup level matrix multiply-accumulate"
        (``wgmma.mma_async``, shared-memory matrix descriptors) and "cp.async.bulk.tensor";
        CUDA driver API, ``cuTensorMapEncodeTiled``.
"""

from __future__ import annotations

import ctypes

import cupy as cp

__all__ = ["BM", "BN", "BK", "available", "gemm_mod"]

#: Tile of one CTA: rows of A (gate), columns of B (state), bytes of K per stage.
BM, BN, BK = 128, 256, 128
STAGES = 4
#: K per launch: a longer K is split into launches that add their residues mod p into ``u``.
#: A CTA streams its B panel (256 columns x K x 3 planes) for the whole work item, and the
#: panels of the CTAs running together must stay in L2; at K = 16384 one launch ran at 1.23-1.29
#: POP/s on some machines and 0.8-1.0 on others; on one of the latter, chunks of 8192 took 385 ms
#: against 429 ms for one launch (RESULTS.md 3.3).
K_CHUNK = 8192
#: ``|D|`` one launch of the direct form may reach: its epilogue's reduction (``modp<true>``) is
#: exact for ``|D| <= 2**28``, so a launch covers at most K = 8192 (``|D| <= k 2**15``); a larger
#: ``k_chunk`` is cut to that. (Karatsuba's reduction takes any ``|T| < 2**31``.)
LAUNCH_T_BITS = 28
#: Column tiles per raster group (CTAs that run together share A and B tiles in L2): 2 was the
#: fastest of 2, 4, 8, 16, 64 on an H100 (RESULTS.md 3.3; 8 ran at 45% of 2's rate at 16384^3).
GROUP_N = 2
#: CTAs per cluster (1, or 2 with B multicast: see :func:`gemm_mod`). H100, N = 28, 15 moduli:
#: with 2-byte epilogue stores pairs ran d = 8 in 23.6-24.1 against 25.4 ms; with the coalesced
#: stores 25.8 against 22.4 (slower), and slower or equal on every other shape (RESULTS.md 3.4).
CLUSTER = 1
_STAGE_BYTES = (BM + BN) * BK
_SMEM_BYTES = STAGES * _STAGE_BYTES + 1024  # + alignment of the 1024-byte swizzle atoms


def _accumulator_operands() -> tuple[str, str]:
    regs = ", ".join(f"%{i}" for i in range(128))
    outs = ", ".join(f'"+r"(d[{i}])' for i in range(128))
    return regs, outs


_REGS, _OUTS = _accumulator_operands()

_SOURCE = r"""
typedef unsigned int u32;
typedef unsigned long long u64;
struct __align__(64) TMap { u64 v[16]; };

#define BM %(bm)d
#define BN %(bn)d
#define BK %(bk)d
#define STAGES %(stages)d
#define A_BYTES (BM * BK)
#define STAGE_BYTES ((BM + BN) * BK)

__device__ __forceinline__ u32 smem_addr(const void* p)
{
    u32 r;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %%1; cvt.u32.u64 %%0, t; }"
                 : "=r"(r) : "l"(p));
    return r;
}
__device__ __forceinline__ void mbar_init(u32 bar, u32 count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%%0], %%1;" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(u32 bar, u32 bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%%0], %%1;"
                 :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(u32 bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%%0];" :: "r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(u32 bar, u32 parity)
{
    u32 done;
    do {
        asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%%1], %%2; "
                     "selp.u32 %%0, 1, 0, p; }" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
    } while (!done);
}
__device__ __forceinline__ void tma_load(u32 dst, const TMap* map, int c0, int c1, u32 bar)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%%0], [%%1, {%%2, %%3}], [%%4];"
                 :: "r"(dst), "l"((u64)map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
// the same box into the same shared-memory offset of every CTA in `mask` (of the cluster); each
// destination CTA's mbarrier at offset `bar` gets the bytes it received
__device__ __forceinline__ void tma_load_multicast(u32 dst, const TMap* map, int c0, int c1,
                                                   u32 bar, unsigned short mask)
{
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%%0], [%%1, {%%2, %%3}], [%%4], %%5;"
                 :: "r"(dst), "l"((u64)map), "r"(c0), "r"(c1), "r"(bar), "h"(mask) : "memory");
}
__device__ __forceinline__ u32 cluster_rank()
{
    u32 r;
    asm volatile("mov.u32 %%0, %%%%cluster_ctarank;" : "=r"(r));
    return r;
}
// arrive on the mbarrier at shared-memory offset `bar` of CTA `rank` of the cluster
__device__ __forceinline__ void mbar_arrive_cluster(u32 bar, u32 rank)
{
    asm volatile("{ .reg .b32 ra; mapa.shared::cluster.u32 ra, %%0, %%1; "
                 "mbarrier.arrive.shared::cluster.b64 _, [ra]; }"
                 :: "r"(bar), "r"(rank) : "memory");
}
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}

// Shared-memory matrix descriptor of a K-major tile with 128-byte swizzle: start address,
// leading byte offset 1 (unused for swizzled K-major), stride byte offset 1024 (8 rows of
// 128 bytes), swizzle mode 1 (128B) in bits 62-63.
__device__ __forceinline__ u64 desc(u32 addr)
{
    return (u64)((addr & 0x3FFFF) >> 4) | ((u64)1 << 16) | ((u64)(1024 >> 4) << 32)
           | ((u64)1 << 62);
}

__device__ __forceinline__ void wg_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wg_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %%0;" :: "n"(N) : "memory");
}
// keeps the compiler from moving accumulator accesses across the asynchronous wgmma
__device__ __forceinline__ void fence_acc(int (&d)[128])
{
#pragma unroll
    for (int i = 0; i < 128; ++i) asm volatile("" : "+r"(d[i]) :: "memory");
}

__device__ __forceinline__ void mma(int (&d)[128], u64 da, u64 db, int accumulate)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %%130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {%(regs)s}, %%128, %%129, p;\n}\n"
        : %(outs)s
        : "l"(da), "l"(db), "r"(accumulate));
}

// T mod p in [0, p), 128 < p <= 256, M = floor(2**39 / p) + 1: q = floor(a M / 2**39) is
// floor(a / p) for 0 <= a < 2**31 (crt_reduce's rule: the error a (M - 2**39/p) / 2**39 < 2**-8
// <= 1/p). BIASED (the direct form; |T| <= 2**28 a launch, LAUNCH_T_BITS): a = T + p 2**21,
// >= 0 (p 2**21 > 2**28), a multiple of p away and below 2**28 + 2**29: four instructions (add,
// mul.hi, shift, mad). Otherwise (|T| < 2**31) |T| and the sign: eight. The biased form made the
// direct form's products 3-7%% faster at K = 256..1024 (the epilogue is a third of their time)
// but Karatsuba's slower at K >= 4096 (square 16384 by 18%%, with the main loop's SASS unchanged:
// RESULTS.md 3.8), so Karatsuba keeps the other.
template <bool BIASED>
__device__ __forceinline__ u32 modp(int t, u32 p, u32 M)
{
    if (BIASED) {
        const u32 a = (u32)t + (p << 21);
        return a - (__umulhi(a, M) >> 7) * p;
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
    n0 = (first + rem %% gw) * BN;
}

// The epilogue of chain t of a tile (TT = t for Karatsuba's chains; the direct form passes 0 and
// its runtime t, whose loop is unrolled anyway): reduce the accumulators mod p, combine with the
// kept bytes (Karatsuba), and write u_re / u_im in whole 32-byte sectors.
template <int FORM, int TT, int NACC, int NKEEP>
__device__ __forceinline__ void epilogue(const int (&d)[NACC], u32 (&keep)[NKEEP], int t, u32 p,
                                         u32 M, unsigned char* __restrict__ ub, long long plane,
                                         int row0, int n0, int lane, int m, int ld, int acc)
{
    // accumulator i = 4 j + 2 h + e: row row0 + 8 h, column n0 + 2 (lane %% 4) + 8 j + e. Per
    // group of 4 column blocks j = 4 g .. 4 g + 3 and row half h, the quad (lanes 4r .. 4r + 3,
    // one row) holds 32 adjacent output bytes as 2 bytes per lane and block; a 4 x 4 transpose
    // of 16-bit elements inside the quad (quad_transpose) gives each lane 8 adjacent bytes, so
    // that the warp writes whole 32-byte sectors (2-byte stores wrote a quarter of each sector
    // they touched).
#pragma unroll
    for (int g = 0; g < 8; ++g) {
        u32 w[2][2];  // [h][word]: the u16 of block 4 g + jj in half jj %% 2 of word jj / 2
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int i = 4 * (4 * g + jj) + 2 * h;
                u32 out[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int q = i + e;
                    const u32 r = modp<FORM == 4>(d[q], p, M);
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
                const u32 v = out[0] | (out[1] << 8);
                w[h][jj >> 1] = (jj & 1) ? (w[h][jj >> 1] | (v << 16)) : v;
            }
        }
        if (FORM == 4 || TT > 0) {
            const int pl = FORM == 4 ? t : t - 1;
            const int col = n0 + 8 * (4 * g + (lane & 3));  // 8 bytes: col .. col + 7
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                quad_transpose(w[h][0], w[h][1], lane);
                const int row = row0 + 8 * h;
                if (row < m && col < ld) {  // ld %% 16 == 0: col + 7 < ld too
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
template <int FORM, int CL>
__device__ __forceinline__ void gemm_mod_body(
    const TMap& ta, const TMap& tb, int mpa, int nbp, int m, int ld, int kb0, int kblocks,
    int mtiles, int ntiles, int num_moduli, int group, int acc, const int2* __restrict__ pm,
    unsigned char* __restrict__ u)
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
                        const int s = it %% STAGES;
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
    int it = 0;
    for (int w = first_item; w < total; w += item_step) {
        int l, m0, n0;
        decode<CL>(w, per_mod, mgroups, ntiles, group, l, m0, n0);
        m0 += rank * BM;
        const int2 pmv = pm[l];
        const u32 p = (u32)pmv.x, M = (u32)pmv.y;
        unsigned char* ub = u + (long long)l * 2 * plane;
        const int row0 = m0 + c * 64 + 16 * wq + (lane >> 2);
#pragma unroll (FORM == 4 ? 2 : 1)  // FORM 3 unrolled spills (2 KB)
        for (int t = 0; t < CHAINS; ++t) {
            for (int j = 0; j < LEN; ++j) {
                for (int kb = 0; kb < kblocks; ++kb, ++it) {
                    const int s = it %% STAGES;
                    mbar_wait(full0 + 8 * s, (it / STAGES) & 1);
                    const u32 sa = base + s * STAGE_BYTES;
                    const u64 da = desc(sa + c * 64 * BK), db = desc(sa + A_BYTES);
                    const bool more = j > 0 || kb > 0;  // accumulate onto this chain
                    fence_acc(d);
                    wg_fence();
                    mma(d, da, db, more);
                    mma(d, da + 2, db + 2, 1);  // +32 bytes of K: the next k32 step in the atom
                    mma(d, da + 4, db + 4, 1);
                    mma(d, da + 6, db + 6, 1);
                    wg_commit();
                    fence_acc(d);
                    if (more) {  // the previous stage's products are done: release it
                        wg_wait<1>();
                        fence_acc(d);
                        if (lane == 0) release<CL>(empty0 + 8 * ((it - 1) %% STAGES));
                    }
                }
            }
            wg_wait<0>();
            fence_acc(d);
            if (lane == 0) release<CL>(empty0 + 8 * ((it - 1) %% STAGES));

            // the epilogue of chain t, compiled once per chain (t a template argument)
            if (FORM == 4 || t == 0) {
                epilogue<FORM, 0>(d, keep, t, p, M, ub, plane, row0, n0, lane, m, ld, acc);
            } else if (t == 1) {
                epilogue<FORM, 1>(d, keep, t, p, M, ub, plane, row0, n0, lane, m, ld, acc);
            } else {
                epilogue<FORM, 2>(d, keep, t, p, M, ub, plane, row0, n0, lane, m, ld, acc);
            }
        }
    }
    if (CL > 1) cluster_sync();
}

#define GEMM_MOD_PARAMS const __grid_constant__ TMap ta, const __grid_constant__ TMap tb, \
    int mpa, int nbp, int m, int ld, int kb0, int kblocks, int mtiles, int ntiles, \
    int num_moduli, int group, int acc, const int2* __restrict__ pm, unsigned char* __restrict__ u
#define GEMM_MOD_ARGS ta, tb, mpa, nbp, m, ld, kb0, kblocks, mtiles, ntiles, num_moduli, group, \
    acc, pm, u

extern "C" __global__ void __launch_bounds__(384, 1) crt_gemm_mod3(GEMM_MOD_PARAMS)
{
    gemm_mod_body<3, 1>(GEMM_MOD_ARGS);
}
extern "C" __global__ void __launch_bounds__(384, 1) crt_gemm_mod4(GEMM_MOD_PARAMS)
{
    gemm_mod_body<4, 1>(GEMM_MOD_ARGS);
}
// launched in clusters of 2 CTAs (cuLaunchKernelEx)
extern "C" __global__ void __launch_bounds__(384, 1) crt_gemm_mod3_c2(GEMM_MOD_PARAMS)
{
    gemm_mod_body<3, 2>(GEMM_MOD_ARGS);
}
""" % {"bm": BM, "bn": BN, "bk": BK, "stages": STAGES, "regs": _REGS,
       "outs": _OUTS}

_state: dict = {}

# CUDA driver API enums (cuda.h, stable since CUDA 12.0)
_CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0
_CU_TENSOR_MAP_INTERLEAVE_NONE = 0
_CU_TENSOR_MAP_SWIZZLE_128B = 3
_CU_TENSOR_MAP_L2_PROMOTION_L2_256B = 3
_CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0
_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
_CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4


class _TMap(ctypes.Structure):
    _fields_ = [("v", ctypes.c_uint64 * 16)]


class _LaunchAttribute(ctypes.Structure):  # CUlaunchAttribute: id, pad to 8, a 64-byte union
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", ctypes.c_uint64 * 8)]


class _LaunchConfig(ctypes.Structure):  # CUlaunchConfig
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3),
                ("shared_bytes", ctypes.c_uint), ("stream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(_LaunchAttribute)), ("num_attrs", ctypes.c_uint)]


def _cluster_config(grid: int, cluster: int, stream: int) -> tuple[_LaunchConfig, object]:
    """A ``CUlaunchConfig`` for ``grid`` CTAs of 384 threads in clusters of ``cluster`` along x
    (the attribute array is returned too: it must outlive the config)."""
    attr = (_LaunchAttribute * 1)()
    attr[0].id = _CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    dims = ctypes.cast(attr[0].value, ctypes.POINTER(ctypes.c_uint * 3)).contents
    dims[0], dims[1], dims[2] = cluster, 1, 1
    cfg = _LaunchConfig()
    cfg.grid[:] = (grid, 1, 1)
    cfg.block[:] = (384, 1, 1)
    cfg.shared_bytes = _SMEM_BYTES
    cfg.stream = ctypes.c_void_p(stream)
    cfg.attrs = attr
    cfg.num_attrs = 1
    return cfg, attr


def max_clusters(cluster: int = 2) -> int:
    """Clusters of ``cluster`` CTAs of ``crt_gemm_mod3_c2`` that can be resident at once
    (``cuOccupancyMaxActiveClusters``; a persistent grid larger than this would run its last
    clusters after the others finish)."""
    key = ("max_clusters", cluster)
    if key not in _state:
        cfg, _attr = _cluster_config(cluster * 256, cluster, 0)
        num = ctypes.c_int(0)
        res = _state["lib"].cuOccupancyMaxActiveClusters(
            ctypes.byref(num), ctypes.c_void_p(_state["funcs"][(3, cluster)].ptr),
            ctypes.byref(cfg))
        if res != 0:
            raise RuntimeError(f"cuOccupancyMaxActiveClusters failed ({res})")
        _state[key] = int(num.value)
    return _state[key]


def _compile():
    """The module (``cupy.cuda.function.Module``) holding ``crt_gemm_mod3`` and
    ``crt_gemm_mod4``, compiled by NVRTC for sm_90a."""
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(_SOURCE, "crt_gemm_mod.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["--gpu-architecture=sm_90a", "-std=c++17"])
        cubin = nvrtc.getCUBIN(prog)
    except nvrtc.NVRTCError as exc:
        raise RuntimeError(f"crt_gemm_mod failed to compile:\n{nvrtc.getProgramLog(prog)}") from exc
    finally:
        nvrtc.destroyProgram(prog)
    mod = cp.cuda.function.Module()
    mod.load(cubin)
    return mod


def available() -> bool:
    """True on a GPU of compute capability 9.0 (H100, H200) where the kernel compiles and the
    driver's TMA entry points are found (else the reason is in ``_state["error"]``)."""
    if "ok" in _state:
        return _state["ok"]
    ok = False
    if cp.cuda.Device().compute_capability != "90":
        _state["error"] = f"compute capability {cp.cuda.Device().compute_capability}, not 9.0"
    else:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            mod = _compile()
            funcs = {(3, 1): mod.get_function("crt_gemm_mod3"),
                     (4, 1): mod.get_function("crt_gemm_mod4"),
                     (3, 2): mod.get_function("crt_gemm_mod3_c2")}
            for func in funcs.values():
                res = lib.cuFuncSetAttribute(ctypes.c_void_p(func.ptr),
                                             _CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                             ctypes.c_int(_SMEM_BYTES))
                if res != 0:
                    raise RuntimeError(f"cuFuncSetAttribute failed ({res})")
            _state.update(lib=lib, module=mod, funcs=funcs)
            ok = True
        except Exception as exc:  # noqa: BLE001 - a capability probe: any failure means "no"
            _state["error"] = f"{type(exc).__name__}: {exc}"
    _state["ok"] = ok
    return ok


def _tensor_map(ptr: int, rows: int, kpad: int, box_rows: int) -> _TMap:
    """TMA descriptor of a ``(rows, kpad)`` INT8 row-major array, ``BK x box_rows`` boxes."""
    lib = _state["lib"]
    tmap = _TMap()
    dims = (ctypes.c_uint64 * 2)(kpad, rows)
    strides = (ctypes.c_uint64 * 1)(kpad)
    box = (ctypes.c_uint32 * 2)(BK, box_rows)
    elem = (ctypes.c_uint32 * 2)(1, 1)
    res = lib.cuTensorMapEncodeTiled(
        ctypes.byref(tmap), _CU_TENSOR_MAP_DATA_TYPE_UINT8, ctypes.c_uint32(2),
        ctypes.c_void_p(ptr), dims, strides, box, elem, _CU_TENSOR_MAP_INTERLEAVE_NONE,
        _CU_TENSOR_MAP_SWIZZLE_128B, _CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        _CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if res != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed ({res}) for {rows} x {kpad} at {ptr:#x}")
    return tmap


def gemm_mod(a_res, b_res, pm, u, m: int, ld: int, *, group: int | None = None,
             ctas: int | None = None, k_chunk: int | None = None,
             cluster: int | None = None) -> None:
    """``u[l] = [Re(A B) mod p_l, Im(A B) mod p_l]`` for every modulus ``l`` from INT8 residues,
    one launch per K chunk on the current CuPy stream (:func:`available` must be True).

    Two forms, chosen by the number of planes of ``a_res``:

    * Karatsuba (3 planes): ``u_re = (T1 - T2) mod p``, ``u_im = (T3 - T1 - T2) mod p`` with
      ``T1 = Ar Br^T``, ``T2 = Ai Bi^T``, ``T3 = As Bs^T``: three INT8 GEMMs, ``|T| <= k 2**14``.
    * direct (4 planes): ``u_re = (Ar Br^T + (-Ai) Bi^T) mod p``, ``u_im = (Ar Bi^T + Ai Br^T)
      mod p``, each an INT32 chain of two INT8 GEMMs over K (``|D| <= k 2**15 < 2**31`` needs
      ``kpad <= 32768``): four GEMMs, but B has two planes and the epilogue two reductions.

    Args:
        a_res (cupy.ndarray): ``(N, 3, mpa, kpad)`` int8 residues ``[Ar, Ai, Ar + Ai]`` of A's
            rows per modulus, or ``(N, 4, mpa, kpad)`` ``[Ar, -Ai, Ar, Ai]`` (the direct form),
            C-contiguous, ``kpad % 16 == 0`` (TMA strides).
        b_res (cupy.ndarray): ``(N, 3, nbp, kpad)`` int8 residues ``[Br, Bi, Br + Bi]`` of B's
            columns, or ``(N, 2, nbp, kpad)`` ``[Br, Bi]`` with 4-plane ``a_res``; C-contiguous.
        pm (cupy.ndarray): ``(N, 2)`` int32: ``p_l`` and ``crt_reduce``'s multiplier
            ``floor(2**39 / p_l) + 1`` as uint32 bits (``_cuda_crt.modulus_table``).
        u (cupy.ndarray): ``(N, 2, m, ld)`` uint8 output, C-contiguous, ``ld % 16 == 0``.
        m: rows of A written (``<= mpa``).
        ld: ``u``'s leading dimension.
        group: column tiles per raster group, default :data:`GROUP_N` (tuning; any value >= 1
            gives the same results).
        ctas: CTAs launched (persistent: each loops over work items); default one per
            multiprocessor; the number of work items ``N ceil(m / 128) ceil(ncols / 256)`` gives
            one work item per CTA (tuning; the results are the same).
        k_chunk: K per launch, default :data:`K_CHUNK` (rounded down to a multiple of 128; in
            the direct form at most 8192, the :data:`LAUNCH_T_BITS` bound); a later
            launch adds its residues to ``u`` mod p (``(x + y) mod p`` of two residues is the
            residue of the sum, so the results are the same).
        cluster: 1, or 2 (Karatsuba form only): clusters of two CTAs that take row tiles
            ``m0`` and ``m0 + 128`` of the same column tile in lockstep, each loading half of
            the B tile with TMA multicast to both (B read from L2 once per pair); default
            :data:`CLUSTER` (tuning; the results are the same).

    The products run over the stored K (exact INT32 sums). Every ``u[l, :, i, j]`` with
    ``i < m``, ``j < min(nbp, ld)`` is written; columns up to the next multiple of 256 below
    ``ld`` may get residues of the rows the last B tile overhangs into (the caller reads only its
    ``nb <= nbp`` columns).

    Raises:
        ValueError: ``kpad`` or ``ld`` not a multiple of 16, a non-contiguous array, planes
            other than 3/3 or 4/2, or the direct form with ``kpad > 32768``.
        RuntimeError: the driver refused the tensor maps or the launch (its status code).
    """
    N, pa, mpa, kpad = a_res.shape
    pb, nbp = b_res.shape[1], b_res.shape[2]
    if kpad % 16 or b_res.shape[3] != kpad or ld % 16:
        raise ValueError("crt_gemm_mod needs kpad and ld multiples of 16")
    mtiles, ntiles = -(-m // BM), -(-min(nbp, ld) // BN)
    cl = int(CLUSTER if cluster is None else cluster)
    if cl not in (1, 2) or (cl == 2 and pa != 3):
        raise ValueError(f"crt_gemm_mod runs clusters of 1, or 2 in the Karatsuba form; got "
                         f"cluster = {cluster} with {pa} planes")
    if (pa, pb) not in ((3, 3), (4, 2)) or b_res.shape[0] != N:
        raise ValueError(f"crt_gemm_mod needs 3/3 (Karatsuba) or 4/2 (direct) residue planes "
                         f"of N moduli, got A {a_res.shape}, B {b_res.shape}")
    if pa == 4 and kpad > 32768:
        raise ValueError(f"the direct form's INT32 chains overflow for kpad = {kpad} > 32768")
    if not (a_res.flags.c_contiguous and b_res.flags.c_contiguous and u.flags.c_contiguous):
        raise ValueError("crt_gemm_mod needs contiguous residues and output")
    ta = _tensor_map(a_res.data.ptr, N * pa * mpa, kpad, BM)
    tb = _tensor_map(b_res.data.ptr, N * pb * nbp, kpad, BN // cl)
    total = -(-mtiles // cl) * ntiles * N  # work items (of cl row tiles each)
    if ctas is None:
        ctas = _state.setdefault("sms", cp.cuda.Device().attributes["MultiProcessorCount"])
        if cl > 1:
            ctas = min(ctas, cl * max_clusters(cl))
    grid = cl * max(1, min(int(ctas) // cl, total))
    stream = cp.cuda.get_current_stream().ptr
    kblocks = -(-kpad // BK)
    step = int(K_CHUNK if k_chunk is None else k_chunk)
    if pa == 4:
        step = min(step, 1 << (LAUNCH_T_BITS - 15))  # |D| <= 2**28 per launch
    step = max(1, step // BK)
    for kb0 in range(0, kblocks, step):
        args = [ta, tb, ctypes.c_int32(mpa), ctypes.c_int32(nbp), ctypes.c_int32(m),
                ctypes.c_int32(ld), ctypes.c_int32(kb0), ctypes.c_int32(min(step, kblocks - kb0)),
                ctypes.c_int32(mtiles), ctypes.c_int32(ntiles), ctypes.c_int32(N),
                ctypes.c_int32(max(1, int(GROUP_N if group is None else group))),
                ctypes.c_int32(kb0 > 0), ctypes.c_uint64(pm.data.ptr), ctypes.c_uint64(u.data.ptr)]
        params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p)
                                                 for a in args])
        func = ctypes.c_void_p(_state["funcs"][(pa, cl)].ptr)
        if cl == 1:
            res = _state["lib"].cuLaunchKernel(
                func, ctypes.c_uint(grid), ctypes.c_uint(1), ctypes.c_uint(1), ctypes.c_uint(384),
                ctypes.c_uint(1), ctypes.c_uint(1), ctypes.c_uint(_SMEM_BYTES),
                ctypes.c_void_p(stream), params, None)
        else:
            cfg, _attr = _cluster_config(grid, cl, stream)
            res = _state["lib"].cuLaunchKernelEx(ctypes.byref(cfg), func, params, None)
        if res != 0:
            raise RuntimeError(f"crt_gemm_mod launch failed ({res})")
