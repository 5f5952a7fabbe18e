"""Scheme II's residue kernel (``crt_residues32``) against an earlier version, and its block size.

Run from the repository root on a GPU with CuPy::

    PYTHONPATH=. python3 benchmarks/crt_residue_probe.py [--old OLD_CUDA_CRT.py] \
        --json benchmarks/results/crt_residue_probe.json

For each operand (B of the N = 28, d = 8 state GEMM: strided columns, 58 bits, 15 moduli, in
the direct form's 2 planes and Karatsuba's 3; A of a 16384 square: contiguous rows, 62 bits,
16 moduli, 3 planes) it times ``residues_gpu`` as ozsim launches it, with other block sizes,
and (``--old``: a copy of an earlier ``ozsim/gemm/_cuda_crt.py``, loaded as a sibling module)
the earlier kernel, whose output must be byte-equal. Prints a table, writes JSON; nothing is
asserted (the residues are tested against the CPU in ``tests/test_gpu_crt.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from gemm_bench import _cupy, gpu_name, timed  # noqa: E402


def _load_old(path: str):
    """An earlier ``_cuda_crt.py`` as the module ``ozsim.gemm._cuda_crt_old``."""
    import ozsim.gemm  # noqa: F401  (the package its relative imports resolve in)

    spec = importlib.util.spec_from_file_location("ozsim.gemm._cuda_crt_old", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def run_case(label, x, bits, N, weighted, planes, reps, old):
    cp = _cupy()
    from ozsim.gemm import _cuda_crt

    rows, k = x.shape
    f, _ = _cuda_crt.analyse(x, moments=False)
    kpad = _cuda_crt._pad16(k)
    ra = _cuda_crt._pad4(rows)
    kw = dict(weighted=weighted, kpad=kpad, rows_alloc=ra, planes=planes)
    ref = _cuda_crt.residues_gpu(x, f, bits, N, **kw)
    out = cp.empty_like(ref)
    nbytes = x.size * 16 + ref.size
    rows_out = []
    variants = [("ozsim", _cuda_crt, t) for t in (_cuda_crt._RESIDUE_THREADS, 256)]
    if old is not None:
        variants.append(("old", old, old._RESIDUE_THREADS))
    for name, mod, threads in variants:
        saved = mod._RESIDUE_THREADS
        mod._RESIDUE_THREADS = threads
        try:
            out.fill(0)
            t = timed(lambda: mod.residues_gpu(x, f, bits, N, out=out, **kw), reps)
        finally:
            mod._RESIDUE_THREADS = saved
        rows_out.append({"case": label, "variant": f"{name}, {threads} threads", "ms": 1e3 * t,
                         "GB/s": nbytes / t / 1e9, "equal": bool((out == ref).all()),
                         "pieces": _cuda_crt.pieces32(bits)})
    for r in rows_out:
        print(f"  {r['case']:>34} {r['variant']:>20}: {r['ms']:8.3f} ms {r['GB/s']:7.0f} GB/s "
              f"equal={r['equal']}", flush=True)
    return rows_out


def probe_args(doc: str, argv=None):
    """``(args, old)`` of the kernel probes: ``--reps``, ``--old`` (loaded by
    :func:`_load_old`, else ``None``) and ``--json``."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--old", default="", help="an earlier ozsim/gemm/_cuda_crt.py to compare")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    return args, (_load_old(args.old) if args.old else None)


def main(argv=None) -> int:
    args, old = probe_args(__doc__, argv)
    cp = _cupy()
    rs = cp.random.RandomState(5)
    rows = []
    state = rs.standard_normal((256, 1 << 20)) + 1j * rs.standard_normal((256, 1 << 20))
    for planes in (2, 3):
        rows += run_case(f"B, N=28 d=8 (58 bits, 15), {planes} pl", state.T, 58, 15, False,
                         planes, args.reps, old)
    del state
    a = rs.standard_normal((16384, 16384)) + 1j * rs.standard_normal((16384, 16384))
    rows += run_case("A, square 16384 (62 bits, 16), 3 pl", a, 62, 16, True, 3, args.reps, old)
    del a
    report(rows, args.json)
    return 0


def report(rows, json_path: str) -> None:
    """The probe's table (case, variant, ms, GB/s, equal) and, with a path, its JSON."""
    print("\n| case | variant | ms | GB/s | equal |")
    for r in rows:
        print(f"| {r['case']} | {r['variant']} | {r['ms']:.3f} | {r['GB/s']:.0f} | {r['equal']} |")
    if json_path:
        with open(json_path, "w") as fh:
            json.dump({"gpu": gpu_name(), "date": time.strftime("%Y-%m-%d"), "rows": rows}, fh,
                      indent=1)


if __name__ == "__main__":
    sys.exit(main())
