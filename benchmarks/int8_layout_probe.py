"""Probe: how fast do the INT8 slice GEMMs of int8x{s} run in different operand layouts?

Run from the repository root on a GPU machine::

    PYTHONPATH=. python3 benchmarks/int8_layout_probe.py

For one shape (M = 2n rows of B^T, N = 2m rows of A, inner dimension kpad) and s slices, times the
``s(s+1)/2`` slice products (random INT8 data, cuBLAS ``cublasGemmEx`` INT8 -> INT32, "TN"):

- ``grouped``: one GEMM per group t, K = (t-1) kpad, operands in ozsim's (rows, s, kpad) layout
  (leading dimension s kpad): what ``ozsim.gemm._cuda`` does;
- ``grouped+pad``: the same with the leading dimension padded by 128 bytes;
- ``contiguous``: one GEMM per group on operands copied to (rows, (t-1) kpad) buffers
  (GEMMs only; the copies, cudaMemcpy2DAsync, timed separately);
- ``pairs``: one GEMM per slice pair (K = kpad, slice-major layout), INT32 accumulation with
  beta = 1;
- ``R``: one contiguous GEMM with K = kpad (and K = 8 kpad), the rate the ceiling uses.

Then the per-stage breakdown of ``zgemm(..., backend="int8x8")`` for state-vector shapes.
"""

from __future__ import annotations

import statistics
import sys

import cupy as cp
import numpy as np

from ozsim.gemm import _cuda, zgemm

H = cp.cuda.device.get_cublas_handle()
_BETA1 = np.ones(1, dtype=np.int32)


def gemm(m_, n_, k_, a, lda, b, ldb, c, ldc, beta=0):
    _cuda.cublas.gemmEx(H, _cuda._OP_T, _cuda._OP_N, m_, n_, k_, _cuda._ONE.ctypes.data, a,
                        _cuda._CUDA_R_8I, lda, b, _cuda._CUDA_R_8I, ldb,
                        (_BETA1 if beta else _cuda._ZERO).ctypes.data, c, _cuda._CUDA_R_32I, ldc,
                        _cuda._COMPUTE_32I, _cuda._GEMM_DEFAULT)


def timed(fn, reps=3):
    fn()
    cp.cuda.Device().synchronize()
    ts = []
    for _ in range(reps):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        ts.append(cp.cuda.get_elapsed_time(e0, e1))
    return statistics.median(ts)


def probe(M, N, kp, s, label):
    rs = cp.random.RandomState(0)
    ops = sum(2.0 * M * N * (t - 1) * kp for t in range(2, s + 2))
    A = rs.randint(-127, 128, size=(N, s * kp), dtype=np.int8)
    B = rs.randint(-127, 128, size=(M, s * kp), dtype=np.int8)
    C = cp.empty((N, M), dtype=cp.int32)
    res = {}

    def grouped(Ab=A, Bb=B, ld=s * kp):
        for t in range(s + 1, 1, -1):
            gemm(M, N, (t - 1) * kp, Bb.data.ptr + (s - t + 1) * kp, ld, Ab.data.ptr, ld,
                 C.data.ptr, M)

    res["grouped"] = timed(grouped)
    pad = s * kp + 128
    Ap = cp.zeros((N, pad), dtype=cp.int8)
    Bp = cp.zeros((M, pad), dtype=cp.int8)
    Ap[:, : s * kp] = A
    Bp[:, : s * kp] = B
    res["grouped+pad"] = timed(lambda: grouped(Ap, Bp, pad))
    Ac = cp.empty(N * s * kp, dtype=cp.int8)
    Bc = cp.empty(M * s * kp, dtype=cp.int8)
    stream = cp.cuda.get_current_stream().ptr
    kind = cp.cuda.runtime.memcpyDeviceToDevice

    def copies(t):
        w = (t - 1) * kp
        cp.cuda.runtime.memcpy2DAsync(Ac.data.ptr, w, A.data.ptr, s * kp, w, N, kind, stream)
        cp.cuda.runtime.memcpy2DAsync(Bc.data.ptr, w, B.data.ptr + (s - t + 1) * kp, s * kp, w,
                                      M, kind, stream)

    def contiguous():
        for t in range(s + 1, 1, -1):
            gemm(M, N, (t - 1) * kp, Bc.data.ptr, (t - 1) * kp, Ac.data.ptr, (t - 1) * kp,
                 C.data.ptr, M)

    res["contiguous (GEMMs)"] = timed(contiguous)
    res["contiguous (copies)"] = timed(lambda: [copies(t) for t in range(s + 1, 1, -1)])
    As = A.reshape(N, s, kp).transpose(1, 0, 2).copy()
    Bs = B.reshape(M, s, kp).transpose(1, 0, 2).copy()

    def pairs():
        for t in range(s + 1, 1, -1):
            for a in range(t - 1):
                j = t - 2 - a
                gemm(M, N, kp, Bs[j].data.ptr, kp, As[a].data.ptr, kp, C.data.ptr, M,
                     beta=a > 0)

    res["pairs (beta=1)"] = timed(pairs)
    r1 = timed(lambda: gemm(M, N, kp, B.data.ptr, kp, A.data.ptr, kp, C.data.ptr, M))
    r8 = None
    if s >= 8:  # A and B hold (rows, 8 kpad) contiguous matrices
        r8 = timed(lambda: gemm(M, N, 8 * kp, B.data.ptr, 8 * kp, A.data.ptr, 8 * kp,
                                C.data.ptr, M))
    print(f"{label}: M={M} N={N} kpad={kp} s={s}; {ops / 1e12:.1f} Tops in the s(s+1)/2 "
          "slice products", flush=True)
    for name, ms in res.items():
        rate = "" if "copies" in name else f"{ops / ms / 1e9:9.1f} TOP/s"
        print(f"   {name:>22} {ms:9.3f} ms {rate}", flush=True)
    print(f"   {'R (one GEMM, K=kpad)':>22} {r1:9.3f} ms {2.0 * M * N * kp / r1 / 1e9:9.1f} TOP/s")
    if r8:
        print(f"   {'R (one GEMM, K=8kpad)':>22} {r8:9.3f} ms "
              f"{2.0 * M * N * 8 * kp / r8 / 1e9:9.1f} TOP/s", flush=True)


def stages(N, d, s=8):
    rs = cp.random.RandomState(d)
    gate = cp.asarray(np.linalg.qr(np.random.default_rng(d).standard_normal((1 << d,) * 2))[0]
                      + 0j)
    st = rs.standard_normal((1 << d, 1 << (N - d))) + 1j * rs.standard_normal((1 << d,
                                                                                1 << (N - d)))
    out = cp.empty_like(st)
    total = timed(lambda: zgemm(gate, st, backend=f"int8x{s}", out=out))
    native = timed(lambda: zgemm(gate, st, backend="zgemm", out=out))
    with _cuda.profile_stages() as t:
        zgemm(gate, st, backend=f"int8x{s}", out=out)
    print(f"N={N} d={d} int8x{s}: {total:.2f} ms (zgemm {native:.2f} ms); "
          + ", ".join(f"{k} {v:.2f}" for k, v in t.items()) + f"; blocks "
          f"{_cuda.last_stats['blocks']}", flush=True)


if __name__ == "__main__":
    probe(16384, 16384, 8192, 8, "square n=8192")
    probe(2 << 24, 8, 4, 8, "state N=26 d=2")
    probe(2 << 20, 128, 64, 8, "state N=26 d=6")
    for d in (2, 3, 4, 6, 8, 10):
        stages(26, d)
    sys.exit(0)
