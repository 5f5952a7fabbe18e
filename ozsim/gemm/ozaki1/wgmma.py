"""Scheme I's INT8 products with the FP64 accumulation in the epilogue, on Hopper (private).

One kernel, ``oz_gemm_acc`` (``kernels/products_wgmma.cu``), replaces the cuBLAS INT8 GEMMs and
``oz_accumulate`` of :func:`ozsim.gemm.ozaki1.cuda.int8_zgemm_gpu`: the cuBLAS path writes one
INT32 plane per slice group ``P_t = sum_{i+j=t} A_i B_j`` (16 bytes an output amplitude a group,
``s`` groups) and reads them all back; here each ``128 x 128`` output tile's ``P_t`` stays in
registers and is accumulated into FP64 as soon as its chain of ``wgmma`` products ends, so only
B's slices are read and the complex128 result written.

Structure (NVIDIA Hopper, ``sm_90a``; the warp-specialised TMA + ``wgmma`` pipeline of
:mod:`ozsim.gemm.ozaki2.wgmma`):

* persistent CTAs (one per multiprocessor) loop over ``(row tile, column tile)`` work items,
  rasterised in groups of :data:`GROUP_N` column tiles, row tiles fastest, so that the CTAs of
  one column tile share its B panel in L2;
* warpgroup 0 (one thread) loads ``128 x 128`` tiles of A's *image* and of B's slices with the
  tensor memory accelerator into a ring of :data:`STAGES` stages (``full`` / ``empty`` mbarriers);
* warpgroups 1 and 2 each own 64 rows of the image (32 output rows): per group ``t = s+1 .. 2``
  one chain of ``wgmma.m64n128k32.s32.s8.s8`` over the group's slice pairs into 64 INT32
  accumulators a thread, then ``S = fma(S, 2**-b, P_t)`` into 64 FP64 accumulators; at the end
  ``out = ldexp(S, eA + eB - 2 b)``. The same operations as the CPU's, in its order (the kernel's
  header shows why the scaled sum is the CPU's bit for bit).

The complex product is one real GEMM: A's image has, for output row ``i`` and slice ``a``, the
row ``[Ar_a[i], -Ai_a[i]]`` (real part) and the row ``[Ai_a[i], Ar_a[i]]`` (imaginary part) over
``K = 2 kpad``, and B's slices of column ``j`` are its stored rows ``j`` (real) and ``nbp + j``
(imaginary), so one INT32 chain gives ``Re = Ar Br - Ai Bi`` and ``Im = Ai Br + Ar Bi`` exactly
when ``s 2 kpad (2**b - 1)**2 < 2**31`` (:func:`fits`). The image's rows are ordered so that each
thread's accumulator rows ``r`` and ``r + 8`` are the two parts of one output row.

The tile is ``128 x 128`` (not the ``128 x 256`` of scheme II's kernel): 64 INT32 and 64 FP64
accumulators a thread are what the register file holds; at this tile a stage moves 64 products
per byte. Every CTA streams its rows of A's image once per column tile, so the image must stay in
L2: A's rows run in blocks of at most :data:`MAX_IMAGE_BYTES` (:func:`row_blocks`, one launch
each, each reading all of B's slices), and :mod:`ozsim.gemm.ozaki1.cuda` takes this kernel for up
to :data:`MAX_ROW_BLOCKS` blocks (gates of 7 to 10 qubits).

Measured (H200, N = 30, ``int8-auto`` T = 1 through a state vector, the state read through the
permutation; ``benchmarks/RESULTS.md`` section 2): 7.45 / 13.0 / 21.8 / 39.6 copy floors a gate at
d = 7 / 8 / 9 / 10, against 19.3 / 24.8 / 31.4 / 47.2 on the cuBLAS path with the copy; with the
one-read analysis and split (:func:`ozsim.gemm.ozaki1.cuda.int8_auto_speculative`) 6.61 / 12.4 /
21.3 / 39.5, that is 53 / 71 / 83 / 89% of the INT8 ceiling (cuBLAS's 8192^3 rate in the same
run).

References:
    [ozIMMU] H. Ootomo, K. Ozaki, R. Yokota, "DGEMM on integer matrix multiplication unit",
        IJHPCA 2024 (arXiv:2306.11975), Alg. 3-4. NVIDIA PTX ISA 8.x, ``wgmma.mma_async``,
        ``cp.async.bulk.tensor``; CUDA driver API, ``cuTensorMapEncodeTiled``.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import cupy as cp

from .._gpu import _libcuda, set_dynamic_smem, sm90a_module
from ..ozaki2.wgmma import _tensor_map

__all__ = ["BM", "BN", "BK", "MAX_IMAGE_BYTES", "MAX_ROW_BLOCKS", "available", "fits",
           "gemm_acc", "image", "image_bytes", "row_blocks"]

#: Tile of one CTA: rows of A's image (64 output rows), columns of B, bytes of K per stage.
BM, BN, BK = 128, 128, 128
#: Stages of the shared-memory ring (32 KiB each). H200, N = 30, int8-auto T = 1, multiples of the
#: copy floor at d = 8 / 9 / 10: 2 stages 16.9 / 32.0 / 71.1, 3 14.4 / 22.0 / 49.2, 4 12.0 / 20.4 /
#: 40.3, 5 12.6 / 21.9 / -, 6 12.6 / 23.6 / 42, 7 13.4 / 25.0 / - (more stages leave less of the
#: multiprocessor's 256 KiB to L1).
STAGES = 4
#: Largest image of A (:func:`image`, bytes) one launch takes (:func:`row_blocks`): every CTA
#: streams its 128 rows of the image once per column tile, so the image must stay in L2 (50 MiB
#: on an H100 / H200) while the B panels stream through it. H200, N = 30, int8-auto T = 1 through
#: ``StateVector.apply`` (multiples of the copy floor, fused against the cuBLAS path, before the
#: state was read through the permutation): the whole image in one launch, d = 7, s = 8 (2 MiB)
#: 9.3 against 20.2, d = 8, s = 9 (4.5 MiB) 14.9 against 26.3, d = 10, s = 9 (36 MiB) 58.9 against
#: 49.1, d = 12 (576 MiB) 290 against 161; d = 10 in three row blocks 43.0 against 46.9.
MAX_IMAGE_BYTES = 16 << 20
#: Most row blocks (:func:`row_blocks`) for which the kernel runs: each block reads all of B's
#: slices again, so beyond this the cuBLAS path (one read of B's slices, INT32 planes written and
#: read back) moves fewer bytes.
MAX_ROW_BLOCKS = 4
#: Column tiles per raster group (the CTAs of one column tile share its B panel in L2).
GROUP_N = 2
_SMEM_BYTES = STAGES * (BM + BN) * BK + 1024  # + alignment of the 1024-byte swizzle atoms
_KERNEL = Path(__file__).parent / "kernels" / "products_wgmma.cu"
_OPTIONS = ("-std=c++17", f"-DBM={BM}", f"-DBN={BN}", f"-DBK={BK}", f"-DSTAGES={STAGES}")

_state: dict = {}


def available() -> bool:
    """True on a GPU of compute capability 9.0 (H100, H200) where the kernel compiles (else the
    reason is in ``_state["error"]``)."""
    if "ok" not in _state:
        ok = False
        if cp.cuda.Device().compute_capability != "90":
            _state["error"] = (f"compute capability {cp.cuda.Device().compute_capability}, "
                               "not 9.0")
        else:
            try:
                func = sm90a_module(_KERNEL, _OPTIONS).get_function("oz_gemm_acc")
                set_dynamic_smem(func, _SMEM_BYTES)
                _state.update(lib=_libcuda(), func=func)
                ok = True
            except Exception as exc:  # noqa: BLE001 - a capability probe: any failure means no
                _state["error"] = f"{type(exc).__name__}: {exc}"
        _state["ok"] = ok
    return _state["ok"]


def fits(m: int, kpad: int, num_splits: int, bits: int) -> bool:
    """Whether :func:`gemm_acc` takes this shape: ``kpad`` a multiple of :data:`BK`, at least 64
    rows of A, and every group's INT32 chain exact (``s 2 kpad (2**b - 1)**2 <= 2**31 - 1``)."""
    return (kpad % BK == 0 and m >= 64
            and num_splits * 2 * kpad * ((1 << bits) - 1) ** 2 <= 2**31 - 1)


def image_bytes(m: int, kpad: int, num_splits: int) -> int:
    """Bytes of :func:`image` for A of ``m`` rows, ``kpad`` stored K and ``s`` slices."""
    return 2 * (-(-m // 64) * 64) * num_splits * 2 * kpad


def image(a_slices, m: int, num_splits: int, rows: tuple[int, int] | None = None):
    """A's image for :func:`gemm_acc` from its slices (of A's rows ``rows[0]..rows[1]-1``).

    Args:
        a_slices (cupy.ndarray): ``(2 mp, s, kpad)`` int8 as :func:`ozaki1.cuda.split` stores
            them (real rows, then imaginary rows from ``mp``).
        m: A's rows.
        num_splits: ``s``.
        rows: the rows ``(i0, i1)`` to take (default all ``m``).

    Returns:
        ``(2 mr, s * 2 * kpad)`` int8, C-contiguous, ``mr`` = ``i1 - i0`` rounded up to 64:
        image row ``16 g + r`` (``r < 8``) holds row ``i0 + 8 g + r``'s real-part row, slice by
        slice ``[Ar_a, -Ai_a]``; row ``16 g + 8 + r`` its imaginary-part row ``[Ai_a, Ar_a]``;
        rows past ``i1`` are zero.
    """
    mp2, s, kpad = a_slices.shape
    mp = mp2 // 2
    i0, i1 = (0, m) if rows is None else rows
    mb = i1 - i0
    mr = -(-mb // 64) * 64
    re = cp.zeros((mr, s, kpad), dtype=cp.int8)
    im = cp.zeros((mr, s, kpad), dtype=cp.int8)
    re[:mb] = a_slices[i0:i1]
    im[:mb] = a_slices[mp + i0:mp + i1]
    img = cp.empty((mr // 8, 2, 8, s, 2, kpad), dtype=cp.int8)
    re8, im8 = re.reshape(mr // 8, 8, s, kpad), im.reshape(mr // 8, 8, s, kpad)
    img[:, 0, :, :, 0] = re8
    img[:, 0, :, :, 1] = -im8  # |slice| <= 2**b - 1 <= 127: no overflow
    img[:, 1, :, :, 0] = im8
    img[:, 1, :, :, 1] = re8
    return img.reshape(2 * mr, s * 2 * kpad)


def row_blocks(m: int, kpad: int, num_splits: int) -> list[tuple[int, int]]:
    """A's rows in as few equal blocks (multiples of 64 rows) as keep each block's image within
    :data:`MAX_IMAGE_BYTES`: one launch of :func:`gemm_acc` a block, each reading all of B's
    slices (from HBM: B is read once a block)."""
    per_row = image_bytes(64, kpad, num_splits) // 64
    fit = max(64, MAX_IMAGE_BYTES // per_row // 64 * 64)
    count = -(-m // fit)
    size = -(-(-(-m // count)) // 64) * 64
    return [(i, min(m, i + size)) for i in range(0, m, size)]


def gemm_acc(img, b_slices, m: int, nb: int, num_splits: int, bits: int, e_a, e_b, out,
             *, group: int | None = None, ctas: int | None = None) -> None:
    """``out = A @ B`` of scheme I from A's image and B's slices, on the current CuPy stream
    (:func:`available` must be True).

    Args:
        img (cupy.ndarray): :func:`image` of A's slices, ``(2 mr, s * 2 * kpad)`` int8.
        b_slices (cupy.ndarray): ``(2 nbp, s, kpad)`` int8, B's columns' slices as
            :func:`ozaki1.cuda.split` stores them with ``reverse=True`` (C-contiguous).
        m, nb: rows of A and columns of B written.
        num_splits, bits: ``s`` and ``b``.
        e_a, e_b (cupy.ndarray): ``(m,)`` and ``(nb,)`` int32 exponents of A's rows and B's
            columns.
        out (cupy.ndarray): ``(m, nb)`` complex128, any strides (not overlapping B).
        group: column tiles per raster group (default :data:`GROUP_N`; tuning, same results).
        ctas: CTAs launched (default one per multiprocessor; tuning, same results).

    Raises:
        ValueError: ``kpad`` or ``s`` that :func:`fits` refuses (any ``m`` is taken here: a
            row block), or non-contiguous slices.
        RuntimeError: the driver refused the tensor maps or the launch (its status code).
    """
    nbp2, s, kpad = b_slices.shape
    if not fits(max(m, 64), kpad, num_splits, bits) or s != num_splits:  # (any m per launch)
        raise ValueError(f"oz_gemm_acc does not take m = {m}, kpad = {kpad}, s = {num_splits}")
    if not (img.flags.c_contiguous and b_slices.flags.c_contiguous):
        raise ValueError("oz_gemm_acc needs contiguous slices")
    nbp = nbp2 // 2
    mtiles, ntiles = img.shape[0] // BM, -(-nb // BN)
    ta = _tensor_map(img.data.ptr, img.shape[0], img.shape[1], BM)
    tb = _tensor_map(b_slices.data.ptr, nbp2, s * kpad, BN)
    total = mtiles * ntiles
    if ctas is None:
        ctas = _state.setdefault("sms", cp.cuda.Device().attributes["MultiProcessorCount"])
    grid = max(1, min(int(ctas), total))
    so_r, so_c = (st // out.itemsize for st in out.strides)
    args = [ta, tb, ctypes.c_int32(s), ctypes.c_int32(kpad // BK), ctypes.c_int32(nbp),
            ctypes.c_int32(m), ctypes.c_int32(nb), ctypes.c_int32(mtiles), ctypes.c_int32(ntiles),
            ctypes.c_int32(max(1, int(GROUP_N if group is None else group))),
            ctypes.c_int32(bits), ctypes.c_uint64(e_a.data.ptr), ctypes.c_uint64(e_b.data.ptr),
            ctypes.c_uint64(out.data.ptr), ctypes.c_int64(so_r), ctypes.c_int64(so_c)]
    params = (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.byref(a), ctypes.c_void_p)
                                             for a in args])
    res = _state["lib"].cuLaunchKernel(
        ctypes.c_void_p(_state["func"].ptr), ctypes.c_uint(grid), ctypes.c_uint(1),
        ctypes.c_uint(1), ctypes.c_uint(384), ctypes.c_uint(1), ctypes.c_uint(1),
        ctypes.c_uint(_SMEM_BYTES), ctypes.c_void_p(cp.cuda.get_current_stream().ptr), params,
        None)
    if res != 0:
        raise RuntimeError(f"oz_gemm_acc launch failed ({res})")
