"""Multiword TF32 GEMM: each FP32 value as two TF32 words, 3 or 4 word products, FP32 sums.

For ``C = A @ B`` with float32 ``A`` (M, K) and ``B`` (K, N) ([TF32] Sec. 3-4):

1. *Split* (:func:`ozsim.gemm.single.rounding.split_tf32`): ``A = Ahi + Alo + dA`` with TF32
   words and ``|dA| <= 2**-23 |A|`` entrywise (one unit in the last place), the same for ``B``.
2. *Products*: ``C = Alo Bhi + Ahi Blo (+ Alo Blo) + Ahi Bhi``, each a GEMM whose products of two
   TF32 numbers (11 x 11 significant bits) are exact in FP32 and whose sums are FP32 (the tensor
   cores' accumulation). ``tf32x3`` drops ``Alo Blo`` (at most ``2**-22 |a||b|`` a term, of random
   sign; [TF32] reports FP32-level accuracy with three products), ``tf32x4`` keeps it.
   The words are stored as ``A2 = [Ahi | Alo]`` (M, 2K) and ``B2 = [Blo; Bhi]`` (2K, N), so that
   the two cross products are one GEMM over ``2K``; ``Alo Blo`` and ``Ahi Bhi`` are GEMMs over
   ``K`` on views of the same buffers, added to ``C`` smallest first (cuBLAS ``beta = 1``).

On the GPU every product is ``cublasGemmEx`` on float32 arrays with compute type
``CUBLAS_COMPUTE_32F_FAST_TF32``: the hardware rounds each operand to TF32, which changes nothing
here because the words are TF32 values already. On the CPU the same GEMMs run in FP32 BLAS on the
same words: the products are exact there too and the sums FP32, a faithful emulation whose only
difference from the GPU is the order of the FP32 additions (so the two agree to FP32 rounding, not
bitwise).

References:
    [TF32] P. Valero-Lara, F. Liu, J. S. Vetter, I. Jorquera, "Mixed-Precision S/DGEMM Using the
        TF32 and TF64 Frameworks on Low-Precision AI Tensor Cores", SC-W '23, pp. 179-186.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from .rounding import split_tf32

__all__ = ["tf32_matmul"]


def _words(a_rows, b_cols, xp: ModuleType):
    """``A2 = [Ahi | Alo]`` and ``B2 = [Blo; Bhi]`` of the stacked operands (CPU)."""
    k = a_rows[0].shape[1]
    m = sum(x.shape[0] for x in a_rows)
    n = sum(x.shape[1] for x in b_cols)
    a2 = xp.empty((m, 2 * k), dtype=xp.float32)
    b2 = xp.empty((2 * k, n), dtype=xp.float32)
    r0 = 0
    for x in a_rows:
        r1 = r0 + x.shape[0]
        a2[r0:r1, :k], a2[r0:r1, k:] = split_tf32(x)
        r0 = r1
    c0 = 0
    for x in b_cols:
        c1 = c0 + x.shape[1]
        b2[k:, c0:c1], b2[:k, c0:c1] = split_tf32(x)
        c0 = c1
    return a2, b2


def tf32_matmul(a_rows, b_cols, products: int, xp: ModuleType = np):
    """``[A_1; A_2; ...] @ [B_1, B_2, ...]`` by the multiword TF32 scheme (module docstring).

    Args:
        a_rows: float32 matrices with ``K`` columns, stacked by rows (any strides; the real and
            imaginary parts of a complex64 matrix are two such blocks).
        b_cols: float32 matrices with ``K`` rows, stacked by columns.
        products: 3 (``tf32x3``) or 4 (``tf32x4``).
        xp: numpy or cupy (the blocks' library).

    Returns:
        ``(M, N)`` float32, ``M`` the rows of all ``a_rows``, ``N`` the columns of all ``b_cols``.
    """
    if xp is not np:  # pragma: no cover - GPU
        from . import cuda

        return cuda.tf32_matmul(a_rows, b_cols, products)
    a2, b2 = _words(a_rows, b_cols, xp)
    k = a2.shape[1] // 2
    c = a2 @ b2  # Alo Bhi + Ahi Blo: one GEMM over 2K
    if products == 4:
        c += a2[:, k:] @ b2[:k]  # Alo Blo
    c += a2[:, :k] @ b2[k:]  # Ahi Bhi, last
    return c
