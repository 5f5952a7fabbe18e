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
                         ``CUBLAS_COMPUTE_32F`` (LE-GEMM)
LE-GEMM combine          :data:`_FP16_COMBINE`: ``(C1 + 2**-10 C2) * 2**-(sA_i + sB_j)``
=======================  =======================================================================

The roundings are :data:`ozsim.gemm.single.rounding.CUDA_DEVICE_FUNCTIONS`, the bit operations of
the NumPy functions beside them, so the words are the same bits on both devices.

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

__all__ = ["le_matmul", "tf32_matmul"]

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


def tf32_matmul(a_rows, b_cols, products: int):
    """:func:`ozsim.gemm.single.tf32.tf32_matmul` on the GPU: 2 (``tf32x3``) or 3 (``tf32x4``)
    ``cublasGemmEx`` launches into one FP32 ``C``, the small terms first."""
    a2, b2, m, n, k = _stack(a_rows, b_cols, cp.float32, _TF32_SPLIT)
    c = cp.empty((m, n), dtype=cp.float32)
    item = 4
    a_hi, a_lo = a2.data.ptr, a2.data.ptr + k * item
    b_lo, b_hi = b2.data.ptr, b2.data.ptr + k * n * item
    tf32 = _COMPUTE_32F_FAST_TF32
    _gemm(m, n, 2 * k, a_hi, 2 * k, b_lo, n, c.data.ptr, n, _CUDA_R_32F, tf32)  # cross terms
    if products == 4:
        _gemm(m, n, k, a_lo, 2 * k, b_lo, n, c.data.ptr, n, _CUDA_R_32F, tf32, beta=True)
    _gemm(m, n, k, a_hi, 2 * k, b_hi, n, c.data.ptr, n, _CUDA_R_32F, tf32, beta=True)
    return c


def le_matmul(a_rows, b_cols, sa, sb):
    """:func:`ozsim.gemm.single.legemm.le_matmul` on the GPU (shifts already computed): two
    ``cublasGemmEx`` launches (``Ahi Bhi``; ``[Ahi, Alo] [Blo; Bhi]`` over 2K) and one combine."""
    a2, b2, m, n, k = _stack(a_rows, b_cols, cp.float16, _FP16_SPLIT, sa, sb)
    c1 = cp.empty((m, n), dtype=cp.float32)
    c2 = cp.empty((m, n), dtype=cp.float32)
    item = 2
    a_hi = a2.data.ptr
    b_lo, b_hi = b2.data.ptr, b2.data.ptr + k * n * item
    _gemm(m, n, k, a_hi, 2 * k, b_hi, n, c1.data.ptr, n, _CUDA_R_16F, _COMPUTE_32F)
    _gemm(m, n, 2 * k, a_hi, 2 * k, b_lo, n, c2.data.ptr, n, _CUDA_R_16F, _COMPUTE_32F)
    return _FP16_COMBINE(c1, c2, sa[:, None], sb[None, :], c1)
