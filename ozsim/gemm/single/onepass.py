"""One-pass multiword gates on the GPU: ``tf32x3``, ``tf32x4`` and ``fp16-le`` gates of
``d <= 5`` qubits on a complex64 state, in place, on CUDA cores (private; imports CuPy).

A state-vector gate is a product with ``k = 2**d`` terms a sum. On the tensor cores (the GEMM
path, :mod:`ozsim.gemm.single.cuda`) each such sum is rounded toward zero in FP32, at
``k <= 32`` in one to four MMA steps: every gate leaves a bias of about half a unit in the last
place in each amplitude, of the amplitude's sign, that adds up gate after gate (H200, brickwork
on N = 24: 3-6.5x native CGEMM's error). The words here are the same as the GEMM path's
(the gate split once per gate on the device by :mod:`ozsim.gemm.single.rounding`, the state's
amplitudes split in registers), every word product is exact in FP32, and every sum rounds to
nearest, as the papers' FP32 accumulators assume ([TF32] Sec. 3-4, [LE-GEMM] Sec. 3): the
schemes' own arithmetic (``kernels/dense_gate.cu``, ``WORDS`` = 1, 2, has the details), one read
and one write of the state a gate, no workspace. Measured on an H200 (N = 30, complex64 copy
floor 4.07 ms, targets on high / low bits): ``tf32x3`` 1.8x / 2.4x the floor at d = 1, 2.7x /
3.6x at d = 3, 4.1x / 6.2x at d = 4, 7.8x / 8.1x at d = 5, where the same gate through the
tensor cores' GEMM path takes 14-17x; from d = 4 the FP32 units bind (``12 * 2**d`` fused
multiply-adds an amplitude, 3x cgemm's). ``benchmarks/RESULTS.md``, section 5.

References:
    [TF32] P. Valero-Lara, F. Liu, J. S. Vetter, I. Jorquera, SC-W '23, pp. 179-186.
    [LE-GEMM] Y. Zhang, L. Lu, Z. Yang, Z. Liang, S. Suo, J. Systems Architecture 160 (2025).
"""

from __future__ import annotations

import cupy as cp

from .. import native_gate
from .legemm import scale_shifts, split_fp16
from .rounding import split_tf32

__all__ = ["MAX_QUBITS", "apply_words"]

#: Largest gate of the multiword one-pass kernels (``dense_gate.cu``'s ``WORDS`` variants; at
#: d = 6 the gate's two words would fill all 64 KiB of constant memory).
MAX_QUBITS = 5
_OPTIONS = {"tf32x3": ("-DWORDS=1", "-DPRODUCTS=3"), "tf32x4": ("-DWORDS=1", "-DPRODUCTS=4"),
            "fp16-le": ("-DWORDS=2",)}


def _complex(re, im):
    out = cp.empty(re.shape, dtype=cp.complex64)
    out.real[...] = re
    out.imag[...] = im
    return out


def gate_words(matrix, name: str) -> dict:
    """The gate's words for the kernel's constant memory: ``gate_u`` (hi words of Re and Im,
    complex64), ``gate_l`` (lo words) and, for ``fp16-le``, ``gate_s`` (int32 shifts of the
    rows of Re, then of Im; the words are scaled by them).

    Args:
        matrix: ``(2**d, 2**d)`` complex64 CuPy array.
        name: ``"tf32x3"``, ``"tf32x4"`` or ``"fp16-le"``.
    """
    re, im = matrix.real.copy(), matrix.imag.copy()
    if name == "fp16-le":
        sr, si = scale_shifts(re, 1, cp), scale_shifts(im, 1, cp)
        (hr, lr), (hi, li) = split_fp16(re, sr[:, None]), split_fp16(im, si[:, None])
        return {"gate_u": _complex(hr, hi), "gate_l": _complex(lr, li),
                "gate_s": cp.concatenate([sr, si]).astype(cp.int32)}
    (hr, lr), (hi, li) = split_tf32(re), split_tf32(im)
    return {"gate_u": _complex(hr, hi), "gate_l": _complex(lr, li)}


def apply_words(psi, matrix, positions, name: str) -> None:
    """``psi <- U psi`` on the target bit positions by the multiword scheme ``name``, in place.

    Args:
        psi: ``2**n`` complex64 CuPy amplitudes (C-contiguous).
        matrix: ``(2**d, 2**d)`` complex64 CuPy gate, little-endian over ``positions``,
            ``1 <= d <= 5``.
        positions: the d target bit positions of the amplitude index.
        name: ``"tf32x3"``, ``"tf32x4"`` or ``"fp16-le"``.

    Raises:
        ValueError: a bad ``d``, shape or position (as
            :func:`ozsim.gemm.native_gate.apply_dense`), or an unknown ``name``.
        NonFiniteError: NaN or Inf in an ``fp16-le`` gate (found while scaling).
    """
    if name not in _OPTIONS:
        raise ValueError(f"no multiword one-pass gate for {name!r}")
    if psi.dtype != cp.complex64:
        raise ValueError(f"multiword gates need complex64 amplitudes, got {psi.dtype}")
    d = native_gate._check(psi, matrix, positions, range(1, MAX_QUBITS + 1))
    mod = native_gate._module(d, cp.cuda.Device().id, True, _OPTIONS[name])
    u = cp.ascontiguousarray(matrix, dtype=cp.complex64)
    native_gate.launch_cuda_cores(mod, psi, positions, gate_words(u, name))
