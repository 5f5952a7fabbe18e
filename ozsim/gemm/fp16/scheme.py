"""The Ozaki scheme over FP16 slices with FP32 accumulation (DGEMM-TC), written once against an
array namespace.

References:
    [DGEMM-TC] D. Mukunoki, K. Ozaki, T. Ogita, T. Imamura, "DGEMM using Tensor Cores, and Its
        Accurate and Reproducible Versions", ISC High Performance 2020, LNCS 12151, pp. 230-248:
        Sec. 3 (Alg. 1: the split with ``rho`` from ``k``; Alg. 2: the slice products on
        Tensor Cores summed in FP64; Alg. 3: the number of splits for DGEMM-equivalent accuracy),
        Sec. 4 (the correctly rounded and reproducible versions).
    [ozIMMU] H. Ootomo, K. Ozaki, R. Yokota, IJHPCA 2024: the shared-exponent split that
        :mod:`ozsim.gemm.ozaki1` implements and this scheme reuses.

The algorithm is scheme I's (:mod:`ozsim.gemm.ozaki1.scheme`, steps 1-4) with a different slice
width and a different product unit:

1. *Scaling*: one power of two per row of ``A`` / column of ``B`` (real and imaginary parts
   together), :func:`~ozsim.gemm.ozaki1.row_exponents`.
2. *Splitting*: :func:`~ozsim.gemm.ozaki1.split_rows` with ``b`` = :func:`bits_per_slice` bits a
   slice: each slice is an integer ``|q| <= 2**b - 1 <= 2047`` times a power of two, so it is an
   FP16 value exactly (11 significant bits, no exponent-range issue: the power of two is kept
   aside as in [ozIMMU]).
3. *Products*: ``b = min(11, floor((24 - ceil(log2 k)) / 2))`` ([DGEMM-TC] Alg. 1 takes
   ``rho = ceil((log2(u_32^-1) + log2 k) / 2)`` bits off FP32's 24 for the same purpose), so
   every length-``k`` dot product of two slices sums products ``|q q'| <= (2**b - 1)**2`` into
   partial sums that are integers below ``k (2**b - 1)**2 < 2**24``: exact in FP32 in any order.
   On the GPU each pair ``A_i B_j`` is one ``cublasGemmEx`` with FP16 inputs, FP32 output and
   ``CUBLAS_COMPUTE_32F`` (Tensor Cores); the FP32 integers are added into the FP64 group sums
   ``P_t = sum_{i+j=t} A_i B_j`` exactly. On the CPU the groups are FP64 BLAS products of the
   slice values (integers below ``2**53``: exact), the same integers.
4. *Accumulation* in FP64 in a fixed order, scheme I's ``_accumulate`` (``t = s+1`` down to 2).

Because every product is exact and the FP64 sum has one fixed order, ``fp16x{s}`` is bitwise
reproducible: the same bits for any BLAS, thread count, column blocking, and on CPU and GPU.

The number of splits (``fp16-auto``). [DGEMM-TC]'s DGEMM-equivalent mode (Alg. 3) keeps
splitting until what is left of the input elements lies below FP64's rounding level, so that the
slices carry each element to FP64 accuracy; its cost therefore grows with the range of the
magnitudes within a row (the paper's Sec. 5 measures it against that range). ozsim states this
elementwise: the mantissa loss of a nonzero real scalar ``x``, ``d`` bits below its row's scaling
point (scheme I's :func:`~ozsim.gemm.ozaki1.loss_histogram`), is
``max(0, d + 1 + 53 - s b)`` bits, and ``fp16-auto`` takes the fewest ``s`` in 3..24 whose
*largest* loss over the nonzero scalars of each operand is ``<= T`` (zeros lose nothing). At
``T = 0`` every input scalar is represented exactly by its slices, so the only errors are the
dropped products ``i + j > s + 1`` (below ``2**(-s b)`` of the row and column scales) and the
FP64 accumulation: no worse than an FP64 GEMM's rounding. ``T > 0`` allows each scalar to lose
up to ``T`` low bits. When no ``s <= 24`` qualifies the GEMM runs native ZGEMM (a fallback, as
``int8-auto``'s). This is a max, not a mean: unlike INT8-AUTO's mean rule it cannot be satisfied
by a few well-represented scalars hiding badly cut ones.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from ..._array import array_namespace
from ..ozaki1.scheme import (
    SIGNIFICAND_BITS,
    PreparedOperand,
    _accumulate,
    _block_columns,
    analyse_rows,
    default_workspace_bytes,
    products_cpu,
    split_rows,
)

__all__ = [
    "FP16_MAX_SLICE",
    "MAX_SPLITS",
    "MIN_SPLITS",
    "bits_per_slice",
    "choose_num_splits",
    "fp16_zgemm",
    "max_loss",
    "prepared_fp16_slices",
]

MIN_SPLITS = 3
MAX_SPLITS = 24
#: Largest integer magnitude a slice takes (``2**11 - 1``): FP16 holds every integer up to 2048.
FP16_MAX_SLICE = 2**11 - 1
#: FP32's significand: the slice products' partial sums must stay below ``2**24``.
FP32_SIGNIFICAND_BITS = 24


def bits_per_slice(k: int) -> int:
    """Bits per FP16 slice, ``b = min(11, floor((24 - ceil(log2 k)) / 2))`` ([DGEMM-TC] Alg. 1).

    With this ``b`` each slice is an FP16 integer (``|q| <= 2**b - 1 <= 2047``) and every partial
    sum of a length-``k`` dot product of two slices is an integer below ``k (2**b - 1)**2 <
    2**24``, exact in FP32 accumulation whatever the order.

    Args:
        k: the inner dimension (>= 1).

    Returns:
        ``b`` in 1..11 (bits).

    Raises:
        ValueError: ``k < 1``, or ``k > 2**22`` (``b < 1``: no slice width is exact in FP32).
    """
    if k < 1:
        raise ValueError(f"inner dimension k must be >= 1, got {k}")
    b = min(11, (FP32_SIGNIFICAND_BITS - (int(k) - 1).bit_length()) // 2)
    if b < 1:
        raise ValueError(f"inner dimension k = {k} is too large for exact FP32 slice products "
                         "(at most 2**22)")
    return b


def max_loss(hist, num_splits: int, bits: int, significand_bits: int = SIGNIFICAND_BITS) -> float:
    """The largest mantissa loss in bits over the scalars counted by ``hist`` (module docstring).

    Args:
        hist: scheme I's loss histogram (:func:`~ozsim.gemm.ozaki1.loss_histogram`), NumPy or
            CuPy: entry ``d`` counts the nonzero scalars ``d`` bits below their row's scaling
            point.
        num_splits: ``s``.
        bits: ``b``.
        significand_bits: 53 (FP64 data).

    Returns:
        ``max(0, d_max + 1 + 53 - s b)`` for the largest counted ``d``; 0.0 when ``hist`` counts
        nothing.
    """
    h = np.asarray(hist.get() if hasattr(hist, "get") else hist)
    nz = np.flatnonzero(h)
    if nz.size == 0:
        return 0.0
    return float(max(0, int(nz[-1]) + 1 + significand_bits - num_splits * bits))


def choose_num_splits(hist_a, hist_b, bits: int, threshold: float) -> int | None:
    """``fp16-auto``: the fewest ``s`` in 3..24 whose largest mantissa loss is ``<= threshold``
    bits in both operands ([DGEMM-TC] Alg. 3 as the module docstring reads it).

    Args:
        hist_a, hist_b: loss histograms of A's rows and B's columns.
        bits: ``b`` (:func:`bits_per_slice`).
        threshold: ``T`` in bits (>= 0).

    Returns:
        ``s``, or ``None`` when no ``s <= 24`` qualifies (run native ZGEMM).
    """
    for s in range(MIN_SPLITS, MAX_SPLITS + 1):
        if max_loss(hist_a, s, bits) <= threshold and max_loss(hist_b, s, bits) <= threshold:
            return s
    return None


def prepared_fp16_slices(prep: PreparedOperand, num_splits: int, bits: int):
    """A's slices as FP16 for the GPU, ``(2 m, s, k)``, cached on the prepared operand."""
    key = ("fp16", num_splits, bits)
    sl = prep._splits.get(key)
    if sl is None:
        xp = array_namespace(prep.matrix)
        sl = prep._splits[key] = split_rows(prep.matrix, prep.exponents, num_splits, bits,
                                            dtype=xp.float16)
    return sl


def fp16_zgemm(a, b, num_splits: int, *, b_exponents=None, out=None,
               workspace_bytes: int | None = None, xp: ModuleType | None = None):
    """``C = A @ B`` for complex128 matrices by the Ozaki scheme over FP16 slices, ``s`` splits.

    Args:
        a: ``(m, k)`` complex128 (NumPy or CuPy) or a
            :class:`~ozsim.gemm.ozaki1.PreparedOperand` of one.
        b: ``(k, n)`` complex128, same library, any strides.
        num_splits: ``s`` in 3..24: ``s (s+1) / 2`` slice products (``i + j <= s + 1``), each
            four real FP16 GEMMs' worth.
        b_exponents: ``(n,)`` int32 column exponents of ``b`` if already computed.
        out: ``(m, n)`` complex128 to write into (must not overlap ``b``), or ``None``.
        workspace_bytes: bound on the slices of B held at once; B is split a block of columns
            at a time (the result does not depend on the blocking). ``None``:
            :func:`~ozsim.gemm.ozaki1.default_workspace_bytes`.
        xp: the array namespace (default: that of the operands).

    Returns:
        ``(m, n)`` complex128, bitwise the same on CPU and GPU.

    Raises:
        NonFiniteError: NaN or Inf in ``a`` or ``b``.
        ValueError: ``k > 2**22`` (:func:`bits_per_slice`).

    References:
        [DGEMM-TC] Alg. 1-2; the exactness argument is in the module docstring.
    """
    prep = a if isinstance(a, PreparedOperand) else PreparedOperand(a)
    xp = xp or array_namespace(prep.matrix, b)
    m, k = prep.shape
    n = b.shape[1]
    bits = bits_per_slice(k)
    if workspace_bytes is None:
        workspace_bytes = default_workspace_bytes(xp)
    nb = _block_columns(n, k, num_splits, workspace_bytes)
    if b_exponents is None and xp is not np:  # pragma: no cover - GPU: one analysis kernel
        from ..ozaki1.cuda import analyse

        b_exponents = analyse(b.T, histogram=False)[0]
    elif b_exponents is None:
        b_exponents = analyse_rows(b.T, nb, histogram=False)[0]
    if out is None:
        out = xp.empty((m, n), dtype=xp.complex128)
    if m == 0 or n == 0:
        return out
    if xp is not np:  # pragma: no cover - GPU: FP16 Tensor Core products (cublasGemmEx)
        from . import cuda as _cuda

        a_sl = prepared_fp16_slices(prep, num_splits, bits)
        for j0 in range(0, n, nb):
            j1 = min(n, j0 + nb)
            products = _cuda.group_products(a_sl, b[:, j0:j1], b_exponents[j0:j1], num_splits,
                                            bits)
            _accumulate(products, m, j1 - j0, bits, prep.exponents, b_exponents[j0:j1],
                        out[:, j0:j1], xp)
        return out
    return products_cpu(prep, b, b_exponents, num_splits, bits, nb, out)

