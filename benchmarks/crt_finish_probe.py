"""Scheme II's CRT reconstruction kernel (``crt_finish``) against an earlier version.

Run from the repository root on a GPU with CuPy::

    PYTHONPATH=. python3 benchmarks/crt_finish_probe.py [--old OLD_CUDA_CRT.py] \
        --json benchmarks/results/crt_finish_probe.json

For the ``(N, 2, m, ld)`` UINT8 residues of three shapes (N = 28 state GEMMs with d = 8 and
d = 10, a square 8192; random residues below each modulus) it times ``crt_finish`` as ozsim
launches it, compiled in other variants (:data:`VARIANTS`), and (``--old``: a copy of an
earlier ``ozsim/gemm/_cuda_crt.py``) the earlier kernel on the same arguments, every output
bitwise equal to the first. Prints a table, writes JSON; nothing is asserted (the reconstruction is tested
against the CPU in ``tests/test_gpu_crt.py``).
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from crt_residue_probe import probe_args, report  # noqa: E402
from gemm_bench import _cupy, timed  # noqa: E402


#: Variants ``(parts per pass, threads, blocks)``: ``-DFINISH_PARTS``, ``-DFINISH_THREADS``,
#: ``-DFINISH_BLOCKS`` (the launch bounds apply to one part per pass only); parts -1: one part
#: per pass with every word loaded up front (``-DFINISH_PRELOAD=1``).
VARIANTS = [(1, 256, 3), (2, 256, 1), (-1, 256, 3), (-1, 256, 2)]


def _variant(N, parts, threads, blocks):
    """``crt_finish`` for N moduli compiled with the given pass and launch-bound options."""
    cp = _cupy()
    from ozsim.gemm import _cuda_crt
    from ozsim.gemm.ozaki2 import crt_constants

    opts = (f"-DNMODC={N}", f"-DNLIMBC={crt_constants(N).num_limbs}",
            f"-DFINISH_PARTS={abs(parts)}", f"-DFINISH_PRELOAD={int(parts < 0)}",
            f"-DFINISH_THREADS={threads}", f"-DFINISH_BLOCKS={blocks}")
    return cp.RawModule(code=_cuda_crt._source(), options=opts).get_function("crt_finish")


def run_case(label, N, m, nb, reps, old):
    cp = _cupy()
    from ozsim.gemm import _cuda_crt
    from ozsim.gemm.ozaki2 import crt_constants

    ld = _cuda_crt._pad16(nb)
    rs = cp.random.RandomState(N + m)
    u = cp.empty((N, 2, m, ld), dtype=cp.uint8)
    for i, p in enumerate(crt_constants(N).moduli):  # residues in [0, p)
        u[i] = (rs.random_sample((2, m, ld), dtype=np.float32) * p).astype(cp.uint8)
    fa = rs.randint(-40, 40, size=m).astype(cp.int32)
    fb = rs.randint(-40, 40, size=nb).astype(cp.int32)
    gsum = np.int32(100)
    cst = _cuda_crt._crt_constants_gpu(N)
    ref = cp.empty((m, nb), dtype=cp.complex128)
    out = cp.empty_like(ref)
    nbytes = u.nbytes + ref.nbytes
    variants = [("ozsim", _cuda_crt._kernel("crt_finish", num_moduli=N), _cuda_crt._THREADS)]
    for parts, threads, blocks in VARIANTS:
        variants.append((f"{parts} part/pass, bounds ({threads}, {blocks})",
                         _variant(N, parts, threads, blocks), threads))
    if old is not None:
        variants.append(("old", old._kernel("crt_finish", num_moduli=N), old._THREADS))
    rows = []
    for i, (name, kern, threads) in enumerate(variants):
        dst = ref if i == 0 else out
        args = (u, np.int64(m), np.int64(nb), np.int64(ld), cst, fa, fb, gsum, dst,
                np.int64(nb), np.int64(1), np.int64(0))
        grid = (-(-nb // (4 * threads)), min(m, 65535))
        t = timed(lambda: kern(grid, (threads,), args), reps)
        equal = True if i == 0 else bool(cp.array_equal(out.view(cp.float64),
                                                        ref.view(cp.float64)))
        rows.append({"case": label, "variant": f"{name}, {threads} threads", "ms": 1e3 * t,
                     "GB/s": nbytes / t / 1e9, "equal": equal})
        print(f"  {label:>24} {rows[-1]['variant']:>44}: {1e3 * t:8.3f} ms "
              f"{nbytes / t / 1e9:7.0f} GB/s equal={equal}", flush=True)
    return rows


def main(argv=None) -> int:
    args, old = probe_args(__doc__, argv)
    rows = []
    for label, N, m, nb in [("N=28 d=8 (15 moduli)", 15, 256, 1 << 20),
                            ("N=28 d=10 (16 moduli)", 16, 1024, 1 << 18),
                            ("square 8192 (16 moduli)", 16, 8192, 8192)]:
        rows += run_case(label, N, m, nb, args.reps, old)
        _cupy().get_default_memory_pool().free_all_blocks()
    report(rows, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
