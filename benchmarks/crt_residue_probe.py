"""Launch shapes of scheme II's residue kernel (``crt_residues32``): block size and register cap.

Run from the repository root on a GPU with CuPy::

    PYTHONPATH=. python3 benchmarks/crt_residue_probe.py \
        --json benchmarks/results/crt_residue_probe.json

For each operand (B of the N = 28, d = 8 state GEMM: strided columns, 58 bits, 15 moduli, the
direct form's 2 planes; A of a 16384 square: contiguous rows, 62 bits, 16 moduli, 3 planes) it
times ``residues_gpu`` as ozsim launches it and variants compiled here with
``__launch_bounds__(threads, blocks)``, each checked bitwise against the default kernel's output.
Prints a table, writes JSON; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from gemm_bench import _cupy, gpu_name, timed  # noqa: E402


def _variant(threads: int, blocks: int, pieces: int):
    """``crt_residues32`` compiled with ``__launch_bounds__(threads, blocks)`` (0: none)."""
    cp = _cupy()
    from ozsim.gemm import _cuda_crt
    from ozsim.gemm.ozaki2 import LIMB_BITS, LOSS_ALLOWANCE_BITS, NORM_FRAC_BITS

    code = _cuda_crt._SOURCE % {"nfrac": NORM_FRAC_BITS, "lbits": LIMB_BITS,
                                "allow": LOSS_ALLOWANCE_BITS}
    if blocks:
        code = code.replace('extern "C" __global__ void crt_residues32(',
                            f'extern "C" __global__ void __launch_bounds__({threads}, {blocks}) '
                            'crt_residues32(')
    mod = cp.RawModule(code=code, options=(f"-DNP={pieces}",))
    return mod.get_function("crt_residues32")


def run_case(label, x, bits, N, weighted, planes, reps, variants):
    cp = _cupy()
    from ozsim.gemm import _cuda, _cuda_crt

    rows, k = x.shape
    f, _ = _cuda_crt.analyse(x, moments=False)
    kpad = _cuda_crt._pad16(k)
    ra = _cuda_crt._pad4(rows)
    ref = _cuda_crt.residues_gpu(x, f, bits, N, weighted=weighted, kpad=kpad, rows_alloc=ra,
                                 planes=planes)
    out = cp.empty_like(ref)
    t_def = timed(lambda: _cuda_crt.residues_gpu(x, f, bits, N, weighted=weighted, kpad=kpad,
                                                 rows_alloc=ra, out=out, planes=planes), reps)
    pieces = max(1, -(-bits // _cuda_crt.PIECE32_BITS))
    cst = _cuda_crt._residue_constants(N, weighted, _cuda_crt.PIECE32_BITS, np.float32)
    sr, sc, qb, total = _cuda_crt._residue_items(x, ra, kpad)
    nbytes = x.size * 16 + ref.size
    rows_out = [{"case": label, "variant": "ozsim default (256 threads)", "ms": 1e3 * t_def,
                 "GB/s": nbytes / t_def / 1e9, "equal": True}]
    for threads, blocks, per_sm in variants:
        kern = _variant(threads, blocks, pieces)
        grid = int(max(1, min(-(-total // threads), per_sm * _cuda._sms())))
        args = (x, np.int64(rows), np.int64(ra), np.int64(k), np.int64(kpad), np.int64(sr),
                np.int64(sc), f, np.int32(bits), np.int32(N), cst, out, np.int32(qb),
                np.int32(1), np.int32(planes))
        out.fill(0)
        t = timed(lambda: kern((grid,), (threads,), args), reps)
        same = bool((out == ref).all())
        name = f"{threads} threads, bounds {blocks or '-'}, {per_sm} blocks/SM in grid"
        rows_out.append({"case": label, "variant": name, "ms": 1e3 * t,
                         "GB/s": nbytes / t / 1e9, "equal": same})
    for r in rows_out:
        print(f"  {r['case']:>28} {r['variant']:>44}: {r['ms']:8.3f} ms {r['GB/s']:7.0f} GB/s "
              f"equal={r['equal']}", flush=True)
    return rows_out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    cp = _cupy()
    variants = [(256, 0, 32), (128, 0, 64), (512, 0, 16), (256, 3, 32), (128, 6, 64),
                (256, 4, 32)]
    rs = cp.random.RandomState(5)
    rows = []
    state = rs.standard_normal((256, 1 << 20)) + 1j * rs.standard_normal((256, 1 << 20))
    rows += run_case("B, N=28 d=8 (58 bits, 15)", state.T, 58, 15, False, 2, args.reps, variants)
    del state
    a = rs.standard_normal((16384, 16384)) + 1j * rs.standard_normal((16384, 16384))
    rows += run_case("A, square 16384 (62 bits, 16)", a, 62, 16, True, 3, args.reps, variants)
    del a
    print("\n| case | variant | ms | GB/s | equal |")
    for r in rows:
        print(f"| {r['case']} | {r['variant']} | {r['ms']:.3f} | {r['GB/s']:.0f} | {r['equal']} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"gpu": gpu_name(), "date": time.strftime("%Y-%m-%d"), "rows": rows}, fh,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
