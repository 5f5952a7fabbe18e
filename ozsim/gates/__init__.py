"""Gate matrices, Haar-random unitaries and circuit builders.

All matrices are complex128 and little-endian over the gate's own qubits (Qiskit's ``Operator``
convention; controls first). See :mod:`ozsim.gates.standard` for the conventions in detail.

Example:
    >>> from ozsim import gates
    >>> gates.standard_gate("cu1", [0.5]).shape
    (4, 4)
    >>> circ = gates.brickwork(12, depth=8, gate_qubits=2, seed=1)
"""

from .builders import brickwork, brickwork_blocks, ghz, qft
from .haar import haar_unitary
from .standard import (
    C3SX,
    C3X,
    C4X,
    CCX,
    CCZ,
    CH,
    CS,
    CSDG,
    CSWAP,
    CSX,
    CX,
    CY,
    CZ,
    DCX,
    ECR,
    H,
    I,
    ISWAP,
    RC3X,
    RCCX,
    S,
    SDG,
    STANDARD_GATES,
    SWAP,
    SX,
    SXDG,
    TDG,
    X,
    Y,
    Z,
    T,
    controlled,
    cp,
    crx,
    cry,
    crz,
    cu,
    cu1,
    cu3,
    mcx,
    p,
    phase,
    r,
    rx,
    rxx,
    ry,
    ryy,
    rz,
    rzx,
    rzz,
    standard_gate,
    u,
    u0,
    u1,
    u2,
    u3,
    xx_minus_yy,
    xx_plus_yy,
)

__all__ = [
    "I", "X", "Y", "Z", "H", "S", "SDG", "T", "TDG", "SX", "SXDG",
    "CX", "CY", "CZ", "CH", "CS", "CSDG", "CSX", "SWAP", "ISWAP", "ECR", "DCX",
    "CCX", "CCZ", "CSWAP", "RCCX", "RC3X", "C3X", "C3SX", "C4X",
    "controlled", "mcx",
    "rx", "ry", "rz", "p", "phase", "u", "u3", "u2", "u1", "u0", "r",
    "cp", "cu1", "crx", "cry", "crz", "cu", "cu3",
    "rxx", "ryy", "rzz", "rzx", "xx_minus_yy", "xx_plus_yy",
    "STANDARD_GATES", "standard_gate",
    "haar_unitary",
    "brickwork", "brickwork_blocks", "qft", "ghz",
]  # fmt: skip
