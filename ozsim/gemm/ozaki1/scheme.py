"""Ozaki scheme I over INT8: the emulated ZGEMM of ozIMMU, written once against an array namespace.

References:
    [ozIMMU] H. Ootomo, K. Ozaki, R. Yokota, "DGEMM on integer matrix multiplication unit",
        IJHPCA 2024 (arXiv:2306.11975): Sec. 3 and Alg. 3-4 (splitting and accumulation),
        Sec. 4.4 (complex GEMM and INT8-AUTO).
    [Ozaki2012] K. Ozaki, T. Ogita, S. Oishi, S. M. Rump, "Error-free transformations of matrix
        multiplication by using fast routines of matrix multiplication and its applications",
        Numer. Algorithms 59 (2012): the error-free splitting this scheme is built on.

The algorithm, for ``C = A @ B`` with ``A`` (m, k), ``B`` (k, n) complex128:

1. *Scaling* (Alg. 3, line 1-3). Each row of ``A`` and each column of ``B`` gets a power-of-two
   exponent ``e = floor(log2(mx)) + 1`` from its largest magnitude ``mx`` over real *and* imaginary
   parts (one shared exponent per complex row/column), so every scaled scalar ``x * 2**-e`` lies in
   (-1, 1). ``np.ldexp`` does the scaling exactly, subnormals and huge exponents included.
2. *Splitting* (Alg. 3). The scaled value is cut into ``s`` slices of ``b`` bits, each the
   nearest integer (ties to even) clipped to ``[-(2**b - 1), 2**b - 1]``:
   ``x_1 = clip(rint(x * 2**b))``, then the remainder again. Every step is exact in FP64, every
   slice is an INT8, and each remainder is below 1 in magnitude (at most 1/2 unless clipped),
   so ``s`` slices represent the scaled value to within ``2**(-s b)``. Rounding rather than
   truncating (the ozIMMU paper's split) gives the later slices both signs, so the slice
   products the scheme drops (``i + j > s + 1``) are not correlated with the product: with
   truncation every dropped term has the sign of the value and each GEMM shrinks the result by
   about ``2**-53``, a bias that adds up linearly over a circuit's gates
   (``benchmarks/accuracy/slice_bias.py`` measures it).
   ``b = min(7, floor((31 - ceil(log2 k)) / 2))``, so that a length-k dot product of two slices,
   ``|sum| <= k * (2**b - 1)**2 < 2**31``, is exact in INT32.
3. *Products* (Alg. 4). The ``s(s+1)/2`` slice products ``A_i B_j`` with ``i + j <= s + 1`` are
   computed as exact integer GEMMs. Products of equal ``t = i + j`` share the weight
   ``2**(-t b)``, so they are summed exactly first: ``P_t = sum_{i+j=t} A_i B_j``. Complex
   operands are stacked as ``[Ar; Ai]`` (2m, k) and ``[Br, Bi]`` (k, 2n): one real product gives
   ``ArBr, ArBi, AiBr, AiBi`` and ``Re P_t = ArBr - AiBi``, ``Im P_t = ArBi + AiBr`` (Sec. 4.4),
   still exact integers.
4. *Accumulation* in FP64, in a fixed order (t = s+1 down to 2, smallest weights first):
   ``acc = acc + P_t * 2**(-t b)``, then ``C_ij = ldexp(acc_ij, eA_i + eB_j)``. ``P_t * 2**(-tb)``
   is exact, so a fused multiply-add gives the same bits as a multiply and an add: the result
   does not depend on the BLAS, the device, or blocking.

On the CPU the integer GEMMs run through FP64 BLAS on the slice values. This is exact: every
product of two slices is an integer of magnitude below 2**14, and every partial sum of
``P_t`` (at most ``2 * (t - 1) * k`` such products, the factor 2 from the complex sum) is an integer
of magnitude below ``2 * 17 * k * 2**14 < 2**53`` for any ``k < 2**33``; integers below 2**53 add
exactly in FP64 in any order, with or without FMA. ``tests/test_gemm.py`` checks the bound and the
exactness against Python integers.

INT8-AUTO (Sec. 4.4, with ozsim's correction). The mantissa loss, for ``s`` slices, of a nonzero
real scalar ``x`` in a row of ``A`` (column of ``B``) whose exponent is ``e`` is
``max(0, e - floor(log2|x|) + 53 - s*b)`` bits: the bits of ``x`` below the row's scaling point,
its 53-bit significand included, minus the ``s*b`` bits the slices keep (the ozIMMU library's
rule; it counts one bit more than strictly needed for the row's largest element, so it errs on the
safe side). ozsim averages over the *nonzero* scalars of each operand separately and takes the
smallest ``s`` in 3..18 whose two means are both ``<= T``. The literal rule (mean over all
``2(mk + kn)`` scalars, zeros included) is diluted by zeros: on the first gate of a circuit the
state ``|0...0>`` has one nonzero in ``2**N`` and the literal rule would pick ``s = 3`` (21 bits).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import InitVar, dataclass, field
from types import ModuleType

import numpy as np

from ..._array import array_namespace
from ...errors import NonFiniteError

__all__ = [
    "MAX_SPLITS",
    "MIN_SPLITS",
    "PreparedOperand",
    "SplitOperand",
    "analyse_rows",
    "bits_per_slice",
    "choose_num_splits",
    "reduce_histograms",
    "reduced_histogram",
    "default_workspace_bytes",
    "int8_zgemm",
    "loss_histogram",
    "mean_loss",
    "row_exponents",
    "split_columns",
    "split_rows",
]

MIN_SPLITS = 3
MAX_SPLITS = 18
SIGNIFICAND_BITS = 53
#: Exponent differences above this are clamped in the loss histogram (FP64 spans 2098 binades).
_MAX_EXP_DIFF = 2200


def bits_per_slice(k: int) -> int:
    """Bits per INT8 slice, ``b = min(7, floor((31 - ceil(log2 k)) / 2))`` ([ozIMMU] Sec. 3).

    With this ``b`` a length-``k`` dot product of two slices is exact in INT32.

    Raises:
        ValueError: ``k < 1`` or ``k`` so large that ``b < 1`` (``k > 2**29``).
    """
    if k < 1:
        raise ValueError(f"inner dimension k must be >= 1, got {k}")
    b = min(7, (31 - (int(k) - 1).bit_length()) // 2)
    if b < 1:
        raise ValueError(f"inner dimension k = {k} is too large for exact INT32 slice products")
    return b


def row_exponents(x, xp: ModuleType | None = None):
    """Scaling exponents of the rows of a complex matrix ([ozIMMU] Alg. 3, line 1-3).

    Args:
        x: ``(rows, k)`` complex128 (any strides).

    Returns:
        ``(rows,)`` int32: ``e`` with ``max_j max(|Re x_ij|, |Im x_ij|) < 2**e``
        (``floor(log2 max) + 1``); 0 for an all-zero row.

    Raises:
        NonFiniteError: NaN or Inf in ``x``.
    """
    xp = xp or array_namespace(x)
    mx = xp.maximum(xp.abs(x.real).max(axis=1), xp.abs(x.imag).max(axis=1))
    if not bool(xp.isfinite(mx).all()):
        raise NonFiniteError("GEMM operand has NaN or Inf entries")
    _, e = xp.frexp(mx)
    return e.astype(xp.int32)


def loss_histogram(x, exps, xp: ModuleType | None = None):
    """Histogram of ``e_row - floor(log2 |x|) - 1`` over the nonzero real scalars of ``x``.

    Args:
        x: ``(rows, k)`` complex128; its real and imaginary parts are the scalars.
        exps: ``(rows,)`` int32 from :func:`row_exponents`.

    Returns:
        ``(_MAX_EXP_DIFF + 1,)`` int64 counts; entry ``d`` counts scalars whose leading bit lies
        ``d`` bits below the row's scaling point (``d >= 0``).
    """
    xp = xp or array_namespace(x)
    hist = xp.zeros(_MAX_EXP_DIFF + 1, dtype=xp.int64)
    for part in (x.real, x.imag):
        mant, e = xp.frexp(part)
        d = exps[:, None] - e
        d = d[mant != 0]
        hist += xp.bincount(xp.minimum(d, _MAX_EXP_DIFF).ravel(), minlength=_MAX_EXP_DIFF + 1)
    return hist


def mean_loss(hist, num_splits: int, bits: int, significand_bits: int = SIGNIFICAND_BITS) -> float:
    """Mean mantissa loss in bits over the nonzero scalars counted by ``hist``.

    ``loss = max(0, d + 1 + p - s*b)`` for a scalar ``d`` bits below its row's scaling point (see
    the module docstring), ``p = significand_bits``: 53 for FP64 data, 24 for FP32 data fed
    through scheme I (:mod:`ozsim.gemm.single`). Returns 0.0 when ``hist`` counts nothing.
    """
    h = np.asarray(hist.get() if hasattr(hist, "get") else hist, dtype=np.float64)
    total = h.sum()
    if total == 0:
        return 0.0
    d = np.arange(h.size)
    loss = np.maximum(0, d + 1 + significand_bits - num_splits * bits)
    return float((h * loss).sum() / total)


#: Set by :func:`reduce_histograms`: sums B's histogram over the ranks of a distributed state.
_HISTOGRAM_REDUCER = None


@contextmanager
def reduce_histograms(reducer):
    """Within the block, INT8-AUTO (:func:`choose_num_splits`) first passes B's loss histogram
    through ``reducer``: for a state vector spread over ranks (:mod:`ozsim.distributed`),
    ``reducer`` sums the ranks' histograms (an allreduce), so every rank picks the number of
    slices the whole state's statistics give, as one process would (same bits).

    Args:
        reducer: ``reducer(hist) -> hist`` on a NumPy int64 histogram (:func:`loss_histogram`).
    """
    global _HISTOGRAM_REDUCER
    previous, _HISTOGRAM_REDUCER = _HISTOGRAM_REDUCER, reducer
    try:
        yield
    finally:
        _HISTOGRAM_REDUCER = previous


def reduced_histogram(hist):
    """``hist`` through the :func:`reduce_histograms` reducer in force (itself without one)."""
    return hist if _HISTOGRAM_REDUCER is None else _HISTOGRAM_REDUCER(hist)


def choose_num_splits(hist_a, hist_b, bits: int, threshold: float,
                      significand_bits: int = SIGNIFICAND_BITS) -> int | None:
    """INT8-AUTO: the fewest splits in 3..18 whose mean loss is ``<= threshold`` for both operands.

    Args:
        hist_a, hist_b: loss histograms of A (rows) and B (columns), :func:`loss_histogram`.
        bits: bits per slice.
        threshold: ``T`` in bits (>= 0).
        significand_bits: the significand the loss is counted against (:func:`mean_loss`): 53
            (FP64 data), or 24 for FP32 data.

    Returns:
        The number of splits, or ``None`` when no ``s <= 18`` qualifies (fall back to native ZGEMM).
    """
    hist_b = reduced_histogram(hist_b)  # (a state spread over ranks: the whole state's)
    s_a = fewest_splits(hist_a, bits, threshold, significand_bits)
    s_b = fewest_splits(hist_b, bits, threshold, significand_bits)
    return None if s_a is None or s_b is None else max(s_a, s_b)  # (the loss falls with s)


def fewest_splits(hist, bits: int, threshold: float,
                  significand_bits: int = SIGNIFICAND_BITS) -> int | None:
    """The fewest splits in 3..18 whose mean loss over ``hist`` is ``<= threshold`` (one
    operand's half of :func:`choose_num_splits`), or ``None``."""
    ok = _mean_losses(hist, bits, significand_bits) <= threshold
    return MIN_SPLITS + int(np.argmax(ok)) if ok.any() else None


def _mean_losses(hist, bits: int, significand_bits: int) -> np.ndarray:
    """:func:`mean_loss` for every ``s`` in ``MIN_SPLITS..MAX_SPLITS`` at once (the same
    numbers: the loss sums are exact integers, divided once by the count)."""
    h = np.asarray(hist.get() if hasattr(hist, "get") else hist, dtype=np.int64)
    total = int(h.sum())
    s = np.arange(MIN_SPLITS, MAX_SPLITS + 1)
    if total == 0:
        return np.zeros(s.size)
    d = np.flatnonzero(h)  # (the occupied bins only)
    loss = np.maximum(0, d[None, :] + 1 + significand_bits - bits * s[:, None])
    return (loss * h[d]).sum(axis=1) / total


def analyse_rows(x, block_rows: int, *, histogram: bool = True):
    """Row exponents and (optionally) the loss histogram of ``x``, a block of rows at a time.

    Args:
        x: ``(rows, k)`` complex128 (any strides).
        block_rows: rows per block, to bound temporaries (about 40 bytes a scalar).

    Returns:
        ``(exps, hist)``: :func:`row_exponents` and :func:`loss_histogram` of ``x`` (``hist`` is
        ``None`` without ``histogram``).
    """
    xp = array_namespace(x)
    rows = x.shape[0]
    exps = xp.empty(rows, dtype=xp.int32)
    hist = xp.zeros(_MAX_EXP_DIFF + 1, dtype=xp.int64) if histogram else None
    for i0 in range(0, rows, block_rows):
        blk = x[i0 : i0 + block_rows]
        exps[i0 : i0 + block_rows] = row_exponents(blk, xp)
        if histogram:
            hist += loss_histogram(blk, exps[i0 : i0 + block_rows], xp)
    return exps, hist


def split_rows(x, exps, num_splits: int, bits: int, *, reverse: bool = False, dtype=None):
    """Split the rows of a complex matrix into INT8 slices ([ozIMMU] Alg. 3).

    Args:
        x: ``(rows, k)`` complex128 (any strides).
        exps: ``(rows,)`` int32 scaling exponents from :func:`row_exponents`.
        num_splits: ``s``.
        bits: ``b``, bits per slice.
        reverse: store slice ``s - 1 - i`` at position ``i`` (the layout the B operand uses, so
            that each group ``sum_{i+j=t} A_i B_j`` is one contiguous product).
        dtype: storage dtype of the slices (default: float64 for NumPy, int8 for CuPy).

    Returns:
        ``(2 * rows, s, k)`` array: rows ``0..rows-1`` hold the real parts' slices, rows
        ``rows..2 rows-1`` the imaginary parts'. Each value is an integer in ``[-(2**b-1), 2**b-1]``
        and ``x_scaled = sum_i slice_i * 2**(-(i+1) b) + r`` with ``|r| < 2**(-s b)``.
    """
    xp = array_namespace(x)
    if dtype is None:
        dtype = xp.float64 if xp is np else xp.int8
    rows, k = x.shape
    out = xp.empty((2 * rows, num_splits, k), dtype=dtype)
    scale = (bits - exps)[:, None]
    lim = (1 << bits) - 1
    for half, part in enumerate((x.real, x.imag)):
        r = xp.ldexp(part, scale)  # exact: x * 2**(b - e), |r| < 2**b
        dst = out[half * rows : (half + 1) * rows]
        for i in range(num_splits):
            q = xp.clip(xp.rint(r), -lim, lim)
            dst[:, num_splits - 1 - i if reverse else i, :] = q
            if i + 1 < num_splits:
                r -= q  # exact: the remainder, |r - q| < 1
                r *= 1 << bits  # exact: a power of two
    return out


@dataclass
class SplitOperand:
    """One operand split into slices; see :func:`split_rows`.

    Attributes:
        slices: ``(2 * rows, s, k)`` slices (float64 on the CPU, int8 on the GPU).
        exponents: ``(rows,)`` int32 scaling exponents.
        num_splits: ``s``.
        bits: ``b``.
    """

    slices: object
    exponents: object
    num_splits: int
    bits: int


@dataclass
class PreparedOperand:
    """The A operand of :func:`int8_zgemm` analysed once and split on demand, cached by ``s``.

    A gate matrix is multiplied into many state vectors (and block after block of one state);
    preparing it once moves its exponents, loss histogram and slices out of the per-GEMM work.

    Args:
        matrix: ``(m, k)`` complex128, NumPy or CuPy.
        host: for a CuPy ``matrix``, optionally the same values as a NumPy array: analysed on
            the host (the same exponents and histogram), so that preparing a gate does not
            wait for the device's queue (the GPU analysis returns its histogram to the host).

    Raises:
        NonFiniteError: NaN or Inf in ``matrix``.
    """

    matrix: object
    host: InitVar[object] = None
    exponents: object = field(init=False)
    histogram: object = field(init=False)
    _splits: dict = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self, host=None):
        xp = array_namespace(self.matrix)
        if xp is not np and host is not None:  # pragma: no cover - GPU
            host = np.asarray(host, dtype=np.complex128)
            exps = row_exponents(host)
            self.histogram = loss_histogram(host, exps)
            self.exponents = xp.asarray(exps)
            return
        if xp is not np:  # pragma: no cover - GPU
            from . import cuda as _cuda  # one fused kernel; the histogram comes back as NumPy

            self.exponents, self.histogram = _cuda.analyse(self.matrix)
            return
        self.exponents = row_exponents(self.matrix)
        self.histogram = loss_histogram(self.matrix, self.exponents)

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.matrix.shape)

    def split(self, num_splits: int, bits: int) -> SplitOperand:
        key = (num_splits, bits)
        if key not in self._splits:
            sl = split_rows(self.matrix, self.exponents, num_splits, bits)
            self._splits[key] = SplitOperand(sl, self.exponents, num_splits, bits)
        return self._splits[key]


def split_columns(b, exps, num_splits: int, bits: int, dtype=np.float64):
    """Split the columns of a complex matrix into slices, laid out for the CPU's BLAS products.

    The same values as :func:`split_rows` of ``b.T`` with ``reverse=True``, in the layout the CPU
    product wants: each slice a contiguous row-major ``(k, 2n)`` block ``[Re | Im]``, slices in
    reverse order, so that ``B_{t-1}, ..., B_1`` is one contiguous ``((t-1) k, 2n)`` slab.

    Args:
        b: ``(k, n)`` complex128 NumPy array (any strides).
        exps: ``(n,)`` int32 column exponents (:func:`row_exponents` of ``b.T``).
        num_splits, bits: ``s`` and ``b``.
        dtype: float64, or float32 where :func:`_float32_exact` allows.

    Returns:
        ``(s * k, 2 n)`` array; rows ``r k .. (r+1) k - 1`` hold slice ``s - r``.
    """
    k, n = b.shape
    out = np.empty((num_splits, k, 2 * n), dtype=dtype)
    scale = (bits - exps)[None, :]
    lim = (1 << bits) - 1
    for half, part in enumerate((b.real, b.imag)):
        r = np.ldexp(part, scale)  # exact, |r| < 2**b
        for i in range(num_splits):
            q = np.clip(np.rint(r), -lim, lim)
            out[num_splits - 1 - i, :, half * n : (half + 1) * n] = q
            if i + 1 < num_splits:
                r -= q  # exact: the remainder, |r - q| < 1
                r *= 1 << bits  # exact: a power of two
    return out.reshape(num_splits * k, 2 * n)


def _float32_exact(k: int, num_splits: int, bits: int) -> bool:
    """Whether FP32 BLAS computes every ``P_t`` exactly: all partial sums of the real products
    (at most ``s k`` terms of magnitude ``<= (2**b - 1)**2``) are integers below ``2**24``."""
    return num_splits * k * (2**bits - 1) ** 2 < 2**24


def _products_numpy(a_cat, b_rev, num_splits: int, k: int):
    """``P_t = sum_{i+j=t} A_i B_j`` for t = s+1 down to 2, exact, via BLAS (module docstring).

    Args:
        a_cat: ``(2m, s k)``: A's slices side by side, in order (``[A_1 ... A_s]``).
        b_rev: ``(s k, 2n)`` from :func:`split_columns` (``[B_s; ...; B_1]``).

    Yields:
        ``(t, P_t)``: ``P_t`` is ``(2m, 2n)`` in the slices' dtype, holding exact integers; its
        blocks are ``[[ArBr, ArBi], [AiBr, AiBi]]``.
    """
    s = num_splits
    for t in range(s + 1, 1, -1):
        yield t, a_cat[:, : (t - 1) * k] @ b_rev[(s - t + 1) * k :]


def _accumulate(products, m: int, n: int, bits: int, eA, eB, out, xp: ModuleType = np):
    """FP64 accumulation of the grouped products in a fixed order (module docstring, step 4):
    ``Re P_t = ArBr - AiBi`` and ``Im P_t = ArBi + AiBr`` exactly in FP64, then
    ``acc += P_t * 2**(-t b)`` from the largest ``t`` down, then ``ldexp(acc, eA_i + eB_j)``.
    Written against ``xp`` (one operation a step, so no FMA contraction on either device)."""
    acc_re = xp.empty((m, n))
    acc_im = xp.empty((m, n))
    tmp = xp.empty((m, n))
    first = True
    for t, p in products:
        w = 2.0 ** (-t * bits)
        for acc, (x, y, op) in (
            (acc_re, (p[:m, :n], p[m:, n:], xp.subtract)),
            (acc_im, (p[:m, n:], p[m:, :n], xp.add)),
        ):
            dst = acc if first else tmp
            op(x, y, out=dst, dtype=np.float64)  # exact integers
            dst *= w  # exact: a power of two
            if not first:
                acc += tmp
        first = False
    e = eA[:, None] + eB[None, :]
    out.real[...] = xp.ldexp(acc_re, e)
    out.imag[...] = xp.ldexp(acc_im, e)
    return out


#: Default bound on the CPU path's slice buffers (``workspace_bytes=None``).
CPU_WORKSPACE_BYTES = 1 << 28


def default_workspace_bytes(xp: ModuleType, reserve: int = 0) -> int:
    """The working-memory budget that ``workspace_bytes=None`` stands for.

    CPU: :data:`CPU_WORKSPACE_BYTES` (256 MiB). GPU: half the free device memory left after
    ``reserve`` bytes, clamped to 256 MiB..16 GiB (the INT32 products of a state-vector GEMM are
    ``16 s`` bytes per amplitude, so a small fixed budget would cut it into many small GEMMs).
    """
    if xp is np:
        return CPU_WORKSPACE_BYTES
    from . import cuda as _cuda  # pragma: no cover - GPU

    return _cuda.default_workspace_bytes(reserve)  # pragma: no cover - GPU


def _block_columns(n: int, k: int, s: int, budget_bytes: int) -> int:
    """Columns of B per block so that B's slices (16 s k bytes a column) stay within budget."""
    per_col = 16 * s * k + 64  # slices plus the (2m x 2n) products and accumulators, roughly
    return max(1, min(n, budget_bytes // per_col))


def int8_zgemm(
    a,
    b,
    num_splits: int,
    *,
    b_exponents=None,
    out=None,
    workspace_bytes: int | None = None,
):
    """``C = A @ B`` for complex128 matrices by Ozaki scheme I over INT8 with ``s`` splits.

    Args:
        a: ``(m, k)`` complex128 array or a :class:`PreparedOperand` of one.
        b: ``(k, n)`` complex128 (any strides).
        num_splits: ``s`` in 3..18; ``s(s+1)/2`` slice products, ``2 s (s+1)`` real INT8 GEMMs'
            worth of work.
        b_exponents: ``(n,)`` int32 column exponents of ``b`` if already computed.
        out: ``(m, n)`` complex128 to write into (must not overlap ``b``), or ``None``.
        workspace_bytes: bound on the slices of B held at once (on the GPU: B's slices plus the
            INT32 products); B is split block by block of columns (the result does not depend on
            the blocking). ``None``: :func:`default_workspace_bytes`.

    Returns:
        ``(m, n)`` complex128: the product, with error bounded as in [ozIMMU] Sec. 3.

    Raises:
        NonFiniteError: NaN or Inf in ``a`` or ``b``.
    """
    prep = a if isinstance(a, PreparedOperand) else PreparedOperand(a)
    xp = array_namespace(prep.matrix, b)
    m, k = prep.shape
    n = b.shape[1]
    bits = bits_per_slice(k)
    if workspace_bytes is None:
        workspace_bytes = default_workspace_bytes(xp)
    if xp is not np:  # pragma: no cover - GPU: CUDA split/accumulate kernels, cuBLAS INT8 GEMMs
        from . import cuda as _cuda

        return _cuda.int8_zgemm_gpu(
            prep, b, num_splits, bits, b_exponents=b_exponents, out=out,
            workspace_bytes=workspace_bytes,
        )
    nb = _block_columns(n, k, num_splits, workspace_bytes)
    eB = analyse_rows(b.T, nb, histogram=False)[0] if b_exponents is None else b_exponents
    if out is None:
        out = xp.empty((m, n), dtype=xp.complex128)
    return products_cpu(prep, b, eB, num_splits, bits, nb, out)


def products_cpu(prep: PreparedOperand, b, b_exponents, num_splits: int, bits: int,
                 block_columns: int, out):
    """Steps 2-4 of the module docstring on the CPU, block by block of ``block_columns``
    columns: B's ``b``-bit slices, the exact slice products (FP64 or, where exact, FP32 BLAS:
    :func:`_float32_exact`), the fixed-order accumulation into ``out``. Shared by scheme I
    (INT8 slices) and the FP16 scheme (:mod:`ozsim.gemm.fp16`, narrower slices).

    Args:
        prep: A's :class:`PreparedOperand` ``(m, k)``; b: ``(k, n)`` complex128;
        b_exponents: ``(n,)`` int32 column exponents; num_splits, bits: ``s`` and ``b``;
        block_columns: columns of B split at once; out: ``(m, n)`` complex128.

    Returns:
        ``out``.
    """
    m, k = prep.shape
    n = b.shape[1]
    dtype = np.float32 if _float32_exact(k, num_splits, bits) else np.float64
    a_cat = prep.split(num_splits, bits).slices.reshape(2 * m, num_splits * k).astype(
        dtype, copy=False)
    for j0 in range(0, n, block_columns):
        j1 = min(n, j0 + block_columns)
        b_rev = split_columns(b[:, j0:j1], b_exponents[j0:j1], num_splits, bits, dtype)
        products = _products_numpy(a_cat, b_rev, num_splits, k)
        _accumulate(products, m, j1 - j0, bits, prep.exponents, b_exponents[j0:j1],
                    out[:, j0:j1])
    return out
