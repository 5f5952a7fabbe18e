"""EstimatorV2 parameter sweep: ozsim's primitive against Qiskit Aer's, on the CPU.

The workload: an EfficientSU2 ansatz (N = 20 qubits, 4 layers), 100 parameter sets and 10
random Pauli observables broadcast against them (one PUB of shape (10, 100)), exact expectation
values (precision 0). ozsim runs the circuit once per parameter set and evaluates the 10
observables on each final state; the table gives the wall time of the whole sweep, the time per
parameter set, and the largest difference from Aer's values.

The emulated backends cost about 20x native ZGEMM on 2 CPU cores, so they run on the first
``--int8-sets`` parameter sets only (their time per set is comparable; the sweep total is not).

Usage:
    python benchmarks/estimator_bench.py                                  # the full workload
    python benchmarks/estimator_bench.py --qubits 12 --sets 10            # smaller
    python benchmarks/estimator_bench.py --backends zgemm,int8-auto --int8-sets 3

Writes ``benchmarks/results/estimator_bench-cpu-<date>.json`` (``--json`` overrides).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import result_path, write_json  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--qubits", type=int, default=20)
    p.add_argument("--reps", type=int, default=4, help="EfficientSU2 layers")
    p.add_argument("--sets", type=int, default=100, help="parameter sets")
    p.add_argument("--observables", type=int, default=10)
    p.add_argument("--backends", default="zgemm", help="ozsim backends, comma separated")
    p.add_argument("--int8-sets", type=int, default=3,
                   help="parameter sets for the emulated (non-zgemm) backends")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    from qiskit.circuit.library import efficient_su2
    from qiskit.quantum_info import SparsePauliOp, random_pauli_list
    from qiskit_aer.primitives import EstimatorV2 as AerEstimator

    from ozsim.primitives import EstimatorV2

    rng = np.random.default_rng(args.seed)
    qc = efficient_su2(args.qubits, reps=args.reps)
    values = rng.uniform(-np.pi, np.pi, (args.sets, qc.num_parameters))
    labels = random_pauli_list(args.qubits, args.observables, seed=args.seed,
                               phase=False).to_labels()
    observables = [[SparsePauliOp(label)] for label in labels]  # shape (k, 1) x (sets,)

    rows = []
    t0 = time.perf_counter()
    aer = AerEstimator(options={"backend_options": {"method": "statevector"}})
    ref = aer.run([(qc, observables, values)]).result()[0].data.evs
    aer_time = time.perf_counter() - t0
    rows.append({"engine": "qiskit-aer EstimatorV2", "backend": "statevector",
                 "sets": args.sets, "time_s": aer_time, "per_set_s": aer_time / args.sets,
                 "max_abs_diff_vs_aer": 0.0})
    print(f"aer: {aer_time:.2f} s", flush=True)

    for backend in [b for b in args.backends.split(",") if b]:
        sets = args.sets if backend == "zgemm" else min(args.sets, args.int8_sets)
        est = EstimatorV2(backend=backend, device="cpu")
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a native-ZGEMM fallback, counted
            res = est.run([(qc, observables, values[:sets])]).result()[0]
        took = time.perf_counter() - t0
        sim = res.metadata["simulator"]
        rows.append({"engine": "ozsim EstimatorV2", "backend": backend, "sets": sets,
                     "time_s": took, "per_set_s": took / sets,
                     "simulate_s": sim["wall_time_s"],
                     "max_abs_diff_vs_aer": float(np.abs(res.data.evs - ref[:, :sets]).max()),
                     "splits": {str(k): v for k, v in sim["splits"].items()},
                     "fallbacks": sim["fallbacks"]})
        print(f"{backend}: {took:.2f} s", flush=True)

    print(f"\nEfficientSU2 N={args.qubits} reps={args.reps} ({qc.num_parameters} parameters), "
          f"{args.observables} observables, CPU ({os.cpu_count()} cores)")
    print(f"{'engine':24} {'backend':12} {'sets':>5} {'total s':>9} {'s/set':>8} "
          f"{'max |dEV|':>10}")
    for r in rows:
        print(f"{r['engine']:24} {r['backend']:12} {r['sets']:5d} {r['time_s']:9.2f} "
              f"{r['per_set_s']:8.3f} {r['max_abs_diff_vs_aer']:10.2e}")
    doc = {"benchmark": "estimator_bench", "device": "cpu", "cpu_count": os.cpu_count(),
           "machine": platform.processor() or platform.machine(),
           "qubits": args.qubits, "reps": args.reps, "parameters": qc.num_parameters,
           "sets": args.sets, "observables": args.observables, "labels": labels, "rows": rows}
    path = write_json(args.json or result_path("estimator_bench", "cpu"), doc)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
