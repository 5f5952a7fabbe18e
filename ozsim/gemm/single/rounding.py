"""Rounding FP32 values to TF32 and FP16, and the two-word splits built on it (no CuPy import).

Both roundings work on the bits of a float32, so they are exact, deterministic and the same on
every device: the NumPy/CuPy functions here and the CUDA device functions in
:data:`CUDA_DEVICE_FUNCTIONS` (compiled by :mod:`ozsim.gemm.single.cuda`) compute the same bits,
which ``tests/test_single.py`` checks on the GPU.

* TF32 keeps FP32's 8 exponent bits and the top 10 of its 23 stored significand bits (11
  significant bits with the hidden one). Rounding to nearest, ties to even, at bit 13: add
  ``0x0FFF`` plus the lowest kept bit to the float32's bits and clear the low 13 bits; a carry
  out of the significand moves into the exponent, which is the correct result. The one value
  this cannot give is a finite number above FP32's largest: a finite ``|x| >= (2 - 2**-11) *
  2**127`` would round to Inf, so it is truncated instead (the largest TF32 below it). Inf and
  NaN pass through unchanged.
* FP16 (for LE-GEMM, on values already scaled into ``|x| < 2**15``): the normal FP16 numbers
  (``2**-14 <= |x| < 2**16``) have 11 significant bits, so they round exactly as TF32 does; below
  ``2**-14`` FP16 is subnormal, a fixed quantum ``2**-24``, and ``(x + 0.75) - 0.75`` in FP32 round
  to nearest rounds ``x`` to a multiple of ``2**-24`` with ties to even (``0.75`` lies in
  ``[0.5, 1)``, whose FP32 spacing is ``2**-24``, and is an even multiple of it), with ``x``'s
  sign put back on a zero (FP16's ``-0``). The result is a
  float32 holding an FP16 value: :func:`round_fp16` equals ``x.astype(float16).astype(float32)``
  for every ``|x| < 65520`` (tested).

Two-word split ([TF32] Sec. 3): ``hi = tf32(x)``, ``lo = tf32(x - hi)``. ``x - hi`` is exact in
FP32 (a multiple of ``x``'s FP32 spacing, at most ``2**12`` of them), so for a finite normal ``x``
with ``2**e <= |x| < 2**(e+1)``: ``|x - hi| <= 2**(e-11)`` and ``lo`` rounds that to 11 bits, so
``|x - (hi + lo)| <= 2**(e-23)``, one unit in the last place of ``x`` (``2**(e-22)`` in the
truncated case above). This needs ``x - hi`` to be a normal float32, which holds for
``|x| >= 2**-114``; below, ``lo`` is rounded on FP32's subnormal grid and the error is at most
``2**-137`` absolute (a product of such values underflows FP32 anyway).

References:
    [TF32] P. Valero-Lara, F. Liu, J. S. Vetter, I. Jorquera, "Mixed-Precision S/DGEMM Using the
        TF32 and TF64 Frameworks on Low-Precision AI Tensor Cores", SC-W '23 (Correctness '23),
        pp. 179-186: Sec. 3 (splitting an FP32 value into TF32 words).
"""

from __future__ import annotations

from pathlib import Path

from ..._array import array_namespace

__all__ = ["CUDA_DEVICE_FUNCTIONS", "FP16_MIN_NORMAL", "LE_RESIDUAL_SHIFT", "LE_SCALE_EXP",
           "TF32_DROPPED_BITS", "round_fp16", "round_tf32", "split_tf32"]

#: Low significand bits of a float32 that TF32 drops (23 stored - 10 kept).
TF32_DROPPED_BITS = 13
_EXP = 0x7F800000
_KEEP = 0xFFFFE000  # clears the low 13 bits
_HALF_MINUS_ONE = 0x0FFF  # 2**12 - 1: with the lowest kept bit, round to nearest even
#: Smallest normal FP16 number, ``2**-14``.
FP16_MIN_NORMAL = 2.0**-14
#: LE-GEMM (:mod:`ozsim.gemm.single.legemm`, here because its CPU and GPU parts share them): a
#: row's (column's) largest magnitude is scaled into ``[2**LE_SCALE_EXP, 2**(LE_SCALE_EXP + 1))``
#: and the residual word is ``fp16((x - hi) * 2**LE_RESIDUAL_SHIFT)``.
LE_SCALE_EXP = 14
LE_RESIDUAL_SHIFT = 10
#: ``1.5 * 2**-1``: FP32's spacing on ``[0.5, 1)`` is ``2**-24``, FP16's subnormal quantum.
_FP16_SUBNORMAL_SHIFTER = 0.75


def round_tf32(x):
    """Round float32 values to TF32 (10 stored significand bits), to nearest with ties to even.

    Args:
        x: float32 array (NumPy or CuPy, any shape and strides).

    Returns:
        float32 array of ``x``'s shape whose values have their 13 low significand bits zero
        (see the module docstring for the one truncated case); Inf and NaN unchanged.

    Raises:
        TypeError: ``x`` is not float32.
    """
    xp = array_namespace(x)
    if x.dtype != xp.float32:
        raise TypeError(f"round_tf32 needs float32, got {x.dtype}")
    u = xp.ascontiguousarray(x).view(xp.uint32)
    r = (u + xp.uint32(_HALF_MINUS_ONE) + ((u >> 13) & xp.uint32(1))) & xp.uint32(_KEEP)
    finite = (u & xp.uint32(_EXP)) != _EXP
    r = xp.where(finite & ((r & xp.uint32(_EXP)) == _EXP), u & xp.uint32(_KEEP), r)
    r = xp.where(finite, r, u)
    return r.view(xp.float32)


def round_fp16(x):
    """Round float32 values with ``|x| < 65520`` to FP16, to nearest with ties to even.

    Args:
        x: float32 array; values at or above 65520 in magnitude (which FP16 cannot hold) are not
            supported (LE-GEMM scales its operands below ``2**15`` first).

    Returns:
        float32 array holding FP16 values (subnormal FP16 included): the same values as
        ``x.astype(float16).astype(float32)``.
    """
    xp = array_namespace(x)
    c = xp.float32(_FP16_SUBNORMAL_SHIFTER)
    sub = xp.copysign((x + c) - c, x)  # the first rounding is the one; the sign keeps -0
    return xp.where(xp.abs(x) < xp.float32(FP16_MIN_NORMAL), sub, round_tf32(x))


def split_tf32(x):
    """Two TF32 words of float32 values ([TF32] Sec. 3): ``hi = tf32(x)``, ``lo = tf32(x - hi)``.

    Args:
        x: float32 array (NumPy or CuPy).

    Returns:
        ``(hi, lo)``, float32 arrays of TF32 values with ``|x - (hi + lo)| <= 2**-23 * 2**e``
        for ``x`` in ``[2**e, 2**(e+1))``, ``e >= -114`` (module docstring).
    """
    hi = round_tf32(x)
    return hi, round_tf32(x - hi)


#: The same roundings as CUDA device functions (``ozs_round_tf32``, ``ozs_round_fp16``), for the
#: GPU's split kernels and the multiword one-pass gates: the text of ``kernels/word_rounding.cuh``.
CUDA_DEVICE_FUNCTIONS = (Path(__file__).resolve().parents[1] / "kernels"
                         / "word_rounding.cuh").read_text()
