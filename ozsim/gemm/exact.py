"""Correctly rounded GEMMs, ``int8-cr`` and ``fp16-cr``: split until nothing is left, add every
slice product exactly, round once.

References:
    [DGEMM-TC] D. Mukunoki, K. Ozaki, T. Ogita, T. Imamura, "DGEMM using Tensor Cores, and Its
        Accurate and Reproducible Versions", ISC High Performance 2020, LNCS 12151: Sec. 3-4,
        the correctly rounded mode (split until the remainder is zero, all ``d_A d_B`` slice
        products, one correctly rounded sum; the paper uses NearSum, ozsim an exact integer
        accumulator).
    [ozIMMU] H. Ootomo, K. Ozaki, R. Yokota, IJHPCA 2024: the INT8 slices
        (:mod:`ozsim.gemm.ozaki1`).
    [BM2008] S. Boldo, G. Melquiond, "Emulation of FMA and correctly rounded sums: proved
        algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008: Theorem 1 (a real
        rounded to odd at precision ``p + k``, ``k >= 2``, then to nearest at precision ``p``,
        gives the real rounded to nearest at ``p``).

The algorithm, for ``C = A @ B`` with ``A`` (m, k), ``B`` (k, n) complex128, slices of ``b`` bits
(INT8: :func:`ozsim.gemm.ozaki1.bits_per_slice`; FP16: :func:`ozsim.gemm.fp16.bits_per_slice`):

1. *Scaling and slice counts* (:func:`exact_num_splits`). Each row of A (column of B) gets scheme
   I's exponent ``e`` (its largest real or imaginary part is below ``2**e``). A nonzero scalar
   ``x`` is a multiple of ``2**lsb(x)`` (its lowest set bit), and after ``s`` slices of the split
   (:func:`~ozsim.gemm.ozaki1.split_rows`, rounding to nearest) the remainder, in units of
   ``2**e``, is a multiple of ``2**(lsb - e)`` below ``2**(-s b)`` in magnitude: zero as soon as
   ``s b >= e - lsb``. So ``s_A = ceil(max (e_i - lsb(a_il)) / b)`` over A's nonzero scalars (at
   least 1), and likewise ``s_B``: the slices represent every element *exactly*, whatever its
   exponent (subnormals included); there is no upper limit.
2. *Products*: all ``s_A s_B`` pairs ``A_i B_j`` (0-based), exact integer GEMMs (INT8 -> INT32
   or FP16 -> FP32 on the GPU; FP64 BLAS on the slice values on the CPU, whose partial sums are
   integers below ``2**53``). Pairs of equal level ``t = i + j`` share the weight
   ``2**(-(t+2) b)``; the level sums of the complex parts, ``Re L_t = sum ArBr - AiBi`` and
   ``Im L_t = sum ArBi + AiBr``, are integers below ``2 min(s_A, s_B) 2**31 < 2**46``: exact in
   INT64 (and in FP64).
3. *Exact sum* (:class:`ExactSum`). ``c_ij = 2**(eA_i + eB_j - (T+1) b) N_ij`` with ``T =
   s_A + s_B - 1`` levels and the integer ``N = sum_t L_t 2**((T-1-t) b)``. Each ``L_t`` is
   added, shifted by ``r < 7`` bits, into one of the INT64 *digit slots* of base ``2**7``
   (``N = sum_q D_q 2**(7q)``); every add is exact, so the slots hold the same integers in any
   order: on any device, for any blocking.
4. *One rounding* (:func:`round_exact`). A carry pass finds the sign of ``N``; a second one,
   on ``|N|``, normalises the slots into digits ``0 <= d_q < 2**7``. The nine digits from the
   leading nonzero one form an integer ``h`` of 57 to 63 bits; the digits below it are folded
   into ``h``'s lowest bit (a sticky bit: ``h`` is ``|N|`` rounded to odd at ``h``'s precision,
   at least 57 bits). ``h`` is then rounded to nearest, ties to even, in integer arithmetic, to
   53 significant bits or to the subnormal grid ``2**-1074``, whichever is coarser (at least 4
   bits dropped), and ``ldexp`` places it exactly. By [BM2008] Theorem 1 (rounding to odd at
   ``>= p + 2`` bits, then to nearest at ``p``) this is ``|N| 2**E`` rounded to nearest: the
   correctly rounded result, subnormal results included; zero is ``+0.0``, an underflow keeps
   the sign, an overflow gives ``inf``.

Every step is exact integer or exactly-rounded arithmetic written once against ``xp``: the
results are bitwise the same on CPU and GPU, for any thread count, column blocking
(``workspace_bytes``) or level order. The cost is ``s_A s_B`` slice products (about
``((53 + range) / b)**2``, ``range`` the exponent spread of a row or column in bits) plus
about ``2 T b / 7`` passes over the digit slots.
"""

from __future__ import annotations

from types import ModuleType

import numpy as np

from .._array import array_namespace
from .fp16.scheme import bits_per_slice as fp16_bits_per_slice
from .info import GemmInfo
from .ozaki1.scheme import (
    PreparedOperand,
    analyse_rows,
    default_workspace_bytes,
    split_columns,
    split_rows,
)
from .ozaki1.scheme import bits_per_slice as int8_bits_per_slice

__all__ = ["DIGIT_BITS", "FAMILIES", "ExactSum", "cr_zgemm", "exact_num_splits", "prepare",
           "round_exact", "run"]

#: Bits per digit slot of :class:`ExactSum`.
DIGIT_BITS = 7
#: Digits in the rounded head (``9 * 7 = 63`` bits: an unsigned 64-bit integer holds it).
_HEAD_DIGITS = 9
#: Slots above the top level's: ``|N| < 2**(p_0 + 47)`` (levels below ``2**46``), covered with
#: room to spare, so the top carry is only the sign.
_EXTRA_DIGITS = 11
_SIGNIFICAND = 53
_MIN_EXPONENT = -1074  # the subnormal grid of float64
#: The slice width rule of each family: ``b`` from ``k``.
FAMILIES = {"int8": int8_bits_per_slice, "fp16": fp16_bits_per_slice}


def exact_num_splits(x, exps, bits: int, xp: ModuleType | None = None) -> int:
    """The fewest slices that represent every element of every row of ``x`` exactly (module
    docstring, step 1): ``max(1, ceil(max (e_row - lsb(x)) / b))`` over nonzero real scalars.

    Args:
        x: ``(rows, k)`` complex128 (NumPy or CuPy, any strides): A, or ``B.T`` for B's columns.
        exps: ``(rows,)`` int32 scaling exponents (:func:`~ozsim.gemm.ozaki1.row_exponents`).
        bits: ``b``, bits per slice.
        xp: the array namespace (default: ``x``'s).

    Returns:
        ``s`` (>= 1); no upper limit (up to ``ceil(2151 / b)`` for data spanning FP64's range).
    """
    xp = xp or array_namespace(x)
    rows, k = x.shape
    need = 0
    block = max(1, (1 << 20) // max(k, 1))
    for r0 in range(0, rows, block):
        e_row = exps[r0 : r0 + block, None].astype(xp.int64)
        for part in (x.real[r0 : r0 + block], x.imag[r0 : r0 + block]):
            mant, e = xp.frexp(part)
            sig = xp.ldexp(mant, _SIGNIFICAND).astype(xp.int64)  # exact: |sig| < 2**53
            low = sig & -sig  # the lowest set bit of the significand (0 for a zero)
            tz = xp.frexp(low.astype(xp.float64))[1].astype(xp.int64) - 1
            d = xp.where(sig != 0, e_row - (e.astype(xp.int64) - _SIGNIFICAND + tz), 0)
            if d.size:
                need = max(need, int(d.max()))
    return max(1, -(-need // bits))


class ExactSum:
    """The exact value of ``sum_t L_t 2**(-(t+2) b)`` for integer level arrays, in INT64 digit
    slots of base ``2**7`` (module docstring, step 3), written against ``xp``.

    Args:
        m, n: the output's shape.
        num_levels: ``T`` (levels ``t = 0 .. T-1``).
        bits: ``b``, the level spacing in bits.
        xp: the array namespace.

    Attributes:
        slots: ``(num_digits, 2, m, n)`` int64: the real (``[:, 0]``) and imaginary parts.
    """

    def __init__(self, m: int, n: int, num_levels: int, bits: int, xp: ModuleType = np):
        self.m, self.n, self.bits, self.xp = m, n, bits, xp
        self.num_levels = num_levels
        top = (num_levels - 1) * bits
        self.num_digits = top // DIGIT_BITS + 1 + _EXTRA_DIGITS
        self.slots = xp.zeros((self.num_digits, 2, m, n), dtype=xp.int64)

    def add(self, t: int, re, im) -> None:
        """Add level ``t``: ``re``, ``im`` ``(m, n)`` integers (any dtype holding them exactly,
        ``|L| < 2**46``)."""
        p = (self.num_levels - 1 - t) * self.bits
        q, r = divmod(p, DIGIT_BITS)
        xp = self.xp
        self.slots[q, 0] += xp.left_shift(re.astype(xp.int64), r)
        self.slots[q, 1] += xp.left_shift(im.astype(xp.int64), r)

    def result(self, eA, eB, out=None):
        """The correctly rounded complex128 ``2**(eA_i + eB_j) sum_t L_t 2**(-(t+2) b)``.

        Args:
            eA: ``(m,)`` int32 row exponents; eB: ``(n,)`` int32 column exponents.
            out: ``(m, n)`` complex128 to write into, or ``None``.

        Returns:
            ``(m, n)`` complex128.
        """
        xp = self.xp
        base = (eA[:, None].astype(xp.int64) + eB[None, :].astype(xp.int64)
                - (self.num_levels + 1) * self.bits)
        base = xp.broadcast_to(base[None], (2, self.m, self.n)).reshape(-1)
        vals = round_exact(self.slots.reshape(self.num_digits, -1), base, xp)
        vals = vals.reshape(2, self.m, self.n)
        if out is None:
            out = xp.empty((self.m, self.n), dtype=xp.complex128)
        out.real[...] = vals[0]
        out.imag[...] = vals[1]
        return out


_BITLEN = np.array([int(v).bit_length() for v in range(1 << DIGIT_BITS)], dtype=np.int64)


def round_exact(slots, base_exp, xp: ModuleType = np):
    """The correctly rounded float64 of ``N 2**base_exp``, ``N = sum_q slots[q] 2**(7q)``
    (module docstring, step 4; [BM2008] Theorem 1 for the rounding to odd).

    Args:
        slots: ``(D, M)`` int64 digit slots (any signs; ``|slot| < 2**56``, ``|N| < 2**(7D - 8)``).
        base_exp: ``(M,)`` int64, the exponent of ``N``'s unit.
        xp: the array namespace.

    Returns:
        ``(M,)`` float64: ``N 2**base_exp`` rounded to nearest, ties to even (``+0.0`` for
        ``N = 0``; ``-0.0`` for a negative value below half the smallest subnormal; ``inf`` on
        overflow).
    """
    num_digits, size = slots.shape
    g = DIGIT_BITS
    mask = (1 << g) - 1
    carry = xp.zeros(size, dtype=xp.int64)
    for q in range(num_digits):  # pass 1: the sign (the top carry is 0 or -1)
        carry = xp.right_shift(slots[q] + carry, g)
    neg = carry < 0
    sign = xp.where(neg, -1, 1).astype(xp.int64)
    digits = xp.empty((num_digits, size), dtype=xp.int64)
    carry = xp.zeros(size, dtype=xp.int64)
    for q in range(num_digits):  # pass 2: the digits of |N|, each in [0, 2**7)
        v = slots[q] * sign + carry
        digits[q] = xp.bitwise_and(v, mask)
        carry = xp.right_shift(v, g)
    nonzero = digits != 0
    zero = ~nonzero.any(axis=0)
    lead = (num_digits - 1) - xp.argmax(nonzero[::-1], axis=0)  # the leading nonzero digit
    h = _HEAD_DIGITS - 1
    padded = xp.concatenate([xp.zeros((h, size), dtype=xp.int64), digits])  # digit q at q + h
    head = xp.zeros(size, dtype=xp.uint64)
    for u in range(_HEAD_DIGITS):
        d = xp.take_along_axis(padded, (lead + (h - u))[None, :], axis=0)[0]
        head = xp.bitwise_or(xp.left_shift(head, xp.uint64(g)), d.astype(xp.uint64))
    counts = xp.concatenate([xp.zeros((1, size), dtype=xp.int64),
                             xp.cumsum(nonzero, axis=0, dtype=xp.int64)])  # nonzero below q
    below = xp.take_along_axis(counts, xp.maximum(lead - h, 0)[None, :], axis=0)[0]
    head = xp.bitwise_or(head, (below > 0).astype(xp.uint64))  # sticky: round to odd
    lead_digit = xp.take_along_axis(digits, lead[None, :], axis=0)[0]
    length = xp.asarray(_BITLEN)[lead_digit] + g * h  # bits of head: 57..63
    e_lsb = base_exp + g * (lead - h)
    shift = xp.maximum(length - _SIGNIFICAND, _MIN_EXPONENT - e_lsb)  # >= 4
    zero = zero | (shift >= 64)  # below 2**-1075: rounds to zero
    sh = xp.minimum(shift, 63).astype(xp.uint64)
    one = xp.uint64(1)
    kept = xp.right_shift(head, sh)
    rem = xp.bitwise_and(head, xp.left_shift(one, sh) - one)
    half = xp.left_shift(one, sh - one)
    odd = xp.bitwise_and(kept, one) == one
    kept = kept + ((rem > half) | ((rem == half) & odd)).astype(xp.uint64)  # to nearest even
    exp = xp.clip(e_lsb + shift, -1100, 1100).astype(xp.int32)
    with np.errstate(over="ignore"):
        val = xp.ldexp(kept.astype(xp.float64), exp)  # exact (or inf): kept <= 2**53
    val = xp.where(zero, 0.0, val)
    return xp.where(neg, -val, val)


def _block_columns(m: int, k: int, s_b: int, num_digits: int, budget: int) -> int:
    """Columns of B per block: B's slices (``16 s_B k`` bytes a column), the level products and
    the digit slots with their two working copies (``4 * 16 D m``)."""
    per_col = 16 * s_b * k + 64 * num_digits * m + 64 * m + 64
    return max(1, budget // per_col)


def _levels_numpy(a_cat, b_rev, m: int, n: int, k: int, s_a: int, s_b: int):
    """Every level ``L_t`` (t = 0 .. s_A + s_B - 2) on the CPU: one FP64 BLAS product per level
    (its pairs side by side along K), exact: integers below ``2**53``.

    Args:
        a_cat: ``(2m, s_A k)`` float64: A's slices side by side (``[A_0 ... A_{s_A-1}]``).
        b_rev: ``(s_B k, 2n)`` float64 from :func:`~ozsim.gemm.ozaki1.split_columns`
            (``[B_{s_B-1}; ...; B_0]``).

    Yields:
        ``(t, Re L_t, Im L_t)``, ``(m, n)`` float64 integers.
    """
    for t in range(s_a + s_b - 1):
        i0, i1 = max(0, t - s_b + 1), min(t, s_a - 1)
        j0 = s_b - 1 - t + i0  # B_{t-i} sits at position s_B - 1 - t + i
        p = a_cat[:, i0 * k : (i1 + 1) * k] @ b_rev[j0 * k : (j0 + i1 - i0 + 1) * k]
        yield t, p[:m, :n] - p[m:, n:], p[:m, n:] + p[m:, :n]


def cr_zgemm(a, b, family: str, *, b_exponents=None, out=None, workspace_bytes: int | None = None):
    """The correctly rounded ``C = A @ B`` of complex128 matrices (module docstring).

    Args:
        a: ``(m, k)`` complex128 (NumPy or CuPy) or a
            :class:`~ozsim.gemm.ozaki1.PreparedOperand` of one.
        b: ``(k, n)`` complex128, same library, any strides.
        family: ``"int8"`` (INT8 slices, ``b`` from [ozIMMU]) or ``"fp16"`` (FP16 slices, ``b``
            from [DGEMM-TC]).
        b_exponents: ``(n,)`` int32 column exponents of ``b`` if already computed.
        out: ``(m, n)`` complex128 to write into (must not overlap ``b``), or ``None``.
        workspace_bytes: bound on B's slices, the level products and the digit slots of one
            block of columns (the result does not depend on it). ``None``:
            :func:`~ozsim.gemm.ozaki1.default_workspace_bytes`.

    Returns:
        ``(C, s_A, s_B, b)``: ``C`` ``(m, n)`` complex128 with each real and imaginary part the
        correctly rounded exact product; the slice counts of A and B; the slice width in bits.

    Raises:
        ValueError: an unknown ``family``, or ``k`` beyond the family's exact-product limit.
        NonFiniteError: NaN or Inf in ``a`` or ``b``.
    """
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    prep = a if isinstance(a, PreparedOperand) else PreparedOperand(a)
    xp = array_namespace(prep.matrix, b)
    m, k = prep.shape
    n = b.shape[1]
    bits = FAMILIES[family](k)
    if workspace_bytes is None:
        workspace_bytes = default_workspace_bytes(xp)
    if b_exponents is None and xp is not np:  # pragma: no cover - GPU: one analysis kernel
        from .ozaki1.cuda import analyse

        b_exponents = analyse(b.T, histogram=False)[0]
    elif b_exponents is None:
        b_exponents = analyse_rows(b.T, max(1, (1 << 22) // max(k, 1)), histogram=False)[0]
    if out is None:
        out = xp.empty((m, n), dtype=xp.complex128)
    key = ("cr-count", bits)
    if key not in prep._splits:
        prep._splits[key] = exact_num_splits(prep.matrix, prep.exponents, bits, xp)
    s_a = prep._splits[key]
    s_b = exact_num_splits(b.T, b_exponents, bits, xp)
    if m == 0 or n == 0 or k == 0:
        out[...] = 0
        return out, s_a, s_b, bits
    num_levels = s_a + s_b - 1
    digits = (num_levels - 1) * bits // DIGIT_BITS + 1 + _EXTRA_DIGITS
    nb = min(n, _block_columns(m, k, s_b, digits, workspace_bytes))
    if xp is np:
        a_key = ("cr", s_a, bits)
        if a_key not in prep._splits:
            prep._splits[a_key] = split_rows(prep.matrix, prep.exponents, s_a, bits).reshape(
                2 * m, s_a * k)
        a_cat = prep._splits[a_key]
    for j0 in range(0, n, nb):
        j1 = min(n, j0 + nb)
        acc = ExactSum(m, j1 - j0, num_levels, bits, xp)
        if xp is np:
            b_rev = split_columns(b[:, j0:j1], b_exponents[j0:j1], s_b, bits)
            levels = _levels_numpy(a_cat, b_rev, m, j1 - j0, k, s_a, s_b)
        else:  # pragma: no cover - GPU: INT8 or FP16 Tensor Core products
            from . import _exact_cuda

            levels = _exact_cuda.levels(family, prep, b[:, j0:j1], b_exponents[j0:j1], s_a, s_b,
                                        bits)
        for t, re, im in levels:
            acc.add(t, re, im)
        acc.result(prep.exponents, b_exponents[j0:j1], out=out[:, j0:j1])
    return out, s_a, s_b, bits


def prepare(matrix, host=None) -> PreparedOperand:
    """The gate operand, analysed once (exponents; its slice count and slices cached)."""
    return PreparedOperand(matrix)


def run(a, b, backend, *, T, out, xp, check_finite, workspace_bytes):
    """``int8-cr`` or ``fp16-cr``: the correctly rounded product (``T`` is not used).

    Args: as :func:`ozsim.gemm.zgemm`; ``backend`` is the parsed name
    (:class:`ozsim.gemm.registry.Backend`). NaN/Inf are always detected while scaling.

    Returns:
        ``(C, GemmInfo)`` with ``correctly_rounded=True``, ``num_splits`` the larger of A's and
        B's slice counts and ``bits_per_slice`` the slice width.
    """
    if getattr(b, "_ozsim_gathered", False):
        b = b.materialize()  # only scheme II's GPU kernels read through offset tables
    family = backend.name.split("-")[0]
    c, s_a, s_b, bits = cr_zgemm(a, b, family, out=out, workspace_bytes=workspace_bytes)
    return c, GemmInfo(backend.name, max(s_a, s_b), bits, correctly_rounded=True)

