"""The state-vector engine: ``2**N`` complex128 amplitudes, one GEMM per gate.

A ``d``-qubit gate ``U`` on target qubits ``(q_0, ..., q_{d-1})`` (``q_0`` the least significant
bit of ``U``'s index, Qiskit's convention) acts on the state ``psi`` as one matrix product, the
algorithm of Qiskit's ``Statevector._evolve_operator`` and of the ozIMMU paper's quantum-circuit
application (matmul-(2**(N-d), 2**d, 2**d)):

1. View ``psi`` as a tensor of ``N`` axes of length 2.
2. Bring the target axes to the front, most significant first: ``(q_{d-1}, ..., q_0, rest...)``.
3. Reshape to ``S`` of shape ``(2**d, 2**(N-d))``; row ``r`` of ``S`` is the gate index ``r``.
4. ``S' = U @ S``: one ZGEMM through :func:`ozsim.gemm.zgemm` (native or emulated).

Worked example, ``N = 3``, a 2-qubit gate on ``(0, 2)``: the canonical layout is axes
``(q2, q1, q0)``; the gate wants ``(q2, q0)`` in front, so the state is permuted to
``(q2, q0, q1)`` and viewed as a ``4 x 2`` matrix whose row index is ``2*q2 + q0``, exactly the
gate's index with ``q_0 = 0`` as its low bit and ``q_1 = 2`` as its high bit.

The engine never permutes back: it records which qubit each axis holds (``layout``) and permutes
only when the next gate needs a different front. A gate whose targets already lead costs one
GEMM and no copy; otherwise one transposing copy into the spare buffer. The two buffers are
reused for the whole run (ping-pong), as in Cirq's ``ApplyUnitaryArgs``.
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy as np

from ._array import to_numpy
from .errors import InsufficientMemoryError
from .gemm import GemmInfo, PreparedOperand, parse_backend, zgemm

__all__ = ["StateVector", "state_bytes", "available_memory_bytes", "check_memory"]

AMPLITUDE_BYTES = 16  # complex128


def state_bytes(num_qubits: int) -> int:
    """Bytes of one ``2**num_qubits`` complex128 state vector."""
    return AMPLITUDE_BYTES << num_qubits


def available_memory_bytes(xp: ModuleType) -> int:
    """Free memory on the device of ``xp``: host ``MemAvailable`` or the GPU's free memory."""
    if xp is not np:  # pragma: no cover - GPU
        free, _ = xp.cuda.Device().mem_info
        return int(free) + int(xp.get_default_memory_pool().free_bytes())
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_memory(needed: int, xp: ModuleType, what: str) -> None:
    """Raise :class:`InsufficientMemoryError` if ``needed`` bytes exceed the free memory."""
    avail = available_memory_bytes(xp)
    if needed > avail:
        where = "host memory" if xp is np else "GPU memory"
        raise InsufficientMemoryError(
            f"{what} needs {needed / 2**30:.2f} GiB but only {avail / 2**30:.2f} GiB of {where} "
            "is free",
            needed,
            avail,
        )


class StateVector:
    """``2**N`` complex128 amplitudes with two reusable buffers, on NumPy or CuPy.

    Args:
        num_qubits: N (>= 1).
        xp: ``numpy`` or ``cupy``.
        workspace_bytes: bound on the emulated GEMM's slice buffers.

    Raises:
        InsufficientMemoryError: the two buffers plus the workspace do not fit (before
            allocating).
    """

    def __init__(self, num_qubits: int, xp: ModuleType = np, workspace_bytes: int = 1 << 28):
        self.num_qubits = n = int(num_qubits)
        self.xp = xp
        self.workspace_bytes = int(workspace_bytes)
        self.peak_bytes = 2 * state_bytes(n) + min(self.workspace_bytes, 12 * state_bytes(n))
        check_memory(self.peak_bytes, xp, f"a {n}-qubit state vector (two buffers and workspace)")
        self._buf = xp.zeros(1 << n, dtype=xp.complex128)
        self._spare = xp.empty(1 << n, dtype=xp.complex128)
        self._buf[0] = 1.0
        self.layout: tuple[int, ...] = tuple(range(n - 1, -1, -1))  # qubit held by each axis

    # -- gates --------------------------------------------------------------------------------
    def apply(
        self,
        gate,
        qubits: tuple[int, ...],
        backend: str = "int8-auto",
        T: float = 1.0,
    ) -> GemmInfo:
        """Apply a d-qubit gate: permute (only if needed), then one ZGEMM.

        Args:
            gate: ``(2**d, 2**d)`` complex128 on the engine's device, little-endian over
                ``qubits``, or a :class:`~ozsim.gemm.PreparedOperand` of one.
            qubits: d distinct target qubits.
            backend, T: see :func:`ozsim.gemm.zgemm`.

        Returns:
            The GEMM's :class:`~ozsim.gemm.GemmInfo`.
        """
        d = len(qubits)
        want = tuple(reversed(qubits))
        if self.layout[:d] != want:
            self._permute(want)
        rows, cols = 1 << d, 1 << (self.num_qubits - d)
        _, info = zgemm(
            gate,
            self._buf.reshape(rows, cols),
            backend=backend,
            T=T,
            out=self._spare.reshape(rows, cols),
            check_finite=False,
            return_info=True,
            workspace_bytes=self.workspace_bytes,
        )
        self._buf, self._spare = self._spare, self._buf
        return info

    def _permute(self, front: tuple[int, ...]) -> None:
        n = self.num_qubits
        rest = tuple(q for q in self.layout if q not in front)
        new_layout = front + rest
        perm = [self.layout.index(q) for q in new_layout]
        src = self._buf.reshape((2,) * n).transpose(perm)
        self._spare.reshape((2,) * n)[...] = src
        self._buf, self._spare = self._spare, self._buf
        self.layout = new_layout

    def scale(self, factor: complex) -> None:
        """Multiply every amplitude by ``factor`` (a global phase)."""
        self._buf *= factor

    # -- read-out -----------------------------------------------------------------------------
    def amplitudes(self):
        """The amplitudes in canonical little-endian order, ``(2**N,)`` complex128 on the device.

        Permutes the engine's buffer in place into canonical order if needed (one copy).
        """
        canonical = tuple(range(self.num_qubits - 1, -1, -1))
        if self.layout != canonical:
            self._permute(canonical)
        return self._buf

    def to_numpy(self) -> np.ndarray:
        """The amplitudes as a NumPy array (a host copy for CuPy)."""
        return to_numpy(self.amplitudes())


def gemm_prepare(matrix, backend: str):
    """The A operand for :meth:`StateVector.apply`: a :class:`PreparedOperand` for INT8 backends
    (exponents, loss histogram and slices computed once per gate), the matrix itself otherwise."""
    kind, _ = parse_backend(backend)
    return matrix if kind == "zgemm" else PreparedOperand(matrix)
