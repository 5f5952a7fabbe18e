"""Calibration of scheme II's loss rule: is ``int8-crt-auto`` at T = 0 no worse than native?

For inner dimensions ``k`` in {96, 1024, 4096, 16384} and ``phi`` in {0.1, 0.5, 1, 2, 4}, two
seeds each, draws Ozaki's inputs ``A`` (40 x k), ``B`` (k x 40) (``ozsim.testing.ozaki_matrix``),
computes the double-double product (``ozsim.reference.dd_zgemm``) and prints, per case, the max
relative error of NumPy's ZGEMM and of ``int8-crt-auto`` at T = 0 and T = 1 (with the moduli
picked). The allowance ``LOSS_ALLOWANCE_BITS`` in ``ozsim.gemm.ozaki2`` was chosen from this
table (5 bits left one case 10% above native, 4 bits none; ``benchmarks/RESULTS.md`` section 3).

Run from the repository root (CPU, about 45 s on 2 cores)::

    python benchmarks/accuracy/crt_T0_calibration.py [--json benchmarks/accuracy/results/crt_T0.json]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from ozsim.gemm import zgemm
from ozsim.reference import dd_zgemm
from ozsim.testing import max_relative_error, ozaki_matrix


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", default="96,1024,4096,16384")
    p.add_argument("--phi", default="0.1,0.5,1,2,4")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    rng = np.random.default_rng(11)
    rows = []
    print(f"{'k':>6} {'phi':>4} {'seed':>4} {'native':>8} {'T=0 N':>6} {'T=0 err':>8} "
          f"{'T=1 N':>6} {'T=1 err':>8}  T=0 <= native")
    for k in [int(x) for x in args.k.split(",")]:
        for phi in [float(x) for x in args.phi.split(",")]:
            for seed in range(2):
                a, b = ozaki_matrix(rng, 40, k, phi), ozaki_matrix(rng, k, 40, phi)
                ref = dd_zgemm(a, b).hi
                nat = max_relative_error(a @ b, ref)
                c0, i0 = zgemm(a, b, backend="int8-crt-auto", T=0, return_info=True)
                c1, i1 = zgemm(a, b, backend="int8-crt-auto", T=1, return_info=True)
                r = {"k": k, "phi": phi, "seed": seed, "native": nat,
                     "T0_moduli": i0.num_moduli, "T0_kept_bits": i0.kept_bits,
                     "T0_err": max_relative_error(c0, ref), "T1_moduli": i1.num_moduli,
                     "T1_err": max_relative_error(c1, ref)}
                rows.append(r)
                print(f"{k:6d} {phi:4g} {seed:4d} {nat:8.1e} {r['T0_moduli']!s:>6} "
                      f"{r['T0_err']:8.1e} {r['T1_moduli']!s:>6} {r['T1_err']:8.1e}  "
                      f"{r['T0_err'] <= nat}", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
