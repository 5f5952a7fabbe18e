"""Why a truncating split made INT8-AUTO at T = 1 land 3-5x above native ZGEMM.

The ozIMMU paper's split cuts each scaled value by truncation, so every slice has the sign of the
value; the scheme then drops the slice products
``A_i B_j`` with ``i + j > s + 1``. Those dropped terms are therefore correlated with the product
itself: ``C_computed ~ (1 - delta) C``, a bias of about ``7 * 2**-56`` ~ 1e-16 per GEMM at
s = 8 (b = 7) that adds up linearly over a circuit's gates instead of as a random walk.

ozsim therefore rounds every slice to nearest (clipped to the INT8 range,
``ozsim.gemm.ozaki1.scheme.split_rows`` / ``split_columns``), so the slices have random signs and the
dropped terms average out. This script measures both: ozsim's rounded split, and the truncating
split swapped in by monkeypatching the two split functions of the CPU path.

Per backend: the normwise error against double-double, and the component of the error along the
reference state, ``Re <r|psi - r> / <r|r>`` (negative: the state shrank).

Usage:
    python benchmarks/accuracy/slice_bias.py [--seeds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from _common import e, machine, md_table, write_json
from ozsim.gates import brickwork, haar_unitary
from ozsim.gemm.ozaki1 import scheme as oz  # the CPU path looks its split functions up here
from ozsim.gemm import zgemm
from ozsim.reference import dd_statevector, dd_zgemm
from ozsim.simulator import Simulator


def split_rows_truncated(x, exps, num_splits, bits, *, reverse=False, dtype=None):
    rows, k = x.shape
    out = np.empty((2 * rows, num_splits, k), dtype=dtype or np.float64)
    scale = (bits - exps)[:, None]
    for half, part in enumerate((x.real, x.imag)):
        r = np.ldexp(part, scale)
        dst = out[half * rows : (half + 1) * rows]
        for i in range(num_splits):
            q = np.trunc(r)
            dst[:, num_splits - 1 - i if reverse else i, :] = q
            r -= q
            r *= 1 << bits
    return out


def split_columns_truncated(b, exps, num_splits, bits, dtype=np.float64):
    rows = split_rows_truncated(b.T, exps, num_splits, bits, reverse=True, dtype=dtype)
    n = b.shape[1]
    return np.ascontiguousarray(rows.transpose(1, 2, 0)).reshape(num_splits * b.shape[0], 2 * n)


SPLITS = {
    "rounded (ozsim)": (oz.split_rows, oz.split_columns),
    "truncated (ozIMMU paper)": (split_rows_truncated, split_columns_truncated),
}


def errors(c, ref):
    hi, lo = ref
    d = (c - hi) - lo
    nr2 = float(np.vdot(hi, hi).real)
    return float(np.linalg.norm(d)) / nr2**0.5, float(np.vdot(hi, d).real) / nr2


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    rows, out = [], []

    rng = np.random.default_rng(0)
    u = haar_unitary(16, rng)
    b = rng.standard_normal((16, 8192)) + 1j * rng.standard_normal((16, 8192))
    b /= np.linalg.norm(b)
    ref = dd_zgemm(u, b)
    for name, (fr, fc) in SPLITS.items():
        oz.split_rows, oz.split_columns = fr, fc
        for backend in ("int8x8", "int8x9"):
            nw, par = errors(zgemm(u, b, backend=backend), ref)
            out.append({"case": "GEMM 16x16 @ 16x8192", "split": name, "backend": backend,
                        "normwise": nw, "parallel": par})
    oz.split_rows, oz.split_columns = SPLITS["rounded (ozsim)"]
    nw, par = errors(zgemm(u, b, backend="zgemm"), ref)
    out.append({"case": "GEMM 16x16 @ 16x8192", "split": "-", "backend": "zgemm",
                "normwise": nw, "parallel": par})

    circs = [brickwork(16, 8, 4, seed=s) for s in range(args.seeds)]
    refs = [dd_statevector(c) for c in circs]
    cases = [("zgemm", 1.0, {"-": SPLITS["rounded (ozsim)"]}),
             ("int8-auto", 1.0, SPLITS), ("int8-auto", 0.0, SPLITS)]
    for backend, T, splits in cases:
        for name, (fr, fc) in splits.items():
            oz.split_rows, oz.split_columns = fr, fc
            res = [errors(Simulator(backend=backend, T=T, device="cpu", max_fused_qubits=0)
                          .run(c).statevector, r) for c, r in zip(circs, refs)]
            label = backend if backend == "zgemm" else f"{backend}:T={T:g}"
            out.append({"case": f"brickwork N=16 d=4 L=8, {args.seeds} seeds", "split": name,
                        "backend": label, "normwise": statistics.fmean(x[0] for x in res),
                        "parallel": statistics.fmean(x[1] for x in res)})
    oz.split_rows, oz.split_columns = SPLITS["rounded (ozsim)"]

    for r in out:
        rows.append([r["case"], r["backend"], r["split"], e(r["normwise"]), f"{r['parallel']:+.2e}"])
    print(md_table(["case", "backend", "split", "normwise rel error (mean)",
                    "error along psi (mean)"], rows))
    path = write_json("slice_bias", {"benchmark": "slice_bias", "machine": machine(),
                                          "results": out, "total_time_s": time.perf_counter() - t0})
    print(f"\nwrote {path} ({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
