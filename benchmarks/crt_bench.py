"""Ozaki scheme II (``int8-crt{N}``, ``int8-crt-auto``) against cuBLAS ZGEMM on the GPU: by input
spread, number of moduli and threshold T, stage by stage, and on brickwork circuits.

Run from the repository root on a machine with an NVIDIA GPU and CuPy::

    PYTHONPATH=. python3 benchmarks/crt_bench.py --square "" --state-d "" \
        --circuit-d 8,9,10,11,12 --fixed "" --T 0,1

writes ``benchmarks/results/crt_bench-<gpu>-<date>.json`` (``--json`` overrides). ``gemm_bench.py
--crt ...`` gives the same GEMM rows beside scheme I; this script adds what is particular to
scheme II:

- square ``n x n x n`` (default 4096, 8192, 16384), Ozaki inputs ``(rand - 0.5) exp(phi randn)``
  for each ``--phi`` (the exponent spread decides how many moduli ``int8-crt-auto`` needs):
  cuBLAS ZGEMM, ``int8-crt-auto`` at each ``--T`` and ``int8-crt{N}`` for each ``--fixed`` N.
  Each row: median of ``--reps`` timed runs after one warm-up, CUDA events around the whole
  ``zgemm`` call (both operands' analysis and residues included); TFLOP/s = ``8 n**3 / t``;
  ``max rel err`` over 64 sampled entries (8 rows x 8 columns) against the exact product
  (:func:`ozsim.testing.exact_zgemm`, integer arithmetic on the host), and the norm-wise
  relative error of those 64 entries (what ``int8-crt-auto``'s rule bounds).
- per-stage breakdown (CUDA events: analyse / residues / INT8 products / reduce / CRT) of one
  scheme II run per square shape (``--stages``).
- ``--shapes m:k:n,...``: other shapes of a GEMM library (tall-skinny ``A``, a long inner
  dimension), rows as the square ones.
- ``--dgemm``: :func:`ozsim.gemm.dgemm` on real square inputs against cuBLAS DGEMM (TFLOP/s =
  ``2 n**3 / t``), the same auto thresholds and fixed N.
- state-vector GEMMs: a Haar ``2**d x 2**d`` gate times a Gaussian ``2**d x 2**(N-d)`` state.
- ``--fused 0,3,auto`` runs every scheme II row once per ``OZSIM_CRT_FUSED`` value: cuBLAS
  products + a reduction kernel (0), the fused products kernel of ``ozsim.gemm.ozaki2.wgmma``
  forced (1 or 3: ``+f``/``+f3``; 4, its direct form: ``+f4``), the default choice (auto, ``+a``).
  Every value gives the same bits.
- brickwork circuits (``ozsim.gates.brickwork``, depth 4, fusion off: one GEMM per gate) through
  ``Simulator``: wall time of the second run of the circuit (the first compiles kernels and
  tunes cuBLASLt for its shapes), the speed-up against the zgemm backend in the same run and the
  relative error of Re<0|psi> against the zgemm run.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

from _common import (cupy, device_tag, free_gpu_memory, gpu_helper, gpu_name, last_stats,
                     result_path, timed, write_json)
from gemm_bench import square_inputs, state_inputs


#: ``--fused`` modes: scheme II rows are run once per mode (``OZSIM_CRT_FUSED``), labelled with
#: :data:`_MODE_SUFFIX` (``auto``: fused where measured faster).
FUSED_MODES = ["auto"]


def _backends(ts, fixed):
    out = [("zgemm", None, "0")]
    for mode in FUSED_MODES:
        out += [("int8-crt-auto", t, mode) for t in ts]
        out += [(f"int8-crt{n}", None, mode) for n in fixed]
    return out


_MODE_SUFFIX = {"1": "+f", "3": "+f3", "4": "+f4", "auto": "+a"}


def _label(backend, T, mode):
    return backend + ("" if T is None else f" T={T:g}") + _MODE_SUFFIX.get(mode, "")


def bench_gemm(label, a, b, backends, reps, rng, stages_backend=None):
    """Time each backend on ``a @ b``; rows of dicts (also printed)."""
    cp = cupy()
    from ozsim.gemm import zgemm
    from ozsim.testing import exact_zgemm, max_relative_error

    m, k = a.shape
    n = b.shape[1]
    flops = 8.0 * m * n * k
    rows_i = np.sort(rng.choice(m, size=min(8, m), replace=False))
    cols_i = np.sort(rng.choice(n, size=min(8, n), replace=False))
    t0 = time.perf_counter()
    ref = exact_zgemm(a[cp.asarray(rows_i)].get(), b[:, cp.asarray(cols_i)].get())
    t_ref = time.perf_counter() - t0
    out = cp.empty((m, n), dtype=cp.complex128)
    result, base = [], None
    for backend, T, mode in backends:
        info = {}
        os.environ["OZSIM_CRT_FUSED"] = mode

        def run(backend=backend, T=T, info=info):
            _, gi = zgemm(a, b, backend=backend, T=1.0 if T is None else T, out=out,
                          return_info=True)
            info["gi"] = gi

        t = timed(run, reps)
        gi = info["gi"]
        got = out[cp.asarray(rows_i)][:, cp.asarray(cols_i)].get()
        err = max_relative_error(got, ref)
        nerr = float(np.linalg.norm(got - ref) / np.linalg.norm(ref))
        base = t if backend == "zgemm" else base
        row = {"shape": label, "m": m, "k": k, "n": n, "backend": backend, "T": T, "fused": mode,
               "ms": 1e3 * t, "tflops": flops / t / 1e12, "speedup": base / t,
               "moduli": gi.num_moduli, "kept_bits": gi.kept_bits, "fallback": gi.fallback,
               "bound_bits": gi.bound_bits, "max_rel_err": err, "normwise_err": nerr}
        if gi.num_moduli:
            row["stats"] = last_stats(2)
        result.append(row)
        print(_fmt(row), flush=True)
    if stages_backend:
        backend, T = stages_backend
        os.environ["OZSIM_CRT_FUSED"] = FUSED_MODES[-1]
        with gpu_helper("profile_stages")() as st:
            _, gi = zgemm(a, b, backend=backend, T=1.0 if T is None else T, out=out,
                          return_info=True)
        cp.cuda.Device().synchronize()
        row = {"shape": label, "stages_of": _label(backend, T, FUSED_MODES[-1]),
               "moduli": gi.num_moduli, "stages_ms": dict(st)}
        result.append(row)
        print(f"  stages {row['stages_of']} (N={gi.num_moduli}): "
              + ", ".join(f"{kk} {v:.2f} ms" for kk, v in st.items())
              + f" | sum {sum(st.values()):.2f} ms", flush=True)
    print(f"  [{label}: exact reference {t_ref:.1f} s]", flush=True)
    return result


def _fmt(r):
    name = _label(r["backend"], r["T"], r["fused"])
    n = "fb" if r["fallback"] else (r["moduli"] or "-")
    return (f"{r['shape']:>22} {name:>18} N={n!s:>2} {r['ms']:10.2f} ms {r['tflops']:8.2f} "
            f"TFLOP/s  x{r['speedup']:5.2f}  err {r['max_rel_err']:.2e} "
            f"norm-wise {r['normwise_err']:.2e}")


def shaped_inputs(m, k, n, seed, phi):
    """Ozaki's complex inputs ``A`` (m, k), ``B`` (k, n) on the GPU."""
    cp = cupy()
    rs = cp.random.RandomState(seed)

    def part(r, c):
        return (rs.random_sample((r, c)) - 0.5) * cp.exp(phi * rs.standard_normal((r, c)))

    return part(m, k) + 1j * part(m, k), part(k, n) + 1j * part(k, n)


def bench_dgemm(n, phi, ts, fixed, reps, rng):
    """:func:`ozsim.gemm.dgemm` on real ``n x n`` Ozaki inputs against cuBLAS DGEMM (CuPy's
    float64 matmul) in the same run; rows of dicts (also printed). TFLOP/s = ``2 n**3 / t``."""
    cp = cupy()
    from ozsim.gemm import dgemm
    from ozsim.testing import exact_zgemm, max_relative_error

    a, b = (x.real.copy() for x in square_inputs(n, seed=n + 1, phi=phi))
    rows_i = np.sort(rng.choice(n, size=8, replace=False))
    cols_i = np.sort(rng.choice(n, size=8, replace=False))
    ref = exact_zgemm(a[cp.asarray(rows_i)].get() + 0j, b[:, cp.asarray(cols_i)].get() + 0j).real
    out = cp.empty((n, n), dtype=cp.float64)
    result, base = [], None
    label = f"dgemm {n} phi={phi:g}"
    cases = ([("zgemm", None)] + [("int8-crt-auto", t) for t in ts]
             + [(f"int8-crt{k}", None) for k in fixed])
    for backend, T in cases:
        info = {}

        def run(backend=backend, T=T, info=info):
            _, info["gi"] = dgemm(a, b, backend=backend, T=1.0 if T is None else T, out=out,
                                  return_info=True)

        t = timed(run, reps)
        got = out[cp.asarray(rows_i)][:, cp.asarray(cols_i)].get()
        base = t if backend == "zgemm" else base
        row = {"shape": label, "n": n, "backend": backend, "T": T, "ms": 1e3 * t,
               "tflops": 2.0 * n**3 / t / 1e12, "speedup": base / t,
               "moduli": info["gi"].num_moduli, "bound_bits": info["gi"].bound_bits,
               "max_rel_err": max_relative_error(got, ref),
               "normwise_err": float(np.linalg.norm(got - ref) / np.linalg.norm(ref))}
        result.append(row)
        name = ("cuBLAS DGEMM" if backend == "zgemm" else
                backend + ("" if T is None else f" T={T:g}"))
        print(f"{label:>22} {name:>18} N={row['moduli'] or '-'!s:>2} {row['ms']:10.2f} ms "
              f"{row['tflops']:8.2f} TFLOP/s  x{row['speedup']:5.2f}  err "
              f"{row['max_rel_err']:.2e} norm-wise {row['normwise_err']:.2e}", flush=True)
    return result


def bench_circuits(num_qubits, ds, depth, ts, fixed):
    from ozsim.gates import brickwork
    from ozsim.simulator import Simulator

    rows = []
    for d in ds:
        circ = brickwork(num_qubits, depth, gate_qubits=d, seed=100 + d)
        ref_amp, base = None, None
        for backend, T, mode in _backends(ts, fixed):
            os.environ["OZSIM_CRT_FUSED"] = mode
            sim = Simulator(backend=backend, T=1.0 if T is None else T, device="gpu",
                            max_fused_qubits=0)
            sim.run(circ)  # warm-up on the same shapes: kernels compiled, cuBLASLt tuned
            res = sim.run(circ)
            md = res.metadata
            amp = res.statevector[0]
            if backend == "zgemm":
                ref_amp, base = amp, md["wall_time_s"]
            rel = abs(amp.real - ref_amp.real) / abs(ref_amp.real) if ref_amp.real else 0.0
            row = {"N": num_qubits, "d": d, "gates": md["num_gates"], "backend": backend,
                   "T": T, "fused": mode, "seconds": md["wall_time_s"],
                   "speedup": base / md["wall_time_s"],
                   "fallbacks": md["fallbacks"], "rel_err_re0_vs_zgemm": rel}
            rows.append(row)
            name = _label(backend, T, mode)
            print(f"  circuit N={num_qubits} d={d:2d} {name:>18}: {md['wall_time_s']:8.3f} s "
                  f"x{row['speedup']:5.2f} fallbacks {md['fallbacks']} "
                  f"relerr(Re<0|psi>) {rel:.1e}", flush=True)
            del res
            free_gpu_memory()
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--square", default="4096,8192,16384")
    p.add_argument("--T", default="0,1", help="thresholds for int8-crt-auto")
    p.add_argument("--fixed", default="14,15,16", help="fixed N for int8-crt{N}")
    p.add_argument("--state-qubits", type=int, default=28)
    p.add_argument("--state-d", default="8,9,10,11,12")
    p.add_argument("--circuit-qubits", type=int, default=26)
    p.add_argument("--circuit-d", default="8,9,10,11,12")
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--phi", default="1", help="phi of the square inputs, comma-separated")
    p.add_argument("--stages", default="", help="backend whose stages to time per square shape "
                   "(default: int8-crt{last --fixed}); 'auto0' = int8-crt-auto T=0")
    p.add_argument("--shapes", default="", help="other m:k:n shapes (tall-skinny, long inner "
                   "dimension), comma-separated, at each --phi")
    p.add_argument("--dgemm", default="", help="square sizes of ozsim.gemm.dgemm (real) "
                   "against cuBLAS DGEMM, at each --phi")
    p.add_argument("--fused", default="auto",
                   help="OZSIM_CRT_FUSED modes for the scheme II rows, comma-separated: "
                   "0 (cuBLAS products + reduce), 1 or 3 (fused wgmma kernel), "
                   "4 (its direct form), auto (the default choice)")
    p.add_argument("--json", default=None,
                   help="output (default benchmarks/results/crt_bench-<gpu>-<date>.json)")
    args = p.parse_args(argv)
    FUSED_MODES[:] = [x for x in args.fused.split(",") if x]
    cp = cupy()
    gpu = gpu_name()
    path = args.json or result_path("crt_bench", device_tag(gpu))
    ts = [float(x) for x in args.T.split(",") if x]
    fixed = [int(x) for x in args.fixed.split(",") if x]
    meta = {"gpu": gpu, "cupy": cp.__version__, "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
            "date": time.strftime("%Y-%m-%d"), "python": platform.python_version(),
            "command": " ".join(sys.argv), "reps": args.reps, "flops": "8 m n k"}
    out = {"meta": meta, "square": [], "dgemm": [], "state": [], "circuits": []}

    def save():  # after every shape, so that a run cut short keeps what it measured
        write_json(path, out)

    print(f"GPU {gpu}, CuPy {cp.__version__}, CUDA runtime {meta['cuda_runtime']}", flush=True)
    rng = np.random.default_rng(0)
    stages = (("int8-crt-auto", 0.0) if args.stages == "auto0" else
              (args.stages, None) if args.stages else
              (f"int8-crt{fixed[-1]}", None) if fixed else None)
    for phi in [float(x) for x in args.phi.split(",") if x]:
        for n in [int(x) for x in args.square.split(",") if x]:
            a, b = square_inputs(n, seed=n, phi=phi)
            out["square"] += bench_gemm(f"square {n} phi={phi:g}", a, b, _backends(ts, fixed),
                                        args.reps, rng, stages)
            save()
            del a, b
            free_gpu_memory()
    for phi in [float(x) for x in args.phi.split(",") if x]:
        for shape in [x for x in args.shapes.split(",") if x]:
            m, k, n = (int(v) for v in shape.split(":"))
            a, b = shaped_inputs(m, k, n, seed=m + k + n, phi=phi)
            out["square"] += bench_gemm(f"{m}x{k}x{n} phi={phi:g}", a, b, _backends(ts, fixed),
                                        args.reps, rng)
            save()
            del a, b
            free_gpu_memory()
        for n in [int(x) for x in args.dgemm.split(",") if x]:
            out["dgemm"] += bench_dgemm(n, phi, ts, fixed, args.reps, rng)
            save()
            free_gpu_memory()
    for d in [int(x) for x in args.state_d.split(",") if x]:
        gate, state = state_inputs(args.state_qubits, d, seed=100 + d)
        out["state"] += bench_gemm(f"N={args.state_qubits} d={d}", gate, state,
                                   _backends(ts, fixed), args.reps, rng,
                                   ("int8-crt-auto", 1.0) if d in (8, 12) else None)
        save()
        del gate, state
        free_gpu_memory()
    cds = [int(x) for x in args.circuit_d.split(",") if x]
    if cds:
        out["circuits"] = bench_circuits(args.circuit_qubits, cds, args.depth, ts, fixed[-1:])
    try:
        from ozsim.gemm.ozaki1 import cublaslt

        out["cublaslt_tuning"] = cublaslt.tuning_log()
        for key, times, choice in out["cublaslt_tuning"]:
            print(f"  cuBLASLt tuning {key}: {choice} of {times}", flush=True)
    except ImportError:
        pass
    save()
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
