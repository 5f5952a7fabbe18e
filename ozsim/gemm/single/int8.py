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

__all__ = ["FP32_SIGNIFICAND_BITS", "int8_auto"]

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
