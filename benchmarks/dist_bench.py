"""Distributed state vectors on several GPUs of one host: swap bandwidth against NCCL, weak
scaling of local gates, and whole circuits (brickwork, quantum volume) beyond one GPU.

Run from the repository root on a machine with 2 (or 2**g) NVIDIA GPUs, MPI and CuPy::

    mpiexec -n 2 python3 benchmarks/dist_bench.py --qubits 33 --depth 10

(on 80 GB H100s ``--qubits 32``) writes ``benchmarks/results/dist_bench-<gpu>x<P>-<date>.json``.

Measured, in one run (medians of ``--reps`` after a warm-up, every rank synchronised and a
barrier around each timing):

- ``nccl``: one NCCL send/recv of half a shard (``2**(N-g-1)`` amplitudes) with the partner
  rank, the bytes a swap moves, as GB/s each way; and ``swap``: ozsim's swap of a global qubit
  with a local one (chunked exchange in place, :meth:`DistributedStateVector._swap`) of the same
  bytes, for the most significant local bit (a contiguous half), the lowest bit ozsim sends
  away by choice (halves in runs of ``SWAP_MIN_RUN_BYTES``) and bit 0 (strided element by
  element). Efficiency = swap GB/s over NCCL GB/s.
- ``weak``: time per gate of ``d``-qubit Haar gates on local qubits, ``N`` qubits over the P
  ranks against ``N - g`` qubits on one GPU (rank 0 alone, same shard size): efficiency = the
  one-GPU time over the distributed time.
- ``circuits``: brickwork(N, depth, 2-qubit gates) and a quantum-volume circuit QV(N, depth)
  (each layer a random pairing of the qubits and a Haar SU(4) on each pair, as Qiskit's
  ``quantum_volume``) through ``Simulator(comm=...)``, final state only (not gathered): wall
  time, swaps and their seconds, norm.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from _common import device_tag, result_path, write_json


def _sync(comm):
    import cupy as cp

    cp.cuda.Device().synchronize()
    comm.Barrier()


def _timed(comm, fn, reps: int) -> float:
    fn()
    _sync(comm)
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        _sync(comm)
        ts.append(time.perf_counter() - t0)
    return float(np.median(ts))


def quantum_volume(num_qubits: int, depth: int, seed: int):
    """QV(N, depth) as Qiskit's ``quantum_volume``: each layer a random permutation of the
    qubits paired off, a Haar SU(4) on each pair (drawn from one generator)."""
    from ozsim import Circuit
    from ozsim.gates.haar import haar_unitary

    rng = np.random.default_rng(seed)
    circ = Circuit(num_qubits, 0, name=f"qv_n{num_qubits}_d{depth}")
    for _ in range(depth):
        perm = rng.permutation(num_qubits)
        for j in range(num_qubits // 2):
            circ.unitary(haar_unitary(4, rng), (int(perm[2 * j]), int(perm[2 * j + 1])),
                         name="su4")
    return circ


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--qubits", type=int, default=33, help="N of the distributed runs")
    p.add_argument("--depth", type=int, default=10)
    p.add_argument("--gates", default="2,3,4", help="d of the weak-scaling gates")
    p.add_argument("--backends", default="zgemm,int8-auto,int8-crt-auto")
    p.add_argument("--circuit-backends", default="zgemm,int8-crt-auto")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--skip", default="", help="comma list of parts to skip: nccl,weak,circuits")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    import cupy as cp
    from mpi4py import MPI

    from ozsim import Simulator
    from ozsim.distributed import SWAP_MIN_RUN_BYTES, DistributedStateVector, select_gpu
    from ozsim.gates.builders import brickwork
    from ozsim.gates.haar import haar_unitary
    from ozsim.gemm.registry import parse
    from ozsim.statevector import StateVector, gemm_prepare

    comm = MPI.COMM_WORLD
    select_gpu(comm)
    rank, size = comm.Get_rank(), comm.Get_size()
    g = size.bit_length() - 1
    n, nl = args.qubits, args.qubits - g
    skip = set(filter(None, args.skip.split(",")))
    name = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    out = {"gpu": name, "ranks": size, "qubits": n, "depth": args.depth,
           "date": time.strftime("%Y-%m-%d"), "command": "mpiexec -n %d python3 %s" % (
               size, " ".join(sys.argv))}

    def say(*a):
        if rank == 0:
            print(*a, flush=True)

    say(f"{size} x {name}, N = {n} ({nl} local qubits a rank)")
    if "nccl" not in skip:  # NCCL send/recv of half a shard against ozsim's swaps
        sv = DistributedStateVector(n, comm, cp, in_place=("zgemm", 1))
        half = sv.local._buf.size // 2
        t_swap_hi = _timed(comm, lambda: sv._swap(0, nl - 1), args.reps)  # contiguous half
        t_swap_lo = _timed(comm, lambda: sv._swap(0, 0), args.reps)       # strided half
        run_bit = max(0, (SWAP_MIN_RUN_BYTES // 16).bit_length() - 1)     # 16 MiB runs
        t_swap_run = _timed(comm, lambda: sv._swap(0, run_bit), args.reps)
        buf = sv.local._buf
        recv = cp.empty(min(half, 1 << 28), dtype=buf.dtype)  # (bytes of one NCCL call)
        ex = sv._exchange
        peer = rank ^ 1

        def nccl_all():
            for s0 in range(0, half, recv.size):
                ex.sendrecv(buf[s0:s0 + recv.size], recv, peer)

        t_nccl = _timed(comm, nccl_all, args.reps)
        nbytes = half * buf.dtype.itemsize
        row = {"bytes": nbytes, "nccl_GBps": nbytes / t_nccl / 1e9,
               "swap_top_bit_GBps": nbytes / t_swap_hi / 1e9,
               "swap_bit0_GBps": nbytes / t_swap_lo / 1e9,
               f"swap_bit{run_bit}_GBps": nbytes / t_swap_run / 1e9}
        row["efficiency_top"] = row["swap_top_bit_GBps"] / row["nccl_GBps"]
        row["efficiency_bit0"] = row["swap_bit0_GBps"] / row["nccl_GBps"]
        row[f"efficiency_bit{run_bit}"] = row[f"swap_bit{run_bit}_GBps"] / row["nccl_GBps"]
        out["swap"] = row
        say(f"swap of {nbytes / 2**30:.1f} GiB each way: NCCL {row['nccl_GBps']:.1f} GB/s, swap "
            f"(top local bit) {row['swap_top_bit_GBps']:.1f} GB/s = "
            f"{row['efficiency_top']:.2f}, (bit {run_bit}: 16 MiB runs, the lowest ozsim picks) "
            f"{row[f'swap_bit{run_bit}_GBps']:.1f} GB/s = {row[f'efficiency_bit{run_bit}']:.2f}, "
            f"(bit 0) {row['swap_bit0_GBps']:.1f} GB/s = {row['efficiency_bit0']:.2f}")
        del sv, buf, recv
        cp.get_default_memory_pool().free_all_blocks()

    if "weak" not in skip:  # local gates: N over P ranks against N - g on one GPU
        rows = []
        rng = np.random.default_rng(1)
        for backend in args.backends.split(","):
            T = 0.0 if "crt" in backend else 1.0
            for d in (int(x) for x in args.gates.split(",")):
                u = haar_unitary(1 << d, rng)
                qubits = tuple(range(1, d + 1))
                gate = gemm_prepare(cp.asarray(u), backend)
                sv = DistributedStateVector(n, comm, cp, in_place=(backend, d))
                sv.local._buf[:] = 1.0 / np.sqrt(2.0**n)
                t_dist = _timed(comm, lambda: sv.apply(gate, qubits, backend, T), args.reps)
                del sv
                cp.get_default_memory_pool().free_all_blocks()
                t_one = None
                if rank == 0:
                    one = StateVector(nl, cp, in_place=(backend, d))
                    one._buf[:] = 1.0 / np.sqrt(2.0**nl)
                    one.apply(gate, qubits, backend, T)
                    cp.cuda.Device().synchronize()
                    ts = []
                    for _ in range(args.reps):
                        t0 = time.perf_counter()
                        one.apply(gate, qubits, backend, T)
                        cp.cuda.Device().synchronize()
                        ts.append(time.perf_counter() - t0)
                    t_one = float(np.median(ts))
                    del one
                cp.get_default_memory_pool().free_all_blocks()
                comm.Barrier()
                if rank == 0:
                    r = {"backend": backend, "d": d, "one_gpu_ms": t_one * 1e3,
                         "distributed_ms": t_dist * 1e3, "efficiency": t_one / t_dist,
                         "one_pass": parse(backend).scheme.one_pass("gpu", d)}
                    rows.append(r)
                    say(f"weak {backend:>14} d={d}: N={nl} on 1 GPU {t_one * 1e3:8.2f} ms, "
                        f"N={n} on {size} {t_dist * 1e3:8.2f} ms, efficiency "
                        f"{r['efficiency']:.3f}")
        out["weak"] = rows

    if "circuits" not in skip:
        rows = []
        for label, circ in (("brickwork", brickwork(n, args.depth, gate_qubits=2, seed=1)),
                            ("qv", quantum_volume(n, args.depth, seed=7))):
            for backend in args.circuit_backends.split(","):
                sim = Simulator(backend=backend, T=0.0, device="gpu", comm=comm)
                comm.Barrier()
                t0 = time.perf_counter()
                res = sim.run(circ, shots=0)
                _sync(comm)
                wall = time.perf_counter() - t0
                norm = float(np.sqrt(res.expectation("I" * n)))  # (an allreduce: every rank)
                dist = res.metadata["distributed"]
                r = {"circuit": label, "backend": backend, "wall_s": wall,
                     "gates": res.metadata["num_gates"], "swaps": dist["swaps"],
                     "swap_s": dist["swap_seconds"], "norm": norm,
                     "fusion": res.metadata["fusion"]["block_sizes"],
                     "splits": {str(k): v for k, v in res.metadata["splits"].items()},
                     "peak_GiB_per_rank": res.metadata["peak_memory_bytes"] / 2**30}
                rows.append(r)
                say(f"{label} N={n} depth {args.depth} {backend}: {wall:.2f} s, "
                    f"{r['gates']} blocks, {r['swaps']} swaps ({r['swap_s']:.2f} s), norm "
                    f"{norm:.12f}, peak {r['peak_GiB_per_rank']:.1f} GiB a rank")
                del res
                cp.get_default_memory_pool().free_all_blocks()
        out["circuits"] = rows

    if rank == 0:
        tag = f"{device_tag(name)}x{size}"
        path = args.json or result_path("dist_bench", tag)
        write_json(path, out)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
