"""One-pass gate kernels: the zgemm one against a Kronecker-product oracle and the GEMM path,
the INT8 ones bitwise against the CPU path (GPU only)."""

from __future__ import annotations


import numpy as np
import pytest

from conftest import cupy_or_skip
from ozsim.gates.haar import haar_unitary
from ozsim.gemm.cost import CostModel
from ozsim.statevector import StateVector


def _reference(psi, u, qubits):
    """Qiskit's ``_evolve_operator``: targets to the front, one product, back."""
    n = int(psi.size).bit_length() - 1
    d = len(qubits)
    t = psi.reshape((2,) * n)
    axes = [n - 1 - q for q in reversed(qubits)]  # most significant target first
    rest = [a for a in range(n) if a not in axes]
    m = np.transpose(t, axes + rest).reshape(1 << d, -1)
    out = (u @ m).reshape((2,) * n)
    return np.transpose(out, np.argsort(axes + rest)).reshape(-1)


def test_cost_model_counts_one_pass_gates_once():
    m = CostModel(1e12, 1e13, 4, 0.0, 10, one_pass_qubits=3, one_pass_rate=1e16)
    assert m.gate_time(20, 3) == pytest.approx(32 * 2**20 / 1e12)
    assert m.gate_time(20, 4) == pytest.approx(4 * 32 * 2**20 / 1e12)


@pytest.mark.gpu
@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 6])
def test_one_pass_zgemm_gate_matches_the_oracle_on_every_kind_of_target(d):
    cp = cupy_or_skip()
    rng = np.random.default_rng(d)
    n = 11
    psi0 = rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n)
    psi0 /= np.linalg.norm(psi0)
    sets = [tuple(range(d)), tuple(range(n - d, n))[::-1], tuple(rng.choice(n, d, replace=False))]
    for qubits in sets:
        u = haar_unitary(1 << d, rng)
        sv = StateVector(n, cp)
        sv._buf[...] = cp.asarray(psi0)
        sv.apply(cp.asarray(u), tuple(int(q) for q in qubits), backend="zgemm")
        got = sv.to_numpy()
        assert np.isfinite(got).all()
        np.testing.assert_allclose(got, _reference(psi0, u, qubits), rtol=0, atol=1e-14)


@pytest.mark.gpu
def test_one_pass_follows_the_engines_layout_and_agrees_with_the_gemm_path():
    cp = cupy_or_skip()
    rng = np.random.default_rng(3)
    n = 12
    gates = [(haar_unitary(1 << len(q), rng), q)
             for q in [(7, 8, 9, 10, 11, 0, 1), (2, 5), (11, 3, 6), (0,), (4, 9, 1, 7, 2, 10)]]
    states = []
    for one_pass in (True, False):
        sv = StateVector(n, cp)
        sv.one_pass = one_pass
        for u, q in gates:  # the 7-qubit gate permutes the buffer; later ones read through it
            sv.apply(cp.asarray(u), q, backend="zgemm")
        states.append(sv.to_numpy())
    ref = np.zeros(1 << n, dtype=complex)
    ref[0] = 1
    for u, q in gates:
        ref = _reference(ref, u, q)
    for got in states:
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-14)


@pytest.mark.gpu
def test_one_pass_kernel_rejects_bad_targets():
    cp = cupy_or_skip()
    from ozsim.gemm.native_gate import apply_dense

    psi = cp.zeros(1 << 8, dtype=cp.complex128)
    u = cp.eye(4, dtype=cp.complex128)
    for bad, msg in [((1, 1), "distinct"), ((0, 8), "distinct and in 0..7"),
                     (tuple(range(7)), "1..6 targets")]:
        with pytest.raises(ValueError, match=msg):
            apply_dense(psi, u if len(bad) == 2 else cp.eye(128, dtype=cp.complex128), bad)


@pytest.mark.gpu
@pytest.mark.parametrize("backend,T", [("int8x3", 1), ("int8x9", 1), ("int8x18", 1),
                                       ("int8-auto", 0), ("int8-auto", 1), ("int8-auto", 4),
                                       ("int8-crt2", 1), ("int8-crt3", 1), ("int8-crt8", 1),
                                       ("int8-crt14", 1), ("int8-crt20", 1),
                                       ("int8-crt-auto", 0), ("int8-crt-auto", 3)])
@pytest.mark.parametrize("d", [1, 2])
def test_one_pass_emulated_gate_is_bitwise_the_cpu_product(backend, T, d):
    cp = cupy_or_skip()
    from ozsim.gemm import registry, zgemm
    from ozsim.testing import ozaki_matrix

    rng = np.random.default_rng(10 * d + len(backend))
    n = 10
    for phi, qubits in [(0.5, tuple(range(d))), (4.0, tuple(rng.choice(n, d, replace=False)))]:
        psi0 = ozaki_matrix(rng, 1 << n, 1, phi)[:, 0]
        psi0[rng.random(1 << n) < 0.2] = 0  # zero amplitudes and zero groups too
        u = haar_unitary(1 << d, rng)
        sv = StateVector(n, cp)
        sv._buf[...] = cp.asarray(psi0)
        info = sv.apply(registry.parse(backend).scheme.prepare(cp.asarray(u)),
                        tuple(int(q) for q in qubits), backend=backend, T=T)
        got = sv.to_numpy()
        # the CPU path on the same product: targets to the front, one emulated ZGEMM
        axes = [n - 1 - q for q in reversed(qubits)]
        rest = [a for a in range(n) if a not in axes]
        b = np.ascontiguousarray(np.transpose(psi0.reshape((2,) * n), axes + rest)
                                 .reshape(1 << d, -1))
        c, cinfo = zgemm(u, b, backend=backend, T=T, return_info=True)
        want = np.transpose(c.reshape((2,) * n), np.argsort(axes + rest)).reshape(-1)
        assert (info.num_splits, info.num_moduli, info.kept_bits, info.fallback) == \
            (cinfo.num_splits, cinfo.num_moduli, cinfo.kept_bits, cinfo.fallback)
        assert np.isfinite(got).all()
        np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
def test_one_pass_emulated_gate_raises_on_nan():
    cp = cupy_or_skip()
    from ozsim import NonFiniteError
    from ozsim.gemm import registry

    for backend in ("int8x9", "int8-auto", "int8-crt14", "int8-crt-auto"):
        sv = StateVector(6, cp)
        sv._buf[5] = np.nan
        with pytest.raises(NonFiniteError, match="NaN or Inf"):
            sv.apply(registry.parse(backend).scheme.prepare(cp.eye(2, dtype=cp.complex128)), (1,),
                     backend=backend)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["int8-auto", "int8x8", "int8-crt-auto", "int8-crt12",
                                     "zgemm"])
def test_brickwork_of_small_gates_on_the_gpu_is_the_cpu_run(backend):
    cupy_or_skip()
    from ozsim import Simulator, gates

    for gq in (1, 2):
        circuit = gates.brickwork(9, depth=5, gate_qubits=gq, seed=4 + gq)
        runs = [Simulator(backend=backend, T=1, device=dev, max_fused_qubits=0).run(circuit)
                for dev in ("cpu", "gpu")]
        cpu, gpu = (r.statevector for r in runs)
        if backend == "zgemm":
            np.testing.assert_allclose(gpu, cpu, rtol=0, atol=1e-14)
        else:
            np.testing.assert_array_equal(gpu, cpu)
            assert runs[0].metadata["splits"] == runs[1].metadata["splits"]


@pytest.mark.gpu
def test_gpu_run_of_small_gates_holds_one_buffer():
    cupy_or_skip()
    from ozsim import Simulator, gates

    circuit = gates.brickwork(12, depth=4, gate_qubits=2, seed=1)
    for backend in ("zgemm", "int8-auto", "int8-crt-auto"):
        gpu = Simulator(backend=backend, device="gpu", max_fused_qubits=2).run(circuit)
        cpu = Simulator(backend=backend, device="cpu", max_fused_qubits=2).run(circuit)
        assert gpu.metadata["peak_memory_bytes"] == 16 * 2**12
        np.testing.assert_allclose(gpu.statevector, cpu.statevector, rtol=0, atol=1e-14)
