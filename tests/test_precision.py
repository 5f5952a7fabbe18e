"""Single-precision simulation: ``Simulator(precision="single")`` keeps complex64 amplitudes and
runs its gates through the single-precision backends (:mod:`ozsim.gemm.single`); the engine,
the CLI and ``ozsim check`` all take the precision."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ozsim import Simulator
from ozsim.cli import main
from ozsim.errors import InsufficientMemoryError
from ozsim.gates.builders import brickwork
from ozsim.gemm import registry
from ozsim.statevector import StateVector, state_bytes
from ozsim.testing import phase_aligned

from conftest import cupy_or_skip

SINGLE = ("cgemm", "tf32x3", "tf32x4", "fp16-le", "int8-auto")
# FP32 keeps 24 bits: a product's error is about k * 2**-24 relative; a 10-qubit brickwork of
# 6 layers of 2-qubit gates fused into a few blocks stays within ~1e-6 norm-wise of the exact
# state. 2e-5 leaves room for the emulated backends (FP32-level, within 2x of CGEMM's error on
# GEMMs) and for an unlucky draw, and is 1000x below what a state off by one gate would show.
SINGLE_TOL = 2e-5


def _double_state(circ):
    return Simulator(backend="zgemm", device="cpu").run(circ).statevector


@pytest.mark.parametrize("backend", SINGLE)
def test_single_precision_runs_complex64_close_to_the_double_state(backend):
    circ = brickwork(10, 6, gate_qubits=2, seed=3)
    ref = _double_state(circ)
    res = Simulator(backend=backend, T=0, device="cpu", precision="single").run(circ)
    psi = res.statevector
    assert psi.dtype == np.complex64 and psi.shape == (1 << 10,)
    assert res.metadata["precision"] == "single"
    err = np.linalg.norm(phase_aligned(psi.astype(np.complex128), ref) - ref)
    assert np.isfinite(err) and err < SINGLE_TOL, err
    assert 1e-9 < err  # it really is complex64 (FP64 would be ~1e-15)
    assert 0 < res.metadata["error_bound"] < 1


def test_single_precision_auto_is_cgemm_and_fusion_works():
    circ = brickwork(9, 4, gate_qubits=2, seed=5)
    res = Simulator(device="cpu", precision="single").run(circ)
    assert set(res.metadata["splits"]) == {"cgemm"}
    assert res.metadata["fusion"]["blocks_out"] < circ.num_gates
    res0 = Simulator(device="cpu", precision="single", max_fused_qubits=0).run(circ)
    assert sum(res0.metadata["splits"].values()) == circ.num_gates
    ref = _double_state(circ)
    for r in (res, res0):
        assert np.linalg.norm(phase_aligned(r.statevector.astype(np.complex128), ref) - ref) \
            < SINGLE_TOL


def test_single_precision_halves_the_state():
    assert state_bytes(20, "single") * 2 == state_bytes(20) == 16 << 20
    sv = StateVector(6, np, precision="single")
    assert sv.to_numpy().dtype == np.complex64
    assert sv.peak_bytes >= 2 * state_bytes(6, "single")


def test_single_precision_memory_error_names_the_bytes_first():
    with pytest.raises(InsufficientMemoryError, match="a 50-qubit state vector .* needs"):
        StateVector(50, np, precision="single")


def test_bad_precision_and_double_only_backends_are_refused():
    with pytest.raises(ValueError, match="precision must be one of double, single"):
        Simulator(precision="half")
    with pytest.raises(ValueError, match="precision must be one of double, single"):
        StateVector(3, np, precision="quad")
    with pytest.raises(ValueError, match="unknown backend 'zgemm' in single precision; expected "
                       "cgemm, tf32x"):
        Simulator(backend="zgemm", precision="single")
    with pytest.raises(ValueError, match="unknown backend 'tf32x3'; expected zgemm"):
        Simulator(backend="tf32x3")
    with pytest.raises(ValueError, match="number of products must be in 3..4"):
        registry.parse("tf32x5", "single")


def test_single_precision_samples_and_measures():
    circ = brickwork(6, 3, gate_qubits=2, seed=2)
    res = Simulator(device="cpu", precision="single", seed=4).run(circ, shots=2000)
    counts = res.counts
    assert sum(counts.values()) == 2000
    p = res.probabilities()
    assert abs(float(p.sum()) - 1.0) < 1e-5


def test_cli_run_and_check_in_single_precision(tmp_path, capsys):
    qasm = tmp_path / "bell.qasm"
    qasm.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[3];\nh q[0];\ncx q[0],q[1];\n'
                    "cx q[1],q[2];\n")
    out = tmp_path / "r.json"
    assert main(["run", str(qasm), "--precision", "single", "--backend", "tf32x3",
                 "--device", "cpu", "--output", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "in single precision" in text and "tf32x3" in text
    assert json.loads(out.read_text())["metadata"]["precision"] == "single"
    assert main(["check", str(qasm), "--precision", "single", "--backends", "cgemm,fp16-le",
                 "--device", "cpu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["precision"] == "single"
    rows = report["rows"]
    assert [r["backend"] for r in rows] == ["cgemm", "fp16-le"]
    for r in rows:  # a GHZ state: the complex64 rounding of 1/sqrt(2) (~2**-25) and no more
        assert 1e-10 < r["normwise_rel_error"] < 1e-6
    assert main(["run", str(qasm), "--precision", "single", "--backend", "zgemm",
                 "--device", "cpu"]) == 2
    assert "in single precision" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.parametrize("backend", SINGLE)
def test_single_precision_on_the_gpu_matches_the_cpu_to_fp32(backend):
    cupy_or_skip()
    circ = brickwork(12, 6, gate_qubits=2, seed=7)
    ref = _double_state(circ)
    gpu = Simulator(backend=backend, T=0, device="gpu", precision="single").run(circ)
    psi = gpu.statevector.get() if hasattr(gpu.statevector, "get") else gpu.statevector
    assert psi.dtype == np.complex64
    err = np.linalg.norm(phase_aligned(psi.astype(np.complex128), ref) - ref)
    assert np.isfinite(err) and 1e-9 < err < SINGLE_TOL, err


@pytest.mark.gpu
@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_fp32_one_pass_kernel_applies_a_gate_in_place(d):
    cp = cupy_or_skip()
    from ozsim.gates.haar import haar_unitary
    from ozsim.gemm import native_gate

    rng = np.random.default_rng(d)
    n = 12  # (2**(n-d) groups, a multiple of 256: the shared-memory variant for low targets)
    psi = (rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n)).astype(np.complex64)
    cases = [list(range(d)), [0] + list(range(n - 1, n - d, -1)),  # lowest bits; bit 0 + high
             list(range(n - 1, n - 1 - d, -1)),                    # highest bits
             sorted(rng.choice(n, d, replace=False).tolist(), reverse=True)]
    for positions in cases:
        u = haar_unitary(1 << d, rng)
        x = cp.asarray(psi)
        ptr = x.data.ptr
        native_gate.apply_dense_cuda_cores(x, cp.asarray(u.astype(np.complex64)), positions)
        assert x.data.ptr == ptr and x.dtype == cp.complex64
        want = _reference_apply(psi, u, positions)  # the same gate in complex128 NumPy
        got = x.get().astype(np.complex128)
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-6, positions


def _reference_apply(psi, u, positions):
    """``u`` on bit ``positions`` of ``psi`` in complex128 NumPy (gate index bit j ->
    positions[j])."""
    n, d = psi.size.bit_length() - 1, len(positions)
    t = psi.astype(np.complex128).reshape((2,) * n)
    axes = [n - 1 - p for p in positions]
    t = np.moveaxis(t, axes[::-1], range(d)).reshape(1 << d, -1)
    t = (u @ t).reshape((2,) * n)
    return np.moveaxis(t, range(d), axes[::-1]).reshape(-1)


def test_multiword_backends_have_gpu_one_pass_gates_up_to_5_qubits():
    for name in ("tf32x3", "tf32x4", "fp16-le"):
        scheme = registry.parse(name, "single").scheme
        assert [scheme.one_pass("gpu", d) for d in range(1, 7)] == [True] * 5 + [False]
        assert not scheme.one_pass("cpu", 2)
        assert scheme.costs["gpu"].one_pass_qubits == 5


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["tf32x3", "tf32x4", "fp16-le"])
@pytest.mark.parametrize("d", [1, 2, 3, 4, 5])
def test_multiword_one_pass_gate_in_place(backend, d):
    """The words on CUDA cores (ozsim.gemm.single.onepass): in place, FP32-accurate for every
    target placement, and fp16-le's power-of-two scaling keeps amplitudes far outside FP16's
    range (2**-100, 2**100) as accurate as unit ones."""
    cp = cupy_or_skip()
    from ozsim.gates.haar import haar_unitary
    from ozsim.gemm.single import onepass

    rng = np.random.default_rng(40 + d)
    n = 12
    psi = (rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n)).astype(np.complex64)
    cases = [list(range(d)), [0] + list(range(n - 1, n - d, -1)), list(range(n - 1, n - 1 - d, -1)),
             sorted(rng.choice(n, d, replace=False).tolist(), reverse=True)]
    for positions in cases:
        u = haar_unitary(1 << d, rng)
        want = _reference_apply(psi, u, positions)
        for scale in (1.0, 2.0**-100, 2.0**100):
            x = cp.asarray((psi * np.float32(scale)).astype(np.complex64))
            ptr = x.data.ptr
            onepass.apply_words(x, cp.asarray(u.astype(np.complex64)), positions, backend)
            assert x.data.ptr == ptr and x.dtype == cp.complex64
            got = x.get().astype(np.complex128) / scale
            assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-6, (positions, scale)
    with pytest.raises(ValueError, match="no multiword one-pass gate"):
        onepass.apply_words(cp.asarray(psi), cp.eye(2, dtype=cp.complex64), [0], "cgemm")


@pytest.mark.gpu
@pytest.mark.parametrize("gate_qubits,fusion", [(2, 0), (2, None), (4, None)])
def test_gpu_multiword_states_within_2x_of_cgemm(gate_qubits, fusion):
    """The issue's bar on state vectors: tf32x3, tf32x4 and fp16-le within 2x of cgemm's
    norm-wise error against the double-precision state (CPU: 1.2-1.6x). The tensor cores'
    truncated sums, one per gate at k <= 32, made it 3-6.5x on an H200; gates of up to 5
    qubits now take the words on CUDA cores with sums rounded to nearest."""
    cupy_or_skip()
    circ = brickwork(16, 12, gate_qubits=gate_qubits, seed=21)
    ref = _double_state(circ)
    errs = {}
    for backend in ("cgemm", "tf32x3", "tf32x4", "fp16-le"):
        res = Simulator(backend=backend, device="gpu", precision="single",
                        max_fused_qubits=fusion).run(circ)
        psi = res.statevector
        psi = (psi.get() if hasattr(psi, "get") else psi).astype(np.complex128)
        errs[backend] = np.linalg.norm(phase_aligned(psi, ref) - ref)
        if backend != "cgemm" and fusion is None:  # fused blocks stay in the one-pass range
            assert res.metadata["fusion"]["max_fused_qubits"] <= 5, res.metadata["fusion"]
    assert all(np.isfinite(e) and e > 1e-9 for e in errs.values()), errs
    for backend in ("tf32x3", "tf32x4", "fp16-le"):
        assert errs[backend] <= 2 * errs["cgemm"], errs


def test_qiskit_backend_takes_aers_precision_option():
    qiskit = pytest.importorskip("qiskit")
    from ozsim.qiskit import OzsimBackend

    qc = qiskit.QuantumCircuit(2)
    qc.h(0)
    qc.cx(0, 1)
    qc.measure_all()
    backend = OzsimBackend(device="cpu", precision="single")
    res = backend.run(qc, shots=400, seed_simulator=3).result()
    assert res.results[0].metadata["precision"] == "single"
    counts = res.get_counts()
    assert set(counts) == {"00", "11"} and sum(counts.values()) == 400
    with pytest.raises(ValueError, match="precision must be one of double, single"):
        OzsimBackend(device="cpu", precision="half")


def test_single_int8_auto_does_not_depend_on_the_column_blocking():
    """The engine applies single-precision emulated gates in blocks of columns; int8-auto
    chooses its slices from the whole state's histogram, so the blocks change no bit."""
    from ozsim.gates.haar import haar_unitary

    rng = np.random.default_rng(4)
    n = 14
    u = haar_unitary(8, rng).astype(np.complex64)
    # qubit 13 = 0 (the first block of columns): magnitudes spread over ~2**+-30; qubit 13 = 1:
    # flat. Each block alone would choose its own number of slices.
    spread = np.exp(np.where(np.arange(1 << n) >> 13, 0.0, 7 * rng.standard_normal(1 << n)))
    psi = ((rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n)) * spread
           ).astype(np.complex64)
    states = []
    for ws in (None, 16 * 8 * 1024):  # one block; blocks of 1024 columns (the smallest)
        sv = StateVector(n, np, workspace_bytes=ws, precision="single")
        sv._buf[...] = psi
        info = sv.apply(u, (0, 5, 9), backend="int8-auto", T=1)
        states.append((sv.to_numpy(), info.num_splits))
    assert states[0][1] == states[1][1]
    assert np.array_equal(states[0][0], states[1][0])
