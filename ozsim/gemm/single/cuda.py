"""The GPU part of the single-precision backends (private; imports CuPy, loaded only when a CuPy
array arrives).

=======================  =======================================================================
what                     how
=======================  =======================================================================
TF32 words               :data:`_TF32_SPLIT`: one elementwise kernel writes ``hi`` and ``lo`` of
                         a (strided) float32 block into its place in the stacked word buffers
FP16 words               :data:`_FP16_SPLIT`: scales by ``2**shift`` and writes FP16 ``hi``, ``lo``
products                 ``cublasGemmEx`` on row-major buffers (:func:`_gemm`): float32 with
                         ``CUBLAS_COMPUTE_32F_FAST_TF32`` (TF32), float16 in / float32 out with
                         ``CUBLAS_COMPUTE_32F`` (LE-GEMM); ``hi*hi`` in chunks of K
                         (:func:`chunk`), added with ``beta = 1``
LE-GEMM combine          :data:`_FP16_COMBINE`: ``(C1 + 2**-10 C2) * 2**-(sA_i + sB_j)``
=======================  =======================================================================

The roundings are :data:`ozsim.gemm.single.rounding.CUDA_DEVICE_FUNCTIONS`, the bit operations of
the NumPy functions beside them, so the words are the same bits on both devices.

Why ``hi*hi`` runs in chunks of K. The tensor cores add the products of an MMA step into their
FP32 accumulator with truncation, not round to nearest, so along K the error of such a sum grows
like its number of MMA steps, where an FP32 dot product rounded to nearest (native CGEMM) grows
like the square root. ``hi*hi`` carries the value: over a whole K of 8192 its truncation made
``tf32x3``'s norm-wise error 8.4x and ``fp16-le``'s 4.2x native CGEMM's (H200, Ozaki's inputs,
phi = 1; 2.6x already at K = 512). In chunks, each chunk's FP32 result added to ``C`` by
cuBLAS's epilogue (``beta = 1``: a fused multiply-add, rounded to nearest), the error is that of
one chunk, whatever K: measured on the same inputs at n = 4096 and 8192, phi = 0.1 and 1, it
is proportional to the chunk's MMA steps (TF32: 6.5e-7, 1.2e-6, 2.4e-6, 4.8e-6 for K chunks of
256, 512, 1024, 2048; FP16, whose MMA step takes k = 16, the same at twice the K) against native
CGEMM's 1.6e-6 and 2.3e-6 on these square products. :func:`chunk` takes
``2**floor(log2(K) / 2)`` MMA steps, about ``sqrt(K)``, so that the chunk's error stays below
native's as K grows (0.55x at K = 8192, 0.77x at 4096). The cost is ``C``'s read and write per
chunk: at n = 8192 with Karatsuba's form ``tf32x3`` runs at 2.1-2.4x and ``fp16-le`` at 3.2-3.4x
CGEMM's speed (2.6x and 3.7x unchunked). Where ``C`` is small (at most ``2**22`` values, 16 MiB:
it stays in L2, so a chunk costs a launch rather than a pass over memory) cuBLAS's own CGEMM
splits K and is up to 5x more accurate (4.9e-7 at 128 x 8192 x 96), so the chunks there take
16 MMA steps.
The cross terms are ``2**-11`` (``fp16-le``: ``2**-10`` scaled) of ``hi*hi`` and keep one cuBLAS
call over ``2K``.

References:
    cuBLAS documentation, ``cublasGemmEx``: ``CUDA_R_16F`` and ``CUDA_R_32F`` inputs,
        ``CUBLAS_COMPUTE_32F`` and ``CUBLAS_COMPUTE_32F_FAST_TF32``.
"""

from __future__ import annotations

import cupy as cp
import numpy as np

from .._gpu import (_COMPUTE_32F, _COMPUTE_32F_FAST_TF32, _CUDA_R_16F, _CUDA_R_32F, _GEMM_DEFAULT,
                    _OP_N, _POINTER_MODE_HOST, cublas)
from .rounding import CUDA_DEVICE_FUNCTIONS
from .rounding import LE_RESIDUAL_SHIFT as RESIDUAL_SHIFT

__all__ = ["chunk", "le_matmul", "tf32_matmul"]

#: Products an MMA step adds: TF32 ``m16n8k8``, FP16 ``m16n8k16`` (cuBLAS's Hopper kernels too).
_STEP = {"tf32": 8, "fp16": 16}


#: Outputs of a product (FP32 values of ``C``) up to which ``hi*hi``'s chunks take
#: :data:`_SMALL_STEPS` MMA steps.
_SMALL_C = 1 << 22
_SMALL_STEPS = 16


def chunk(k: int, words: str, outputs: int) -> int:
    """The K of a ``hi*hi`` chunk (module docstring): ``2**floor(log2(k) / 2)`` MMA steps of
    ``words`` (``"tf32"`` or ``"fp16"``), e.g. 512 (TF32) and 1024 (FP16) at ``k = 8192``; at
    most 16 steps where ``C`` has at most ``2**22`` values (``outputs = m n``)."""
    steps = 1 << (max(int(k), 1).bit_length() - 1) // 2
    if outputs <= _SMALL_C:
        steps = min(steps, _SMALL_STEPS)
    return _STEP[words] * steps

# cudaDataType and cublasComputeType_t values (stable across CUDA 11-13).
_ONE = np.ones(1, dtype=np.float32)
_ZERO = np.zeros(1, dtype=np.float32)

_TF32_SPLIT = cp.ElementwiseKernel(
    "float32 x", "float32 hi, float32 lo",
    "float h = ozs_round_tf32(x); hi = h; lo = ozs_round_tf32(__fsub_rn(x, h));",
    "ozsim_tf32_split", preamble=CUDA_DEVICE_FUNCTIONS)

_FP16_SPLIT = cp.ElementwiseKernel(
    "float32 x, int32 shift", "float16 hi, float16 lo",
    f"""
    float xs = ldexpf(x, shift);  // exact: a power of two
    float h = ozs_round_fp16(xs);
    hi = h;  // an FP16 value: the conversion is exact
    lo = ozs_round_fp16(__fmul_rn(__fsub_rn(xs, h), {2.0**RESIDUAL_SHIFT!r}f));
    """,
    "ozsim_fp16_split", preamble=CUDA_DEVICE_FUNCTIONS)

_FP16_COMBINE = cp.ElementwiseKernel(
    "float32 c1, float32 c2, int32 sa, int32 sb", "float32 c",
    f"c = ldexpf(__fadd_rn(c1, __fmul_rn(c2, {2.0**-RESIDUAL_SHIFT!r}f)), -(sa + sb));",
    "ozsim_fp16_combine")


def _gemm(m, n, k, a_ptr, lda, b_ptr, ldb, c_ptr, ldc, dtype, compute, beta=False):
    """Row-major ``C (m x n) = A (m x k) @ B (k x n) (+ C with beta)``, leading dimensions in
    elements: cuBLAS's column-major ``C^T = B^T A^T`` on the same memory."""
    handle = cp.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
    cublas.setPointerMode(handle, _POINTER_MODE_HOST)
    cublas.gemmEx(handle, _OP_N, _OP_N, n, m, k, _ONE.ctypes.data, b_ptr, dtype, ldb, a_ptr,
                  dtype, lda, (_ONE if beta else _ZERO).ctypes.data, c_ptr, _CUDA_R_32F, ldc,
                  compute, _GEMM_DEFAULT)


def _stack(a_rows, b_cols, dtype, split, sa=None, sb=None):
    """``A2 = [Ahi | Alo]`` (M, 2K) and ``B2 = [Blo; Bhi]`` (2K, N) of ``dtype``, written by
    ``split`` block by block (with the shifts ``sa``/``sb`` for LE-GEMM)."""
    k = a_rows[0].shape[1]
    m = sum(x.shape[0] for x in a_rows)
    n = sum(x.shape[1] for x in b_cols)
    a2 = cp.empty((m, 2 * k), dtype=dtype)
    b2 = cp.empty((2 * k, n), dtype=dtype)
    r0 = 0
    for x in a_rows:
        r1 = r0 + x.shape[0]
        args = (x,) if sa is None else (x, sa[r0:r1, None])
        split(*args, a2[r0:r1, :k], a2[r0:r1, k:])
        r0 = r1
    c0 = 0
    for x in b_cols:
        c1 = c0 + x.shape[1]
        args = (x,) if sb is None else (x, sb[None, c0:c1])
        split(*args, b2[k:, c0:c1], b2[:k, c0:c1])
        c0 = c1
    return a2, b2, m, n, k


def _chunked(m, n, k, chunk, a_ptr, lda, b_ptr, ldb, c_ptr, item, dtype, compute, beta):
    """``C (+)= A @ B`` over K in chunks of ``chunk``, each added to ``C`` by cuBLAS's epilogue
    (module docstring); ``beta``: whether the first chunk adds to ``C`` too."""
    for k0 in range(0, k, chunk):
        _gemm(m, n, min(chunk, k - k0), a_ptr + k0 * item, lda, b_ptr + k0 * ldb * item, ldb,
              c_ptr, n, dtype, compute, beta=beta or k0 > 0)


def tf32_matmul(a_rows, b_cols, products: int):
    """:func:`ozsim.gemm.single.tf32.tf32_matmul` on the GPU: ``cublasGemmEx`` launches into one
    FP32 ``C``, the small terms first (the cross terms over ``2K``, ``tf32x4``'s ``lo*lo``), then
    ``hi*hi`` in chunks of :func:`chunk`."""
    a2, b2, m, n, k = _stack(a_rows, b_cols, cp.float32, _TF32_SPLIT)
    c = cp.empty((m, n), dtype=cp.float32)
    item = 4
    a_hi, a_lo = a2.data.ptr, a2.data.ptr + k * item
    b_lo, b_hi = b2.data.ptr, b2.data.ptr + k * n * item
    tf32 = _COMPUTE_32F_FAST_TF32
    _gemm(m, n, 2 * k, a_hi, 2 * k, b_lo, n, c.data.ptr, n, _CUDA_R_32F, tf32)  # cross terms
    if products == 4:
        _gemm(m, n, k, a_lo, 2 * k, b_lo, n, c.data.ptr, n, _CUDA_R_32F, tf32, beta=True)
    _chunked(m, n, k, chunk(k, "tf32", m * n), a_hi, 2 * k, b_hi, n, c.data.ptr, item,
             _CUDA_R_32F, tf32, beta=True)
    return c


def le_matmul(a_rows, b_cols, sa, sb):
    """:func:`ozsim.gemm.single.legemm.le_matmul` on the GPU (shifts already computed):
    ``cublasGemmEx`` launches (``Ahi Bhi`` in chunks of :func:`chunk`; ``[Ahi, Alo]
    [Blo; Bhi]`` over 2K) and one combine."""
    a2, b2, m, n, k = _stack(a_rows, b_cols, cp.float16, _FP16_SPLIT, sa, sb)
    c1 = cp.empty((m, n), dtype=cp.float32)
    c2 = cp.empty((m, n), dtype=cp.float32)
    item = 2
    a_hi = a2.data.ptr
    b_lo, b_hi = b2.data.ptr, b2.data.ptr + k * n * item
    _chunked(m, n, k, chunk(k, "fp16", m * n), a_hi, 2 * k, b_hi, n, c1.data.ptr, item,
             _CUDA_R_16F, _COMPUTE_32F, beta=False)
    _gemm(m, n, 2 * k, a_hi, 2 * k, b_lo, n, c2.data.ptr, n, _CUDA_R_16F, _COMPUTE_32F)
    return _FP16_COMBINE(c1, c2, sa[:, None], sb[None, :], c1)
