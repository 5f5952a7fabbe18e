"""Emulated complex double-precision GEMM (ZGEMM), usable on its own.

Backends (``backend=`` of :func:`zgemm`):

=================  ================================================================================
``zgemm``          native complex128 matmul (BLAS through NumPy on the CPU, cuBLAS on the GPU)
``int8x{s}``       Ozaki scheme I over INT8 with ``s`` = 3..18 slices ([ozIMMU] Alg. 3-4, Sec. 4.4)
``int8-auto``      INT8-AUTO: the fewest slices whose mean mantissa loss is ``<= T`` bits; native
                   ZGEMM when no ``s <= 18`` qualifies (reported as a fallback)
``int8-crt{N}``    Ozaki scheme II over INT8 with ``N`` = 2..20 moduli: ``3 N`` exact INT8 GEMMs
                   (Karatsuba) and a CRT reconstruction ([Ozaki2]; ``k <= 131071``)
``int8-crt-auto``  scheme II with the fewest moduli whose mean mantissa loss is ``<= T`` bits for
                   both operands; native ZGEMM when 20 moduli do not suffice (a fallback)
=================  ================================================================================

See :mod:`ozsim.gemm.ozaki1` for the algorithm, its exactness argument and ozsim's INT8-AUTO rule,
and :mod:`ozsim.gemm.ozaki2` for scheme II (CRT) and its loss rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .._array import array_namespace
from ..errors import NonFiniteError
from .ozaki1.scheme import (
    MAX_SPLITS,
    MIN_SPLITS,
    PreparedOperand,
    bits_per_slice,
    choose_num_splits,
    int8_zgemm,
    mean_loss,
    _block_columns,
    analyse_rows,
    default_workspace_bytes,
)
from .ozaki2 import MAX_MODULI, MIN_MODULI, PreparedCRTOperand

__all__ = [
    "zgemm",
    "GemmInfo",
    "parse_backend",
    "PreparedOperand",
    "PreparedCRTOperand",
    "bits_per_slice",
    "BACKEND_HELP",
    "MIN_SPLITS",
    "MAX_SPLITS",
    "MIN_MODULI",
    "MAX_MODULI",
]

BACKEND_HELP = (
    "zgemm, int8-auto, int8x{s} with s = 3..18, int8-crt-auto, or int8-crt{N} with N = 2..20"
)
_FIXED = re.compile(r"int8x(\d+)")
_CRT = re.compile(r"int8-crt(\d+)")


def parse_backend(backend: str) -> tuple[str, int | None]:
    """Split a backend name into ``(kind, count)``.

    Returns:
        ``("zgemm", None)``, ``("int8-auto", None)``, ``("int8", s)`` (slices),
        ``("int8-crt-auto", None)`` or ``("int8-crt", N)`` (moduli).

    Raises:
        ValueError: an unknown name, ``int8x{s}`` with ``s`` outside 3..18, or ``int8-crt{N}``
            with ``N`` outside 2..20.
    """
    if not isinstance(backend, str):
        raise TypeError(f"backend must be a string, got {type(backend).__name__}")
    name = backend.strip().lower()
    if name in ("zgemm", "int8-auto", "int8-crt-auto"):
        return name, None
    for pattern, kind, lo, hi, what in (
        (_FIXED, "int8", MIN_SPLITS, MAX_SPLITS, "splits"),
        (_CRT, "int8-crt", MIN_MODULI, MAX_MODULI, "moduli"),
    ):
        m = pattern.fullmatch(name)
        if m:
            count = int(m.group(1))
            if not lo <= count <= hi:
                raise ValueError(f"backend {backend!r}: the number of {what} must be in {lo}..{hi}")
            return kind, count
    raise ValueError(f"unknown backend {backend!r}; expected {BACKEND_HELP}")


@dataclass(frozen=True)
class GemmInfo:
    """What one emulated GEMM did.

    Attributes:
        backend: the backend asked for.
        num_splits: slices used (``None`` for native ZGEMM).
        bits_per_slice: ``b`` (``None`` for native ZGEMM).
        mean_loss_a, mean_loss_b: mean mantissa loss in bits over the nonzero scalars of each
            operand at ``num_splits`` (``None`` where not computed: native, or fixed ``s``);
            for ``int8-crt-auto`` signed and counted against FP64's own accuracy (negative:
            bits to spare; :mod:`ozsim.gemm.ozaki2`).
        fallback: INT8-AUTO found no ``s <= 18`` within ``T`` (``int8-crt-auto``: no ``N <= 20``)
            and ran native ZGEMM.
        num_moduli: Ozaki scheme II: moduli used (``None`` for the other backends).
        kept_bits: scheme II: ``(gA, gB)``, the bits a row of A / a column of B keeps below its
            scaling point (see :mod:`ozsim.gemm.ozaki2`).
    """

    backend: str
    num_splits: int | None
    bits_per_slice: int | None = None
    mean_loss_a: float | None = None
    mean_loss_b: float | None = None
    fallback: bool = False
    num_moduli: int | None = None
    kept_bits: tuple[int, int] | None = None


def _check_operands(a, b, xp):
    for name, x in (("a", a), ("b", b)):
        if x.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix, got shape {tuple(x.shape)}")
        if x.dtype != xp.complex128:
            raise TypeError(f"{name} must be complex128, got {x.dtype}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}"
        )


def zgemm(
    a,
    b,
    *,
    backend: str = "int8-auto",
    T: float = 1.0,
    out=None,
    check_finite: bool = True,
    return_info: bool = False,
    workspace_bytes: int | None = None,
):
    """Complex double-precision matrix product ``C = A @ B``, native or emulated.

    Args:
        a: ``(m, k)`` complex128 (NumPy or CuPy), or a :class:`PreparedOperand` /
            :class:`PreparedCRTOperand` of one (a gate matrix analysed once and reused).
        b: ``(k, n)`` complex128, same library as ``a``; any strides; on the GPU also a
            ``_cuda_crt.GatheredMatrix`` (read through offset tables by the ``int8-crt*``
            backends, materialised for the others).
        backend: ``"zgemm"``, ``"int8-auto"``, ``"int8x{s}"`` (s = 3..18), ``"int8-crt-auto"`` or
            ``"int8-crt{N}"`` (N = 2..20); see the module doc.
        T: the auto backends' threshold on the mean mantissa loss, in bits (>= 0).
        out: ``(m, n)`` complex128 to write into; must not overlap ``b``.
        check_finite: for ``"zgemm"``, scan the operands for NaN/Inf (the INT8 backends always
            detect them, for free, while scaling).
        return_info: also return a :class:`GemmInfo`.
        workspace_bytes: bound on the INT8 backends' slice buffers (B is processed in blocks of
            columns; results do not depend on it). ``None``: 256 MiB on the CPU; on the GPU half
            the free device memory, at most 16 GiB (``ozaki1.default_workspace_bytes``).

    Returns:
        ``(m, n)`` complex128, or ``(C, GemmInfo)`` with ``return_info=True``.

    Raises:
        TypeError: operands not complex128 or from different array libraries.
        ValueError: not 2-D, mismatched inner dimensions, unknown backend, ``T < 0``.
        NonFiniteError: NaN or Inf in an operand.

    References:
        Ootomo, Ozaki, Yokota, "DGEMM on integer matrix multiplication unit" (ozIMMU), Alg. 3-4 and
        Sec. 4.4; ozsim's correction to INT8-AUTO is in :mod:`ozsim.gemm.ozaki1`.
    """
    kind, s = parse_backend(backend)
    if getattr(b, "_ozsim_gathered", False) and kind not in ("int8-crt", "int8-crt-auto"):
        b = b.materialize()  # only scheme II's GPU kernels read through offset tables
    prep = a if isinstance(a, PreparedOperand) else None
    mat = a.matrix if isinstance(a, (PreparedOperand, PreparedCRTOperand)) else a
    xp = array_namespace(mat, b, out)
    _check_operands(mat, b, xp)
    if T < 0:
        raise ValueError(f"T must be >= 0 bits, got {T}")
    m, n = mat.shape[0], b.shape[1]
    if out is not None and tuple(out.shape) != (m, n):
        raise ValueError(f"out must have shape {(m, n)}, got {tuple(out.shape)}")

    info = GemmInfo(backend, None)
    if kind == "int8-auto":
        prep = prep if prep is not None else PreparedOperand(mat)
        bits = bits_per_slice(mat.shape[1])
        if xp is np:
            ws = default_workspace_bytes(xp) if workspace_bytes is None else workspace_bytes
            eB, hist_b = analyse_rows(b.T, _block_columns(n, mat.shape[1], MAX_SPLITS, ws))
        else:  # pragma: no cover - GPU: one fused kernel, histogram returned as NumPy
            from .ozaki1.cuda import analyse

            eB, hist_b = analyse(b.T)
        s = choose_num_splits(prep.histogram, hist_b, bits, T)
        if s is None:
            info = GemmInfo(backend, None, bits, fallback=True)
            c = _native(mat, b, out, xp)
        else:
            info = GemmInfo(
                backend, s, bits, mean_loss(prep.histogram, s, bits), mean_loss(hist_b, s, bits)
            )
            c = int8_zgemm(
                prep, b, s, b_exponents=eB, out=out, workspace_bytes=workspace_bytes
            )
    elif kind == "int8":
        c = int8_zgemm(
            prep if prep is not None else mat, b, s, out=out, workspace_bytes=workspace_bytes
        )
        info = GemmInfo(backend, s, bits_per_slice(mat.shape[1]))
    elif kind in ("int8-crt", "int8-crt-auto"):
        from .ozaki2 import crt_zgemm

        c, plan = crt_zgemm(a, b, None if kind == "int8-crt-auto" else s, T=T, out=out,
                            workspace_bytes=workspace_bytes)
        if plan is None:
            info = GemmInfo(backend, None, fallback=True)
            c = _native(mat, b, out, xp)
        else:
            info = GemmInfo(backend, None, None, plan.mean_loss_a, plan.mean_loss_b,
                            num_moduli=plan.num_moduli, kept_bits=(plan.bits_a, plan.bits_b))
    else:
        if check_finite and not (bool(xp.isfinite(mat).all()) and bool(xp.isfinite(b).all())):
            raise NonFiniteError("GEMM operand has NaN or Inf entries")
        c = _native(mat, b, out, xp)
    return (c, info) if return_info else c


def _native(a, b, out, xp):
    if getattr(b, "_ozsim_gathered", False):  # the state read through offsets: a copy first
        b = b.materialize()
    if out is None:
        return xp.matmul(a, b)
    return xp.matmul(a, b, out=out)
