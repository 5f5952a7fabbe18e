"""Speed of light of scheme II's state-vector GEMM, stage by stage, against cuBLAS ZGEMM.

Run from the repository root on a GPU with CuPy::

    PYTHONPATH=. python3 benchmarks/crt_floor.py --qubits 26 --d 8,9,10,11,12 \
        --json benchmarks/results/crt_floor.json

``int8-crt-auto`` applies a ``2**d``-qubit gate to an N-qubit state (``E = 2**N`` complex
amplitudes) in four passes over state-sized data, whatever the kernels: the analysis of B (reads
16 bytes per amplitude), B's residues (reads 16, writes one byte per plane and modulus: 2 planes
in the direct form, ``K <= 1024``, 3 in Karatsuba's), the products (read those planes, write the
two UINT8 residues ``u_re, u_im`` per modulus) and ``crt_finish`` (reads ``2 N_mod`` bytes,
writes 16). This script measures what each pass could cost at best on this GPU, in one run:

* ``twin`` kernels with each pass's access pattern and no arithmetic to speak of (the same
  4-amplitude-per-thread items, 4-byte plane stores and loads as ``crt_residues32`` and
  ``crt_finish``), and a plain read of B for the analysis;
* the INT8 tensor-core rate: the faster of one cuBLAS INT8 -> INT32 GEMM of 8192^3
  (``gemm_bench.int8_rate``) and ozsim's own products kernel on the square 8192 of 16 moduli
  (48 products); the products' floor is the larger of their integer operations at that rate and
  their bytes at the copy bandwidth (the kernel alone on the gate's shape is timed beside it);
* cuBLAS ZGEMM on the same shape (and, beside it, the transposing copy of the state that the
  zgemm backend pays per brickwork gate), and ``zgemm(..., backend="int8-crt-auto", T=0)``.

The number of moduli is the one ``int8-crt-auto`` picks at T = 0 for a Haar gate and a
Gaussian state (computed here on the host). Nothing is asserted; it prints a table and writes
JSON. The floor is a bound on *this pipeline*: a different data flow (fewer passes) has its own.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from crt_fused_probe import random_int8  # noqa: E402
from gemm_bench import _cupy, gpu_name, int8_rate, state_inputs, timed  # noqa: E402

_TWINS = r"""
// B read once (the analysis): each warp load covers 512 contiguous bytes.
extern "C" __global__ void read_twin(const double2* __restrict__ x, long long n,
                                     double* __restrict__ out)
{
    double m = 0.0;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const double2 v = x[i];
        m = fmax(m, fmax(fabs(v.x), fabs(v.y)));
    }
    out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = m;
}

// B's residues: 4 consecutive amplitudes a thread, one 4-byte word per plane (planes n4 words
// apart), as crt_residues32 stores them; PL planes (compile time, as there).
template <int PL>
__device__ void residue_twin(const double2* __restrict__ x, long long n4,
                             unsigned int* __restrict__ out)
{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n4; q += step) {
        unsigned int wr = 0u, wi = 0u;
#pragma unroll
        for (int c = 0; c < 4; ++c) {
            const double2 v = x[q * 4 + c];
            wr |= ((unsigned int)__double2int_rn(v.x * 64.0) & 0xffu) << (8 * c);
            wi |= ((unsigned int)__double2int_rn(v.y * 64.0) & 0xffu) << (8 * c);
        }
#pragma unroll
        for (int l = 0; l < PL; ++l)
            out[(long long)l * n4 + q] = ((l & 1) ? wi : wr) ^ (0x01010101u * (unsigned int)l);
    }
}

// crt_finish: 4 consecutive outputs a thread, every plane's 4-byte word loaded up front (as
// FINISH_PRELOAD), u_re planes then u_im, 4 complex128 written.
template <int PL>
__device__ void finish_twin(const unsigned int* __restrict__ u, long long n4,
                            double2* __restrict__ out)
{
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < n4; q += step) {
        unsigned int w[PL];
#pragma unroll
        for (int l = 0; l < PL; ++l) w[l] = u[(long long)l * n4 + q];
        double re[4] = {0.0, 0.0, 0.0, 0.0}, im[4] = {0.0, 0.0, 0.0, 0.0};
#pragma unroll
        for (int l = 0; l < PL; ++l) {
#pragma unroll
            for (int c = 0; c < 4; ++c) {
                const double b = (double)((w[l] >> (8 * c)) & 0xffu);
                if (l < PL / 2) re[c] += b; else im[c] += b;
            }
        }
#pragma unroll
        for (int c = 0; c < 4; ++c) out[q * 4 + c] = make_double2(re[c], im[c]);
    }
}

#define TWINS(PL)                                                                             \
    extern "C" __global__ void residue_twin_##PL(const double2* __restrict__ x, long long n4, \
                                                 unsigned int* __restrict__ out)              \
    { residue_twin<PL>(x, n4, out); }                                                         \
    extern "C" __global__ void finish_twin_##PL(const unsigned int* __restrict__ u,          \
                                                long long n4, double2* __restrict__ out)      \
    { finish_twin<PL>(u, n4, out); }
TWINS(30)
TWINS(32)
TWINS(45)
TWINS(48)
"""


def _plan(d: int, seed: int = 0):
    """``int8-crt-auto``'s plan at T = 0 for a Haar ``2**d`` gate and a Gaussian state."""
    from ozsim.gates.haar import haar_unitary
    from ozsim.gemm import ozaki2

    rng = np.random.default_rng(seed)
    gate = haar_unitary(1 << d, rng)
    cols = rng.standard_normal((4096, 1 << d)) + 1j * rng.standard_normal((4096, 1 << d))
    _, mom_a = ozaki2.analyse_rows(gate)
    _, mom_b = ozaki2.analyse_rows(cols)
    return ozaki2.choose_plan(mom_a, mom_b, 0.0)


def _products(nm: int, k: int, ncols: int, direct: bool, reps: int) -> float:
    """Seconds of the fused products kernel alone (``_crt_wgmma.gemm_mod``) on random residues:
    a ``k x k`` gate (A) times ``k x ncols`` (B), ``nm`` moduli, the direct or Karatsuba form."""
    cp = _cupy()
    from ozsim.gemm import _crt_wgmma, _cuda_crt

    if not _crt_wgmma.available():
        raise RuntimeError(f"the fused products kernel is not available: {_crt_wgmma._state}")
    a = random_int8((nm, 4 if direct else 3, k, k), 11)
    b = random_int8((nm, 2 if direct else 3, ncols, k), 12)
    u = cp.empty((nm, 2, k, ncols), dtype=cp.uint8)
    pm = _cuda_crt.modulus_table(nm)
    return timed(lambda: _crt_wgmma.gemm_mod(a, b, pm, u, k, ncols), reps)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--qubits", type=int, default=26)
    p.add_argument("--d", default="8,9,10,11,12")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    cp = _cupy()
    from ozsim.gemm import _cuda_crt, zgemm

    n = args.qubits
    e = 1 << n
    mod = cp.RawModule(code=_TWINS)
    read_k = mod.get_function("read_twin")
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    grid, block = sms * 8, 256
    x = cp.random.RandomState(1).standard_normal(2 * e).view(cp.complex128)
    red = cp.empty(grid * block, dtype=cp.float64)
    out = cp.empty(e, dtype=cp.complex128)
    planes_max = 3 * 20
    u = cp.arange(planes_max * (e // 4), dtype=cp.uint32)  # 4 GiB of residue planes at N = 26
    n4 = np.int64(e // 4)

    def bw(nbytes, fn):
        t = timed(fn, args.reps)
        return t, nbytes / t

    t_copy, bw_copy = bw(2 * 16 * e, lambda: cp.copyto(out, x))
    t_read, bw_read = bw(16 * e, lambda: read_k((grid,), (block,), (x, np.int64(e), red)))
    rate_cublas = int8_rate(8192, 8192, 8192, args.reps)
    t_sq = _products(16, 8192, 8192, False, max(2, args.reps // 2))
    rate = max(rate_cublas, 16 * 3 * 2.0 * 8192**3 / t_sq)
    print(f"{gpu_name()}: copy {bw_copy / 1e12:.2f} TB/s, read {bw_read / 1e12:.2f} TB/s, "
          f"INT8 cuBLAS 8192^3 {rate_cublas / 1e15:.3f} POP/s, crt_gemm_mod3 8192^3 x 48 "
          f"{t_sq * 1e3:.1f} ms; rate used {rate / 1e15:.3f} POP/s", flush=True)

    rows = []
    for d in [int(s) for s in args.d.split(",") if s]:
        plan = _plan(d)
        nm, k = plan.num_moduli, 1 << d
        direct = k <= _cuda_crt.DIRECT_MAX_K
        pb = 2 if direct else 3  # B's residue planes per modulus
        res_k = mod.get_function(f"residue_twin_{pb * nm}")
        fin_k = mod.get_function(f"finish_twin_{2 * nm}")
        t_res = timed(lambda: res_k((grid,), (block,), (x, n4, u)), args.reps)
        t_fin = timed(lambda: fin_k((grid,), (block,), (u, n4, out)), args.reps)
        ops = (4 if direct else 3) * nm * 2.0 * k * e
        t_prod = max(ops / rate, (pb + 2) * nm * e / bw_copy)
        t_prod_now = _products(nm, k, e // k, direct, args.reps)
        floor = t_read + t_res + t_prod + t_fin

        gate, state = state_inputs(n, d, seed=d)
        t_zgemm = timed(lambda: gate @ state, args.reps)
        half = 1 << (n // 2)
        t_perm = timed(lambda: cp.ascontiguousarray(state.reshape(half, -1).T), args.reps)
        t_crt = timed(lambda: zgemm(gate, state, backend="int8-crt-auto", T=0.0), args.reps)
        gate = state = None
        cp.get_default_memory_pool().free_all_blocks()
        rows.append({
            "d": d, "num_moduli": nm, "form": "direct" if direct else "karatsuba",
            "analysis_floor_ms": t_read * 1e3, "residues_floor_ms": t_res * 1e3,
            "products_floor_ms": t_prod * 1e3, "products_tensor_ms": ops / rate * 1e3,
            "finish_floor_ms": t_fin * 1e3, "floor_ms": floor * 1e3,
            "products_kernel_ms": t_prod_now * 1e3,
            "zgemm_ms": t_zgemm * 1e3, "permute_copy_ms": t_perm * 1e3,
            "crt_ms": t_crt * 1e3,
            "residues_floor_tb_s": (16 + pb * nm) * e / t_res / 1e12,
            "finish_floor_tb_s": (16 + 2 * nm) * e / t_fin / 1e12,
        })
        r = rows[-1]
        print(f"d={d:2d} N_mod={nm} {r['form']:9s} floor: analysis {r['analysis_floor_ms']:.2f} "
              f"residues {r['residues_floor_ms']:.2f} ({r['residues_floor_tb_s']:.2f} TB/s) "
              f"products {r['products_floor_ms']:.2f} (tensor {r['products_tensor_ms']:.2f}; "
              f"kernel now {r['products_kernel_ms']:.2f}) "
              f"finish {r['finish_floor_ms']:.2f} ({r['finish_floor_tb_s']:.2f} TB/s)", flush=True)

    print(f"\nN = {n}, ms per gate (floor = the four passes at their twins' speed; x = zgemm / t)")
    print("| d | N_mod | floor | crt now | zgemm | zgemm + copy | x floor | x now |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        zc = r["zgemm_ms"] + r["permute_copy_ms"]
        print(f"| {r['d']} | {r['num_moduli']} | {r['floor_ms']:.2f} | {r['crt_ms']:.2f} | "
              f"{r['zgemm_ms']:.2f} | {zc:.2f} | {zc / r['floor_ms']:.2f} | "
              f"{r['zgemm_ms'] / r['crt_ms']:.2f} |")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"gpu": gpu_name(), "qubits": n, "copy_tb_s": bw_copy / 1e12,
                       "read_tb_s": bw_read / 1e12, "int8_pop_s": rate / 1e15,
                       "copy_ms": t_copy * 1e3, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
