"""The accuracy guard's bound against the measured error, per circuit and backend (CPU).

For each circuit (the example circuits and the QASMBench copy, up to ``--max-qubits``), the
final state of each backend is compared with the ``zgemm`` run's (norm-wise relative
difference) and with the a-priori bound ``Result.metadata["error_bound"]``
(:mod:`ozsim.gemm.bounds`); "warns" says whether the run warned (bound above 1e-8).

Usage:
    python benchmarks/accuracy/error_bounds.py [--max-qubits 16]

Writes ``benchmarks/accuracy/results/error_bounds-cpu-<date>.json`` and prints a table.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from _common import md_table, write_json  # noqa: E402

from ozsim import QasmError, Simulator, UnsupportedOperationError  # noqa: E402
from ozsim.interop.qiskit import load_qasm  # noqa: E402
from ozsim.simulator import needs_trajectories  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BACKENDS = [("int8-auto", 1), ("int8-crt-auto", 0), ("int8x9", 1), ("int8-crt14", 1),
            ("int8x3", 1), ("int8-crt2", 1)]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-qubits", type=int, default=16)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    files = sorted((ROOT / "circuits").glob("*.qasm"))
    files += sorted((ROOT / "tests" / "data" / "qasmbench").glob("*.qasm"))
    rows, table = [], []
    for f in files:
        try:
            circuit = load_qasm(str(f))
        except (QasmError, UnsupportedOperationError):
            continue
        if circuit.num_qubits > args.max_qubits or needs_trajectories(circuit):
            continue
        ref = Simulator(backend="zgemm", device="cpu").run(circuit).statevector
        cells = [f.stem, str(circuit.num_qubits)]
        for backend, T in BACKENDS:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                res = Simulator(backend=backend, T=T, device="cpu").run(circuit)
            warned = any("a-priori bound" in str(w.message) for w in caught)
            err = float(np.linalg.norm(res.statevector - ref) / np.linalg.norm(ref))
            bound = res.metadata["error_bound"]
            rows.append(dict(circuit=f.stem, qubits=circuit.num_qubits, backend=backend, T=T,
                             measured=err, bound=bound, warned=warned, holds=err <= bound))
            cells.append(f"{err:.1e} / {bound:.1e}" + (" (w)" if warned else ""))
        table.append(cells)
        print(" | ".join(cells), flush=True)
    headers = ["circuit", "N"] + [f"{b}" + (f" T={t}" if "auto" in b else "") for b, t in BACKENDS]
    print(md_table(headers, table))
    print("bound holds everywhere:", all(r["holds"] for r in rows))
    path = write_json("error_bounds", {"rows": rows}, args.json)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
