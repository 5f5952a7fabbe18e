"""ozIMMU Fig. 7 at CPU sizes: ``A`` times its approximate inverse, against double-double.

``A`` (n x n complex) has a prescribed 2-norm condition number ``kappa``: ``A = U diag(sigma)
V^H`` with Haar-random ``U, V`` and ``sigma`` log-spaced from 1 to ``1/kappa``. ``X =
numpy.linalg.inv(A)`` in FP64, and ``C = A @ X`` by each backend. ``C`` is close to ``I``; what a
user wants from it is the residual ``C - I`` (iterative refinement, inverse checks), whose entries
are ~``kappa * 1e-16`` while the products summed are O(1): a product with heavy cancellation, the
opposite of Fig. 6's inputs. Reported per backend:

``residual error``
    ``||C - R||_F / ||R - I||_F``: the relative error of the computed residual, ``R`` the
    double-double product (``ozsim.reference.dd_zgemm``).
``mean rel error``
    the mean over entries of ``|C_ij - R_ij| / |R_ij|`` (Fig. 6's metric).

Native ZGEMM rounds each of its ``k`` O(1) partial sums, so the residual comes out with a
relative error of 0.1-0.6. Ozaki scheme I computes each group of slice products exactly, but
adds the ~s groups in FP64 at the scale of the O(1) terms: once ``s`` keeps every input bit
(s >= 11 here), its residual error stops improving at ~eps * |A||X| / |AX - I| ~ 1e-3, still
100-300x below ZGEMM's. INT8-AUTO looks only at the inputs' exponents, not at the cancellation:
T = 0 keeps every input bit (s = 11) and gets the Ozaki result; T = 1 picks s = 8 and lands at
ZGEMM's error.

Usage:
    python benchmarks/accuracy/fig7_inverse.py [--n 256] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.stats import unitary_group

from _common import e, machine, md_table, rel_errors, write_json
from ozsim.gemm import zgemm
from ozsim.reference import dd_zgemm

KAPPAS = (1e1, 1e3, 1e5, 1e7, 1e9, 1e11, 1e13)
BACKENDS = (("zgemm", None), ("int8x9", None), ("int8x11", None), ("int8x13", None),
            ("int8x15", None), ("int8x18", None), ("int8-auto", 0.0), ("int8-auto", 1.0))


def label(backend, T):
    return backend if T is None else f"{backend}:T={T:g}"


def conditioned_matrix(rng, n, kappa):
    u = unitary_group.rvs(n, random_state=rng)
    v = unitary_group.rvs(n, random_state=rng)
    sigma = np.logspace(0, -np.log10(kappa), n)
    return (u * sigma) @ v.conj().T


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=256)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    n = args.n
    t_start = time.perf_counter()
    results = []
    for kappa in KAPPAS:
        rng = np.random.default_rng([args.seed, int(np.log10(kappa))])
        a = conditioned_matrix(rng, n, kappa)
        x = np.linalg.inv(a)
        ref = dd_zgemm(a, x)
        # ||R - I||_F with R = hi + lo: hi - I is exact near the diagonal (Sterbenz)
        resid_ref = float(np.linalg.norm((ref.hi - np.eye(n)) + ref.lo))
        for backend, T in BACKENDS:
            t0 = time.perf_counter()
            c, info = zgemm(a, x, backend=backend, T=1.0 if T is None else T, return_info=True)
            dt = time.perf_counter() - t0
            diff = (c - ref.hi) - ref.lo
            results.append({
                "kappa": kappa, "backend": backend, "T": T,
                "residual_rel_error": float(np.linalg.norm(diff)) / resid_ref,
                "mean_rel_error": float(rel_errors(c, ref).mean()),
                "residual_norm": resid_ref,
                "num_splits": info.num_splits, "fallback": info.fallback, "time_s": dt,
            })
        print(f"kappa={kappa:.0e}: ||AX - I||_F = {resid_ref:.2e} "
              f"({time.perf_counter() - t_start:.0f} s)", flush=True)

    doc = {"benchmark": "fig7_inverse", "n": n, "seed": args.seed, "kappas": KAPPAS,
           "machine": machine(), "results": results,
           "total_time_s": time.perf_counter() - t_start}
    path = write_json("fig7_inverse", doc)

    def table(metric, title):
        print(f"\n{title}, n = {n} (INT8-AUTO: splits chosen in parentheses)\n")
        headers = ["kappa", "||AX-I||_F"] + [label(b, T) for b, T in BACKENDS]
        rows = []
        for kappa in KAPPAS:
            rs = [r for r in results if r["kappa"] == kappa]
            row = [f"{kappa:.0e}", e(rs[0]["residual_norm"])]
            for backend, T in BACKENDS:
                r = next(x for x in rs if x["backend"] == backend and x["T"] == T)
                cell = e(r[metric])
                if backend == "int8-auto":
                    cell += " (fb)" if r["fallback"] else f" ({r['num_splits']})"
                row.append(cell)
            rows.append(row)
        print(md_table(headers, rows))

    table("residual_rel_error", "Relative error of the residual ||C - R||_F / ||R - I||_F")
    table("mean_rel_error", "Mean relative error |C_ij - R_ij| / |R_ij|")
    print(f"\nwrote {path} ({doc['total_time_s']:.0f} s)")


if __name__ == "__main__":
    main()
