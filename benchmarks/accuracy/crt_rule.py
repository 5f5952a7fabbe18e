"""Validation of ``int8-crt-auto``'s rule: at T = 0 is scheme II no worse than native ZGEMM?

The rule (:func:`ozsim.gemm.ozaki2.choose_plan`, derivation in the docstring of
:mod:`ozsim.gemm.ozaki2.scheme`) takes the fewest moduli whose a-priori bound on the norm-wise
error is at most FP64's. For each case this script takes the product's double-double reference
(:func:`ozsim.reference.dd_zgemm`) and prints the moduli picked at T = 0 and T = 1, then the
norm-wise relative error ``||C_hat - C||_F / ||C||_F`` of ``int8-crt{N}`` at the picked N, at one
modulus fewer (the rule is tight where that is above native) and of native ZGEMM (NumPy's BLAS),
and the largest element-wise relative error of the picked N and of native.

Cases: Ozaki's inputs ``(rand - 0.5) exp(phi randn)`` for phi = 0.1, 0.5, 1, 2, 4 and k from 96
to 65536; Haar gates on Gaussian states (the simulator's GEMMs); and adversarial inputs:

- ``spread``: each scalar of A and B scaled by ``2**-U(0, 60)`` (rows with a wide exponent
  spread);
- ``cancel``: ``A = [X, X]``, ``B = [Y; -Y + 2**-30 Z]``, so ``C = 2**-30 X Z`` is ``2**30``
  below ``|A| |B|`` (heavy cancellation);
- ``huge``: one element per row of A ``2**40`` above the rest;
- ``huge-b``: one element per column of B ``2**40`` above the rest.

Run from the repository root (CPU, a few minutes on 2 cores)::

    python benchmarks/accuracy/crt_rule.py

writes ``benchmarks/accuracy/results/crt_rule-cpu-<date>.json`` (``--json`` overrides).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine, write_json  # noqa: E402

from ozsim.gates.haar import haar_unitary  # noqa: E402
from ozsim.gemm import zgemm  # noqa: E402
from ozsim.reference import dd_zgemm  # noqa: E402
from ozsim.testing import max_relative_error, ozaki_matrix  # noqa: E402


def normwise(c, ref) -> float:
    return float(np.linalg.norm(c - ref) / np.linalg.norm(ref))


def cases(rng, ks, phis, quick: bool):
    """``(name, k, a, b)`` for every case."""
    for k in ks:
        m = 16 if k > 16384 else 32
        for phi in phis:
            yield f"ozaki phi={phi:g}", k, ozaki_matrix(rng, m, k, phi), ozaki_matrix(rng, k, m, phi)
    for d in (2, 6, 10):
        g = haar_unitary(2**d, rng)
        b = (rng.standard_normal((2**d, 64)) + 1j * rng.standard_normal((2**d, 64))) / 2 ** (d / 2)
        yield f"haar gate d={d}", 2**d, g, b
    for k in ((1024,) if quick else (1024, 16384)):
        a, b = ozaki_matrix(rng, 32, k, 0.5), ozaki_matrix(rng, k, 32, 0.5)
        sa = np.exp2(-rng.uniform(0, 60, a.shape))
        sb = np.exp2(-rng.uniform(0, 60, b.shape))
        yield "spread", k, a * sa, b * sb
        x, y, z = ozaki_matrix(rng, 32, k // 2, 0.5), ozaki_matrix(rng, k // 2, 32, 0.5), \
            ozaki_matrix(rng, k // 2, 32, 0.5)
        yield "cancel", k, np.hstack([x, x]), np.vstack([y, -y + 2.0**-30 * z])
        a = ozaki_matrix(rng, 32, k, 0.5)
        a[np.arange(32), rng.integers(0, k, 32)] *= 2.0**40
        yield "huge", k, a, ozaki_matrix(rng, k, 32, 0.5)
        b = ozaki_matrix(rng, k, 32, 0.5)
        b[rng.integers(0, k, 32), np.arange(32)] *= 2.0**40
        yield "huge-b", k, ozaki_matrix(rng, 32, k, 0.5), b


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", default="96,1024,8192,65536")
    p.add_argument("--phi", default="0.1,0.5,1,2,4")
    p.add_argument("--quick", action="store_true", help="fewer adversarial sizes")
    p.add_argument("--json", default=None,
                   help="output (default results/crt_rule-cpu-<date>.json)")
    args = p.parse_args(argv)
    rng = np.random.default_rng(2026_11_26)
    ks = [int(x) for x in args.k.split(",")]
    phis = [float(x) for x in args.phi.split(",")]
    rows = []
    print(f"{'case':>16} {'k':>6} {'N T=0':>5} {'T=1':>3} | norm-wise: {'N':>8} {'N-1':>8} "
          f"{'native':>8} | element-wise: {'N':>8} {'native':>8}")
    for name, k, a, b in cases(rng, ks, phis, args.quick):
        ref = dd_zgemm(a, b).hi
        nat = a @ b
        c, info = zgemm(a, b, backend="int8-crt-auto", T=0, return_info=True)
        _, info1 = zgemm(a, b, backend="int8-crt-auto", T=1, return_info=True)
        n = None if info.fallback else info.num_moduli
        row = {"case": name, "k": k, "moduli_T0": n,
               "moduli_T1": None if info1.fallback else info1.num_moduli,
               "bound_bits": info.bound_bits, "native": normwise(nat, ref),
               "native_elementwise": max_relative_error(nat, ref),
               "picked": normwise(c, ref), "picked_elementwise": max_relative_error(c, ref)}
        row["fewer"] = (normwise(zgemm(a, b, backend=f"int8-crt{n - 1}"), ref)
                        if n is not None and n > 2 else None)
        rows.append(row)
        fewer = "-" if row["fewer"] is None else f"{row['fewer']:8.1e}"
        print(f"{name:>16} {k:6d} {str(n):>5} {str(row['moduli_T1']):>3} | "
              f"{row['picked']:19.1e} {fewer:>8} {row['native']:8.1e} | "
              f"{row['picked_elementwise']:23.1e} {row['native_elementwise']:8.1e}", flush=True)
    worst = max(r["picked"] / r["native"] for r in rows)
    tight = [r for r in rows if r["fewer"] is not None]
    above = sum(r["fewer"] > r["native"] for r in tight)
    worst_el = max(r["picked_elementwise"] / r["native_elementwise"] for r in rows)
    summary = {"worst_normwise_ratio": worst, "fewer_above_native": above,
               "cases_with_fewer": len(tight), "worst_elementwise_ratio": worst_el}
    print(f"\nT = 0: worst norm-wise error / native {worst:.2f}; one modulus fewer above native "
          f"in {above} of {len(tight)} cases; worst element-wise ratio {worst_el:.2f}")
    path = write_json("crt_rule", {"machine": machine(), "rows": rows, "summary": summary},
                      args.json)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
