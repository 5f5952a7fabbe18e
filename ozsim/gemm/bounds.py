"""A-priori bounds on the error of one GEMM, norm-wise, for the accuracy guard.

Each bound ``E`` satisfies ``||C_hat - A B||_F <= E * ||B||_F`` (C_hat the computed product) and
is computed from the scheme's parameters, the inner dimension ``k`` and A alone (a gate): the
engine adds them over a circuit's gates to bound the norm-wise relative error of the final state
(for unitary gates errors add: ``||U(psi + e) - U psi|| = ||e||``). ``u = 2**-53``.

Native ZGEMM ([Higham] Sec. 3.1 and 3.6): each part of an output is a real dot product of
length ``2k``: ``|C_hat - C| <= gamma_{2k+2} |A| |B|`` elementwise, hence
``||C_hat - C||_F <= sqrt(2) gamma_{2k+2} ||A||_F ||B||_F``, ``gamma_n = n u / (1 - n u)``.

Ozaki scheme I ([Ozaki2012] Sec. 3; [ozIMMU] Sec. 3), ``s`` slices of ``b`` bits: row ``i`` of
A is scaled by ``2**eA_i`` (its largest real or imaginary part is below it), column ``j`` of B by
``2**eB_j <= 2 ||b_j||_2``, so every scaled value lies in (-1, 1). ``s`` slices leave a
remainder below ``2**(-s b)``, so a scaled real product loses at most ``2**(-s b) (1 + 2)`` to
the remainders of both operands (a sliced value is below 2) and at most ``1.01 s 2**(-s b)`` to
the dropped slice products ``i + j > s + 1`` (each slice below ``2**b``, at most ``s`` pairs a
weight, the weights a geometric series in ``2**-b``). A part of an output sums ``2k`` such
products, so it is off by at most ``2k (3 + 1.01 s) 2**(-s b)`` in scaled units; the FP64
accumulation of the exact group sums (smallest first, each below ``2k (t-1) 2**(-(t-2) b)``)
adds at most ``1.2 u 2k``. With ``delta = (3 + 1.01 s) 2**(-s b) + 1.2 u`` and
``S_A = sqrt(sum_i 4**eA_i)``: ``||C_hat - C||_F <= sqrt(2) 2k delta S_A 2 ||B||_F``.

Ozaki scheme II ([Ozaki2] Sec. 3-4): row ``i`` keeps ``gA`` bits below its norm exponent
``fA_i`` (``||a_i|| < 2**fA_i <= 2.25 ||a_i||``: the rounded-up squares of
:func:`~ozsim.gemm.ozaki2.norm_exponents` overshoot by at most ``sqrt(2k) 2**-13`` of the row
maximum, ``k <= 2**17``), a column ``gB`` below ``fB_j``; each scaled integer moves by at most
``r = 1/2`` (rounding) or ``1`` (truncation). The integer product is exact (CRT with
``|C'| < P/2``), so a part errs by at most ``r sqrt(2k) (2**gA + 2**gB) + 2k r**2`` in integer
units, ``2**(fA_i + fB_j - gA - gB)`` each, plus the final rounding within 2 ulps of
``|C'| < 2**(fA + fB)``: ``K = r sqrt(2k) (2**-gA + 2**-gB) + 2k r**2 2**-(gA + gB) + 2**-51``
and ``||C_hat - C||_F <= sqrt(2) K 2.25**2 ||A||_F ||B||_F`` (2.25: ``NORM_OVERSHOOT``).

The FP16 Ozaki scheme ([DGEMM-TC], :mod:`ozsim.gemm.fp16`) is scheme I with FP16 slices of
``b <= 11`` bits: the same bound with its ``b``. For ``b < 7`` the dropped products' geometric
series sums to ``1 / (1 - 2**-b)`` rather than ``1.01``; :func:`scheme1` takes the larger.

Correctly rounded backends (``*-cr``, :mod:`ozsim.gemm.exact`): each part of an output is the
exact value rounded once, ``|c_hat - c| <= u |c|``, so ``||C_hat - C||_F <= u ||A B||_F <=
u ||A||_F ||B||_F`` (outside the subnormal range, where a part may also err by ``2**-1075``).

``tests/test_bounds.py`` checks every bound against exact products on Ozaki's inputs.

References:
    [Higham] N. J. Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., SIAM 2002.
    [Ozaki2012] K. Ozaki, T. Ogita, S. Oishi, S. M. Rump, Numer. Algorithms 59 (2012).
    [ozIMMU] H. Ootomo, K. Ozaki, R. Yokota, IJHPCA 2024.
    [Ozaki2] K. Ozaki, Y. Uchino, T. Imamura, arXiv:2504.08009 (2025).
    [DGEMM-TC] D. Mukunoki, K. Ozaki, T. Ogita, T. Imamura, "DGEMM using Tensor Cores, and Its
        Accurate and Reproducible Versions", ISC High Performance 2020, LNCS 12151.
"""

from __future__ import annotations

import math

from .._array import array_namespace

__all__ = ["UNIT_ROUNDOFF", "frobenius", "native", "of", "row_scale", "scaling_error_factor",
           "scheme1", "scheme2"]

UNIT_ROUNDOFF = 2.0**-53


def frobenius(a) -> float:
    """``||a||_F`` of a NumPy or CuPy matrix, as a Python float (a host sync on the GPU)."""
    return float((abs(a) ** 2).sum()) ** 0.5


def native(k: int, a_fro: float, unit_roundoff: float = UNIT_ROUNDOFF) -> float:
    """Native ZGEMM: ``sqrt(2) gamma_{2k+2} ||A||_F`` (module docstring); with
    ``unit_roundoff = 2**-24`` the same for CGEMM (single precision)."""
    n = 2 * k + 2
    return math.sqrt(2) * n * unit_roundoff / (1 - n * unit_roundoff) * a_fro


def scheme1(k: int, num_splits: int, bits: int, a_scale: float) -> float:
    """Ozaki scheme I with ``s`` slices of ``b`` bits: ``2 sqrt(2) 2k delta S_A``
    (``a_scale`` = ``S_A``, :func:`row_scale`)."""
    s = num_splits
    geometric = max(1.01, 1.0 / (1.0 - 2.0**-bits))  # 1.01 for b >= 7 (INT8); FP16 b may be less
    delta = (3 + geometric * s) * 2.0 ** (-s * bits) + 1.2 * UNIT_ROUNDOFF
    return 2 * math.sqrt(2) * 2 * k * delta * a_scale


def row_scale(a) -> float:
    """``S_A = sqrt(sum_i 4**eA_i)``, ``eA_i`` the ozIMMU exponent of row ``i`` of ``a``."""
    xp = array_namespace(a)
    mx = xp.maximum(abs(a.real).max(axis=1), abs(a.imag).max(axis=1))
    e = xp.frexp(mx)[1]
    top = int(e.max())
    rest = float((4.0 ** (e - top).astype(xp.float64)).sum()) ** 0.5
    try:
        return math.ldexp(rest, top)
    except OverflowError:
        return math.inf


def scaling_error_factor(k: int, bits_a: int, bits_b: int, rounding: bool) -> float:
    """``K = r sqrt(2k) (2**-gA + 2**-gB) + 2k r**2 2**-(gA + gB)`` (``r`` = 1/2 rounding to
    nearest, else 1): a part of ``c_ij`` errs by at most ``K 2**(fA_i + fB_j)`` from scheme II's
    scaling (the module docstring; :mod:`ozsim.gemm.ozaki2.scheme`, "The number of moduli")."""
    r = 0.5 if rounding else 1.0
    return (r * math.sqrt(2 * k) * (2.0**-bits_a + 2.0**-bits_b)
            + 2 * k * r * r * 2.0 ** -(bits_a + bits_b))


def scheme2(k: int, bits_a: int, bits_b: int, rounding: bool, a_fro: float) -> float:
    """Ozaki scheme II keeping ``gA``, ``gB`` bits: ``sqrt(2) K 2.25**2 ||A||_F``, ``K`` the
    :func:`scaling_error_factor` plus the final rounding."""
    from .ozaki2.moduli import NORM_OVERSHOOT

    K = scaling_error_factor(k, bits_a, bits_b, rounding) + 2.0**-51
    return math.sqrt(2) * K * NORM_OVERSHOOT**2 * a_fro


def of(info, a) -> float:
    """The bound of the GEMM that ``info`` (a :class:`~ozsim.gemm.GemmInfo`) describes, for the
    ``(m, k)`` matrix ``a`` (NumPy or CuPy; a host sync on the GPU): scheme I with its splits,
    scheme II with its kept bits, a correctly rounded result ``u ||A||_F``, else native
    (fallbacks included)."""
    from .ozaki1.scheme import bits_per_slice
    from .ozaki2.moduli import rounds_to_nearest

    k = int(a.shape[1])
    if getattr(info, "correctly_rounded", False):
        return UNIT_ROUNDOFF * frobenius(a)
    if info.num_moduli is not None and info.kept_bits is not None:
        ga, gb = info.kept_bits
        return scheme2(k, ga, gb, rounds_to_nearest(info.num_moduli, ga, gb), frobenius(a))
    if info.num_splits is not None:
        return scheme1(k, info.num_splits, info.bits_per_slice or bits_per_slice(k), row_scale(a))
    return native(k, frobenius(a))
