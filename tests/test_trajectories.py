"""Mid-circuit measurements, resets, conditioned gates, shots and expectation values, checked
against Qiskit Aer (counts, by a chi-square test with fixed seeds) and Qiskit's Statevector."""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister
from qiskit.quantum_info import SparsePauliOp, Statevector, random_statevector
from qiskit_aer import AerSimulator

from ozsim import Circuit, gates
from ozsim.interop.qiskit import from_qiskit
from ozsim.simulator import Simulator
from ozsim.testing import assert_same_distribution


def aer_counts(qc: QuantumCircuit, shots: int, seed: int) -> dict:
    return AerSimulator(method="statevector").run(qc, shots=shots, seed_simulator=seed).result(
    ).get_counts()


def _teleport_like(seed: int) -> QuantumCircuit:
    rng = np.random.default_rng(seed)
    q, a, b = QuantumRegister(3, "q"), ClassicalRegister(2, "a"), ClassicalRegister(2, "b")
    qc = QuantumCircuit(q, a, b)
    qc.unitary(gates.haar_unitary(2, rng), [0])
    qc.h(1)
    qc.cx(1, 2)
    qc.cx(0, 1)
    qc.h(0)
    qc.measure(0, a[0])
    qc.measure(1, a[1])
    with qc.if_test((a[1], 1)):
        qc.x(2)
    with qc.if_test((a[0], 1)):
        qc.z(2)
    qc.unitary(gates.haar_unitary(4, rng), [0, 2])
    qc.reset(1)
    qc.ry(0.7, 1)
    with qc.if_test((a, 3)):
        qc.h(1)
    qc.measure(2, b[0])
    qc.measure(1, b[1])
    return qc


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mid_circuit_counts_match_aer(seed):
    qc = _teleport_like(seed)
    ours = Simulator(device="cpu", seed=seed).run(from_qiskit(qc), shots=4000)
    assert ours.metadata["mode"] == "trajectories" and sum(ours.counts.values()) == 4000
    assert all(len(k.split(" ")) == 2 for k in ours.counts)  # 'b a' as Qiskit prints it
    assert_same_distribution(ours.counts, aer_counts(qc, 4000, seed))
    again = Simulator(device="cpu", seed=seed).run(from_qiskit(qc), shots=4000)
    assert again.counts == ours.counts  # deterministic for a given seed


def test_statistical_test_can_fail():
    qc = _teleport_like(0)
    ours = Simulator(device="cpu", seed=0).run(from_qiskit(qc), shots=4000).counts
    biased = dict(ours)
    k = max(biased, key=biased.get)
    biased[k] += 600
    with pytest.raises(AssertionError, match="p = "):
        assert_same_distribution(biased, aer_counts(qc, 4000, 0))


def test_reset_and_remeasure_exact_outcomes():
    c = Circuit(2, 3)
    c.unitary(gates.X, [0], name="x")
    c.measure(0, 0)
    c.reset(0)
    c.measure(0, 1)
    c.unitary(gates.X, [1], name="x", condition=((0,), 1))  # fires: c0 == 1
    c.measure(1, 2)
    res = Simulator(device="cpu", seed=0).run(c, shots=100)
    assert res.counts == {"101": 100}
    assert res.metadata["branches"] == 1  # deterministic outcomes never split


def test_branches_batch_shots():
    c = Circuit(3, 3)
    for q in range(3):
        c.unitary(gates.H, [q], name="h")
        c.measure(q, q)
        c.unitary(gates.H, [q], name="h")  # makes each measurement mid-circuit
    res = Simulator(device="cpu", seed=4).run(c, shots=1000)
    assert res.metadata["branches"] <= 8  # 3 random outcomes: at most 2**3 states
    assert_same_distribution(res.counts, {format(i, "03b"): 125 for i in range(8)})


def test_final_measurement_shots_on_plain_circuit_match_aer():
    qc = QuantumCircuit(4, 4)
    rng = np.random.default_rng(9)
    qc.unitary(gates.haar_unitary(16, rng), range(4))
    qc.measure([0, 2, 1, 3], [3, 2, 1, 0])
    ours = Simulator(device="cpu", seed=1).run(from_qiskit(qc), shots=5000)
    assert ours.metadata["mode"] == "statevector"
    assert_same_distribution(ours.counts, aer_counts(qc, 5000, 1))


@pytest.mark.parametrize("n", [1, 3, 5])
def test_expectation_matches_qiskit(n):
    rng = np.random.default_rng(n)
    psi = random_statevector(2**n, seed=n)
    c = Circuit(n)
    # prepare psi with one n-qubit unitary whose first column is psi
    q, _ = np.linalg.qr(np.column_stack([psi.data, rng.standard_normal((2**n, 2**n - 1))]))
    u = q * (psi.data[0] / q[0, 0])
    c.unitary(u, list(range(n)))
    res = Simulator(backend="zgemm", device="cpu").run(c)
    labels = ["".join(rng.choice(list("IXYZ"), n)) for _ in range(6)]
    for label in labels:
        assert res.expectation(label) == pytest.approx(
            Statevector(res.statevector).expectation_value(SparsePauliOp(label)).real, abs=1e-12)
    op = SparsePauliOp(labels, coeffs=rng.standard_normal(len(labels)))
    assert res.expectation(op) == pytest.approx(psi.expectation_value(op).real, abs=1e-12)
    assert res.expectation("-" + "Z" * n) == pytest.approx(
        -psi.expectation_value(SparsePauliOp("Z" * n)).real, abs=1e-12)


def test_expectation_rejects_bad_labels():
    res = Simulator(device="cpu").run(Circuit(2))
    with pytest.raises(ValueError, match="expected 2 letters from IXYZ"):
        res.expectation("XYZ")
    with pytest.raises(ValueError, match="expected 2 letters from IXYZ"):
        res.expectation("XA")
    assert res.expectation("ZZ") == 1.0 and res.expectation("XI") == 0.0


def test_result_constructor_and_metadata_keys_are_documented():
    import dataclasses

    from ozsim.simulator import Result, RunMetadata

    init = [f.name for f in dataclasses.fields(Result) if f.init]
    assert init == ["num_qubits", "circuit_name", "metadata", "cregs", "counts", "memory"]
    with pytest.raises(TypeError, match="_amplitudes"):
        Result(1, "c", {}, [], _amplitudes=np.zeros(2))  # private fields stay private
    r = Result(1, "c", {"measurements": {}, "mode": "statevector"}, [],
               amplitudes=np.array([0.6, 0.8j]), seed=3)
    assert np.allclose(r.probabilities(), [0.36, 0.64])
    c = Circuit(2, 2)
    c.unitary(np.array([[1, 1], [1, -1]]) / np.sqrt(2), [0])
    c.measure(0, 0)
    c.unitary(np.eye(2), [1], condition=((0,), 1))
    documented = set(RunMetadata.__annotations__)
    for circuit in (c, Circuit(2)):
        res = Simulator(device="cpu", seed=1).run(circuit, shots=10)
        assert set(res.metadata) <= documented, set(res.metadata) - documented
