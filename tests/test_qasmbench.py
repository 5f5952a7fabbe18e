"""Every QASMBench file that Qiskit parses runs: its counts agree with Qiskit Aer's (chi-square,
fixed seeds) and, without mid-circuit operations, its state before measurement matches Qiskit's
Statevector. The file Qiskit rejects raises QasmError naming the file and line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import qiskit.qasm2
from qiskit import transpile
from qiskit.quantum_info import Statevector
from qiskit_aer import AerSimulator

from ozsim import QasmError
from ozsim.interop.qiskit import load_qasm
from ozsim.simulator import Simulator
from ozsim.testing import assert_same_distribution, phase_aligned

DATA = Path(__file__).parent / "data" / "qasmbench"
FILES = sorted(DATA.glob("*.qasm"))
#: Above this many qubits the emulated run costs seconds per gate on 2 cores: use native ZGEMM
#: there (the INT8 paths are exercised on every smaller file).
INT8_MAX_QUBITS = 20
SHOTS, SEED = 2000, 11


def _qiskit_circuit(path: Path):
    return qiskit.qasm2.load(
        path, custom_instructions=qiskit.qasm2.LEGACY_CUSTOM_INSTRUCTIONS, include_path=(DATA,)
    )


def _needs_per_shot(qc) -> str | None:
    """The first reset / conditioned op / mid-circuit measurement Qiskit sees, or None."""
    body = qc.remove_final_measurements(inplace=False)
    for inst in body.data:
        name = inst.operation.name
        if name in ("reset", "measure", "if_else") or getattr(inst.operation, "condition", None):
            return name
    return None


def test_the_copy_is_complete():
    assert len(FILES) == 43 and (DATA / "LICENSE").exists() and (DATA / "NOTICE").exists()


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_qasmbench_file(path):
    try:
        qc = _qiskit_circuit(path)
    except qiskit.qasm2.QASM2ParseError:
        with pytest.raises(QasmError, match=rf"{path.name}:\d+: "):
            load_qasm(path)
        return
    circ = load_qasm(path)
    blocker = _needs_per_shot(qc)
    backend = "int8-auto" if qc.num_qubits <= INT8_MAX_QUBITS else "zgemm"
    result = Simulator(backend=backend, T=1, device="cpu", seed=SEED).run(circ, shots=SHOTS)
    assert result.metadata["mode"] == ("statevector" if blocker is None else "trajectories")
    if qc.num_clbits:
        aer = AerSimulator(method="statevector")
        job = aer.run(transpile(qc, aer), shots=SHOTS, seed_simulator=SEED)
        assert_same_distribution(result.counts, job.result().get_counts())
    if blocker is None:
        ref = Statevector(qc.remove_final_measurements(inplace=False)).data
        psi = result.statevector
        np.testing.assert_allclose(phase_aligned(psi, ref), ref, rtol=0, atol=1e-12)


def test_documented_parse_failure_names_file_and_line():
    with pytest.raises(QasmError, match=r"vqe_uccsd_n4\.qasm:\d+: "):
        load_qasm(DATA / "vqe_uccsd_n4.qasm")
