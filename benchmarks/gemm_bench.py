"""Emulated ZGEMM against cuBLAS ZGEMM on the GPU, by size: every backend, speed-up and error.

Run from the repository root on a machine with an NVIDIA GPU and CuPy::

    PYTHONPATH=. python3 benchmarks/gemm_bench.py --square 8192,16384 --state-d 6,10,12 \
        --splits 6,8,10,12 --crt int8-crt14,int8-crt16,int8-crt-auto:T=0,int8-crt-auto:T=1

writes ``benchmarks/results/gemm_bench-<gpu>-<date>.json`` (``--json`` overrides).

Shapes: square ``n x n x n`` (default n = 2048, 4096, 8192) and state-vector shapes: a
``2**d x 2**d`` gate times a ``2**d x 2**(N-d)`` state (m = k = 2**d, n = 2**(N-d)).
Backends: cuBLAS ZGEMM, Ozaki scheme I (``int8x{s}`` for each ``--splits``, ``int8-auto``) and,
with ``--crt``, Ozaki scheme II (``int8-crt{N}``, ``int8-crt-auto:T=...``).

Reported per shape and backend (medians of ``--reps`` timed runs after one warm-up, CUDA events
around the whole ``zgemm`` call: analysis and splitting or residues of both operands included):

- ``TFLOP/s``: ``8 m n k`` / time (the complex product's real flops).
- ``R``: the INT8 rate measured in the same run for the shape of one slice product: one
  ``cublasGemmEx`` INT8 -> INT32 "TN" GEMM of ``(2n) x (2m) x kpad``, counted as
  ``2 (2m)(2n) kpad`` integer operations per second. int8x{s} does ``s(s+1)/2`` such slice
  products (grouped into ``s`` GEMMs of K = (t-1) kpad), i.e. ``4 s (s+1) m n kpad`` operations,
  so its ceiling at rate R is ``2 R / (s (s+1))`` TFLOP/s (for kpad = k), shown beside it.
- ``max rel err``: max over 64 sampled entries (8 rows x 8 columns) of ``|c - ref| / |ref|``, with
  ``ref`` computed exactly on the host (:func:`ozsim.testing.exact_zgemm`, integer arithmetic).
- A per-stage breakdown (analyse / split / INT8 GEMMs / accumulate) of int8x8 on the largest shapes.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time

import numpy as np

from _common import (cupy, device_tag, free_gpu_memory, gpu_helper, gpu_name, last_stats,
                     result_path, timed, write_json)


def int8_rate(m: int, k: int, n: int, reps: int, kmul: int = 1) -> float:
    """Integer ops/s of one INT8 TN GEMM ``(2n) x (2m) x (kmul * kpad)`` (random data)."""
    cp = cupy()
    gemm_tn = gpu_helper("_gemm_tn")
    kp = gpu_helper("padded_k")(k) * kmul
    mp, nbp = gpu_helper("padded_rows")(m), gpu_helper("padded_rows")(n)
    rs = cp.random.RandomState(1)
    a = rs.randint(-127, 128, size=(2 * nbp, kp), dtype=np.int8)
    b = rs.randint(-127, 128, size=(2 * mp, kp), dtype=np.int8)
    c = cp.empty((2 * mp, 2 * nbp), dtype=cp.int32)
    handle = cp.cuda.device.get_cublas_handle()

    def run():
        gemm_tn(handle, 2 * nbp, 2 * mp, kp, a.data.ptr, kp, b.data.ptr, kp, c.data.ptr, 2 * nbp)

    t = timed(run, reps)
    return 2.0 * (2 * m) * (2 * n) * kp / t


def sampled_error(c, a_host_rows, b_host_cols, rows, cols) -> float:
    """Max relative error of ``c[rows][:, cols]`` against the exact product."""
    from ozsim.testing import exact_zgemm, max_relative_error

    ref = exact_zgemm(a_host_rows, b_host_cols)
    got = c[rows][:, cols].get()
    return max_relative_error(got, ref)


def bench_shape(label, a, b, backends, reps, rng, stages=False):
    """Time every backend on ``a @ b``; returns a list of row dicts."""
    cp = cupy()
    from ozsim.gemm import zgemm

    padded_k = gpu_helper("padded_k")
    m, k = a.shape
    n = b.shape[1]
    flops = 8.0 * m * n * k
    rows = np.sort(rng.choice(m, size=min(8, m), replace=False))
    cols = np.sort(rng.choice(n, size=min(8, n), replace=False))
    a_rows = a[cp.asarray(rows)].get()
    b_cols = b[:, cp.asarray(cols)].get()
    out = cp.empty((m, n), dtype=cp.complex128)
    t0 = time.perf_counter()
    R = int8_rate(m, k, n, reps)
    R4 = int8_rate(m, k, n, reps, kmul=4) if k <= 4096 else None
    result = []
    for spec in backends:
        backend, _, t_text = spec.partition(":T=")
        kw = {"T": float(t_text) if t_text else 1.0} if backend.endswith("auto") else {}
        info = {}

        def run():
            _, gi = zgemm(a, b, backend=backend, out=out, return_info=True, **kw)
            info["s"] = gi.num_splits
            info["moduli"] = getattr(gi, "num_moduli", None)
            info["fallback"] = gi.fallback

        t = timed(run, reps)
        row = {
            "shape": label, "m": m, "k": k, "n": n, "backend": spec, "ms": t * 1e3,
            "tflops": flops / t / 1e12, "splits": info.get("s"), "moduli": info.get("moduli"),
            "fallback": info.get("fallback"),
            "int8_rate_tops": R / 1e12, "int8_rate_k4_tops": None if R4 is None else R4 / 1e12,
            "max_rel_err": sampled_error(out, a_rows, b_cols, rows, cols),
        }
        s = info.get("s")
        if backend != "zgemm" and s:
            ceiling = 2.0 * R / (s * (s + 1)) * k / padded_k(k)
            row["ceiling_tflops"] = ceiling / 1e12
            row["pct_of_ceiling"] = 100.0 * (flops / t) / ceiling
            stats = last_stats(1)
            row["workspace_bytes"] = stats.get("workspace_bytes")
            row["blocks"] = stats.get("blocks")
            row["products"] = stats.get("products")
        result.append(row)
        print(_fmt_row(row), flush=True)
    if stages and m >= 4096:  # INT8 rate against the inner dimension of one cuBLAS GEMM
        sweep = {}
        for kmul in (1, 2, 4, 8):
            if kmul * padded_k(k) <= 65536:
                sweep[kmul * padded_k(k)] = int8_rate(m, k, n, reps, kmul) / 1e12
        result.append({"shape": label, "int8_rate_vs_K_tops": sweep})
        print("  INT8 TN GEMM rate vs K: "
              + ", ".join(f"K={kk} {v:.0f} TOP/s" for kk, v in sweep.items()), flush=True)
    if stages:
        zgemm(a, b, backend="int8x8", out=out)  # warm-up: cuBLASLt tuning is not a stage
        cp.cuda.Device().synchronize()
        with gpu_helper("profile_stages")() as st:
            zgemm(a, b, backend="int8x8", out=out)
        cp.cuda.Device().synchronize()
        result.append({"shape": label, "backend": "int8x8", "stages_ms": dict(st)})
        print(f"  stages int8x8 {label}: "
              + ", ".join(f"{kk} {v:.2f} ms" for kk, v in st.items()), flush=True)
    print(f"  [{label}: {time.perf_counter() - t0:.1f} s]", flush=True)
    return result


def _fmt_row(r):
    ceil = f"{r['ceiling_tflops']:7.2f} {r['pct_of_ceiling']:5.1f}%" if "ceiling_tflops" in r \
        else " " * 14
    s = r["splits"] if r["splits"] is not None else (
        f"N{r['moduli']}" if r.get("moduli") else ("fb" if r.get("fallback") else "-"))
    return (f"{r['shape']:>18} {r['backend']:>20} s={s!s:>3} {r['ms']:10.3f} ms "
            f"{r['tflops']:8.2f} TFLOP/s  ceil {ceil}  R {r['int8_rate_tops']:7.1f} TOP/s  "
            f"err {r['max_rel_err']:.2e}")


def square_inputs(n, seed, phi=1.0):
    """Ozaki's inputs ``(rand - 0.5) exp(phi randn)`` (real and imaginary parts), on the GPU."""
    cp = cupy()
    rs = cp.random.RandomState(seed)

    def part():
        return (rs.random_sample((n, n)) - 0.5) * cp.exp(phi * rs.standard_normal((n, n)))

    a = part() + 1j * part()
    b = part() + 1j * part()
    return a, b


def state_inputs(num_qubits, d, seed):
    """A Haar ``2^d x 2^d`` gate and a Gaussian ``2^d x 2^(N-d)`` state block, on the GPU."""
    cp = cupy()
    from ozsim.gates.haar import haar_unitary

    gate = cp.asarray(haar_unitary(1 << d, np.random.default_rng(seed)))
    rs = cp.random.RandomState(seed)
    shape = (1 << d, 1 << (num_qubits - d))
    state = rs.standard_normal(shape) + 1j * rs.standard_normal(shape)
    state *= 1.0 / np.sqrt(2.0 * (1 << num_qubits))
    return gate, state


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--square", default="2048,4096,8192", help="square sizes, comma-separated")
    p.add_argument("--state-qubits", type=int, default=28, help="N of the state-vector shapes")
    p.add_argument("--state-d", default="2,3,4,5,6,7,8,9,10,11,12",
                   help="gate sizes d ('' skips the state-vector shapes)")
    p.add_argument("--splits", default="6,7,8,9,10,11,12", help="fixed s for int8x{s}")
    p.add_argument("--crt", default="",
                   help="scheme II backends too, e.g. int8-crt15,int8-crt-auto:T=0,int8-crt-auto:T=1")
    p.add_argument("--no-int8-auto", action="store_true",
                   help="leave out scheme I's int8-auto (and, with --splits '', its stages)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--json", default=None,
                   help="output (default benchmarks/results/gemm_bench-<gpu>-<date>.json)")
    args = p.parse_args(argv)
    cp = cupy()
    gpu = gpu_name()
    path = args.json or result_path("gemm_bench", device_tag(gpu))
    backends = ["zgemm"] + [f"int8x{s}" for s in map(int, args.splits.split(",") if args.splits
                                                       else [])]
    backends += [] if args.no_int8_auto else ["int8-auto"]
    scheme1 = any(b.startswith("int8x") or b == "int8-auto" for b in backends)
    backends += [b for b in args.crt.split(",") if b]
    rng = np.random.default_rng(0)
    rows = []
    meta = {"gpu": gpu, "cupy": cp.__version__, "date": time.strftime("%Y-%m-%d"),
            "python": platform.python_version(), "command": " ".join(sys.argv),
            "reps": args.reps, "flops": "8 m n k", "int8_rate": "2 (2m)(2n) kpad / t of one "
            "INT8 TN GEMM (2n x 2m x kpad)", "ceiling": "2 R / (s (s+1)) * k / kpad"}

    def save():  # after every shape, so that a run cut short keeps what it measured
        write_json(path, {"meta": meta, "rows": rows})

    print(f"GPU {gpu}, CuPy {cp.__version__}, CUDA runtime {cp.cuda.runtime.runtimeGetVersion()}")
    squares = [int(x) for x in args.square.split(",") if x]
    for n in squares:
        a, b = square_inputs(n, seed=n)
        rows += bench_shape(f"square {n}", a, b, backends, args.reps, rng,
                            stages=scheme1 and n == max(squares))
        save()
        del a, b
        free_gpu_memory()
    ds = [int(x) for x in args.state_d.split(",") if x]
    for d in ds:
        N = args.state_qubits
        gate, state = state_inputs(N, d, seed=100 + d)
        rows += bench_shape(f"N={N} d={d}", gate, state, backends, args.reps, rng,
                            stages=scheme1 and d == 6)
        save()
        del gate, state
        free_gpu_memory()
    save()
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
