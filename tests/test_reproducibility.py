"""Pinned bits: the final state of a fixed-seed brickwork run, per INT8 backend.

The INT8 paths are exact integer products plus a fixed-order FP64 accumulation (Ozaki scheme I)
or an exact CRT reconstruction (scheme II), so their results do not depend on the BLAS, the
blocking, the thread count or the device. A digest of the final state pins that: a change to
the code that moves a single bit of any amplitude fails here, on the CPU and on the GPU alike.
The digests were taken from the CPU path; the GPU path must give the same bytes. The gates are
stored (``tests/data/brickwork_n10_d3_L4.npz``, the Haar unitaries of
``gates.brickwork(10, depth=4, gate_qubits=3, seed=20261125)``), so that no LAPACK build's QR
changes the inputs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
from conftest import cupy_or_skip

from ozsim import Circuit, Simulator

#: (backend, T) -> first 32 hex digits of the SHA-256 of the final amplitudes (complex128, little
#: endian bytes) of the stored brickwork circuit, unfused.
DIGESTS = {
    ("int8x9", 1): "e8a40950c030425ddb9cfa5d0af71408",
    ("int8-auto", 0): "90f24824d4e1308057940d6fc4ad7de4",
    ("int8-auto", 1): "85343d593ec28e371d288ed47a1e61ee",
    ("int8-crt14", 1): "5ff5b361ba7275dbc279adaa39ed27ce",
    ("int8-crt-auto", 0): "f2e4a11f45bd6ae1811bba5cd19080d5",
    ("int8-crt-auto", 1): "5ff5b361ba7275dbc279adaa39ed27ce",  # 14 moduli: int8-crt14
}


def _state(device: str, backend: str, T: float) -> np.ndarray:
    data = np.load(Path(__file__).parent / "data" / "brickwork_n10_d3_L4.npz")
    circuit = Circuit(10)
    for matrix, qubits in zip(data["matrices"], data["qubits"]):
        circuit.unitary(matrix, tuple(int(q) for q in qubits))
    result = Simulator(backend=backend, T=T, device=device, max_fused_qubits=0).run(circuit)
    # + 0.0 turns -0.0 into +0.0: the bits pinned are those of the values (the GPU's integer
    # accumulators give +0 where the CPU's BLAS may give -0)
    sv = np.ascontiguousarray(result.statevector, dtype="<c16") + 0.0
    assert np.isfinite(sv).all()
    return sv


def _digest(sv: np.ndarray) -> str:
    return hashlib.sha256(sv.tobytes()).hexdigest()[:32]


@pytest.mark.parametrize("backend,T", sorted(DIGESTS))
def test_int8_backends_give_the_pinned_bits_on_the_cpu(backend, T):
    assert _digest(_state("cpu", backend, T)) == DIGESTS[(backend, T)]


@pytest.mark.gpu
@pytest.mark.parametrize("backend,T", sorted(DIGESTS))
def test_int8_backends_give_the_pinned_bits_on_the_gpu(backend, T):
    cupy_or_skip()
    gpu = _state("gpu", backend, T)
    np.testing.assert_array_equal(gpu, _state("cpu", backend, T))
    assert _digest(gpu) == DIGESTS[(backend, T)]
