"""Any QuantumCircuit runs: library subclasses, composite instructions (one dense matrix when
they fit, else their definition), and one error naming every unbound parameter."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.circuit import Parameter
from qiskit.circuit.library import QFT, EfficientSU2, QuantumVolume, efficient_su2
from qiskit.quantum_info import Statevector

from ozsim import Simulator, UnsupportedOperationError
from ozsim.interop.parametric import ParametricCircuit
from ozsim.interop.qiskit import from_qiskit

SIM = Simulator(backend="zgemm", device="cpu")


def _library(cls, *args, **kwargs):
    with warnings.catch_warnings():  # the classes are deprecated in favour of functions
        warnings.simplefilter("ignore", DeprecationWarning)
        return cls(*args, **kwargs)


def _close(qc, atol=1e-12):
    got = SIM.run(qc).statevector
    np.testing.assert_allclose(got, Statevector(qc).data, atol=atol)


def test_library_subclasses_run():
    qv = _library(QuantumVolume, 6, seed=1)
    assert type(qv) is not QuantumCircuit
    _close(qv)
    _close(_library(QFT, 5))
    su2 = _library(EfficientSU2, 4, reps=2)
    _close(su2.assign_parameters(np.linspace(-2, 2, su2.num_parameters)))


def test_composed_and_appended_instructions_are_one_matrix():
    qc = QuantumCircuit(6).compose(_library(QuantumVolume, 6, seed=1))
    circ = from_qiskit(qc)
    assert [op.num_qubits for op in circ.operations] == [6]
    _close(qc)
    sub = QuantumCircuit(3)
    sub.h(0)
    sub.cx(0, 1)
    sub.ry(0.3, 2)
    qc = QuantumCircuit(4)
    qc.x(3)
    qc.append(sub.to_instruction(), [3, 0, 2])
    assert [op.num_qubits for op in from_qiskit(qc).operations] == [1, 3]
    _close(qc)


def test_instruction_with_measurement_is_walked_through():
    sub = QuantumCircuit(2, 1)
    sub.h(0)
    sub.cx(0, 1)
    sub.measure(1, 0)
    qc = QuantumCircuit(2, 1)
    qc.append(sub.to_instruction(), [0, 1], [0])
    assert [op.kind for op in from_qiskit(qc).operations] == ["unitary", "unitary", "measure"]
    counts = Simulator(backend="zgemm", device="cpu", seed=1).run(qc, shots=200).counts
    assert set(counts) == {"0", "1"} and sum(counts.values()) == 200


def test_wide_composite_is_decomposed_one_level():
    qc = QuantumCircuit(5).compose(_library(QuantumVolume, 5, seed=3))
    circ = from_qiskit(qc, max_composite_qubits=4)
    assert circ.num_gates > 1 and max(op.num_qubits for op in circ.operations) <= 2
    _close(qc)


def test_unbound_parameters_are_named_in_one_error():
    qc = efficient_su2(3, reps=1)
    with pytest.raises(UnsupportedOperationError, match=r"12 unbound parameters \(θ\[0\], "
                       r"θ\[1\], θ\[2\]"):
        SIM.run(qc)
    a, b = Parameter("a"), Parameter("b")
    qc = QuantumCircuit(2)
    qc.rx(a, 0)
    qc.ry(b, 1)
    with pytest.raises(UnsupportedOperationError, match=r"\(a\); the circuit has 2 unbound "
                       r"parameters \(a, b\)"):
        from_qiskit(qc)


def test_parametric_circuit_binds_without_reconverting():
    a, b = Parameter("a"), Parameter("b")
    qc = _library(EfficientSU2, 3, reps=1).copy()
    qc.crx(2 * a + b, 0, 1)
    qc.global_phase = a * b
    qc.compose(_library(QuantumVolume, 2, seed=2), [1, 2], inplace=True)
    pc = ParametricCircuit(qc)
    assert pc.num_slots == 13 and len(pc.parameters) == 14
    rng = np.random.default_rng(0)
    for _ in range(3):
        v = rng.uniform(-3, 3, len(pc.parameters))
        got = SIM.run(pc.bind(v)).statevector
        np.testing.assert_allclose(got, Statevector(qc.assign_parameters(v)).data, atol=1e-12)
    by_name = {str(p): 0.5 for p in pc.parameters}
    np.testing.assert_allclose(SIM.run(pc.bind(by_name)).statevector,
                               Statevector(qc.assign_parameters([0.5] * 14)).data, atol=1e-12)
    with pytest.raises(ValueError, match="3 parameter values for 14"):
        pc.bind([1, 2, 3])
