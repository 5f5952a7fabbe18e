"""Scheme I's entry in the backend registry: ``int8x{s}`` and ``int8-auto``."""

from __future__ import annotations

import numpy as np

from ..info import GemmInfo
from ..native import matmul
from .scheme import (
    MAX_SPLITS,
    PreparedOperand,
    _block_columns,
    analyse_rows,
    bits_per_slice,
    choose_num_splits,
    default_workspace_bytes,
    fewest_splits,
    int8_zgemm,
    mean_loss,
)

__all__ = ["apply_one_pass", "prepare", "run"]

#: B's part of INT8-AUTO's rule (:func:`~ozsim.gemm.ozaki1.scheme.fewest_splits` of its loss
#: histogram) in the last GEMM on the GPU, by ``(k, T)``: :func:`run`'s guess for analysing and
#: splitting B in one read (:func:`ozsim.gemm.ozaki1.cuda.int8_auto_speculative`); a run's state
#: statistics change slowly from gate to gate.
_last_b_splits: dict = {}


def prepare(matrix, host=None) -> PreparedOperand:
    """The gate operand, analysed once (exponents, loss histogram; slices cached per ``s``);
    ``host``: the same matrix as NumPy, analysed there (no device round trip)."""
    return PreparedOperand(matrix, host)


def apply_one_pass(psi, gate, positions, backend, T,  # pragma: no cover - GPU
                   check_finite=True):
    """The GPU's one-pass scheme I gate, ``d <= 6`` (:mod:`ozsim.gemm.ozaki1.onepass`); native
    one-pass when INT8-AUTO finds no ``s <= 18`` (a fallback, as :func:`run`'s).

    Returns:
        The :class:`GemmInfo` :func:`run` would give for the same product.
    """
    from .. import native_gate
    from . import onepass

    prep = gate if isinstance(gate, PreparedOperand) else PreparedOperand(gate)
    bits = bits_per_slice(prep.shape[1])
    s, hist_b = onepass.apply(psi, prep, positions, backend.count, T, check_finite)
    if s is None:
        native_gate.apply_dense(psi, prep.matrix, positions)
        return GemmInfo(backend.name, None, bits, fallback=True)
    if hist_b is None:
        return GemmInfo(backend.name, s, bits)
    return GemmInfo(backend.name, s, bits, mean_loss(prep.histogram, s, bits),
                    mean_loss(hist_b, s, bits))


def run(a, b, backend, *, T, out, xp, check_finite, workspace_bytes):
    """``int8x{s}`` (``backend.count`` slices) or ``int8-auto`` (INT8-AUTO at threshold ``T``).

    Args: as :func:`ozsim.gemm.zgemm`; ``backend`` is the parsed name
    (:class:`ozsim.gemm.registry.Backend`). NaN/Inf are always detected while scaling.

    Returns:
        ``(C, GemmInfo)``.
    """
    prep = a if isinstance(a, PreparedOperand) else None
    mat = getattr(a, "matrix", a)
    bits = bits_per_slice(mat.shape[1])
    if backend.count is not None:
        c = int8_zgemm(prep if prep is not None else mat, b, backend.count, out=out,
                       workspace_bytes=workspace_bytes)
        return c, GemmInfo(backend.name, backend.count, bits)
    prep = prep if prep is not None else PreparedOperand(mat)
    n = b.shape[1]
    ws = default_workspace_bytes(xp) if workspace_bytes is None else workspace_bytes
    s_run = None  # the s of a product already made (the GPU's speculative split)
    if xp is np:
        eB, hist_b = analyse_rows(b.T, _block_columns(n, mat.shape[1], MAX_SPLITS, ws))
    else:  # pragma: no cover - GPU: one fused kernel, histogram returned as NumPy
        from . import cuda

        key = (mat.shape[1], float(T))
        s_a, guess = fewest_splits(prep.histogram, bits, T), _last_b_splits.get(key)
        done = None
        if s_a is not None and guess is not None:  # B analysed and split in one read
            s_run = max(s_a, guess)
            done = cuda.int8_auto_speculative(prep, b, s_run, bits, out=out,
                                              workspace_bytes=ws)
        if done is None:
            s_run = None
            eB, hist_b = cuda.analyse(b.T)
        else:
            out, eB, hist_b = done
        s_b = fewest_splits(hist_b, bits, T)
        if s_b is not None:
            _last_b_splits[key] = s_b
    s = choose_num_splits(prep.histogram, hist_b, bits, T)
    if s is None:  # (cuBLAS reads a strided array: a gathered B is copied)
        b = b.materialize() if getattr(b, "_ozsim_gathered", False) else b
        return matmul(mat, b, out, xp), GemmInfo(backend.name, None, bits, fallback=True)
    info = GemmInfo(backend.name, s, bits, mean_loss(prep.histogram, s, bits),
                    mean_loss(hist_b, s, bits))
    if s == s_run:
        return out, info
    return int8_zgemm(prep, b, s, b_exponents=eB, out=out, workspace_bytes=ws), info
