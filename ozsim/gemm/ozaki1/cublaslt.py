"""INT8 -> INT32 "TN" GEMMs through cuBLASLt with the algorithm chosen by timing (private).

Why: ``cublasGemmEx``'s own choice of INT8 kernel on the H100 falls off a cliff above K = 8192
(1.34 -> 0.77 POP/s for M = N = 16384, ``benchmarks/RESULTS.md`` section 2), so ozsim cut long
products into K <= 8192 pieces added with beta = 1 (1.16 POP/s at K = 16384). Here the
candidates are: ``cublasGemmEx`` in those pieces, and the first :data:`CANDIDATES` algorithms
``cublasLtMatmulAlgoGetHeuristic`` proposes for the whole K (any split-K reduction of INT32
partial sums is exact). The first time a shape is seen each candidate is timed (3 calls after
a warm-up), the 3 fastest again back to back (two interleaved rounds of 8 calls, the faster
round kept), and the fastest is kept for the process; results are the same integers whichever runs.

Only large products are tuned (:data:`MIN_TUNED_OPS`); smaller ones run ``cublasGemmEx`` as
before. ``OZSIM_CUBLASLT=0`` turns the tuner off. The library is the ``libcublasLt`` that CuPy's
cuBLAS already loaded (found in ``/proc/self/maps``), reached through :mod:`ctypes`.

References: cuBLAS documentation, "cuBLASLt API" (``cublasLtMatmul``,
``cublasLtMatmulAlgoGetHeuristic``, INT8 "TN" with ``CUBLAS_COMPUTE_32I``).
"""

from __future__ import annotations

import ctypes

import cupy as cp

from ... import config

__all__ = ["CANDIDATES", "MIN_TUNED_OPS", "choices", "gemm_tn", "tuning_log"]

#: cuBLASLt algorithms tried per shape (besides ``cublasGemmEx`` in K pieces).
CANDIDATES = 8
#: Products below ``2 m n k`` = this many operations are not tuned (tuning would not pay).
MIN_TUNED_OPS = 2**38
_WORKSPACE = 32 << 20
#: Sustained timing rounds (8 calls each) of the :data:`FINALISTS` fastest candidates.
TUNING_ROUNDS = 2
FINALISTS = 3

_CUDA_R_8I, _CUDA_R_32I, _COMPUTE_32I = 3, 10, 72
_OP_N, _OP_T = 0, 1
_DESC_TRANSA, _DESC_TRANSB, _PREF_MAX_WORKSPACE = 3, 4, 1


class _Algo(ctypes.Structure):
    _fields_ = [("data", ctypes.c_uint64 * 8)]


class _Heuristic(ctypes.Structure):
    _fields_ = [("algo", _Algo), ("workspaceSize", ctypes.c_size_t), ("state", ctypes.c_int),
                ("wavesCount", ctypes.c_float), ("reserved", ctypes.c_int * 4)]


_state: dict = {}
#: ``(m_, n_, k_, lda, ldb, ldc) -> choice``: ``"gemmex"`` or ``("lt", index)``, per process.
choices: dict = {}


def _lib():
    """The process's libcublasLt as a :class:`ctypes.CDLL`, or ``None``."""
    if "lib" in _state:
        return _state["lib"]
    lib = None
    if config.get("OZSIM_CUBLASLT") != "0":
        try:
            with open("/proc/self/maps") as fh:
                paths = sorted({ln.split()[-1] for ln in fh if "libcublasLt.so" in ln})
            for path in paths or ["libcublasLt.so"]:
                try:
                    lib = ctypes.CDLL(path)
                    break
                except OSError:
                    continue
        except OSError:
            lib = None
    if lib is not None:
        handle = ctypes.c_void_p()
        if lib.cublasLtCreate(ctypes.byref(handle)) != 0:
            lib = None
        else:
            _state["handle"] = handle
            _state["workspace"] = cp.empty(_WORKSPACE, dtype=cp.uint8)
    _state["lib"] = lib
    return lib


def _check(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"{what} failed with cuBLAS status {status}")


def _layout(lib, dtype: int, rows: int, cols: int, ld: int):
    lay = ctypes.c_void_p()
    _check(lib.cublasLtMatrixLayoutCreate(ctypes.byref(lay), ctypes.c_int(dtype),
                                          ctypes.c_uint64(rows), ctypes.c_uint64(cols),
                                          ctypes.c_int64(ld)), "cublasLtMatrixLayoutCreate")
    return lay


class _Plan:
    """Descriptors and candidate algorithms of one shape."""

    def __init__(self, lib, m_, n_, k_, lda, ldb, ldc):
        self.desc = ctypes.c_void_p()
        _check(lib.cublasLtMatmulDescCreate(ctypes.byref(self.desc), ctypes.c_int(_COMPUTE_32I),
                                            ctypes.c_int(_CUDA_R_32I)), "cublasLtMatmulDescCreate")
        for attr, op in ((_DESC_TRANSA, _OP_T), (_DESC_TRANSB, _OP_N)):
            v = ctypes.c_int32(op)
            _check(lib.cublasLtMatmulDescSetAttribute(self.desc, ctypes.c_int(attr),
                                                      ctypes.byref(v), ctypes.c_size_t(4)),
                   "cublasLtMatmulDescSetAttribute")
        self.a = _layout(lib, _CUDA_R_8I, k_, m_, lda)
        self.b = _layout(lib, _CUDA_R_8I, k_, n_, ldb)
        self.c = _layout(lib, _CUDA_R_32I, m_, n_, ldc)
        pref = ctypes.c_void_p()
        _check(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)),
               "cublasLtMatmulPreferenceCreate")
        ws = ctypes.c_uint64(_WORKSPACE)
        _check(lib.cublasLtMatmulPreferenceSetAttribute(pref, ctypes.c_int(_PREF_MAX_WORKSPACE),
                                                        ctypes.byref(ws), ctypes.c_size_t(8)),
               "cublasLtMatmulPreferenceSetAttribute")
        res = (_Heuristic * CANDIDATES)()
        count = ctypes.c_int(0)
        status = lib.cublasLtMatmulAlgoGetHeuristic(
            _state["handle"], self.desc, self.a, self.b, self.c, self.c, pref,
            ctypes.c_int(CANDIDATES), res, ctypes.byref(count))
        lib.cublasLtMatmulPreferenceDestroy(pref)
        self.algos = [res[i] for i in range(count.value)
                      if status == 0 and res[i].state == 0 and res[i].workspaceSize <= _WORKSPACE]

    def run(self, lib, index, a_ptr, b_ptr, c_ptr, beta: bool) -> int:
        one, zero = ctypes.c_int32(1), ctypes.c_int32(0)
        ws = _state["workspace"]
        return lib.cublasLtMatmul(
            _state["handle"], self.desc, ctypes.byref(one), ctypes.c_void_p(a_ptr), self.a,
            ctypes.c_void_p(b_ptr), self.b, ctypes.byref(one if beta else zero),
            ctypes.c_void_p(c_ptr), self.c, ctypes.c_void_p(c_ptr), self.c,
            ctypes.byref(self.algos[index].algo), ctypes.c_void_p(ws.data.ptr),
            ctypes.c_size_t(_WORKSPACE), ctypes.c_void_p(cp.cuda.get_current_stream().ptr))


_plans: dict = {}


def _time(fn, reps: int = 2) -> float:
    fn()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return cp.cuda.get_elapsed_time(start, stop) / reps


def gemm_tn(gemmex_pieces, m_, n_, k_, a_ptr, lda, b_ptr, ldb, c_ptr, ldc, beta=False) -> None:
    """``C (m_ x n_) = A^T B (+ C if beta)``, INT8 inputs, INT32 output, the fastest way known.

    Args:
        gemmex_pieces: callable ``(beta) -> None`` running the product with ``cublasGemmEx`` in
            K pieces (the fallback and one candidate).
        m_, n_, k_, a_ptr, lda, b_ptr, ldb, c_ptr, ldc: as ``cublasGemmEx`` "TN" (column-major
            ``A`` ``k_ x m_``, ``B`` ``k_ x n_``, ``C`` ``m_ x n_``); the caller guarantees that
            every INT32 sum is exact in any order (then every candidate gives the same bits).

    The first call of a large shape times every candidate on the caller's buffers (``C`` is
    overwritten then recomputed), so it must not alias ``A`` or ``B``.
    """
    lib = _lib()
    key = (m_, n_, k_, lda, ldb, ldc)
    if lib is None or 2 * m_ * n_ * k_ < MIN_TUNED_OPS:
        gemmex_pieces(beta)
        return
    choice = choices.get(key)
    if choice is None and beta:  # tuning overwrites C: only on a beta = 0 call
        gemmex_pieces(beta)
        return
    if choice is None:
        plan = _plans.get(key)
        if plan is None:
            plan = _plans[key] = _Plan(lib, m_, n_, k_, lda, ldb, ldc)
        cands = {"gemmex": lambda: gemmex_pieces(False)}
        for i in range(len(plan.algos)):
            if plan.run(lib, i, a_ptr, b_ptr, c_ptr, False) == 0:
                cands[("lt", i)] = lambda i=i: plan.run(lib, i, a_ptr, b_ptr, c_ptr, False)
        # a round of 3 calls each, then the 3 fastest in two interleaved rounds of 8 calls back
        # to back: short timings picked algorithms up to 20% slower than the best sustained one
        # (clock ramps, noise; benchmarks/cublaslt_probe.py, RESULTS.md section 3.1)
        quick = {name: _time(fn, 3) for name, fn in cands.items()}
        best = sorted(quick, key=quick.get)[:FINALISTS]
        times: dict = {}
        for _ in range(TUNING_ROUNDS):
            for name in best:
                t = _time(cands[name], 8)
                times[name] = min(t, times.get(name, t))
        choice = choices[key] = min(times, key=times.get)
        _state.setdefault("log", []).append((key, {str(k): round(v, 3) for k, v in quick.items()}
                                             | {f"{k} sustained": round(v, 3)
                                                for k, v in times.items()},
                                             str(choice)))
    if choice == "gemmex":
        gemmex_pieces(beta)
    else:
        _check(_plans[key].run(lib, choice[1], a_ptr, b_ptr, c_ptr, beta), "cublasLtMatmul")


def tuning_log() -> list:
    """``(shape, {candidate: ms}, choice)`` for every shape tuned in this process."""
    return list(_state.get("log", []))

