"""Brickwork random-unitary circuits end to end on the GPU through ozsim.Simulator (scheme I).

Run from the repository root on a machine with an NVIDIA GPU and CuPy::

    PYTHONPATH=. python3 benchmarks/circuit_bench.py

writes ``benchmarks/results/circuit_bench-<gpu>-<date>.json`` (``--json`` overrides). Scheme II
(``int8-crt-auto``) on the same kind of circuits: ``crt_bench.py --circuit-d ...``.

For each N (qubits) and d (gate size) one brickwork circuit of ``--depth`` layers of Haar-random
d-qubit gates (:func:`ozsim.gates.brickwork`; fusion off, so every gate is one GEMM as in the
ozIMMU paper) runs with native ZGEMM (cuBLAS), INT8-AUTO T=0 and INT8-AUTO T=1. Reported: seconds
per circuit (``Result.metadata["wall_time_s"]``: gate preparation, permutations and GEMMs, with a
device synchronisation at the end), time per gate, the splits INT8-AUTO chose, and the relative
error of Re<0|psi> against the ZGEMM run. Each (N, d, backend) is warmed up once on an
``N - 4``-qubit circuit (kernel compilation, cuBLAS heuristics) before the timed run. A per-stage
breakdown (CUDA events: analyse / split / INT8 GEMMs / accumulate, the rest is permutations and
host work) is taken for one large case.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

from _common import (cupy, device_tag, free_gpu_memory, gpu_helper, gpu_name, result_path,
                     write_json)

BACKENDS = (("zgemm", 1.0), ("int8-auto", 0.0), ("int8-auto", 1.0))


def brickwork(num_qubits, depth, d, seed):
    from ozsim.gates import brickwork as bw

    return bw(num_qubits, depth, gate_qubits=d, seed=seed)


def amplitude0(result) -> complex:
    amps = result._amplitudes  # stays on the device; only one amplitude comes to the host
    return complex(amps[0].get() if hasattr(amps, "get") else amps[0])


def run_one(circ, backend, T):
    from ozsim.simulator import Simulator

    sim = Simulator(backend=backend, T=T, device="gpu", max_fused_qubits=0)
    return sim.run(circ)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--qubits", default="24,25,26,27,28")
    p.add_argument("--d", default="2,4,6,8,10")
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--stages", default="28,6", help="N,d of the per-stage breakdown ('' skips)")
    p.add_argument("--json", default=None,
                   help="output (default benchmarks/results/circuit_bench-<gpu>-<date>.json)")
    args = p.parse_args(argv)
    cp = cupy()
    gpu = gpu_name()
    path = args.json or result_path("circuit_bench", device_tag(gpu))
    print(f"GPU {gpu}, CuPy {cp.__version__}; brickwork depth {args.depth}, fusion off")
    print(f"{'N':>3} {'d':>3} {'gates':>5} {'backend':>12} {'s/circuit':>10} {'ms/gate':>9} "
          f"{'splits':>22} {'rel err Re<0|psi>':>18}")
    rows = []
    meta = {"gpu": gpu, "cupy": cp.__version__, "date": time.strftime("%Y-%m-%d"),
            "python": platform.python_version(), "command": " ".join(sys.argv),
            "depth": args.depth, "fusion": "off (max_fused_qubits=0)"}
    stages = None

    def save():  # after every circuit, so that a run cut short keeps what it measured
        write_json(path, {"meta": meta, "rows": rows, "stages": stages})

    for N in map(int, args.qubits.split(",")):
        for d in map(int, args.d.split(",")):
            if d > N:
                continue
            circ = brickwork(N, args.depth, d, seed=1000 * N + d)
            warm = brickwork(max(d, N - 4), args.depth, d, seed=1000 * N + d)
            ref = None
            for backend, T in BACKENDS:
                run_one(warm, backend, T)
                res = run_one(circ, backend, T)
                md = res.metadata
                a0 = amplitude0(res)
                if backend == "zgemm":
                    ref = a0
                    err = 0.0
                else:
                    err = abs(a0.real - ref.real) / abs(ref.real) if ref.real else float("nan")
                name = backend if backend == "zgemm" else f"int8-auto T={T:g}"
                row = {"N": N, "d": d, "depth": args.depth, "gates": md["num_gates"],
                       "backend": name, "seconds": md["wall_time_s"],
                       "ms_per_gate": 1e3 * md["wall_time_s"] / max(1, md["num_gates"]),
                       "splits": {str(k): v for k, v in md["splits"].items()},
                       "fallbacks": md["fallbacks"], "rel_err_re_amp0": err,
                       "peak_memory_bytes": md["peak_memory_bytes"]}
                rows.append(row)
                spl = ",".join(f"{k}:{v}" for k, v in row["splits"].items())
                print(f"{N:>3} {d:>3} {row['gates']:>5} {name:>12} {row['seconds']:10.3f} "
                      f"{row['ms_per_gate']:9.2f} {spl:>22} {err:18.2e}", flush=True)
                save()
                del res
                free_gpu_memory()
    if args.stages:
        N, d = map(int, args.stages.split(","))
        circ = brickwork(N, args.depth, d, seed=1000 * N + d)
        run_one(brickwork(max(d, N - 4), args.depth, d, seed=1), "int8-auto", 1.0)
        with gpu_helper("profile_stages")() as st:
            res = run_one(circ, "int8-auto", 1.0)
        wall = res.metadata["wall_time_s"] * 1e3
        stages = {"N": N, "d": d, "backend": "int8-auto T=1", "wall_ms": wall,
                  "stages_ms": dict(st), "other_ms": wall - sum(st.values()),
                  "splits": {str(k): v for k, v in res.metadata["splits"].items()}}
        print(f"stages N={N} d={d} int8-auto T=1: wall {wall:.1f} ms; "
              + ", ".join(f"{k} {v:.1f} ms" for k, v in st.items())
              + f"; other (permutations, gate upload, host) {stages['other_ms']:.1f} ms")
    save()
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
