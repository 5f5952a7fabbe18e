"""The GPU half of :mod:`ozsim.gemm.ozaki1`: CUDA kernels and cuBLAS INT8 GEMMs (private).

Imported only when a CuPy array reaches :mod:`ozsim.gemm` (``import ozsim`` never loads CuPy).
It computes exactly what the CPU path computes, bit for bit, on the GPU:

============  ===================================================================================
stage         what runs
============  ===================================================================================
analyse       ``oz_analyse_r`` / ``oz_analyse_t`` / ``oz_analyse_w`` (``kernels/analyse.cu``, the
              histogram's helpers in ``kernels/histogram.cuh``): one kernel reads B's columns
              (A's rows), once where a row fits a warp's registers (:func:`_analyse_vpt`),
              and writes the scaling exponents, a NaN/Inf flag and, for INT8-AUTO, the loss
              histogram (losses 0..7 counted in registers, the rest in shared memory, one
              global add per bin and block). Same integers as
              :func:`~ozsim.gemm.ozaki1.row_exponents` and
              :func:`~ozsim.gemm.ozaki1.loss_histogram`.
split         ``oz_split`` (``kernels/split.cu``): reads each complex value once, writes its
              ``2 s`` INT8 slices K-major (``(2 rows, s, kpad)``, ``kpad`` = k rounded up to 4 or
              16 with zero slices), the same exact FP64 steps as
              :func:`~ozsim.gemm.ozaki1.split_rows`.
INT8 GEMMs    ``cublasGemmEx`` with ``CUDA_R_8I`` inputs, ``CUDA_R_32I`` output and
              ``CUBLAS_COMPUTE_32I``, both operands K-major ("TN"): one INT32 plane per group
              ``P_t = sum_{i+j=t} A_i B_j`` (K = (t-1) kpad), split into planes of at most
              ``floor((2**31-1) / (k (2**b-1)**2))`` slice pairs so that each INT32 sum is exact;
              a plane's GEMM runs as :func:`gemm_tn_long`: in pieces of K <= :data:`MAX_GEMM_K`
              added with beta = 1 (cuBLAS's own INT8 choice slows down for longer K) or as one
              cuBLASLt call, whichever was faster when the shape was first seen (both in
              :mod:`ozsim.gemm._gpu`). For A with at most 32 rows (gates of d <= 4 qubits)
              ``oz_small_gemm`` (``kernels/products_dp4a.cu``) computes the same planes on the
              CUDA cores (``__dp4a``), where cuBLAS's skinny INT8 GEMMs run at a tenth of memory
              bandwidth.
speculative   ``oz_analyse_split`` (``kernels/analyse.cu``; the split's code in
              ``kernels/slices.cuh``): INT8-AUTO on the fused path below
              (:func:`int8_auto_speculative`) analyses and splits each column block of B in
              one read, for the number of slices of the last GEMM of its size, and checks that
              number against the rule afterwards.
fused         on Hopper, where :func:`_fused` holds (gates of 7 to 10 qubits), the INT8 products
              and the accumulation below are one kernel, ``oz_gemm_acc``
              (:mod:`ozsim.gemm.ozaki1.wgmma`): no INT32 plane reaches HBM.
accumulate    ``oz_accumulate`` (``kernels/accumulate.cu``): one pass reads the INT32 products of
              every group, forms ``Re = ArBr - AiBi`` and ``Im = ArBi + AiBr`` exactly in INT64,
              and accumulates ``acc = acc + P_t * 2**(-t b)`` for t = s+1 down to 2 with
              ``__dmul_rn`` / ``__dadd_rn`` (no FMA contraction; ``P_t * 2**(-tb)`` is exact, so
              the result equals the CPU's multiply-then-add), then ``ldexp(acc, eA_i + eB_j)``:
              the CPU's operations in the CPU's order, so ``int8x{s}`` results are identical on
              CPU and GPU (signed zeros aside: the CPU can produce ``-0.0`` where the GPU's
              integer products give ``+0.0``).
============  ===================================================================================

The analysis and split kernels also read a :class:`~ozsim.gemm.ozaki2.cuda.GatheredMatrix`
(``-DTAB=1``): the state through a gate's qubit permutation, without the transposing copy.

The state-vector shapes (k = 2**d small, n = 2**(N-d) large) make the INT32 products the largest
buffers: ``s`` groups of ``(2m, 2 nb)`` INT32, 16 bytes per output amplitude each. B is therefore
processed in blocks of ``nb`` columns sized to the workspace (see :func:`plan`), and the working
memory of the last call is in :data:`last_stats`.

The kernels' sources are package data, ``kernels/*.cu`` (one file a stage) and ``kernels/*.cuh``,
compiled by NVRTC through :func:`ozsim.gemm._gpu.raw_module` (local headers inlined), once per
file and ``-D`` options (``-DMAXD``, ``-DCH``, ``-DMP2``). The helpers both schemes use (stage
timing, cuBLAS and cuBLASLt GEMMs, :func:`padded_k`, ...) live in :mod:`ozsim.gemm._gpu` and are
also reachable here under their old names.

References:
    [ozIMMU] H. Ootomo, K. Ozaki, R. Yokota, "DGEMM on integer matrix multiplication unit",
        IJHPCA 2024 (arXiv:2306.11975), Alg. 3-4, Sec. 4.4.
    cuBLAS documentation, ``cublasGemmEx`` (INT8 inputs, INT32 compute: lda/ldb multiples of 4,
        4-byte aligned pointers, "TN").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cupy as cp
import numpy as np

from ... import config
from ...errors import NonFiniteError
from .._gpu import (  # noqa: F401 - the shared helpers, also reached as ozaki1.cuda.<name>
    _COMPUTE_32I,
    _CUDA_R_8I,
    _CUDA_R_32I,
    _GEMM_DEFAULT,
    _ONE,
    _OP_N,
    _OP_T,
    _POINTER_MODE_HOST,
    _THREADS,
    _ZERO,
    MAX_GEMM_K,
    _gemm_tn,
    _sms,
    _stage,
    _strides,
    cublas,
    default_workspace_bytes,
    gemm_tn_long,
    padded_k,
    profile_stages,
    raw_module,
)

__all__ = ["analyse", "split", "int8_zgemm_gpu", "plan", "profile_stages", "last_stats"]

#: Must match ``ozaki1._MAX_EXP_DIFF``.
MAX_EXP_DIFF = 2200


# -- kernels --------------------------------------------------------------------------------------
#: The CUDA sources of the stages (package data: ``kernels/*.cu``, ``kernels/*.cuh``).
_KERNELS = Path(__file__).parent / "kernels"


def _analyse_vpt(k: int) -> int | None:
    """Values a thread of ``oz_analyse_r`` holds for rows of length ``k`` (``-DVPT``; ``k / VPT``
    threads a row, a power of two <= 32), or ``None`` where the two-read kernels run. Fewer values
    a thread leave room for more warps: H200, N = 30, the state through the permutation (random
    targets and the lowest ones), the analysis in copy floors at d = 7 / 8 / 9 with VPT = 8:
    0.57-0.62 / 0.62-0.83 / - (k / 8 > 32 at d = 9), VPT = 16: 0.71-0.75 / 0.73-0.94 /
    0.79-0.85, VPT = 32: 1.26-1.30 / 1.39-1.70 / 1.40-1.45, the two-read kernels: 0.58-1.05 /
    0.65-0.99 / 0.95-1.04; at d = 10 (VPT = 32) 1.43-1.90 against the two-read kernels'
    0.95-1.04."""
    for vpt in (8, 16):
        tpr = k // vpt
        if k % vpt == 0 and 1 <= tpr <= 32 and tpr & (tpr - 1) == 0:
            return vpt
    return None


def _kernel(name: str, tab: bool = False, vpt: int = 8):
    """``oz_analyse_r`` / ``oz_analyse_split`` / ``oz_analyse_t`` / ``oz_analyse_w``
    (``kernels/analyse.cu``; ``tab``: reading through offset tables; ``vpt``: values a thread of
    the first two) or ``oz_accumulate`` (``kernels/accumulate.cu``)."""
    if name in ("oz_analyse_r", "oz_analyse_split", "oz_analyse_t", "oz_analyse_w"):
        return raw_module(_KERNELS / "analyse.cu",
                          (f"-DMAXD={MAX_EXP_DIFF}", f"-DTAB={int(tab)}",
                           f"-DVPT={vpt}")).get_function(name)
    if name == "oz_accumulate":
        return raw_module(_KERNELS / "accumulate.cu").get_function(name)
    raise KeyError(name)


def _geometry(x) -> tuple[int, int, object, object]:
    """``(sr, sc, roff, koff)`` of the analysis and split kernels on ``x`` ``(rows, k)``: element
    strides (of the lowest index bit, for a :class:`~ozsim.gemm.ozaki2.cuda.GatheredMatrix`: the
    kernels' thread mapping) and its offset tables, or null pointers for a strided array."""
    if getattr(x, "_ozsim_gathered", False):
        sr, sc = x.strides_elements
        return sr, sc, x.row_offsets, x.col_offsets
    sr, sc = _strides(x)
    return sr, sc, np.uint64(0), np.uint64(0)


def _small_kernel(mp2: int):
    """``oz_small_gemm`` (``kernels/products_dp4a.cu``) for A of ``mp2`` stored rows."""
    return raw_module(_KERNELS / "products_dp4a.cu", (f"-DMP2={mp2}",)).get_function(
        "oz_small_gemm")


def _split_kernel(chunk: int, tab: bool = False):
    """``oz_split`` (``kernels/split.cu``) storing ``chunk`` bytes a thread and slice (``tab``:
    reading through offset tables)."""
    return raw_module(_KERNELS / "split.cu", (f"-DCH={chunk}", f"-DTAB={int(tab)}")).get_function(
        "oz_split")


def _grid(total: int) -> int:
    """Blocks for a grid-stride loop over ``total`` items: enough to fill the GPU, no more."""
    return int(max(1, min(-(-total // _THREADS), 32 * _sms())))


# -- analysis and splitting ---------------------------------------------------------------------
def analyse(x, histogram: bool = True):
    """Row exponents and loss histogram of a complex matrix on the GPU: one read of each value
    for ``k`` a power of two up to 512 (``oz_analyse_r``, the values in registers; the state's
    columns for gates of up to 9 qubits), else two (the row's exponent, then each value's loss).

    Args:
        x (cupy.ndarray): ``(rows, k)`` complex128, any strides (``b.T`` for B's columns), or a
            :class:`~ozsim.gemm.ozaki2.cuda.GatheredMatrix` (the state read through a gate's
            qubit permutation).
        histogram: also count the loss histogram.

    Returns:
        ``(exps, hist)``: ``(rows,)`` int32 CuPy exponents, equal to
        :func:`~ozsim.gemm.ozaki1.row_exponents`; ``(MAX_EXP_DIFF + 1,)`` int64 **NumPy**
        histogram equal to :func:`~ozsim.gemm.ozaki1.loss_histogram` (``None`` without
        ``histogram``). The histogram is brought to the host once because INT8-AUTO's choice
        is made there.

    Raises:
        NonFiniteError: NaN or Inf in ``x`` (checked on the host after the kernel: one sync).
    """
    rows, k = x.shape
    exps = cp.empty(rows, dtype=cp.int32)
    hist = cp.zeros(MAX_EXP_DIFF + 1, dtype=cp.uint64) if histogram else None
    flag = cp.zeros(1, dtype=cp.int32)
    if rows and k:
        sr, sc, roff, koff = _geometry(x)
        tab = not isinstance(roff, np.uint64)
        thread_per_row = abs(sr) <= abs(sc)
        vpt = _analyse_vpt(k)
        if vpt:
            name, grid = "oz_analyse_r", _grid(-(-rows * (k // vpt) // 32) * 32)
        elif thread_per_row:
            name, grid = "oz_analyse_t", _grid(rows)
        else:
            name, grid = "oz_analyse_w", _grid(rows * 32)
        args = (x.data if tab else x, np.int64(rows), np.int64(k), np.int64(sr), np.int64(sc),
                exps, hist if histogram else np.uint64(0), flag, roff, koff)
        with _stage("analyse"):
            _kernel(name, tab, vpt or 8)((grid,), (_THREADS,), args)
    elif rows:
        exps.fill(0)
    if int(flag.get()[0]):
        raise NonFiniteError("GEMM operand has NaN or Inf entries")
    return exps, (hist.get().view(np.int64) if histogram else None)


def padded_rows(rows: int) -> int:
    """Rows per half (real, imaginary) as stored: even, so that ``2 * rows`` is a multiple of 4."""
    return rows + (rows & 1)


def _chunk(kpad: int) -> int:
    return 16 if kpad % 16 == 0 else (8 if kpad % 8 == 0 else 4)


def split(x, exps, num_splits: int, bits: int, *, reverse: bool = False, kpad: int | None = None,
          rows_alloc: int | None = None, out=None):
    """INT8 slices of the rows of ``x``, K-major and zero-padded: :func:`ozaki1.split_rows` on GPU.

    Args:
        x (cupy.ndarray): ``(rows, k)`` complex128, any strides, or a
            :class:`~ozsim.gemm.ozaki2.cuda.GatheredMatrix`.
        exps (cupy.ndarray): ``(rows,)`` int32 exponents.
        num_splits, bits, reverse: as :func:`~ozsim.gemm.ozaki1.split_rows`.
        kpad: stored inner dimension (default :func:`padded_k`).
        rows_alloc: stored rows per half (default :func:`padded_rows`); the imaginary parts start
            at row ``rows_alloc``.
        out (cupy.ndarray): ``(2 rows_alloc, s, kpad)`` int8 buffer to fill, or ``None``.

    Returns:
        ``(2 rows_alloc, s, kpad)`` int8: ``[:rows, :, :k]`` and ``[rows_alloc:rows_alloc+rows,
        :, :k]`` equal the real and imaginary halves of ``split_rows(...)``; the rest is 0.
    """
    rows, k = x.shape
    kpad = padded_k(k) if kpad is None else kpad
    ra = padded_rows(rows) if rows_alloc is None else rows_alloc
    if out is None:
        out = cp.empty((2 * ra, num_splits, kpad), dtype=cp.int8)
    if ra == 0:
        return out
    sr, sc, roff, koff = _geometry(x) if rows and k else (1, 1, np.uint64(0), np.uint64(0))
    tab = not isinstance(roff, np.uint64)
    ch = _chunk(kpad)
    nq = kpad // ch
    qb = 0
    if abs(sr) <= abs(sc):  # rows adjacent in memory: tiles of rows x chunks per warp
        qb = 1
        while qb * 2 <= min(nq, 8):
            qb *= 2
    total = ra * nq if qb == 0 else -(-ra // (32 // qb)) * -(-nq // qb) * 32
    _split_kernel(ch, tab)((_grid(total),), (_THREADS,),
                           (x.data if tab else x, np.int64(rows), np.int64(ra), np.int64(k),
                            np.int64(kpad), np.int64(sr), np.int64(sc), exps, np.int32(bits),
                            np.int32(num_splits), np.int32(reverse), out, np.int32(qb), roff,
                            koff))
    return out


# -- planning -------------------------------------------------------------------------------------
def max_chunk(k: int, bits: int) -> int:
    """Most slice pairs one INT32 GEMM may sum exactly: ``c k (2**b - 1)**2 <= 2**31 - 1``."""
    return max(1, (2**31 - 1) // (k * ((1 << bits) - 1) ** 2))


def groups(num_splits: int, k: int, bits: int) -> list[tuple[int, int, int]]:
    """The INT8 GEMMs, in accumulation order: ``(t, a0, a1)`` = A slices ``a0..a1-1`` of group t.

    Group ``t`` (t = s+1 down to 2) pairs A's slice ``a`` with B's slice ``t - 2 - a``
    (0-based), stored reversed at position ``s - t + 1 + a``: one contiguous slab of each.
    """
    cmax = max_chunk(k, bits)
    out = []
    for t in range(num_splits + 1, 1, -1):
        for a0 in range(0, t - 1, cmax):
            out.append((t, a0, min(t - 1, a0 + cmax)))
    return out


@dataclass(frozen=True)
class Plan:
    """How one INT8 GEMM runs on the GPU (sizes in bytes).

    Attributes:
        kpad: stored inner dimension.
        num_gemms: INT8 GEMMs per column block (``s`` unless a group needs chunking).
        block_columns: columns of B per block; ``blocks`` of them.
        a_slice_bytes: A's slices (cached with the prepared gate).
        b_slice_bytes, product_bytes: B's slices and the INT32 products of one block.
    """

    kpad: int
    num_gemms: int
    block_columns: int
    blocks: int
    a_slice_bytes: int
    b_slice_bytes: int
    product_bytes: int

    @property
    def workspace_bytes(self) -> int:
        return self.b_slice_bytes + self.product_bytes


def plan(m: int, k: int, n: int, num_splits: int, bits: int, workspace_bytes: int) -> Plan:
    """Column blocking of B so that B's slices and the INT32 products fit ``workspace_bytes``.

    Per column of B: ``2 s kpad`` bytes of slices and ``16 G mp`` bytes of INT32 products
    (``G`` GEMMs, ``mp`` = :func:`padded_rows` of m; none where the fused kernel runs the
    products, :func:`_fused`). At least two columns per block.
    """
    kpad = padded_k(k)
    g = 0 if _fused(m, kpad, num_splits, bits) else len(groups(num_splits, k, bits))
    mp = padded_rows(m)
    per_col = 2 * num_splits * kpad + 16 * g * mp
    nb = max(1, min(n, workspace_bytes // per_col)) if n else 1
    nbp = padded_rows(nb)
    return Plan(kpad, g, nb, -(-n // nb) if n else 0, 2 * mp * num_splits * kpad,
                2 * nbp * num_splits * kpad, 16 * g * mp * nbp)


def _fused(m: int, kpad: int, num_splits: int, bits: int) -> bool:
    """Whether the products and the accumulation run as one Hopper kernel
    (:mod:`ozsim.gemm.ozaki1.wgmma`): ``OZSIM_INT8_FUSED=1`` (the default), a GPU that has it,
    a shape it takes (:func:`~ozsim.gemm.ozaki1.wgmma.fits`: ``kpad`` a multiple of 128, at least
    64 rows, each group one exact INT32 chain) and where it was measured faster: A's rows in at
    most :data:`~ozsim.gemm.ozaki1.wgmma.MAX_ROW_BLOCKS` blocks whose images stay in L2
    (:func:`~ozsim.gemm.ozaki1.wgmma.row_blocks`: gates of 7 to 10 qubits at the usual ``s``;
    above, cuBLAS's INT8 GEMMs)."""
    from . import wgmma

    return (config.get("OZSIM_INT8_FUSED") == "1" and wgmma.fits(m, kpad, num_splits, bits)
            and len(wgmma.row_blocks(m, kpad, num_splits)) <= wgmma.MAX_ROW_BLOCKS
            and wgmma.available())


def _fused_zgemm(prep, a_sl, b, b_exponents, out, p: Plan, s: int, bits: int,
                 split_block=None):
    """:func:`int8_zgemm_gpu`'s column blocks through :func:`ozsim.gemm.ozaki1.wgmma.gemm_acc`:
    B's slices, then one kernel for the products and the accumulation (no INT32 planes).
    ``split_block(j0, nb, b_sl)``, if given, fills ``b_sl`` with the slices of columns
    ``j0 .. j0+nb-1`` (and their exponents) instead of :func:`split`."""
    from . import wgmma

    m, n = out.shape
    blocks = wgmma.row_blocks(m, p.kpad, s)
    key = ("wgmma-image", s, bits, tuple(blocks))
    imgs = prep._splits.get(key)
    if imgs is None:
        with _stage("split_a"):
            imgs = [wgmma.image(a_sl, m, s, rows) for rows in blocks]
        prep._splits[key] = imgs
    last_stats["products"] = "fused wgmma (products and accumulation)"
    last_stats["row_blocks"] = len(blocks)
    b_sl_buf = cp.empty(p.b_slice_bytes, dtype=cp.int8)
    for j0 in range(0, n, p.block_columns):
        nb = min(n, j0 + p.block_columns) - j0
        nbp = padded_rows(nb)
        b_sl = b_sl_buf[: 2 * nbp * s * p.kpad].reshape(2 * nbp, s, p.kpad)
        with _stage("split_b"):
            if split_block is not None:
                split_block(j0, nb, b_sl)
            else:
                split(b[:, j0 : j0 + nb].T, b_exponents[j0 : j0 + nb], s, bits, reverse=True,
                      kpad=p.kpad, rows_alloc=nbp, out=b_sl)
        with _stage("gemm"):
            for (i0, i1), img in zip(blocks, imgs):
                wgmma.gemm_acc(img, b_sl, i1 - i0, nb, s, bits, prep.exponents[i0:i1],
                               b_exponents[j0 : j0 + nb], out[i0:i1, j0 : j0 + nb])
    return out


def analyse_split(x, num_splits: int, bits: int, exps, hist, flag, out) -> None:
    """:func:`analyse` and :func:`split` (``reverse=True``) in one read of ``x``:
    ``oz_analyse_split`` (``kernels/analyse.cu``), for :func:`int8_auto_speculative`.

    Args:
        x (cupy.ndarray): ``(rows, k)`` complex128 or a
            :class:`~ozsim.gemm.ozaki2.cuda.GatheredMatrix`; ``k`` a power of two, 8 to 256
            (:func:`_split_vpt`).
        num_splits, bits: ``s`` and ``b``.
        exps (cupy.ndarray): ``(rows,)`` int32, written.
        hist (cupy.ndarray): ``(MAX_EXP_DIFF + 1,)`` uint64 loss histogram, **added to**.
        flag (cupy.ndarray): ``(1,)`` int32, set to 1 where ``x`` has NaN or Inf (then that
            row's exponent is 0 and its slices are meaningless).
        out (cupy.ndarray): ``(2 ra, s, k)`` int8 slices, as :func:`split` writes them.
    """
    rows, k = x.shape
    vpt = _split_vpt(k)
    ra = out.shape[0] // 2
    if vpt is None or out.shape[1:] != (num_splits, k):
        raise ValueError(f"oz_analyse_split does not take k = {k} / out {out.shape}")
    sr, sc, roff, koff = _geometry(x)
    tab = not isinstance(roff, np.uint64)
    grid = _grid(-(-ra * (k // vpt) // 32) * 32)
    _kernel("oz_analyse_split", tab, vpt)(
        (grid,), (_THREADS,),
        (x.data if tab else x, np.int64(rows), np.int64(ra), np.int64(k), np.int64(sr),
         np.int64(sc), exps, hist, flag, roff, koff, np.int32(bits), np.int32(num_splits), out))


#: Values a thread of ``oz_analyse_split`` holds (the bytes it stores a slice): k up to 32 of
#: them, so gates of up to 8 qubits. H200, N = 30, int8-auto T = 1 a gate in copy floors
#: (random targets / the lowest ones), analysis and split apart against one read with 8 and with
#: 16 values a thread: d = 7 6.76 / 7.05, 6.54 / 6.89, 7.10 / 6.83; d = 8 12.58 / 12.41,
#: 11.89 / 11.76, 12.24 / 12.31; d = 9 (16 only) 20.63 / 20.47 against 20.87 / 20.60.
SPLIT_VPT = 8


def _split_vpt(k: int) -> int | None:
    """:data:`SPLIT_VPT` where ``k / SPLIT_VPT`` is a power of two <= 32, else ``None``."""
    tpr = k // SPLIT_VPT
    ok = k % SPLIT_VPT == 0 and 1 <= tpr <= 32 and tpr & (tpr - 1) == 0
    return SPLIT_VPT if ok else None


def int8_auto_speculative(prep, b, num_splits: int, bits: int, *, out, workspace_bytes: int):
    """INT8-AUTO's GEMM on the fused Hopper path with B analysed and split in one read, for a
    number of slices guessed before B's histogram is known.

    The auto rule ([ozIMMU] Sec. 4.4, :func:`~ozsim.gemm.ozaki1.choose_num_splits`) needs the
    loss histogram of all of B before the split, so the plain path reads B twice (analysis, then
    split block by block; B's slices of the whole state do not fit the workspace). Here each
    column block is analysed and split at once with the guess ``s'`` and multiplied; the caller
    (:func:`ozsim.gemm.ozaki1.backend.run`, whose guess is A's part of the rule and B's part in
    the last GEMM of the same ``k`` and ``T``) then applies the rule to the whole histogram and
    keeps the result where ``s == s'`` (the same exponents, slices and products: the same bits),
    else multiplies again with ``s`` (the exponents are kept): a wrong guess costs a second split
    and product, a right one saves a read of B (H200, N = 30, a gate of 7 / 8 qubits: 0.2-0.7
    copy floors; :data:`SPLIT_VPT`, ``benchmarks/RESULTS.md`` section 2).

    Args:
        prep: :class:`~ozsim.gemm.ozaki1.PreparedOperand` of A ``(m, k)`` (CuPy).
        b (cupy.ndarray): ``(k, n)`` complex128 or a gathered state.
        num_splits, bits: the guess ``s'`` and the bits per slice.
        out (cupy.ndarray): ``(m, n)`` complex128 or ``None``.
        workspace_bytes: bound on B's slices of one column block.

    Returns:
        ``(out, exps, hist_b)``: the product for ``s'``, B's ``(n,)`` int32 exponents and its
        NumPy loss histogram; or ``None`` where the path does not apply
        (``OZSIM_INT8_SPECULATE=0``, a shape the fused kernels or :func:`analyse_split` do not
        take): the caller analyses B first.

    Raises:
        NonFiniteError: NaN or Inf in B (found after the products: ``out`` has been written, B
            is unchanged).
    """
    global last_stats
    m, k = prep.shape
    n = b.shape[1]
    s = num_splits
    if (config.get("OZSIM_INT8_SPECULATE") == "0" or _split_vpt(k) is None
            or padded_k(k) != k or not m or not n or not _fused(m, k, s, bits)):
        return None
    p = plan(m, k, n, s, bits, workspace_bytes)
    last_stats = {**p.__dict__, "workspace_bytes": p.workspace_bytes, "m": m, "k": k, "n": n,
                  "num_splits": s, "speculative": True}
    exps = cp.empty(n, dtype=cp.int32)
    hist = cp.zeros(MAX_EXP_DIFF + 1, dtype=cp.uint64)
    flag = cp.zeros(1, dtype=cp.int32)
    if out is None:
        out = cp.empty((m, n), dtype=cp.complex128)

    def split_block(j0, nb, b_sl):
        analyse_split(b[:, j0 : j0 + nb].T, s, bits, exps[j0 : j0 + nb], hist, flag, b_sl)

    _fused_zgemm(prep, prepared_slices(prep, s, bits), b, exps, out, p, s, bits, split_block)
    if int(flag.get()[0]):
        raise NonFiniteError("GEMM operand has NaN or Inf entries")
    return out, exps, hist.get().view(np.int64)


#: The :class:`Plan` of the last :func:`int8_zgemm_gpu` call, as a dict (working memory report).
last_stats: dict = {}


#: Shared memory the CUDA-core product kernel may use per block (no opt-in needed below 48 KiB).
_SMALL_SMEM = 48 * 1024


def _small_block(mp2: int, wpr: int) -> int:
    """Threads per block of ``oz_small_gemm`` (``kernels/products_dp4a.cu``), or 0 where cuBLAS
    should run the products (A with more than 32 rows, or slices too long for shared memory)."""
    if mp2 > 32:
        return 0
    for tb in (256, 128, 64, 32):
        if 4 * wpr * (mp2 + tb + 1) <= _SMALL_SMEM:
            return tb
    return 0


def prepared_slices(prep, num_splits: int, bits: int):
    """A's slices ``(2 mp, s, kpad)`` int8 for the GPU, cached on the :class:`PreparedOperand`."""
    key = ("cuda", num_splits, bits)
    sl = prep._splits.get(key)
    if sl is None:
        with _stage("split_a"):
            sl = split(prep.matrix, prep.exponents, num_splits, bits)
        prep._splits[key] = sl
    return sl


def int8_zgemm_gpu(prep, b, num_splits: int, bits: int, *, b_exponents=None, out=None,
                   workspace_bytes: int):
    """``C = A @ B`` by Ozaki scheme I on the GPU; see :func:`ozsim.gemm.ozaki1.int8_zgemm`.

    Args:
        prep: :class:`~ozsim.gemm.ozaki1.PreparedOperand` of A ``(m, k)`` (CuPy).
        b (cupy.ndarray): ``(k, n)`` complex128, any strides.
        num_splits, bits: ``s`` and ``b``.
        b_exponents (cupy.ndarray): ``(n,)`` int32 column exponents, or ``None``.
        out (cupy.ndarray): ``(m, n)`` complex128 (any strides, not overlapping ``b``).
        workspace_bytes: bound on B's slices plus the INT32 products of one column block.

    Returns:
        ``out``.

    Raises:
        NonFiniteError: NaN or Inf in ``b`` (before anything is written to ``out``).
    """
    global last_stats
    m, k = prep.shape
    n = b.shape[1]
    if b_exponents is None:
        b_exponents = analyse(b.T, histogram=False)[0]
    if out is None:
        out = cp.empty((m, n), dtype=cp.complex128)
    p = plan(m, k, n, num_splits, bits, workspace_bytes)
    last_stats = {**p.__dict__, "workspace_bytes": p.workspace_bytes, "m": m, "k": k, "n": n,
                  "num_splits": num_splits}
    if m == 0 or n == 0:
        return out
    a_sl = prepared_slices(prep, num_splits, bits)
    kpad, s, mp = p.kpad, num_splits, padded_rows(m)
    if _fused(m, kpad, s, bits):
        return _fused_zgemm(prep, a_sl, b, b_exponents, out, p, s, bits)
    gl = groups(s, k, bits)
    gt = cp.asarray(np.array([t for t, _, _ in gl], dtype=np.int32))
    small_tb = _small_block(2 * mp, s * kpad // 4)
    last_stats["products"] = "cuda cores (dp4a)" if small_tb else "cublas int8"
    if small_tb:
        kw = kpad // 4
        gdesc = cp.asarray(np.array([(a0 * kw, (s - t + 1 + a0) * kw, (a1 - a0) * kw)
                                     for t, a0, a1 in gl], dtype=np.int32).ravel())
        small = _small_kernel(2 * mp)
        smem = 4 * (2 * mp + small_tb + 1) * (s * kw)
    b_sl_buf = cp.empty(p.b_slice_bytes, dtype=cp.int8)
    prod_buf = cp.empty(p.product_bytes // 4, dtype=cp.int32)
    so_r, so_c = _strides(out)
    handle = cp.cuda.device.get_cublas_handle()
    cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
    cublas.setPointerMode(handle, _POINTER_MODE_HOST)
    acc = _kernel("oz_accumulate")
    lda = s * kpad
    for j0 in range(0, n, p.block_columns):
        nb = min(n, j0 + p.block_columns) - j0
        nbp = padded_rows(nb)
        b_sl = b_sl_buf[: 2 * nbp * s * kpad].reshape(2 * nbp, s, kpad)
        with _stage("split_b"):
            split(b[:, j0 : j0 + nb].T, b_exponents[j0 : j0 + nb], s, bits, reverse=True,
                  kpad=kpad, rows_alloc=nbp, out=b_sl)
        plane_bytes = 16 * mp * nbp
        with _stage("gemm"):
            if small_tb:
                grid = int(min(-(-2 * nbp // small_tb), 8 * _sms()))
                small((grid,), (small_tb,),
                      (a_sl, b_sl, np.int64(2 * nbp), np.int32(s * kpad // 4), gdesc,
                       np.int32(len(gl)), prod_buf, np.int64(2 * nbp)), shared_mem=smem)
            else:
                for g, (t, a0, a1) in enumerate(gl):
                    gemm_tn_long(handle, 2 * nbp, 2 * mp, (a1 - a0) * kpad,
                                 b_sl.data.ptr + (s - t + 1 + a0) * kpad, lda,
                                 a_sl.data.ptr + a0 * kpad, lda,
                                 prod_buf.data.ptr + g * plane_bytes, 2 * nbp)
        with _stage("accumulate"):
            acc((_grid(m * nb),), (_THREADS,),
                (prod_buf, np.int64(m), np.int64(mp), np.int64(nb), np.int64(nbp),
                 np.int32(len(gl)), gt, np.int32(bits), prep.exponents,
                 b_exponents[j0 : j0 + nb], out[:, j0 : j0 + nb], np.int64(so_r),
                 np.int64(so_c)))
    return out
