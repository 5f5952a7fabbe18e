"""ozsim.primitives against Qiskit's reference primitives: StatevectorEstimator values to 1e-10,
StatevectorSampler distributions (chi-square, fixed seeds), and result shapes of broadcast PUBs."""

from __future__ import annotations

import numpy as np
import pytest
from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister
from qiskit.circuit import Parameter
from qiskit.circuit.library import efficient_su2, real_amplitudes
from qiskit.primitives import (
    BaseEstimatorV2,
    BaseSamplerV2,
    BitArray,
    PrimitiveResult,
    StatevectorEstimator,
    StatevectorSampler,
)
from qiskit.quantum_info import SparsePauliOp, random_pauli_list

from ozsim.primitives import EstimatorV2, SamplerV2
from ozsim.testing import assert_same_distribution

OPTS = {"backend": "zgemm", "device": "cpu"}


def _ansatz(n=4, reps=2):
    return efficient_su2(n, reps=reps)


def _observables(n, k, seed):
    paulis = random_pauli_list(n, k, seed=seed, phase=False)
    return [SparsePauliOp(p) for p in paulis.to_labels()]


def test_interfaces():
    assert isinstance(SamplerV2(), BaseSamplerV2) and isinstance(EstimatorV2(), BaseEstimatorV2)
    with pytest.raises(ValueError, match="backend"):
        EstimatorV2(backend="nope")


def test_estimator_matches_statevector_estimator():
    qc = _ansatz()
    rng = np.random.default_rng(5)
    values = rng.uniform(-np.pi, np.pi, (3, qc.num_parameters))
    obs = _observables(4, 5, seed=2) + [SparsePauliOp(["XYZI", "ZZII", "IIII"], [0.5, -1, 2])]
    pubs = [(qc, [[o] for o in obs], values), (qc.assign_parameters(values[0]), obs[0])]
    ref = StatevectorEstimator().run(pubs).result()
    got = EstimatorV2(**OPTS).run(pubs).result()
    assert isinstance(got, PrimitiveResult) and len(got) == 2
    for r, g in zip(ref, got):
        assert g.data.evs.shape == r.data.evs.shape
        np.testing.assert_allclose(g.data.evs, r.data.evs, rtol=0, atol=1e-10)
        assert not g.data.stds.any()
    meta = got[0].metadata
    assert meta["target_precision"] == 0.0
    assert meta["simulator"]["runs"] == 3 and meta["simulator"]["backend"] == "zgemm"


@pytest.mark.parametrize("pv_shape, obs_shape", [
    ((), ()), ((5,), ()), ((), (3,)), ((4, 1), (3,)), ((2, 3), (2, 1)), ((1, 2), (3, 1)),
])
def test_broadcast_shapes_match_qiskit(pv_shape, obs_shape):
    qc = real_amplitudes(2, reps=1)
    rng = np.random.default_rng(1)
    values = rng.uniform(-3, 3, pv_shape + (qc.num_parameters,))
    labels = np.array(["ZZ", "XI", "IY", "XX", "ZI", "YY"])
    obs = labels[rng.integers(0, 6, obs_shape)].tolist() if obs_shape else "ZX"
    pub = (qc, obs, values)
    ref = StatevectorEstimator().run([pub]).result()[0]
    got = EstimatorV2(**OPTS).run([pub]).result()[0]
    assert got.data.shape == ref.data.shape == got.data.evs.shape == got.data.stds.shape
    np.testing.assert_allclose(got.data.evs, ref.data.evs, atol=1e-10)
    measured = qc.measure_all(inplace=False)
    ref = StatevectorSampler(seed=1).run([(measured, values)], shots=16).result()[0]
    got = SamplerV2(seed=1, **OPTS).run([(measured, values)], shots=16).result()[0]
    assert got.data.meas.shape == ref.data.meas.shape == pv_shape
    assert got.data.meas.num_shots == 16 and got.data.meas.num_bits == 2


def test_estimator_precision_is_shot_sampled():
    qc = _ansatz(3, 1)
    values = np.random.default_rng(2).uniform(-3, 3, (6, qc.num_parameters))
    obs = SparsePauliOp(["ZZI", "XIX", "III"], [1.0, 0.5, 0.25])
    exact = StatevectorEstimator().run([(qc, obs, values)]).result()[0].data.evs
    est = EstimatorV2(seed=7, **OPTS)
    res = est.run([(qc, obs, values)], precision=0.02).result()[0]
    again = est.run([(qc, obs, values)], precision=0.02).result()[0]
    np.testing.assert_array_equal(res.data.evs, again.data.evs)  # seeded
    z = (res.data.evs - exact) / res.data.stds
    assert np.all(np.abs(z) < 4.5), z
    assert np.all(res.data.stds <= 0.02 * np.sqrt(1.25) + 1e-12) and np.all(res.data.stds > 0)
    assert np.any(res.data.evs != exact)
    assert res.metadata["target_precision"] == 0.02


def test_sampler_matches_statevector_sampler():
    q = QuantumRegister(4)
    a, b = ClassicalRegister(3, "alpha"), ClassicalRegister(2, "beta")
    qc = QuantumCircuit(q, a, b)
    qc.compose(efficient_su2(4, reps=1), inplace=True)
    qc.measure([0, 1, 2], a)
    qc.measure([3, 0], b)
    values = np.random.default_rng(3).uniform(-3, 3, (2, qc.num_parameters))
    ref = StatevectorSampler(seed=11).run([(qc, values)], shots=3000).result()[0]
    got = SamplerV2(seed=12, **OPTS).run([(qc, values)], shots=3000).result()[0]
    for name in ("alpha", "beta"):
        bits = getattr(got.data, name)
        assert isinstance(bits, BitArray) and bits.shape == (2,) and bits.num_shots == 3000
        assert bits.num_bits == getattr(ref.data, name).num_bits
        for i in range(2):
            assert_same_distribution(bits[i].get_counts(), getattr(ref.data, name)[i].get_counts())
    for i in range(2):  # per shot: bit 1 of beta and bit 0 of alpha both hold qubit 0
        alpha, beta = got.data.alpha[i].get_bitstrings(), got.data.beta[i].get_bitstrings()
        assert all(sa[-1] == sb[0] for sa, sb in zip(alpha, beta))
    assert got.metadata["shots"] == 3000 and got.metadata["simulator"]["runs"] == 2


def test_sampler_seed_and_trajectories():
    theta = Parameter("t")
    qc = QuantumCircuit(2, 2)
    qc.rx(theta, 0)
    qc.measure(0, 0)
    with qc.if_test((qc.clbits[0], 1)):
        qc.x(1)
    qc.measure(1, 1)
    s = SamplerV2(seed=4, **OPTS)
    r1 = s.run([(qc, [[1.0], [2.0]])], shots=500).result()[0]
    r2 = s.run([(qc, [[1.0], [2.0]])], shots=500).result()[0]
    np.testing.assert_array_equal(r1.data.c.array, r2.data.c.array)
    for i, t in enumerate((1.0, 2.0)):
        counts = r1.data.c[i].get_counts()
        assert set(counts) <= {"00", "11"}
        assert abs(counts.get("11", 0) / 500 - np.sin(t / 2) ** 2) < 0.08


def test_int8_auto_estimator():
    qc = _ansatz(3, 1)
    values = np.random.default_rng(9).uniform(-3, 3, (2, qc.num_parameters))
    obs = ["ZZZ", "XYI"]
    ref = StatevectorEstimator().run([(qc, [[o] for o in obs], values)]).result()[0]
    got = EstimatorV2(backend="int8-auto", T=1, device="cpu").run(
        [(qc, [[o] for o in obs], values)]).result()[0]
    np.testing.assert_allclose(got.data.evs, ref.data.evs, atol=1e-10)
    splits = got.metadata["simulator"]["splits"]
    assert splits and all(isinstance(k, int) for k in splits)
