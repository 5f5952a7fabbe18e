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

Mantissa loss (``int8-crt-auto``). INT8-AUTO's rule ([ozIMMU] Sec. 4.4, :mod:`ozsim.gemm.ozaki1`)
counts, per nonzero scalar, the bits of its significand that the split drops; ``T = 0`` then
means every scalar kept in full, i.e. the exact product. For scheme II that reading of ``T = 0``
is unreachable on dense inputs with a spread of magnitudes (phi = 1 rows of 16384 entries have
scalars 31 bits below the row norm: 2 x 85 bits > ``gamma(20) = 154``) and far stricter than
FP64 itself, whose GEMM does not return each product term exactly either. ozsim therefore
measures the loss of scheme II **against what an FP64 GEMM delivers**, keeping INT8-AUTO's
per-scalar, mean-over-nonzeros form:

* A nonzero real scalar ``x`` whose leading bit lies ``d`` bits below its row's scaling point
  ``2**f`` (``d = f - floor(log2|x|) - 1 >= 0``), in a row that keeps ``g`` bits, loses
  ``d + 1 + 53 - g`` bits of its significand (negative: bits to spare), as in INT8-AUTO.
* An FP64 dot product of ``n`` terms does not deliver 53 bits either: its error grows like
  ``sqrt(n) u`` (Higham and Mary, SIAM J. Sci. Comput. 41(5), 2019) and measured native ZGEMMs
  (OpenBLAS, cuBLAS) on Ozaki's inputs sit ``2**5``-``2**6.5`` above ``u``. The loss is counted
  against that: ``a = min(2, floor(log2(nnz) / 2))`` bits are allowed per scalar, ``nnz`` being
  the number of nonzero real scalars of its row (a row with one nonzero gets no allowance: its
  products are single terms, which FP64 rounds once).
* ``loss(x) = d + 1 + 53 - a - g`` is **signed**: scalars near the row norm, which carry the
  product, have bits to spare, and the tiny ones, which barely touch it, lose some. The mean
  over the nonzero scalars of each operand must be ``<= T``.

So ``T = 0`` asks that on average a scalar keeps as many bits as an FP64 GEMM resolves; the
row's spread of magnitudes still decides (heavy-tailed phi = 4 rows need ~15 bits more than
phi = 0.1 rows). The allowance is calibrated, not derived
(``benchmarks/accuracy/crt_T0_calibration.py``): on Ozaki's inputs with k = 96..16384,
phi = 0.1..4, three seeds each, 40 x 40 outputs against double-double, T = 0 with an allowance of
2 bits stays at most 0.49x native ZGEMM's max relative error (OpenBLAS 0.3.31, AMD EPYC), while
3 bits reach 1.96x and 4 bits 2.89x (k = 4096 and 16384 at phi = 0.1, and k = 256 at phi = 4, keep
58 bits where about 60 are needed). Scheme II's relative error grows like ``sqrt(k)`` (its grid
is set by the row norm, ``sqrt(2k)`` above a typical entry) while a blocked FP64 GEMM's hardly
grows, which is why the allowance cannot follow ``sqrt(n)`` further (``benchmarks/RESULTS.md``).
``int8-crt-auto`` computes the fewest bits ``gA*``, ``gB*`` whose means are ``<= T`` and picks
the fewest ``N`` in 2..20 with ``gamma(N) >= gA* + gB*``; the surplus bits are shared evenly (A gets the odd one).
If even ``N = 20`` is short it falls back to native ZGEMM. Each scalar gets the bin
``j = d + 2 - a`` (:data:`LOSS_ALLOWANCE_BITS` ``= 2``), so that ``loss = j + 52 - g``; the loss
being linear in ``j`` (and ``j`` never clamped), :func:`analyse_rows` only counts the nonzero
scalars and sums their bins (the *loss moments*), where INT8-AUTO's clamped loss needs a histogram.
Fixed ``int8-crt{N}`` splits ``gamma(N)`` evenly (``gA = ceil(gamma/2)``).

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
from ...errors import GPUModuleError
from .moduli import (
    LIMB_BITS,
    MAX_K,
    MAX_MODULI,
    MIN_MODULI,
    MODULI,
    PIECE_BITS,
    NORM_FRAC_BITS,
    LOSS_ALLOWANCE_BITS,
    CRTConstants,
    crt_constants,
    kept_bits,
    rounds_to_nearest,
    _kept_bits_table,
)
from ..ozaki1.scheme import (
    SIGNIFICAND_BITS,
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
    "CRTPlan",
    "PreparedCRTOperand",
    "analyse_columns",
    "analyse_rows",
    "bits_needed",
    "check_inner_dimension",
    "choose_plan",
    "crt_constants",
    "crt_reconstruct",
    "crt_zgemm",
    "fixed_plan",
    "int8_crt_zgemm",
    "kept_bits",
    "loss_allowance",
    "mean_loss",
    "norm_exponents",
    "residues",
    "rounds_to_nearest",
    "scaled_pieces",
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


def analyse_rows(x, block_rows: int | None = None, *, moments: bool = True):
    """Norm exponents and (optionally) the loss moments of the rows of ``x``, blockwise.

    Args:
        x: ``(rows, k)`` complex128 (``b.T`` for the columns of B).
        block_rows: rows per block (bounds temporaries, ~40 bytes a scalar); ``None``: all.
        moments: also compute the loss moments.

    Returns:
        ``(f, mom)``: :func:`norm_exponents` and the loss moments, ``(2,)`` int64
        ``[count, sum_j]``: the number of nonzero real scalars and the sum of their bins
        ``j = d + 2 - a`` (``d = f - floor(log2|x|) - 1``, ``a`` = :func:`loss_allowance` of the
        row; module docstring); ``None`` without ``moments``. The signed loss is linear in
        ``j`` and ``0 <= j <= 2115`` for every finite scalar (``f <= 1038``,
        ``floor(log2|x|) >= -1074``), so these two integers are all that :func:`mean_loss`
        needs: ``sum_j = sum_rows nnz (f + 2 - a) - sum_scalars (floor(log2|x|) + 1)``, which
        the GPU computes in the two passes that find ``e`` and ``f``.

    Raises:
        NonFiniteError: NaN or Inf in ``x``.
    """
    xp = array_namespace(x)
    rows = x.shape[0]
    block_rows = rows if block_rows is None else max(1, int(block_rows))
    f = xp.empty(rows, dtype=xp.int32)
    count = total = 0
    for i0 in range(0, rows, block_rows):
        blk = x[i0 : i0 + block_rows]
        fb = norm_exponents(blk, row_exponents(blk, xp), xp)
        f[i0 : i0 + block_rows] = fb
        if moments:
            nnz = xp.count_nonzero(blk.real, axis=1) + xp.count_nonzero(blk.imag, axis=1)
            shift = fb.astype(xp.int64) + LOSS_ALLOWANCE_BITS - loss_allowance(nnz, xp)
            ev = xp.frexp(blk.real)[1].astype(xp.int64).sum() + \
                xp.frexp(blk.imag)[1].astype(xp.int64).sum()  # frexp(0) = (0, 0)
            count += int(nnz.sum())
            total += int((nnz * shift).sum()) - int(ev)
    return f, (np.array([count, total], dtype=np.int64) if moments else None)


def loss_allowance(nnz, xp: ModuleType = np):
    """``a = min(2, floor(log2(nnz) / 2))``: bits of FP64's accumulation error allowed per scalar
    of a row with ``nnz >= 1`` nonzero real scalars (module docstring); int32 array."""
    _, bl = xp.frexp(xp.maximum(xp.asarray(nnz), 1).astype(xp.float64))  # bit length
    return xp.minimum(LOSS_ALLOWANCE_BITS, (bl - 1) // 2).astype(xp.int32)


_LOSS_OFFSET = 1 + SIGNIFICAND_BITS - LOSS_ALLOWANCE_BITS  # loss = j + 52 - g


def mean_loss(mom, kept: int) -> float:
    """Mean mantissa loss in bits, ``j + 52 - kept`` (signed; module docstring), over the nonzero
    scalars counted in ``mom`` (:func:`analyse_rows`'s ``[count, sum_j]``). Negative: bits to
    spare on average.

    0.0 when ``mom`` counts nothing (an all-zero operand).
    """
    count, total = (int(v) for v in np.asarray(mom)[:2])
    if count == 0:
        return 0.0
    return total / count + _LOSS_OFFSET - kept


def bits_needed(mom, threshold: float, limit: int) -> int | None:
    """The fewest kept bits ``g`` in ``0..limit`` with :func:`mean_loss` ``<= threshold``.

    Returns ``None`` when even ``limit`` bits lose more than ``threshold`` on average.
    """
    if int(np.asarray(mom)[0]) == 0:
        return 0
    g = max(0, math.ceil(mean_loss(mom, 0) - threshold))  # mean_loss(mom, g) = mean_loss(mom, 0) - g
    return g if g <= limit else None


@dataclass(frozen=True)
class CRTPlan:
    """How one scheme II GEMM runs.

    Attributes:
        num_moduli: ``N``.
        bits_a, bits_b: ``gA``, ``gB``, the bits each row of A / column of B keeps below its
            scaling point (``gA + gB = gamma(N)``).
        mean_loss_a, mean_loss_b: mean mantissa loss over the nonzero scalars (``None`` for a
            fixed ``N``, where the loss moments are not computed).
    """

    num_moduli: int
    bits_a: int
    bits_b: int
    mean_loss_a: float | None = None
    mean_loss_b: float | None = None

    @property
    def rounding(self) -> bool:
        """Scaled integers rounded to nearest (else truncated): :func:`rounds_to_nearest`."""
        return rounds_to_nearest(self.num_moduli, self.bits_a, self.bits_b)


def fixed_plan(num_moduli: int) -> CRTPlan:
    """``int8-crt{N}``: ``gamma(N)`` split evenly, the odd bit to A."""
    g = kept_bits(num_moduli)
    return CRTPlan(num_moduli, g - g // 2, g // 2)


def choose_plan(mom_a, mom_b, threshold: float) -> CRTPlan | None:
    """``int8-crt-auto``: the fewest moduli whose bit budget keeps both mean losses ``<= T``.

    Args:
        mom_a, mom_b: loss moments of A's rows and B's columns (:func:`analyse_rows`).
        threshold: ``T`` in bits (>= 0).

    Returns:
        The :class:`CRTPlan`, or ``None`` when 20 moduli do not suffice (fall back to native).
    """
    limit = kept_bits(MAX_MODULI)
    ga, gb = bits_needed(mom_a, threshold, limit), bits_needed(mom_b, threshold, limit)
    if ga is None or gb is None:
        return None
    for n, g in _kept_bits_table():  # once per state-vector gate, on the GPU's critical path
        if g >= ga + gb:
            surplus = g - ga - gb
            ga2 = ga + surplus - surplus // 2
            gb2 = g - ga2
            return CRTPlan(n, ga2, gb2, mean_loss(mom_a, ga2), mean_loss(mom_b, gb2))
    return None


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
    exponents, its loss moments and its INT8 residues for every modulus are computed once.

    On the GPU the analysis is only launched here: its counters (the loss moments and the
    NaN/Inf flag) reach the host with B's, in the one transfer that the GEMM waits for anyway
    (:func:`ozsim.gemm.ozaki2.cuda.settle`), so that a state-vector gate costs one host sync,
    not two.

    Args:
        matrix: ``(m, k)`` complex128, NumPy or CuPy.

    Raises:
        NonFiniteError: NaN or Inf in ``matrix`` (on the GPU: at the first GEMM or
            :attr:`loss_moments`, when the counters arrive).
    """

    matrix: object
    norm_exponents: object = field(init=False)
    _moments: object = field(init=False, default=None, repr=False)
    _pending: object = field(init=False, default=None, repr=False)
    _residues: dict = field(init=False, default_factory=dict, repr=False)
    _device_cache: dict = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self):
        gpu = _gpu_module() if array_namespace(self.matrix) is not np else None
        if gpu is not None:  # pragma: no cover - GPU: counters fetched with B's (settle)
            self.norm_exponents, self._pending = gpu.analyse_launch(self.matrix)
            return
        self.norm_exponents, self._moments = analyse_rows(self.matrix, moments=False)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.matrix.shape)

    @property
    def loss_moments(self):
        """Loss moments ``[count, sum_j]`` of A's rows (:func:`analyse_rows`), on first use."""
        if self._moments is None:
            gpu = _gpu_module() if array_namespace(self.matrix) is not np else None
            if gpu is not None:  # pragma: no cover - GPU: the counters launched at __init__
                gpu.settle(self)
            else:
                self._moments = analyse_rows(self.matrix)[1]
        return self._moments

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
        b_exponents = analyse_rows(b.T, nb, moments=False)[0]
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


def analyse_columns(b, workspace_bytes: int | None = None, *, moments: bool = True):
    """:func:`analyse_rows` of ``b.T`` (B's columns), in blocks that fit ``workspace_bytes``."""
    xp = array_namespace(b)
    if xp is not np:  # pragma: no cover - GPU
        return _gpu_module().analyse(b.T, moments=moments)
    ws = default_workspace_bytes(xp) if workspace_bytes is None else workspace_bytes
    k = b.shape[0]
    return analyse_rows(b.T, max(1, ws // (48 * max(k, 1))), moments=moments)


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
    gpu = _gpu_module() if array_namespace(b) is not np else None
    if gpu is not None:  # pragma: no cover - GPU: B's counters and A's pending, one sync
        f_b, acc_b = gpu.analyse_launch(b.T)
        (mom_b,) = gpu.settle(prep, acc_b)
    else:
        f_b, mom_b = analyse_columns(b, workspace_bytes)
    plan = choose_plan(prep.loss_moments, mom_b, T)
    if plan is None:
        return None, None
    c = int8_crt_zgemm(prep, b, plan, b_exponents=f_b, out=out, workspace_bytes=workspace_bytes)
    return c, plan
