"""Quantum volume and brickwork end to end: wall time per backend, amplitudes against the first.

The question: how long does a whole random circuit take with each backend, fusion included?
``quantum_volume(N, depth, seed)`` from Qiskit, or its gates from a file made once where Qiskit
is installed (``--save``), for machines without Qiskit (``--gates-file``). ``--brickwork d``
runs a brickwork of Haar-random d-qubit gates instead (:func:`ozsim.gates.brickwork`, no Qiskit).

Usage:
    python benchmarks/qv_bench.py --qubits 30 --depth 30 --save qv30.npz --save-only  # Qiskit
    python benchmarks/qv_bench.py --gates-file qv30.npz                       # GPU run
    python benchmarks/qv_bench.py --qubits 12 --depth 12 --device cpu
    python benchmarks/qv_bench.py --qubits 30 --depth 10 --brickwork 6 --backends zgemm,auto:T=0
    python benchmarks/qv_bench.py --qubits 32 --depth 4 --brickwork 2 --compare-first 4194304

A backend name ending in ``-gemm`` (``zgemm-gemm``) runs with ``Simulator(one_pass=False)``: every
gate through the GEMM path (cuBLAS ZGEMM for zgemm), fusion planned for it: the native baseline.
``name@m`` (``zgemm-gemm@6``) caps fusion at m qubits instead of the cost model's choice.

Writes ``benchmarks/results/qv_bench-<device>-<date>.json`` (``--json`` overrides).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import device_tag, gpu_name, result_path, write_json  # noqa: E402

from ozsim import Circuit, Simulator  # noqa: E402


def load_circuit(args, gates_file=None) -> Circuit:
    gates_file = gates_file or args.gates_file
    if args.brickwork and not gates_file:
        from ozsim.gates import brickwork

        return brickwork(args.qubits, args.depth, gate_qubits=args.brickwork, seed=args.seed)
    if gates_file:
        data = np.load(gates_file)
        mats, qubits = data["matrices"], data["qubits"]
    else:
        from qiskit.circuit.library import quantum_volume

        from ozsim.interop.qiskit import from_qiskit

        ops = [op for op in from_qiskit(quantum_volume(args.qubits, args.depth, seed=args.seed))
               .operations if op.kind == "unitary"]
        mats, qubits = np.stack([op.matrix for op in ops]), np.array([op.qubits for op in ops])
        if args.save:
            np.savez_compressed(args.save, matrices=mats, qubits=qubits)
    n = int(qubits.max()) + 1
    c = Circuit(n, name=f"qv_n{n}")
    for m, q in zip(mats, qubits):
        c.unitary(m, tuple(int(x) for x in q))
    return c


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--qubits", type=int, default=30)
    p.add_argument("--depth", type=int, default=30)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--gates-file", default=None)
    p.add_argument("--brickwork", type=int, default=0, metavar="D",
                   help="a brickwork of Haar-random D-qubit gates instead of quantum volume")
    p.add_argument("--warmup-file", default=None,
                   help="gates of a smaller circuit of the same kind, run first to compile the "
                        "kernels (default: the first layer on 20 qubits)")
    p.add_argument("--save", default=None, help="write the circuit's gates to this .npz")
    p.add_argument("--save-only", action="store_true", help="with --save: write, do not run")
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--backends", default="zgemm,int8-auto:T=1,int8-crt-auto:T=0")
    p.add_argument("--compare-first", type=int, default=0, metavar="K",
                   help="compare only the first K amplitudes with the first backend's and take "
                        "the norm where the state lives (a state too large to hold twice on "
                        "the host); default: the whole state")
    p.add_argument("--repeat", type=int, default=1, metavar="R",
                   help="time R runs of the circuit, the fastest reported (the first also "
                        "compiles the kernels of block sizes the warm-up did not meet)")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    circuit = load_circuit(args)
    if args.save_only:
        print(f"wrote {args.save}: {circuit.num_gates} gates on {circuit.num_qubits} qubits")
        return 0
    if args.warmup_file:
        warmup = load_circuit(args, args.warmup_file)
    elif args.brickwork:
        from ozsim.gates import brickwork

        warmup = brickwork(min(circuit.num_qubits, 24), min(args.depth, 4),
                           gate_qubits=args.brickwork, seed=args.seed + 1)
    else:
        warmup = _small(circuit)
    device = gpu_name() if args.device == "gpu" else "cpu"
    rows, ref, ref_name = [], None, None
    for spec in args.backends.split(","):
        spec_t, _, cap = spec.partition("@")  # name[:T=t][@m]: blocks of at most m qubits
        name, _, t = spec_t.partition(":T=")
        gemm_path = name.endswith("-gemm")  # e.g. zgemm-gemm: the cuBLAS ZGEMM path throughout
        sim = Simulator(backend=name.removesuffix("-gemm"), T=float(t or 1), device=args.device,
                        one_pass=not gemm_path, max_fused_qubits=int(cap) if cap else None)
        sim.run(circuit if circuit.num_qubits <= 20 else warmup)  # compile, warm up
        row = dict(device=device, circuit=circuit.name, N=circuit.num_qubits,
                   gates=circuit.num_gates, backend=spec)
        try:
            times = []
            for _ in range(max(1, args.repeat)):
                res = None  # the last run's state goes back before the next allocates its own
                t0 = time.perf_counter()
                res = sim.run(circuit)
                times.append(time.perf_counter() - t0)
        except MemoryError as exc:  # too large for this backend here: the error is the result
            rows.append(dict(row, error=str(exc)))
            print(f"{spec:<20} MemoryError: {exc}", flush=True)
            continue
        sec = min(times)
        if len(times) > 1:
            row["all_seconds"] = times
        if args.compare_first:
            psi = res.amplitude_range(0, min(args.compare_first, 1 << circuit.num_qubits))
            row["norm"] = float(np.sqrt(res.expectation("I" * circuit.num_qubits)))
        else:
            psi = res.statevector
        diff = None if ref is None else float(np.abs(psi - ref).max())
        if ref is None:  # the first backend that ran
            ref, ref_name = psi, spec
        md = res.metadata
        del res  # the state's device buffer goes back before the next backend runs
        auto = md.get("auto")
        rows.append(dict(row, seconds=sec, blocks=md["fusion"]["block_sizes"],
                         splits={str(k): v for k, v in md["splits"].items()},
                         auto_blocks=_by_size(auto["choices"]) if auto else None,
                         peak_memory_bytes=md["peak_memory_bytes"],
                         max_abs_diff_vs_first=diff))
        chose = f"  auto chose {_by_size(auto['choices'])}" if auto else ""
        norm = f"  norm {row['norm']:.15f}" if "norm" in row else ""
        print(f"{spec:<20} {sec:8.2f} s  blocks {md['fusion']['block_sizes']}{chose}  "
              f"peak {md['peak_memory_bytes'] / 2**30:.1f} GiB{norm}  "
              f"max |psi - psi_{ref_name}| = {diff}", flush=True)
    path = write_json(args.json or result_path("qv_bench", device_tag(device)
                                               if args.device == "gpu" else "cpu"),
                      {"command": "python benchmarks/qv_bench.py " + " ".join(argv or sys.argv[1:]),
                       "rows": rows})
    print(f"wrote {path}")
    return 0


def _by_size(choices) -> dict:
    """backend="auto"'s choices as {"d=<d> <backend>": "<blocks> x <median measured passes>"}
    (passes: a block's time over one read and one write of the state, Result.metadata)."""
    groups: dict = {}
    for d, backend, _, _, passes in choices:
        groups.setdefault(f"d={d} {backend}", []).append(passes)
    return {key: f"{len(v)} x {float(np.median(v)):.2f}" for key, v in sorted(groups.items())}


def _small(circuit: Circuit) -> Circuit:
    """The first layer on the first 20 qubits: compiles the kernels a run will use."""
    c = Circuit(20)
    for op in circuit.operations[:10]:
        if max(op.qubits) < 20:
            c.unitary(op.matrix, op.qubits)
    return c


if __name__ == "__main__":
    sys.exit(main())
