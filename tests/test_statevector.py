"""The engine against Qiskit's Statevector (every target ordering) and the simulator's contract."""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest
from qiskit import QuantumCircuit
from qiskit.circuit.library import UnitaryGate
from qiskit.quantum_info import Statevector
from scipy.stats import unitary_group

from ozsim import (
    Circuit,
    DeviceUnavailableError,
    InsufficientMemoryError,
    NonFiniteError,
    UnsupportedOperationError,
)
from ozsim.simulator import Simulator, get_array_module
from ozsim.statevector import StateVector
from ozsim.testing import phase_aligned

BACKENDS = ("zgemm", "int8-auto", "int8x12")


def _random_pair(rng, n, orderings):
    """An ozsim Circuit and the Qiskit circuit of the same gates, one per target ordering."""
    circ, qc = Circuit(n), QuantumCircuit(n)
    for qs in orderings:
        u = unitary_group.rvs(2 ** len(qs), random_state=rng)
        circ.unitary(u, qs)
        qc.append(UnitaryGate(u), list(qs))
    return circ, qc


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("d", [1, 2, 3])
def test_every_target_ordering(backend, d):
    """All ordered d-tuples of 5 qubits, each as one gate, against Qiskit (atol 1e-12)."""
    rng = np.random.default_rng(100 + d)
    tuples = list(itertools.permutations(range(5), d))
    rng.shuffle(tuples)
    for chunk in range(0, len(tuples), 20):
        circ, qc = _random_pair(rng, 5, tuples[chunk : chunk + 20])
        psi = Simulator(backend=backend, device="cpu", max_fused_qubits=0).run(circ).statevector
        ref = Statevector(qc).data
        np.testing.assert_allclose(phase_aligned(psi, ref), ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("d", [4, 5])
def test_large_gates_random_orderings(backend, d):
    rng = np.random.default_rng(200 + d)
    orderings = [tuple(int(q) for q in rng.permutation(7)[:d]) for _ in range(12)]
    circ, qc = _random_pair(rng, 7, orderings)
    ref = Statevector(qc).data
    for fusion in (0, None, 6):  # per gate, cost-model fusion, forced 6-qubit blocks
        sim = Simulator(backend=backend, device="cpu", max_fused_qubits=fusion)
        psi = sim.run(circ).statevector
        np.testing.assert_allclose(phase_aligned(psi, ref), ref, rtol=0, atol=1e-12)


def test_mixed_sizes_and_global_phase_exactly():
    rng = np.random.default_rng(300)
    orderings = [tuple(int(q) for q in rng.permutation(6)[: rng.integers(1, 6)]) for _ in range(30)]
    circ, qc = _random_pair(rng, 6, orderings)
    circ.global_phase = qc.global_phase = 0.7
    ref = Statevector(qc).data
    for fusion in (0, 3):
        sim = Simulator(backend="int8-auto", T=0, device="cpu", max_fused_qubits=fusion)
        np.testing.assert_allclose(sim.run(circ).statevector, ref, rtol=0, atol=1e-12)


def test_gate_on_all_qubits_and_layout_restored():
    rng = np.random.default_rng(301)
    circ, qc = _random_pair(rng, 4, [(2, 0, 3, 1), (0,), (3, 2, 1, 0)])
    psi = Simulator(backend="zgemm", device="cpu", max_fused_qubits=0).run(circ).statevector
    np.testing.assert_allclose(phase_aligned(psi, Statevector(qc).data), Statevector(qc).data,
                               atol=1e-12)


def test_engine_reuses_its_two_buffers():
    sv = StateVector(6)
    ids = {id(sv._buf), id(sv._spare)}
    u = unitary_group.rvs(4, random_state=np.random.default_rng(0))
    for qs in [(0, 1), (5, 2), (3, 4), (1, 0)]:
        sv.apply(u, qs, backend="zgemm")
        assert {id(sv._buf), id(sv._spare)} == ids
    assert abs(np.linalg.norm(sv.to_numpy()) - 1) < 1e-14


def test_result_metadata_and_splits():
    rng = np.random.default_rng(302)
    circ, _ = _random_pair(rng, 5, [(0, 1), (2, 3), (1, 2), (3, 4)])
    res = Simulator(backend="int8-auto", T=1, device="cpu", max_fused_qubits=0).run(circ)
    md = res.metadata
    assert md["device"] == "cpu" and md["backend"] == "int8-auto" and md["num_gates"] == 4
    assert md["fusion"]["max_fused_qubits"] == 0 and md["mode"] == "statevector"
    assert sum(md["splits"].values()) == 4 and all(8 <= s <= 18 for s in md["splits"])
    assert md["fallbacks"] == 0 and 0 <= md["max_mean_loss_bits"] <= 1
    assert md["wall_time_s"] > 0 and md["peak_memory_bytes"] >= 2 * 16 * 32


def test_amplitude_range_is_a_slice_of_the_statevector():
    rng = np.random.default_rng(303)
    circ, _ = _random_pair(rng, 5, [(0, 1), (2, 3), (1, 2), (3, 4)])
    res = Simulator(backend="zgemm", device="cpu").run(circ)
    psi = res.statevector
    np.testing.assert_array_equal(res.amplitude_range(3, 17), psi[3:17])
    np.testing.assert_array_equal(res.amplitude_range(), psi)
    assert res.amplitude_range(32, 32).shape == (0,)
    for bad in [(-1, 4), (4, 3), (0, 33), (0.5, 4), (True, 4)]:
        with pytest.raises(ValueError, match="0 <= start <= stop <= 2\\*\\*5"):
            res.amplitude_range(*bad)


def test_sample_counts_keys_follow_qiskit():
    circ = Circuit(3, 3, cregs=[("a", 1), ("b", 2)])
    x = np.array([[0, 1], [1, 0]], dtype=complex)
    circ.unitary(x, [0], name="x")
    circ.unitary(x, [2], name="x")
    circ.measure(0, 0)  # a[0] = 1
    circ.measure(1, 1)  # b[0] = 0
    circ.measure(2, 2)  # b[1] = 1
    res = Simulator(device="cpu", seed=1).run(circ)
    assert res.sample_counts(10) == {"10 1": 10}  # registers reversed, MSB first: b='10', a='1'
    free = Simulator(device="cpu").run(Circuit(2))
    assert free.sample_counts(5, seed=0) == {"00": 5}
    with pytest.raises(ValueError, match="shots must be >= 1"):
        free.sample_counts(0)


def test_sample_counts_statistics():
    h = np.array([[1, 1], [1, -1]], dtype=complex) / np.sqrt(2)
    circ = Circuit(1, 1)
    circ.unitary(h, [0])
    circ.measure(0, 0)
    counts = Simulator(device="cpu", seed=5).run(circ).sample_counts(20000)
    assert set(counts) == {"0", "1"} and abs(counts["0"] - 10000) < 400  # 5.6 sigma


def test_trajectory_result_has_counts_not_a_statevector():
    x = np.array([[0, 1], [1, 0]], dtype=complex)
    c = Circuit(2, 2)
    c.measure(0, 0)
    c.unitary(x, [0], name="x")  # after the measurement: mid-circuit
    c.measure(0, 1)
    res = Simulator(device="cpu", seed=3).run(c, shots=50)
    assert res.metadata["mode"] == "trajectories" and res.counts == {"10": 50}
    with pytest.raises(UnsupportedOperationError, match="mixture over measurement outcomes"):
        _ = res.statevector


def test_too_many_qubits_fails_before_allocating():
    # a circuit without gates needs the state's own buffer only: 16 * 2**45 bytes = 524288 GiB
    with pytest.raises(InsufficientMemoryError, match=r"a 45-qubit state vector \(one buffer.* "
                       r"needs 524288\.00 GiB but only"):
        Simulator(device="cpu").run(Circuit(45))
    # with a gate, the CPU (no one-pass kernels) needs two buffers and the workspace
    c = Circuit(45)
    c.unitary(np.eye(2), [0])
    with pytest.raises(InsufficientMemoryError, match=r"a 45-qubit state vector \(two buffers "
                       r"and workspace\) needs 10485\d\d\.\d\d GiB but only"):
        Simulator(device="cpu").run(c)


def test_nan_state_is_refused():
    c = Circuit(1)
    c.unitary(np.array([[np.nan, 0], [0, 1]]), [0], check=False)
    with pytest.raises(NonFiniteError, match="NaN or Inf"):
        Simulator(backend="zgemm", device="cpu").run(c)


def test_bad_simulator_options():
    with pytest.raises(ValueError, match="unknown backend"):
        Simulator(backend="fp16")
    with pytest.raises(ValueError, match="T must be >= 0"):
        Simulator(T=-0.5)
    with pytest.raises(ValueError, match="device must be one of"):
        Simulator(device="tpu")
    with pytest.raises(ValueError, match="device must be one of"):
        get_array_module("tpu")
    with pytest.raises(TypeError, match="cannot run a int"):
        Simulator(device="cpu").run(3)
    with pytest.raises(ValueError, match="max_fused_qubits must be None or an integer >= 0"):
        Simulator(max_fused_qubits=-1)
    with pytest.raises(ValueError, match="shots must be an integer >= 0 or None, got -1"):
        Simulator(device="cpu").run(Circuit(1), shots=-1)


def test_gpu_requested_without_gpu(monkeypatch):
    monkeypatch.setattr("ozsim.simulator.gpu_available", lambda: (False, "CuPy is not importable"))
    with pytest.raises(DeviceUnavailableError, match="device='gpu' was requested but CuPy"):
        Simulator(device="gpu").run(Circuit(1))
    assert get_array_module("auto")[1] == "cpu"


def test_import_loads_neither_cupy_nor_qiskit():
    code = (
        "import sys, ozsim, ozsim.gemm, ozsim.simulator, ozsim.statevector, ozsim.cli; "
        "bad = [m for m in ('cupy', 'qiskit') if m in sys.modules]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_deliberate_fallback_is_recorded_and_warned_once():
    import warnings

    from ozsim import Circuit, Simulator

    t = 1e-300  # a rotation whose small entries lie ~1000 bits below its large ones
    g = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]], dtype=complex)
    c = Circuit(3)
    for q in (0, 1, 2):
        c.unitary(g, [q])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = Simulator(backend="int8-auto", T=1, device="cpu", max_fused_qubits=0).run(c)
    fallback_warnings = [w for w in caught if "ran native ZGEMM" in str(w.message)]
    assert len(fallback_warnings) == 1 and fallback_warnings[0].category is RuntimeWarning
    assert res.metadata["fallbacks"] == 3


def test_one_buffer_state_allocates_its_spare_only_when_a_gate_needs_it():
    sv = StateVector(6, np, in_place=("zgemm", 0))  # no gates announced: one buffer
    assert sv._spare_buf is None and sv.peak_bytes == 16 * 2**6
    h = np.array([[1, 1], [1, -1]], dtype=complex) / np.sqrt(2)
    sv.apply(h, (3,), backend="zgemm")  # the CPU has no one-pass kernel: the GEMM path
    assert sv._spare_buf is not None and sv.peak_bytes > 16 * 2**6
    want = np.zeros(2**6, dtype=complex)
    want[0] = want[8] = 1 / np.sqrt(2)
    np.testing.assert_allclose(sv.to_numpy(), want, atol=1e-15)



# -- small gates of the INT8 schemes applied as 3-qubit gates ----------------------------------
def test_pad_gate_kron_with_identity_on_the_lowest_other_qubits():
    from ozsim.statevector import pad_gate

    u = unitary_group.rvs(2, random_state=3)
    m, q = pad_gate(u, (2,), "int8-auto", 5)
    assert q == (2, 0, 1) and np.array_equal(m, np.kron(np.eye(4), u))
    m2, q2 = pad_gate(np.kron(u, u), (0, 4), "int8x9", 5)
    assert q2 == (0, 4, 1) and m2.shape == (8, 8)
    # scheme II: padded only for 16 or more moduli (the exact-product kernel takes up to 15)
    assert pad_gate(u, (2,), "int8-crt16", 5)[1] == (2, 0, 1)
    assert pad_gate(np.kron(u, u), (3, 1), "int8-crt20", 5)[1] == (3, 1, 0)
    for backend in ("int8-crt-auto", "int8-crt15", "int8-crt2"):
        m4, q4 = pad_gate(np.kron(u, u), (3, 1), backend, 5)
        assert q4 == (3, 1) and m4.shape == (4, 4)
    for backend, n in (("zgemm", 5), ("int8-crt20", 2), ("int8-auto", 3)):
        m3, q3 = pad_gate(np.kron(u, u), (0, 1), backend, n)  # native / too few qubits
        assert q3 == (0, 1) and m3.shape == (4, 4)
    g5 = unitary_group.rvs(32, random_state=4)  # 5- and 6-qubit gates as they are (one pass)
    assert pad_gate(g5, (9, 8, 7, 6, 5), "int8-crt14", 12)[0].shape == (32, 32)
    g6 = np.kron(g5, u)
    m6, q6 = pad_gate(g6, (9, 8, 7, 6, 5, 4), "int8-crt14", 12)
    assert q6 == (9, 8, 7, 6, 5, 4) and m6 is g6
    assert pad_gate(g6, tuple(range(6)), "int8-auto", 12)[0].shape == (64, 64)
    assert pad_gate(g6, tuple(range(6)), "int8-crt-auto", 12)[0].shape == (64, 64)


@pytest.mark.parametrize("backend,T,padded", [("int8-crt-auto", 0.0, False),
                                              ("int8-crt16", 0.0, True),
                                              ("int8-auto", 1.0, True)])
def test_simulator_applies_small_int8_gates_as_three_qubit_ones(backend, T, padded):
    """Lone 1- and 2-qubit gates through the INT8 schemes: the bits of kron(I, U) applied on the
    padded qubits (what the GPU's 3-qubit tensor-core kernels compute too), or of the gate itself
    where the scheme takes it as it is (scheme II up to 15 moduli), and Qiskit's state to FP64
    accuracy."""
    rng = np.random.default_rng(21)
    gates = [(unitary_group.rvs(2, random_state=rng), (3,)),
             (unitary_group.rvs(4, random_state=rng), (0, 4)),
             (unitary_group.rvs(2, random_state=rng), (1,))]
    circ = Circuit(5)
    qc = QuantumCircuit(5)
    for u, qs in gates:
        circ.unitary(u, qs)
        qc.append(UnitaryGate(u), list(qs))
    res = Simulator(backend=backend, T=T, device="cpu", max_fused_qubits=0).run(circ)
    assert res.metadata["num_gates"] == 3
    sv = StateVector(5)
    from ozsim.statevector import pad_gate

    for u, qs in gates:
        m, q = pad_gate(u, qs, backend, 5)
        assert len(q) == (3 if padded else len(qs))
        sv.apply(*sv.aligned(m, q), backend=backend, T=T)
    np.testing.assert_array_equal(res.statevector, sv.to_numpy())
    ref = Statevector.from_instruction(qc).data
    assert np.abs(phase_aligned(res.statevector, ref) - ref).max() < 1e-15


def test_simulator_applies_scheme_two_six_qubit_gates_as_they_are():
    """No padding to 7 qubits (the GPU applies 6-qubit gates in one pass): the simulator's bits
    are those of the gate itself on its targets, and Qiskit's state to FP64 accuracy."""
    from ozsim.statevector import pad_gate

    rng = np.random.default_rng(22)
    u = unitary_group.rvs(64, random_state=rng)
    qs = (6, 2, 7, 3, 5, 8)
    circ = Circuit(9)
    circ.unitary(u, qs)
    qc = QuantumCircuit(9)
    qc.append(UnitaryGate(u), list(qs))
    res = Simulator(backend="int8-crt14", device="cpu", max_fused_qubits=0).run(circ)
    sv = StateVector(9)
    m, q = pad_gate(u, qs, "int8-crt14", 9)
    assert q == qs and m is u
    sv.apply(*sv.aligned(m, q), backend="int8-crt14")
    np.testing.assert_array_equal(res.statevector, sv.to_numpy())
    ref = Statevector.from_instruction(qc).data
    assert np.abs(phase_aligned(res.statevector, ref) - ref).max() < 1e-14


def _emulated_permute_kernel(src, layout, new_layout, inner):
    """kernels/permute_state.cu in NumPy, from the tables of ``permutation_tables``."""
    from ozsim.gemm._permutation import CHUNK_BITS, permutation_tables

    lo, mid, top, inner_out, mid_bits = permutation_tables(layout, new_layout, inner)
    lo_bits = CHUNK_BITS - inner
    w = np.arange(src.size >> inner, dtype=np.int64)
    w_lo, w_hi = w & ((1 << lo_bits) - 1), w >> lo_bits
    base = lo[w_lo] + mid[w_hi & ((1 << mid_bits) - 1)] + top[w_hi >> mid_bits]
    dst = np.full_like(src, np.nan)
    for i, off in enumerate(inner_out):
        assert np.isnan(dst[base[:, 0] + off]).all()  # each output written once
        dst[base[:, 0] + off] = src[base[:, 1] + i]
    return dst


@pytest.mark.parametrize("n", [11, 12, 15])
def test_permutation_kernel_tables_move_every_amplitude_once(n):
    """The GPU permutation kernel's tables, applied in NumPy, give the axis transposition of the
    state (targets on the inner bits, on bit 0 of the output, anywhere; scrambled layouts)."""
    rng = np.random.default_rng(n)
    src = rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n)
    canon = tuple(range(n - 1, -1, -1))
    cases = [(canon, (0, 1) + tuple(range(n - 1, 1, -1))), (canon, (n - 1,) + canon[1:]),
             (canon, (2, 0) + tuple(q for q in canon if q not in (0, 2)))]
    cases += [(tuple(rng.permutation(n)), tuple(rng.permutation(n))) for _ in range(5)]
    for layout, new_layout in cases:
        layout, new_layout = tuple(map(int, layout)), tuple(map(int, new_layout))
        ref = src.reshape((2,) * n).transpose([layout.index(q) for q in new_layout]).ravel()
        for inner in (2, 3):
            got = _emulated_permute_kernel(src, layout, new_layout, inner)
            np.testing.assert_array_equal(got, ref)
