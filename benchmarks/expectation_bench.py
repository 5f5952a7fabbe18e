"""Expectation values of Pauli sums: time against the copy floor, per distinct X mask.

The question: what does ``Result.expectation`` cost on a large state? Each group of terms that
share an X mask costs one pass over the state (two reads of each amplitude, no write), so the
target is at most 2 copy floors per group. The floor (one read and one write of the state) is
measured in the same run as a device-to-device copy.

Usage:
    python benchmarks/expectation_bench.py                      # GPU, N = 30, 20 random terms
    python benchmarks/expectation_bench.py --device cpu --qubits 20

Writes ``benchmarks/results/expectation_bench-<device>-<date>.json`` (``--json`` overrides).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import device_tag, gpu_name, result_path, timed, write_json  # noqa: E402

from ozsim.observables import expectation, pauli_terms  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--qubits", type=int, default=None, help="N (GPU: 30, CPU: 20)")
    p.add_argument("--terms", type=int, default=20)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    if args.device == "gpu":
        import cupy as xp

        device = gpu_name()
        n = args.qubits or 30
    else:
        xp, device, n = np, "cpu", args.qubits or 20
    labels = ["".join(rng.choice(list("IXYZ"), n)) for _ in range(args.terms)]
    op = [(lab, float(c)) for lab, c in zip(labels, rng.standard_normal(args.terms))]
    groups = len({x for x, _, _ in pauli_terms(op, n)})
    psi = xp.asarray(rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n))
    psi /= xp.linalg.norm(psi)
    if xp is np:
        def clock(fn):
            fn()
            t0 = time.perf_counter()
            fn()
            return time.perf_counter() - t0
    else:
        def clock(fn):
            return timed(fn, 3)
    floor = clock(lambda out=xp.empty_like(psi): xp.copyto(out, psi))  # the copy floor
    sec = clock(lambda: expectation(psi, op))
    value = expectation(psi, op)
    row = dict(device=device, N=n, terms=args.terms, x_masks=groups, seconds=sec, floor_s=floor,
               floors_per_mask=sec / floor / groups, value=value)
    print(f"{device}: N = {n}, {args.terms} terms in {groups} X-mask groups: {sec * 1e3:.1f} ms, "
          f"floor {floor * 1e3:.2f} ms -> {sec / floor / groups:.2f} floors per X mask")
    path = write_json(args.json or result_path("expectation_bench",
                                               "cpu" if xp is np else device_tag(device)),
                      {"command": "python benchmarks/expectation_bench.py "
                       + " ".join(argv or sys.argv[1:]), "rows": [row]})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
