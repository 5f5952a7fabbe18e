"""Every QASMBench file either runs and matches Qiskit's state before measurement, or raises the
documented clear error (QasmError with file and line; UnsupportedOperationError naming the op)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import qiskit.qasm2
from qiskit.quantum_info import Statevector

from ozsim import QasmError, UnsupportedOperationError
from ozsim.interop.qiskit import load_qasm
from ozsim.simulator import Simulator
from ozsim.testing import phase_aligned

DATA = Path(__file__).parent / "data" / "qasmbench"
FILES = sorted(DATA.glob("*.qasm"))
#: Above this many qubits the emulated run costs seconds per gate on 2 cores: use native ZGEMM
#: there (the INT8 paths are exercised on every smaller file).
INT8_MAX_QUBITS = 20


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
    if blocker is not None:
        with pytest.raises(UnsupportedOperationError, match=r"operation \d+ \(.*\) "):
            Simulator(backend=backend, device="cpu").run(circ)
        return
    result = Simulator(backend=backend, T=1, device="cpu").run(circ)
    ref = Statevector(qc.remove_final_measurements(inplace=False)).data
    np.testing.assert_allclose(phase_aligned(result.statevector, ref), ref, rtol=0, atol=1e-12)


def test_documented_parse_failure_names_file_and_line():
    with pytest.raises(QasmError, match=r"vqe_uccsd_n4\.qasm:\d+: "):
        load_qasm(DATA / "vqe_uccsd_n4.qasm")
