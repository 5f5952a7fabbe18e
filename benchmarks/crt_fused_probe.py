"""Scheme II's fused INT8 products (``ozsim.gemm._crt_wgmma``) against cuBLAS + ``crt_reduce``.

Run from the repository root on an H100/H200 with CuPy::

    PYTHONPATH=. python3 benchmarks/crt_fused_probe.py --json benchmarks/results/crt_fused_h100.json

1. Correctness: ``gemm_mod`` on random INT8 residues (and extreme ones: every entry -128 with
   k = 65536, so that ``|T| = 2**30``) against exact FP64 products reduced mod p on the host
   side of the GPU (``cupy.matmul`` in float64 is exact here: ``k 2**14 < 2**53``); NaN never
   enters (integers). Shapes cover partial tiles, k not a multiple of 128, k > 8192.
2. Timing (CUDA events, median of ``--reps`` after a warm-up): for all N moduli of one GEMM,
   the fused kernel against the cuBLAS path (3 INT8 GEMMs per modulus through
   ``_cuda.gemm_tn_long`` + ``crt_reduce``), on square and state-vector shapes; effective
   rate = ``3 N 2 m n kpad`` integer operations per second.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from gemm_bench import _cupy as _cp  # noqa: E402
from gemm_bench import gpu_name, timed  # noqa: E402


_FILL = None


def random_int8(shape, seed):
    """INT8 array of ``shape`` filled from a hash of the index (no 64-bit temporaries)."""
    global _FILL
    cp = _cp()
    if _FILL is None:
        _FILL = cp.ElementwiseKernel(
            "uint64 seed", "int8 y",
            "unsigned long long h = ((unsigned long long)i + seed) * 0x9E3779B97F4A7C15ull;"
            "h ^= h >> 29; h *= 0xBF58476D1CE4E5B9ull; h ^= h >> 32;"
            "y = (signed char)(h & 0xffull);", "ozsim_fill_int8")
    out = cp.empty(shape, dtype=cp.int8)
    _FILL(np.uint64(seed), out)
    return out


def reference_u(a_res, b_res, moduli, m, ncols):
    """``(N, 2, m, ncols)`` uint8 from exact FP64 products (cuBLAS DGEMM, integers < 2**53), of
    the Karatsuba form (3 planes each) or the direct form (A 4 planes, B 2)."""
    cp = _cp()
    N = len(moduli)
    out = cp.empty((N, 2, m, ncols), dtype=cp.uint8)

    def mm(i, ja, jb):
        return cp.matmul(a_res[i, ja, :m].astype(cp.float64),
                         b_res[i, jb, :ncols].astype(cp.float64).T)

    for i, p in enumerate(moduli):
        if a_res.shape[1] == 4:
            re, im = mm(i, 0, 0) + mm(i, 1, 1), mm(i, 2, 1) + mm(i, 3, 0)
        else:
            t = [mm(i, j, j) for j in range(3)]
            re, im = t[0] - t[1], t[2] - t[0] - t[1]
        out[i, 0] = cp.mod(re, p).astype(cp.uint8)
        out[i, 1] = cp.mod(im, p).astype(cp.uint8)
    return out


def check(m, k, n, N, seed, extreme=False, form=3, **kw):
    cp = _cp()
    from ozsim.gemm import _crt_wgmma, _cuda_crt
    from ozsim.gemm.ozaki2 import crt_constants

    moduli = crt_constants(N).moduli
    c = _cuda_crt
    kpad, mpa, nbp, ld = c._pad16(k), c._pad4(m), c._pad4(n), c._pad16(n)
    pa, pb = (4, 2) if form == 4 else (3, 3)
    if extreme:
        a_res = cp.full((N, pa, mpa, kpad), -128, dtype=cp.int8)
        b_res = cp.full((N, pb, nbp, kpad), -128, dtype=cp.int8)
        b_res[:, 1, ::2] = 127
    else:
        a_res = random_int8((N, pa, mpa, kpad), 2 * seed)
        b_res = random_int8((N, pb, nbp, kpad), 2 * seed + 1)
    a_res[:, :, :, k:] = 0
    b_res[:, :, :, k:] = 0
    u = cp.full((N, 2, m, ld), 255, dtype=cp.uint8)
    pm = _cuda_crt.modulus_table(N)
    _crt_wgmma.gemm_mod(a_res, b_res, pm, u, m, ld, **kw)
    cp.cuda.Device().synchronize()
    ref = reference_u(a_res, b_res, moduli, m, n)
    got = u[:, :, :, :n]
    bad = int((got != ref).sum())
    print(f"  check form {form} m={m} k={k} n={n} N={N}{' extreme' if extreme else ''} "
          f"{kw or ''}: "
          f"{'OK' if bad == 0 else f'{bad} WRONG of {ref.size}'}", flush=True)
    return bad == 0


def time_both(label, m, k, n, N, reps, groups, clusters=(1,), direct=True):
    """Times the fused kernel (persistent, one raster group width per entry of ``groups``, None
    = ``GROUP_N``, for each cluster size in ``clusters``; and one CTA per work item) against
    cuBLAS + ``crt_reduce``; checks they agree."""
    cp = _cp()
    from ozsim.gemm import _crt_wgmma, _cuda, _cuda_crt
    from ozsim.gemm.ozaki2 import crt_constants

    moduli = crt_constants(N).moduli
    c = _cuda_crt
    kpad, mpa, nbp, ld = c._pad16(k), c._pad4(m), c._pad4(n), c._pad16(n)
    a_res = random_int8((N, 3, mpa, kpad), 11)
    b_res = random_int8((N, 3, nbp, kpad), 12)
    u1 = cp.empty((N, 2, m, ld), dtype=cp.uint8)
    u2 = cp.empty((N, 2, m, nbp), dtype=cp.uint8)
    pm = _cuda_crt.modulus_table(N)
    planes = cp.empty((3, mpa, nbp), dtype=cp.int32)
    handle = cp.cuda.device.get_cublas_handle()
    _cuda.cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
    _cuda.cublas.setPointerMode(handle, _cuda._POINTER_MODE_HOST)

    gname = {g: f"g{g or _crt_wgmma.GROUP_N}" for g in groups}
    variants = {}
    for cl in clusters:
        tag = "" if cl == 1 else f" cluster {cl}"
        variants.update({f"persistent {gname[g]}{tag}": {"group": g, "cluster": cl}
                         for g in groups})
        if kpad > 8192:  # one launch over the whole K against the default K chunks
            variants.update({f"whole K {gname[g]}{tag}": {"group": g, "k_chunk": kpad,
                                                          "cluster": cl} for g in groups})
    variants["one CTA per tile"] = {"ctas": 2**31 - 1}
    # the direct form on residues [Ar, -Ai, Ar, Ai] x [Br, Bi] of the same A and B (its u equals
    # the Karatsuba u only where As = Ar + Ai mod p, which random planes are not: not compared)
    a4 = b2 = None
    if direct and kpad <= 8192:  # (memory: at 16384^3 both forms' operands would need ~72 GB)
        a4 = cp.ascontiguousarray(cp.stack([a_res[:, 0], -a_res[:, 1], a_res[:, 0],
                                            a_res[:, 1]], 1))
        b2 = cp.ascontiguousarray(b_res[:, :2])
        for g in groups:
            variants[f"direct {gname[g]}"] = {"group": g, "_direct": True, "cluster": 1}
    t_c = timed(lambda: _cuda_crt._products_cublas(handle, a_res, b_res, planes, u2, moduli,
                                                     m, kpad), reps)
    ops = 3 * N * 2.0 * m * n * kpad
    rows = []
    for name, kw in variants.items():
        u1.fill(255)
        kw = dict(kw)
        ar, br = (a4, b2) if kw.pop("_direct", False) else (a_res, b_res)
        t_f = timed(lambda: _crt_wgmma.gemm_mod(ar, br, pm, u1, m, ld, **kw), reps)
        same = bool((u1[:, :, :, :n] == u2[:, :, :, :n]).all()) if ar is a_res else None
        row = {"shape": label, "variant": name, "m": m, "k": k, "n": n, "N": N,
               "fused_ms": 1e3 * t_f, "cublas_reduce_ms": 1e3 * t_c,
               "fused_tops": ops / t_f / 1e12, "cublas_tops": ops / t_c / 1e12,
               "speedup": t_c / t_f, "equal": same}
        print(f"  {label:>18} N={N} {name:>20}: fused {1e3 * t_f:8.2f} ms "
              f"({row['fused_tops']:5.0f} TOP/s)  cuBLAS+reduce {1e3 * t_c:8.2f} ms "
              f"({row['cublas_tops']:5.0f} TOP/s)  x{row['speedup']:.2f}  equal={same}", flush=True)
        rows.append(row)
    return rows


def _groups(text):
    return [int(g) for g in text.split(",") if g] or [None]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--square", default="4096,8192,16384")
    p.add_argument("--state-d", default="8,9,10,11,12")
    p.add_argument("--state-qubits", type=int, default=28)
    p.add_argument("--moduli", type=int, default=16)
    p.add_argument("--groups", default="", help="raster group widths to time (squares), "
                   "comma-separated; default _crt_wgmma.GROUP_N")
    p.add_argument("--state-groups", default="", help="the same for the state shapes")
    p.add_argument("--state-moduli", type=int, default=15)
    p.add_argument("--clusters", default="1,2", help="cluster sizes to time, comma-separated")
    p.add_argument("--no-direct", action="store_true", help="skip the direct form's timings")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    cp = _cp()
    from ozsim.gemm import _crt_wgmma

    clusters = [int(c) for c in args.clusters.split(",") if c] or [1]
    gpu = gpu_name()
    t0 = time.perf_counter()
    ok = _crt_wgmma.available()
    print(f"GPU {gpu}; fused kernel available: {ok} ({time.perf_counter() - t0:.1f} s) "
          f"{_crt_wgmma._state.get('error', '')}", flush=True)
    if not ok:
        return 1
    out = {"gpu": gpu, "date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv),
           "checks": [], "timing": []}
    cases = [(40, 96, 300, 3), (130, 200, 257, 8), (7, 1, 5, 2), (300, 16, 600, 5),
             (256, 256, 4096, 16), (1000, 1000, 1000, 4), (64, 9000, 70, 3),
             (513, 2048, 2100, 20)]
    good = True
    for form in (3, 4):
        for i, (m, k, n, N) in enumerate(cases):
            r = check(m, k, n, N, seed=i, form=form)
            out["checks"].append({"form": form, "m": m, "k": k, "n": n, "N": N, "ok": r})
            good &= r
        for i, (m, k, n, N, kw) in enumerate([(130, 200, 257, 8, {"ctas": 1}),
                                              (513, 2048, 2100, 20, {"ctas": 7, "group": 3}),
                                              (1000, 1000, 1000, 4, {"ctas": 2**31 - 1}),
                                              (64, 9000, 70, 3, {"k_chunk": 1024}),
                                              (300, 1000, 600, 5, {"k_chunk": 256})]):
            r = check(m, k, n, N, seed=50 + i, form=form, **kw)
            out["checks"].append({"form": form, "m": m, "k": k, "n": n, "N": N, "ok": r, **kw})
            good &= r
        kx = 65536 if form == 3 else 32768  # |T| = 2**30 (form 3), |D| = 2**30 (form 4)
        r = check(200, kx, 300, 2, seed=99, extreme=True, form=form, k_chunk=kx)
        out["checks"].append({"form": form, "m": 200, "k": kx, "n": 300, "N": 2,
                              "extreme": True, "ok": r})
        good &= r
    # clusters of 2 CTAs (B multicast; Karatsuba form): odd and single row tiles, few CTAs, K
    # chunks, the extremes
    print(f"  clusters of 2: at most {_crt_wgmma.max_clusters(2)} resident", flush=True)
    for i, (m, k, n, N, kw) in enumerate([(40, 96, 300, 3, {}), (130, 200, 257, 8, {}),
                                          (300, 16, 600, 5, {}), (256, 256, 4096, 16, {}),
                                          (513, 2048, 2100, 20, {}),
                                          (130, 200, 257, 8, {"ctas": 2}),
                                          (513, 2048, 2100, 20, {"ctas": 6, "group": 3}),
                                          (1000, 1000, 1000, 4, {"ctas": 2**31 - 1}),
                                          (64, 9000, 70, 3, {"k_chunk": 1024}),
                                          (300, 1000, 600, 5, {"k_chunk": 256})]):
        r = check(m, k, n, N, seed=70 + i, cluster=2, **kw)
        out["checks"].append({"form": 3, "m": m, "k": k, "n": n, "N": N, "ok": r,
                              "cluster": 2, **kw})
        good &= r
    r = check(200, 65536, 300, 2, seed=98, extreme=True, k_chunk=65536, cluster=2)
    out["checks"].append({"form": 3, "m": 200, "k": 65536, "n": 300, "N": 2, "extreme": True,
                          "cluster": 2, "ok": r})
    good &= r
    if not good:
        print("CHECKS FAILED", flush=True)
    for n in [int(x) for x in args.square.split(",") if x]:
        out["timing"] += time_both(f"square {n}", n, n, n, args.moduli, args.reps,
                                   groups=_groups(args.groups), clusters=clusters,
                                   direct=not args.no_direct)
        cp.get_default_memory_pool().free_all_blocks()
    for d in [int(x) for x in args.state_d.split(",") if x]:
        out["timing"] += time_both(f"N={args.state_qubits} d={d}", 2**d, 2**d,
                                   2 ** (args.state_qubits - d), args.state_moduli, args.reps,
                                   groups=_groups(args.state_groups), clusters=clusters,
                                   direct=not args.no_direct)
        cp.get_default_memory_pool().free_all_blocks()
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    print("\n| shape | N | variant | fused ms | TOP/s | cuBLAS+reduce ms | TOP/s | x | equal |")
    for r in out["timing"]:
        print(f"| {r['shape']} | {r['N']} | {r['variant']} | {r['fused_ms']:.2f} | "
              f"{r['fused_tops']:.0f} | "
              f"{r['cublas_reduce_ms']:.2f} | {r['cublas_tops']:.0f} | {r['speedup']:.2f} | "
              f"{r['equal']} |")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
