"""One-pass dense gates in FP64 on the GPU: the ``zgemm`` backend's kernel for ``d <= 6``.

Private; imported only when a CuPy state meets a gate of at most :data:`MAX_QUBITS` qubits. A
gate through cuBLAS ZGEMM costs a transposing copy of the state plus the GEMM's read and write
(2.2x to 6.4x the time of one read and one write of the state at d <= 8 on an H100); this kernel
reads each amplitude group through the target qubits' bit positions, multiplies it by the gate
in registers and writes it back in place: one read and one write of the state, no second
buffer. The algorithm and its memory-access argument are in ``kernels/dense_gate.cu``.

The products are FP64 fused multiply-adds in a fixed order (column 0 first), the same
arithmetic as a textbook complex matrix-vector product; they agree with cuBLAS or BLAS ZGEMM to
rounding (not bitwise: BLAS libraries order their sums in their own ways).
"""

from __future__ import annotations

from pathlib import Path

import cupy as cp
import numpy as np

from ._gpu import raw_module

__all__ = ["MAX_QUBITS", "apply_dense"]

#: Largest gate the one-pass kernel takes (its 64 KiB of constant memory holds a 64 x 64 gate).
MAX_QUBITS = 6
_THREADS = 256
_SOURCE = Path(__file__).parent / "kernels" / "dense_gate.cu"
_MEMCPY_D2D = 3  # cudaMemcpyDeviceToDevice


def _module(d: int, device: int):
    return raw_module(_SOURCE, ("-std=c++17", f"-DGATE_QUBITS={d}"))


def apply_dense(psi, matrix, positions) -> None:
    """``psi <- U psi`` on the target qubits at ``positions``, in place, in one pass.

    Args:
        psi: ``(2**n,)`` complex128 CuPy array, C-contiguous (the state in the engine's buffer
            order).
        matrix: ``(2**d, 2**d)`` complex128 CuPy array, little-endian over the targets: bit j of
            its row/column index is the amplitude-index bit ``positions[j]``.
        positions: d distinct bit positions in ``0..n-1``, ``1 <= d <= MAX_QUBITS``, ``d < n``.

    Raises:
        ValueError: ``d`` out of range, repeated or out-of-range positions, or shapes that do
            not match.
    """
    d = len(positions)
    n = int(psi.size).bit_length() - 1
    if not 1 <= d <= MAX_QUBITS or d >= n:
        raise ValueError(f"the one-pass kernel takes 1..{MAX_QUBITS} targets below n = {n}; "
                         f"got {d}")
    if len(set(positions)) != d or not all(0 <= int(p) < n for p in positions):
        raise ValueError(f"target bit positions must be distinct and in 0..{n - 1}: {positions}")
    if tuple(matrix.shape) != (1 << d, 1 << d) or psi.size != 1 << n:
        raise ValueError(f"shapes do not match: state {psi.shape}, gate {matrix.shape}")
    mod = _module(d, cp.cuda.Device().id)
    u = cp.ascontiguousarray(matrix, dtype=cp.complex128)
    stream = cp.cuda.get_current_stream()
    cp.cuda.runtime.memcpyAsync(mod.get_global("gate_u").ptr, u.data.ptr, u.nbytes,
                                _MEMCPY_D2D, stream.ptr)
    groups = psi.size >> d
    threads = groups * (2 if d >= 6 else 1)
    pos = [int(p) for p in positions] + [0] * (6 - d)
    mod.get_function("dense_gate")(
        (int(-(-threads // _THREADS)),), (_THREADS,),
        (psi, np.int64(groups), *(np.int32(p) for p in pos)))
