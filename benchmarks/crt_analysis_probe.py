"""B's analysis in scheme II: the one-pass kernel against the segmented passes.

Run from the repository root on a GPU with CuPy::

    PYTHONPATH=. python3 benchmarks/crt_analysis_probe.py --qubits 26 --d 6,7,8,9,10 \
        --circuit-d 8,9,10 --json benchmarks/results/crt_analysis_probe.json

For B of a state-vector gate (``2**d x 2**(N-d)``; B's columns adjacent in memory, and the
state read through a random permutation, a :class:`ozsim.gemm._cuda_crt.GatheredMatrix`) it
times, on the same data:

* ``segments``: the two segmented passes + ``crt_fin`` (``crt_scan``, ``crt_sumsq``), the
  analysis before ``crt_analyse_tile``;
* ``tile``: ``crt_analyse_tile`` (one read of B, values held in registers);
* ``residues``: ``residues_gpu`` for scale (15 moduli, 58 bits, the direct form's 2 planes).

``--circuit-d``: brickwork circuits (depth 4, fusion off, T = 0) on ``--qubits`` qubits with
zgemm and with int8-crt-auto with either analysis (``_TILE_K = 0``: segmented), each twice in
turn, x against zgemm in the same run. Prints a table, writes JSON; nothing is asserted (the
kernels are tested in ``tests/test_gpu_crt.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from functools import partial

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from gemm_bench import _cupy, gpu_name, timed  # noqa: E402


def _operands(n, d, rs):
    """B of a d-qubit gate on an n-qubit random state: plain (targets = the top qubits, a
    strided view) and gathered (a random layout and a random front)."""
    cp = _cupy()
    from ozsim.statevector import StateVector

    sv = StateVector(n, cp)
    sv._buf[:] = rs.standard_normal(1 << n) + 1j * rs.standard_normal(1 << n)
    plain = sv._buf.reshape(1 << d, -1)
    rng = np.random.default_rng(d)
    sv.layout = tuple(rng.permutation(n).tolist())
    front = tuple(rng.choice(n, d, replace=False).tolist())
    gathered, _ = sv._gathered(front, "int8-crt15")
    return sv, [("plain", plain), ("gathered", gathered)]


def run_kernels(n, ds, reps):
    cp = _cupy()
    from ozsim.gemm import _cuda_crt
    from ozsim.gemm.ozaki2 import fixed_plan

    plan = fixed_plan(15)
    rs = cp.random.RandomState(3)
    rows = []
    for d in ds:
        sv, ops = _operands(n, d, rs)
        for name, b in ops:
            k, cols = b.shape
            _, _, pb, kpad = _cuda_crt._layout(k)
            ra = _cuda_crt._pad4(cols)
            tile_k = _cuda_crt._TILE_K
            _cuda_crt._TILE_K = 0
            f_s, acc_s = _cuda_crt.analyse_launch(b.T)
            t_seg = timed(partial(_cuda_crt.analyse_launch, b.T), reps)
            _cuda_crt._TILE_K = tile_k
            f_t, acc_t = _cuda_crt.analyse_launch(b.T)
            t_tile = timed(partial(_cuda_crt.analyse_launch, b.T), reps)
            kw = dict(weighted=False, kpad=kpad, rows_alloc=ra, rounding=plan.rounding,
                      planes=pb)
            res = _cuda_crt.residues_gpu(b.T, f_t, plan.bits_b, 15, **kw)
            t_res = timed(partial(_cuda_crt.residues_gpu, b.T, f_t, plan.bits_b, 15, out=res,
                                  **kw), reps)
            equal = bool(cp.array_equal(f_s, f_t) and cp.array_equal(acc_s, acc_t))
            row = {"N": n, "d": d, "B": name, "segments_ms": 1e3 * t_seg,
                   "tile_ms": 1e3 * t_tile, "residues_ms": 1e3 * t_res, "equal": equal,
                   "GB/s": k * cols * 16 / t_tile / 1e9}
            rows.append(row)
            print(f"  N={n} d={d:2d} {name:>8}: segments {row['segments_ms']:6.3f}  tile "
                  f"{row['tile_ms']:6.3f} ({row['GB/s']:5.0f} GB/s)  residues "
                  f"{row['residues_ms']:6.3f} ms  equal={equal}", flush=True)
        del sv, ops
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def run_circuits(n, ds):
    cp = _cupy()
    from ozsim.gates import brickwork
    from ozsim.gemm import _cuda_crt
    from ozsim.simulator import Simulator

    variants = [("zgemm", "zgemm", 1024)] + [("crt, segmented", "int8-crt-auto", 0),
                                            ("crt, tile", "int8-crt-auto", 1024)] * 2
    rows = []
    tile_k_default = _cuda_crt._TILE_K
    for d in ds:
        circ = brickwork(n, 4, gate_qubits=d, seed=100 + d)
        base = None
        for label, backend, tile_k in variants:
            _cuda_crt._TILE_K = tile_k
            sim = Simulator(backend=backend, T=0.0, device="gpu", max_fused_qubits=0)
            sim.run(circ)  # warm-up: kernels compiled
            res = sim.run(circ)
            secs = res.metadata["wall_time_s"]
            base = secs if base is None else base
            row = {"N": n, "d": d, "variant": label, "seconds": secs, "speedup": base / secs,
                   "gates": res.metadata["num_gates"]}
            rows.append(row)
            print(f"  circuit N={n} d={d:2d} {label:>18}: {secs:8.4f} s x{row['speedup']:5.2f}",
                  flush=True)
            del res
            cp.get_default_memory_pool().free_all_blocks()
    _cuda_crt._TILE_K = tile_k_default
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--qubits", type=int, default=26)
    p.add_argument("--d", default="8,9,10")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--circuit-d", default="", help="brickwork gate sizes (none: no circuits)")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    ds = [int(v) for v in args.d.split(",")]
    kernels = run_kernels(args.qubits, ds, args.reps)
    cds = [int(v) for v in args.circuit_d.split(",") if v]
    circuits = run_circuits(args.qubits, cds) if cds else []
    print("\n| N | d | B | segments ms | tile ms | tile GB/s | residues ms | equal |")
    for r in kernels:
        print(f"| {r['N']} | {r['d']} | {r['B']} | {r['segments_ms']:.3f} | {r['tile_ms']:.3f} | "
              f"{r['GB/s']:.0f} | {r['residues_ms']:.3f} | {r['equal']} |")
    if circuits:
        print("\n| N | d | variant | s | x zgemm |")
        for r in circuits:
            print(f"| {r['N']} | {r['d']} | {r['variant']} | {r['seconds']:.4f} | "
                  f"{r['speedup']:.2f} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"gpu": gpu_name(), "date": time.strftime("%Y-%m-%d"),
                       "kernels": kernels, "circuits": circuits}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
