"""Native complex128 GEMM: BLAS through NumPy on the CPU, cuBLAS ZGEMM through CuPy on the GPU.

The baseline every emulated scheme is measured against, and the fallback of the auto backends
when no slice or moduli count within their range meets ``T``.
"""

from __future__ import annotations

from ..errors import NonFiniteError
from .info import GemmInfo

__all__ = ["apply_one_pass", "matmul", "prepare", "run"]


def matmul(a, b, out, xp):
    """``a @ b`` into ``out`` (or a new array) with the array library's GEMM.

    Args:
        a: ``(m, k)`` complex128; b: ``(k, n)`` complex128 or a GPU ``GatheredMatrix`` (copied
            out first); out: ``(m, n)`` complex128 or ``None``; xp: numpy or cupy.
    """
    if getattr(b, "_ozsim_gathered", False):  # the state read through offsets: a copy first
        b = b.materialize()
    if out is None:
        return xp.matmul(a, b)
    return xp.matmul(a, b, out=out)


def run(a, b, backend, *, T, out, xp, check_finite, workspace_bytes):
    """The registry's entry point for ``zgemm``: see :func:`ozsim.gemm.zgemm`.

    Raises:
        NonFiniteError: NaN or Inf in an operand (with ``check_finite``).
    """
    mat = getattr(a, "matrix", a)
    if getattr(b, "_ozsim_gathered", False):  # the state read through offsets: a copy first
        b = b.materialize()
    if check_finite and not (bool(xp.isfinite(mat).all()) and bool(xp.isfinite(b).all())):
        raise NonFiniteError("GEMM operand has NaN or Inf entries")
    return matmul(mat, b, out, xp), GemmInfo(backend.name, None)


def apply_one_pass(psi, gate, positions, backend, T,  # pragma: no cover - GPU
                   check_finite=True) -> GemmInfo:
    """The GPU's one-pass dense gate, ``d <= 7`` (:mod:`ozsim.gemm.native_gate`)."""
    from . import native_gate

    native_gate.apply_dense(psi, getattr(gate, "matrix", gate), positions)
    return GemmInfo(backend.name, None)


def one_pass_supported(d: int) -> bool:
    """Whether this GPU applies a d-qubit ``zgemm`` gate in one pass: ``d <= 6`` on every GPU,
    ``d = 7`` where :func:`ozsim.gemm.native_gate.one_pass_qubits` says (FP64 ``m16n8k8``;
    elsewhere d = 7 takes the GEMM path: on an H200 the m8n8k4 kernel was no faster than it).
    False without CuPy or a device."""
    if d <= 6:
        return True
    try:
        from . import native_gate

        return d <= native_gate.one_pass_qubits()
    except (ImportError, RuntimeError):  # no CuPy, or no device (CUDARuntimeError)
        return False


def prepare(matrix, host=None):
    """Native ZGEMM needs no preparation: the matrix itself."""
    return matrix
