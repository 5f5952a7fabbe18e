"""The GPU half of :mod:`ozsim.gemm.ozaki1`: CUDA kernels and cuBLAS INT8 GEMMs (private).

Imported only when a CuPy array reaches :mod:`ozsim.gemm` (``import ozsim`` never loads CuPy).
It computes exactly what the CPU path computes, bit for bit, on the GPU:

============  ===================================================================================
stage         what runs
============  ===================================================================================
analyse       ``oz_analyse_t`` / ``oz_analyse_w``: one kernel reads each complex value of B's
              columns (A's rows) and writes the scaling exponents, a NaN/Inf flag and, for
              INT8-AUTO, the loss histogram (shared-memory counts, one global add per bin and
              block). Same integers as :func:`~ozsim.gemm.ozaki1.row_exponents` and
              :func:`~ozsim.gemm.ozaki1.loss_histogram`.
split         ``oz_split``: reads each complex value once, writes its ``2 s`` INT8 slices K-major
              (``(2 rows, s, kpad)``, ``kpad`` = k rounded up to 4 or 16 with zero slices), the same
              exact FP64 steps as :func:`~ozsim.gemm.ozaki1.split_rows`.
INT8 GEMMs    ``cublasGemmEx`` with ``CUDA_R_8I`` inputs, ``CUDA_R_32I`` output and
              ``CUBLAS_COMPUTE_32I``, both operands K-major ("TN"): one INT32 plane per group
              ``P_t = sum_{i+j=t} A_i B_j`` (K = (t-1) kpad), split into planes of at most
              ``floor((2**31-1) / (k (2**b-1)**2))`` slice pairs so that each INT32 sum is exact;
              a plane's GEMM runs as :func:`gemm_tn_long`: in pieces of K <= :data:`MAX_GEMM_K`
              added with beta = 1 (cuBLAS's own INT8 choice slows down for longer K) or as one
              cuBLASLt call, whichever was faster when the shape was first seen. For A with at most 32 rows (gates of
              d <= 4 qubits) ``oz_small_gemm`` computes the same planes on the CUDA cores
              (``__dp4a``), where cuBLAS's skinny INT8 GEMMs run at a tenth of memory bandwidth.
accumulate    ``oz_accumulate``: one pass reads the INT32 products of every group, forms
              ``Re = ArBr - AiBi`` and ``Im = ArBi + AiBr`` exactly in INT64, and accumulates
              ``acc = acc + P_t * 2**(-t b)`` for t = s+1 down to 2 with ``__dmul_rn`` /
              ``__dadd_rn`` (no FMA contraction; ``P_t * 2**(-tb)`` is exact, so the result equals
              the CPU's multiply-then-add), then ``ldexp(acc, eA_i + eB_j)``: the CPU's operations
              in the CPU's order, so ``int8x{s}`` results are identical on CPU and GPU (signed
              zeros aside: the CPU can produce ``-0.0`` where the GPU's integer products give
              ``+0.0``).
============  ===================================================================================

The state-vector shapes (k = 2**d small, n = 2**(N-d) large) make the INT32 products the largest
buffers: ``s`` groups of ``(2m, 2 nb)`` INT32, 16 bytes per output amplitude each. B is therefore
processed in blocks of ``nb`` columns sized to the workspace (see :func:`plan`), and the working
memory of the last call is in :data:`last_stats`.

References:
    [ozIMMU] H. Ootomo, K. Ozaki, R. Yokota, "DGEMM on integer matrix multiplication unit",
        IJHPCA 2024 (arXiv:2306.11975), Alg. 3-4, Sec. 4.4.
    cuBLAS documentation, ``cublasGemmEx`` (INT8 inputs, INT32 compute: lda/ldb multiples of 4,
        4-byte aligned pointers, "TN").
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import cupy as cp
import numpy as np

try:
    from cupy_backends.cuda.libs import cublas
except ImportError:  # pragma: no cover - older layouts
    from cupy.cuda import cublas

from ...errors import NonFiniteError

__all__ = ["analyse", "split", "int8_zgemm_gpu", "plan", "profile_stages", "last_stats"]

#: Must match ``ozaki1._MAX_EXP_DIFF``.
MAX_EXP_DIFF = 2200

# cudaDataType / cublasComputeType_t / cublasGemmAlgo_t values (stable across CUDA 11-13).
_CUDA_R_8I = 3
_CUDA_R_32I = 10
_COMPUTE_32I = getattr(cublas, "CUBLAS_COMPUTE_32I", 72)
_GEMM_DEFAULT = getattr(cublas, "CUBLAS_GEMM_DEFAULT", -1)
_OP_N = getattr(cublas, "CUBLAS_OP_N", 0)
_OP_T = getattr(cublas, "CUBLAS_OP_T", 1)
_POINTER_MODE_HOST = getattr(cublas, "CUBLAS_POINTER_MODE_HOST", 0)
_ONE = np.ones(1, dtype=np.int32)
_ZERO = np.zeros(1, dtype=np.int32)

_THREADS = 256

#: Device helpers of the scheme I analysis kernels (scheme II counts loss moments instead): the
#: loss histogram of :func:`ozsim.gemm.ozaki1.loss_histogram`, per block in shared memory (MAXD).
HIST_DEVICE = r"""
// count nonzero x in bin clamp(e - exponent(x), 0, MAXD) of the block's shared histogram
__device__ __forceinline__ void oz_hist_add(unsigned int* sh, int e, double x)
{
    if (x != 0.0) {
        int ev;
        frexp(x, &ev);
        int d = e - ev;
        d = d < 0 ? 0 : (d > MAXD ? MAXD : d);
        atomicAdd(&sh[d], 1u);
    }
}

// add the block's shared histogram into the global one
__device__ __forceinline__ void oz_hist_flush(const unsigned int* sh,
                                              unsigned long long* __restrict__ hist)
{
    __syncthreads();
    for (int i = threadIdx.x; i <= MAXD; i += blockDim.x)
        if (sh[i]) atomicAdd(&hist[i], (unsigned long long)sh[i]);
}
"""

_SOURCE = r"""
#define MAXD %(maxd)d
#define DMAX 1.7976931348623157e308
%(hist)s

// Scaling exponents (and optionally the loss histogram) of the rows of X (rows, k), complex128
// with element strides (sr, sc). One thread per row: for rows adjacent in memory (|sr| == 1).
extern "C" __global__ void oz_analyse_t(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    int* __restrict__ exps, unsigned long long* __restrict__ hist, int* __restrict__ flag)
{
    __shared__ unsigned int sh[MAXD + 1];
    const bool want = hist != 0;
    if (want) {
        for (int i = threadIdx.x; i <= MAXD; i += blockDim.x) sh[i] = 0u;
        __syncthreads();
    }
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < rows; r += stride) {
        const double2* p = x + r * sr;
        double mx = 0.0;
        bool bad = false;
        long long kk = 0;
        for (; kk + 4 <= k; kk += 4) {
            double2 v0 = p[kk * sc], v1 = p[(kk + 1) * sc], v2 = p[(kk + 2) * sc],
                    v3 = p[(kk + 3) * sc];
            double a0 = fmax(fabs(v0.x), fabs(v0.y)), a1 = fmax(fabs(v1.x), fabs(v1.y));
            double a2 = fmax(fabs(v2.x), fabs(v2.y)), a3 = fmax(fabs(v3.x), fabs(v3.y));
            bad |= !(fabs(v0.x) <= DMAX) | !(fabs(v0.y) <= DMAX) | !(fabs(v1.x) <= DMAX)
                 | !(fabs(v1.y) <= DMAX) | !(fabs(v2.x) <= DMAX) | !(fabs(v2.y) <= DMAX)
                 | !(fabs(v3.x) <= DMAX) | !(fabs(v3.y) <= DMAX);
            mx = fmax(mx, fmax(fmax(a0, a1), fmax(a2, a3)));
        }
        for (; kk < k; ++kk) {
            double2 v = p[kk * sc];
            bad |= !(fabs(v.x) <= DMAX) | !(fabs(v.y) <= DMAX);
            mx = fmax(mx, fmax(fabs(v.x), fabs(v.y)));
        }
        int e = 0;
        if (bad) { *flag = 1; mx = 0.0; }
        if (mx != 0.0) frexp(mx, &e);
        exps[r] = e;
        if (want && !bad) {
            for (kk = 0; kk < k; ++kk) {
                double2 v = p[kk * sc];
                oz_hist_add(sh, e, v.x);
                oz_hist_add(sh, e, v.y);
            }
        }
    }
    if (want) oz_hist_flush(sh, hist);
}

// The same, one warp per row: for rows contiguous along k (|sc| == 1). blockDim.x %% 32 == 0.
extern "C" __global__ void oz_analyse_w(
    const double2* __restrict__ x, long long rows, long long k, long long sr, long long sc,
    int* __restrict__ exps, unsigned long long* __restrict__ hist, int* __restrict__ flag)
{
    __shared__ unsigned int sh[MAXD + 1];
    const bool want = hist != 0;
    if (want) {
        for (int i = threadIdx.x; i <= MAXD; i += blockDim.x) sh[i] = 0u;
        __syncthreads();
    }
    const int lane = threadIdx.x & 31;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long r = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; r < rows;
         r += nwarps) {
        const double2* p = x + r * sr;
        double mx = 0.0;
        int bad = 0;
        for (long long kk = lane; kk < k; kk += 32) {
            double2 v = p[kk * sc];
            bad |= !(fabs(v.x) <= DMAX) | !(fabs(v.y) <= DMAX);
            mx = fmax(mx, fmax(fabs(v.x), fabs(v.y)));
        }
        for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        bad = __any_sync(0xffffffffu, bad);
        int e = 0;
        if (bad) mx = 0.0;
        if (mx != 0.0) frexp(mx, &e);
        if (lane == 0) {
            exps[r] = e;
            if (bad) *flag = 1;
        }
        if (want && !bad) {
            for (long long kk = lane; kk < k; kk += 32) {
                double2 v = p[kk * sc];
                oz_hist_add(sh, e, v.x);
                oz_hist_add(sh, e, v.y);
            }
        }
    }
    if (want) oz_hist_flush(sh, hist);
}
"""

_SPLIT_SOURCE = r"""
// Split the rows of X (rows, k) complex128, element strides (sr, sc), into ns INT8 slices of
// `bits` bits each ([ozIMMU] Alg. 3), written K-major to out (2 ra, ns, kpad): rows 0..rows-1
// real parts, ra..ra+rows-1 imaginary parts (ra >= rows; rows rows..ra-1 of each half and
// entries k..kpad-1 are zero); slice i at position i (rev: ns-1-i). Each thread handles CH
// consecutive k of one row and stores CH bytes per slice.
// qb == 0: adjacent threads take adjacent k-chunks of a row (rows contiguous along k, sc == 1).
// qb > 0 (rows adjacent in memory, |sr| == 1): a warp takes a tile of 32/qb rows x qb chunks,
// so that its loads cover 32/qb adjacent rows (full sectors) and its stores qb*CH contiguous
// bytes of each slice row.
extern "C" __global__ void oz_split(
    const double2* __restrict__ x, long long rows, long long ra, long long k, long long kpad,
    long long sr, long long sc, const int* __restrict__ exps, int bits, int ns, int rev,
    signed char* __restrict__ out, int qb)
{
    const long long nq = kpad / CH;
    const int rb = qb ? 32 / qb : 1;
    const long long nrt = (ra + rb - 1) / rb;
    const long long total = qb ? nrt * ((nq + qb - 1) / qb) * 32 : ra * nq;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const double radix = (double)(1 << bits);
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
        const int scale = valid ? bits - exps[r] : 0;
        double2 v[CH];
#pragma unroll
        for (int c = 0; c < CH; ++c) {
            long long kk = q * CH + c;
            v[c] = (valid && kk < k) ? x[r * sr + kk * sc] : make_double2(0.0, 0.0);
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            double rem[CH];
#pragma unroll
            for (int c = 0; c < CH; ++c) rem[c] = ldexp(half ? v[c].y : v[c].x, scale);
            signed char* dst = out + ((half * ra + r) * ns) * kpad + q * CH;
            for (int i = 0; i < ns; ++i) {
                unsigned int w[CH / 4];
#pragma unroll
                for (int c = 0; c < CH / 4; ++c) w[c] = 0u;
#pragma unroll
                for (int c = 0; c < CH; ++c) {
                    // round to nearest (ties to even, as np.rint), clipped to the INT8 slice
                    // range: the CPU's split_rows, bit for bit
                    double t = fmin(fmax(rint(rem[c]), -(radix - 1.0)), radix - 1.0);
                    w[c / 4] |= ((unsigned int)(int)t & 0xffu) << (8 * (c %% 4));
                    rem[c] = (rem[c] - t) * radix;  // exact; unused after the last slice
                }
                signed char* p = dst + (long long)(rev ? ns - 1 - i : i) * kpad;
#if CH == 16
                *(uint4*)p = make_uint4(w[0], w[1], w[2], w[3]);
#elif CH == 8
                *(uint2*)p = make_uint2(w[0], w[1]);
#else
                *(unsigned int*)p = w[0];
#endif
            }
        }
    }
}
"""

_ACCUM_SOURCE = r"""
// out[i, j] = ldexp(acc, eA[i] + eB[j]) with acc = sum over groups, t = s+1 down to 2, of
// P_t * 2**(-t bits), in that order (the CPU's _accumulate). prod holds G INT32 planes
// (2mp, 2nbp) (row stride 2nbp; A's imaginary rows from mp, B's imaginary columns from nbp);
// plane g belongs to group gt[g]; consecutive planes of one group are chunks of P_t and are
// summed exactly in INT64 first.
extern "C" __global__ void oz_accumulate(
    const int* __restrict__ prod, long long m, long long mp, long long nb, long long nbp, int G,
    const int* __restrict__ gt, int bits, const int* __restrict__ eA,
    const int* __restrict__ eB, double2* __restrict__ out, long long so_r, long long so_c)
{
    const long long total = m * nb;
    const long long ld = 2 * nbp;
    const long long plane = 4 * mp * nbp;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += stride) {
        const long long j = idx %% nb, i = idx / nb;
        const long long o_rr = i * ld + j, o_ri = i * ld + nbp + j;
        const long long o_ir = (mp + i) * ld + j, o_ii = (mp + i) * ld + nbp + j;
        double ar = 0.0, ai = 0.0;
        bool first = true;
        int g = 0;
        while (g < G) {
            const int t = gt[g];
            long long rr = 0, ii = 0, ri = 0, ir = 0;
            do {
                const int* p = prod + (long long)g * plane;
                rr += p[o_rr]; ii += p[o_ii]; ri += p[o_ri]; ir += p[o_ir];
                ++g;
            } while (g < G && gt[g] == t);
            const double re = (double)(rr - ii), im = (double)(ri + ir);  // exact integers
            const double w = ldexp(1.0, -t * bits);
            if (first) {
                ar = __dmul_rn(re, w); ai = __dmul_rn(im, w); first = false;
            } else {
                ar = __dadd_rn(ar, __dmul_rn(re, w)); ai = __dadd_rn(ai, __dmul_rn(im, w));
            }
        }
        const int e = eA[i] + eB[j];
        out[i * so_r + j * so_c] = make_double2(ldexp(ar, e), ldexp(ai, e));
    }
}
"""

_SMALL_SOURCE = r"""
// The slice products for a small A (2mp = MP2 <= 32 rows), on the CUDA cores: cuBLAS's INT8
// GEMMs are slow for such skinny shapes (N = 2mp). a: (MP2, wpr) and b: (nrows, wpr) INT32
// words (4 INT8 each, wpr = s kpad / 4); plane g of prod is (MP2, ld) INT32 with
// P_g[ii, jj] = sum_w dp4a(a[ii, aoff_g + w], b[jj, boff_g + w]), w < nw_g, gdesc[g] =
// (aoff_g, boff_g, nw_g) in words: the same planes as the cuBLAS path, exact in INT32 (the plan
// keeps every plane within INT32). A is kept in shared memory; each block stages the B rows of
// its TB threads (one row a thread) transposed in shared memory; each thread accumulates all
// MP2 rows of a plane in registers.
extern "C" __global__ void oz_small_gemm(
    const int* __restrict__ a, const int* __restrict__ b, long long nrows, int wpr,
    const int* __restrict__ gdesc, int G, int* __restrict__ prod, long long ld)
{
    extern __shared__ int smem[];
    int* sa = smem;
    int* sb = smem + MP2 * wpr;
    const int TB = blockDim.x, TBp = blockDim.x + 1;
    for (int i = threadIdx.x; i < MP2 * wpr; i += TB) sa[i] = a[i];
    const long long plane = (long long)MP2 * ld;
    for (long long j0 = (long long)blockIdx.x * TB; j0 < nrows; j0 += (long long)gridDim.x * TB) {
        __syncthreads();
        const long long left = nrows - j0;
        const int nr = left < TB ? (int)left : TB;
        const int* src = b + j0 * wpr;
        for (long long i = threadIdx.x; i < (long long)nr * wpr; i += TB) {
            const int row = (int)(i / wpr), w = (int)(i - (long long)row * wpr);
            sb[w * TBp + row] = src[i];
        }
        __syncthreads();
        if (threadIdx.x < nr) {
            const int* mb = sb + threadIdx.x;
            for (int g = 0; g < G; ++g) {
                const int aoff = gdesc[3 * g], boff = gdesc[3 * g + 1], nw = gdesc[3 * g + 2];
                int acc[MP2];
#pragma unroll
                for (int ii = 0; ii < MP2; ++ii) acc[ii] = 0;
                for (int w = 0; w < nw; ++w) {
                    const int bw = mb[(boff + w) * TBp];
                    const int* aw = sa + aoff + w;
#pragma unroll
                    for (int ii = 0; ii < MP2; ++ii) acc[ii] = __dp4a(aw[ii * wpr], bw, acc[ii]);
                }
                int* dst = prod + g * plane + j0 + threadIdx.x;
#pragma unroll
                for (int ii = 0; ii < MP2; ++ii) dst[ii * ld] = acc[ii];
            }
        }
    }
}
"""

_modules: dict = {}


def _module(key: str, source: str, options: tuple = ()):
    mod = _modules.get((key, options))
    if mod is None:
        mod = cp.RawModule(code=source, options=options)
        _modules[(key, options)] = mod
    return mod


def _kernel(name: str):
    if name in ("oz_analyse_t", "oz_analyse_w"):
        return _module("analyse", _SOURCE % {"maxd": MAX_EXP_DIFF, "hist": HIST_DEVICE}).get_function(name)
    if name == "oz_accumulate":
        return _module("accumulate", _ACCUM_SOURCE % {}).get_function(name)
    raise KeyError(name)


def _small_kernel(mp2: int):
    return _module("small", _SMALL_SOURCE, (f"-DMP2={mp2}",)).get_function("oz_small_gemm")


def _split_kernel(chunk: int):
    return _module("split", _SPLIT_SOURCE % {}, (f"-DCH={chunk}",)).get_function("oz_split")


_sm_count: dict = {}


def _sms() -> int:
    dev = cp.cuda.Device().id
    if dev not in _sm_count:
        _sm_count[dev] = cp.cuda.runtime.getDeviceProperties(dev)["multiProcessorCount"]
    return _sm_count[dev]


def _grid(total: int) -> int:
    """Blocks for a grid-stride loop over ``total`` items: enough to fill the GPU, no more."""
    return int(max(1, min(-(-total // _THREADS), 32 * _sms())))


# -- stage timing -------------------------------------------------------------------------------
class _StageTimer:
    def __init__(self):
        self.events: list = []
        self.totals: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str):
        start, end = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        try:
            yield
        finally:
            end.record()
            self.events.append((name, start, end))

    def finish(self):
        for name, start, end in self.events:
            end.synchronize()
            self.totals[name] = self.totals.get(name, 0.0) + cp.cuda.get_elapsed_time(start, end)


_timer: _StageTimer | None = None


@contextlib.contextmanager
def profile_stages():
    """Time the GPU stages of the INT8 GEMMs run inside the block (CUDA events).

    Yields:
        ``dict`` stage name -> milliseconds (``"analyse"``, ``"split_a"``, ``"split_b"``,
        ``"gemm"``, ``"accumulate"``), filled when the block exits (it synchronizes).
    """
    global _timer
    prev, timer = _timer, _StageTimer()
    _timer = timer
    try:
        yield timer.totals
    finally:
        _timer = prev
        timer.finish()


def _stage(name: str):
    return _timer.stage(name) if _timer is not None else contextlib.nullcontext()


# -- analysis and splitting ---------------------------------------------------------------------
def _strides(x) -> tuple[int, int]:
    sr, sc = x.strides
    if sr % 16 or sc % 16:
        raise ValueError("complex128 operand with strides that are not multiples of 16 bytes")
    return sr // 16, sc // 16


def analyse(x, histogram: bool = True):
    """Row exponents and loss histogram of a complex matrix on the GPU, one read of each value.

    Args:
        x (cupy.ndarray): ``(rows, k)`` complex128, any strides (``b.T`` for B's columns).
        histogram: also count the loss histogram.

    Returns:
        ``(exps, hist)``: ``(rows,)`` int32 CuPy exponents, equal to
        :func:`~ozsim.gemm.ozaki1.row_exponents`; ``(MAX_EXP_DIFF + 1,)`` int64 **NumPy**
        histogram equal to :func:`~ozsim.gemm.ozaki1.loss_histogram` (``None`` without
        ``histogram``). The histogram is brought to the host once because INT8-AUTO's choice
        is made there.

    Raises:
        NonFiniteError: NaN or Inf in ``x`` (checked on the host after the kernel: one sync).
    """
    rows, k = x.shape
    exps = cp.empty(rows, dtype=cp.int32)
    hist = cp.zeros(MAX_EXP_DIFF + 1, dtype=cp.uint64) if histogram else None
    flag = cp.zeros(1, dtype=cp.int32)
    if rows and k:
        sr, sc = _strides(x)
        thread_per_row = abs(sr) <= abs(sc)
        name = "oz_analyse_t" if thread_per_row else "oz_analyse_w"
        grid = _grid(rows if thread_per_row else rows * 32)
        args = (x, np.int64(rows), np.int64(k), np.int64(sr), np.int64(sc), exps,
                hist if histogram else np.uint64(0), flag)
        with _stage("analyse"):
            _kernel(name)((grid,), (_THREADS,), args)
    elif rows:
        exps.fill(0)
    if int(flag.get()[0]):
        raise NonFiniteError("GEMM operand has NaN or Inf entries")
    return exps, (hist.get().view(np.int64) if histogram else None)


def padded_k(k: int) -> int:
    """Inner dimension as stored: k rounded up to a multiple of 16 (k >= 64) or 4 (smaller).

    cuBLAS's INT8 (IMMA) GEMMs want 4-byte aligned pointers, leading dimensions and m, k
    multiples of 4 (16-byte alignment for its fastest kernels). Zero slices change no product.
    """
    q = 16 if k >= 64 else 4
    return -(-k // q) * q


def padded_rows(rows: int) -> int:
    """Rows per half (real, imaginary) as stored: even, so that ``2 * rows`` is a multiple of 4."""
    return rows + (rows & 1)


def _chunk(kpad: int) -> int:
    return 16 if kpad % 16 == 0 else (8 if kpad % 8 == 0 else 4)


def split(x, exps, num_splits: int, bits: int, *, reverse: bool = False, kpad: int | None = None,
          rows_alloc: int | None = None, out=None):
    """INT8 slices of the rows of ``x``, K-major and zero-padded: :func:`ozaki1.split_rows` on GPU.

    Args:
        x (cupy.ndarray): ``(rows, k)`` complex128, any strides.
        exps (cupy.ndarray): ``(rows,)`` int32 exponents.
        num_splits, bits, reverse: as :func:`~ozsim.gemm.ozaki1.split_rows`.
        kpad: stored inner dimension (default :func:`padded_k`).
        rows_alloc: stored rows per half (default :func:`padded_rows`); the imaginary parts start
            at row ``rows_alloc``.
        out (cupy.ndarray): ``(2 rows_alloc, s, kpad)`` int8 buffer to fill, or ``None``.

    Returns:
        ``(2 rows_alloc, s, kpad)`` int8: ``[:rows, :, :k]`` and ``[rows_alloc:rows_alloc+rows,
        :, :k]`` equal the real and imaginary halves of ``split_rows(...)``; the rest is 0.
    """
    rows, k = x.shape
    kpad = padded_k(k) if kpad is None else kpad
    ra = padded_rows(rows) if rows_alloc is None else rows_alloc
    if out is None:
        out = cp.empty((2 * ra, num_splits, kpad), dtype=cp.int8)
    if ra == 0:
        return out
    sr, sc = _strides(x) if rows and k else (1, 1)
    ch = _chunk(kpad)
    nq = kpad // ch
    qb = 0
    if abs(sr) <= abs(sc):  # rows adjacent in memory: tiles of rows x chunks per warp
        qb = 1
        while qb * 2 <= min(nq, 8):
            qb *= 2
    total = ra * nq if qb == 0 else -(-ra // (32 // qb)) * -(-nq // qb) * 32
    _split_kernel(ch)((_grid(total),), (_THREADS,),
                      (x, np.int64(rows), np.int64(ra), np.int64(k), np.int64(kpad),
                       np.int64(sr), np.int64(sc), exps, np.int32(bits), np.int32(num_splits),
                       np.int32(reverse), out, np.int32(qb)))
    return out


# -- planning -------------------------------------------------------------------------------------
def max_chunk(k: int, bits: int) -> int:
    """Most slice pairs one INT32 GEMM may sum exactly: ``c k (2**b - 1)**2 <= 2**31 - 1``."""
    return max(1, (2**31 - 1) // (k * ((1 << bits) - 1) ** 2))


def groups(num_splits: int, k: int, bits: int) -> list[tuple[int, int, int]]:
    """The INT8 GEMMs, in accumulation order: ``(t, a0, a1)`` = A slices ``a0..a1-1`` of group t.

    Group ``t`` (t = s+1 down to 2) pairs A's slice ``a`` with B's slice ``t - 2 - a``
    (0-based), stored reversed at position ``s - t + 1 + a``: one contiguous slab of each.
    """
    cmax = max_chunk(k, bits)
    out = []
    for t in range(num_splits + 1, 1, -1):
        for a0 in range(0, t - 1, cmax):
            out.append((t, a0, min(t - 1, a0 + cmax)))
    return out


@dataclass(frozen=True)
class Plan:
    """How one INT8 GEMM runs on the GPU (sizes in bytes).

    Attributes:
        kpad: stored inner dimension.
        num_gemms: INT8 GEMMs per column block (``s`` unless a group needs chunking).
        block_columns: columns of B per block; ``blocks`` of them.
        a_slice_bytes: A's slices (cached with the prepared gate).
        b_slice_bytes, product_bytes: B's slices and the INT32 products of one block.
    """

    kpad: int
    num_gemms: int
    block_columns: int
    blocks: int
    a_slice_bytes: int
    b_slice_bytes: int
    product_bytes: int

    @property
    def workspace_bytes(self) -> int:
        return self.b_slice_bytes + self.product_bytes


def plan(m: int, k: int, n: int, num_splits: int, bits: int, workspace_bytes: int) -> Plan:
    """Column blocking of B so that B's slices and the INT32 products fit ``workspace_bytes``.

    Per column of B: ``2 s kpad`` bytes of slices and ``16 G mp`` bytes of INT32 products
    (``G`` GEMMs, ``mp`` = :func:`padded_rows` of m). At least two columns per block.
    """
    kpad = padded_k(k)
    g = len(groups(num_splits, k, bits))
    mp = padded_rows(m)
    per_col = 2 * num_splits * kpad + 16 * g * mp
    nb = max(1, min(n, workspace_bytes // per_col)) if n else 1
    nbp = padded_rows(nb)
    return Plan(kpad, g, nb, -(-n // nb) if n else 0, 2 * mp * num_splits * kpad,
                2 * nbp * num_splits * kpad, 16 * g * mp * nbp)


#: The :class:`Plan` of the last :func:`int8_zgemm_gpu` call, as a dict (working memory report).
last_stats: dict = {}


#: Longest inner dimension (bytes) of one cuBLAS INT8 GEMM. Measured on an H100 (CUDA 13.0,
#: benchmarks/int8_layout_probe.py): a 16384 x 16384 INT8 GEMM runs at 1.25 POP/s with K = 8192
#: but 0.78 POP/s with K = 16384 and 0.69 with K = 65536, so a group's GEMM is cut into pieces
#: of at most this K (a multiple of 16) that add into the same INT32 plane (beta = 1; exact,
#: since the plan bounds the plane's sum).
MAX_GEMM_K = 8192

#: Shared memory the CUDA-core product kernel may use per block (no opt-in needed below 48 KiB).
_SMALL_SMEM = 48 * 1024


def _small_block(mp2: int, wpr: int) -> int:
    """Threads per block for :data:`_SMALL_SOURCE`, or 0 where cuBLAS should run the products
    (A with more than 32 rows, or slices too long for shared memory)."""
    if mp2 > 32:
        return 0
    for tb in (256, 128, 64, 32):
        if 4 * wpr * (mp2 + tb + 1) <= _SMALL_SMEM:
            return tb
    return 0


def _gemm_tn(handle, m_, n_, k_, a_ptr, lda, b_ptr, ldb, c_ptr, ldc, beta=False):
    """C (m_ x n_, column-major) = A^T B (+ C if beta) with A (k_ x m_) and B (k_ x n_)
    column-major, INT8 inputs, INT32 output and compute."""
    cublas.gemmEx(handle, _OP_T, _OP_N, m_, n_, k_, _ONE.ctypes.data, a_ptr, _CUDA_R_8I, lda,
                  b_ptr, _CUDA_R_8I, ldb, (_ONE if beta else _ZERO).ctypes.data, c_ptr,
                  _CUDA_R_32I, ldc, _COMPUTE_32I, _GEMM_DEFAULT)


def gemm_tn_long(handle, m_, n_, k_, a_ptr, lda, b_ptr, ldb, c_ptr, ldc) -> None:
    """:func:`_gemm_tn` (beta = 0) for any ``k_`` whose INT32 sums are exact: the fastest of
    ``cublasGemmEx`` in pieces of ``K <= MAX_GEMM_K`` (added with beta = 1, exact in INT32) and
    the cuBLASLt algorithms, timed once per shape (:mod:`ozsim.gemm.ozaki1.cublaslt`)."""
    from . import cublaslt as _cublaslt

    def pieces(beta: bool) -> None:
        for off in range(0, k_, MAX_GEMM_K):
            _gemm_tn(handle, m_, n_, min(MAX_GEMM_K, k_ - off), a_ptr + off, lda, b_ptr + off,
                     ldb, c_ptr, ldc, beta=beta or off > 0)

    _cublaslt.gemm_tn(pieces, m_, n_, k_, a_ptr, lda, b_ptr, ldb, c_ptr, ldc)


def prepared_slices(prep, num_splits: int, bits: int):
    """A's slices ``(2 mp, s, kpad)`` int8 for the GPU, cached on the :class:`PreparedOperand`."""
    key = ("cuda", num_splits, bits)
    sl = prep._splits.get(key)
    if sl is None:
        with _stage("split_a"):
            sl = split(prep.matrix, prep.exponents, num_splits, bits)
        prep._splits[key] = sl
    return sl


def int8_zgemm_gpu(prep, b, num_splits: int, bits: int, *, b_exponents=None, out=None,
                   workspace_bytes: int):
    """``C = A @ B`` by Ozaki scheme I on the GPU; see :func:`ozsim.gemm.ozaki1.int8_zgemm`.

    Args:
        prep: :class:`~ozsim.gemm.ozaki1.PreparedOperand` of A ``(m, k)`` (CuPy).
        b (cupy.ndarray): ``(k, n)`` complex128, any strides.
        num_splits, bits: ``s`` and ``b``.
        b_exponents (cupy.ndarray): ``(n,)`` int32 column exponents, or ``None``.
        out (cupy.ndarray): ``(m, n)`` complex128 (any strides, not overlapping ``b``).
        workspace_bytes: bound on B's slices plus the INT32 products of one column block.

    Returns:
        ``out``.

    Raises:
        NonFiniteError: NaN or Inf in ``b`` (before anything is written to ``out``).
    """
    global last_stats
    m, k = prep.shape
    n = b.shape[1]
    if b_exponents is None:
        b_exponents = analyse(b.T, histogram=False)[0]
    if out is None:
        out = cp.empty((m, n), dtype=cp.complex128)
    p = plan(m, k, n, num_splits, bits, workspace_bytes)
    last_stats = {**p.__dict__, "workspace_bytes": p.workspace_bytes, "m": m, "k": k, "n": n,
                  "num_splits": num_splits}
    if m == 0 or n == 0:
        return out
    a_sl = prepared_slices(prep, num_splits, bits)
    kpad, s, mp = p.kpad, num_splits, padded_rows(m)
    gl = groups(s, k, bits)
    gt = cp.asarray(np.array([t for t, _, _ in gl], dtype=np.int32))
    small_tb = _small_block(2 * mp, s * kpad // 4)
    last_stats["products"] = "cuda cores (dp4a)" if small_tb else "cublas int8"
    if small_tb:
        kw = kpad // 4
        gdesc = cp.asarray(np.array([(a0 * kw, (s - t + 1 + a0) * kw, (a1 - a0) * kw)
                                     for t, a0, a1 in gl], dtype=np.int32).ravel())
        small = _small_kernel(2 * mp)
        smem = 4 * (2 * mp + small_tb + 1) * (s * kw)
    b_sl_buf = cp.empty(p.b_slice_bytes, dtype=cp.int8)
    prod_buf = cp.empty(p.product_bytes // 4, dtype=cp.int32)
    so_r, so_c = _strides(out)
    handle = cp.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
    cublas.setPointerMode(handle, _POINTER_MODE_HOST)
    acc = _kernel("oz_accumulate")
    lda = s * kpad
    for j0 in range(0, n, p.block_columns):
        nb = min(n, j0 + p.block_columns) - j0
        nbp = padded_rows(nb)
        b_sl = b_sl_buf[: 2 * nbp * s * kpad].reshape(2 * nbp, s, kpad)
        with _stage("split_b"):
            split(b[:, j0 : j0 + nb].T, b_exponents[j0 : j0 + nb], s, bits, reverse=True,
                  kpad=kpad, rows_alloc=nbp, out=b_sl)
        plane_bytes = 16 * mp * nbp
        with _stage("gemm"):
            if small_tb:
                grid = int(min(-(-2 * nbp // small_tb), 8 * _sms()))
                small((grid,), (small_tb,),
                      (a_sl, b_sl, np.int64(2 * nbp), np.int32(s * kpad // 4), gdesc,
                       np.int32(len(gl)), prod_buf, np.int64(2 * nbp)), shared_mem=smem)
            else:
                for g, (t, a0, a1) in enumerate(gl):
                    gemm_tn_long(handle, 2 * nbp, 2 * mp, (a1 - a0) * kpad,
                                 b_sl.data.ptr + (s - t + 1 + a0) * kpad, lda,
                                 a_sl.data.ptr + a0 * kpad, lda,
                                 prod_buf.data.ptr + g * plane_bytes, 2 * nbp)
        with _stage("accumulate"):
            acc((_grid(m * nb),), (_THREADS,),
                (prod_buf, np.int64(m), np.int64(mp), np.int64(nb), np.int64(nbp),
                 np.int32(len(gl)), gt, np.int32(bits), prep.exponents,
                 b_exponents[j0 : j0 + nb], out[:, j0 : j0 + nb], np.int64(so_r),
                 np.int64(so_c)))
    return out


def default_workspace_bytes(reserve: int = 0, cap: int = 1 << 34) -> int:
    """GPU working-memory budget: half the free device memory left after ``reserve`` bytes,
    clamped to 256 MiB..``cap`` (16 GiB by default)."""
    free, _ = cp.cuda.Device().mem_info
    avail = int(free) + int(cp.get_default_memory_pool().free_bytes()) - int(reserve)
    return int(min(max(avail // 2, 1 << 28), cap))
