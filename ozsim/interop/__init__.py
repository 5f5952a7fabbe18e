"""Conversion from and to other frameworks. Importing this package does not import Qiskit.

Example:
    >>> from ozsim.interop import load_qasm
    >>> circ = load_qasm("circuits/qft_n16.qasm")
"""

from .qiskit import MAX_COMPOSITE_QUBITS, from_qiskit, load_qasm, loads_qasm, to_qiskit

__all__ = ["from_qiskit", "to_qiskit", "load_qasm", "loads_qasm", "MAX_COMPOSITE_QUBITS"]
