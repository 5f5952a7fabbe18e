"""LE-GEMM with power-of-two scaling: FP32 GEMM from FP16 words, 3 products, 2 FP32 accumulators.

For ``C = A @ B`` with float32 ``A`` (M, K) and ``B`` (K, N):

1. *Scaling* (ozsim's addition; [LE-GEMM] has none, so an operand outside FP16's range
   overflows or flushes to zero there). Each row ``i`` of ``A`` gets a power-of-two shift
   ``sA_i = SCALE_EXP - floor(log2 max_j |a_ij|)`` (0 for an all-zero row), each column of ``B``
   likewise ``sB_j``, so that the row's (column's) largest magnitude lies in
   ``[2**14, 2**15)``: as high as FP16 allows (its largest finite number is 65504; ``2**15``
   keeps the rounded ``hi`` of the largest element finite), which leaves the most binades below
   it before ``lo`` and then ``hi`` turn subnormal. Scaling by powers of two is exact.
2. *Split* ([LE-GEMM] Sec. 3, precision transformation): ``hi = fp16(x)``, and the residual,
   exact in FP32, scaled by ``2**10`` into FP16's range: ``lo = fp16((x - hi) * 2**10)``. Both
   round to nearest (ties to even; :func:`ozsim.gemm.single.rounding.round_fp16`). With
   ``2**e <= |x| < 2**(e+1)`` and ``e >= -12`` (``lo`` normal), ``|x - hi - 2**-10 lo| <=
   2**(e-23)``: one unit in the last place of FP32. So an entry keeps FP32's precision if it is
   within 26 binades of its row's (column's) largest; smaller entries keep ``2**-36`` of that
   largest in absolute terms.
   *Rounding, not the bit-cut*: [LE-GEMM] describes ``hi`` as a cut of the FP32 bits. A cut
   leaves a residual of the sign of ``x`` of up to a full FP16 unit, so the dropped term
   ``2**-20 lo_a lo_b`` is up to ``2**-20 |a b|`` and of the sign of the product, a bias that
   does not average out over a dot product. Rounding halves the residual and gives it both
   signs: the dropped term is at most ``2**-22 |a b|`` and unbiased. Measured on Ozaki's inputs
   (k = 1024, phi = 0.1 and 1, CPU): norm-wise error 1.4x native CGEMM's with rounding, 1.6x
   with the cut. With rounding the words are those of two-word TF32 scaled by powers of two,
   so ``fp16-le`` and ``tf32x3`` keep the same bits of every input.
3. *Products* ([LE-GEMM] Sec. 3, GEMM emulation), with ``A2 = [Ahi | Alo]`` (M, 2K) and
   ``B2 = [Blo; Bhi]`` (2K, N) in FP16: ``C1 = Ahi Bhi`` (a GEMM over ``K``) and
   ``C2 = Ahi Blo + Alo Bhi = A2 B2`` (one GEMM over ``2K``), each with its own FP32 accumulator;
   ``Alo Blo`` (``2**-20`` smaller) is dropped.
4. *Combine and unscale*: ``c_ij = (C1_ij + 2**-10 C2_ij) * 2**-(sA_i + sB_j)`` in FP32 (one
   rounding for the sum; the scalings are exact unless the result leaves FP32's range).

On the GPU the products are ``cublasGemmEx`` with FP16 inputs, FP32 output and
``CUBLAS_COMPUTE_32F`` (tensor cores), and step 4 is one elementwise kernel. On the CPU the same
words, held as float32, go through FP32 BLAS: a product of two FP16 values is exact in FP32, so
this is an exact emulation up to the order of the FP32 additions (the CPU and GPU results agree
to FP32 rounding, not bitwise; tensor cores may also truncate inside their sums).

References:
    [LE-GEMM] Y. Zhang, L. Lu, Z. Yang, Z. Liang, S. Suo, "LE-GEMM: A lightweight emulation-based
        GEMM with precision refinement on GPU", J. Systems Architecture 160 (2025) 103336.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from ..._array import array_namespace
from ...errors import NonFiniteError
from .rounding import LE_RESIDUAL_SHIFT, LE_SCALE_EXP, round_fp16

__all__ = ["RESIDUAL_SHIFT", "SCALE_EXP", "le_matmul", "scale_shifts", "split_fp16"]

#: A row's (column's) largest magnitude is scaled into ``[2**SCALE_EXP, 2**(SCALE_EXP + 1))``.
SCALE_EXP = LE_SCALE_EXP
#: ``lo = fp16((x - hi) * 2**RESIDUAL_SHIFT)`` ([LE-GEMM]).
RESIDUAL_SHIFT = LE_RESIDUAL_SHIFT


def scale_shifts(x, axis: int, xp: ModuleType = np):
    """Power-of-two shifts that put each row (``axis=1``) or column (``axis=0``) of ``x`` in
    ``[2**14, 2**15)`` at its largest magnitude.

    Args:
        x: float32 matrix (any strides).
        axis: 1 for rows (the A operand), 0 for columns (B).

    Returns:
        int32 shifts, one per row (column): ``SCALE_EXP - floor(log2 max|x|)``, 0 for an all-zero
        row.

    Raises:
        NonFiniteError: NaN or Inf in ``x``.
    """
    if x.shape[axis] == 0:
        return xp.zeros(x.shape[1 - axis], dtype=xp.int32)
    mx = xp.abs(x).max(axis=axis)
    if not bool(xp.isfinite(mx).all()):
        raise NonFiniteError("GEMM operand has NaN or Inf entries")
    _, e = xp.frexp(mx)  # mx in [2**(e-1), 2**e)
    return xp.where(mx > 0, SCALE_EXP + 1 - e, 0).astype(xp.int32)


def split_fp16(x, shifts):
    """``hi = fp16(x 2**s)``, ``lo = fp16((x 2**s - hi) 2**10)`` (module docstring, step 2).

    Args:
        x: float32 array; shifts: int32 broadcastable to ``x`` (``(rows, 1)`` or ``(1, cols)``)
            from :func:`scale_shifts`.

    Returns:
        ``(hi, lo)``: float32 arrays holding FP16 values.
    """
    xp = array_namespace(x)
    xs = xp.ldexp(x, shifts).astype(xp.float32, copy=False)  # exact: a power of two
    hi = round_fp16(xs)
    return hi, round_fp16((xs - hi) * xp.float32(2.0**RESIDUAL_SHIFT))


def le_matmul(a_rows, b_cols, xp: ModuleType = np):
    """``[A_1; A_2; ...] @ [B_1, B_2, ...]`` by LE-GEMM with power-of-two scaling (module doc).

    Args:
        a_rows: float32 matrices with ``K`` columns, stacked by rows (any strides); each row
            gets its own scaling.
        b_cols: float32 matrices with ``K`` rows, stacked by columns; each column its own.
        xp: numpy or cupy.

    Returns:
        ``(M, N)`` float32.

    Raises:
        NonFiniteError: NaN or Inf in an operand (found while scaling, always).
    """
    sa = xp.concatenate([scale_shifts(x, 1, xp) for x in a_rows])
    sb = xp.concatenate([scale_shifts(x, 0, xp) for x in b_cols])
    if xp is not np:  # pragma: no cover - GPU
        from . import cuda

        return cuda.le_matmul(a_rows, b_cols, sa, sb)
    k = a_rows[0].shape[1]
    a2 = np.empty((sa.size, 2 * k), dtype=np.float32)
    b2 = np.empty((2 * k, sb.size), dtype=np.float32)
    r0 = 0
    for x in a_rows:
        r1 = r0 + x.shape[0]
        a2[r0:r1, :k], a2[r0:r1, k:] = split_fp16(x, sa[r0:r1, None])
        r0 = r1
    c0 = 0
    for x in b_cols:
        c1 = c0 + x.shape[1]
        b2[k:, c0:c1], b2[:k, c0:c1] = split_fp16(x, sb[None, c0:c1])
        c0 = c1
    c1 = a2[:, :k] @ b2[k:]  # Ahi Bhi
    c2 = a2 @ b2  # Ahi Blo + Alo Bhi, over 2K
    c2 *= np.float32(2.0**-RESIDUAL_SHIFT)
    c1 += c2
    return np.ldexp(c1, -(sa[:, None] + sb[None, :])).astype(np.float32, copy=False)
