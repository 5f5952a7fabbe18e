"""OzsimBackend, a BackendV2: its Target, transpile, Result (counts, memory, metadata), Qiskit's
BackendSamplerV2 / BackendEstimatorV2 on it, and counts against AerSimulator on QASMBench files
(total variation distance, fixed seeds)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import qiskit.qasm2
from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister, transpile
from qiskit.circuit.library import QFT, UnitaryGate, efficient_su2
from qiskit.primitives import BackendEstimatorV2, BackendSamplerV2, StatevectorEstimator
from qiskit.providers import BackendV2
from qiskit.quantum_info import random_unitary
from qiskit_aer import AerSimulator

from ozsim import UnsupportedOperationError
from ozsim.qiskit import OzsimBackend

DATA = Path(__file__).parent / "data" / "qasmbench"


def _tvd(a: dict, b: dict) -> float:
    na, nb = sum(a.values()), sum(b.values())
    return 0.5 * sum(abs(a.get(k, 0) / na - b.get(k, 0) / nb) for k in set(a) | set(b))


def test_target_and_options():
    backend = OzsimBackend(backend="zgemm", T=2, device="cpu")
    assert isinstance(backend, BackendV2) and backend.max_circuits is None
    names = set(backend.target.operation_names)
    assert {"h", "cx", "rzz", "ccx", "unitary", "measure", "reset", "if_else", "barrier",
            "delay"} <= names
    assert backend.target.num_qubits is None
    assert backend.options.backend == "zgemm" and backend.options.T == 2
    assert backend.options.shots == 1024 and backend.options.memory is False
    with pytest.raises(ValueError):
        OzsimBackend(backend="int8x99")
    with pytest.raises(AttributeError, match="no option 'foo'"):
        backend.run(QuantumCircuit(1), foo=1)


def test_run_counts_memory_and_metadata():
    backend = OzsimBackend(backend="zgemm", device="cpu")
    q = QuantumRegister(3)
    a, b = ClassicalRegister(2, "a"), ClassicalRegister(1, "b")
    qc = QuantumCircuit(q, a, b)
    qc.h(0)
    qc.cx(0, 1)
    qc.x(2)
    qc.append(UnitaryGate(random_unitary(2, seed=1)), [2])
    qc.delay(100, 1)
    qc.measure([0, 1, 2], [0, 1, 2])
    result = backend.run(transpile(qc, backend), shots=400, memory=True,
                         seed_simulator=3).result()
    counts = result.get_counts()
    assert sum(counts.values()) == 400 and {k[2:] for k in counts} == {"00", "11"}
    memory = result.get_memory()
    assert len(memory) == 400 and {m: memory.count(m) for m in set(memory)} == counts
    meta = result.results[0].metadata
    assert meta["backend"] == "zgemm" and meta["splits"] and "wall_time_s" in meta
    again = backend.run(transpile(qc, backend), shots=400, memory=True, seed_simulator=3).result()
    assert again.get_memory() == memory
    both = backend.run([QFT(3).decompose(), qc], shots=10).result()
    assert both.get_counts(0) == {"0": 10} and sum(both.get_counts(1).values()) == 10


def test_unbound_parameters_are_named():
    with pytest.raises(UnsupportedOperationError, match=r"12 unbound parameters \(θ\[0\]"):
        OzsimBackend(backend="zgemm").run(efficient_su2(3, reps=1))


def test_backend_primitives():
    backend = OzsimBackend(backend="zgemm", device="cpu")
    qc = efficient_su2(3, reps=1)
    values = np.random.default_rng(0).uniform(-3, 3, (2, qc.num_parameters))
    tqc = transpile(qc, backend)
    ref = StatevectorEstimator().run([(qc, ["ZZI", "XXY"], values[0])]).result()[0].data.evs
    est = BackendEstimatorV2(backend=backend, options={"default_precision": 0.01,
                                                       "seed_simulator": 1})
    evs = est.run([(tqc, ["ZZI", "XXY"], values[0])]).result()[0].data.evs
    assert np.all(np.abs(evs - ref) < 0.06)
    measured = qc.measure_all(inplace=False)
    res = BackendSamplerV2(backend=backend).run([(transpile(measured, backend), values)],
                                                shots=100).result()[0]
    assert res.data.meas.shape == (2,) and res.data.meas.num_shots == 100


CASES = ["qft_n4", "teleportation_n3", "ipea_n2", "simon_n6", "adder_n10"]


@pytest.mark.parametrize("stem", CASES)
def test_counts_match_aer(stem):
    qc = qiskit.qasm2.load(DATA / f"{stem}.qasm",
                           custom_instructions=qiskit.qasm2.LEGACY_CUSTOM_INSTRUCTIONS,
                           include_path=(DATA,))
    backend = OzsimBackend(backend="zgemm", device="cpu")
    ours = backend.run(transpile(qc, backend), shots=4000, seed_simulator=5).result().get_counts()
    aer = AerSimulator(seed_simulator=5)
    theirs = aer.run(transpile(qc, aer), shots=4000).result().get_counts()
    assert set(ours) <= set(theirs) | {k for k in ours if ours[k] < 10}
    assert _tvd(ours, theirs) < 0.05, (ours, theirs)
