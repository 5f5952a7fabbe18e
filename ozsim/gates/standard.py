"""Matrices of the standard gates of Qiskit, OpenQASM 2 ``qelib1.inc`` and OpenQASM 3
``stdgates.inc``.

Every matrix is ``complex128`` and little-endian over the gate's own qubit tuple, exactly like
``qiskit.quantum_info.Operator`` of the gate appended on those qubits: for a gate on
``qubits=(q0, q1, ...)`` bit ``j`` of a row or column index belongs to ``qubits[j]``. For controlled
gates the controls come first, as in Qiskit's ``cx(control, target)``: the control is bit 0 of the
matrix index, the target bit 1, so ``CX = kron(I, |0><0|) + kron(X, |1><1|)`` (``np.kron``'s first
factor acts on the more significant bit, here the target)::

    CX = [[1, 0, 0, 0],
          [0, 0, 0, 1],
          [0, 0, 1, 0],
          [0, 1, 0, 0]]

Angles are in radians. The fixed-gate constants are read-only; :func:`standard_gate` returns a
fresh, writable copy.

References:
    Qiskit 2.x, ``qiskit.circuit.library.standard_gates`` (the matrices in each class docstring).
    A. Cross et al., "Open Quantum Assembly Language", arXiv:1707.03429 (``qelib1.inc``).
    A. Cross et al., "OpenQASM 3", ACM Trans. Quantum Comput. 3, 12 (2022) (``stdgates.inc``).
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

__all__ = [
    "I", "X", "Y", "Z", "H", "S", "SDG", "T", "TDG", "SX", "SXDG",
    "CX", "CY", "CZ", "CH", "CS", "CSDG", "CSX", "SWAP", "ISWAP", "ECR", "DCX",
    "CCX", "CCZ", "CSWAP", "RCCX", "RC3X", "C3X", "C3SX", "C4X",
    "controlled", "mcx",
    "rx", "ry", "rz", "p", "phase", "u", "u3", "u2", "u1", "u0", "r",
    "cp", "cu1", "crx", "cry", "crz", "cu", "cu3",
    "rxx", "ryy", "rzz", "rzx", "xx_minus_yy", "xx_plus_yy",
    "STANDARD_GATES", "standard_gate",
]  # fmt: skip


def _const(rows) -> np.ndarray:
    a = np.array(rows, dtype=np.complex128)
    a.setflags(write=False)
    return a


def controlled(matrix: np.ndarray, num_controls: int = 1) -> np.ndarray:
    """Return the gate that applies ``matrix`` when all ``num_controls`` controls are 1.

    The controls are the first ``num_controls`` qubits of the gate (the low bits of the index), the
    targets follow, as in Qiskit's ``ControlledGate`` with the default ``ctrl_state``.

    Args:
        matrix: ``(2**k, 2**k)`` target unitary, little-endian over its own k qubits.
        num_controls: number of control qubits c >= 0.

    Returns:
        ``(2**(c+k), 2**(c+k))`` complex128 array.

    Raises:
        ValueError: ``num_controls < 0`` or ``matrix`` not square.
    """
    u = np.asarray(matrix, dtype=np.complex128)
    if num_controls < 0:
        raise ValueError(f"num_controls must be >= 0, got {num_controls}")
    if u.ndim != 2 or u.shape[0] != u.shape[1]:
        raise ValueError(f"matrix must be square, got shape {u.shape}")
    nc = 1 << num_controls
    on = np.zeros((nc, nc), dtype=np.complex128)
    on[-1, -1] = 1.0  # projector on |1...1> of the controls
    off = np.eye(nc, dtype=np.complex128) - on
    # np.kron(A, B): A acts on the high bits (targets), B on the low bits (controls).
    return np.kron(np.eye(u.shape[0]), off) + np.kron(u, on)


def mcx(num_controls: int) -> np.ndarray:
    """Multi-controlled X on ``num_controls + 1`` qubits (controls first, target last).

    Qiskit names it ``"mcx"`` (also ``C3XGate`` and ``C4XGate``); ``num_controls=1`` is CX.

    Raises:
        ValueError: ``num_controls < 0``.
    """
    return controlled(X, num_controls)


# -- fixed one-qubit gates -----------------------------------------------------------------------
_SQ2 = 1.0 / math.sqrt(2.0)
I = _const(np.eye(2))  # noqa: E741
X = _const([[0, 1], [1, 0]])
Y = _const([[0, -1j], [1j, 0]])
Z = _const([[1, 0], [0, -1]])
H = _const([[_SQ2, _SQ2], [_SQ2, -_SQ2]])
S = _const([[1, 0], [0, 1j]])
SDG = _const([[1, 0], [0, -1j]])
T = _const([[1, 0], [0, np.exp(1j * math.pi / 4)]])
TDG = _const([[1, 0], [0, np.exp(-1j * math.pi / 4)]])
SX = _const([[0.5 + 0.5j, 0.5 - 0.5j], [0.5 - 0.5j, 0.5 + 0.5j]])
SXDG = _const([[0.5 - 0.5j, 0.5 + 0.5j], [0.5 + 0.5j, 0.5 - 0.5j]])

# -- fixed multi-qubit gates (controls first) ----------------------------------------------------
CX = _const(controlled(X))
CY = _const(controlled(Y))
CZ = _const(controlled(Z))
CH = _const(controlled(H))
CS = _const(controlled(S))
CSDG = _const(controlled(SDG))
CSX = _const(controlled(SX))
SWAP = _const([[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 0], [0, 0, 0, 1]])
ISWAP = _const([[1, 0, 0, 0], [0, 0, 1j, 0], [0, 1j, 0, 0], [0, 0, 0, 1]])
ECR = _const(
    _SQ2 * np.array([[0, 1, 0, 1j], [1, 0, -1j, 0], [0, 1j, 0, 1], [-1j, 0, 1, 0]])
)
DCX = _const([[1, 0, 0, 0], [0, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0]])  # CX(0,1) then CX(1,0)
CCX = _const(controlled(X, 2))
CCZ = _const(controlled(Z, 2))
CSWAP = _const(controlled(SWAP, 1))
C3X = _const(controlled(X, 3))
C3SX = _const(controlled(SX, 3))
C4X = _const(controlled(X, 4))


def _rccx() -> np.ndarray:
    # Margolus' relative-phase Toffoli: Toffoli up to the phases -1 on |101> and i/-i on the swap.
    m = np.eye(8, dtype=np.complex128)
    m[3, 3] = m[7, 7] = 0.0
    m[3, 7], m[7, 3] = -1j, 1j
    m[5, 5] = -1.0
    return m


def _rc3x() -> np.ndarray:
    # Relative-phase 3-controlled X (Qiskit's RC3XGate, qelib1's rc3x).
    m = np.eye(16, dtype=np.complex128)
    m[7, 7] = m[15, 15] = 0.0
    m[7, 15], m[15, 7] = 1.0, -1.0
    m[3, 3] = 1j
    m[11, 11] = -1j
    return m


RCCX = _const(_rccx())
RC3X = _const(_rc3x())


# -- parametrised one-qubit gates ----------------------------------------------------------------
def rx(theta: float) -> np.ndarray:
    """``exp(-i theta X / 2)``: (2, 2) complex128."""
    c, s = math.cos(theta / 2), math.sin(theta / 2)
    return np.array([[c, -1j * s], [-1j * s, c]], dtype=np.complex128)


def ry(theta: float) -> np.ndarray:
    """``exp(-i theta Y / 2)``: (2, 2) complex128."""
    c, s = math.cos(theta / 2), math.sin(theta / 2)
    return np.array([[c, -s], [s, c]], dtype=np.complex128)


def rz(phi: float) -> np.ndarray:
    """``exp(-i phi Z / 2) = diag(e^{-i phi/2}, e^{i phi/2})``: (2, 2) complex128."""
    return np.array(
        [[np.exp(-0.5j * phi), 0], [0, np.exp(0.5j * phi)]], dtype=np.complex128
    )


def p(lam: float) -> np.ndarray:
    """Phase gate ``diag(1, e^{i lam})`` (Qiskit ``p``, OpenQASM 3 ``phase``, legacy ``u1``)."""
    return np.array([[1, 0], [0, np.exp(1j * lam)]], dtype=np.complex128)


phase = p
u1 = p


def u(theta: float, phi: float, lam: float) -> np.ndarray:
    """Generic single-qubit gate (Qiskit ``u``, qelib1 ``U``/``u3``).

    ``[[cos(t/2), -e^{i lam} sin(t/2)], [e^{i phi} sin(t/2), e^{i (phi + lam)} cos(t/2)]]``.
    """
    c, s = math.cos(theta / 2), math.sin(theta / 2)
    return np.array(
        [[c, -np.exp(1j * lam) * s], [np.exp(1j * phi) * s, np.exp(1j * (phi + lam)) * c]],
        dtype=np.complex128,
    )


u3 = u


def u2(phi: float, lam: float) -> np.ndarray:
    """``u(pi/2, phi, lam)``."""
    return u(math.pi / 2, phi, lam)


def u0(gamma: float = 0.0) -> np.ndarray:
    """qelib1's idle gate ``u0(gamma)``: the identity (gamma is a duration, not an angle)."""
    del gamma
    return np.eye(2, dtype=np.complex128)


def r(theta: float, phi: float) -> np.ndarray:
    """Rotation by ``theta`` about ``cos(phi) X + sin(phi) Y`` (Qiskit ``r``)."""
    c, s = math.cos(theta / 2), math.sin(theta / 2)
    return np.array(
        [[c, -1j * np.exp(-1j * phi) * s], [-1j * np.exp(1j * phi) * s, c]], dtype=np.complex128
    )


# -- parametrised two-qubit gates ----------------------------------------------------------------
def cp(lam: float) -> np.ndarray:
    """Controlled phase ``diag(1, 1, 1, e^{i lam})`` (``cp``, ``cphase``, legacy ``cu1``)."""
    return controlled(p(lam))


cu1 = cp


def crx(theta: float) -> np.ndarray:
    """Controlled :func:`rx`, control first."""
    return controlled(rx(theta))


def cry(theta: float) -> np.ndarray:
    """Controlled :func:`ry`, control first."""
    return controlled(ry(theta))


def crz(theta: float) -> np.ndarray:
    """Controlled :func:`rz`, control first."""
    return controlled(rz(theta))


def cu(theta: float, phi: float, lam: float, gamma: float) -> np.ndarray:
    """Controlled ``e^{i gamma} u(theta, phi, lam)`` (Qiskit/OpenQASM 3 ``cu``), control first."""
    return controlled(np.exp(1j * gamma) * u(theta, phi, lam))


def cu3(theta: float, phi: float, lam: float) -> np.ndarray:
    """Controlled :func:`u3` (qelib1 ``cu3``), control first."""
    return controlled(u(theta, phi, lam))


def _pauli_rotation(pauli: np.ndarray, theta: float) -> np.ndarray:
    c, s = math.cos(theta / 2), math.sin(theta / 2)
    return c * np.eye(pauli.shape[0], dtype=np.complex128) - 1j * s * pauli


def rxx(theta: float) -> np.ndarray:
    """``exp(-i theta X(x)X / 2)``: (4, 4) complex128."""
    return _pauli_rotation(np.kron(X, X), theta)


def ryy(theta: float) -> np.ndarray:
    """``exp(-i theta Y(x)Y / 2)``: (4, 4) complex128."""
    return _pauli_rotation(np.kron(Y, Y), theta)


def rzz(theta: float) -> np.ndarray:
    """``exp(-i theta Z(x)Z / 2)``: (4, 4) complex128."""
    return _pauli_rotation(np.kron(Z, Z), theta)


def rzx(theta: float) -> np.ndarray:
    """``exp(-i theta Z_0 X_1 / 2)``: Z on the first qubit, X on the second (Qiskit ``rzx``)."""
    return _pauli_rotation(np.kron(X, Z), theta)


def xx_minus_yy(theta: float, beta: float = 0.0) -> np.ndarray:
    """Qiskit's ``XXMinusYYGate(theta, beta)``: rotation in the {|00>, |11>} subspace."""
    c, s = math.cos(theta / 2), math.sin(theta / 2)
    m = np.eye(4, dtype=np.complex128)
    m[0, 0] = m[3, 3] = c
    m[0, 3] = -1j * s * np.exp(-1j * beta)
    m[3, 0] = -1j * s * np.exp(1j * beta)
    return m


def xx_plus_yy(theta: float, beta: float = 0.0) -> np.ndarray:
    """Qiskit's ``XXPlusYYGate(theta, beta)``: rotation in the {|01>, |10>} subspace."""
    c, s = math.cos(theta / 2), math.sin(theta / 2)
    m = np.eye(4, dtype=np.complex128)
    m[1, 1] = m[2, 2] = c
    m[1, 2] = -1j * s * np.exp(-1j * beta)
    m[2, 1] = -1j * s * np.exp(1j * beta)
    return m


# -- lookup by name ------------------------------------------------------------------------------
def _fixed(m: np.ndarray) -> Callable[[], np.ndarray]:
    return lambda: m


#: name -> (number of parameters, number of qubits, factory). Names are Qiskit's
#: ``Instruction.name``; OpenQASM aliases (``U``, ``CX``, ``phase``, ``cphase``, ``c3x``...) map to
#: the same matrices. ``"mcx"`` is absent: its size depends on the qubit count (see
#: :func:`standard_gate`).
STANDARD_GATES: dict[str, tuple[int, int, Callable[..., np.ndarray]]] = {
    "id": (0, 1, _fixed(I)),
    "x": (0, 1, _fixed(X)),
    "y": (0, 1, _fixed(Y)),
    "z": (0, 1, _fixed(Z)),
    "h": (0, 1, _fixed(H)),
    "s": (0, 1, _fixed(S)),
    "sdg": (0, 1, _fixed(SDG)),
    "t": (0, 1, _fixed(T)),
    "tdg": (0, 1, _fixed(TDG)),
    "sx": (0, 1, _fixed(SX)),
    "sxdg": (0, 1, _fixed(SXDG)),
    "rx": (1, 1, rx),
    "ry": (1, 1, ry),
    "rz": (1, 1, rz),
    "p": (1, 1, p),
    "u1": (1, 1, p),
    "u2": (2, 1, u2),
    "u3": (3, 1, u),
    "u": (3, 1, u),
    "u0": (1, 1, u0),
    "r": (2, 1, r),
    "cx": (0, 2, _fixed(CX)),
    "cy": (0, 2, _fixed(CY)),
    "cz": (0, 2, _fixed(CZ)),
    "ch": (0, 2, _fixed(CH)),
    "cs": (0, 2, _fixed(CS)),
    "csdg": (0, 2, _fixed(CSDG)),
    "csx": (0, 2, _fixed(CSX)),
    "swap": (0, 2, _fixed(SWAP)),
    "iswap": (0, 2, _fixed(ISWAP)),
    "ecr": (0, 2, _fixed(ECR)),
    "dcx": (0, 2, _fixed(DCX)),
    "cp": (1, 2, cp),
    "cu1": (1, 2, cp),
    "crx": (1, 2, crx),
    "cry": (1, 2, cry),
    "crz": (1, 2, crz),
    "cu": (4, 2, cu),
    "cu3": (3, 2, cu3),
    "rxx": (1, 2, rxx),
    "ryy": (1, 2, ryy),
    "rzz": (1, 2, rzz),
    "rzx": (1, 2, rzx),
    "xx_minus_yy": (2, 2, xx_minus_yy),
    "xx_plus_yy": (2, 2, xx_plus_yy),
    "ccx": (0, 3, _fixed(CCX)),
    "ccz": (0, 3, _fixed(CCZ)),
    "cswap": (0, 3, _fixed(CSWAP)),
    "rccx": (0, 3, _fixed(RCCX)),
    "rcccx": (0, 4, _fixed(RC3X)),
    "c3sx": (0, 4, _fixed(C3SX)),
}
_ALIASES = {
    "i": "id",
    "U": "u",
    "CX": "cx",
    "phase": "p",
    "cphase": "cp",
    "c3sqrtx": "c3sx",
    "rc3x": "rcccx",
}
STANDARD_GATES.update({alias: STANDARD_GATES[name] for alias, name in _ALIASES.items()})
STANDARD_GATES["c3x"] = (0, 4, _fixed(C3X))
STANDARD_GATES["c4x"] = (0, 5, _fixed(C4X))


def standard_gate(
    name: str, params: Sequence[float] = (), num_qubits: int | None = None
) -> np.ndarray:
    """Return the matrix of a standard gate given its Qiskit/OpenQASM name and parameters.

    Args:
        name: ``Instruction.name`` as Qiskit spells it (``"cx"``, ``"u3"``, ``"cu1"``, ``"p"``,
            ``"ccx"``...) or an OpenQASM alias (``"U"``, ``"CX"``, ``"phase"``, ``"cphase"``,
            ``"c3x"``, ``"c4x"``, ``"c3sqrtx"``, ``"rc3x"``); see :data:`STANDARD_GATES`.
            ``"mcx"`` needs ``num_qubits``.
        params: the gate's angles in radians (as many as the gate takes).
        num_qubits: if given, the gate must act on that many qubits; required for ``"mcx"``.

    Returns:
        ``(2**d, 2**d)`` complex128 array, a fresh writable copy, little-endian over the gate's
        qubits with controls first.

    Raises:
        ValueError: unknown name, wrong number of parameters, or ``num_qubits`` that does not match
            the gate.
    """
    if name == "mcx":
        if num_qubits is None or num_qubits < 1:
            raise ValueError(f"gate 'mcx' needs num_qubits >= 1, got {num_qubits!r}")
        if len(params):
            raise ValueError(f"gate 'mcx' takes 0 parameters, got {len(params)}")
        return mcx(num_qubits - 1)
    try:
        nparams, nqubits, factory = STANDARD_GATES[name]
    except KeyError:
        raise ValueError(f"unknown standard gate {name!r}") from None
    if len(params) != nparams:
        raise ValueError(f"gate {name!r} takes {nparams} parameter(s), got {len(params)}")
    if num_qubits is not None and num_qubits != nqubits:
        raise ValueError(f"gate {name!r} acts on {nqubits} qubit(s), not {num_qubits}")
    return np.array(factory(*(float(x) for x in params)), dtype=np.complex128)
