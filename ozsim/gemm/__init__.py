"""Emulated double-precision GEMMs, usable on their own: :func:`zgemm` (complex) and
:func:`dgemm` (real).

The backends (``backend=``) and the schemes behind them are listed once, in
:mod:`ozsim.gemm.registry`: ``zgemm`` (native), ``int8x{s}`` and ``int8-auto`` (Ozaki scheme I,
:mod:`ozsim.gemm.ozaki1`), ``int8-crt{N}`` and ``int8-crt-auto`` (Ozaki scheme II,
:mod:`ozsim.gemm.ozaki2`), ``fp16x{s}`` and ``fp16-auto`` (the Ozaki scheme over FP16 slices,
:mod:`ozsim.gemm.fp16`), ``int8-cr`` and ``fp16-cr`` (correctly rounded, :mod:`ozsim.gemm.exact`).
"""

from __future__ import annotations

import math
from dataclasses import replace

from .._array import array_namespace
from . import bounds, registry
from .info import GemmInfo
from .ozaki1 import MAX_SPLITS, MIN_SPLITS, PreparedOperand, bits_per_slice
from .ozaki2 import MAX_MODULI, MIN_MODULI, PreparedCRTOperand
from .single import cgemm, sgemm

__all__ = [
    "zgemm",
    "dgemm",
    "cgemm",
    "sgemm",
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

BACKEND_HELP = registry.help_text()


def parse_backend(backend: str) -> tuple[str, int | None]:
    """Split a backend name into ``(kind, count)`` (through :func:`ozsim.gemm.registry.parse`).

    Returns:
        ``("zgemm", None)``, ``("int8-auto", None)``, ``("int8", s)`` (slices),
        ``("int8-crt-auto", None)`` or ``("int8-crt", N)`` (moduli).

    Raises:
        TypeError: not a string.
        ValueError: an unknown name, ``int8x{s}`` with ``s`` outside 3..18, or ``int8-crt{N}``
            with ``N`` outside 2..20.
    """
    b = registry.parse(backend)
    return b.kind, b.count


def _check_operands(a, b, xp, dtype: str = "complex128"):
    for name, x in (("a", a), ("b", b)):
        if x.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix, got shape {tuple(x.shape)}")
        if x.dtype != getattr(xp, dtype):
            raise TypeError(f"{name} must be {dtype}, got {x.dtype}")
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
    error_bound: bool = True,
):
    """Complex double-precision matrix product ``C = A @ B``, native or emulated.

    Args:
        a: ``(m, k)`` complex128 (NumPy or CuPy), or a :class:`PreparedOperand` /
            :class:`PreparedCRTOperand` of one (a gate matrix analysed once and reused).
        b: ``(k, n)`` complex128, same library as ``a``; any strides; on the GPU also a
            ``ozaki2.cuda.GatheredMatrix`` (read through offset tables by the ``int8-crt*``
            backends, materialised for the others).
        backend: ``"zgemm"``, ``"int8-auto"``, ``"int8x{s}"`` (s = 3..18), ``"int8-crt-auto"``,
            ``"int8-crt{N}"`` (N = 2..20), ``"fp16x{s}"`` (s = 3..24), ``"fp16-auto"``,
            ``"int8-cr"`` or ``"fp16-cr"``; see the module doc.
        T: the auto backends' threshold on the mean mantissa loss, in bits (>= 0).
        out: ``(m, n)`` complex128 to write into; must not overlap ``a`` or ``b`` (checked).
        check_finite: for ``"zgemm"``, scan the operands for NaN/Inf (the INT8 backends always
            detect them, for free, while scaling).
        return_info: also return a :class:`GemmInfo` (with its a-priori ``error_bound``,
            :mod:`ozsim.gemm.bounds`: one norm of A, a host sync on the GPU).
        error_bound: compute the info's ``error_bound`` (``False``: leave it ``None``, for a
            caller that bounds the product from a host copy of A, as the engine does).
        workspace_bytes: bound on the INT8 backends' slice buffers (B is processed in blocks of
            columns; results do not depend on it). ``None``: 256 MiB on the CPU; on the GPU half
            the free device memory, at most 16 GiB (``ozaki1.default_workspace_bytes``).

    Returns:
        ``(m, n)`` complex128, or ``(C, GemmInfo)`` with ``return_info=True``.

    Raises:
        TypeError: operands not complex128 or from different array libraries.
        ValueError: not 2-D, mismatched inner dimensions, unknown backend, ``T < 0``, ``out``
            of the wrong shape or overlapping ``a`` or ``b``.
        NonFiniteError: NaN or Inf in an operand. The operands are left as they were; ``out``
            may have been written where ``int8-auto`` runs its speculative GPU path
            (:func:`ozsim.gemm.ozaki1.cuda.int8_auto_speculative`).

    References:
        Ootomo, Ozaki, Yokota, "DGEMM on integer matrix multiplication unit" (ozIMMU), Alg. 3-4 and
        Sec. 4.4; ozsim's correction to INT8-AUTO is in :mod:`ozsim.gemm.ozaki1`.
    """
    spec = registry.parse(backend)
    mat = getattr(a, "matrix", a)  # a prepared operand's matrix
    xp = array_namespace(mat, b, out)
    _check_operands(mat, b, xp)
    if T < 0:
        raise ValueError(f"T must be >= 0 bits, got {T}")
    m, n = mat.shape[0], b.shape[1]
    if out is not None and tuple(out.shape) != (m, n):
        raise ValueError(f"out must have shape {(m, n)}, got {tuple(out.shape)}")
    if out is not None and xp.may_share_memory(out, getattr(b, "data", b) if
                                               getattr(b, "_ozsim_gathered", False) else b):
        raise ValueError("out overlaps b: the product would read amplitudes it has already "
                         "overwritten; pass a separate output array")
    if out is not None and xp.may_share_memory(out, mat):
        raise ValueError("out overlaps a; pass a separate output array")
    c, info = spec.scheme.run(a, b, spec, T=T, out=out, xp=xp, check_finite=check_finite,
                              workspace_bytes=workspace_bytes)
    if not return_info:
        return c
    return c, (replace(info, error_bound=bounds.of(info, mat)) if error_bound else info)


def dgemm(
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
    """Real double-precision matrix product ``C = A @ B``, native or emulated.

    The INT8 backends run one complex product of half the width: ``B``'s two halves of columns
    become the real and imaginary parts of ``Bc = B[:, :h] + i B[:, h:]`` (``h = ceil(n / 2)``),
    and ``A @ Bc`` by :func:`zgemm`'s schemes gives both halves of ``C`` at once. With a real
    ``A`` the imaginary residues of A are zero, so scheme II makes two INT8 products per
    modulus (``Ar Br``, ``Ar (Br + Bi)``, Karatsuba's third being zero) for the ``n`` real
    columns: one product per modulus and column, as a real scheme II does ([Ozaki2] Sec. 3);
    on the GPU a real A takes cuBLAS's products for every ``k`` (the fused kernel makes three).
    A column's scaling is shared with its partner ``j + h`` (a joint norm).

    ``int8-crt-auto``'s rule compares with FP64 DGEMM's bound, ``gamma_k`` instead of ZGEMM's
    ``gamma_2k`` (:mod:`ozsim.gemm.ozaki2.scheme`, "The number of moduli"). With ``Ai = 0`` a
    part of ``c_ij`` sums ``k`` terms, not ``2k``: ``alpha_i``, ``beta_j <= sqrt(k) 2**f`` and
    the scaling factor is at most ``K(k) / sqrt(2)`` (``K`` of the complex product), so the
    rule holds ``K`` to ``2**(T + 1/2) gamma_k / gamma_2k`` (about ``2**(T - 1/2)``) times what
    it allows a ZGEMM. ``int8-auto``'s threshold is a mean mantissa loss, the same for real and
    complex data.

    Args:
        a: ``(m, k)`` float64, NumPy or CuPy.
        b: ``(k, n)`` float64, same library.
        backend: ``"zgemm"`` (native: BLAS / cuBLAS DGEMM), ``"int8-auto"``, ``"int8x{s}"``,
            ``"int8-crt-auto"`` or ``"int8-crt{N}"`` (:func:`zgemm`).
        T: the auto backends' threshold in bits (>= 0).
        out: ``(m, n)`` float64 to write into (must not overlap ``a`` or ``b``).
        check_finite: for the native backend, scan for NaN/Inf (the INT8 backends always do).
        return_info: also return the complex product's :class:`GemmInfo`.
        workspace_bytes: as :func:`zgemm`.

    Returns:
        ``(m, n)`` float64, or ``(C, GemmInfo)`` with ``return_info=True``.

    Raises:
        TypeError: operands not float64 or from different array libraries.
        ValueError: not 2-D, mismatched inner dimensions, unknown backend, ``T < 0``, ``out``
            of the wrong shape or overlapping an operand.
        NonFiniteError: NaN or Inf in an operand.

    References:
        [Ozaki2] K. Ozaki, Y. Uchino, T. Imamura, arXiv:2504.08009 (2025); [ozIMMU] H. Ootomo,
        K. Ozaki, R. Yokota, IJHPCA 2024.
    """
    from .. import errors

    spec = registry.parse(backend)
    xp = array_namespace(a, b, out)
    _check_operands(a, b, xp, "float64")
    if T < 0:
        raise ValueError(f"T must be >= 0 bits, got {T}")
    m, k = a.shape
    n = b.shape[1]
    if out is not None and tuple(out.shape) != (m, n):
        raise ValueError(f"out must have shape {(m, n)}, got {tuple(out.shape)}")
    for name, x in (("b", b), ("a", a)):
        if out is not None and xp.may_share_memory(out, x):
            raise ValueError(f"out overlaps {name}; pass a separate output array")
    if spec.kind == "zgemm":
        if check_finite and not (bool(xp.isfinite(a).all()) and bool(xp.isfinite(b).all())):
            raise errors.NonFiniteError("GEMM operand has NaN or Inf entries")
        c = xp.matmul(a, b, out=out)
        return (c, GemmInfo(spec.name, None)) if return_info else c
    h = (n + 1) // 2
    bc = xp.zeros((k, h), dtype=xp.complex128)
    bc.real[...] = b[:, :h]
    bc.imag[:, : n - h] = b[:, h:]
    ac = a.astype(xp.complex128)
    t_run = T
    if spec.kind == "int8-crt-auto":  # FP64 DGEMM's gamma_k against ZGEMM's gamma_2k
        u = bounds.UNIT_ROUNDOFF
        t_run = T + 0.5 + math.log2((k * u / (1 - k * u)) / (2 * k * u / (1 - 2 * k * u)))
    cc, info = spec.scheme.run(ac, bc, spec, T=t_run, out=None, xp=xp,
                               check_finite=check_finite, workspace_bytes=workspace_bytes)
    if out is None:
        out = xp.empty((m, n), dtype=xp.float64)
    out[:, :h] = cc.real
    out[:, h:] = cc.imag[:, : n - h]
    if not return_info:
        return out
    return out, replace(info, error_bound=bounds.of(info, ac))
