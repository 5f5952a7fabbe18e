"""Single-precision GEMMs against cuBLAS CGEMM: ms, TFLOP/s, speed-up and error, by size.

Run from the repository root on a machine with an NVIDIA GPU and CuPy::

    python3 benchmarks/single_bench.py --sizes 4096,8192

writes ``benchmarks/results/single_bench-<gpu>-<date>.json`` (``--json`` overrides).
``--device cpu`` runs the same on NumPy (small sizes: a quick look, and the test that keeps this
script running).

Inputs: Ozaki's ``(rand - 0.5) exp(phi randn)`` real and imaginary parts (``--phi``, default 1),
square ``n x n`` complex64 ``A`` and ``B``. Backends (:mod:`ozsim.gemm.single`): ``cgemm``
(cuBLAS CGEMM, measured in the same run: the baseline), ``tf32x3``, ``tf32x4``, ``fp16-le``,
``int8-auto`` (at ``--T``). The real schemes run in their device's default complex form (on the
GPU Karatsuba's 3 real products, on the CPU the stacked 4: :mod:`ozsim.gemm.single`); with
``--karatsuba`` both explicit forms too (``tf32x3+S`` stacked, ``tf32x3+K`` Karatsuba...).
``--phi`` takes a list: each size runs at each spread.

Reported per size and backend:

- ``ms``: median of ``--reps`` timed calls after one warm-up, CUDA events around the whole
  :func:`ozsim.gemm.single.cgemm` call (splitting, scaling and combining included);
- ``TFLOP/s``: ``8 n**3 / t`` (the complex product's real flops) and ``x CGEMM``, the speed-up
  over cuBLAS CGEMM's time in the same run;
- ``max rel``: ``max |c - ref| / |ref|`` over all entries, and ``norm-wise``:
  ``||C - ref||_F / ||ref||_F`` (``x err``: that over cuBLAS CGEMM's in the same run), with ``ref`` the complex128 product of the same (exactly
  converted) inputs by cuBLAS ZGEMM (its error, ~1e-16 sqrt(n), is negligible here). The maximum
  is set by the most cancelling entry; the norm-wise error is the stable comparison.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import cpu_timed, device_tag, gpu_name, result_path, timed, write_json  # noqa: E402

BACKENDS = ("cgemm", "tf32x3", "tf32x4", "fp16-le", "int8-auto")
KARATSUBA = ("tf32x3", "tf32x4", "fp16-le")


def inputs(n: int, phi: float, seed: int, xp):
    """``A``, ``B``: ``(n, n)`` complex64 with Ozaki's parts, generated on ``xp``'s device."""
    if xp is np:
        rs = np.random.default_rng(seed)
        rand, randn = rs.random, rs.standard_normal
    else:
        rs = xp.random.RandomState(seed)
        rand, randn = rs.random_sample, rs.standard_normal

    def part():
        return (rand((n, n)) - 0.5) * xp.exp(phi * randn((n, n)))

    return [(part() + 1j * part()).astype(xp.complex64) for _ in range(2)]


def errors(c, ref, xp) -> tuple[float, float]:
    """(max relative, norm-wise) error of ``c`` against the complex128 ``ref``."""
    d = c.astype(xp.complex128) - ref
    if not bool(xp.isfinite(d).all()):
        return float("inf"), float("inf")
    nz = ref != 0
    mx = float((xp.abs(d[nz]) / xp.abs(ref[nz])).max())
    return mx, float(xp.linalg.norm(d) / xp.linalg.norm(ref))


def bench_size(n, phi, specs, args, xp, device):
    """Every backend at size ``n``; returns the row dicts (cgemm first: the baseline)."""
    from ozsim.gemm.single import cgemm

    a, b = inputs(n, phi, seed=n, xp=xp)
    ref = a.astype(xp.complex128) @ b.astype(xp.complex128)
    out = xp.empty((n, n), dtype=xp.complex64)
    clock = cpu_timed if xp is np else timed
    rows, base, base_err = [], None, None
    for spec in specs:
        backend, _, variant = spec.partition("+")
        info = {}

        def call():
            _, info["gi"] = cgemm(a, b, backend=backend, T=args.T, out=out, return_info=True,
                                  karatsuba={"K": True, "S": False}.get(variant))

        t = clock(call, args.reps)
        mx, nw = errors(out, ref, xp)
        if backend == "cgemm":
            base, base_err = t, nw
        gi = info["gi"]
        rows.append({"device": device, "n": n, "phi": phi, "backend": spec, "ms": t * 1e3,
                     "tflops": 8.0 * n**3 / t / 1e12, "x_cgemm": base / t if base else None,
                     "max_rel_err": mx, "normwise_err": nw,
                     "x_cgemm_err": nw / base_err if base_err else None,
                     "splits": gi.num_splits, "fallback": gi.fallback})
        print(_fmt(rows[-1]), flush=True)
    return rows


HEADER = ("| n | phi | backend | ms | TFLOP/s | x CGEMM | max rel err | norm-wise err | x err |\n"
          "| ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")


def _fmt(r) -> str:
    x = f"{r['x_cgemm']:.2f}" if r["x_cgemm"] is not None else "-"
    name = r["backend"] + (f" (s={r['splits']})" if r["backend"].startswith("int8") else "")
    xe = f"{r['x_cgemm_err']:.2f}" if r["x_cgemm_err"] is not None else "-"
    return (f"| {r['n']} | {r['phi']:g} | {name} | {r['ms']:.3f} | {r['tflops']:.2f} | {x} | "
            f"{r['max_rel_err']:.2e} | {r['normwise_err']:.2e} | {xe} |")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="4096,8192", help="square sizes n, comma-separated")
    p.add_argument("--backends", default=",".join(BACKENDS),
                   help="comma-separated (cgemm is always run first: the baseline)")
    p.add_argument("--karatsuba", action="store_true",
                   help="also both explicit complex forms of tf32x3, tf32x4, fp16-le (+S, +K)")
    p.add_argument("--T", type=float, default=1.0, help="int8-auto's threshold (bits of 24)")
    p.add_argument("--phi", default="1", help="exponent spreads of the inputs, comma-separated")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--json", default=None,
                   help="output (default benchmarks/results/single_bench-<device>-<date>.json)")
    args = p.parse_args(argv)
    from ozsim.gemm.single import parse

    names = [parse(b).name for b in args.backends.split(",") if b.strip()]
    specs = ["cgemm"] + [b for b in names if b != "cgemm"]
    if args.karatsuba:
        specs += [f"{b}+{f}" for f in "SK" for b in names if b in KARATSUBA]
    if args.device == "gpu":
        import cupy as xp

        gpu = gpu_name()
        meta_dev = {"gpu": gpu, "cupy": xp.__version__,
                    "cuda_runtime": xp.cuda.runtime.runtimeGetVersion()}
        tag = device_tag(gpu)
    else:
        xp, meta_dev, tag = np, {"cpu": platform.processor() or platform.machine()}, "cpu"
    path = args.json or result_path("single_bench", tag)
    meta = {**meta_dev, "numpy": np.__version__, "date": time.strftime("%Y-%m-%d"),
            "python": platform.python_version(), "command": " ".join(sys.argv),
            "reps": args.reps, "phi": args.phi, "T": args.T, "flops": "8 n^3",
            "reference": "complex128 product of the same inputs (ZGEMM)"}
    rows: list = []
    print(f"{meta_dev}  phi = {args.phi}, T = {args.T}\n{HEADER}", flush=True)
    phis = [float(x) for x in args.phi.split(",") if x]
    for n, phi in [(int(x), phi) for x in args.sizes.split(",") if x for phi in phis]:
        rows += bench_size(n, phi, specs, args, xp, args.device)
        write_json(path, {"meta": meta, "rows": rows})  # after every case: a cut run keeps it
        if xp is not np:
            xp.get_default_memory_pool().free_all_blocks()
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
