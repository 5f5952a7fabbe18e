"""The FP16 scheme's entry in the backend registry: ``fp16x{s}`` and ``fp16-auto``."""

from __future__ import annotations

import numpy as np

from ..info import GemmInfo
from ..native import matmul
from ..ozaki1.scheme import (
    PreparedOperand,
    _block_columns,
    analyse_rows,
    default_workspace_bytes,
    mean_loss,
)
from .scheme import MAX_SPLITS, bits_per_slice, choose_num_splits, fp16_zgemm

__all__ = ["prepare", "run"]


def prepare(matrix, host=None) -> PreparedOperand:
    """The gate operand, analysed once (exponents, loss histogram; slices cached per ``s``)."""
    return PreparedOperand(matrix)


def run(a, b, backend, *, T, out, xp, check_finite, workspace_bytes):
    """``fp16x{s}`` (``backend.count`` slices) or ``fp16-auto`` (the fewest slices whose largest
    mantissa loss is ``<= T`` bits, :func:`ozsim.gemm.fp16.choose_num_splits`).

    Args: as :func:`ozsim.gemm.zgemm`; ``backend`` is the parsed name
    (:class:`ozsim.gemm.registry.Backend`). NaN/Inf are always detected while scaling.

    Returns:
        ``(C, GemmInfo)``: ``num_splits`` the slices used, ``bits_per_slice`` their width;
        ``fp16-auto`` also the mean losses, or ``fallback=True`` when it ran native ZGEMM.

    Raises:
        NonFiniteError: NaN or Inf in an operand.
        ValueError: ``k > 2**22``.
    """
    if getattr(b, "_ozsim_gathered", False):
        b = b.materialize()  # only scheme II's GPU kernels read through offset tables
    prep = a if isinstance(a, PreparedOperand) else PreparedOperand(getattr(a, "matrix", a))
    k = prep.shape[1]
    bits = bits_per_slice(k)
    if backend.count is not None:
        c = fp16_zgemm(prep, b, backend.count, out=out, workspace_bytes=workspace_bytes, xp=xp)
        return c, GemmInfo(backend.name, backend.count, bits)
    n = b.shape[1]
    if xp is np:
        ws = default_workspace_bytes(xp) if workspace_bytes is None else workspace_bytes
        eB, hist_b = analyse_rows(b.T, _block_columns(n, k, MAX_SPLITS, ws))
    else:  # pragma: no cover - GPU: one fused kernel, histogram returned as NumPy
        from ..ozaki1.cuda import analyse

        eB, hist_b = analyse(b.T)
    s = choose_num_splits(prep.histogram, hist_b, bits, T)
    if s is None:
        return matmul(prep.matrix, b, out, xp), GemmInfo(backend.name, None, bits, fallback=True)
    info = GemmInfo(backend.name, s, bits, mean_loss(prep.histogram, s, bits),
                    mean_loss(hist_b, s, bits))
    c = fp16_zgemm(prep, b, s, b_exponents=eB, out=out, workspace_bytes=workspace_bytes, xp=xp)
    return c, info
