"""Prepared gates reused across runs (GateCache): parameter sweeps prepare their parameter-free
blocks once, and results are bitwise those of runs without reuse."""

from __future__ import annotations

import numpy as np
import pytest

from ozsim import Circuit, GateCache, Simulator
from ozsim.gates.haar import haar_unitary


def _circuit(seed: int, n: int = 8) -> Circuit:
    rng = np.random.default_rng(seed)
    c = Circuit(n)
    for layer in range(3):
        for q in range(layer % 2, n - 1, 2):
            c.unitary(haar_unitary(4, rng), [q, q + 1])
    return c


@pytest.mark.parametrize("backend", ["int8-auto", "int8-crt-auto", "zgemm"])
def test_a_second_run_reuses_every_prepared_gate_and_gives_the_same_bits(backend):
    circuit = _circuit(1)
    sim = Simulator(backend=backend, device="cpu", max_fused_qubits=4)
    first, second = sim.run(circuit), sim.run(circuit)
    assert first.metadata["gates_reused"] == 0
    assert second.metadata["gates_reused"] == second.metadata["num_gates"] > 0
    fresh = Simulator(backend=backend, device="cpu", max_fused_qubits=4).run(circuit)
    np.testing.assert_array_equal(second.statevector, fresh.statevector)
    np.testing.assert_array_equal(first.statevector, fresh.statevector)


def test_a_parameter_sweep_prepares_only_the_blocks_that_hold_a_parameter():
    qiskit = pytest.importorskip("qiskit")
    from qiskit.circuit import Parameter

    from ozsim.interop.parametric import ParametricCircuit

    theta = Parameter("t")
    qc = qiskit.QuantumCircuit(6)
    for q in range(6):  # parameter-free layers ...
        qc.h(q)
    for q in range(5):
        qc.cx(q, q + 1)
    qc.rz(theta, 5)  # ... and one parameterized gate
    for q in range(4, -1, -1):
        qc.cx(q, q + 1)
    pc = ParametricCircuit(qc)
    cache = GateCache()
    runs = [Simulator(backend="int8-auto", device="cpu", max_fused_qubits=2, gate_cache=cache)
            .run(pc.bind([t])) for t in (0.1, 0.7, 1.3)]
    gates = runs[0].metadata["num_gates"]
    for r in runs[1:]:
        assert 0 < gates - r.metadata["gates_reused"] < gates  # the parameterized block is new
    assert runs[2].metadata["gates_reused"] == runs[1].metadata["gates_reused"]
    for t, r in zip((0.1, 0.7, 1.3), runs):
        plain = Simulator(backend="int8-auto", device="cpu", max_fused_qubits=2).run(pc.bind([t]))
        np.testing.assert_array_equal(r.statevector, plain.statevector)


def test_the_cache_keeps_its_byte_bound_least_recently_used_first_out():
    cache = GateCache(max_bytes=128)  # two 2x2 complex128 matrices
    mats = [np.eye(2, dtype=complex) * (k + 1) for k in range(3)]
    made = []
    for m in (mats[0], mats[1], mats[0], mats[2]):  # mats[1] is the least recently used
        cache.get("zgemm", "cpu", m, lambda m=m: made.append(m) or m)
    assert len(cache) == 2 and len(made) == 3 and cache.hits == 1
    cache.get("zgemm", "cpu", mats[0], lambda: pytest.fail("mats[0] was evicted"))
    cache.get("zgemm", "cpu", mats[1], lambda: "again")
    assert cache.misses == 4
    cache.get("int8-auto", "cpu", mats[0], lambda: "other backend")  # keyed by backend too
    assert cache.misses == 5
    none = GateCache(max_bytes=0)
    none.get("zgemm", "cpu", mats[0], lambda: 1)
    assert len(none) == 0 and none.misses == 1


def test_large_matrices_are_prepared_afresh_without_a_lookup():
    cache = GateCache(max_matrix_bytes=1024)  # 8x8 complex128 fits, 16x16 does not
    small, large = np.eye(8, dtype=complex), np.eye(16, dtype=complex)
    made = []
    for m in (small, small, large, large):
        cache.get("zgemm", "cpu", m, lambda m=m: made.append(m.shape) or m)
    assert made == [(8, 8), (16, 16), (16, 16)] and len(cache) == 1
    assert (cache.hits, cache.misses) == (1, 3)


def test_bad_cache_arguments():
    with pytest.raises(ValueError, match="max_bytes must be an integer >= 0"):
        GateCache(max_bytes=-1)
    with pytest.raises(ValueError, match="max_matrix_bytes must be an integer >= 0"):
        GateCache(max_matrix_bytes=1.5)
    with pytest.raises(TypeError, match="gate_cache must be a GateCache"):
        Simulator(gate_cache={})


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["int8-auto", "int8-crt-auto"])
def test_gpu_runs_reuse_prepared_gates_and_keep_the_cpu_bits(backend):
    from conftest import cupy_or_skip

    cupy_or_skip()
    circuit = _circuit(2, n=10)
    sim = Simulator(backend=backend, device="gpu", max_fused_qubits=4)
    first, second = sim.run(circuit), sim.run(circuit)
    assert second.metadata["gates_reused"] == second.metadata["num_gates"]
    cpu = Simulator(backend=backend, device="cpu", max_fused_qubits=4).run(circuit)
    np.testing.assert_array_equal(first.statevector, cpu.statevector)
    np.testing.assert_array_equal(second.statevector, cpu.statevector)
