"""Calibration of scheme II's loss rule: is ``int8-crt-auto`` at T = 0 no worse than native?

For inner dimensions ``k`` and exponent spreads ``phi`` (``--seeds`` draws each), takes Ozaki's
inputs ``A`` (40 x k), ``B`` (k x 40) (``ozsim.testing.ozaki_matrix``), the double-double product
(``ozsim.reference.dd_zgemm``) and records, per case, the max relative error of NumPy's ZGEMM
(native) and of ``int8-crt{N}`` for every N in 14..20, and the bits each operand needs at T = 0
with no allowance (``need0`` = mean over nonzero scalars of ``d + 54``; module docstring of
``ozsim.gemm.ozaki2``). With an allowance of ``a`` bits, T = 0 keeps ``ceil(need0 - a)`` bits per
operand, which fixes N; the summary gives, per candidate ``a``, the worst ratio
``error(N) / native`` over all cases (and over phi <= 1) and the cases above 1.
``LOSS_ALLOWANCE_BITS`` in ``ozsim.gemm.ozaki2.moduli`` is chosen from it
(``benchmarks/RESULTS.md``, "Accuracy against double-double").

Run from the repository root (CPU, about 3 minutes on 2 cores)::

    python benchmarks/accuracy/crt_T0_calibration.py

writes ``benchmarks/accuracy/results/crt_T0_calibration-cpu-<date>.json`` (``--json`` overrides).
"""

from __future__ import annotations

import argparse
import math
import platform

import numpy as np

from _common import write_json
from ozsim.gemm import zgemm
from ozsim.gemm.ozaki2 import analyse_rows, kept_bits, loss_allowance, mean_loss
from ozsim.reference import dd_zgemm
from ozsim.testing import max_relative_error, ozaki_matrix

FIXED = range(14, 21)


def need0(mom, k: int) -> float:
    """Bits an operand of dense rows of ``k`` complex entries needs at T = 0, no allowance."""
    return mean_loss(mom, 0) + int(loss_allowance(np.array([2 * k]))[0])


def moduli_for(need_a: float, need_b: float, allowance: int) -> int | None:
    bits = math.ceil(need_a - allowance - 1e-9) + math.ceil(need_b - allowance - 1e-9)
    return next((n for n in range(2, 21) if kept_bits(n) >= bits), None)


def summary(rows, allowances=range(0, 6)):
    out = []
    for a in allowances:
        worst = worst_lo = 0.0
        above, hist = [], {}
        for r in rows:
            a_eff = min(a, int(math.floor(math.log2(2 * r["k"]) / 2)))
            n = moduli_for(r["need0"][0], r["need0"][1], a_eff)
            hist[n] = hist.get(n, 0) + 1
            ratio = r["errors"][str(n)] / r["native"] if n is not None and n >= 14 else math.inf
            worst = max(worst, ratio)
            if r["phi"] <= 1:
                worst_lo = max(worst_lo, ratio)
            if ratio > 1:
                above.append([r["k"], r["phi"], r["seed"], n, round(ratio, 2)])
        out.append({"allowance": a, "worst_ratio": worst, "worst_ratio_phi_le_1": worst_lo,
                    "above_native": above, "moduli": {str(k): v for k, v in sorted(
                        hist.items(), key=lambda kv: -1 if kv[0] is None else kv[0])}})
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--k", default="96,256,1024,4096,8192,16384")
    p.add_argument("--phi", default="0.1,0.5,1,2,4")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--json", default=None,
                   help="output (default results/crt_T0_calibration-cpu-<date>.json)")
    args = p.parse_args(argv)
    rng = np.random.default_rng(2026)
    rows = []
    print(f"{'k':>6} {'phi':>4} {'seed':>4} {'native':>8} {'need0 A/B':>12}  error(N) / native "
          f"for N = {FIXED.start}..{FIXED.stop - 1}")
    for k in [int(x) for x in args.k.split(",")]:
        for phi in [float(x) for x in args.phi.split(",")]:
            for seed in range(args.seeds):
                a, b = ozaki_matrix(rng, 40, k, phi), ozaki_matrix(rng, k, 40, phi)
                ref = dd_zgemm(a, b).hi
                nat = max_relative_error(a @ b, ref)
                need = [need0(analyse_rows(a)[1], k), need0(analyse_rows(b.T)[1], k)]
                errs = {str(n): max_relative_error(zgemm(a, b, backend=f"int8-crt{n}"), ref)
                        for n in FIXED}
                rows.append({"k": k, "phi": phi, "seed": seed, "native": nat, "need0": need,
                             "errors": errs})
                print(f"{k:6d} {phi:4g} {seed:4d} {nat:8.1e} {need[0]:6.2f}/{need[1]:5.2f}  "
                      + " ".join(f"{errs[str(n)] / nat:7.2g}" for n in FIXED), flush=True)
    summ = summary(rows)
    print("\nallowance  worst ratio (all / phi<=1)  cases above native  moduli picked at T=0")
    for s in summ:
        print(f"{s['allowance']:9d}  {s['worst_ratio']:11.2f} / {s['worst_ratio_phi_le_1']:5.2f}"
              f"  {len(s['above_native']):18d}  {s['moduli']}")
    path = write_json("crt_T0_calibration",
                      {"machine": platform.processor() or platform.machine(),
                       "numpy": np.__version__, "blas": _blas(), "rows": rows,
                       "summary": summ}, args.json)
    print(f"wrote {path}")
    return 0


def _blas() -> str:
    try:
        cfg = np.show_config(mode="dicts")
        return str(cfg["Build Dependencies"]["blas"].get("openblas configuration", ""))
    except Exception:  # noqa: BLE001 - informative only
        return ""


if __name__ == "__main__":
    raise SystemExit(main())
