"""ozIMMU Fig. 6 at CPU sizes: mean relative error of emulated ZGEMM against double-double.

For each exponent spread ``phi`` in {0.1, 1, 2, 4} and inner dimension ``k`` = 16 .. 4096, draws
complex ``A`` (m x k) and ``B`` (k x n) with real and imaginary parts ``(rand - 0.5) *
exp(phi * randn)`` (``ozsim.testing.ozaki_matrix``, the paper's inputs), computes ``C = A @ B``
with native ZGEMM, Ozaki scheme I with 9, 11, 13 slices and INT8-AUTO (T = 0 and T = 1 bits), and
reports the mean over the m*n entries of ``|C_ij - R_ij| / |R_ij|``, ``R`` the double-double
product (``ozsim.reference.dd_zgemm``). It also sweeps the number of slices s = 3..18 at one ``k``
for the error-versus-splits plot (``plot_error_vs_splits.py``).

The paper's Fig. 6 is for real DGEMM on a GPU; this is its complex counterpart on the CPU (ozsim's
CPU INT8 path computes the same exact integer slice products through FP64 BLAS, so the errors are
those of the GPU path).

Usage:
    python benchmarks/accuracy/fig6_gemm.py [--m 128] [--n 128] [--seed 0] [--sweep-k 1024]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from _common import e, machine, md_table, rel_errors, write_json
from ozsim.gemm import zgemm
from ozsim.reference import dd_zgemm
from ozsim.testing import ozaki_matrix

PHIS = (0.1, 1.0, 2.0, 4.0)
KS = (16, 64, 256, 1024, 4096)
BACKENDS = (("zgemm", None), ("int8x9", None), ("int8x11", None), ("int8x13", None),
            ("int8-auto", 0.0), ("int8-auto", 1.0))


def label(backend, T):
    return backend if T is None else f"{backend}:T={T:g}"


def run_one(a, b, ref, backend, T):
    t0 = time.perf_counter()
    c, info = zgemm(a, b, backend=backend, T=1.0 if T is None else T, return_info=True)
    dt = time.perf_counter() - t0
    err = rel_errors(c, ref)
    return {
        "backend": backend,
        "T": T,
        "mean_rel_error": float(err.mean()),
        "max_rel_error": float(err.max()),
        "num_splits": info.num_splits,
        "fallback": info.fallback,
        "time_s": dt,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--m", type=int, default=128)
    p.add_argument("--n", type=int, default=128)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sweep-k", type=int, default=1024)
    args = p.parse_args(argv)
    t_start = time.perf_counter()
    results, sweep = [], []
    for phi in PHIS:
        for k in KS:
            rng = np.random.default_rng([args.seed, k, int(phi * 10)])
            a, b = ozaki_matrix(rng, args.m, k, phi), ozaki_matrix(rng, k, args.n, phi)
            t0 = time.perf_counter()
            ref = dd_zgemm(a, b)
            t_ref = time.perf_counter() - t0
            for backend, T in BACKENDS:
                r = run_one(a, b, ref, backend, T)
                results.append({"phi": phi, "k": k, "reference_time_s": t_ref, **r})
            if k == args.sweep_k:
                for s in range(3, 19):
                    r = run_one(a, b, ref, f"int8x{s}", None)
                    sweep.append({"phi": phi, "k": k, "num_splits": s,
                                  "mean_rel_error": r["mean_rel_error"]})
            print(f"phi={phi:g} k={k}: done ({time.perf_counter() - t_start:.0f} s)", flush=True)

    doc = {"benchmark": "fig6_gemm", "m": args.m, "n": args.n, "seed": args.seed,
           "phis": PHIS, "ks": KS, "machine": machine(), "results": results,
           "sweep_k": args.sweep_k, "sweep": sweep,
           "total_time_s": time.perf_counter() - t_start}
    path = write_json("fig6_gemm", doc)

    print(f"\nMean relative error vs double-double, m = {args.m}, n = {args.n} "
          "(INT8-AUTO: splits chosen in parentheses, 'fb' = fell back to native ZGEMM)\n")
    headers = ["phi", "k"] + [label(b, T) for b, T in BACKENDS]
    rows = []
    for phi in PHIS:
        for k in KS:
            row = [f"{phi:g}", str(k)]
            for backend, T in BACKENDS:
                r = next(x for x in results
                         if x["phi"] == phi and x["k"] == k and x["backend"] == backend
                         and x["T"] == T)
                cell = e(r["mean_rel_error"])
                if backend == "int8-auto":
                    cell += " (fb)" if r["fallback"] else f" ({r['num_splits']})"
                row.append(cell)
            rows.append(row)
    print(md_table(headers, rows))
    print(f"\nwrote {path} ({doc['total_time_s']:.0f} s)")


if __name__ == "__main__":
    main()
