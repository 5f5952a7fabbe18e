"""The GPU half of :mod:`ozsim.gemm.ozaki2` (Ozaki scheme II): CUDA kernels and cuBLAS INT8 GEMMs.

Private; imported only when a CuPy array reaches :mod:`ozsim.gemm.ozaki2`. It computes the CPU
path's integers and its one final rounding with the same operations in the same order, so
``int8-crt{N}`` and ``int8-crt-auto`` give the same bits on CPU and GPU (signed zeros aside).
Every intermediate is an exact integer (module docstring of :mod:`ozsim.gemm.ozaki2`), so FMA
contraction changes nothing: the one inexact FP64 sum, the quotient estimate ``sum u_p / p``, is
only used through ``rint``, which the margin of ``|C'| < (P / 2)(1 - 2**-40)`` makes exact.

============  ===================================================================================
stage         what runs
============  ===================================================================================
analyse       the ozIMMU exponent ``e`` per row, its nonzero count, the sum of the scalars'
              exponents and a NaN/Inf flag (pass 1), the exact integer sum of rounded-up
              squares (pass 2, which needs ``e``), then the norm exponents ``f`` and the loss
              moments ``[count, sum_j]`` of ``int8-crt-auto``. For ``k <= 8192``
              ``crt_analyse_tile``: one kernel, X read once, a block taking whole rows with
              their values in registers. Above, ``crt_scan`` and ``crt_sumsq`` with k split in
              segments across the GPU (atomics combine integers, so the order is irrelevant),
              then ``crt_fin``.
residues      ``crt_residues32`` (plans keeping <= 70 bits; ``crt_residues`` above, in FP64):
              reads each complex value once, scales it to its integer (``rint`` or ``trunc`` of
              ``ldexp(x, g - f)``), splits that exactly into 1..5 balanced pieces ``h_i`` of
              13..16 bits (:func:`pieces32`), so that one FP32 FMA chain
              ``acc = sum h_i (2**(PB i) mod p)`` below ``2**23`` and one quotient
              ``rint(acc fl32(1/p))`` give each symmetric residue with no correction step (the
              CPU's integers by other exact steps), and writes the INT8 residues
              ``[Re, Im, Re + Im]`` (or the direct form's planes) of **all** N moduli, K-major,
              zero-padded: ``(N, planes, rows_p, kpad)``. A's residues (CRT weights folded in)
              are cached on the :class:`~ozsim.gemm.ozaki2.PreparedCRTOperand`; B's are made
              per column block.
INT8 GEMMs    per modulus three ``cublasGemmEx`` INT8 -> INT32 "TN" products (Karatsuba
              ``T1 = Ar Br``, ``T2 = Ai Bi``, ``T3 = (Ar+Ai)(Br+Bi)``) through
              :func:`ozsim.gemm.ozaki1.cuda.gemm_tn_long`: ``cublasGemmEx`` in pieces of
              ``K <= 8192`` added with beta = 1, or a cuBLASLt algorithm for the whole K,
              whichever was faster when the shape was first seen (exact: ``k 2**14 < 2**31``).
reduce        ``crt_reduce``: per modulus, reads the three INT32 planes and writes the residues
              ``u_re = (T1 - T2) mod p`` and ``u_im = (T3 - T1 - T2) mod p`` as UINT8 (2 bytes
              per output instead of 12), in integer arithmetic (multiply-high by a reciprocal).
crt           ``crt_finish`` (compiled per N): a thread takes 4 adjacent outputs of a row and
              reads their ``2 N`` UINT8 residues as ``2 N`` words, forms per output the
              quotient and the base-2**40 digit sums in registers, carries, rounds once,
              ``ldexp`` by the row and column exponents and writes the complex128 result
              (any strides).
============  ===================================================================================

What still reaches HBM and need not: the INT32 planes (12 bytes per output per modulus, written by
cuBLAS and read back by ``crt_reduce``). :mod:`ozsim.gemm.ozaki2.wgmma` removes them (the three
products of a modulus and the reduction in one Hopper ``wgmma`` kernel, 2 bytes per output and
modulus); :func:`_fused_form` uses it by default where it was measured faster (``K <= 8192``:
the state-vector shapes of gates up to 13 qubits, squares up to 8192; ``benchmarks/RESULTS.md``,
sections 3.3 and 3.4).

Small integers are rounded and converted with FP64 exponent tricks (``rint_small``,
``int_small``, ``__hiloint2double``) instead of the conversion unit, which runs at a quarter of
the FP64 rate on Hopper; each trick is exact in the range where it is used (noted at its use).

References:
    [Ozaki2] K. Ozaki, Y. Uchino, T. Imamura, arXiv:2504.08009 (2025).
    cuBLAS documentation, ``cublasGemmEx`` (INT8 inputs, INT32 compute, "TN").
"""

from __future__ import annotations

import warnings

import cupy as cp
import numpy as np

from ... import config
from ...errors import NonFiniteError
from ..ozaki1 import cuda as _cuda
from . import wgmma as _crt_wgmma
from .moduli import LIMB_BITS, LOSS_ALLOWANCE_BITS, NORM_FRAC_BITS, crt_constants

__all__ = ["GatheredMatrix", "analyse", "analyse_launch", "analyse_pair",
           "default_workspace_bytes", "deposit_offsets", "int8_crt_zgemm_gpu", "last_stats",
           "residues_gpu", "settle"]

_THREADS = _cuda._THREADS

_SOURCE = r"""
#define NFRAC %(nfrac)d
#define ALLOW %(allow)d
#define LBITS %(lbits)d
#define MAXMOD 20
#define MAXLIMB 4
#ifndef NH
#define NH 1
#endif
#ifndef NMODC
#define NMODC 1
#define NLIMBC 1
#endif

#define DMAX 1.7976931348623157e308
#define EMIN_ (-2147483647 - 1)
// (y + RMAGIC) - RMAGIC = rint(y) for |y| < 2**51 (two FP64 adds instead of a conversion-unit
// rounding), and the low 32 bits of y + RMAGIC are rint(y) as a two's-complement int32.
#define RMAGIC 6755399441055744.0

__device__ __forceinline__ double rint_small(double y) { return (y + RMAGIC) - RMAGIC; }
__device__ __forceinline__ int int_small(double y) { return __double2loint(y + RMAGIC); }

__device__ __forceinline__ double symmod(double x, double p, double ip, double hi, double lo)
{
    // exact for integer-valued |x| <= 2**45 (ozaki2.sym_mod): q is within 1 of round(x / p)
    // (with or without FMA contraction), q*p and x - q*p are exact; one correction each way
    double r = x - rint_small(x * ip) * p;
    if (r > hi) r -= p;
    if (r < lo) r += p;
    return r;
}

// x * 2**e as ldexp does (exact, or correctly rounded on underflow), by one multiplication
// where 2**e is a normal number
__device__ __forceinline__ double pow2(int e) { return __hiloint2double((e + 1023) << 20, 0); }

// The two analysis passes (ozaki2.analyse_rows) over X (rows, k) complex128, element strides
// (sr, sc), or (roff != 0) through offset tables: X[r, kk] = x[roff[r] + koff[kk]] (a gathered
// matrix: the state read through the next gate's permutation of qubit axes, no copy; sr and sc
// then only describe which index is adjacent in memory), blocks of 256 threads, k split in
// segments of `seg` (blockIdx.y). rowfast != 0 (rows adjacent in memory: B's columns): lane =
// row of a 32-row tile (blockIdx.x), warp w walks
// k = k0 + w, k0 + w + 8, ...; else (rows contiguous along k) warp w takes row 8 blockIdx.x + w
// and its lanes walk k with stride 32. Partials meet per row in shared memory and reach the
// row's global value with one atomic per row and block: every combined quantity is an integer
// (max, count, exact sum), so the order does not matter.
struct Geom {
    long long r, k0, k1, ks;
    int slot;  // this thread's slot in the block's [8][32] table
};

__device__ __forceinline__ Geom crt_geom(int rowfast, long long k, long long seg)
{
    Geom g;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    const long long kb = (long long)blockIdx.y * seg;
    g.k1 = kb + seg < k ? kb + seg : k;
    if (rowfast) { g.r = (long long)blockIdx.x * 32 + lane; g.k0 = kb + w; g.ks = 8; }
    else { g.r = (long long)blockIdx.x * 8 + w; g.k0 = kb + lane; g.ks = 32; }
    g.slot = threadIdx.x;
    return g;
}

// row (within the block) and number of parts of the combining thread t
__device__ __forceinline__ int crt_slot(int rowfast, int t, int part)
{
    return rowfast ? part * 32 + t : t * 32 + part;
}

// Pass 1: per row the largest frexp exponent of its scalars (emax, atomicMax, initialised to
// INT_MIN: the ozIMMU exponent e, 0 for a zero row after crt_fin), the count of nonzero scalars
// (nnz) and, over the whole matrix, the sum of the frexp exponents of the nonzero scalars
// (acc[2]); acc[3] = 1 on NaN/Inf.
extern "C" __global__ void crt_scan(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    const long long* __restrict__ roff, const long long* __restrict__ koff,
    long long seg, int rowfast, int* __restrict__ emax, int* __restrict__ nnz,
    unsigned long long* __restrict__ acc)
{
    __shared__ int s_e[256], s_n[256];
    __shared__ long long s_v[8];
    const Geom g = crt_geom(rowfast, k, seg);
    int em = EMIN_, cnt = 0, bad = 0;
    long long sev = 0;
    if (g.r < rows) {
        const double2* p = x + (roff ? roff[g.r] : g.r * sr);
        for (long long kk = g.k0; kk < g.k1; kk += g.ks) {
            const double2 v = p[roff ? koff[kk] : kk * sc];
            bad |= !(fabs(v.x) <= DMAX) | !(fabs(v.y) <= DMAX);
            int ex, ey;
            frexp(v.x, &ex);
            frexp(v.y, &ey);
            if (v.x != 0.0) { em = max(em, ex); ++cnt; sev += ex; }
            if (v.y != 0.0) { em = max(em, ey); ++cnt; sev += ey; }
        }
    }
    s_e[g.slot] = em;
    s_n[g.slot] = cnt;
    for (int o = 16; o > 0; o >>= 1) sev += __shfl_xor_sync(0xffffffffu, sev, o);
    if ((threadIdx.x & 31) == 0) s_v[threadIdx.x >> 5] = sev;
    if (__syncthreads_or(bad) && threadIdx.x == 0) acc[3] = 1ull;
    const int nrb = rowfast ? 32 : 8, nparts = rowfast ? 8 : 32;
    const int t = threadIdx.x;
    const long long r = (long long)blockIdx.x * nrb + t;
    if (t < nrb && r < rows) {
        int e = EMIN_, c = 0;
        for (int q = 0; q < nparts; ++q) {
            e = max(e, s_e[crt_slot(rowfast, t, q)]);
            c += s_n[crt_slot(rowfast, t, q)];
        }
        if (e != EMIN_) atomicMax(&emax[r], e);
        if (c) atomicAdd(&nnz[r], c);
    }
    if (t == 0) {
        long long tot = 0;
        for (int q = 0; q < 8; ++q) tot += s_v[q];
        if (tot) atomicAdd(&acc[2], (unsigned long long)tot);
    }
}

// Pass 2: S = sum ceil(|x| 2**(NFRAC - e))**2 per row (integers < 2**53: exact in any order),
// added into sq[r] (uint64).
extern "C" __global__ void crt_sumsq(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    const long long* __restrict__ roff, const long long* __restrict__ koff,
    long long seg, int rowfast, const int* __restrict__ emax, unsigned long long* __restrict__ sq)
{
    __shared__ double s_s[256];
    const Geom g = crt_geom(rowfast, k, seg);
    double s = 0.0;
    if (g.r < rows && emax[g.r] != EMIN_) {
        const double2* p = x + (roff ? roff[g.r] : g.r * sr);
        const int sh = NFRAC - emax[g.r];
        const bool fast = sh <= 1023;  // e >= -1010: 2**sh normal (sh >= 13 - 1024 always)
        const double scale = fast ? pow2(sh) : 0.0;
        for (long long kk = g.k0; kk < g.k1; kk += g.ks) {
            const double2 v = p[roff ? koff[kk] : kk * sc];
            const double qa = ceil(fast ? fabs(v.x) * scale : ldexp(fabs(v.x), sh));
            const double qb = ceil(fast ? fabs(v.y) * scale : ldexp(fabs(v.y), sh));
            s += qa * qa;
            s += qb * qb;
        }
    }
    s_s[g.slot] = s;
    __syncthreads();
    const int nrb = rowfast ? 32 : 8, nparts = rowfast ? 8 : 32;
    const int t = threadIdx.x;
    const long long r = (long long)blockIdx.x * nrb + t;
    if (t < nrb && r < rows) {
        double tot = 0.0;
        for (int q = 0; q < nparts; ++q) tot += s_s[crt_slot(rowfast, t, q)];
        if (tot > 0.0) atomicAdd(&sq[r], (unsigned long long)tot);
    }
}

// Per row: f = e - NFRAC + ceil(bitlength(S) / 2) (0 for a zero row) into f; with mom != 0 the
// sums of nnz (acc[0]) and nnz (f + ALLOW - a) (acc[1]), a = min(ALLOW, floor(log2(nnz) / 2)).
extern "C" __global__ void crt_fin(
    long long rows, const int* __restrict__ emax, const unsigned long long* __restrict__ sq,
    const int* __restrict__ nnz, int* __restrict__ f, unsigned long long* __restrict__ acc,
    int mom)
{
    long long c = 0, t = 0;
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < rows;
         r += (long long)gridDim.x * blockDim.x) {
        const int e = emax[r] == EMIN_ ? 0 : emax[r];
        const double s = (double)sq[r];  // exact: < 2**53
        int fr = 0;
        if (s > 0.0) {
            int bl;
            frexp(s, &bl);
            fr = e - NFRAC + (bl + 1) / 2;
        }
        f[r] = fr;
        const int n = nnz[r];
        if (n > 0) {
            const int a = (31 - __clz(n)) / 2;
            c += n;
            t += (long long)n * (fr + ALLOW - (a < ALLOW ? a : ALLOW));
        }
    }
    if (mom) {
        for (int o = 16; o > 0; o >>= 1) {
            c += __shfl_xor_sync(0xffffffffu, c, o);
            t += __shfl_xor_sync(0xffffffffu, t, o);
        }
        if ((threadIdx.x & 31) == 0 && c) {
            atomicAdd(&acc[0], (unsigned long long)c);
            atomicAdd(&acc[1], (unsigned long long)t);
        }
    }
}

// The whole analysis in one kernel where k <= 8 TPR (the state-vector gates up to 13 qubits,
// squares up to 8192): a block of THREADS takes RPB = THREADS / TPR rows with all of k (TPR =
// 8 .. 1024 threads per row, the fewest that hold k at AT_VPT = 8 values per thread; 256
// threads in 4 blocks per multiprocessor up to TPR = 128, then 2 rows a block, 1 at 1024),
// each thread keeping its values in registers, so that X is read once instead of twice and
// crt_fin's launch and the per-row atomics go. Thread t: rowfast (rows adjacent in memory)
// row t %% RPB, k = t / RPB + TPR j; else row t / TPR, k = t %% TPR + TPR j (contiguous along
// k). The same integers as crt_scan + crt_sumsq + crt_fin: max, counts and sums of integers
// below 2**53, so the order of the reductions does not matter.
#define AT_VPT 8
template <int TPR, int THREADS>
__device__ __forceinline__ int at_slot(int rowfast, int rl, int kt)
{
    return rowfast ? kt * (THREADS / TPR) + rl : rl * TPR + kt;
}

template <bool TAB, int TPR, int THREADS>
__device__ __forceinline__ void crt_analyse_tile_body(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    const long long* __restrict__ roff, const long long* __restrict__ koff, int rowfast,
    int* __restrict__ f, unsigned long long* __restrict__ acc, int mom)
{
    constexpr int RPB = THREADS / TPR;
    __shared__ int s_e[THREADS], s_n[THREADS];
    __shared__ double s_s[THREADS];
    __shared__ long long s_v[THREADS / 32], s_mc[RPB], s_mt[RPB];
    __shared__ int s_row[RPB], s_cnt[RPB];
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    const int rl = rowfast ? t %% RPB : t / TPR;
    const int kt = rowfast ? t / RPB : t %% TPR;
    const long long r = (long long)blockIdx.x * RPB + rl;
    const bool valid = r < rows;
    const double2* p = x + (valid ? (TAB ? roff[r] : r * sr) : 0);
    double2 v[AT_VPT];
#pragma unroll
    for (int j = 0; j < AT_VPT; ++j) {
        const long long kk = kt + (long long)TPR * j;
        v[j] = (valid && kk < k) ? p[TAB ? koff[kk] : kk * sc] : make_double2(0.0, 0.0);
    }
    // pass 1: e, the nonzero count, the sum of exponents, NaN/Inf
    int em = EMIN_, cnt = 0, bad = 0;
    long long sev = 0;
#pragma unroll
    for (int j = 0; j < AT_VPT; ++j) {
        bad |= !(fabs(v[j].x) <= DMAX) | !(fabs(v[j].y) <= DMAX);
        int ex, ey;
        frexp(v[j].x, &ex);
        frexp(v[j].y, &ey);
        if (v[j].x != 0.0) { em = max(em, ex); ++cnt; sev += ex; }
        if (v[j].y != 0.0) { em = max(em, ey); ++cnt; sev += ey; }
    }
    s_e[t] = em;
    s_n[t] = cnt;
    for (int o = 16; o > 0; o >>= 1) sev += __shfl_xor_sync(0xffffffffu, sev, o);
    if (lane == 0) s_v[w] = sev;
    const int anybad = __syncthreads_or(bad);
    for (int row = w; row < RPB; row += THREADS / 32) {  // warp w: rows w, w + THREADS / 32..
        int e = EMIN_, c = 0;
        for (int i = lane; i < TPR; i += 32) {
            e = max(e, s_e[at_slot<TPR, THREADS>(rowfast, row, i)]);
            c += s_n[at_slot<TPR, THREADS>(rowfast, row, i)];
        }
        for (int o = 16; o > 0; o >>= 1) {
            e = max(e, __shfl_xor_sync(0xffffffffu, e, o));
            c += __shfl_xor_sync(0xffffffffu, c, o);
        }
        if (lane == 0) { s_row[row] = e; s_cnt[row] = c; }
    }
    __syncthreads();
    // pass 2: S = sum ceil(|x| 2**(NFRAC - e))**2, from the registers
    const int erow = s_row[rl];
    double s = 0.0;
    if (valid && erow != EMIN_) {
        const int sh = NFRAC - erow;
        const bool fast = sh <= 1023;  // as crt_sumsq
        const double scale = fast ? pow2(sh) : 0.0;
#pragma unroll
        for (int j = 0; j < AT_VPT; ++j) {  // zeros (k padding) add nothing
            const double qa = ceil(fast ? fabs(v[j].x) * scale : ldexp(fabs(v[j].x), sh));
            const double qb = ceil(fast ? fabs(v[j].y) * scale : ldexp(fabs(v[j].y), sh));
            s += qa * qa;
            s += qb * qb;
        }
    }
    s_s[t] = s;
    __syncthreads();
    for (int row = w; row < RPB; row += THREADS / 32) {  // crt_fin of the row
        double tot = 0.0;
        for (int i = lane; i < TPR; i += 32) tot += s_s[at_slot<TPR, THREADS>(rowfast, row, i)];
        for (int o = 16; o > 0; o >>= 1) tot += __shfl_xor_sync(0xffffffffu, tot, o);
        const long long rr = (long long)blockIdx.x * RPB + row;
        long long mc = 0, mt = 0;
        if (rr < rows) {
            const int e = s_row[row] == EMIN_ ? 0 : s_row[row];
            int fr = 0;
            if (tot > 0.0) {
                int bl;
                frexp(tot, &bl);
                fr = e - NFRAC + (bl + 1) / 2;
            }
            if (lane == 0) f[rr] = fr;
            const int n = s_cnt[row];
            if (n > 0) {
                const int a = (31 - __clz(n)) / 2;
                mc = n;
                mt = (long long)n * (fr + ALLOW - (a < ALLOW ? a : ALLOW));
            }
        }
        if (lane == 0) { s_mc[row] = mc; s_mt[row] = mt; }
    }
    __syncthreads();
    if (t == 0) {
        long long tv = 0, c = 0, tt = 0;
        for (int q = 0; q < THREADS / 32; ++q) tv += s_v[q];
        for (int q = 0; q < RPB; ++q) { c += s_mc[q]; tt += s_mt[q]; }
        if (tv) atomicAdd(&acc[2], (unsigned long long)tv);
        if (mom && c) {
            atomicAdd(&acc[0], (unsigned long long)c);
            atomicAdd(&acc[1], (unsigned long long)tt);
        }
        if (anybad) acc[3] = 1ull;
    }
}
#define AT_KERNEL(TAB, TPR, THREADS, MINB, NAME)                                              \
    extern "C" __global__ void __launch_bounds__(THREADS, MINB) NAME(                        \
        const double2* __restrict__ x, long long rows, long long k, long long sr,           \
        long long sc, const long long* __restrict__ roff, const long long* __restrict__ koff, \
        int rowfast, int* __restrict__ f, unsigned long long* __restrict__ acc, int mom)    \
    {                                                                                        \
        crt_analyse_tile_body<TAB, TPR, THREADS>(x, rows, k, sr, sc, roff, koff, rowfast, f, \
                                                 acc, mom);                                  \
    }
// (instances: _tile_source, one module of their own, not in every variant of this source)

// Grid-stride item idx of the residue kernels -> row r and 4-k chunk q: qb == 0: adjacent
// threads take adjacent chunks of a row (rows contiguous along k); qb > 0 (rows adjacent in
// memory): a warp takes a tile of 32/qb rows x qb chunks. False where the tile overhangs.
__device__ __forceinline__ bool crt_item(long long idx, int qb, long long nrt, long long nq,
                                         long long ra, long long& r, long long& q)
{
    if (!qb) { q = idx %% nq; r = idx / nq; return true; }
    const int rb = 32 / qb, lane = (int)(idx & 31);
    const long long tile = idx >> 5;
    r = (tile %% nrt) * rb + lane / qb;
    q = (tile / nrt) * qb + lane %% qb;
    return r < ra && q < nq;
}

// The 4 values of chunk q of row r (zero outside the matrix), each part scaled to its integer
// v = rnd(ldexp(x, bits - f[r])) (rint if rnd, else trunc: the scheme's one rounding) and split
// exactly into NPC pieces of PB bits, v = sum_i h_i 2**(PB i), all of v's sign; T holds them
// exactly (|h_i| <= 2**PB). BAL: balanced pieces instead (each rounded to nearest by rint_small:
// |h_i| <= 2**(PB - 1) below the top one, |h_top| <= max(1, 2**(bits - PB (NPC - 1))), mixed
// signs), with FP64 adds where truncation takes the conversion unit. TAB: read X through the
// offset tables (roff, koff), a compile-time choice (a per-value test cost the issue-bound
// residue kernels 15-20%%).
template <typename T, int PB, int NPC, bool BAL = false, bool TAB = false>
__device__ __forceinline__ void crt_pieces(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    const long long* __restrict__ roff, const long long* __restrict__ koff,
    const int* __restrict__ f, int bits, int rnd, long long r, long long q, T (&h)[2][4][NPC])
{
    const bool valid = r < rows;
    const int sh = valid ? bits - f[r] : 0;
    const bool fast = sh >= -1022 && sh <= 1023;
    const double scale = fast ? pow2(sh) : 0.0;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
        const long long kk = q * 4 + c;
        const double2 v = (valid && kk < k) ? x[TAB ? roff[r] + koff[kk] : r * sr + kk * sc]
                                                   : make_double2(0.0, 0.0);
#pragma unroll
        for (int part = 0; part < 2; ++part) {
            const double xv = part ? v.y : v.x;
            const double ys = fast ? xv * scale : ldexp(xv, sh);  // as ldexp: exact here
            double y = rnd ? rint(ys) : trunc(ys);
#pragma unroll
            for (int i = NPC - 1; i > 0; --i) {
                const double hi_ = BAL ? rint_small(y * pow2(-PB * i))  // |.| < 2**51
                                       : trunc(y * pow2(-PB * i));  // exact (|y| >= 1 or 0)
                h[part][c][i] = (T)hi_;  // exact
                y -= hi_ * pow2(PB * i);  // exact: the bits of y below 2**(PB i)
            }
            h[part][c][0] = (T)y;
        }
    }
}

// Symmetric INT8 residues of the rows of X (rows, k) complex128, element strides (sr, sc) or
// offset tables (roff, koff: as the analysis),
// scaled to integers v = rint(ldexp(x, bits - f[r])) (rnd != 0; else trunc), for nmod moduli:
// out is (nmod, 3, ra, kpad) int8, [Re, Im, Re + Im] per modulus, rows >= rows and k >= k zero.
// v (|v| <= 2**bits, bits <= 26 NH) is split exactly into NH halves of 26 bits,
// v = sum_i h_i 2**(26 i) (|h_i| <= 2**26, one sign), so that per modulus
// v mod p = symmod(sum_i h_i W_i) with W_i = 2**(26 i) * weight mod p (|W_i| <= 128): the sum is
// an integer below NH 2**33 (exact FMAs), and one symmod per part and modulus suffices.
// cst is (nmod, 12) double: p, 1/p, hi, lo, W_0 .. W_5, 0, 0. Each thread handles 4 consecutive
// k of one row. qb == 0: adjacent threads take adjacent chunks of a row (rows contiguous along
// k); qb > 0 (rows adjacent in memory): a warp takes a tile of 32/qb rows x qb chunks (loads
// cover adjacent rows, stores qb*4 contiguous bytes).
#define CRT_RESIDUES_PARAMS                                                                   \
    const double2* __restrict__ x, long long rows, long long ra, long long k, long long kpad, \
    long long sr, long long sc, const long long* __restrict__ roff,                           \
    const long long* __restrict__ koff, const int* __restrict__ f, int bits, int nmod,        \
    const double* __restrict__ cst, signed char* __restrict__ out, int qb, int rnd, int planes
template <bool TAB>
__device__ __forceinline__ void crt_residues_body(CRT_RESIDUES_PARAMS)
{
    const long long nq = kpad / 4;
    const int rb = qb ? 32 / qb : 1;
    const long long nrt = (ra + rb - 1) / rb;
    const long long total = qb ? nrt * ((nq + qb - 1) / qb) * 32 : ra * nq;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long mstride = planes * ra * kpad;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += stride) {
        long long r, q;
        if (!crt_item(idx, qb, nrt, nq, ra, r, q)) continue;
        double h[2][4][NH];
        crt_pieces<double, 26, NH, false, TAB>(x, rows, k, sr, sc, roff, koff, f, bits, rnd, r,
                                               q, h);
        signed char* dst = out + r * kpad + q * 4;
        for (int l = 0; l < nmod; ++l) {
            const double* cl = cst + 12 * l;
            const double p = cl[0], ip = cl[1], hi = cl[2], lo = cl[3];
            double w[NH];
#pragma unroll
            for (int i = 0; i < NH; ++i) w[i] = cl[4 + i];
            unsigned int wr = 0u, wi = 0u, ws = 0u;
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                double rr[2];
#pragma unroll
                for (int part = 0; part < 2; ++part) {
                    double acc = h[part][c][0] * w[0];
#pragma unroll
                    for (int i = 1; i < NH; ++i) acc += h[part][c][i] * w[i];  // exact
                    rr[part] = symmod(acc, p, ip, hi, lo);
                }
                // planes 4: -i (for p = 256, -(-128) = 128 wraps to -128, the same residue)
                const double rs = planes == 4 ? -rr[1] : symmod(rr[0] + rr[1], p, ip, hi, lo);
                wr |= ((unsigned int)int_small(rr[0]) & 0xffu) << (8 * c);
                wi |= ((unsigned int)int_small(rr[1]) & 0xffu) << (8 * c);
                ws |= ((unsigned int)int_small(rs) & 0xffu) << (8 * c);
            }
            signed char* d = dst + (long long)l * mstride;
            *(unsigned int*)d = wr;
            if (planes == 4) {  // [r, -i, r, i]: the direct form of the fused products
                *(unsigned int*)(d + ra * kpad) = ws;
                *(unsigned int*)(d + 2 * ra * kpad) = wr;
                *(unsigned int*)(d + 3 * ra * kpad) = wi;
            } else {
                *(unsigned int*)(d + ra * kpad) = wi;
                if (planes == 3) *(unsigned int*)(d + 2 * ra * kpad) = ws;
            }
        }
    }
}
extern "C" __global__ void crt_residues(CRT_RESIDUES_PARAMS)
{
    crt_residues_body<false>(x, rows, ra, k, kpad, sr, sc, roff, koff, f, bits, nmod, cst, out,
                             qb, rnd, planes);
}
extern "C" __global__ void crt_residues_tab(CRT_RESIDUES_PARAMS)  // X through offset tables
{
    crt_residues_body<true>(x, rows, ra, k, kpad, sr, sc, roff, koff, f, bits, nmod, cst, out,
                            qb, rnd, planes);
}

// The same residues for plans that keep at most 70 bits, in FP32 arithmetic (twice the FP64
// rate; the kernel is issue-bound): v is split exactly into NP balanced pieces of PB32 bits
// (crt_pieces<..., true>: |h_i| <= 2**(PB32 - 1) below the top piece, held as FP32), and per
// modulus acc = sum_i h_i W_i (W_i = 2**(PB32 i) * weight mod p, |W_i| <= 128) is an integer
// with |acc| < 2**23 (pieces32() picks NP and PB32 so): exact in FP32 in any order, FMAs
// included. The residue is r = acc - q p with q = rint(acc ip), ip = fl32(1/p), by magic-number
// rounding (acc ip + 1.5 2**23 rounds to the integer grid; |acc ip| < 2**16):
// |acc / p - q| <= 1/2 + |acc| 2**-24 / p, so |r| <= p/2 + |acc| 2**-24 < p/2 + 1/2. For odd p
// that is |r| <= (p - 1)/2, the symmetric residue itself; for p = 256, |r| <= 128, whose low
// byte is the residue (128 and -128 share the byte 0x80). No correction steps: the bytes equal
// those of symmod (and the CPU's ozaki2.residues). Re + Im: s = r_re + r_im (|s| < 2 p) by the
// same step. The per-modulus constants p, ip, W_i are literals in res32_all (generated per N,
// PB32 and weighting by _residue32_source), so the fully unrolled loop over moduli loads none.
#define RMAGIC32 12582912.0f  // 1.5 * 2**23

__device__ __forceinline__ float rem32(float x, float p, float ip)
{
    const float q = fmaf(x, ip, RMAGIC32) - RMAGIC32;  // rint(x ip)
    return fmaf(-q, p, x);  // exact: integers below 2**24
}

// the low bytes of 4 small integer-valued floats (|r| <= 2**22) as one little-endian word
__device__ __forceinline__ unsigned int pack4(const float (&r)[4])
{
    const unsigned int b0 = __float_as_uint(r[0] + RMAGIC32), b1 = __float_as_uint(r[1] + RMAGIC32);
    const unsigned int b2 = __float_as_uint(r[2] + RMAGIC32), b3 = __float_as_uint(r[3] + RMAGIC32);
    return __byte_perm(__byte_perm(b0, b1, 0x0040u), __byte_perm(b2, b3, 0x0040u), 0x5410u);
}

#ifndef NP
#define NP 5
#endif
#ifndef PB32
#define PB32 13
#endif
// One modulus: the residue planes of 4 values (h: [part][c][piece]) at d, planes ps apart:
// PLANES 2 [r, i], 3 [r, i, r + i], 4 [r, -i, r, i] (-i of -128 mod 256 is the same byte).
template <int PLANES>
__device__ __forceinline__ void res32_mod(const float (&h)[2][4][NP], signed char* d,
                                          long long ps, float p, float ip, float w0, float w1,
                                          float w2, float w3, float w4)
{
    const float w[5] = {w0, w1, w2, w3, w4};
    float rr[3][4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
#pragma unroll
        for (int part = 0; part < 2; ++part) {
            float acc = h[part][c][0] * w[0];
#pragma unroll
            for (int i = 1; i < NP; ++i) acc = fmaf(h[part][c][i], w[i], acc);  // exact
            rr[part][c] = rem32(acc, p, ip);
        }
        if (PLANES == 3) rr[2][c] = rem32(rr[0][c] + rr[1][c], p, ip);
        if (PLANES == 4) rr[2][c] = -rr[1][c];
    }
    const unsigned int wr = pack4(rr[0]), wi = pack4(rr[1]);
    *(unsigned int*)d = wr;
    if (PLANES == 4) {
        *(unsigned int*)(d + ps) = pack4(rr[2]);
        *(unsigned int*)(d + 2 * ps) = wr;
        *(unsigned int*)(d + 3 * ps) = wi;
    } else {
        *(unsigned int*)(d + ps) = wi;
        if (PLANES == 3) *(unsigned int*)(d + 2 * ps) = pack4(rr[2]);
    }
}

#ifdef NMODR
%(res32_all)s

template <int PLANES, bool TAB>
__device__ __forceinline__ void crt_residues32_body(
    const double2* __restrict__ x, long long rows, long long ra, long long k, long long kpad,
    long long sr, long long sc, const long long* __restrict__ roff,
    const long long* __restrict__ koff, const int* __restrict__ f, int bits,
    signed char* __restrict__ out, int qb, int rnd)
{
    const long long nq = kpad / 4;
    const int rb = qb ? 32 / qb : 1;
    const long long nrt = (ra + rb - 1) / rb;
    const long long total = qb ? nrt * ((nq + qb - 1) / qb) * 32 : ra * nq;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long ps = ra * kpad;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += stride) {
        long long r, q;
        if (!crt_item(idx, qb, nrt, nq, ra, r, q)) continue;
        float h[2][4][NP];
        crt_pieces<float, PB32, NP, true, TAB>(x, rows, k, sr, sc, roff, koff, f, bits, rnd, r,
                                               q, h);
        res32_all<PLANES>(h, out + r * kpad + q * 4, ps, PLANES * ps);
    }
}

#define RES32_KERNEL(PL, TAB, NAME)                                                           \
    extern "C" __global__ void NAME(                                                         \
        const double2* __restrict__ x, long long rows, long long ra, long long k,           \
        long long kpad, long long sr, long long sc, const long long* __restrict__ roff,    \
        const long long* __restrict__ koff, const int* __restrict__ f, int bits,           \
        signed char* __restrict__ out, int qb, int rnd)                                     \
    {                                                                                        \
        crt_residues32_body<PL, TAB>(x, rows, ra, k, kpad, sr, sc, roff, koff, f, bits, out, \
                                     qb, rnd);                                               \
    }
RES32_KERNEL(2, false, crt_residues32_2)
RES32_KERNEL(3, false, crt_residues32_3)
RES32_KERNEL(4, false, crt_residues32_4)
RES32_KERNEL(2, true, crt_residues32_2_tab)  // X through offset tables
RES32_KERNEL(3, true, crt_residues32_3_tab)
RES32_KERNEL(4, true, crt_residues32_4_tab)
#endif

// One modulus: t holds the INT32 planes T1, T2, T3 (each (mp, ld) row-major, plane elements
// apart, ld a multiple of 4); u gets u_re = (T1 - T2) mod p and u_im = (T3 - T1 - T2) mod p in
// [0, p) as UINT8, (2, m, ld) (columns >= nb: residues of the zero padding). Integer arithmetic:
// |T| <= k 2**14 < 2**31, and for 128 < p <= 256, a < 2**31 and M = floor(2**39 / p) + 1 < 2**32,
// floor(a M / 2**39) = floor(a / p) (the excess a (M - 2**39/p) / 2**39 < 2**-8 <= 1/p cannot
// carry past the next integer). Each thread takes 4 adjacent columns: three 16-byte loads and
// two 4-byte stores.
__device__ __forceinline__ int crt_modp(int t, int p, unsigned int M)
{
    const unsigned int a = t < 0 ? (unsigned int)(-t) : (unsigned int)t;
    const int r = (int)(a - (__umulhi(a, M) >> 7) * (unsigned int)p);
    return (t < 0 && r) ? p - r : r;  // in [0, p)
}

extern "C" __global__ void crt_reduce(
    const int* __restrict__ t, long long m, long long ld, long long plane, int p,
    unsigned int M, unsigned char* __restrict__ u)
{
    const long long nq = ld / 4;
    const long long total = m * nq;
    const int4* t1p = (const int4*)t;
    const int4* t2p = (const int4*)(t + plane);
    const int4* t3p = (const int4*)(t + 2 * plane);
    unsigned int* ure = (unsigned int*)u;
    unsigned int* uim = (unsigned int*)(u + m * ld);
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const int4 a = t1p[idx], b = t2p[idx], c = t3p[idx];
        const int t1[4] = {a.x, a.y, a.z, a.w}, t2[4] = {b.x, b.y, b.z, b.w};
        const int t3[4] = {c.x, c.y, c.z, c.w};
        unsigned int wre = 0u, wim = 0u;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int r1 = crt_modp(t1[e], p, M), r2 = crt_modp(t2[e], p, M);
            const int r3 = crt_modp(t3[e], p, M);
            int re = r1 - r2;
            re += re < 0 ? p : 0;
            int im = r3 - r1 - r2;
            im += im < 0 ? p : 0;
            im += im < 0 ? p : 0;
            wre |= (unsigned int)re << (8 * e);
            wim |= (unsigned int)im << (8 * e);
        }
        ure[idx] = wre;
        uim[idx] = wim;
    }
}

// CRT reconstruction (ozaki2._CRTAccumulator), NMODC moduli and NLIMBC digits fixed at compile
// time: u is (NMODC, 2, m, ld) UINT8 (ld a multiple of 4); cst holds 1/p (NMODC), then the digits
// of P/p ((NMODC, NLIMBC), lowest first), then the digits of P (NLIMBC), staged in shared memory.
// out[i, j] = ldexp(C'_re, fa[i] + fb[j] - gsum) + i ldexp(C'_im, ...). Each thread takes 4
// adjacent columns of row i (blockIdx.y: i - i0), in passes of FINISH_PARTS parts: 2 (re and im
// together, as one pass) or 1 (re, then im: half the live accumulators and loaded words, so
// that 3 blocks of 256 fit per multiprocessor at 80 registers instead of 2 at 96). The kernel is
// latency-bound (ncu, H100, N = 28 d = 8: 23%% occupancy, FP64 pipe 51%%, DRAM 53%%); one part a
// pass took N = 28 d = 8 (15 moduli, 3 digits) from 7.03 to 5.55 ms, but with 16 moduli (4
// digits) it left the second part's loads exposed and was slower, unless every word is loaded
// up front (FINISH_PRELOAD, 2 blocks of 256): _FINISH_OPTS in Python picks per digit count
// (benchmarks/crt_finish_probe.py). Per part: NMODC independent 4-byte loads (one word per
// plane, 4 columns), bytes to FP64 by an exponent trick rather than a conversion; no
// grid-stride loop (so the constants stay in shared memory).
#ifndef FINISH_PARTS
#define FINISH_PARTS 2
#endif
#ifndef FINISH_BLOCKS
#define FINISH_BLOCKS 3
#endif
#ifndef FINISH_THREADS
#define FINISH_THREADS 256
#endif
#if !defined(FINISH_PRELOAD) || FINISH_PARTS != 1
#undef FINISH_PRELOAD
#define FINISH_PRELOAD 0
#endif
#if FINISH_PARTS == 1  // 3 blocks of 256 at <= 85 registers (no spills: 78-80)
#define FINISH_BOUNDS __launch_bounds__(FINISH_THREADS, FINISH_BLOCKS)
#else  // as measured before: no bounds (96 registers at N = 15, 128 at N = 16)
#define FINISH_BOUNDS
#endif
extern "C" __global__ void FINISH_BOUNDS crt_finish(
    const unsigned char* __restrict__ u, long long m, long long nb, long long ld,
    const double* __restrict__ cst, const int* __restrict__ fa, const int* __restrict__ fb,
    int gsum, double2* __restrict__ out, long long so_r, long long so_c, long long i0)
{
    constexpr int PP = FINISH_PARTS;
    __shared__ double sc[NMODC * (NLIMBC + 1) + NLIMBC];
    const int ncst = NMODC * (NLIMBC + 1) + NLIMBC;
    for (int t = threadIdx.x; t < ncst; t += blockDim.x) sc[t] = cst[t];
    __syncthreads();
    const long long i = i0 + blockIdx.y;
    const long long j0 = 4 * ((long long)blockIdx.x * blockDim.x + threadIdx.x);
    if (j0 >= nb) return;
    // one part per pass: volatile, so that the constants are read where used, once per pass,
    // not hoisted out of the pass loop into registers (N (NLIMBC + 1) doubles would undo the
    // halved state); both parts in one pass: plain (volatile reads there took 222-254 registers)
#if FINISH_PARTS == 1
#define FINISH_CV volatile
#else
#define FINISH_CV
#endif
    const FINISH_CV double* invp = sc;
    const FINISH_CV double* lm = sc + NMODC;
    const FINISH_CV double* lp = sc + NMODC + NMODC * NLIMBC;
    const long long plane = m * ld;
    const unsigned int* ui = (const unsigned int*)(u + i * ld + j0);  // j0 + 3 < ld
    const double radix = ldexp(1.0, LBITS), iradix = ldexp(1.0, -LBITS);
    double res[2][4];
#if FINISH_PRELOAD  // one part per pass, but every word loaded up front (the loads overlap)
    unsigned int w_re[NMODC], w_im[NMODC];
#pragma unroll
    for (int l = 0; l < NMODC; ++l) {
        w_re[l] = ui[(2 * l) * (plane / 4)];
        w_im[l] = ui[(2 * l + 1) * (plane / 4)];
    }
#endif
#pragma unroll 1
    for (int p0 = 0; p0 < 2; p0 += PP) {  // not unrolled: one pass's state live at a time
        unsigned int w[NMODC][PP];
#pragma unroll
        for (int l = 0; l < NMODC; ++l) {
#pragma unroll
            for (int pp = 0; pp < PP; ++pp) {
#if FINISH_PRELOAD
                w[l][pp] = p0 ? w_im[l] : w_re[l];
#else
                w[l][pp] = ui[(2 * l + p0 + pp) * (plane / 4)];
#endif
            }
        }
        // per output (4 columns x PP parts): the quotient estimate and the digit sums; the
        // moduli loop outermost, so that each constant read from shared memory serves all
        double q[4][PP], d[4][PP][NLIMBC];
#pragma unroll
        for (int col = 0; col < 4; ++col) {
#pragma unroll
            for (int pp = 0; pp < PP; ++pp) {
                q[col][pp] = 0.0;
#pragma unroll
                for (int c = 0; c < NLIMBC; ++c) d[col][pp][c] = 0.0;
            }
        }
#pragma unroll
        for (int l = 0; l < NMODC; ++l) {
            const double ip = invp[l];
            double lml[NLIMBC];
#pragma unroll
            for (int c = 0; c < NLIMBC; ++c) lml[c] = lm[l * NLIMBC + c];
#pragma unroll
            for (int col = 0; col < 4; ++col) {
#pragma unroll
                for (int pp = 0; pp < PP; ++pp) {
                    // 2**52 + byte, exactly, minus 2**52
                    const unsigned int byte = (w[l][pp] >> (8 * col)) & 0xffu;
                    const double v = __hiloint2double(0x43300000, byte) - 4503599627370496.0;
                    // only rint(q) is used: exact (|C'| < P/2 (1 - 2**-40))
                    q[col][pp] += v * ip;
#pragma unroll
                    for (int c = 0; c < NLIMBC; ++c) d[col][pp][c] += v * lml[c];  // exact
                }
            }
        }
        double lpr[NLIMBC];
#pragma unroll
        for (int c = 0; c < NLIMBC; ++c) lpr[c] = lp[c];
#pragma unroll
        for (int col = 0; col < 4; ++col) {
#pragma unroll
            for (int pp = 0; pp < PP; ++pp) {
                double* dd = d[col][pp];
                const double qq = rint_small(q[col][pp]);
#pragma unroll
                for (int c = 0; c < NLIMBC; ++c) dd[c] -= qq * lpr[c];  // exact
#pragma unroll
                for (int c = 0; c + 1 < NLIMBC; ++c) {  // balanced digits, exact
                    const double carry = rint_small(dd[c] * iradix);
                    dd[c] -= carry * radix;
                    dd[c + 1] += carry;
                }
                double v = dd[0];
#pragma unroll
                for (int c = 1; c < NLIMBC; ++c) v = dd[c] * ldexp(1.0, LBITS * c) + v;  // exact
                if (PP == 2) res[pp][col] = v;
                else if (p0) res[1][col] = v;
                else res[0][col] = v;
            }
        }
    }
    const int sha = fa[i] - gsum;
#pragma unroll
    for (int col = 0; col < 4; ++col) {
        const long long j = j0 + col;
        if (j >= nb) break;
        const int sh = sha + fb[j];
        out[i * so_r + j * so_c] = make_double2(ldexp(res[0][col], sh), ldexp(res[1][col], sh));
    }
}
"""

_modules: dict = {}
_functions: dict = {}
#: Bits per exact half of a scaled integer in ``crt_residues`` (``6 * 26 >= 154 = gamma(20)``).
HALF_BITS = 26
MAX_HALVES = 6
#: Chunks of 4 k per warp row in ``crt_residues`` for B's strided columns (``qb``, a power of 2
#: <= 32): a warp covers 32 / qb adjacent columns x 4 qb k. H100, B^T of 16384 x 16384, N = 16:
#: qb = 4 / 8 / 16 / 32 took 61 / 22 / 11 / 9.4 ms (the stores, 3 N bytes per value, want long
#: runs; the loads' half-used sectors are served from L2 to the neighbouring warp).
_TILE_CHUNKS = 32
#: Threads per block of the residue kernels: 96 registers per thread allow 2 blocks of 256 per
#: multiprocessor (16 warps) or 5 of 128 (20). H100 (``benchmarks/crt_residue_probe.py``): B of
#: the N = 28, d = 8 state GEMM 9.70 -> 8.48 ms, A of a 16384 square 9.21 -> 8.60 ms.
_RESIDUE_THREADS = 128
#: At most this many balanced pieces in ``crt_residues32`` (FP32 arithmetic): plans keeping
#: <= 70 bits (:func:`pieces32`).
PIECES32 = 5


def pieces32(bits: int) -> tuple[int, int] | None:
    """``(NP, PB)``: the fewest balanced pieces (and their bits, 13..16) in which
    ``crt_residues32`` holds a scaled integer of ``bits`` bits, or ``None`` (more than
    :data:`PIECES32`: the FP64 kernel).

    The condition is the kernel's exactness bound (``_SOURCE``, ``crt_residues32``):
    ``|acc| = |sum_i h_i W_i| <= 128 ((NP - 1) 2**(PB - 1) + 2**max(0, bits - PB (NP - 1)))
    < 2**23``, so that one quotient ``rint(acc fl32(1/p))`` gives the symmetric residue with no
    correction. Examples: 58 bits -> 4 pieces of 15; 62 -> 5 of 13; 70 -> 5 of 14.
    """
    for np_ in range(1, PIECES32 + 1):
        for pb in range(13, 17):
            top = max(0, bits - pb * (np_ - 1))
            if 128 * ((np_ - 1) * 2 ** (pb - 1) + 2**top) < 2**23:
                return np_, pb
    return None


_INT_MIN = -(2**31)
#: ``crt_analyse_tile``'s geometry (:func:`_tile_threads`, :func:`_tile_source`): threads per
#: block below 128 threads a row, ``AT_VPT`` values per thread, the threads per row (the fewest
#: that hold k are used) and the largest k. H100 (RESULTS.md
#: 3.7), B of N = 26 gates, d = 8 / 9 / 10: 256 threads, 4 blocks per multiprocessor,
#: 0.48-0.54 ms; 512 threads (2 blocks) 0.48-0.57; 4 values per thread (512 x 3, 256 x 6,
#: 1024 x 1) no better; the segmented passes 0.85-1.60. Square 8192: A 0.79 -> 0.52 ms, B's
#: columns (one a block, half-used sectors) 0.78 -> 0.72.
_TILE_THREADS, _TILE_VALUES = 256, 8
_TILE_ROW_THREADS = (8, 16, 32, 64, 128, 256, 512, 1024)
_TILE_K = _TILE_ROW_THREADS[-1] * _TILE_VALUES


def _tile_threads(tpr: int) -> int:
    """Threads per block of ``crt_analyse_tile`` at ``tpr`` threads a row: 256 (several rows)
    up to 128 a row, else two rows' threads, at most 1024 (one row)."""
    return _TILE_THREADS if tpr <= _TILE_THREADS // 2 else min(1024, 2 * tpr)


def _tile_source() -> str:
    """:data:`_SOURCE` with the ``crt_analyse_tile_<tpr>[_tab]`` instances, one per threads per
    row, each with as many blocks per multiprocessor as 64 registers a thread allow."""
    lines = [_source()]
    for tab in (False, True):
        for tpr in _TILE_ROW_THREADS:
            threads = _tile_threads(tpr)
            lines.append(f"AT_KERNEL({str(tab).lower()}, {tpr}, {threads}, {65536 // 64 // threads}"
                         f", crt_analyse_tile_{tpr}{'_tab' if tab else ''})")
    return "\n".join(lines)


#: ``crt_finish``'s pass structure per digit count (the rest: both parts in one pass), as
#: measured on the H100 (``benchmarks/crt_finish_probe.py``, RESULTS.md 3.5): 3 digits (11..15
#: moduli) one part per pass, 3 blocks of 256 (N = 28 d = 8: 6.91 -> 5.57 ms); 4 digits (16..20
#: moduli, measured at 16) one part per pass with every word loaded up front, 2 blocks
#: (d = 10: 6.39 -> 6.27 ms, square 8192: 1.62 -> 1.54 ms; one part per pass without the
#: preload was slower there, 7.57 and 1.91).
_FINISH_OPTS = {3: ["-DFINISH_PARTS=1", "-DFINISH_BLOCKS=3"],
                4: ["-DFINISH_PARTS=1", "-DFINISH_PRELOAD=1", "-DFINISH_BLOCKS=2"]}


def _kernel(name: str, halves: int = 1, num_moduli: int = 0):
    """A kernel of :data:`_SOURCE`, compiled once per number of 26-bit halves (``-DNH``) and,
    for ``crt_finish``, per number of moduli (``-DNMODC``, ``-DNLIMBC`` and the pass structure
    of :data:`_FINISH_OPTS`); the ``crt_analyse_tile_*`` kernels once (:func:`_tile_source`)."""
    if name.startswith("crt_analyse_tile"):
        return _function("tile", name, lambda: cp.RawModule(code=_tile_source()))

    def build():
        opts = [f"-DNH={halves}"]
        if num_moduli:
            limbs = crt_constants(num_moduli).num_limbs
            opts += [f"-DNMODC={num_moduli}", f"-DNLIMBC={limbs}"] + _FINISH_OPTS.get(
                limbs, ["-DFINISH_PARTS=2"])
        return cp.RawModule(code=_source(), options=tuple(opts))

    return _function((halves, num_moduli), name, build)


def _function(key, name: str, build):
    """Kernel ``name`` of the module ``key`` (made by ``build()`` on first use), cached per
    device: ``RawModule.get_function`` costs ~20 us of host time a call, several times a
    GEMM."""
    fkey = (key, name, cp.cuda.runtime.getDevice())
    fn = _functions.get(fkey)
    if fn is None:
        mod = _modules.get(key)
        if mod is None:
            mod = _modules[key] = build()
        fn = _functions[fkey] = mod.get_function(name)
    return fn


def _source(res32_all: str = "") -> str:
    return _SOURCE % {"nfrac": NORM_FRAC_BITS, "lbits": LIMB_BITS,
                      "allow": LOSS_ALLOWANCE_BITS, "res32_all": res32_all}


def _f32(v: float) -> str:
    """A CUDA float literal that parses to ``fl32(v)`` exactly (shortest round-trip digits)."""
    return np.format_float_scientific(np.float32(v), unique=True) + "f"


def _residue32_source(num_moduli: int, weighted: bool, piece_bits: int) -> str:
    """``res32_all``: one ``res32_mod`` call per modulus with its constants as literals (``p``,
    ``fl32(1/p)``, ``W_i``; :func:`_residue_table_host`'s values), for the first
    ``num_moduli`` moduli, weighted by the CRT weights ``q_p`` (A) or not (B)."""
    table = _residue_table_host(num_moduli, weighted, piece_bits, np.float32)
    calls = []
    for l, row in enumerate(table):
        args = ", ".join(_f32(v) for v in [row[0], row[1], *row[4:4 + PIECES32]])
        calls.append(f"    res32_mod<PLANES>(h, d + {l}LL * ms, ps, {args});")
    return ("template <int PLANES>\n__device__ __forceinline__ void res32_all(\n"
            "    const float (&h)[2][4][NP], signed char* d, long long ps, long long ms)\n{\n"
            + "\n".join(calls) + "\n}")


def _residue32_kernel(pieces: int, piece_bits: int, num_moduli: int, weighted: bool,
                      planes: int, tables: bool = False):
    """``crt_residues32_<planes>`` (``_tab``: reading through offset tables), compiled once per
    number of balanced pieces and their bits (``-DNP``, ``-DPB32``; :func:`pieces32`), number of
    moduli and weighting (the moduli's constants are literals of the code)."""
    def build():
        return cp.RawModule(code=_source(_residue32_source(num_moduli, weighted, piece_bits)),
                            options=(f"-DNP={pieces}", f"-DPB32={piece_bits}",
                                     f"-DNMODR={num_moduli}"))

    return _function(("res32", pieces, piece_bits, num_moduli, bool(weighted)),
                     f"crt_residues32_{planes}" + ("_tab" if tables else ""), build)


class GatheredMatrix:
    """A ``(k, n)`` complex128 matrix on the GPU read through offset tables, no copy:
    ``B[i, j] = data[row_offsets[i] + col_offsets[j]]`` (element offsets).

    The state-vector engine passes the state this way to the ``int8-crt*`` backends when the
    next gate's target qubits are not the leading axes: ``row_offsets`` deposit the gate index
    into the target qubits' bit positions, ``col_offsets`` the column index into the other
    qubits' (:func:`deposit_offsets`), so that the analysis and residue kernels read the
    permuted state directly and the transposing copy of the state (a read and a write of
    ``16 * 2**N`` bytes per gate) is skipped. Only these backends' GPU kernels read it;
    elsewhere it is materialised (:meth:`materialize`).

    Args:
        data (cupy.ndarray): 1-D complex128, the buffer.
        row_offsets (cupy.ndarray): ``(k,)`` int64.
        col_offsets (cupy.ndarray): ``(n,)`` int64.
        strides: ``(row stride, column stride)`` in elements of the lowest index bit of each
            (which index is adjacent in memory: the kernels' thread mapping).
        view (cupy.ndarray): the same matrix as a strided N-d view of ``data`` whose C-order
            reshape is ``(k, n)`` (for :meth:`materialize`), or ``None``.
    """

    _ozsim_gathered = True  # ozsim._array.is_cupy_array: a CuPy operand

    def __init__(self, data, row_offsets, col_offsets, strides, view=None):
        self.data, self.row_offsets, self.col_offsets = data, row_offsets, col_offsets
        self.shape = (int(row_offsets.size), int(col_offsets.size))
        self.dtype, self.ndim = data.dtype, 2
        self.strides_elements = (int(strides[0]), int(strides[1]))
        self._view = view

    @property
    def T(self) -> GatheredMatrix:  # noqa: N802 - the array attribute's name
        """The transpose (the tables swapped; not materialisable from a view)."""
        return GatheredMatrix(self.data, self.col_offsets, self.row_offsets,
                              self.strides_elements[::-1])

    def __getitem__(self, key):
        """``[:, j0:j1]`` and ``[i0:i1, :]`` (contiguous slices of the tables)."""
        if not (isinstance(key, tuple) and len(key) == 2 and all(
                isinstance(s, slice) and s.step in (None, 1) for s in key)):
            raise TypeError(f"GatheredMatrix supports [slice, slice] only, not {key!r}")
        return GatheredMatrix(self.data, self.row_offsets[key[0]], self.col_offsets[key[1]],
                              self.strides_elements)

    def materialize(self):
        """The matrix as a new C-contiguous ``(k, n)`` CuPy array (one state-sized
        allocation; from the N-d view where there is one, else by a gather)."""
        if self._view is not None:
            return cp.ascontiguousarray(self._view).reshape(self.shape)
        return self.data[self.row_offsets[:, None] + self.col_offsets[None, :]]


_DEPOSIT = cp.ElementwiseKernel(  # compiled on first use
    "raw int32 bits, int32 nb", "int64 y",
    "long long v = 0; for (int t = 0; t < nb; ++t) "
    "v |= (long long)((i >> (nb - 1 - t)) & 1) << bits[t]; y = v;", "ozsim_deposit")


def deposit_offsets(bits) -> cp.ndarray:
    """``(2**len(bits),)`` int64 element offsets: entry ``i`` has bit ``len(bits) - 1 - t`` of
    ``i`` moved to bit ``bits[t]`` (``bits[0]`` the most significant index bit: the order of
    the axes of a row-major tensor of 2s).

    Raises:
        ValueError: a bit position outside 0..62 or repeated.
    """
    bits = [int(b) for b in bits]
    if len(set(bits)) != len(bits) or any(not 0 <= b < 63 for b in bits):
        raise ValueError(f"bit positions must be distinct and in 0..62, got {bits}")
    out = cp.empty(1 << len(bits), dtype=cp.int64)
    _DEPOSIT(cp.asarray(np.array(bits, dtype=np.int32)), np.int32(len(bits)), out)
    return out


def _geometry(x) -> tuple[int, int, object, object]:
    """``(sr, sc, roff, koff)`` of the analysis and residue kernels on ``x`` ``(rows, k)``:
    element strides and offset tables (``np.uint64(0)``, null pointers, for a strided array)."""
    if isinstance(x, GatheredMatrix):
        sr, sc = x.strides_elements
        return sr, sc, x.row_offsets, x.col_offsets
    sr, sc = _cuda._strides(x)
    return sr, sc, np.uint64(0), np.uint64(0)


def _grid1(items: int) -> int:
    """Blocks of a grid-stride loop over ``items``: at most ~8 resident blocks per SM."""
    return int(max(1, min(-(-items // _THREADS), 8 * _cuda._sms())))


#: Sizes and layout of the last :func:`int8_crt_zgemm_gpu` call (working-memory report).
last_stats: dict = {}


def _segments(tiles: int, k: int, step: int) -> int:
    """k-segment length of the analysis passes: enough blocks (tiles x segments) to fill the GPU
    four times over, segments of at least 64 steps."""
    want = max(1, -(-4 * 8 * _cuda._sms() // max(tiles, 1)))
    nseg = max(1, min(want, k // (64 * step)))
    return -(-k // nseg)


def _analyse_result(host, moments: bool):
    """The moments (or ``None``) from one row of the analysis counters on the host."""
    host = host.view(np.int64)
    if host[3]:
        raise NonFiniteError("GEMM operand has NaN or Inf entries")
    return np.array([host[0], host[1] - host[2]], dtype=np.int64) if moments else None


def analyse(x, moments: bool = True):
    """Norm exponents (and the loss moments) of the rows of ``x`` on the GPU.

    Pass 1 finds each row's ozIMMU exponent ``e``, its count of nonzero scalars and the sum of
    their exponents; pass 2 the exact integer ``S`` of the norm bound; then ``f`` and the
    moments. For ``k <= 8192`` one kernel (``crt_analyse_tile``) does all three, each block
    holding whole rows in registers (X read once); above, ``crt_scan`` and ``crt_sumsq`` split
    k into segments, so that B's columns (``b.T``, rows adjacent in memory) are read by the
    whole GPU, not one thread per column, and ``crt_fin`` forms ``f``. The same integers either
    way (maxima, counts and exact integer sums).

    Args:
        x (cupy.ndarray): ``(rows, k)`` complex128, any strides (``b.T`` for B's columns).
        moments: also compute the loss moments.

    Returns:
        ``(f, mom)``: ``(rows,)`` int32 CuPy, equal to
        :func:`ozsim.gemm.ozaki2.norm_exponents`; ``(2,)`` int64 **NumPy** ``[count, sum_j]``
        equal to :func:`ozsim.gemm.ozaki2.analyse_rows`'s (``None`` without ``moments``).

    Raises:
        NonFiniteError: NaN or Inf in ``x`` (checked on the host after the kernels: one sync).
    """
    f, acc = analyse_launch(x, moments)
    return f, _analyse_result(acc.get(), moments)


def analyse_launch(x, moments: bool = True):
    """:func:`analyse`'s kernels on ``x`` without waiting: ``(f, acc)``, ``f`` ``(rows,)``
    int32 CuPy (usable by later kernels on the stream at once), ``acc`` ``(4,)`` uint64 CuPy
    ``[count, sum nnz (f + ALLOW - a), sum of exponents, NaN/Inf flag]``, the counters that
    :func:`settle` brings to the host. ``x`` may be a :class:`GatheredMatrix`."""
    rows, k = x.shape
    tile = 0 < k <= _TILE_K
    f = (cp.empty if tile else cp.zeros)(rows, dtype=cp.int32)  # the tile kernel writes all
    acc = cp.zeros(4, dtype=cp.uint64)
    if rows and k:
        sr, sc, roff, koff = _geometry(x)
        geo = (_data(x), np.int64(rows), np.int64(k), np.int64(sr), np.int64(sc), roff, koff)
        rowfast = abs(sr) <= abs(sc)
        with _cuda._stage("analyse"):
            if tile:  # one kernel, X read once (its values held in registers)
                tpr = next(t for t in _TILE_ROW_THREADS if k <= _TILE_VALUES * t)
                threads = _tile_threads(tpr)
                name = f"crt_analyse_tile_{tpr}" + ("_tab" if isinstance(x, GatheredMatrix)
                                                    else "")
                _kernel(name)((-(-rows // (threads // tpr)),), (threads,),
                              geo + (np.int32(rowfast), f, acc, np.int32(moments)))
            else:  # two passes with k split in segments, then crt_fin
                tiles = -(-rows // (32 if rowfast else 8))
                seg = _segments(tiles, k, 8 if rowfast else 32)
                emax = cp.full(rows, _INT_MIN, dtype=cp.int32)
                nnz = cp.zeros(rows, dtype=cp.int32)
                sq = cp.zeros(rows, dtype=cp.uint64)
                geo += (np.int64(seg), np.int32(rowfast))
                grid = (tiles, -(-k // seg))
                _kernel("crt_scan")(grid, (_THREADS,), geo + (emax, nnz, acc))
                _kernel("crt_sumsq")(grid, (_THREADS,), geo + (emax, sq))
                _kernel("crt_fin")((_grid1(rows),), (_THREADS,),
                                   (np.int64(rows), emax, sq, nnz, f, acc, np.int32(moments)))
    return f, acc


def settle(prep, *accs):
    """The pending analysis counters of the prepared operand ``prep`` (``None``, or one whose
    ``_pending`` was launched by :func:`analyse_launch`) and ``accs`` in one device-to-host
    transfer: sets ``prep``'s loss moments and returns the moments of each of ``accs``.

    Raises:
        NonFiniteError: NaN or Inf in ``prep``'s matrix or in an operand of ``accs``.
    """
    pending = getattr(prep, "_pending", None)
    rows = ([pending] if pending is not None else []) + list(accs)
    if not rows:
        return []
    host = rows[0].get()[None] if len(rows) == 1 else cp.stack(rows).get()
    if pending is not None:
        prep._moments = _analyse_result(host[0], True)  # raises before prep is marked settled
        prep._pending = None
        host = host[1:]
    return [_analyse_result(h, True) for h in host]


def analyse_pair(a, bt):
    """:func:`analyse` of ``a`` and of ``bt`` (both with moments) with one host transfer
    (:func:`analyse_launch` twice, then :func:`settle`): the GPU runs both analyses back to
    back, the host waits once.

    Args:
        a (cupy.ndarray): ``(m, k)`` complex128, any strides.
        bt (cupy.ndarray): ``(n, k)`` complex128, any strides (``b.T``).

    Returns:
        ``((f_a, mom_a), (f_b, mom_b))`` as :func:`analyse` returns them.

    Raises:
        NonFiniteError: NaN or Inf in ``a`` or ``bt``.
    """
    f_a, acc_a = analyse_launch(a)
    f_b, acc_b = analyse_launch(bt)
    mom_a, mom_b = settle(None, acc_a, acc_b)
    return (f_a, mom_a), (f_b, mom_b)


_const_cache: dict = {}


def _residue_constants(num_moduli: int, weighted: bool):
    """``crt_residues``' (FP64) constants: :func:`_residue_table_host` with 26-bit halves,
    cached on the current device."""
    key = (num_moduli, weighted, cp.cuda.Device().id)
    c = _const_cache.get(key)
    if c is None:
        c = _const_cache[key] = cp.asarray(
            _residue_table_host(num_moduli, weighted, HALF_BITS, np.float64))
    return c


def _residue_table_host(num_moduli: int, weighted: bool, piece_bits: int, dtype) -> np.ndarray:
    """``(N, 12)`` ``dtype`` (NumPy): ``p, fl(1/p), hi, lo`` and ``W_i = 2**(piece_bits i) *
    weight mod p`` (symmetric, i = 0..5 (FP64 kernel) or 0..4 (FP32 kernel)), the weight being
    the CRT weight ``q_p`` for A and 1 for B."""
    const = crt_constants(num_moduli)
    count = MAX_HALVES if dtype == np.float64 else PIECES32
    rows = []
    for p, w in zip(const.moduli, const.weights):
        weight = w if weighted else 1
        ws = []
        for i in range(count):
            v = ((1 << (piece_bits * i)) * weight) % p
            ws.append(float(v - p if v > (p - 1) // 2 else v))
        row = [float(p), float(dtype(1.0) / dtype(p)), float((p - 1) // 2), float(-(p // 2))]
        rows.append(row + ws + [0.0] * (8 - count))
    return np.array(rows, dtype=dtype)


def residues_gpu(x, f, bits: int, num_moduli: int, *, weighted: bool, kpad: int, rows_alloc: int,
                 rounding: bool = True, out=None, planes: int = 3):
    """INT8 residues of the rows of ``x`` for all moduli, K-major: :func:`ozaki2.residues` on GPU.

    Args:
        x (cupy.ndarray): ``(rows, k)`` complex128, any strides.
        f (cupy.ndarray): ``(rows,)`` int32 norm exponents.
        bits: kept bits ``g`` (``<= 156``).
        num_moduli: ``N``.
        weighted: fold the CRT weights ``q_p`` in (the A operand).
        kpad: stored inner dimension (a multiple of 4).
        rows_alloc: stored rows (``>= rows``, a multiple of 4).
        rounding: round the scaled integers to nearest (else truncate): ``CRTPlan.rounding``.
        out (cupy.ndarray): ``(N, planes, rows_alloc, kpad)`` int8 buffer, or ``None``.
        planes: 3: ``[r, i, r + i]`` (Karatsuba products); 2: ``[r, i]``; 4: ``[r, -i, r, i]``
            (the direct form of :func:`ozsim.gemm.ozaki2.wgmma.gemm_mod`; ``-i`` of ``-128`` mod
            256 is ``-128``, the same residue).

    Returns:
        ``(N, planes, rows_alloc, kpad)`` int8: for ``planes = 3``, ``[l, :, :rows, :k]`` equals
        ``ozaki2.residues(pieces_re, pieces_im, p_l, q_l or 1)`` (pieces from
        ``ozaki2.scaled_pieces(..., rounding=rounding)``); the padding is 0.
    """
    if planes not in (2, 3, 4):
        raise ValueError(f"planes must be 2, 3 or 4, not {planes}")
    rows, k = x.shape
    halves = max(1, -(-bits // HALF_BITS))
    plan32 = pieces32(bits)
    if halves > MAX_HALVES:
        raise ValueError(f"kept bits {bits} exceed the {HALF_BITS * MAX_HALVES} this kernel holds")
    if out is None:
        out = cp.empty((num_moduli, planes, rows_alloc, kpad), dtype=cp.int8)
    if rows_alloc == 0 or kpad == 0:
        return out
    sr, sc, roff, koff, qb, total = _residue_items(x, rows_alloc, kpad)
    grid = int(max(1, min(-(-total // _RESIDUE_THREADS), 64 * _cuda._sms())))
    geo = (_data(x), np.int64(rows), np.int64(rows_alloc), np.int64(k), np.int64(kpad),
           np.int64(sr), np.int64(sc), roff, koff, f, np.int32(bits))
    tab = isinstance(x, GatheredMatrix)
    if plan32 is not None:  # FP32 arithmetic (issue-bound kernel, twice the FP64 rate)
        _residue32_kernel(*plan32, num_moduli, weighted, planes, tab)(
            (grid,), (_RESIDUE_THREADS,), geo + (out, np.int32(qb), np.int32(bool(rounding))))
    else:
        _kernel("crt_residues_tab" if tab else "crt_residues", halves)(
            (grid,), (_RESIDUE_THREADS,),
            geo + (np.int32(num_moduli), _residue_constants(num_moduli, weighted), out,
                   np.int32(qb), np.int32(bool(rounding)), np.int32(planes)))
    return out


def _residue_items(x, rows_alloc: int, kpad: int) -> tuple:
    """``(sr, sc, roff, koff, qb, total)`` of the residue kernels on ``x`` ``(rows, k)``:
    :func:`_geometry`, chunks per warp row (0: rows contiguous along k, adjacent threads take
    adjacent chunks; else :data:`_TILE_CHUNKS` at most, tiles of ``32 / qb`` rows) and
    grid-stride items."""
    rows, k = x.shape
    sr, sc, roff, koff = _geometry(x) if rows and k else (1, 1, np.uint64(0), np.uint64(0))
    nq = kpad // 4
    qb = 0
    if abs(sr) <= abs(sc):  # rows adjacent in memory: tiles of rows x chunks per warp
        qb = 1
        while qb * 2 <= min(nq, _TILE_CHUNKS):
            qb *= 2
    total = rows_alloc * nq if qb == 0 else -(-rows_alloc // (32 // qb)) * -(-nq // qb) * 32
    return sr, sc, roff, koff, qb, total


def _data(x):
    """The buffer the kernels index: ``x`` itself, or a :class:`GatheredMatrix`'s data."""
    return x.data if isinstance(x, GatheredMatrix) else x


def _pad4(x: int) -> int:
    return -(-x // 4) * 4


def prepared_residues(prep, bits: int, num_moduli: int, kpad: int, rounding: bool = True,
                      planes: int = 3):
    """A's residues ``(N, planes, mp, kpad)`` int8 (:func:`residues_gpu`), cached on the prepared
    operand by ``(bits, N, kpad, rounding, planes)`` (a larger ``N`` with the same bits and
    rounding is reused: residues do not depend on ``N``)."""
    r = _cached_residues(prep, bits, num_moduli, kpad, rounding, planes)
    if r is not None:
        return r
    m = prep.shape[0]
    with _cuda._stage("residues_a"):
        r = residues_gpu(prep.matrix, prep.norm_exponents, bits, num_moduli, weighted=True,
                         kpad=kpad, rows_alloc=_pad4(m), rounding=rounding, planes=planes)
    prep._device_cache[(bits, num_moduli, kpad, rounding, planes)] = r
    return r


def _cached_residues(prep, bits: int, num_moduli: int, kpad: int, rounding: bool, planes: int):
    """A's cached residues for this layout (the first ``num_moduli`` of a larger ``N``), or
    ``None``."""
    for (b, n, kp, rd, pl), r in prep._device_cache.items():
        if b == bits and kp == kpad and rd == rounding and pl == planes and n >= num_moduli:
            return r[:num_moduli]
    return None


def _crt_constants_gpu(num_moduli: int):
    key = ("crt", num_moduli, cp.cuda.Device().id)
    dev = _const_cache.get(key)
    if dev is None:
        c = crt_constants(num_moduli)
        host = np.concatenate([c.inv_p, c.limbs_M.ravel(), c.limbs_P])
        dev = _const_cache[key] = cp.asarray(host)
    return dev


#: Largest default working memory of one scheme II GEMM: B's residues, one modulus' INT32 planes
#: and the UINT8 residues of all moduli take ~92 bytes per output column and row at N = 16
#: (24.7 GB for n = 16384), and one block of all columns runs the INT8 GEMMs ~5% faster than
#: two (H100: 48 x 6.12 ms at 16384 columns against 48 x (4.48 + 1.98) ms at 11396 + 4988).
WORKSPACE_CAP = 32 << 30


def default_workspace_bytes(prep, plan) -> int:
    """Default working memory of :func:`int8_crt_zgemm_gpu`: half the free device memory left
    after A's residues (if not yet cached), at most :data:`WORKSPACE_CAP` bytes."""
    m, k = prep.shape
    _, pa, _, kpad = _layout(k)
    cached = _cached_residues(prep, plan.bits_a, plan.num_moduli, kpad, plan.rounding, pa)
    reserve = 0 if cached is not None else pa * plan.num_moduli * _pad4(m) * kpad
    return _cuda.default_workspace_bytes(reserve, WORKSPACE_CAP)


#: Largest padded K for which :func:`_fused_form` picks the fused products by default.
#: H100 (RESULTS.md 3.3, 3.4), fused (Karatsuba form) against cuBLAS INT8 GEMMs + ``crt_reduce``
#: (``benchmarks/crt_fused_probe.py``): state shapes K = 256..2048 1.10-1.85x, K = 4096 (d = 12)
#: 0.96-1.03x, square 8192 1.06-1.16x in four runs; end to end (``crt_bench.py``, T = 0): square
#: 8192 52.5 -> 50.4 ms, state d = 12 118.8 -> 111.4 ms. Square 16384 is left to cuBLAS: 322-429
#: ms fused on different machines against a steady 336-345 (the GPU sits at its 700 W cap during
#: the INT8 products, SM clocks 1320-1590 MHz, and the fused kernel's rate follows it).
FUSED_MAX_K = 8192
#: Largest padded K for which the default fused products take the direct form (4 products,
#: B in 2 residue planes, an epilogue of two reductions) instead of Karatsuba's (3 products).
#: H100, N = 28, 15 moduli, whole-sector stores and one Karatsuba epilogue per chain (RESULTS.md
#: 3.4), products alone, direct / Karatsuba ms: d = 8 9.9 / 18.1, d = 9 17.4 / 20.4, d = 10
#: 30.2 / 28.4, d = 11 52.4 / 44.5, d = 12 113 / 78.6, square 8192 52.7 / 37.2. At d = 10 end
#: to end (same machine): state GEMM 50.8 / 50.2 ms, brickwork N = 26 0.102 / 0.116 s: direct.
DIRECT_MAX_K = 1024


def _fused_form(kpad: int) -> int:
    """How :func:`int8_crt_zgemm_gpu` runs the INT8 products: 0 = cuBLAS INT32 planes and
    ``crt_reduce``; 3 or 4 = fused with the reduction mod p (:mod:`ozsim.gemm.ozaki2.wgmma`), in
    Karatsuba's (3) or the direct (4) form. The results are the same integers in every case.

    ``OZSIM_CRT_FUSED``: ``0`` never fused; ``1`` or ``3`` always fused (Karatsuba) where the
    GPU has it (compute capability 9.0; elsewhere a warning once and cuBLAS); ``4`` always the
    direct form (``kpad <= 32768``, else Karatsuba); unset or ``auto``: fused where available and
    ``kpad <= FUSED_MAX_K``, in the direct form for ``kpad <= DIRECT_MAX_K`` (where the epilogue
    dominates) and Karatsuba's above (where the tensor cores
    do: a quarter fewer products).
    """
    mode = config.get("OZSIM_CRT_FUSED")
    if mode == "0":
        return 0
    form = 4 if mode == "4" and kpad <= 32768 else 3
    if mode not in ("1", "3", "4"):
        if kpad > FUSED_MAX_K or not _crt_wgmma.available():
            return 0
        return 4 if kpad <= DIRECT_MAX_K else 3
    if _crt_wgmma.available():
        return form
    state = _crt_wgmma._state
    if not state.get("warned"):  # asked for, not there: say so once, then the cuBLAS path
        state["warned"] = True
        warnings.warn(f"OZSIM_CRT_FUSED={mode}, but the fused scheme II kernel is unavailable "
                      f"({state.get('error')}): cuBLAS products are used (same results)",
                      RuntimeWarning, stacklevel=3)
    return 0


def _pad16(x: int) -> int:
    return -(-x // 16) * 16


def _layout(k: int) -> tuple[int, int, int, int]:
    """``(form, A planes, B planes, stored K)`` of :func:`int8_crt_zgemm_gpu` for inner
    dimension ``k``: the fused products (:func:`_fused_form`) need TMA rows of 16-byte multiples
    and 4/2 residue planes in the direct form; cuBLAS's K is :func:`_cuda.padded_k`."""
    form = _fused_form(_pad16(k))
    pa, pb = (4, 2) if form == 4 else (3, 3)
    return form, pa, pb, (_pad16(k) if form else _cuda.padded_k(k))


def reduce_multiplier(p: int) -> np.uint32:
    """``crt_reduce``'s ``M = floor(2**39 / p) + 1``: ``floor(a M / 2**39) = floor(a / p)`` for
    ``0 <= a < 2**31``, ``128 < p <= 256`` (the kernel's comment has the argument)."""
    return np.uint32((1 << 39) // p + 1)


_pm_cache: dict = {}


def modulus_table(num_moduli: int):
    """``(N, 2)`` int32 CuPy: ``p`` and :func:`reduce_multiplier` (as uint32 bits) per modulus,
    the fused kernel's constants; cached per device."""
    key = (num_moduli, cp.cuda.Device().id)
    t = _pm_cache.get(key)
    if t is None:
        t = _pm_cache[key] = cp.asarray(np.array(
            [[p, reduce_multiplier(p).view(np.int32)] for p in crt_constants(num_moduli).moduli],
            dtype=np.int32))
    return t


def int8_crt_zgemm_gpu(prep, b, plan, *, b_exponents=None, out=None, workspace_bytes: int):
    """``C = A @ B`` by Ozaki scheme II on the GPU; see :func:`ozsim.gemm.ozaki2.int8_crt_zgemm`.

    Args:
        prep: :class:`~ozsim.gemm.ozaki2.PreparedCRTOperand` of A ``(m, k)`` (CuPy).
        b (cupy.ndarray): ``(k, n)`` complex128, any strides.
        plan: :class:`~ozsim.gemm.ozaki2.CRTPlan`.
        b_exponents (cupy.ndarray): ``(n,)`` int32 norm exponents of B's columns, or ``None``.
        out (cupy.ndarray): ``(m, n)`` complex128 (any strides, not overlapping ``b``).
        workspace_bytes: bound on B's residues, one modulus' INT32 planes (none with the fused
            products of :mod:`ozsim.gemm.ozaki2.wgmma`) and the UINT8 residues of one column block.

    Returns:
        ``out``.
    """
    global last_stats
    m, k = prep.shape
    n = b.shape[1]
    N, ga, gb = plan.num_moduli, plan.bits_a, plan.bits_b
    if b_exponents is None:  # one sync: B's counters and A's pending ones (NaN/Inf checks)
        b_exponents, acc_b = analyse_launch(b.T, moments=False)
        settle(prep, acc_b)
    elif getattr(prep, "_pending", None) is not None:
        settle(prep)
    if out is None:
        out = cp.empty((m, n), dtype=cp.complex128)
    if m == 0 or n == 0:
        return out
    form, pa, pb, kpad = _layout(k)
    fused = form > 0
    mp = _pad4(m)
    # B residues, INT32 planes (not with the fused products), UINT8 u
    per_col = pb * N * kpad + (0 if fused else 12 * mp) + 2 * N * m + 16
    nb = max(4, min(_pad4(n), int(workspace_bytes) // per_col // 4 * 4))
    if fused:  # TMA row coordinates (l pb + t) nbp + j are int32
        nb = min(nb, (2**31 - 2**20) // (pb * N) // 16 * 16)
    nb = min(nb, n)
    nbp = _pad4(nb)
    b_res = cp.empty((N, pb, nbp, kpad), dtype=cp.int8)
    a_res = None
    for j0 in range(0, n, nb):
        nbj = min(n, j0 + nb) - j0
        nbpj = _pad4(nbj)
        bres = b_res if nbpj == nbp else \
            b_res.ravel()[: N * pb * nbpj * kpad].reshape(N, pb, nbpj, kpad)
        # one block (the state-vector gates): no slices (~70 us of host time while the GPU waits)
        bj, fj, oj = (b, b_exponents, out) if nbj == n else (
            b[:, j0 : j0 + nbj], b_exponents[j0 : j0 + nbj], out[:, j0 : j0 + nbj])
        with _cuda._stage("residues_b"):
            residues_gpu(bj.T, fj, gb, N, weighted=False, kpad=kpad, rows_alloc=nbpj,
                         rounding=plan.rounding, out=bres, planes=pb)
        if a_res is None:  # after B's first residues: the GPU runs them while the host sets up
            a_res = prepared_residues(prep, ga, N, kpad, plan.rounding, planes=pa)
            planes = None if fused else cp.empty((3, mp, nbp), dtype=cp.int32)
            ldu = _pad16(nb) if fused else nbp
            u = cp.empty((N, 2, m, ldu), dtype=cp.uint8)
            const = crt_constants(N)
            cst = _crt_constants_gpu(N)
            so_r, so_c = _cuda._strides(out)
            last_stats = {"m": m, "k": k, "n": n, "num_moduli": N, "bits": (ga, gb),
                          "kpad": kpad, "block_columns": nb, "blocks": -(-n // nb),
                          "fused": fused, "form": form, "a_residue_bytes": int(a_res.nbytes),
                          "workspace_bytes": int(b_res.nbytes + u.nbytes + (
                              0 if planes is None else planes.nbytes))}
            if not fused:
                handle = cp.cuda.device.get_cublas_handle()
                _cuda.cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
                _cuda.cublas.setPointerMode(handle, _cuda._POINTER_MODE_HOST)
            finish_k = _kernel("crt_finish", num_moduli=N)
        ld = _pad16(nbj) if fused else nbpj
        uj = u.ravel()[: N * 2 * m * ld].reshape(N, 2, m, ld)
        if fused:
            with _cuda._stage("gemm"):
                _crt_wgmma.gemm_mod(a_res, bres, modulus_table(N), uj, m, ld)
        else:
            _products_cublas(handle, a_res, bres, planes, uj, const.moduli, m, kpad)
        _finish(finish_k, uj, m, nbj, ld, cst, prep, fj, ga + gb, oj, so_r, so_c)
    return out


def _products_cublas(handle, a_res, bres, planes, u, moduli, m, kpad):
    """``u[l] = [(T1 - T2) mod p_l, (T3 - T1 - T2) mod p_l]`` per modulus: three cuBLAS INT8
    GEMMs into the INT32 ``planes`` (``T1 = Ar Br``, ``T2 = Ai Bi``, ``T3 = As Bs``), then
    ``crt_reduce``. ``a_res`` ``(N, 3, mp, kpad)``, ``bres`` ``(N, 3, nbp, kpad)``, ``u``
    ``(N, 2, m, nbp)``."""
    mp, nbp = a_res.shape[2], bres.shape[2]
    pl = planes.ravel()[: 3 * mp * nbp]
    reduce_k = _kernel("crt_reduce")
    for i, p in enumerate(moduli):
        with _cuda._stage("gemm"):
            for t in range(3):
                _cuda.gemm_tn_long(handle, nbp, mp, kpad, bres[i, t].data.ptr, kpad,
                                   a_res[i, t].data.ptr, kpad,
                                   pl.data.ptr + 4 * t * mp * nbp, nbp)
        with _cuda._stage("reduce"):
            reduce_k((_grid1(m * nbp // 4),), (_THREADS,),
                     (pl, np.int64(m), np.int64(nbp), np.int64(mp * nbp), np.int32(p),
                      reduce_multiplier(p), u[i]))


def _finish(finish_k, u, m, nbj, ld, cst, prep, fb, gsum, out, so_r, so_c):
    """``crt_finish`` over the ``(N, 2, m, ld)`` residues of one column block into ``out``."""
    with _cuda._stage("crt"):
        for i0 in range(0, m, 65535):  # grid y: rows
            finish_k((-(-nbj // (4 * _THREADS)), min(m - i0, 65535)), (_THREADS,),
                     (u, np.int64(m), np.int64(nbj), np.int64(ld), cst, prep.norm_exponents,
                      fb, np.int32(gsum), out, np.int64(so_r), np.int64(so_c), np.int64(i0)))
