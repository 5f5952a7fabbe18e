"""Three launches of the fused scheme II products (``crt_gemm_mod3``, clusters of 1) on the
N = 28 state shape of a d-qubit gate (15 moduli, random residues), for Nsight Compute::

    PYTHONPATH=. ncu --kernel-name crt_gemm_mod3 --launch-skip 2 --launch-count 1 \\
        --section WarpStateStats --section SourceCounters python3 benchmarks/crt_ncu_launch.py 10
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from crt_fused_probe import random_int8  # noqa: E402
from gemm_bench import _cupy  # noqa: E402


def main(argv=None) -> int:
    from ozsim.gemm import _crt_wgmma, _cuda_crt

    argv = sys.argv[1:] if argv is None else argv
    cp = _cupy()
    d, qubits, N = int(argv[0]) if argv else 10, 28, 15
    m = k = 2**d
    n = 2 ** (qubits - d)
    if not _crt_wgmma.available():
        print(f"fused kernel unavailable: {_crt_wgmma._state.get('error')}")
        return 1
    a = random_int8((N, 3, m, k), 1)
    b = random_int8((N, 3, n, k), 2)
    u = cp.empty((N, 2, m, n), dtype=cp.uint8)
    pm = _cuda_crt.modulus_table(N)
    for _ in range(3):
        _crt_wgmma.gemm_mod(a, b, pm, u, m, n, cluster=1)
    cp.cuda.Device().synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
