"""Expectation values in place: against Qiskit's Statevector, chunked, bounded in memory."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from conftest import cupy_or_skip

from ozsim import observables
from ozsim.observables import expectation, pauli_terms

_PAULI = {"I": np.eye(2), "X": np.array([[0, 1], [1, 0]]), "Y": np.array([[0, -1j], [1j, 0]]),
          "Z": np.diag([1.0, -1.0])}


def _labels(rng, n, terms):
    labels = ["".join(rng.choice(list("IXYZ"), n)) for _ in range(terms)]
    return labels + [labels[0], "X" * n, "Y" * n]  # a repeated Pauli, shared X masks


def _random_op(rng, n, terms, complex_coeffs=False):
    from qiskit.quantum_info import SparsePauliOp

    labels = _labels(rng, n, terms)
    coeffs = rng.standard_normal(len(labels))
    if complex_coeffs:
        coeffs = coeffs + 1j * rng.standard_normal(len(labels))
    return SparsePauliOp(labels, coeffs=coeffs)


def _dense(label: str) -> np.ndarray:
    """The Pauli string's matrix by Kronecker products (qubit 0 rightmost)."""
    m = np.eye(1)
    for ch in label:
        m = np.kron(m, _PAULI[ch])
    return m


@pytest.mark.parametrize("n", [1, 4, 9])
def test_matches_qiskit_on_random_states_and_chunk_boundaries(n, monkeypatch):
    from qiskit.quantum_info import SparsePauliOp, random_statevector

    monkeypatch.setattr(observables, "CHUNK", 8)  # many chunks, partners across chunks
    rng = np.random.default_rng(n)
    psi = random_statevector(2**n, seed=n)
    op = _random_op(rng, n, 12)
    assert expectation(psi.data, op) == pytest.approx(psi.expectation_value(op).real, abs=1e-13)
    for label in ("-" + "Y" * n, "i" + "Z" * n):
        ref = psi.expectation_value(SparsePauliOp(label.lstrip("-i"))) * (-1 if "-" in label
                                                                          else 1j)
        assert expectation(psi.data, label, complex_value=True) == pytest.approx(ref, abs=1e-13)


def test_non_hermitian_observable_is_an_error_unless_asked_for_the_complex_value():
    from qiskit.quantum_info import SparsePauliOp, random_statevector

    rng = np.random.default_rng(2)
    psi = random_statevector(2**3, seed=2)
    op = _random_op(rng, 3, 5, complex_coeffs=True)
    with pytest.raises(ValueError, match="not Hermitian.*complex_value=True"):
        expectation(psi.data, op)
    with pytest.raises(ValueError, match="not Hermitian"):
        expectation(psi.data, "iXYZ")
    assert expectation(psi.data, op, complex_value=True) == pytest.approx(
        psi.expectation_value(op), abs=1e-13)
    # a Hermitian sum whose terms cancel their imaginary parts is accepted
    assert expectation(psi.data, [("XX" + "I", 1j), ("XXI", -1j), ("ZZZ", 2.0)]) == \
        pytest.approx(2 * psi.expectation_value(SparsePauliOp("ZZZ")).real, abs=1e-13)


def test_terms_merge_and_bad_labels_are_named():
    assert pauli_terms([("XY", 1.0), ("XY", 2.0), ("IZ", 0.5)], 2) == [(3, 1, 3 + 0j),
                                                                      (0, 1, 0.5 + 0j)]
    with pytest.raises(ValueError, match="Pauli label 'XA'"):
        pauli_terms("XA", 2)
    with pytest.raises(ValueError, match="expected 3 letters"):
        pauli_terms("XY", 3)


def test_cpu_extra_memory_is_a_small_fraction_of_the_state():
    n = 20
    rng = np.random.default_rng(0)
    psi = rng.standard_normal(2**n) + 1j * rng.standard_normal(2**n)
    op = _random_op(rng, n, 20)
    tracemalloc.start()
    expectation(psi, op)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < psi.nbytes / 4, peak


@pytest.mark.gpu
def test_gpu_expectation_matches_dense_pauli_matrices():
    cp = cupy_or_skip()
    n = 9
    rng = np.random.default_rng(4)
    psi = rng.standard_normal(2**n) + 1j * rng.standard_normal(2**n)
    psi /= np.linalg.norm(psi)
    labels = _labels(rng, n, 20)
    coeffs = rng.standard_normal(len(labels))
    ref = sum(c * np.vdot(psi, _dense(lab) @ psi) for lab, c in zip(labels, coeffs))
    got = expectation(cp.asarray(psi), list(zip(labels, coeffs)))
    assert isinstance(got, float)
    assert got == pytest.approx(ref.real, abs=1e-12)
    got_c = expectation(cp.asarray(psi), [("i" + "Y" * n, 1.0)], complex_value=True)
    assert got_c == pytest.approx(1j * np.vdot(psi, _dense("Y" * n) @ psi), abs=1e-12)
