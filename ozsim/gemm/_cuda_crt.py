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
analyse       :func:`ozsim.gemm._cuda.analyse` (ozIMMU exponents ``e``, NaN/Inf check), then
              ``crt_norm``: the norm exponents ``f`` (integer sum of rounded-up squares, one
              warp or one thread per row) and, for ``int8-crt-auto``, the loss histogram
              against ``f`` (shared-memory counts).
residues      ``crt_residues``: reads each complex value once, scales it to its integer
              (``rint`` or ``trunc`` of ``ldexp(x, g - f)``, as exact 26-bit halves ``h_i``, so that one FMA chain
              ``sum h_i (2**(26 i) mod p)`` below ``2**36`` and one symmetric reduction give each
              residue: the CPU's integers by other exact steps) and writes the symmetric INT8
              residues ``[Re, Im, Re + Im]`` of **all** N moduli, K-major, zero-padded:
              ``(N, 3, rows_p, kpad)``. A's residues (CRT weights folded in) are cached on the
              :class:`~ozsim.gemm.ozaki2.PreparedCRTOperand`; B's are made per column block.
INT8 GEMMs    per modulus three ``cublasGemmEx`` INT8 -> INT32 "TN" products (Karatsuba
              ``T1 = Ar Br``, ``T2 = Ai Bi``, ``T3 = (Ar+Ai)(Br+Bi)``) through
              :func:`ozsim.gemm._cuda.gemm_tn_long`: ``cublasGemmEx`` in pieces of
              ``K <= 8192`` added with beta = 1, or a cuBLASLt algorithm for the whole K,
              whichever was faster when the shape was first seen (exact: ``k 2**14 < 2**31``).
reduce        ``crt_reduce``: per modulus, reads the three INT32 planes and writes the residues
              ``u_re = (T1 - T2) mod p`` and ``u_im = (T3 - T1 - T2) mod p`` as UINT8 (2 bytes
              per output instead of 12).
crt           ``crt_finish``: reads the ``2 N`` UINT8 residues of an output, forms the quotient
              and the base-2**40 digit sums in registers, carries, rounds once, ``ldexp`` by the
              row and column exponents and writes the complex128 result (any strides).
============  ===================================================================================

What still reaches HBM and need not: the INT32 planes (12 bytes per output per modulus, written by
cuBLAS and read back by ``crt_reduce``). Removing them needs the reduction as the INT8 GEMM's
epilogue (CUTLASS or an own IMMA kernel); see ``benchmarks/RESULTS_crt.md``.

References:
    [Ozaki2] K. Ozaki, Y. Uchino, T. Imamura, arXiv:2504.08009 (2025).
    cuBLAS documentation, ``cublasGemmEx`` (INT8 inputs, INT32 compute, "TN").
"""

from __future__ import annotations

import cupy as cp
import numpy as np

from . import _cuda
from .ozaki1 import _MAX_EXP_DIFF
from .ozaki2 import LIMB_BITS, LOSS_ALLOWANCE_BITS, NORM_FRAC_BITS, crt_constants

__all__ = ["analyse", "int8_crt_zgemm_gpu", "last_stats", "residues_gpu"]

_THREADS = _cuda._THREADS

_SOURCE = r"""
#define MAXD %(maxd)d
#define NFRAC %(nfrac)d
#define ALLOW %(allow)d
#define LBITS %(lbits)d
#define MAXMOD 20
#define MAXLIMB 4
%(hist)s

__device__ __forceinline__ double symmod(double x, double p, double ip, double hi, double lo)
{
    // exact for integer-valued |x| <= 2**52 (ozaki2.sym_mod): q*p and x - q*p are exact
    double r = x - rint(x * ip) * p;
    if (r > hi) r -= p;
    if (r < lo) r += p;
    return r;
}

// Norm exponents f of the rows of X (rows, k) complex128, element strides (sr, sc), given the
// ozIMMU exponents e: S = sum ceil(|x| 2**(NFRAC - e))**2 (integers < 2**53, exact in any
// order), f = e - NFRAC + ceil(bitlength(S) / 2), 0 for a zero row. With hist != 0 also the
// loss histogram of ozaki2.analyse_rows: bin d + ALLOW - a over the nonzero real scalars, with
// a = min(ALLOW, floor(log2(nnz) / 2)) from the row's count of nonzero scalars.
// warp != 0: one warp per row (rows contiguous along k), else one thread per row.
extern "C" __global__ void crt_norm(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    const int* __restrict__ e, int* __restrict__ f, unsigned long long* __restrict__ hist,
    int warp)
{
    __shared__ unsigned int sh[MAXD + 1];
    const bool want = hist != 0;
    if (want) {
        for (int i = threadIdx.x; i <= MAXD; i += blockDim.x) sh[i] = 0u;
        __syncthreads();
    }
    const int lanes = warp ? 32 : 1;
    const int lane = warp ? (int)(threadIdx.x & 31) : 0;
    const long long gid = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / lanes;
    const long long nworkers = ((long long)gridDim.x * blockDim.x) / lanes;
    for (long long r = gid; r < rows; r += nworkers) {  // r is uniform within a warp
        const double2* p = x + r * sr;
        const int er = e[r];
        double s = 0.0;
        int nnz = 0;
        for (long long kk = lane; kk < k; kk += lanes) {
            const double2 v = p[kk * sc];
            const double qa = ceil(ldexp(fabs(v.x), NFRAC - er));
            const double qb = ceil(ldexp(fabs(v.y), NFRAC - er));
            s += qa * qa;
            s += qb * qb;
            nnz += (v.x != 0.0) + (v.y != 0.0);
        }
        if (warp) {
            for (int o = 16; o > 0; o >>= 1) {
                s += __shfl_xor_sync(0xffffffffu, s, o);
                nnz += __shfl_xor_sync(0xffffffffu, nnz, o);
            }
        }
        int fr = 0;
        if (s > 0.0) {
            int bl;
            frexp(s, &bl);
            fr = er - NFRAC + (bl + 1) / 2;
        }
        if (lane == 0) f[r] = fr;
        if (want && nnz > 0) {
            int a = (31 - __clz(nnz)) / 2;  // floor(log2(nnz) / 2)
            const int fh = fr + ALLOW - (a < ALLOW ? a : ALLOW);
            for (long long kk = lane; kk < k; kk += lanes) {
                const double2 v = p[kk * sc];
                oz_hist_add(sh, fh, v.x);
                oz_hist_add(sh, fh, v.y);
            }
        }
    }
    if (want) oz_hist_flush(sh, hist);
}

// Symmetric INT8 residues of the rows of X (rows, k) complex128, element strides (sr, sc),
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
extern "C" __global__ void crt_residues(
    const double2* __restrict__ x, long long rows, long long ra, long long k, long long kpad,
    long long sr, long long sc, const int* __restrict__ f, int bits, int nmod,
    const double* __restrict__ cst, signed char* __restrict__ out, int qb, int rnd)
{
    const long long nq = kpad / 4;
    const int rb = qb ? 32 / qb : 1;
    const long long nrt = (ra + rb - 1) / rb;
    const long long total = qb ? nrt * ((nq + qb - 1) / qb) * 32 : ra * nq;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long mstride = 3 * ra * kpad;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += stride) {
        long long r, q;
        if (qb) {
            const int lane = (int)(idx & 31);
            const long long tile = idx >> 5;
            r = (tile %% nrt) * rb + lane / qb;
            q = (tile / nrt) * qb + lane %% qb;
            if (r >= ra || q >= nq) continue;
        } else {
            q = idx %% nq; r = idx / nq;
        }
        const bool valid = r < rows;
        const int sh = valid ? bits - f[r] : 0;
        double h[2][4][NH];
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const long long kk = q * 4 + c;
            const double2 v = (valid && kk < k) ? x[r * sr + kk * sc] : make_double2(0.0, 0.0);
#pragma unroll
            for (int part = 0; part < 2; ++part) {
                const double ys = ldexp(part ? v.y : v.x, sh);  // exact
                double y = rnd ? rint(ys) : trunc(ys);  // the scheme's one rounding
#pragma unroll
                for (int i = NH - 1; i > 0; --i) {
                    const double hi_ = trunc(ldexp(y, -26 * i));  // exact
                    h[part][c][i] = hi_;
                    y -= ldexp(hi_, 26 * i);  // exact: the bits of y below 2**(26 i)
                }
                h[part][c][0] = y;
            }
        }
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
                const double rs = symmod(rr[0] + rr[1], p, ip, hi, lo);
                wr |= ((unsigned int)(int)rr[0] & 0xffu) << (8 * c);
                wi |= ((unsigned int)(int)rr[1] & 0xffu) << (8 * c);
                ws |= ((unsigned int)(int)rs & 0xffu) << (8 * c);
            }
            signed char* d = dst + (long long)l * mstride;
            *(unsigned int*)d = wr;
            *(unsigned int*)(d + ra * kpad) = wi;
            *(unsigned int*)(d + 2 * ra * kpad) = ws;
        }
    }
}

// One modulus: t holds the INT32 planes T1, T2, T3 (each (mp, ld) row-major, plane elements
// apart, ld a multiple of 4); u gets u_re = (T1 - T2) mod p and u_im = (T3 - T1 - T2) mod p in
// [0, p) as UINT8, (2, m, nb) dense. Each thread takes 4 adjacent columns (16-byte loads); rows
// along grid y and columns along x, both grid-stride (a few thousand blocks in all).
__device__ __forceinline__ unsigned char crt_u(double x, double p, double ip, double hi, double lo)
{
    double r = symmod(x, p, ip, hi, lo);
    if (r < 0.0) r += p;
    return (unsigned char)(int)r;
}

extern "C" __global__ void crt_reduce(
    const int* __restrict__ t, long long m, long long nb, long long ld, long long plane,
    double p, double ip, double hi, double lo, unsigned char* __restrict__ u)
{
    const long long total = m * nb;
    const long long nq = (nb + 3) / 4;
    for (long long i = blockIdx.y; i < m; i += gridDim.y) {
        for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < nq;
             q += (long long)gridDim.x * blockDim.x) {
            const long long o = i * ld + 4 * q, idx = i * nb + 4 * q;
            const int4 a = *(const int4*)(t + o);
            const int4 b = *(const int4*)(t + plane + o);
            const int4 c = *(const int4*)(t + 2 * plane + o);
            const int t1[4] = {a.x, a.y, a.z, a.w}, t2[4] = {b.x, b.y, b.z, b.w};
            const int t3[4] = {c.x, c.y, c.z, c.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                if (4 * q + e < nb) {
                    const double re = (double)t1[e] - (double)t2[e];        // exact
                    const double im = (double)t3[e] - re - 2.0 * (double)t2[e];  // exact
                    u[idx + e] = crt_u(re, p, ip, hi, lo);
                    u[total + idx + e] = crt_u(im, p, ip, hi, lo);
                }
            }
        }
    }
}

// CRT reconstruction (ozaki2._CRTAccumulator): u is (nmod, 2, m, nb) UINT8; cst holds 1/p
// (nmod), then the digits of P/p ((nmod, nlimb), lowest first), then the digits of P (nlimb);
// they are staged in shared memory. out[i, j] = ldexp(C'_re, fa[i] + fb[j] - gsum)
// + i ldexp(C'_im, ...). Rows along grid y, columns along x.
extern "C" __global__ void crt_finish(
    const unsigned char* __restrict__ u, long long m, long long nb, int nmod, int nlimb,
    const double* __restrict__ cst, const int* __restrict__ fa, const int* __restrict__ fb,
    int gsum, double2* __restrict__ out, long long so_r, long long so_c)
{
    __shared__ double sc[MAXMOD * (MAXLIMB + 1) + MAXLIMB];
    const int ncst = nmod + nmod * nlimb + nlimb;
    for (int i = threadIdx.x; i < ncst; i += blockDim.x) sc[i] = cst[i];
    __syncthreads();
    const double* invp = sc;
    const double* lm = sc + nmod;
    const double* lp = sc + nmod + nmod * nlimb;
    const long long total = m * nb;
    const double radix = ldexp(1.0, LBITS), iradix = ldexp(1.0, -LBITS);
    for (long long i = blockIdx.y; i < m; i += gridDim.y) {
        const int fai = fa[i] - gsum;
        for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < nb;
             j += (long long)gridDim.x * blockDim.x) {
            const long long idx = i * nb + j;
            double res[2];
#pragma unroll
            for (int part = 0; part < 2; ++part) {
                double q = 0.0;
                double d[MAXLIMB] = {0.0, 0.0, 0.0, 0.0};
                for (int l = 0; l < nmod; ++l) {
                    const double v = (double)u[(2 * l + part) * total + idx];
                    q += v * invp[l];  // only rint(q) is used: exact (|C'| < P/2 (1 - 2**-40))
#pragma unroll
                    for (int c = 0; c < MAXLIMB; ++c)
                        if (c < nlimb) d[c] += v * lm[l * nlimb + c];  // exact, < 2**53
                }
                const double qq = rint(q);
#pragma unroll
                for (int c = 0; c < MAXLIMB; ++c)
                    if (c < nlimb) d[c] -= qq * lp[c];  // exact
#pragma unroll
                for (int c = 0; c < MAXLIMB - 1; ++c) {
                    if (c + 1 < nlimb) {  // balanced digits, exact
                        const double carry = rint(d[c] * iradix);
                        d[c] -= carry * radix;
                        d[c + 1] += carry;
                    }
                }
                double v = d[0];
#pragma unroll
                for (int c = 1; c < MAXLIMB; ++c)
                    if (c < nlimb) v = d[c] * ldexp(1.0, LBITS * c) + v;  // product exact
                res[part] = ldexp(v, fai + fb[j]);
            }
            out[i * so_r + j * so_c] = make_double2(res[0], res[1]);
        }
    }
}
"""

_modules: dict = {}
#: Bits per exact half of a scaled integer in ``crt_residues`` (``6 * 26 >= 154 = gamma(20)``).
HALF_BITS = 26
MAX_HALVES = 6


def _kernel(name: str, halves: int = 1):
    """A kernel of :data:`_SOURCE`, compiled once per number of 26-bit halves (``-DNH``)."""
    mod = _modules.get(halves)
    if mod is None:
        code = _SOURCE % {"maxd": _MAX_EXP_DIFF, "nfrac": NORM_FRAC_BITS, "lbits": LIMB_BITS,
                          "allow": LOSS_ALLOWANCE_BITS, "hist": _cuda.HIST_DEVICE}
        mod = _modules[halves] = cp.RawModule(code=code, options=(f"-DNH={halves}",))
    return mod.get_function(name)


def _grid2(m: int, nb: int) -> tuple[int, int]:
    """2-D grid of the per-output kernels: columns along x (256 a block), rows along y."""
    return int(max(1, min(-(-nb // _THREADS), 4096))), int(max(1, min(m, 65535)))


def _grid_reduce(m: int, nb: int) -> tuple[int, int]:
    """Grid of ``crt_reduce``: 4 columns a thread along x, at most ~8 blocks per SM in all."""
    gx = max(1, min(-(-nb // (4 * _THREADS)), 64))
    return int(gx), int(max(1, min(m, 8 * _cuda._sms() // gx + 1, 65535)))


#: Sizes and layout of the last :func:`int8_crt_zgemm_gpu` call (working-memory report).
last_stats: dict = {}


def analyse(x, histogram: bool = True):
    """Norm exponents (and the loss histogram) of the rows of ``x`` on the GPU.

    Args:
        x (cupy.ndarray): ``(rows, k)`` complex128, any strides (``b.T`` for B's columns).
        histogram: also count the loss histogram.

    Returns:
        ``(f, hist)``: ``(rows,)`` int32 CuPy, equal to
        :func:`ozsim.gemm.ozaki2.norm_exponents`; ``(2201,)`` int64 **NumPy** histogram equal to
        :func:`ozsim.gemm.ozaki2.analyse_rows`'s (``None`` without ``histogram``).

    Raises:
        NonFiniteError: NaN or Inf in ``x``.
    """
    rows, k = x.shape
    e, _ = _cuda.analyse(x, histogram=False)  # raises NonFiniteError
    f = cp.zeros(rows, dtype=cp.int32)
    hist = cp.zeros(_MAX_EXP_DIFF + 1, dtype=cp.uint64) if histogram else None
    if rows and k:
        sr, sc = _cuda._strides(x)
        warp = abs(sr) > abs(sc)  # rows contiguous along k: one warp per row
        with _cuda._stage("analyse"):
            _kernel("crt_norm")(
                (_cuda._grid(rows * 32 if warp else rows),), (_THREADS,),
                (x, np.int64(rows), np.int64(k), np.int64(sr), np.int64(sc), e, f,
                 hist if histogram else np.uint64(0), np.int32(warp)))
    return f, (hist.get().view(np.int64) if histogram else None)


def _residue_constants(num_moduli: int, weighted: bool):
    """``(N, 12)`` float64: ``p, 1/p, hi, lo`` and ``W_i = 2**(26 i) * weight mod p`` (symmetric,
    i = 0..5), the weight being the CRT weight ``q_p`` for A and 1 for B."""
    const = crt_constants(num_moduli)
    rows = []
    for p, w in zip(const.moduli, const.weights):
        weight = w if weighted else 1
        ws = []
        for i in range(MAX_HALVES):
            v = ((1 << (HALF_BITS * i)) * weight) % p
            ws.append(float(v - p if v > (p - 1) // 2 else v))
        rows.append([float(p), 1.0 / p, float((p - 1) // 2), float(-(p // 2))] + ws + [0.0, 0.0])
    return cp.asarray(np.array(rows, dtype=np.float64))


def residues_gpu(x, f, bits: int, num_moduli: int, *, weighted: bool, kpad: int, rows_alloc: int,
                 rounding: bool = True, out=None):
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
        out (cupy.ndarray): ``(N, 3, rows_alloc, kpad)`` int8 buffer, or ``None``.

    Returns:
        ``(N, 3, rows_alloc, kpad)`` int8: ``[l, :, :rows, :k]`` equals
        ``ozaki2.residues(pieces_re, pieces_im, p_l, q_l or 1)`` (pieces from
        ``ozaki2.scaled_pieces(..., rounding=rounding)``); the padding is 0.
    """
    rows, k = x.shape
    halves = max(1, -(-bits // HALF_BITS))
    if halves > MAX_HALVES:
        raise ValueError(f"kept bits {bits} exceed the {HALF_BITS * MAX_HALVES} this kernel holds")
    if out is None:
        out = cp.empty((num_moduli, 3, rows_alloc, kpad), dtype=cp.int8)
    if rows_alloc == 0 or kpad == 0:
        return out
    sr, sc = _cuda._strides(x) if rows and k else (1, 1)
    nq = kpad // 4
    qb = 0
    if abs(sr) <= abs(sc):  # rows adjacent in memory: tiles of rows x chunks per warp
        qb = 1
        while qb * 2 <= min(nq, 8):
            qb *= 2
    total = rows_alloc * nq if qb == 0 else -(-rows_alloc // (32 // qb)) * -(-nq // qb) * 32
    cst = _residue_constants(num_moduli, weighted)
    _kernel("crt_residues", halves)(
        (_cuda._grid(total),), (_THREADS,),
        (x, np.int64(rows), np.int64(rows_alloc), np.int64(k), np.int64(kpad), np.int64(sr),
         np.int64(sc), f, np.int32(bits), np.int32(num_moduli), cst, out, np.int32(qb),
         np.int32(bool(rounding))))
    return out


def _pad4(x: int) -> int:
    return -(-x // 4) * 4


def prepared_residues(prep, bits: int, num_moduli: int, kpad: int, rounding: bool = True):
    """A's residues ``(N, 3, mp, kpad)`` int8, cached on the prepared operand by ``(bits, N,
    rounding)`` (a larger ``N`` with the same bits and rounding is reused: residues do not depend
    on ``N``)."""
    cache = prep._device_cache
    for (b, n, kp, rd), r in cache.items():
        if b == bits and kp == kpad and rd == rounding and n >= num_moduli:
            return r[:num_moduli]
    m = prep.shape[0]
    with _cuda._stage("residues_a"):
        r = residues_gpu(prep.matrix, prep.norm_exponents, bits, num_moduli, weighted=True,
                         kpad=kpad, rows_alloc=_pad4(m), rounding=rounding)
    cache[(bits, num_moduli, kpad, rounding)] = r
    return r


def _crt_constants_gpu(num_moduli: int):
    c = crt_constants(num_moduli)
    host = np.concatenate([c.inv_p, c.limbs_M.ravel(), c.limbs_P])
    return cp.asarray(host)


def int8_crt_zgemm_gpu(prep, b, plan, *, b_exponents=None, out=None, workspace_bytes: int):
    """``C = A @ B`` by Ozaki scheme II on the GPU; see :func:`ozsim.gemm.ozaki2.int8_crt_zgemm`.

    Args:
        prep: :class:`~ozsim.gemm.ozaki2.PreparedCRTOperand` of A ``(m, k)`` (CuPy).
        b (cupy.ndarray): ``(k, n)`` complex128, any strides.
        plan: :class:`~ozsim.gemm.ozaki2.CRTPlan`.
        b_exponents (cupy.ndarray): ``(n,)`` int32 norm exponents of B's columns, or ``None``.
        out (cupy.ndarray): ``(m, n)`` complex128 (any strides, not overlapping ``b``).
        workspace_bytes: bound on B's residues, one modulus' INT32 planes and the UINT8
            residues of one column block.

    Returns:
        ``out``.
    """
    global last_stats
    m, k = prep.shape
    n = b.shape[1]
    N, ga, gb = plan.num_moduli, plan.bits_a, plan.bits_b
    if b_exponents is None:
        b_exponents = analyse(b.T, histogram=False)[0]
    if out is None:
        out = cp.empty((m, n), dtype=cp.complex128)
    if m == 0 or n == 0:
        return out
    kpad = _cuda.padded_k(k)
    mp = _pad4(m)
    per_col = 3 * N * kpad + 12 * mp + 2 * N * m + 16
    nb = max(4, min(_pad4(n), int(workspace_bytes) // per_col // 4 * 4))
    nb = min(nb, n)
    nbp = _pad4(nb)
    a_res = prepared_residues(prep, ga, N, kpad, plan.rounding)
    b_res = cp.empty((N, 3, nbp, kpad), dtype=cp.int8)
    planes = cp.empty((3, mp, nbp), dtype=cp.int32)
    u = cp.empty((N, 2, m, nb), dtype=cp.uint8)
    const = crt_constants(N)
    cst = _crt_constants_gpu(N)
    so_r, so_c = _cuda._strides(out)
    last_stats = {"m": m, "k": k, "n": n, "num_moduli": N, "bits": (ga, gb), "kpad": kpad,
                  "block_columns": nb, "blocks": -(-n // nb),
                  "a_residue_bytes": int(a_res.nbytes),
                  "workspace_bytes": int(b_res.nbytes + planes.nbytes + u.nbytes)}
    handle = cp.cuda.device.get_cublas_handle()
    _cuda.cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
    _cuda.cublas.setPointerMode(handle, _cuda._POINTER_MODE_HOST)
    reduce_k, finish_k = _kernel("crt_reduce"), _kernel("crt_finish")
    for j0 in range(0, n, nb):
        nbj = min(n, j0 + nb) - j0
        nbpj = _pad4(nbj)
        bres = b_res.ravel()[: N * 3 * nbpj * kpad].reshape(N, 3, nbpj, kpad)
        with _cuda._stage("residues_b"):
            residues_gpu(b[:, j0 : j0 + nbj].T, b_exponents[j0 : j0 + nbj], gb, N,
                         weighted=False, kpad=kpad, rows_alloc=nbpj, rounding=plan.rounding,
                         out=bres)
        uj = u.ravel()[: N * 2 * m * nbj].reshape(N, 2, m, nbj)
        pl = planes.ravel()[: 3 * mp * nbpj]
        for i, p in enumerate(const.moduli):
            with _cuda._stage("gemm"):
                for t in range(3):
                    a_ptr = a_res[i, t].data.ptr
                    b_ptr = bres[i, t].data.ptr
                    c_ptr = pl.data.ptr + 4 * t * mp * nbpj
                    _cuda.gemm_tn_long(handle, nbpj, mp, kpad, b_ptr, kpad, a_ptr, kpad,
                                       c_ptr, nbpj)
            with _cuda._stage("reduce"):
                reduce_k(_grid_reduce(m, nbj), (_THREADS,),
                         (pl, np.int64(m), np.int64(nbj), np.int64(nbpj), np.int64(mp * nbpj),
                          np.float64(p), np.float64(1.0 / p), np.float64((p - 1) // 2),
                          np.float64(-(p // 2)), uj[i]))
        with _cuda._stage("crt"):
            finish_k(_grid2(m, nbj), (_THREADS,),
                     (uj, np.int64(m), np.int64(nbj), np.int32(N), np.int32(const.num_limbs),
                      cst, prep.norm_exponents, b_exponents[j0 : j0 + nbj], np.int32(ga + gb),
                      out[:, j0 : j0 + nbj], np.int64(so_r), np.int64(so_c)))
    return out
