"""Ozaki scheme II's constants: the moduli, the CRT constants and the bit budgets.

One module that the CPU scheme (:mod:`ozsim.gemm.ozaki2.scheme`) and the GPU kernels
(:mod:`ozsim.gemm.ozaki2.cuda`) both import, so neither imports the other. The derivations of
every constant are in :mod:`ozsim.gemm.ozaki2.scheme` (steps 2-5 of its docstring).

References:
    [Ozaki2] K. Ozaki, Y. Uchino, T. Imamura, arXiv:2504.08009 (2025).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

#: Pairwise coprime moduli, largest first (module docstring); ``int8-crt{N}`` uses the first N.
MODULI = (256, 255, 253, 251, 247, 241, 239, 233, 229, 227,
          223, 217, 211, 199, 197, 193, 191, 181, 179, 173)
MIN_MODULI = 2
MAX_MODULI = len(MODULI)
#: Largest inner dimension: ``k * 128**2 < 2**31`` keeps every INT8 product exact in INT32.
MAX_K = 2**17 - 1
#: Bits per digit of the CRT constants (``20 * 255 * 2**40 < 2**53``: exact FP64 limb sums).
LIMB_BITS = 40
#: Bits per exact piece of a scaled integer (``sym_mod`` needs ``|x| <= 2**52``).
PIECE_BITS = 52
#: Fraction bits of the rounded-up magnitudes in the norm bound (``2k * 4**13 <= 2**53``).
NORM_FRAC_BITS = 13
#: ``2**f <= NORM_OVERSHOOT * ||row||_2`` for every norm exponent ``f`` (``k <= MAX_K``; the
#: bound of step 1 of :mod:`ozsim.gemm.ozaki2.scheme`).
NORM_OVERSHOOT = 2.25


def _check_moduli() -> None:
    for i, p in enumerate(MODULI):
        assert 2 <= p <= 256
        for q in MODULI[:i]:
            assert math.gcd(p, q) == 1, (p, q)


_check_moduli()


@dataclass(frozen=True)
class CRTConstants:
    """The constants of ``N`` moduli (exact integers and their FP64 digits).

    Attributes:
        moduli: ``p_1 .. p_N``.
        P: their product (Python int).
        gamma: :func:`kept_bits` (``2**(gamma + 1) < P``).
        weights: ``q_p = (P/p)**-1 mod p`` per modulus.
        inv_p: ``(N,)`` float64, ``fl(1/p)``.
        limbs_M: ``(N, L)`` float64: base-``2**40`` digits of ``P/p``, lowest first.
        limbs_P: ``(L,)`` float64: digits of ``P``.
        hi, lo: ``(p - 1) // 2`` and ``-(p // 2)``: the symmetric residue range, per modulus.
    """

    moduli: tuple[int, ...]
    P: int
    gamma: int
    weights: tuple[int, ...]
    inv_p: np.ndarray
    limbs_M: np.ndarray
    limbs_P: np.ndarray

    @property
    def num_limbs(self) -> int:
        return self.limbs_P.size


def _digits(x: int, count: int) -> list[float]:
    mask = (1 << LIMB_BITS) - 1
    return [float((x >> (LIMB_BITS * c)) & mask) for c in range(count)]


@functools.cache
def crt_constants(num_moduli: int) -> CRTConstants:
    """:class:`CRTConstants` of the first ``num_moduli`` entries of :data:`MODULI`.

    Raises:
        ValueError: ``num_moduli`` outside 2..20.
    """
    if not MIN_MODULI <= num_moduli <= MAX_MODULI:
        raise ValueError(f"the number of moduli must be in {MIN_MODULI}..{MAX_MODULI}, "
                         f"got {num_moduli}")
    mods = MODULI[:num_moduli]
    P = math.prod(mods)
    L = -(-P.bit_length() // LIMB_BITS)
    weights = tuple(pow(P // p, -1, p) for p in mods)
    return CRTConstants(
        moduli=mods,
        P=P,
        gamma=P.bit_length() - 2,
        weights=weights,
        inv_p=np.array([1.0 / p for p in mods]),
        limbs_M=np.array([_digits(P // p, L) for p in mods]),
        limbs_P=np.array(_digits(P, L)),
    )


#: The offset a residue ``u`` in ``[0, p)`` carries where a GPU kernel makes the FP64 operand
#: ``OFFSET + u`` from its bits instead of converting it (``kernels/crt_gate.cuh``,
#: ``residue_double``; ``kernels/finish.cu``): ``2**8 (1 + u 2**-8)``.
RESIDUE_OFFSET = 256


@functools.cache
def offset_sum_start(num_moduli: int) -> np.ndarray:
    """Starting values of the CRT sums (:class:`ozsim.gemm.ozaki2.scheme._CRTAccumulator`)
    that take the :data:`RESIDUE_OFFSET` of every residue back out.

    Returns:
        ``(1 + L,)`` float64: ``-OFFSET sum_p fl(1/p)`` (rounded: only ``rint`` of the
        quotient estimate is used, and the estimate moves by a few units of ``2**-48``
        against the margin ``2**-41``), then for each base-``2**40`` digit ``c``
        ``-OFFSET sum_p digit_c(P/p)``: exact integers, and every partial sum
        ``start_c + sum (OFFSET + u) digit_c`` stays below ``2**53`` for up to 20 moduli
        (``20 * 2**8 * 2**40`` and ``20 * 255 * 2**40`` are).
    """
    const = crt_constants(num_moduli)
    digits = [-RESIDUE_OFFSET * sum(int(x) for x in col) for col in const.limbs_M.T]
    assert all(abs(x) < 2**53 for x in digits)
    return np.array([-RESIDUE_OFFSET * float(np.sum(const.inv_p))]
                    + [float(x) for x in digits])


@functools.cache
def quotient_weights(num_moduli: int) -> np.ndarray:
    """``(L,)`` float64: ``fl(2**(40 c) / P)``, correctly rounded, for the CRT quotient from the
    digit sums: ``rint(sum_c limb_c fl(2**(40 c) / P))`` (``kernels/crt_gate.cuh``,
    ``crt_finish``). The digit sums make ``X = sum_p u_p P/p < N P``, so the estimate of ``X / P
    < N <= 20`` is within ``(L + 2) 2**-53 * 32 < 2**-45`` of it, inside the margin ``2**-41``
    that ``|C'| < (P/2)(1 - 2**-40)`` leaves."""
    const = crt_constants(num_moduli)
    return np.array([float(Fraction(1 << (LIMB_BITS * c), const.P))
                     for c in range(const.num_limbs)])


def symmetric_powers(moduli, bits: int, count: int) -> np.ndarray:
    """``2**(bits i) mod p`` reduced to ``[-(p // 2), (p - 1) // 2]`` for ``i < count``.

    The weights with which a GPU kernel makes a scalar's residues from its pieces: 12-bit pieces
    in FP32 (``kernels/crt_gate.cuh``, ``residue_magic``) or its 8 balanced bytes in INT8 tensor
    core products (``kernels/crt_gate_mma.cu``, TC_SPLIT, :func:`byte_weight_words`).

    Returns:
        ``(len(moduli), count)`` int64, each in ``[-128, 127]`` for ``p <= 256``.
    """
    return np.array([[((1 << (bits * i)) % p + p // 2) % p - p // 2 for i in range(count)]
                     for p in moduli], dtype=np.int64).reshape(len(moduli), count)


def byte_weight_words(moduli) -> np.ndarray:
    """``(32,)`` uint32: for rows 0..15 (the first 16 moduli; zeros past the last) the INT8
    weights of a scalar's bytes ``i = 0..7`` (:func:`symmetric_powers` with 8 bits) as two
    little-endian words, bytes 0..3 then 4..7: the constant A operand of the residue products
    of ``kernels/crt_gate_mma.cu`` (TC_SPLIT), which give ``sum_i b_i w_i = v (mod p)``, ``|.| <=
    8 * 128**2``, for the balanced bytes ``b_i`` of an integer ``v``."""
    w = np.zeros((16, 8), dtype=np.int8)
    w[: min(16, len(moduli))] = symmetric_powers(tuple(moduli)[:16], 8, 8)
    return w.view(np.uint32).reshape(-1)


@functools.cache
def digit_units(num_moduli: int) -> tuple[tuple[tuple[int, int], ...], np.ndarray]:
    """The CRT digit sums as sums of byte products, for the INT8 tensor cores
    (``kernels/finish_tc.cu``, ``crt_finish_tc``).

    Each base-``2**40`` digit ``c`` of ``P/p`` (``CRTConstants.limbs_M``) is split into bytes
    ``b_(c,a)``, and ``sum_p u_p digit_c(P/p) = sum_a S_(c,a) 2**(8 a)`` with ``S_(c,a) = sum_p u_p
    b_(c,a)(p) <= N * 255 * 255``, a UINT8 x UINT8 -> INT32 product over the moduli. A *unit*
    pairs the bytes ``a``, ``a + 1`` of one digit (the last byte of a digit alone) as ``S_a +
    256 S_(a+1) < 2**29``; the digit's sum is ``sum_units unit << (8 a)``, exact.

    Returns:
        ``(units, bytes)``: ``units`` a tuple of ``(digit c, bit shift 8 a)``, one per unit
        (only the bytes that are non-zero for some modulus, so a digit's top units may be
        absent); ``bytes`` ``(len(units), 2, num_moduli)`` uint8, the bytes ``a`` and ``a + 1``
        (0 where absent) of ``digit_c(P/p)`` per modulus.

    Raises:
        ValueError: ``num_moduli`` outside 2..20 (:func:`crt_constants`).

    Source: the limb sums ``sum_p u_p (P/p)_c`` of the CRT reconstruction
    (:mod:`ozsim.gemm.ozaki2.scheme`, step 5; [Ozaki2]), regrouped by bytes so that INT8
    products make them (ozsim's construction).
    """
    const = crt_constants(num_moduli)
    big = [[int(x) for x in row] for row in const.limbs_M]
    units, table = [], []
    for c in range(const.num_limbs):
        nbytes = -(-max(row[c] for row in big).bit_length() // 8)
        for a in range(0, nbytes, 2):
            units.append((c, 8 * a))
            table.append([[(row[c] >> (8 * b)) & 0xFF if b < nbytes else 0 for row in big]
                          for b in (a, a + 1)])
    return tuple(units), np.array(table, dtype=np.uint8).reshape(len(units), 2, num_moduli)


def digit_unit_fragments(num_moduli: int) -> np.ndarray:
    """The B operand of ``crt_finish_tc``'s ``mma.m16n8k16.u8.u8`` (``kernels/finish_tc.cu``):
    the bytes of :func:`digit_units` as ``NT = ceil(units / 4)`` n-tiles of 16 x 8 (rows: the
    moduli, zero past the last; unit ``k``: columns ``2 (k % 4)`` and ``2 (k % 4) + 1`` of
    n-tile ``k // 4``, its bytes ``a`` and ``a + 1``), in each lane's fragment layout: lane ``(g,
    t) = (lane // 4, lane % 4)`` holds rows ``4 t .. 4 t + 3`` of column ``g``, row ``4 t + q``
    in byte ``q`` (PTX ISA, "Matrix Fragments for mma.m16n8k16" with 8-bit types).

    Returns:
        ``(NT, 32)`` uint32.

    Raises:
        ValueError: more than 16 moduli (one k16 step) or outside 2..20.
    """
    if num_moduli > 16:
        raise ValueError(f"the tensor-core digit sums take at most 16 moduli, got {num_moduli}")
    units, table = digit_units(num_moduli)
    nt = -(-len(units) // 4)
    b = np.zeros((nt, 16, 8), dtype=np.uint32)  # [n-tile][modulus][column]
    for k in range(len(units)):
        b[k // 4, :num_moduli, 2 * (k % 4)] = table[k, 0]
        b[k // 4, :num_moduli, 2 * (k % 4) + 1] = table[k, 1]
    lane = np.arange(32)
    g, t = lane >> 2, lane & 3
    words = np.zeros((nt, 32), dtype=np.uint32)
    for q in range(4):
        words |= b[:, 4 * t + q, g] << np.uint32(8 * q)
    return words


@functools.cache
def _kept_bits_table() -> tuple[tuple[int, int], ...]:
    """``((N, gamma(N)), ...)`` for ``N = MIN_MODULI .. MAX_MODULI``."""
    return tuple((n, kept_bits(n)) for n in range(MIN_MODULI, MAX_MODULI + 1))


def kept_bits(num_moduli: int) -> int:
    """``gamma(N)``: the bits ``gA + gB`` that ``N`` moduli allow (``2**(gamma + 1) < P``)."""
    return crt_constants(num_moduli).gamma


#: Bound on the rounding moves of a row, ``sqrt(2 k) / 2 <= 2**8`` for ``k <= MAX_K``.
_ROUNDING_SLACK = 2**8


@functools.cache
def rounds_to_nearest(num_moduli: int, bits_a: int, bits_b: int) -> bool:
    """Whether the scaled integers may be rounded to nearest (else truncated): step 2 of the
    module docstring, ``2 (2**gA + 2**8)(2**gB + 2**8) < P (1 - 2**-40)`` in exact integers.

    True for every plan with ``min(gA, gB) >= 15`` (all of ``int8-crt{N}``, N >= 4).
    """
    P = crt_constants(num_moduli).P
    lhs = 2 * ((1 << bits_a) + _ROUNDING_SLACK) * ((1 << bits_b) + _ROUNDING_SLACK) << 40
    return lhs < P * ((1 << 40) - 1)


def split_offsets(moduli) -> np.ndarray:
    """``(N,)`` float32: ``mod_soff`` of ``kernels/crt_gate.cuh`` (``residue_byte``, the one-pass
    kernel's residues of B's byte products): per modulus ``1.5 * 2**23 - OFF - (p - 1) // 2``,
    ``OFF`` the least multiple of ``256 p`` at or above ``2**17`` (integers below ``2**24``:
    exact)."""
    out = []
    for p in moduli:
        step = 256 * int(p)
        out.append((3 << 22) - step * -(-(1 << 17) // step) - (int(p) - 1) // 2)
    return np.array(out, dtype=np.float32)
