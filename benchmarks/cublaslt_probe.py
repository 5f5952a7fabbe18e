"""Probe: sustained speed of each INT8 GEMM candidate that ozsim's cuBLASLt tuner chooses from.

Run from the repository root on a GPU machine::

    PYTHONPATH=. python3 benchmarks/cublaslt_probe.py --n 16384 --k 16384 \
        --cols 16384,11396,4988 --json benchmarks/results/cublaslt_probe.json

For each shape ("TN", ``C (cols x n) = B^T A``, INT8 -> INT32, random data, K = k) it times
``cublasGemmEx`` in K <= 8192 pieces and every cuBLASLt heuristic candidate twice: the way
:mod:`ozsim.gemm._cublaslt` times them when it tunes (one warm-up, mean of 2 calls) and sustained
(mean of ``--reps`` back-to-back calls, the way scheme II runs 3 N of them). It prints POP/s
(``2 cols n k / t``) and which candidate each method would choose.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import cupy as cp

from ozsim.gemm import _cublaslt, _cuda


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=16384, help="rows of A (the gate) = columns of C^T")
    p.add_argument("--k", type=int, default=16384)
    p.add_argument("--cols", default="16384,11396,4988", help="column-block widths of B")
    p.add_argument("--reps", type=int, default=16)
    p.add_argument("--candidates", type=int, default=_cublaslt.CANDIDATES,
                   help="cuBLASLt heuristic candidates to ask for")
    p.add_argument("--json", default="benchmarks/results/cublaslt_probe.json")
    args = p.parse_args(argv)
    _cublaslt.CANDIDATES = args.candidates
    lib = _cublaslt._lib()
    if lib is None:
        print("cuBLASLt not available")
        return 1
    handle = cp.cuda.device.get_cublas_handle()
    n, k = args.n, args.k
    a = cp.random.randint(-128, 128, size=(n, k), dtype=cp.int8)
    rows = []
    for cols in [int(x) for x in args.cols.split(",") if x]:
        b = cp.random.randint(-128, 128, size=(cols, k), dtype=cp.int8)
        c = cp.empty((n, cols), dtype=cp.int32)
        ops = 2.0 * cols * n * k

        def pieces(_beta=False, b=b, c=c, cols=cols):
            for off in range(0, k, _cuda.MAX_GEMM_K):
                _cuda._gemm_tn(handle, cols, n, min(_cuda.MAX_GEMM_K, k - off), b.data.ptr + off,
                               k, a.data.ptr + off, k, c.data.ptr, cols, beta=off > 0)

        plan = _cublaslt._Plan(lib, cols, n, k, k, k, cols)
        cands = {"gemmex": pieces}
        for i in range(len(plan.algos)):
            cands[f"lt{i}"] = (lambda i=i, b=b, c=c, plan=plan: _cublaslt._check(
                plan.run(lib, i, b.data.ptr, a.data.ptr, c.data.ptr, False), "cublasLtMatmul"))
        for name, fn in cands.items():
            tune = _cublaslt._time(fn, 2)
            sus = _cublaslt._time(fn, args.reps)
            rows.append({"cols": cols, "n": n, "k": k, "candidate": name, "tune_ms": tune,
                         "sustained_ms": sus, "tune_pops": ops / tune / 1e12,
                         "sustained_pops": ops / sus / 1e12})
            print(f"cols {cols:6d} {name:7s} tune {tune:7.3f} ms ({ops / tune / 1e12:5.2f} POP/s)"
                  f"  sustained {sus:7.3f} ms ({ops / sus / 1e12:5.2f} POP/s)", flush=True)
        mine = [r for r in rows if r["cols"] == cols]
        bt = min(mine, key=lambda r: r["tune_ms"])["candidate"]
        bs = min(mine, key=lambda r: r["sustained_ms"])["candidate"]
        print(f"cols {cols}: tuner picks {bt}, sustained best {bs}", flush=True)
        del b, c
    props = cp.cuda.runtime.getDeviceProperties(0)
    gpu = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump({"meta": {"gpu": gpu, "date": time.strftime("%Y-%m-%d"),
                            "command": " ".join(sys.argv)}, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
