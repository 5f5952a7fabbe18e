"""What one GEMM did: :class:`GemmInfo`, returned by every backend (no dependencies)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["GemmInfo"]


@dataclass(frozen=True)
class GemmInfo:
    """What one emulated GEMM did.

    Attributes:
        backend: the backend asked for.
        num_splits: slices used (``None`` for native ZGEMM).
        bits_per_slice: ``b`` (``None`` for native ZGEMM).
        mean_loss_a, mean_loss_b: mean mantissa loss in bits over the nonzero scalars of each
            operand at ``num_splits`` (``None`` where not computed: native, fixed ``s``, scheme
            II).
        fallback: INT8-AUTO found no ``s <= 18`` within ``T`` (``int8-crt-auto``: no ``N <= 20``)
            and ran native ZGEMM.
        num_moduli: Ozaki scheme II: moduli used (``None`` for the other backends).
        kept_bits: scheme II: ``(gA, gB)``, the bits a row of A / a column of B keeps below its
            scaling point (see :mod:`ozsim.gemm.ozaki2`).
        bound_bits: ``int8-crt-auto``: ``log2`` of scheme II's error bound over an FP64 GEMM's
            for this product, ``<= T`` (negative: a margin; :func:`ozsim.gemm.ozaki2.choose_plan`).
        correctly_rounded: each real and imaginary part of the result is the correctly rounded
            exact product (the ``*-cr`` backends, :mod:`ozsim.gemm.exact`); ``num_splits`` is
            then the larger of A's and B's slice counts.
        error_bound: ``E`` with ``||C_hat - A B||_F <= E ||B||_F``, a priori
            (:mod:`ozsim.gemm.bounds`).
    """

    backend: str
    num_splits: int | None
    bits_per_slice: int | None = None
    mean_loss_a: float | None = None
    mean_loss_b: float | None = None
    fallback: bool = False
    num_moduli: int | None = None
    kept_bits: tuple[int, int] | None = None
    bound_bits: float | None = None
    correctly_rounded: bool = False
    error_bound: float | None = field(default=None, compare=False)  # (a float sum: not part
    # of what makes two GEMMs the same; CPU and GPU may sum the gate's norm in other orders)
