"""``int8-auto`` for FP32 data: Ozaki scheme I over INT8 with the mantissa loss counted against
FP32's 24-bit significand.

The complex64 operands are converted to complex128 (exact) and multiplied by
:func:`ozsim.gemm.ozaki1.int8_zgemm`, the same scheme, kernels and INT8 products as the double-
precision ``int8-auto``; only INT8-AUTO's rule changes: the loss of a scalar ``d`` bits below its
row's scaling point with ``s`` slices of ``b`` bits is ``max(0, d + 1 + 24 - s b)``
(:func:`ozsim.gemm.ozaki1.mean_loss` with ``significand_bits=24``), so ``T = 1`` means that the
scalars of each operand lose one bit of their 24 on average. With ``b = 7`` that is 4 or 5 slices
for dense data (against 8 or 9 for FP64 data). The FP64 result is rounded to complex64. When no
``s <= 18`` meets ``T`` the product falls back to native CGEMM.

References:
    [ozIMMU] H. Ootomo, K. Ozaki, R. Yokota, "DGEMM on integer matrix multiplication unit",
        IJHPCA 2024: Alg. 3-4 (the scheme) and Sec. 4.4 (complex GEMM, INT8-AUTO).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from ..info import GemmInfo
from ..ozaki1 import (
    MAX_SPLITS,
    PreparedOperand,
    analyse_rows,
    bits_per_slice,
    choose_num_splits,
    default_workspace_bytes,
    int8_zgemm,
    mean_loss,
)
from ..ozaki1.scheme import _block_columns

__all__ = ["FP32_SIGNIFICAND_BITS", "int8_auto", "loss_histogram_columns"]

#: FP32's significand (23 stored bits and the hidden one): what INT8-AUTO counts the loss against.
FP32_SIGNIFICAND_BITS = 24


def int8_auto(a, b, T: float, name: str, xp: ModuleType = np):
    """Scheme I with FP32's INT8-AUTO on complex128 copies of FP32 data.

    Args:
        a: ``(m, k)`` complex128 holding complex64 values (``k >= 1``).
        b: ``(k, n)`` complex128 holding complex64 values.
        T: the mean mantissa loss allowed, in bits of FP32's 24 (>= 0).
        name: the backend name for the info.
        xp: numpy or cupy.

    Returns:
        ``(C, info)``: ``C`` the ``(m, n)`` complex128 product (round it to complex64), or
        ``None`` when no ``s <= 18`` meets ``T`` (``info.fallback``: run native CGEMM).

    Raises:
        NonFiniteError: NaN or Inf in ``a`` or ``b``.
    """
    prep = PreparedOperand(a)
    k, n = b.shape
    bits = bits_per_slice(k)
    if xp is np:
        eb, hist_b = analyse_rows(b.T, _block_columns(n, k, MAX_SPLITS,
                                                      default_workspace_bytes(np)))
    else:  # pragma: no cover - GPU: one fused kernel, the histogram comes back as NumPy
        from ..ozaki1.cuda import analyse

        eb, hist_b = analyse(b.T)
    s = choose_num_splits(prep.histogram, hist_b, bits, T, FP32_SIGNIFICAND_BITS)
    if s is None:
        return None, GemmInfo(name, None, bits, fallback=True)
    info = GemmInfo(name, s, bits, mean_loss(prep.histogram, s, bits, FP32_SIGNIFICAND_BITS),
                    mean_loss(hist_b, s, bits, FP32_SIGNIFICAND_BITS))
    return int8_zgemm(prep, b, s, b_exponents=eb), info


def loss_histogram_columns(b, block_columns: int, xp: ModuleType = np) -> np.ndarray:
    """INT8-AUTO's loss histogram of all the columns of ``b``, ``block_columns`` at a time (each
    block converted exactly to complex128): what :func:`int8_auto` counts for one block, for the
    whole operand, so that a product computed block by block chooses its slices once.

    Args:
        b: ``(k, n)`` complex64, NumPy or CuPy.
        block_columns: columns converted at once (bounds the complex128 copy).

    Returns:
        ``(MAX_EXP_DIFF + 1,)`` int64 NumPy histogram (:func:`ozsim.gemm.ozaki1.loss_histogram`).

    Raises:
        NonFiniteError: NaN or Inf in ``b``.
    """
    k, n = b.shape
    hist = None
    for j0 in range(0, n, block_columns):
        blk = b[:, j0:j0 + block_columns].astype(xp.complex128)
        if xp is np:
            _, h = analyse_rows(blk.T, _block_columns(blk.shape[1], k, MAX_SPLITS,
                                                      default_workspace_bytes(np)))
        else:  # pragma: no cover - GPU
            from ..ozaki1.cuda import analyse

            _, h = analyse(blk.T)
        h = np.asarray(h.get() if hasattr(h, "get") else h, dtype=np.int64)
        hist = h if hist is None else hist + h
    return hist
