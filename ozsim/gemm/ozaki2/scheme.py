"""Ozaki scheme II over INT8: a CRT-based emulated ZGEMM, written once against an array namespace.

References:
    [Ozaki2] K. Ozaki, Y. Uchino, T. Imamura, "Ozaki Scheme II: A GEMM-oriented emulation of
        floating-point matrix multiplication using an integer modular technique" (2025,
        arXiv:2504.08009): scaling to integers, one exact GEMM per modulus, CRT reconstruction.
    [Uchino-complex] Y. Uchino, K. Ozaki, T. Imamura, complex GEMM emulation based on Ozaki
        scheme II (Karatsuba's three products per modulus; GEMMul8's ``zgemm``).
    [ozIMMU] H. Ootomo, K. Ozaki, R. Yokota, IJHPCA 2024 (arXiv:2306.11975), Sec. 4.4: the
        INT8-AUTO mantissa-loss rule that ``int8-crt-auto`` mirrors.

The algorithm, for ``C = A @ B`` with ``A`` (m, k), ``B`` (k, n) complex128 and ``N`` moduli
``p_1 .. p_N`` (:data:`MODULI`, pairwise coprime, ``<= 256``) whose product is ``P``:

1. *Analysis.* Each row ``a`` of ``A`` (each column of ``B``), taken as the ``2k`` real scalars of
   its real and imaginary parts, gets a *norm exponent* ``f`` with ``||a||_2 < 2**f``
   (:func:`norm_exponents`: an exactly computed bound, see below). This is the Cauchy-Schwarz
   scaling of [Ozaki2]'s fast mode applied to the complex row: for integer rows ``a'``, ``b'``
   (real parts ``ar, br``, imaginary parts ``ai, bi``)
   ``|Re a'b'| = |<(ar, ai), (br, -bi)>| <= ||a'|| ||b'||`` and likewise ``|Im a'b'|``.
2. *Scaling to integers.* With bit budgets ``gA + gB = gamma(N)`` (:func:`kept_bits`, the
   largest ``gamma`` with ``2**(gamma + 1) < P``), ``a' = rnd(a * 2**(gA - f))``: a power-of-two
   scaling (exact), then rounding of the FP64 value to an integer, **to nearest** (``rint``)
   where :func:`rounds_to_nearest` allows it and by truncation otherwise. Truncation gives
   ``||a'|| <= ||a|| 2**(gA - f) < 2**gA``; rounding to nearest moves each of the ``2k`` scalars
   by at most 1/2, so ``||a'|| < 2**gA + sqrt(2k) / 2 <= 2**gA + 2**8`` (``k <= MAX_K``). Every
   real and imaginary part of the integer product ``C' = A' B'`` then satisfies
   ``|C'_ij| <= ||a'|| ||b'|| < (2**gA + r)(2**gB + r)`` (``r`` = 0 or ``2**8``), and
   :func:`rounds_to_nearest` admits rounding only where that is ``< (P / 2)(1 - 2**-40)``; without
   it ``2**(gA + gB) = 2**gamma < P / 2 (1 - 2**-40)`` holds for every ``N`` (``P / 2**floor(log2
   P) >= 1.028`` for these moduli). So ``C'`` is determined by its residues modulo ``P``, with the
   margin step 5 needs. Rounding to nearest halves the worst scaling error and, unlike
   truncation, is unbiased (a truncated scalar always moves towards zero, which shrinks a state
   vector systematically: see :mod:`ozsim.gemm.ozaki1`); ozsim rounds wherever ``min(gA, gB)``
   is above about 10 to 15 bits, i.e. in every plan that aims at FP64 accuracy.
3. *Residues.* For each modulus ``p``: symmetric residues of ``Re A'``, ``Im A'`` and, for
   Karatsuba, of ``Re A' + Im A'`` (formed from the two residues and reduced again), each in
   ``[-(p // 2), (p - 1) // 2]`` (``[-128, 127]`` for 256, ``[-127, 127]`` for odd ``p``): INT8.
   ``A'`` has up to ``gA`` bits, more than FP64 integers hold past ``2**53``, so it is kept as
   exact 52-bit pieces ``a' = sum_j piece_j 2**(52 j)`` and its residue is
   ``sum_j (piece_j mod p) (2**(52 j) mod p) mod p`` (:func:`sym_mod`, exact integer FP64
   steps). The A operand's residues are pre-multiplied by ``q_p = (P/p)**-1 mod p`` (the CRT
   weight), which costs nothing per product since the gate operand is cached.
4. *Products* (Karatsuba, [Uchino-complex]): per modulus three exact integer GEMMs
   ``T1 = Ar Br``, ``T2 = Ai Bi``, ``T3 = (Ar + Ai)(Br + Bi)`` of residue matrices, then
   ``u_re = (T1 - T2) mod p`` and ``u_im = (T3 - T1 - T2) mod p`` in ``[0, p)``: the residues of
   ``q_p Re C'`` and ``q_p Im C'``. Each INT8 GEMM sums ``k`` products of magnitude ``<= 2**14``:
   exact in INT32 for ``k <= MAX_K = 2**17 - 1``; on the CPU they run in FP32 BLAS where
   ``k * 2**14 <= 2**24`` (every partial sum an integer below ``2**24``: exact in any order) and
   in FP64 BLAS otherwise (below ``2**53``).
5. *CRT reconstruction* (exact, then one rounding): ``C' = S - Q P`` with
   ``S = sum_p u_p (P/p)`` and ``Q = round(S / P)``. ``S / P = sum_p u_p / p`` is computed in FP64
   with absolute error below ``2**-43``; since ``|C'| < (P / 2)(1 - 2**-40)``, ``S / P`` lies
   within ``1/2 - 2**-41`` of the integer ``Q``, so ``Q = rint(sum_p u_p * fl(1/p))`` is exact
   whatever the summation order or FMA use. ``P/p`` and ``P`` are held as base-``2**40`` digits (:data:`LIMB_BITS`); the limb sums
   ``D_c = sum_p u_p (P/p)_c - Q P_c`` are integers below ``20 * 255 * 2**40 < 2**53``: exact in
   FP64 in any order. A carry pass (``rint``, exact) makes the lower digits balanced
   (``|D_c| <= 2**39``), and ``C' = sum_c D_c 2**(40 c)`` is summed from the lowest digit up: each
   term is exact, so the result is within 2 ulps of ``C'`` (typically correctly rounded;
   ``tests/test_ozaki2.py`` checks it against Python integers). Finally ``C = ldexp(C', fA_i +
   fB_j - gA - gB)``.

Every step is exact integer arithmetic in FP64 (or FP32) until the one conversion of the exact
``C'``; the multiplications by powers of two are exact, so fused multiply-adds give the same bits
as separate operations: results do not depend on the BLAS, the blocking of B or the device.
The only error is the rounding in step 2: with every scalar of both operands kept in full
(zero mantissa loss below) the result is the exact product to within 2 ulps per part.

The norm bound of step 1 (:func:`norm_exponents`), exact and order-independent: with ``e`` the
row's ozIMMU exponent (``max(|Re|, |Im|) < 2**e``), each scalar is rounded *up* to a multiple of
``2**(e - 13)``: ``q = ceil(|x| 2**(13 - e)) <= 2**13``; ``S = sum q**2`` is an integer below
``2k * 2**26 <= 2**53`` (any order), and ``f = e - 13 + ceil(bitlength(S) / 2)`` gives
``||a||**2 <= S 4**(e - 13) < 4**f``. (A scalar whose ``q`` underflows to 0 is below ``2**-1074``
times the row maximum; the strict inequality's slack of one unit of ``S`` covers it.)

The number of moduli (``int8-crt-auto``): the error bound against FP64's. ``T = 0`` picks the
fewest moduli whose bound on the norm-wise error of this product is no larger than the bound of
an FP64 GEMM of the same product; ``T > 0`` allows ``2**T`` times it. Scheme II's only error is
the scaling of step 2, so its bound is a function of ``k``, the scaling and the bits ``gA``,
``gB`` that the moduli product allows ([Ozaki2] Sec. 4; here in Frobenius form):

* With ``a'_il = a_il 2**(gA - fA_i) + eps_il``, ``|eps_il| <= r`` (``r = 1/2`` rounding to
  nearest, 1 truncating) for each real scalar, and the same for B, a part (Re or Im) of
  ``c_ij`` errs by ``sum_l (eps b + a eps' + eps eps')`` over ``2k`` real terms: at most
  ``r 2**(fA_i - gA) beta_j + r 2**(fB_j - gB) alpha_i + 2k r**2 2**(fA_i + fB_j - gA - gB)``,
  ``alpha_i``, ``beta_j`` the real 1-norms of row ``i`` and column ``j``, each
  ``<= sqrt(2k) 2**f``. So a part errs by at most ``K 2**(fA_i + fB_j)`` with
  ``K = r sqrt(2k) (2**-gA + 2**-gB) + 2k r**2 2**-(gA + gB)`` and, over both parts of all
  entries, ``||C_hat - C||_F <= sqrt(2) K F_A F_B``, ``F_A = (sum_i 4**fA_i)**(1/2)``.
* FP64: each part is a dot product of ``2k`` reals, ``|err| <= gamma_2k (|A| |B|)`` per part
  ([Higham] (3.5), any summation order; ``gamma_n = n u / (1 - n u)``). The Frobenius norm of
  that bound is at least ``gamma_2k (sum_l c_l w_l)**(1/2)`` (``c_l = ||A[:, l]||**2``,
  ``w_l = ||B[l, :]||**2``; square the two parts' sums and keep the diagonal terms
  ``|a_il|**2 |b_lj|**2``), hence at least ``gamma_2k c_min**(1/2) ||B||_F`` and, as
  ``2**fB_j <= 2.25 ||b_j||`` (:data:`NORM_OVERSHOOT`), at least
  ``gamma_2k c_min**(1/2) F_B / 2.25``.
* Scheme II's bound is below FP64's if
  ``K <= 2**T gamma_2k c_min**(1/2) / (2.25 sqrt(2) F_A)``. ``F_B`` cancels: the choice
  depends on A and ``k`` alone, so a state-vector gate needs no statistics of the state. The
  surplus bits are split evenly (``K`` is symmetric in ``gA``, ``gB``; A gets the odd one); a
  matrix A with a zero column (``c_min = 0``) cannot meet the rule and runs native ZGEMM.
* Both methods round their result once more: scheme II's conversion of the exact ``C'`` (within
  2 ulps, usually correctly rounded) matches the last rounding that ``gamma_2k`` already holds,
  and is left out of the comparison.

The quantities are exact, so CPU and GPU choose alike: ``fA`` are integers and
``c_min`` comes from integer sums (:func:`bound_stats`), both reduced on the host.
For dense operands (unitary gates, Ozaki's inputs with phi <= 1) ``c_min**(1/2) / F_A`` is about
``(2k)**(-1/2)``, which cancels the ``sqrt(2k)`` of ``K`` and the ``2k`` of ``gamma_2k``: about 58
bits of each operand, 15 moduli, whatever ``k``. A spread of magnitudes within the rows (phi = 2,
4) lowers ``c_min`` against ``F_A`` and asks for more. Measured (``benchmarks/accuracy/crt_rule.py``,
double-double reference, ``k`` up to 65536, Ozaki's inputs and adversarial ones): the norm-wise
error at T = 0 is at most native ZGEMM's (OpenBLAS) in 28 of 29 cases and one modulus fewer is
above it in 18, so the rule is tight; the exception is ``k = 65536``, phi = 0.5, at 1.17x: a
blocked BLAS's measured error grows far slower in ``k`` than its bound, scheme II's like
``sqrt(k)``. The largest element-wise relative error can exceed native's where entries lie far
below their row's and column's norms (170x at phi = 4, ``k = 96``): the bound is norm-wise.

The moduli (:data:`MODULI`): the greedy sequence of the largest pairwise coprime integers
``<= 256``: 256, 255 = 3*5*17, 253 = 11*23, 251, 247 = 13*19, 241, 239, 233, 229, 227, 223,
217 = 7*31, 211, 199, 197, 193, 191, 181, 179, 173 (log2 P = 8.0, 16.0, ..., 155.4 bits for
N = 1..20; ``gamma(N)`` = 14, 22, ..., 154 bits for N = 2..20).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import ModuleType

import numpy as np

from ..._array import array_namespace
from ...errors import GPUModuleError, NonFiniteError
from ..bounds import UNIT_ROUNDOFF, scaling_error_factor
from .moduli import (
    LIMB_BITS,
    MAX_K,
    MAX_MODULI,
    MIN_MODULI,
    MODULI,
    PIECE_BITS,
    NORM_FRAC_BITS,
    NORM_OVERSHOOT,
    CRTConstants,
    crt_constants,
    kept_bits,
    rounds_to_nearest,
    _kept_bits_table,
)
from ..ozaki1.scheme import (
    PreparedOperand,
    default_workspace_bytes,
    row_exponents,
)

__all__ = [
    "LIMB_BITS",
    "MAX_K",
    "MAX_MODULI",
    "MIN_MODULI",
    "MODULI",
    "NORM_OVERSHOOT",
    "BoundStats",
    "CRTPlan",
    "PreparedCRTOperand",
    "analyse_rows",
    "bound_stats",
    "check_inner_dimension",
    "choose_plan",
    "crt_constants",
    "crt_reconstruct",
    "crt_zgemm",
    "fixed_plan",
    "int8_crt_zgemm",
    "kept_bits",
    "norm_exponents",
    "residues",
    "rounds_to_nearest",
    "scaled_pieces",
    "scaling_error_factor",
    "sym_mod",
]

# -- analysis -------------------------------------------------------------------------------------
def norm_exponents(x, exps, xp: ModuleType | None = None):
    """Exponents ``f`` with ``||row||_2 < 2**f`` over the 2k real scalars of each row (exact).

    Args:
        x: ``(rows, k)`` complex128, any strides.
        exps: ``(rows,)`` int32 from :func:`ozsim.gemm.ozaki1.row_exponents`.

    Returns:
        ``(rows,)`` int32; 0 for an all-zero row. See the module docstring for the bound.
    """
    xp = xp or array_namespace(x)
    sh = (NORM_FRAC_BITS - exps)[:, None]
    s = xp.zeros(x.shape[0], dtype=xp.float64)
    for part in (x.real, x.imag):
        q = xp.ceil(xp.ldexp(xp.abs(part), sh))  # exact; <= 2**13
        s += (q * q).sum(axis=1)  # integers below 2**53: exact in any order
    _, bl = xp.frexp(s)  # bit length of the integer s (0 for s = 0)
    f = exps - NORM_FRAC_BITS + (bl + 1) // 2
    return xp.where(s > 0, f, 0).astype(xp.int32)


def analyse_rows(x, block_rows: int | None = None):
    """:func:`norm_exponents` of the rows of ``x``, blockwise.

    Args:
        x: ``(rows, k)`` complex128 (``b.T`` for the columns of B).
        block_rows: rows per block (bounds temporaries, ~40 bytes a scalar); ``None``: all.

    Returns:
        ``(rows,)`` int32.

    Raises:
        NonFiniteError: NaN or Inf in ``x``.
    """
    xp = array_namespace(x)
    rows = x.shape[0]
    block_rows = max(1, rows if block_rows is None else int(block_rows))
    f = xp.empty(rows, dtype=xp.int32)
    for i0 in range(0, rows, block_rows):
        blk = x[i0 : i0 + block_rows]
        f[i0 : i0 + block_rows] = norm_exponents(blk, row_exponents(blk, xp), xp)
    return f


@dataclass(frozen=True)
class BoundStats:
    """What :func:`choose_plan` needs of A (module docstring, "The number of moduli"), in bits.

    Attributes:
        log2_scale: ``log2 F_A``, ``F_A = (sum_i 4**fA_i)**(1/2)`` over the nonzero rows
            (``-inf`` for a zero matrix).
        log2_min_column: ``log2`` of a lower bound on ``min_l ||A[:, l]||_2`` (``-inf`` when a
            column is zero).
    """

    log2_scale: float
    log2_min_column: float


def bound_stats(x, f=None) -> BoundStats:
    """:class:`BoundStats` of the ``(m, k)`` complex128 matrix ``x``, exactly (order-free).

    ``F_A`` is summed on the host from the integer exponents (``math.fsum``: correctly
    rounded). For the columns, each real scalar is rounded *down* to a multiple of
    ``2**(e_l - b)`` (``e_l`` the column's ozIMMU exponent, ``b`` = 20 fraction bits, fewer for
    ``m > 2**21`` so that the INT64 sums cannot overflow) and the squares summed in INT64: an
    exact integer ``S_l`` with ``S_l 4**(e_l - b) <= ||A[:, l]||**2``, the same on CPU and GPU.

    Args:
        x: ``(m, k)`` complex128, NumPy or CuPy (one host transfer of ``m + 2k`` integers).
        f: ``(m,)`` int32 :func:`norm_exponents` of the rows, if already computed.

    Raises:
        NonFiniteError: NaN or Inf in ``x``.
    """
    xp = array_namespace(x)
    m, k = x.shape
    if m == 0:  # no rows: no error to bound
        return BoundStats(-math.inf, -math.inf)
    frac = min(20, (62 - (2 * m).bit_length()) // 2)
    if xp is not np:  # pragma: no cover - GPU: the same integers in three passes
        if f is None:
            f = _gpu_module().analyse(x)
        e, s, nz, finite = _gpu_module().bound_stats_parts(x, frac)
        f = f.get()
        if not finite:
            raise NonFiniteError("GEMM operand has NaN or Inf entries")
    else:
        if f is None:
            f = norm_exponents(x, row_exponents(x, xp), xp)
        e = row_exponents(x.T, xp)  # per column; raises on NaN/Inf
        sh = (frac - e)[None, :]
        s = xp.zeros(k, dtype=xp.int64)
        nz = xp.zeros(m, dtype=bool)
        for part in (x.real, x.imag):
            q = xp.floor(xp.ldexp(xp.abs(part), sh)).astype(xp.int64)  # <= 2**frac
            s += (q * q).sum(axis=0)  # INT64: exact in any order
            nz |= (part != 0).any(axis=1)
    fr = f[nz].astype(np.int64)
    if fr.size == 0:
        return BoundStats(-math.inf, -math.inf)
    top = int(fr.max())
    vals, counts = np.unique(fr, return_counts=True)  # exact: integers
    scale = top + 0.5 * math.log2(math.fsum(int(c) * math.ldexp(1.0, 2 * (int(v) - top))
                                            for v, c in zip(vals, counts)))
    if not s.all():
        return BoundStats(scale, -math.inf)
    col = 0.5 * np.log2(s.astype(np.float64)) + (e.astype(np.int64) - frac)
    return BoundStats(scale, float(col.min()))


@dataclass(frozen=True)
class CRTPlan:
    """How one scheme II GEMM runs.

    Attributes:
        num_moduli: ``N``.
        bits_a, bits_b: ``gA``, ``gB``, the bits each row of A / column of B keeps below its
            scaling point (``gA + gB = gamma(N)``).
        bound_bits: ``int8-crt-auto``: ``log2`` of scheme II's error bound over FP64's for this
            product (``<= T``; negative: a margin); ``None`` for a fixed ``N``.
    """

    num_moduli: int
    bits_a: int
    bits_b: int
    bound_bits: float | None = None

    @property
    def rounding(self) -> bool:
        """Scaled integers rounded to nearest (else truncated): :func:`rounds_to_nearest`."""
        return rounds_to_nearest(self.num_moduli, self.bits_a, self.bits_b)


def fixed_plan(num_moduli: int) -> CRTPlan:
    """``int8-crt{N}``: ``gamma(N)`` split evenly, the odd bit to A."""
    return CRTPlan(num_moduli, *_even(kept_bits(num_moduli)))


def choose_plan(stats: BoundStats, k: int, threshold: float) -> CRTPlan | None:
    """``int8-crt-auto``: the fewest moduli whose error bound is at most ``2**T`` times FP64's.

    Args:
        stats: :func:`bound_stats` of A.
        k: the inner dimension.
        threshold: ``T`` in bits (>= 0).

    Returns:
        The :class:`CRTPlan` (module docstring, "The number of moduli": ``K <= 2**T gamma_2k
        c_min**(1/2) / (2.25 sqrt(2) F_A)``), or ``None`` when 20 moduli do not suffice or A has
        a zero column (the caller runs native ZGEMM). A zero A takes the fewest moduli.
    """
    if stats.log2_scale == -math.inf:
        return CRTPlan(MIN_MODULI, *_even(kept_bits(MIN_MODULI)), bound_bits=-math.inf)
    if stats.log2_min_column == -math.inf:
        return None
    n2 = 2 * k
    native = (math.log2(n2 * UNIT_ROUNDOFF / (1 - n2 * UNIT_ROUNDOFF)) + stats.log2_min_column
              - math.log2(NORM_OVERSHOOT * math.sqrt(2)) - stats.log2_scale)
    for n, g in _kept_bits_table():  # once per GEMM; a gate's plan once per gate and T
        ga, gb = _even(g)
        excess = math.log2(scaling_error_factor(k, ga, gb, rounds_to_nearest(n, ga, gb))) - native
        if excess <= threshold:
            return CRTPlan(n, ga, gb, excess)
    return None


def _even(g: int) -> tuple[int, int]:
    return g - g // 2, g // 2


# -- scaling and residues -------------------------------------------------------------------------
def sym_mod(x, p: int, xp: ModuleType = np):
    """Symmetric residue of integer-valued FP64 ``x`` (``|x| <= 2**52``) modulo ``p``, exactly.

    Returns values in ``[-(p // 2), (p - 1) // 2]`` (same dtype). ``q = rint(x * fl(1/p))`` is
    within 1 of ``round(x / p)`` (relative error ``< 2**-52`` on a quotient below ``2**45``);
    ``q * p`` and ``x - q * p`` are integers below ``2**53`` (exact), and one correction step by
    ``p`` lands in the range.
    """
    r = x - xp.rint(x * (1.0 / p)) * p
    r -= p * (r > (p - 1) // 2)
    r += p * (r < -(p // 2))
    return r


def scaled_pieces(x, shift, bits: int, xp: ModuleType | None = None, *, rounding: bool = True):
    """Exact 52-bit pieces of ``rnd(x * 2**shift)``, an integer of magnitude ``<= 2**bits``.

    Args:
        x: real float64 array (a real or imaginary part), any shape.
        shift: int32 array broadcasting against ``x`` (``bits - f`` per row or column).
        bits: the kept bits ``g``; ``|x * 2**shift| < 2**bits`` must hold.
        rounding: ``rnd`` = ``rint`` (to nearest, ties to even) if True, else ``trunc``
            (:attr:`CRTPlan.rounding`).

    Returns:
        ``(J,) + x.shape`` float64 with ``J = ceil(bits / 52)`` (at least 1):
        ``rnd(x 2**shift) = sum_j pieces[j] 2**(52 j)``, ``|pieces[j]| <= 2**52``, all of one
        sign.
    """
    xp = xp or array_namespace(x)
    y = xp.ldexp(x, shift)  # exact: power-of-two scaling
    v = xp.rint(y) if rounding else xp.trunc(y)  # the one rounding of the scheme
    npieces = max(1, -(-bits // PIECE_BITS))
    out = xp.empty((npieces,) + tuple(x.shape), dtype=xp.float64)
    for j in range(npieces - 1, 0, -1):
        hi = xp.trunc(xp.ldexp(v, -PIECE_BITS * j))  # exact, |hi| <= 2**52
        out[j] = hi
        v = v - xp.ldexp(hi, PIECE_BITS * j)  # exact: the bits of v below 2**(52 j)
    out[0] = v
    return out


def _piece_weights(p: int, npieces: int) -> list[int]:
    return [((1 << (PIECE_BITS * j)) % p + p // 2) % p - p // 2 for j in range(npieces)]


def residues(pieces_re, pieces_im, p: int, weight: int = 1, xp: ModuleType | None = None):
    """Symmetric residues ``[Re, Im, Re + Im]`` of ``weight * x'`` modulo ``p``.

    Args:
        pieces_re, pieces_im: :func:`scaled_pieces` of the real and imaginary parts.
        p: the modulus.
        weight: a factor folded into the residues (the CRT weight ``q_p`` for A; 1 for B).

    Returns:
        ``(3,) + shape`` float64, integers in ``[-(p // 2), (p - 1) // 2]``.
    """
    xp = xp or array_namespace(pieces_re)
    ws = [w * weight for w in _piece_weights(p, pieces_re.shape[0])]
    out = xp.empty((3,) + tuple(pieces_re.shape[1:]), dtype=xp.float64)
    for t, pieces in enumerate((pieces_re, pieces_im)):
        acc = None
        for j in range(pieces.shape[0]):
            w = ws[j] % p
            w = w - p if w > (p - 1) // 2 else w
            if w == 0:
                continue
            term = sym_mod(pieces[j], p, xp) * w  # |term| <= 2**14: exact
            acc = term if acc is None else acc + term
        out[t] = 0.0 if acc is None else sym_mod(acc, p, xp)
    out[2] = sym_mod(out[0] + out[1], p, xp)  # Karatsuba's Re + Im, exact
    return out


# -- CRT reconstruction ---------------------------------------------------------------------------
class _CRTAccumulator:
    """Streams the moduli in: ``Q`` estimate and the base-``2**40`` digit sums (module doc, step 5).

    Args:
        const: :class:`CRTConstants`.
        shape: shape of the result.
    """

    def __init__(self, const: CRTConstants, shape, xp: ModuleType):
        self.const, self.xp = const, xp
        self.qsum = xp.zeros(shape, dtype=xp.float64)
        self.limbs = xp.zeros((const.num_limbs,) + tuple(shape), dtype=xp.float64)

    def add(self, index: int, u) -> None:
        """Add ``u_p`` in ``[0, p)`` (integer-valued float64) of modulus ``index``."""
        c = self.const
        self.qsum += u * c.inv_p[index]
        for i in range(c.num_limbs):
            mi = c.limbs_M[index, i]
            if mi:
                self.limbs[i] += u * mi  # exact: integers below 2**53

    def finish(self):
        """``C'`` rounded to FP64 (within 2 ulps), an array of ``shape``."""
        xp, c = self.xp, self.const
        q = xp.rint(self.qsum)  # exact quotient (|C'| < P/2 (1 - 2**-40))
        d = self.limbs
        for i in range(c.num_limbs):
            d[i] -= q * c.limbs_P[i]  # exact
        radix = float(1 << LIMB_BITS)
        for i in range(c.num_limbs - 1):  # balanced digits, exact
            carry = xp.rint(d[i] * (1.0 / radix))
            d[i] -= carry * radix
            d[i + 1] += carry
        v = d[0].copy()
        for i in range(1, c.num_limbs):
            v = d[i] * float(1 << (LIMB_BITS * i)) + v  # d * 2**(40 i) exact; one rounding
        return v


def crt_reconstruct(u, num_moduli: int):
    """``C'`` from its residues: the integer in ``(-P/2, P/2)`` congruent to ``u_p`` mod each ``p``.

    Args:
        u: ``(N, ...)`` integer-valued float64, ``u[l]`` in ``[0, p_l)``: residues of ``q_p C'``
            (the CRT weight already applied, as the GEMM's A residues do).
        num_moduli: ``N``.

    Returns:
        FP64 array of shape ``u.shape[1:]``, within 2 ulps of ``C'``.
    """
    xp = array_namespace(u)
    acc = _CRTAccumulator(crt_constants(num_moduli), u.shape[1:], xp)
    for i in range(num_moduli):
        acc.add(i, u[i])
    return acc.finish()


# -- the prepared A operand -----------------------------------------------------------------------
@dataclass
class PreparedCRTOperand:
    """The A operand of :func:`int8_crt_zgemm`, analysed once; residues cached per bit budget.

    A gate matrix multiplies block after block of a state (and possibly many states): its norm
    exponents, the statistics of ``int8-crt-auto``'s rule (:attr:`bound_stats`) and its INT8
    residues for every modulus are computed once.

    On the GPU the analysis is only launched here: its NaN/Inf flag reaches the host with B's, in
    the one transfer that the GEMM waits for anyway (:func:`ozsim.gemm.ozaki2.cuda.settle`).

    Args:
        matrix: ``(m, k)`` complex128, NumPy or CuPy.

    Raises:
        NonFiniteError: NaN or Inf in ``matrix`` (on the GPU: at the first GEMM or
            :attr:`bound_stats`, when the flag arrives).
    """

    matrix: object
    norm_exponents: object = field(init=False)
    _stats: object = field(init=False, default=None, repr=False)
    _real: bool | None = field(init=False, default=None, repr=False)
    _pending: object = field(init=False, default=None, repr=False)
    _residues: dict = field(init=False, default_factory=dict, repr=False)
    _device_cache: dict = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self):
        gpu = _gpu_module() if array_namespace(self.matrix) is not np else None
        if gpu is not None:  # pragma: no cover - GPU: the flag fetched with B's (settle)
            self.norm_exponents, self._pending = gpu.analyse_launch(self.matrix)
            return
        self.norm_exponents = analyse_rows(self.matrix)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.matrix.shape)

    @property
    def is_real(self) -> bool:
        """The matrix has no imaginary part (its ``Ai`` residues are zero: the GPU's cuBLAS
        products skip ``T2 = Ai Bi``). One host sync on the GPU, on first use."""
        if self._real is None:
            self._real = not bool((self.matrix.imag != 0).any())
        return self._real

    @property
    def bound_stats(self) -> BoundStats:
        """:func:`bound_stats` of the matrix, on first use (one host transfer on the GPU)."""
        if self._stats is None:
            gpu = _gpu_module() if array_namespace(self.matrix) is not np else None
            if gpu is not None:  # pragma: no cover - GPU: the flag launched at __init__
                gpu.settle(self)
            self._stats = bound_stats(self.matrix, self.norm_exponents)
        return self._stats

    def residues(self, bits: int, num_moduli: int, rounding: bool = True):
        """``(N, 3, m, k)`` int8: for each modulus ``p``, ``q_p * [Ar, Ai, Ar + Ai] mod p``.

        Args:
            bits: ``gA``.
            num_moduli: ``N``.
            rounding: :attr:`CRTPlan.rounding` (to nearest, else truncation).

        Cached by ``(bits, N, rounding)``; a request for fewer moduli with the same ``bits``
        and rounding reuses a larger entry (residues do not depend on ``N``).
        """
        for (b, n, rd), r in self._residues.items():
            if b == bits and rd == rounding and n >= num_moduli:
                return r[:num_moduli]
        xp = array_namespace(self.matrix)
        const = crt_constants(num_moduli)
        shift = (bits - self.norm_exponents)[:, None]
        pr = scaled_pieces(self.matrix.real, shift, bits, xp, rounding=rounding)
        pi = scaled_pieces(self.matrix.imag, shift, bits, xp, rounding=rounding)
        m, k = self.shape
        out = xp.empty((num_moduli, 3, m, k), dtype=xp.int8)
        for i, p in enumerate(const.moduli):
            out[i] = residues(pr, pi, p, const.weights[i], xp)
        self._residues[(bits, num_moduli, rounding)] = out
        return out


# -- the GEMM -------------------------------------------------------------------------------------
def _float32_exact(k: int) -> bool:
    """FP32 BLAS sums ``k`` products of magnitude ``<= 2**14`` exactly iff ``k 2**14 <= 2**24``."""
    return k * 2**14 <= 2**24


def _block_columns(n: int, k: int, m: int, num_moduli: int, bits_b: int, budget: int) -> int:
    """Columns of B per block so that its pieces, residues, products and accumulators fit."""
    npieces = max(1, -(-bits_b // PIECE_BITS))
    limbs = crt_constants(num_moduli).num_limbs
    per_col = 8 * (2 * npieces * k + 6 * k + 6 * m + 2 * (limbs + 1) * m + 8 * m) + 64
    return max(1, min(n, budget // per_col))


def check_inner_dimension(k: int) -> None:
    """Raise ``ValueError`` for ``k < 1`` or ``k > MAX_K`` (the INT8 products would overflow
    INT32)."""
    if k < 1:
        raise ValueError(f"inner dimension k must be >= 1, got {k}")
    if k > MAX_K:
        raise ValueError(
            f"inner dimension k = {k} exceeds {MAX_K} for Ozaki scheme II: the INT8 products "
            "(k * 128**2) would overflow INT32; split the product along k or use int8-auto"
        )


def int8_crt_zgemm(
    a,
    b,
    plan: CRTPlan,
    *,
    b_exponents=None,
    out=None,
    workspace_bytes: int | None = None,
):
    """``C = A @ B`` for complex128 matrices by Ozaki scheme II over INT8 (module docstring).

    Args:
        a: ``(m, k)`` complex128 array or a :class:`PreparedCRTOperand` of one.
        b: ``(k, n)`` complex128, any strides.
        plan: :class:`CRTPlan` (``N`` and the bits of A and B), from :func:`fixed_plan` or
            :func:`choose_plan`. ``3 N`` INT8 GEMMs of ``(m, k) x (k, n)``.
        b_exponents: ``(n,)`` int32 norm exponents of B's columns if already computed.
        out: ``(m, n)`` complex128 to write into (must not overlap ``b``), or ``None``.
        workspace_bytes: bound on the temporaries of one block of B's columns (results do not
            depend on it). ``None``: :func:`ozsim.gemm.ozaki1.default_workspace_bytes` on the
            CPU; on the GPU half the free memory left after A's residues, at most 32 GiB
            (``ozaki2.cuda.default_workspace_bytes``).

    Returns:
        ``(m, n)`` complex128.

    Raises:
        ValueError: ``k > MAX_K``.
        NonFiniteError: NaN or Inf in ``a`` or ``b``.
    """
    prep = a if isinstance(a, PreparedCRTOperand) else PreparedCRTOperand(a)
    xp = array_namespace(prep.matrix, b)
    m, k = prep.shape
    n = b.shape[1]
    check_inner_dimension(k)
    if xp is not np:  # pragma: no cover - GPU: ozsim's CUDA kernels
        gpu = _gpu_module()
        if workspace_bytes is None:
            workspace_bytes = gpu.default_workspace_bytes(prep, plan)
        return gpu.int8_crt_zgemm_gpu(prep, b, plan, b_exponents=b_exponents, out=out,
                                      workspace_bytes=workspace_bytes)
    if workspace_bytes is None:
        workspace_bytes = default_workspace_bytes(xp)
    N, ga, gb = plan.num_moduli, plan.bits_a, plan.bits_b
    const = crt_constants(N)
    nb = _block_columns(n, k, m, N, gb, workspace_bytes)
    if b_exponents is None:
        b_exponents = analyse_rows(b.T, nb)
    if out is None:
        out = xp.empty((m, n), dtype=xp.complex128)
    dtype = xp.float32 if _float32_exact(k) else xp.float64
    ra = prep.residues(ga, N, plan.rounding)
    ea = prep.norm_exponents
    for j0 in range(0, n, nb):
        j1 = min(n, j0 + nb)
        bb = b[:, j0:j1]
        shift = (gb - b_exponents[j0:j1])[None, :]
        pr = scaled_pieces(bb.real, shift, gb, xp, rounding=plan.rounding)
        pi = scaled_pieces(bb.imag, shift, gb, xp, rounding=plan.rounding)
        acc_re = _CRTAccumulator(const, (m, j1 - j0), xp)
        acc_im = _CRTAccumulator(const, (m, j1 - j0), xp)
        for i, p in enumerate(const.moduli):
            rb = residues(pr, pi, p, 1, xp).astype(dtype)  # (3, k, nb)
            t = xp.matmul(ra[i].astype(dtype), rb).astype(xp.float64)  # exact integers
            t1, t2, t3 = t[0], t[1], t[2]
            re = t1 - t2  # exact: |.| <= 2 k 2**14
            im = t3 - re - 2 * t2  # T3 - T1 - T2, exact
            for acc, raw in ((acc_re, re), (acc_im, im)):
                u = sym_mod(raw, p, xp)
                u += p * (u < 0)  # [0, p)
                acc.add(i, u)
        e = (ea[:, None] + b_exponents[None, j0:j1]) - (ga + gb)
        o = out[:, j0:j1]
        o.real[...] = xp.ldexp(acc_re.finish(), e)
        o.imag[...] = xp.ldexp(acc_im.finish(), e)
    return out


def _gpu_module():  # pragma: no cover - GPU
    """:mod:`ozsim.gemm.ozaki2.cuda`, the GPU half of the scheme.

    Raises:
        GPUModuleError: it cannot be imported (a broken install, a CUDA/CuPy mismatch): the GPU
            path was asked for (a CuPy operand), and running scheme II's generic CuPy code
            instead would be correct but many times slower without a word.
    """
    try:
        from . import cuda
    except ImportError as exc:
        raise GPUModuleError(f"ozsim's scheme II GPU module ozsim.gemm.ozaki2.cuda failed to "
                             f"import: {exc.__class__.__name__}: {exc}") from exc
    return cuda


def crt_zgemm(a, b, num_moduli: int | None = None, *, T: float = 1.0, out=None,
              workspace_bytes: int | None = None):
    """``int8-crt{N}`` (``num_moduli=N``) or ``int8-crt-auto`` (``num_moduli=None``).

    Args:
        a: ``(m, k)`` complex128, or a :class:`PreparedCRTOperand` (or an ozaki1
            ``PreparedOperand``, whose matrix is used) of one.
        b: ``(k, n)`` complex128.
        num_moduli: ``N`` in 2..20, or ``None`` for the auto choice at threshold ``T``.
        T: the auto threshold in bits.
        out, workspace_bytes: see :func:`int8_crt_zgemm`.

    Returns:
        ``(C, plan)``; ``(None, None)`` when the auto choice finds no ``N <= 20`` (the caller
        runs native ZGEMM).

    Raises:
        ValueError: ``k`` outside ``1..MAX_K``.
        NonFiniteError: NaN or Inf in ``a`` or ``b``.
    """
    if isinstance(a, PreparedCRTOperand):
        prep = a
    else:
        mat = a.matrix if isinstance(a, PreparedOperand) else a
        check_inner_dimension(mat.shape[1])
        prep = PreparedCRTOperand(mat)  # on the GPU: launched only, settled with B below
    check_inner_dimension(prep.shape[1])
    if num_moduli is not None:
        plan = fixed_plan(num_moduli)
        return int8_crt_zgemm(prep, b, plan, out=out, workspace_bytes=workspace_bytes), plan
    plan = choose_plan(prep.bound_stats, prep.shape[1], T)  # A alone decides
    if plan is None:
        return None, None
    c = int8_crt_zgemm(prep, b, plan, out=out, workspace_bytes=workspace_bytes)
    return c, plan
