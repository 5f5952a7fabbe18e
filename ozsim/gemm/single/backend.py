"""The single-precision backends' names and the one entry point an engine calls per product.

:func:`run` takes complex64 operands; :func:`run_real` float32 ones. Each backend is a real FP32
product (``tf32x3``, ``tf32x4``, ``fp16-le``), native BLAS/cuBLAS (``cgemm``), or scheme I on
complex128 copies (``int8-auto``). A complex product from a real one (:func:`_complex_product`):

* stacked (the default): ``[Ar; Ai] @ [Br, Bi]``, one real product of twice the rows and columns
  (4 real products' work), then ``Re = ArBr - AiBi`` and ``Im = ArBi + AiBr``. Each part is an
  ordinary dot product, as in native CGEMM, so the error is that of the real scheme.
* ``karatsuba=True``: ``P1 = Ar Br``, ``P2 = Ai Bi``, ``P3 = (Ar + Ai)(Br + Bi)``, ``Re = P1 - P2``,
  ``Im = P3 - P1 - P2``: 3 real products, 25 % less work. The sums ``Ar + Ai`` are rounded to
  FP32 first, and ``Im`` comes out of a cancellation whose error is relative to
  ``|Ar + Ai| |Br + Bi|`` rather than to the terms of ``Im``. Measured on Ozaki's inputs
  (phi = 0.1 and 1, k = 512 and 4096, CPU, 5 seeds each) with ``tf32x3``: norm-wise error
  1.7-2.1x native CGEMM's, against 1.2-1.5x for the stacked form, which is why stacking is the
  CPU's default (``tests/test_single.py`` bounds both). On the GPU (H200, n = 4096 and 8192,
  phi = 0.1 and 1, ``hi*hi`` in chunks) Karatsuba's error is 0.55-0.80x cuBLAS CGEMM's and it
  makes ``tf32x3`` 2.3x CGEMM's speed against 1.9x stacked: the GPU's default
  (``karatsuba=None``).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np

from ..._array import array_namespace
from ...errors import NonFiniteError
from ..info import GemmInfo
from .int8 import int8_auto
from .legemm import le_matmul
from .tf32 import tf32_matmul

__all__ = ["BACKENDS", "Backend", "parse", "run", "run_real"]


@dataclass(frozen=True)
class Backend:
    """One single-precision backend.

    Attributes:
        name: ``"cgemm"``, ``"tf32x3"``, ``"tf32x4"``, ``"fp16-le"`` or ``"int8-auto"``.
        summary: one line.
        reference: the paper and section of the algorithm.
        words: words per FP32 value (2 for the multiword schemes; ``None`` otherwise).
        auto: reads the threshold ``T``.
        karatsuba: accepts ``karatsuba=True`` (a real scheme composed into a complex one).
    """

    name: str
    summary: str
    reference: str
    words: int | None = None
    auto: bool = False
    karatsuba: bool = False


_SPECS = (
    Backend("cgemm", "native complex64 GEMM (BLAS CGEMM on the CPU, cuBLAS CGEMM on the GPU)",
            "-"),
    Backend("tf32x3", "two TF32 words per FP32 value, 3 products (hi*hi, hi*lo, lo*hi), FP32 sums",
            "Valero-Lara, Liu, Vetter, Jorquera, SC-W '23, Sec. 3-4", 2, karatsuba=True),
    Backend("tf32x4", "two TF32 words per FP32 value, 4 products (lo*lo too), FP32 sums",
            "Valero-Lara, Liu, Vetter, Jorquera, SC-W '23, Sec. 3-4", 2, karatsuba=True),
    Backend("fp16-le", "LE-GEMM: FP16 hi and 2**10-scaled FP16 residual, 3 products, two FP32 "
            "accumulators, power-of-two row/column scaling",
            "Zhang, Lu, Yang, Liang, Suo, J. Syst. Archit. 160 (2025), Sec. 3", 2, karatsuba=True),
    Backend("int8-auto", "Ozaki scheme I over INT8, INT8-AUTO with T counted against FP32's 24 "
            "bits (native CGEMM if no s <= 18 meets T)",
            "Ootomo, Ozaki, Yokota, IJHPCA 2024, Alg. 3-4 and Sec. 4.4", auto=True),
)
#: The backend names, in order.
BACKENDS: tuple[str, ...] = tuple(s.name for s in _SPECS)
_BY_NAME = {s.name: s for s in _SPECS}
#: Bits kept per TF32 or FP16 word (10 stored and the hidden one), for :class:`GemmInfo`.
_WORD_BITS = 11


def parse(name: str) -> Backend:
    """The :class:`Backend` of a name (case and surrounding blanks ignored).

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: an unknown name (the message lists the allowed ones).
    """
    if not isinstance(name, str):
        raise TypeError(f"backend must be a string, got {type(name).__name__}")
    spec = _BY_NAME.get(name.strip().lower())
    if spec is None:
        raise ValueError(f"unknown single-precision backend {name!r}; expected one of "
                         f"{', '.join(BACKENDS)}")
    return spec


def _empty_or_native(a, b, out, spec, xp, check_finite):
    """``(out, info)`` for an empty product (zeros) or the native backend (BLAS / cuBLAS
    through ``matmul``), else ``None``: what :func:`run` and :func:`run_real` share."""
    if min(a.shape[0], a.shape[1], b.shape[1]) == 0:
        out[...] = 0
        return out, GemmInfo(spec.name, None)
    if spec.name != "cgemm":
        return None
    if check_finite:
        _check_finite(a, b, xp)
    return xp.matmul(a, b, out=out), GemmInfo(spec.name, None)


def _check_finite(a, b, xp):
    if not (bool(xp.isfinite(a).all()) and bool(xp.isfinite(b).all())):
        raise NonFiniteError("GEMM operand has NaN or Inf entries")


def _real_product(name: str, a_rows, b_cols, xp):
    if name == "fp16-le":
        return le_matmul(a_rows, b_cols, xp)
    return tf32_matmul(a_rows, b_cols, 3 if name == "tf32x3" else 4, xp)


def _complex_product(name, a, b, out, karatsuba: bool, xp):
    """A complex product from the real scheme ``name`` (module docstring)."""
    m, n = a.shape[0], b.shape[1]
    if not karatsuba:
        p = _real_product(name, [a.real, a.imag], [b.real, b.imag], xp)
        xp.subtract(p[:m, :n], p[m:, n:], out=out.real)
        xp.add(p[:m, n:], p[m:, :n], out=out.imag)
        return out
    p1 = _real_product(name, [a.real], [b.real], xp)
    p2 = _real_product(name, [a.imag], [b.imag], xp)
    p3 = _real_product(name, [a.real + a.imag], [b.real + b.imag], xp)
    xp.subtract(p1, p2, out=out.real)
    p3 -= p1
    xp.subtract(p3, p2, out=out.imag)
    return out


def _prologue(a, b, name, T, out, xp, karatsuba, dtype):
    """``(spec, xp, out, karatsuba)``, ``karatsuba=None`` resolved by device (module doc)."""
    spec = parse(name)
    if T < 0:
        raise ValueError(f"T must be >= 0 bits, got {T}")
    if karatsuba and not spec.karatsuba:
        raise ValueError(f"karatsuba=True needs a real scheme (tf32x3, tf32x4, fp16-le), "
                         f"not {spec.name!r}")
    xp = xp or array_namespace(a, b, out)
    if karatsuba is None:
        karatsuba = spec.karatsuba and xp is not np
    if out is None:
        out = xp.empty((a.shape[0], b.shape[1]), dtype=dtype)
    return spec, xp, out, karatsuba


def run(a, b, name: str, *, T: float = 1.0, out=None, xp: ModuleType | None = None,
        check_finite: bool = True, karatsuba: bool | None = None):
    """``C = A @ B`` for complex64 operands, as an engine calls it per gate (no shape or dtype
    checks: :func:`ozsim.gemm.single.cgemm` makes them).

    Args:
        a: ``(m, k)`` complex64 (a gate: ``(2**d, 2**d)``), NumPy or CuPy.
        b: ``(k, n)`` complex64, same library, any strides (a view of the state).
        name: a backend name (:data:`BACKENDS`).
        T: ``int8-auto``'s threshold, mean bits lost of FP32's 24 (>= 0; ignored by the others).
        out: ``(m, n)`` complex64 to write into (not overlapping ``a`` or ``b``), or ``None``.
        xp: numpy or cupy (``None``: from the arrays).
        check_finite: scan for NaN/Inf (``cgemm``, ``tf32x*``); ``fp16-le`` and ``int8-auto``
            always find them, while scaling. Without the scan, NaN and Inf propagate.
        karatsuba: 3 real products instead of 4 (``tf32x3``, ``tf32x4``, ``fp16-le``); ``None``:
            on the GPU only (module docstring).

    Returns:
        ``(C, GemmInfo)``: ``C`` the ``(m, n)`` complex64 product (``out`` if given). The info's
        ``num_splits`` is the number of words per value (2) for ``tf32x*`` and ``fp16-le``, with
        ``bits_per_slice`` 11; ``int8-auto`` reports its slices, bits per slice and mean losses
        (in bits of 24), or ``fallback``.

    Raises:
        ValueError: unknown backend, ``T < 0``, ``karatsuba`` with ``cgemm`` or ``int8-auto``.
        NonFiniteError: NaN or Inf in an operand.
    """
    spec, xp, out, karatsuba = _prologue(a, b, name, T, out, xp, karatsuba, np.complex64)
    done = _empty_or_native(a, b, out, spec, xp, check_finite)
    if done is not None:
        return done
    if spec.name == "int8-auto":
        c, info = int8_auto(a.astype(xp.complex128), b.astype(xp.complex128), T, spec.name, xp)
        if c is None:
            return xp.matmul(a, b, out=out), info
        out[...] = c  # rounded to complex64
        return out, info
    if check_finite and spec.name != "fp16-le":
        _check_finite(a, b, xp)
    _complex_product(spec.name, a, b, out, karatsuba, xp)
    return out, GemmInfo(spec.name, spec.words, _WORD_BITS)


def run_real(a, b, name: str, *, T: float = 1.0, out=None, xp: ModuleType | None = None,
             check_finite: bool = True):
    """``C = A @ B`` for float32 operands; arguments, returns and errors as :func:`run`.

    ``int8-auto`` runs one complex product of half the width, as :func:`ozsim.gemm.dgemm` does:
    ``B``'s column halves become the real and imaginary parts of ``Bc = B[:, :h] + i B[:, h:]``
    (``h = ceil(n / 2)``), and ``A @ Bc`` gives both halves of ``C``; columns ``j`` and ``j + h``
    share a scaling exponent.
    """
    spec, xp, out, _ = _prologue(a, b, name, T, out, xp, False, np.float32)
    m, k = a.shape
    n = b.shape[1]
    done = _empty_or_native(a, b, out, spec, xp, check_finite)
    if done is not None:
        return done
    if spec.name == "int8-auto":
        h = (n + 1) // 2
        bc = xp.zeros((k, h), dtype=xp.complex128)
        bc.real[...] = b[:, :h]
        bc.imag[:, : n - h] = b[:, h:]
        c, info = int8_auto(a.astype(xp.complex128), bc, T, spec.name, xp)
        if c is None:
            return xp.matmul(a, b, out=out), info
        out[:, :h] = c.real
        out[:, h:] = c.imag[:, : n - h]
        return out, info
    if check_finite and spec.name != "fp16-le":
        _check_finite(a, b, xp)
    out[...] = _real_product(spec.name, [a], [b], xp)
    return out, GemmInfo(spec.name, spec.words, _WORD_BITS)
