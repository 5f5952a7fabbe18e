"""The GPU level products of the correctly rounded backends (:mod:`ozsim.gemm.exact`; private,
imports CuPy).

``int8-cr``: INT8 slices from scheme I's split kernel (:func:`ozsim.gemm.ozaki1.cuda.split`,
K-major, zero-padded) and INT8 -> INT32 cuBLAS "TN" products (:func:`ozsim.gemm._gpu.gemm_tn_long`),
the pairs of one level side by side along K in chunks of at most
:func:`~ozsim.gemm.ozaki1.cuda.max_chunk` pairs, so that each INT32 sum is exact. ``fp16-cr``: FP16
slices and one FP16 -> FP32 Tensor Core GEMM a pair (:mod:`ozsim.gemm.fp16.cuda`), exact since
every partial sum is an integer below ``2**24``. Either way the INT32 / FP32 planes are added into
INT64 level sums, the integers the CPU computes.
"""

from __future__ import annotations

import cupy as cp

from .fp16 import cuda as fp16_cuda
from .ozaki1 import cuda as oz

__all__ = ["levels"]


def _int8_levels(prep, b, b_exponents, s_a: int, s_b: int, bits: int):
    m, k = prep.shape
    nb = b.shape[1]
    kpad, mp, nbp = oz.padded_k(k), oz.padded_rows(m), oz.padded_rows(nb)
    key = ("cr-cuda-int8", s_a, bits)
    a_sl = prep._splits.get(key)
    if a_sl is None:
        a_sl = prep._splits[key] = oz.split(prep.matrix, prep.exponents, s_a, bits, kpad=kpad)
    b_sl = oz.split(b.T, b_exponents, s_b, bits, reverse=True, kpad=kpad, rows_alloc=nbp)
    cmax = oz.max_chunk(k, bits)
    handle = cp.cuda.device.get_cublas_handle()
    oz.cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
    oz.cublas.setPointerMode(handle, oz._POINTER_MODE_HOST)
    plane = cp.empty((2 * mp, 2 * nbp), dtype=cp.int32)
    for t in range(s_a + s_b - 1):
        i0, i1 = max(0, t - s_b + 1), min(t, s_a - 1)
        re = cp.zeros((m, nb), dtype=cp.int64)
        im = cp.zeros((m, nb), dtype=cp.int64)
        for c0 in range(i0, i1 + 1, cmax):
            c1 = min(i1 + 1, c0 + cmax)
            oz.gemm_tn_long(handle, 2 * nbp, 2 * mp, (c1 - c0) * kpad,
                            b_sl.data.ptr + (s_b - 1 - t + c0) * kpad, s_b * kpad,
                            a_sl.data.ptr + c0 * kpad, s_a * kpad, plane.data.ptr, 2 * nbp)
            p = plane.astype(cp.int64)
            re += p[:m, :nb] - p[mp : mp + m, nbp : nbp + nb]
            im += p[:m, nbp : nbp + nb] + p[mp : mp + m, :nb]
        yield t, re, im


def _fp16_levels(prep, b, b_exponents, s_a: int, s_b: int, bits: int):
    m = prep.shape[0]
    nb = b.shape[1]
    key = ("cr-cuda-fp16", s_a, bits)
    a_sl = prep._splits.get(key)
    if a_sl is None:
        a_sl = prep._splits[key] = fp16_cuda.split_fp16(prep.matrix, prep.exponents, s_a, bits)
    b_sl = fp16_cuda.split_fp16(b.T, b_exponents, s_b, bits)
    handle = fp16_cuda._handle()
    buf = cp.empty((2 * m, 2 * nb), dtype=cp.float32)
    for t in range(s_a + s_b - 1):
        re = cp.zeros((m, nb), dtype=cp.int64)
        im = cp.zeros((m, nb), dtype=cp.int64)
        for i in range(max(0, t - s_b + 1), min(t, s_a - 1) + 1):
            fp16_cuda.pair_product(handle, a_sl, i, b_sl, t - i, buf)
            p = buf.astype(cp.int64)  # exact: integers below 2**24
            re += p[:m, :nb] - p[m:, nb:]
            im += p[:m, nb:] + p[m:, :nb]
        yield t, re, im


def levels(family: str, prep, b, b_exponents, s_a: int, s_b: int, bits: int):
    """Every level ``(t, Re L_t, Im L_t)`` of :func:`ozsim.gemm.exact.cr_zgemm` on the GPU.

    Args:
        family: ``"int8"`` or ``"fp16"``.
        prep: :class:`~ozsim.gemm.ozaki1.PreparedOperand` of A ``(m, k)`` (CuPy); its slices are
            cached on it.
        b (cupy.ndarray): ``(k, nb)`` complex128, a block of B's columns.
        b_exponents (cupy.ndarray): ``(nb,)`` int32.
        s_a, s_b, bits: the slice counts and width.

    Yields:
        ``(t, re, im)``: ``(m, nb)`` int64 CuPy arrays, for t = 0 .. s_A + s_B - 2.
    """
    fn = _int8_levels if family == "int8" else _fp16_levels
    return fn(prep, b, b_exponents, s_a, s_b, bits)
