"""Single-precision GEMMs: complex64 :func:`cgemm` and float32 :func:`sgemm`, native or emulated
on low-precision tensor cores.

==============  ==================================================================================
backend         what it does
==============  ==================================================================================
``cgemm``       native: BLAS CGEMM / SGEMM through NumPy on the CPU, cuBLAS through
                ``cupy.matmul`` on the GPU (FP32; CuPy's ``CUPY_TF32=1`` would let cuBLAS use
                TF32 here, so leave it unset for a baseline)
``tf32x3``      each FP32 value as two TF32 words; ``hi*hi + hi*lo + lo*hi`` with FP32 sums
                ([TF32] Sec. 3-4; :mod:`~ozsim.gemm.single.tf32`)
``tf32x4``      the same plus ``lo*lo``
``fp16-le``     LE-GEMM: FP16 ``hi`` and a ``2**10``-scaled FP16 residual, ``hi*hi`` and
                ``hi*lo + lo*hi`` in two FP32 accumulators ([LE-GEMM] Sec. 3), plus power-of-two
                row and column scaling so that any FP32 input works
                (:mod:`~ozsim.gemm.single.legemm`)
``int8-auto``   Ozaki scheme I over INT8 on complex128 copies, INT8-AUTO's loss counted against
                FP32's 24 bits ([ozIMMU] Sec. 4.4; :mod:`~ozsim.gemm.single.int8`)
==============  ==================================================================================

Complex products. ``tf32x*`` and ``fp16-le`` are real schemes: a complex product stacks
``[Ar; Ai] @ [Br, Bi]`` into one real product (4 real products' work, error of the real scheme)
or takes Karatsuba's 3 real products (25 % less work, a cancellation in the imaginary parts;
:mod:`~ozsim.gemm.single.backend` says why). ``karatsuba=None`` (the default) picks by device:
stacked on the CPU, where FP32 BLAS rounds to nearest and Karatsuba's error is 1.7-2.1x native
CGEMM's against 1.2-1.5x; Karatsuba on the GPU, where cuBLAS CGEMM's own error is larger and
Karatsuba's measured 0.55-0.80x of it (H200, n = 4096 and 8192, phi = 0.1 and 1), and where it
is what brings ``tf32x3`` to 2.3x CGEMM's speed (stacked: 1.9x).

Accuracy. ``tf32x3`` and ``fp16-le`` represent each FP32 value to within one unit in its last place
and drop a ``lo*lo`` term of at most ``2**-22 |a b|`` and random sign; their errors stay within
about 2x of native CGEMM's (``tests/test_single.py`` pins that on Ozaki's inputs, ``phi <= 1``,
on both devices); ``tf32x4`` keeps ``lo*lo``. On the GPU two things keep the tensor cores' FP32
sums, which truncate, from adding up: ``hi*hi`` runs in chunks of K met by sums rounded to
nearest (:mod:`~ozsim.gemm.single.cuda`), and a state vector's gates of up to 4 qubits apply the
words on CUDA cores with sums rounded to nearest (:mod:`~ozsim.gemm.single.onepass`).
``int8-auto`` at ``T = 0`` keeps every bit of every scalar below its row's scaling point and
sums in FP64, so its error is FP32 rounding of a nearly exact product.

Not offered: the TF64 scheme of [TF32] (Sec. 5), which assumes tensor cores taking a 64-bit
format with fewer significand bits than FP64; no such hardware exists, and the paper validates
the idea in software only. ozsim does not emulate a hardware format to emulate FP64 with it;
its FP64 emulations are the INT8 Ozaki schemes of :mod:`ozsim.gemm`.

References:
    [TF32] P. Valero-Lara, F. Liu, J. S. Vetter, I. Jorquera, "Mixed-Precision S/DGEMM Using the
        TF32 and TF64 Frameworks on Low-Precision AI Tensor Cores", SC-W '23 (Correctness '23),
        pp. 179-186.
    [LE-GEMM] Y. Zhang, L. Lu, Z. Yang, Z. Liang, S. Suo, "LE-GEMM: A lightweight emulation-based
        GEMM with precision refinement on GPU", J. Systems Architecture 160 (2025) 103336.
    [ozIMMU] H. Ootomo, K. Ozaki, R. Yokota, "DGEMM on integer matrix multiplication unit",
        IJHPCA 2024.
"""

from __future__ import annotations

from ..._array import array_namespace
from .backend import BACKENDS, Backend, parse, run, run_real

__all__ = ["BACKENDS", "Backend", "cgemm", "parse", "run", "run_real", "sgemm"]


def _check(a, b, out, dtype: str):
    xp = array_namespace(a, b, out)
    for label, x in (("a", a), ("b", b)):
        if x.dtype != getattr(xp, dtype):
            raise TypeError(f"{label} must be {dtype}, got {x.dtype}")
        if x.ndim != 2:
            raise ValueError(f"{label} must be a 2-D matrix, got shape {tuple(x.shape)}")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)}")
    if out is not None:
        if out.dtype != getattr(xp, dtype):
            raise TypeError(f"out must be {dtype}, got {out.dtype}")
        shape = (a.shape[0], b.shape[1])
        if tuple(out.shape) != shape:
            raise ValueError(f"out must have shape {shape}, got {tuple(out.shape)}")
        for label, x in (("a", a), ("b", b)):
            if xp.may_share_memory(out, x):
                raise ValueError(f"out overlaps {label}; pass a separate output array")
    return xp


def cgemm(a, b, *, backend: str = "cgemm", T: float = 1.0, out=None, check_finite: bool = True,
          return_info: bool = False, karatsuba: bool | None = None):
    """Complex single-precision matrix product ``C = A @ B``, native or emulated.

    Args:
        a: ``(m, k)`` complex64, NumPy or CuPy.
        b: ``(k, n)`` complex64, same library, any strides.
        backend: ``"cgemm"``, ``"tf32x3"``, ``"tf32x4"``, ``"fp16-le"`` or ``"int8-auto"``
            (module docstring).
        T: ``int8-auto``'s threshold: the mean mantissa loss allowed per operand, in bits of
            FP32's 24 (>= 0; ``T = 1``: one bit of 24 on average). Ignored by the others.
        out: ``(m, n)`` complex64 to write into; must not overlap ``a`` or ``b``.
        check_finite: for ``cgemm`` and ``tf32x*``, scan the operands for NaN/Inf (``fp16-le``
            and ``int8-auto`` always find them while scaling).
        return_info: also return a :class:`~ozsim.gemm.GemmInfo`
            (:func:`ozsim.gemm.single.run` says what it holds).
        karatsuba: ``tf32x*`` and ``fp16-le``: 3 real products (Karatsuba, ``True``) or the
            stacked 4 (``False``); ``None``: Karatsuba on the GPU, stacked on the CPU (module
            docstring).

    Returns:
        ``(m, n)`` complex64, or ``(C, GemmInfo)`` with ``return_info=True``.

    Raises:
        TypeError: operands or ``out`` not complex64, or NumPy and CuPy arrays mixed.
        ValueError: not 2-D, mismatched inner dimensions, unknown backend (the message lists
            the names), ``T < 0``, ``out`` of the wrong shape or overlapping an operand,
            ``karatsuba`` with ``cgemm`` or ``int8-auto``.
        NonFiniteError: NaN or Inf in an operand.

    References:
        [TF32] Sec. 3-4, [LE-GEMM] Sec. 3, [ozIMMU] Sec. 4.4 (module docstring).
    """
    parse(backend)
    xp = _check(a, b, out, "complex64")
    c, info = run(a, b, backend, T=T, out=out, xp=xp, check_finite=check_finite,
                  karatsuba=karatsuba)
    return (c, info) if return_info else c


def sgemm(a, b, *, backend: str = "cgemm", T: float = 1.0, out=None, check_finite: bool = True,
          return_info: bool = False):
    """Real single-precision matrix product ``C = A @ B``, native or emulated.

    The same backends as :func:`cgemm` (``"cgemm"`` is native SGEMM here); the multiword schemes
    run one real product, ``int8-auto`` packs ``B``'s column halves into one complex operand
    (:func:`ozsim.gemm.single.run_real`).

    Args:
        a: ``(m, k)`` float32, NumPy or CuPy.
        b: ``(k, n)`` float32, same library, any strides.
        backend, T, check_finite, return_info: as :func:`cgemm`.
        out: ``(m, n)`` float32 to write into; must not overlap ``a`` or ``b``.

    Returns:
        ``(m, n)`` float32, or ``(C, GemmInfo)`` with ``return_info=True``.

    Raises:
        TypeError: operands or ``out`` not float32, or NumPy and CuPy arrays mixed.
        ValueError: not 2-D, mismatched inner dimensions, unknown backend, ``T < 0``, ``out`` of
            the wrong shape or overlapping an operand.
        NonFiniteError: NaN or Inf in an operand.
    """
    parse(backend)
    xp = _check(a, b, out, "float32")
    c, info = run_real(a, b, backend, T=T, out=out, xp=xp, check_finite=check_finite)
    return (c, info) if return_info else c
