"""Tests of ozsim.gates: standard matrices against Qiskit, Haar unitaries, circuit builders."""

from __future__ import annotations

import numpy as np
import pytest

from ozsim import gates
from ozsim.gates import standard
from ozsim.testing import circuit_unitary, embed_gate

qiskit = pytest.importorskip("qiskit")
from qiskit.circuit import library  # noqa: E402
from qiskit.quantum_info import Operator  # noqa: E402

# Gates in Qiskit's standard mapping that have no matrix (or no qubits).
_NOT_GATES = {"delay", "reset", "measure", "global_phase"}
_QISKIT_STANDARD = sorted(
    name for name in library.get_standard_gate_name_mapping() if name not in _NOT_GATES
)
# Entry-wise agreement with Qiskit: both evaluate the same closed forms in double precision.
ATOL = 1e-14


# -- standard gates ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", _QISKIT_STANDARD)
def test_standard_gate_matches_qiskit(name):
    proto = library.get_standard_gate_name_mapping()[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    for _ in range(3):
        params = rng.uniform(-2 * np.pi, 2 * np.pi, len(proto.params)).tolist()
        ref = Operator(proto.base_class(*params)).data
        mine = gates.standard_gate(name, params)
        assert mine.dtype == np.complex128 and mine.shape == ref.shape
        np.testing.assert_allclose(mine, ref, rtol=0, atol=ATOL)


def test_every_qiskit_standard_gate_is_in_the_table():
    assert set(_QISKIT_STANDARD) <= set(gates.STANDARD_GATES)


@pytest.mark.parametrize(
    "alias, qiskit_gate",
    [
        ("c3x", library.C3XGate()),
        ("c4x", library.C4XGate()),
        ("c3sqrtx", library.C3SXGate()),
        ("rc3x", library.RC3XGate()),
        ("U", library.UGate(0.3, -1.2, 2.5)),
        ("CX", library.CXGate()),
        ("phase", library.PhaseGate(0.7)),
        ("cphase", library.CPhaseGate(-0.4)),
        ("i", library.IGate()),
    ],
)
def test_openqasm_aliases(alias, qiskit_gate):
    params = [float(p) for p in qiskit_gate.params]
    np.testing.assert_allclose(
        gates.standard_gate(alias, params), Operator(qiskit_gate).data, rtol=0, atol=ATOL
    )


def test_legacy_u_family():
    a, b, c = 0.4, -1.1, 2.9
    np.testing.assert_array_equal(gates.standard_gate("u3", [a, b, c]), gates.u(a, b, c))
    np.testing.assert_array_equal(gates.standard_gate("U", [a, b, c]), gates.u3(a, b, c))
    np.testing.assert_allclose(gates.u2(b, c), gates.u(np.pi / 2, b, c), atol=0)
    np.testing.assert_array_equal(gates.u1(c), gates.p(c))
    np.testing.assert_array_equal(gates.standard_gate("u0", [5.0]), np.eye(2))


@pytest.mark.parametrize("num_qubits", [1, 2, 3, 5, 6])
def test_mcx(num_qubits):
    ref = Operator(library.MCXGate(num_qubits - 1)).data if num_qubits > 1 else gates.X
    mine = gates.standard_gate("mcx", [], num_qubits=num_qubits)
    np.testing.assert_allclose(mine, ref, rtol=0, atol=ATOL)


def test_controlled_matches_qiskit_control():
    u = gates.haar_unitary(4, 3)
    ref = Operator(library.UnitaryGate(u).control(2)).data
    np.testing.assert_allclose(gates.controlled(u, 2), ref, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(gates.controlled(u, 0), u)


def test_constants_are_read_only_and_lookup_returns_a_copy():
    with pytest.raises(ValueError, match="read-only"):
        gates.H[0, 0] = 0
    h = gates.standard_gate("h")
    h[0, 0] = 7  # a fresh copy: the constant is untouched
    assert gates.H[0, 0] == pytest.approx(2**-0.5)


def test_standard_gate_errors():
    with pytest.raises(ValueError, match="unknown standard gate 'foo'"):
        gates.standard_gate("foo", [])
    with pytest.raises(ValueError, match=r"gate 'rx' takes 1 parameter\(s\), got 2"):
        gates.standard_gate("rx", [0.1, 0.2])
    with pytest.raises(ValueError, match=r"gate 'cx' acts on 2 qubit\(s\), not 3"):
        gates.standard_gate("cx", [], num_qubits=3)
    with pytest.raises(ValueError, match="gate 'mcx' needs num_qubits >= 1, got None"):
        gates.standard_gate("mcx", [])
    with pytest.raises(ValueError, match="gate 'mcx' takes 0 parameters, got 1"):
        gates.standard_gate("mcx", [0.5], num_qubits=3)
    with pytest.raises(ValueError, match="num_controls must be >= 0, got -1"):
        gates.controlled(gates.X, -1)
    with pytest.raises(ValueError, match=r"matrix must be square, got shape \(2, 3\)"):
        gates.controlled(np.ones((2, 3)), 1)


def test_embed_oracle_agrees_with_kron():
    u = gates.haar_unitary(4, 11)
    np.testing.assert_array_equal(
        embed_gate(u, (1, 2), 4), np.kron(np.eye(2), np.kron(u, np.eye(2)))
    )


# -- Haar unitaries ------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [1, 2, 4, 16, 64])
def test_haar_unitary_is_unitary(dim):
    u = gates.haar_unitary(dim, 5)
    assert u.shape == (dim, dim) and u.dtype == np.complex128 and u.flags.c_contiguous
    assert np.abs(u.conj().T @ u - np.eye(dim)).max() < 1e-13


def test_haar_unitary_reproducible():
    np.testing.assert_array_equal(gates.haar_unitary(8, 42), gates.haar_unitary(8, 42))
    g1, g2 = np.random.default_rng(7), np.random.default_rng(7)
    a = [gates.haar_unitary(4, g1) for _ in range(3)]
    b = [gates.haar_unitary(4, g2) for _ in range(3)]
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert not np.allclose(a[0], a[1])  # a generator advances
    assert not np.allclose(gates.haar_unitary(8, 1), gates.haar_unitary(8, 2))


def test_haar_unitary_moments():
    # Haar: E[U_ij] = 0 and E[|U_ij|^2] = 1/dim. Without Mezzadri's phase correction LAPACK's
    # real R diagonal biases the diagonal: E[U_jj] is about -0.25..-0.3 for dim 4.
    dim, samples = 4, 4000
    rng = np.random.default_rng(2024)
    us = np.array([gates.haar_unitary(dim, rng) for _ in range(samples)])
    sigma = np.sqrt(1.0 / dim / samples)  # std of the sample mean of one entry
    assert np.abs(us.mean(axis=0)).max() < 5 * sigma
    np.testing.assert_allclose((np.abs(us) ** 2).mean(axis=0), 1.0 / dim, atol=0.02)


@pytest.mark.parametrize("dim", [0, -3, 2.0, "4"])
def test_haar_unitary_bad_dim(dim):
    with pytest.raises(ValueError, match="dim must be a positive integer"):
        gates.haar_unitary(dim, 0)


# -- brickwork -----------------------------------------------------------------------------------
def test_brickwork_blocks_examples():
    assert gates.brickwork_blocks(6, 2, 0) == [(0, 1), (2, 3), (4, 5)]
    assert gates.brickwork_blocks(6, 2, 1) == [(1, 2), (3, 4)]
    assert gates.brickwork_blocks(7, 2, 1) == [(1, 2), (3, 4), (5, 6)]
    assert gates.brickwork_blocks(10, 4, 0) == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert gates.brickwork_blocks(10, 4, 3) == [(2, 3, 4, 5), (6, 7, 8, 9)]
    assert gates.brickwork_blocks(7, 3, 1) == [(1, 2, 3), (4, 5, 6)]
    assert gates.brickwork_blocks(3, 1, 1) == [(0,), (1,), (2,)]
    assert gates.brickwork_blocks(2, 2, 1) == []


@pytest.mark.parametrize("n, depth, d", [(8, 6, 2), (9, 5, 2), (12, 4, 4), (7, 3, 3), (3, 2, 1)])
def test_brickwork_structure(n, depth, d):
    circ = gates.brickwork(n, depth, d, seed=3)
    assert circ.num_qubits == n and circ.num_clbits == 0
    ops = iter(circ.operations)
    for layer in range(depth):
        offset = 0 if layer % 2 == 0 else d // 2
        expected = [tuple(range(s, s + d)) for s in range(offset, n - d + 1, d)]
        got = [next(ops) for _ in expected]
        assert [op.qubits for op in got] == expected
        for op in got:
            assert op.kind == "unitary" and op.name == f"haar{d}"
            assert op.matrix.shape == (1 << d, 1 << d)
            assert np.abs(op.matrix.conj().T @ op.matrix - np.eye(1 << d)).max() < 1e-13
        if layer % 2 == 0:  # even layers cover every qubit of the full blocks
            covered = sorted(q for qs in expected for q in qs)
            assert covered == list(range(n - n % d))
    assert next(ops, None) is None


def test_brickwork_reproducible_and_seeded():
    a = gates.brickwork(6, 4, 2, seed=9)
    b = gates.brickwork(6, 4, 2, seed=9)
    c = gates.brickwork(6, 4, 2, seed=10)
    assert [op.qubits for op in a.operations] == [op.qubits for op in c.operations]
    for x, y in zip(a.operations, b.operations):
        np.testing.assert_array_equal(x.matrix, y.matrix)
    assert not np.allclose(a.operations[0].matrix, c.operations[0].matrix)
    # The draws are haar_unitary(2**d, rng) in layer-then-block order from default_rng(seed).
    rng = np.random.default_rng(9)
    np.testing.assert_array_equal(a.operations[0].matrix, gates.haar_unitary(4, rng))
    np.testing.assert_array_equal(a.operations[1].matrix, gates.haar_unitary(4, rng))


def test_brickwork_measure():
    circ = gates.brickwork(4, 2, 2, seed=0, measure=True)
    meas = [op for op in circ.operations if op.kind == "measure"]
    assert circ.num_clbits == 4 and [(m.qubits, m.clbits) for m in meas] == [
        ((q,), (q,)) for q in range(4)
    ]
    assert circ.operations[-4:] == meas


def test_brickwork_errors():
    with pytest.raises(ValueError, match="gate_qubits=3 exceeds num_qubits=2"):
        gates.brickwork(2, 1, 3)
    with pytest.raises(ValueError, match="gate_qubits=3 exceeds num_qubits=2"):
        gates.brickwork_blocks(2, 3, 0)
    with pytest.raises(ValueError, match="depth must be an integer >= 0, got -1"):
        gates.brickwork(4, -1)
    with pytest.raises(ValueError, match="num_qubits must be an integer >= 1, got 0"):
        gates.brickwork(0, 1)
    with pytest.raises(ValueError, match="gate_qubits must be an integer >= 1, got 2.0"):
        gates.brickwork(4, 1, 2.0)
    with pytest.raises(ValueError, match="layer must be an integer >= 0, got -2"):
        gates.brickwork_blocks(4, 2, -2)
    with pytest.raises(ValueError, match="num_qubits must be an integer >= 1, got 0"):
        gates.qft(0)
    with pytest.raises(ValueError, match="num_qubits must be an integer >= 1, got True"):
        gates.ghz(True)


# -- QFT and GHZ ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_qft_matches_qiskit(n):
    circ = gates.qft(n)
    np.testing.assert_allclose(
        circuit_unitary(circ), Operator(library.QFTGate(n)).data, rtol=0, atol=1e-12
    )
    from qiskit.synthesis import synth_qft_full

    ref = synth_qft_full(n)
    assert [(op.name, op.qubits) for op in circ.operations] == [
        (i.operation.name, tuple(ref.find_bit(q).index for q in i.qubits)) for i in ref.data
    ]
    assert [op.params for op in circ.operations if op.name == "cp"] == [
        tuple(float(p) for p in i.operation.params) for i in ref.data if i.operation.name == "cp"
    ]


def test_qft_measure():
    circ = gates.qft(3, measure=True)
    assert circ.num_clbits == 3 and [op.kind for op in circ.operations[-3:]] == ["measure"] * 3


@pytest.mark.parametrize("n", [1, 2, 5])
def test_ghz(n):
    circ = gates.ghz(n, measure=True)
    state = circuit_unitary(circ)[:, 0]
    expected = np.zeros(1 << n, dtype=np.complex128)
    expected[0] = expected[-1] = 2**-0.5  # for n = 1: H|0>
    np.testing.assert_allclose(state, expected, rtol=0, atol=1e-15)
    counts = {"h": 1, "measure": n} | ({"cx": n - 1} if n > 1 else {})
    assert circ.count_ops() == counts


def test_module_namespace():
    assert gates.CX is standard.CX
    assert set(gates.__all__) >= {"standard_gate", "haar_unitary", "brickwork", "qft", "ghz"}
