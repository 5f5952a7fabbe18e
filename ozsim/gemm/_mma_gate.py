"""Host side of the tensor-core one-pass gates (private; imports CuPy): the tile shape of
``kernels/mma_gate.cuh`` and the A operand as ready-made ``mma.sync`` fragments, or as the
core-matrix image ``wgmma`` reads from shared memory (:func:`core_image`).

Imported by :mod:`ozsim.gemm.ozaki1.onepass` (``int8_gate_mma.cu``: A's slices) and
:mod:`ozsim.gemm.ozaki2.onepass` (``crt_gate_mma.cu``: A's residues, one plane per modulus;
``crt_gate_slices.cu``: A's scaled integers in 8 byte slices, one plane per slice).

References:
    PTX ISA, "Matrix Fragments for mma.m16n8k32" (``.s8``) and ``ldmatrix``; "Asynchronous
    Warpgroup Level Matrix Shared Memory Layout" (core matrices, matrix descriptors).
"""

from __future__ import annotations

import cupy as cp

__all__ = ["THREADS", "a_fragments", "a_fragment_bytes", "core_image", "paired_fragments",
           "row_fragments", "tile"]

#: Threads per block of the tensor-core gate kernels (8 warps).
THREADS = 256


def tile(d: int, kd: int | None = None, mpt: int | None = None,
         threads: int = THREADS) -> tuple[int, int, int]:
    """``(NC, KD, W)`` of ``mma_gate.cuh`` for a ``d``-qubit gate: columns (amplitude groups)
    per tile, the products' inner dimension (``max(2 * 2**d, 32)`` unless ``kd`` widens it),
    and shared-memory words per column of one INT8 plane (``KD / 4 + 4``: 4 times an odd
    number, no bank conflicts); ``mpt``: members per thread in the split where the kernel
    narrows it (``MPT``; default ``2**d / 4``, at least 4); ``threads``: a block's threads
    (``THREADS``; the wgmma form of ``int8_gate_mma.cu`` takes 128 at d = 5, ``crt_gate_mma.cu``
    512)."""
    k = 1 << d
    kd = kd or max(2 * k, 32)
    mpt = mpt or (k // 4 if k >= 16 else 4)
    return threads // (k // mpt), kd, kd // 4 + 4


def a_fragment_bytes(d: int, planes: int, kd: int | None = None, paired: bool = False) -> int:
    """Bytes of :func:`a_fragments` (``paired``: :func:`paired_fragments`) for ``planes`` INT8
    planes of a ``d``-qubit gate."""
    full = planes * ((1 << d) // 8) * (tile(d, kd)[1] // 32) * 32 * 16
    return full * 3 // 4 if paired else full


def a_fragments(re, im):
    """The real embeddings ``[[Ar, -Ai], [Ai, Ar]]`` of INT8 planes as m16n8k32 A fragments.

    Args:
        re, im: ``(planes, K, K)`` CuPy arrays of integers in ``[-128, 127]`` (slices or
            residues), ``K = 2**d >= 8``. ``-Ai`` is taken in INT8: ``-(-128)`` wraps to
            ``-128``, which only a residue mod 256 can hold, and is the same residue.

    Returns:
        ``(planes, K / 8, KD / 32, 32, 4)`` uint32 CuPy array: one ``uint4`` per lane. The
        embedding is ``2K x KD`` INT8 (zero columns past ``2K``), its rows ordered so that m tile
        ``mt``'s rows 0..7 are the real and rows 8..15 the imaginary rows of members
        ``8 mt .. 8 mt + 7``; register ``r`` of lane ``(g, t)`` holds row ``g + 8 (r % 2)``,
        columns ``4 t + 16 (r // 2) + 0..3``.
    """
    ar = re.astype(cp.int8)
    ai = im.astype(cp.int8)
    return row_fragments(cp.concatenate([ar, -ai], axis=2), cp.concatenate([ai, ar], axis=2))


def paired_fragments(frags):
    """:func:`a_fragments` in 6 words a lane per pair of k steps instead of 8 (``d >= 5``).

    The embedding's k steps ``ks`` and ``ks + KS / 2`` (``KS = 2K / 32``) meet the same members'
    ``Ar, Ai`` (real parts of B) and ``-Ai, Ar`` (imaginary parts): a lane's fragment of the
    second is ``(-y, x, -w, z)`` of the first's ``(x, y, z, w)``. So each plane holds the first
    half's ``uint4`` fragments ``[mt][kh][lane]``, then the ``uint2`` ``(-y, -w)``
    ``[mt][kh][lane]`` (both conflict-free for a warp's loads); ``crt_gate_mma.cu`` (A_PAIRED)
    puts the second fragment together from them. 3/4 of :func:`a_fragments`' bytes.

    Args:
        frags: ``(planes, K / 8, KS, 32, 4)`` uint32, :func:`a_fragments` with ``KS`` even.

    Returns:
        ``(planes, K / 8 * KS * 32 * 3)`` uint32 CuPy array.
    """
    s, mt, ks = frags.shape[:3]
    if ks % 2:
        raise ValueError(f"paired fragments need an even number of k steps; got {ks}")
    first = frags[:, :, : ks // 2].reshape(s, -1)
    second = frags[:, :, ks // 2:, :, 0::2].reshape(s, -1)  # words 0 and 2: -Ai's
    return cp.ascontiguousarray(cp.concatenate([first, second], axis=1))


def row_fragments(rows_re, rows_im, kd: int | None = None):
    """:func:`a_fragments` of an embedding given by its rows: ``rows_re[s, m]`` is the real and
    ``rows_im[s, m]`` the imaginary row of member ``m`` (``(planes, K, width)`` INT8 CuPy
    arrays, ``width <= KD``, zero columns past ``width``); ``kd``: as :func:`tile`."""
    s, k, _ = rows_re.shape
    emb, kd = _embedding(rows_re, rows_im, kd)
    # (s, mt, rowhalf, g, ks, khalf, t, byte) -> (s, mt, ks, g, t, khalf, rowhalf, byte)
    emb = emb.reshape(s, k // 8, 2, 8, kd // 32, 2, 4, 4).transpose(0, 1, 4, 3, 6, 5, 2, 7)
    return cp.ascontiguousarray(emb).view(cp.uint32).reshape(s, k // 8, kd // 32, 32, 4)


def core_image(re, im):
    """The real embeddings of :func:`a_fragments` as ``wgmma``'s A operand in shared memory:
    K-major 8 x 16-byte core matrices without swizzle (``kernels/wgmma_s8.cuh``,
    ``core_offset``), rows in the order of :func:`a_fragments` (row ``16 mt + 8 h + g``: member
    ``8 mt + g``, real part for ``h = 0``), so that warp ``w`` of a warpgroup meets the rows its
    accumulator fragment holds.

    Args:
        re, im: as :func:`a_fragments`.

    Returns:
        ``(planes, 2K * KD / 4)`` uint32 CuPy array, the same bytes per plane as
        :func:`a_fragments`.
    """
    ar = re.astype(cp.int8)
    ai = im.astype(cp.int8)
    emb, kd = _embedding(cp.concatenate([ar, -ai], axis=2), cp.concatenate([ai, ar], axis=2))
    s, k = emb.shape[0], emb.shape[1] * 8
    # (s, row group, row, k chunk, byte) -> (s, row group, k chunk, row, byte)
    core = emb.reshape(s, 2 * k // 8, 8, kd // 16, 16).transpose(0, 1, 3, 2, 4)
    return cp.ascontiguousarray(core).view(cp.uint32).reshape(s, -1)


def _embedding(rows_re, rows_im, kd: int | None = None):
    """``(emb, KD)``: the ``(planes, K / 8, 2, 8, KD)`` INT8 embedding of :func:`row_fragments`
    (m tile, real / imaginary half, row in the half, column; zero columns past the rows')."""
    s, k, width = rows_re.shape
    _, kd, _ = tile(k.bit_length() - 1, kd)
    emb = cp.zeros((s, k // 8, 2, 8, kd), dtype=cp.int8)
    emb[..., :width] = cp.stack([rows_re.reshape(s, k // 8, 8, width),
                                 rows_im.reshape(s, k // 8, 8, width)], axis=2)
    return emb, kd
