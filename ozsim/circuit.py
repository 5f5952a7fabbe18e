"""The circuit IR: a number of qubits and classical bits and an ordered list of operations.

Conventions (as in Qiskit):
    * Qubit order is little-endian: qubit 0 is the least significant bit of an amplitude's index.
    * A gate's matrix is indexed little-endian over its own qubit tuple: for
      ``Operation(qubits=(q0, q1, ...))`` bit ``j`` of a row or column index belongs to ``qubits[j]``
      (exactly as ``qiskit.quantum_info.Operator`` of a gate applied with ``qc.append(g, [q0, q1])``).
    * Classical bits are numbered globally, registers in declaration order (``cregs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from .errors import NonFiniteError, NonUnitaryError

__all__ = ["UNITARY_ATOL", "Circuit", "Operation", "check_unitary"]

#: Largest accepted ``max |U^H U - I|`` entry of a gate matrix. Matrices written with 15-17
#: significant digits (OpenQASM angles, Haar unitaries from QR) land below 1e-13; 1e-10 leaves room
#: for products of many such gates while still rejecting any matrix a user typed by mistake.
UNITARY_ATOL = 1e-10

KINDS = ("unitary", "measure", "reset", "barrier")


def check_unitary(matrix: np.ndarray, name: str = "gate", atol: float = UNITARY_ATOL) -> np.ndarray:
    """Return ``matrix`` as a C-contiguous complex128 array after checking it is a unitary.

    Args:
        matrix: ``(2**d, 2**d)`` array-like, any numeric dtype.
        name: used in error messages.
        atol: largest accepted entry of ``|U^H U - I|``.

    Returns:
        ``(2**d, 2**d)`` complex128 C-contiguous array (a copy when the input was not one).

    Raises:
        ValueError: not a square matrix whose side is a power of two (>= 2).
        NonFiniteError: NaN or Inf entries.
        NonUnitaryError: ``max |U^H U - I| > atol``.
    """
    u = np.ascontiguousarray(matrix, dtype=np.complex128)
    if u.ndim != 2 or u.shape[0] != u.shape[1] or u.shape[0] < 2 or u.shape[0] & (u.shape[0] - 1):
        raise ValueError(
            f"{name}: matrix must be square with a power-of-two side >= 2, got shape {u.shape}"
        )
    if not np.isfinite(u).all():
        raise NonFiniteError(f"{name}: matrix has NaN or Inf entries")
    dev = float(np.abs(u.conj().T @ u - np.eye(u.shape[0])).max())
    if dev > atol:
        raise NonUnitaryError(f"{name}: matrix is not unitary (max |U^H U - I| = {dev:.3g} > {atol})")
    return u


@dataclass(frozen=True, eq=False)
class Operation:
    """One instruction of a :class:`Circuit`.

    Attributes:
        kind: ``"unitary"``, ``"measure"``, ``"reset"`` or ``"barrier"``.
        qubits: target qubits; for a unitary, ``qubits[j]`` is bit ``j`` of the matrix index.
        matrix: for ``kind == "unitary"``: ``(2**d, 2**d)`` complex128, ``d = len(qubits)``;
            otherwise ``None``.
        name: gate name (``"h"``, ``"cx"``, ``"unitary"``...), for reports.
        clbits: for ``"measure"``: the classical bit each qubit is written to.
        params: gate parameters (radians), for reports.
        condition: ``(clbits, value)``: apply only when the integer read little-endian from
            ``clbits`` equals ``value``; ``None`` for unconditional operations.
    """

    kind: str
    qubits: tuple[int, ...]
    matrix: np.ndarray | None = None
    name: str = ""
    clbits: tuple[int, ...] = ()
    params: tuple[float, ...] = ()
    condition: tuple[tuple[int, ...], int] | None = None

    @property
    def num_qubits(self) -> int:
        return len(self.qubits)


@dataclass
class Circuit:
    """A quantum circuit in ozsim's IR.

    Args:
        num_qubits: number of qubits N (>= 1).
        num_clbits: number of classical bits.
        name: used in reports.
        global_phase: radians; the final state is multiplied by ``exp(i * global_phase)``.
        cregs: classical registers as ``(name, size)`` in declaration order; their sizes add up to
            ``num_clbits``. Default: one register ``"c"`` holding every classical bit.

    Example:
        >>> from ozsim import Circuit, gates
        >>> c = Circuit(2, 2)
        >>> _ = c.unitary(gates.H, [0], name="h")
        >>> _ = c.unitary(gates.CX, [0, 1], name="cx")  # control 0, target 1 (Qiskit's order)
        >>> c.measure_all()
        >>> c.num_gates
        2
    """

    num_qubits: int
    num_clbits: int = 0
    name: str = "circuit"
    global_phase: float = 0.0
    cregs: list[tuple[str, int]] | None = None
    operations: list[Operation] = field(default_factory=list)

    def __post_init__(self):
        if int(self.num_qubits) != self.num_qubits or self.num_qubits < 1:
            raise ValueError(f"num_qubits must be a positive integer, got {self.num_qubits!r}")
        if self.num_clbits < 0:
            raise ValueError(f"num_clbits must be >= 0, got {self.num_clbits!r}")
        if self.cregs is None:
            self.cregs = [("c", self.num_clbits)] if self.num_clbits else []
        if sum(size for _, size in self.cregs) != self.num_clbits:
            raise ValueError(f"cregs {self.cregs} do not add up to num_clbits={self.num_clbits}")

    # -- building -----------------------------------------------------------------------------
    def _check_qubits(self, qubits: Iterable[int]) -> tuple[int, ...]:
        qs = tuple(int(q) for q in qubits)
        if len(set(qs)) != len(qs):
            raise ValueError(f"repeated target qubit in {qs}")
        for q in qs:
            if not 0 <= q < self.num_qubits:
                raise ValueError(f"qubit {q} out of range for a {self.num_qubits}-qubit circuit")
        return qs

    def unitary(
        self,
        matrix: np.ndarray,
        qubits: Sequence[int],
        name: str = "unitary",
        params: Sequence[float] = (),
        condition: tuple[tuple[int, ...], int] | None = None,
        check: bool = True,
    ) -> Operation:
        """Append a gate given by its matrix.

        Args:
            matrix: ``(2**d, 2**d)``, little-endian over ``qubits``.
            qubits: the d target qubits, distinct.
            name: a label for reports.
            params: gate parameters in radians, for reports.
            condition: see :class:`Operation`.
            check: verify unitarity (:func:`check_unitary`).

        Raises:
            ValueError: bad qubits or a matrix whose side is not ``2**len(qubits)``.
            NonUnitaryError, NonFiniteError: see :func:`check_unitary`.
        """
        qs = self._check_qubits(qubits)
        u = check_unitary(matrix, name) if check else np.ascontiguousarray(matrix, np.complex128)
        if u.shape != (1 << len(qs), 1 << len(qs)):
            raise ValueError(
                f"{name}: a {len(qs)}-qubit gate needs a {1 << len(qs)}x{1 << len(qs)} matrix, "
                f"got {u.shape}"
            )
        op = Operation("unitary", qs, u, name, params=tuple(params), condition=condition)
        self.operations.append(op)
        return op

    def measure(self, qubit: int, clbit: int) -> Operation:
        """Append a Z-basis measurement of ``qubit`` into classical bit ``clbit``."""
        (q,) = self._check_qubits([qubit])
        if not 0 <= clbit < self.num_clbits:
            raise ValueError(f"clbit {clbit} out of range for {self.num_clbits} classical bits")
        op = Operation("measure", (q,), name="measure", clbits=(int(clbit),))
        self.operations.append(op)
        return op

    def measure_all(self) -> None:
        """Measure qubit i into clbit i, adding a register ``"meas"`` if there are too few bits."""
        if self.num_clbits < self.num_qubits:
            extra = self.num_qubits - self.num_clbits
            self.cregs.append(("meas", extra))
            self.num_clbits += extra
        for q in range(self.num_qubits):
            self.measure(q, q)

    def reset(self, qubit: int) -> Operation:
        """Append a reset of ``qubit`` to |0>."""
        op = Operation("reset", self._check_qubits([qubit]), name="reset")
        self.operations.append(op)
        return op

    def barrier(self, *qubits: int) -> Operation:
        """Append a barrier (no effect on the state)."""
        qs = self._check_qubits(qubits or range(self.num_qubits))
        op = Operation("barrier", qs, name="barrier")
        self.operations.append(op)
        return op

    # -- queries ------------------------------------------------------------------------------
    @property
    def gates(self) -> list[Operation]:
        """The unitary operations, in order."""
        return [op for op in self.operations if op.kind == "unitary"]

    @property
    def num_gates(self) -> int:
        return sum(op.kind == "unitary" for op in self.operations)

    def count_ops(self) -> dict[str, int]:
        """Operation counts by name, most frequent first."""
        counts: dict[str, int] = {}
        for op in self.operations:
            counts[op.name] = counts.get(op.name, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: -kv[1]))

    def __repr__(self) -> str:
        return (
            f"Circuit(name={self.name!r}, num_qubits={self.num_qubits}, "
            f"num_clbits={self.num_clbits}, operations={len(self.operations)})"
        )
