"""The GPU half of :mod:`ozsim.gemm.fp16`: FP16 Tensor Core slice products (private; imports
CuPy).

Imported only when a CuPy array reaches an ``fp16*`` backend. The split is the array-namespace
code of :func:`ozsim.gemm.ozaki1.split_rows` with ``dtype=float16`` (integers ``|q| <= 2047``,
exact in FP16); each slice pair ``A_i B_j`` is one ``cublasGemmEx`` with ``CUDA_R_16F`` inputs,
``CUDA_R_32F`` output and ``CUBLAS_COMPUTE_32F``. Its partial sums are integers below ``2**24``
([DGEMM-TC] Alg. 1's condition, :func:`ozsim.gemm.fp16.bits_per_slice`), so the FP32 result is
exact whatever order the Tensor Cores (or a split-K reduction) add in: Tensor Cores align the
addends to the largest exponent of a block and drop bits below FP32's 24, and an integer sum
below ``2**24`` has none there. The FP32 planes are added into the FP64 (``fp16x{s}``) or INT64
(``fp16-cr``) group sums exactly, so the GPU computes the CPU's integers.

Layout: A's slices ``(2m, s_A, k)`` and B's ``(2n, s_B, k)`` are K-major (row ``r`` of slice ``i``
at ``[r, i, :]``); ``C (2m x 2n, row-major) = A_i B_j^T`` is cuBLAS's column-major
``(2n x 2m) = B_j^T A_i`` with both operands transposed-in ("TN"), leading dimensions ``s k``.

References:
    [DGEMM-TC] D. Mukunoki, K. Ozaki, T. Ogita, T. Imamura, ISC 2020, Alg. 2.
    cuBLAS documentation, ``cublasGemmEx`` (``CUDA_R_16F`` inputs, ``CUBLAS_COMPUTE_32F``).
"""

from __future__ import annotations

import cupy as cp
import numpy as np

from .._gpu import (_COMPUTE_32F, _CUDA_R_16F, _CUDA_R_32F, _GEMM_DEFAULT, _OP_N, _OP_T,
                    _POINTER_MODE_HOST, cublas)
from ..ozaki1.scheme import split_rows

__all__ = ["group_products", "pair_product", "split_fp16"]

_ONE = np.ones(1, dtype=np.float32)
_ZERO = np.zeros(1, dtype=np.float32)


def _handle():
    handle = cp.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
    cublas.setPointerMode(handle, _POINTER_MODE_HOST)
    return handle


def split_fp16(x, exps, num_splits: int, bits: int):
    """FP16 slices of the rows of ``x`` (:func:`ozsim.gemm.ozaki1.split_rows`, ``dtype=float16``).

    Args:
        x (cupy.ndarray): ``(rows, k)`` complex128, any strides (``b.T`` for B's columns).
        exps (cupy.ndarray): ``(rows,)`` int32 scaling exponents.
        num_splits, bits: ``s`` and ``b``.

    Returns:
        cupy.ndarray: ``(2 rows, s, k)`` float16, C-contiguous.
    """
    return split_rows(x, exps, num_splits, bits, dtype=cp.float16)


def pair_product(handle, a_sl, i: int, b_sl, j: int, out) -> None:
    """``out (2m, 2n) float32 = A_i B_j^T``, exact ([DGEMM-TC] Alg. 2, one Tensor Core GEMM).

    Args:
        handle: the cuBLAS handle (stream and host pointer mode set).
        a_sl (cupy.ndarray): ``(2m, s_A, k)`` float16 slices of A.
        i: A's slice (0-based).
        b_sl (cupy.ndarray): ``(2n, s_B, k)`` float16 slices of B's columns.
        j: B's slice (0-based).
        out (cupy.ndarray): ``(2m, 2n)`` float32, C-contiguous.
    """
    m2, sa, k = a_sl.shape
    n2, sb, _ = b_sl.shape
    cublas.gemmEx(handle, _OP_T, _OP_N, n2, m2, k, _ONE.ctypes.data,
                  b_sl.data.ptr + 2 * j * k, _CUDA_R_16F, sb * k,
                  a_sl.data.ptr + 2 * i * k, _CUDA_R_16F, sa * k,
                  _ZERO.ctypes.data, out.data.ptr, _CUDA_R_32F, n2, _COMPUTE_32F, _GEMM_DEFAULT)


def group_products(a_sl, b, b_exponents, num_splits: int, bits: int):
    """``P_t = sum_{i+j=t} A_i B_j`` for t = s+1 down to 2 (1-based slices), exact in FP64.

    Args:
        a_sl (cupy.ndarray): ``(2m, s, k)`` float16 slices of A.
        b (cupy.ndarray): ``(k, nb)`` complex128, a block of B's columns.
        b_exponents (cupy.ndarray): ``(nb,)`` int32.
        num_splits, bits: ``s`` and ``b``.

    Yields:
        ``(t, P_t)``: ``(2m, 2nb)`` float64 integers, blocks ``[[ArBr, ArBi], [AiBr, AiBi]]``
        (what :func:`ozsim.gemm.ozaki1.scheme._accumulate` takes).
    """
    s = num_splits
    b_sl = split_fp16(b.T, b_exponents, s, bits)
    m2, n2 = a_sl.shape[0], b_sl.shape[0]
    handle = _handle()
    buf = cp.empty((m2, n2), dtype=cp.float32)
    for t in range(s + 1, 1, -1):
        p = cp.zeros((m2, n2), dtype=cp.float64)
        for i in range(t - 1):  # A_{i+1} B_{t-1-i}, 1-based
            pair_product(handle, a_sl, i, b_sl, t - 2 - i, buf)
            p += buf  # exact: integers below 2**53
        yield t, p
