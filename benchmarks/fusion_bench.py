"""CPU benchmark of gate fusion: 20-qubit QFT and quantum-volume circuits, with and without
fusion, for native ZGEMM, INT8-AUTO and ``backend="auto"`` (each block through the candidate the
cost table finds cheapest), beside Qiskit Aer's statevector simulator in the same run.

    python benchmarks/fusion_bench.py [--qubits 20] [--repeat 3] [--backends zgemm,int8-auto,auto]

Prints a table (median wall seconds over --repeat runs) and writes
``benchmarks/results/fusion_bench-cpu-<date>.json`` (``--json`` overrides). Aer is timed on the same
circuits (its own fusion on, its default threads), from ``run`` to ``result()``, statevector saved.
The ozsim and Aer states are compared (fidelity) so a fast wrong answer cannot hide.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np
from qiskit import transpile
from qiskit.circuit.library import quantum_volume
from qiskit.synthesis.qft import synth_qft_full
from qiskit_aer import AerSimulator

from _common import result_path, write_json
from ozsim.interop.qiskit import from_qiskit
from ozsim.simulator import Simulator


def circuits(n: int):
    qft = transpile(synth_qft_full(n), basis_gates=["h", "cp", "swap"], optimization_level=0)
    qv = quantum_volume(n, seed=7).decompose()  # 2-qubit Haar unitaries (UnitaryGate)
    return {f"qft_n{n}": qft, f"qv_n{n}": qv}


def time_ozsim(circ, backend, fusion, repeat):
    times, res = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        res = Simulator(backend=backend, device="cpu", max_fused_qubits=fusion).run(circ)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), res


def time_aer(qc, repeat):
    aer = AerSimulator(method="statevector")
    qc = qc.copy()
    qc.save_statevector()
    tqc = transpile(qc, aer, optimization_level=0)
    times, sv = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        sv = aer.run(tqc, shots=1).result().get_statevector()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), np.asarray(sv)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--qubits", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backends", default="zgemm,int8-auto,auto",
                    help="ozsim backends, comma separated")
    ap.add_argument("--json", default=None,
                    help="output (default benchmarks/results/fusion_bench-cpu-<date>.json)")
    ap.add_argument("--max-unfused-int8-gates", type=int, default=500,
                    help="skip int8-auto without fusion on circuits with more gates (slow on CPU)")
    args = ap.parse_args()
    rows = []
    for name, qc in circuits(args.qubits).items():
        circ = from_qiskit(qc)
        t_aer, psi_aer = time_aer(qc, args.repeat)
        rows.append(dict(circuit=name, engine="qiskit-aer", gates=len(qc.data), blocks=None,
                         seconds=t_aer, fidelity=1.0))
        for backend in args.backends.split(","):
            for fusion in (0, None):
                if (backend != "zgemm" and fusion == 0
                        and circ.num_gates > args.max_unfused_int8_gates):
                    print(f"{name}: skipping {backend} without fusion ({circ.num_gates} gates)")
                    continue
                t, res = time_ozsim(circ, backend, fusion, args.repeat)
                fid = abs(np.vdot(psi_aer, res.statevector)) ** 2
                md = res.metadata
                rows.append(dict(
                    circuit=name, engine=f"ozsim {backend}",
                    fusion="off" if fusion == 0 else f"<= {md['fusion']['max_fused_qubits']}q",
                    gates=md["fusion"]["gates_in"], blocks=md["fusion"]["blocks_out"],
                    seconds=t, fidelity=fid, splits=md["splits"],
                    auto_blocks=md.get("auto", {}).get("blocks")))
    print(f"\n{platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{args.qubits} qubits, median of {args.repeat}")
    print(f"{'circuit':10} {'engine':18} {'fusion':8} {'gates':>6} {'blocks':>6} {'seconds':>9} "
          f"{'vs Aer':>7} {'1-fidelity':>10}")
    aer_t = {r["circuit"]: r["seconds"] for r in rows if r["engine"] == "qiskit-aer"}
    for r in rows:
        print(f"{r['circuit']:10} {r['engine']:18} {r.get('fusion', 'aer'):8} {r['gates']:>6} "
              f"{r['blocks'] if r['blocks'] is not None else '':>6} {r['seconds']:>9.3f} "
              f"{r['seconds'] / aer_t[r['circuit']]:>6.1f}x {1 - r['fidelity']:>10.1e}")
    out = write_json(args.json or result_path("fusion_bench", "cpu"),
                     {"machine": platform.machine(), "cores": os.cpu_count(),
                      "date": time.strftime("%Y-%m-%d"), "command": "fusion_bench.py "
                      f"--qubits {args.qubits} --repeat {args.repeat} --backends {args.backends}",
                      "rows": rows})
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
