"""Run under ``mpiexec -n P`` by tests/test_distributed.py: each case once spread over the ranks
and once in one process (on rank 0, with the distributed run's fusion limit, so with the same
blocks), and rank 0 prints one JSON line a case comparing the two.

Usage: ``mpiexec -n P python tests/mpi_worker.py CASES_JSON`` where CASES_JSON is a list of
``{"circuit": "brickwork:N:depth:d:seed" or a .qasm path, "backend": name, "T": bits,
"fusion": max_fused_qubits or null, "device": "cpu"}``.
"""

from __future__ import annotations

import json
import sys

import numpy as np
from mpi4py import MPI

from ozsim import Simulator
from ozsim.gates.builders import brickwork


def _circuit(spec: str):
    if spec.startswith("brickwork:"):
        _, n, depth, d, seed = spec.split(":")
        return brickwork(int(n), int(depth), gate_qubits=int(d), seed=int(seed))
    from ozsim.interop.qiskit import load_qasm

    return load_qasm(spec)


def main() -> int:
    comm = MPI.COMM_WORLD
    for case in json.loads(sys.argv[1]):
        circ = _circuit(case["circuit"])
        kw = dict(backend=case["backend"], T=case.get("T", 1.0), device=case.get("device", "cpu"),
                  max_fused_qubits=case.get("fusion"), seed=5)
        res = Simulator(comm=comm, **kw).run(circ, shots=case.get("shots", 0))
        n = circ.num_qubits
        labels = ["Z" * n, "X" * n, ("XY" * n)[:n], ("IZ" * n)[:n]]
        evs = [res.expectation(lab) for lab in labels]  # collective: every rank
        if comm.Get_rank() != 0:
            continue
        # the same blocks in one process (a distributed run caps blocks at the local qubits)
        kw["max_fused_qubits"] = res.metadata["fusion"]["max_fused_qubits"]
        ref = Simulator(**kw).run(circ, shots=case.get("shots", 0))
        a, b = res.statevector, ref.statevector
        same_dist = True
        if res.counts:  # sampled shard by shard against sampled from the whole state
            from ozsim.testing import assert_same_distribution

            try:
                assert_same_distribution(res.counts, ref.counts)
            except AssertionError:
                same_dist = False
        d = res.metadata["distributed"]
        print(json.dumps({
            "case": case, "bitwise": bool(np.array_equal(a, b)),
            "max_abs_diff": float(np.abs(a - b).max()),
            "norm": float(np.linalg.norm(a)), "ranks": d["ranks"], "swaps": d["swaps"],
            "splits": str(res.metadata["splits"]), "ref_splits": str(ref.metadata["splits"]),
            "counts": sum((res.counts or {}).values()), "same_distribution": same_dist,
            "ev_diff": max(abs(e - ref.expectation(lab)) for e, lab in zip(evs, labels)),
        }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
