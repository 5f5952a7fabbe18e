"""Where the wall time of a scheme II call goes: GPU kernels, GPU idle gaps, host Python.

Run from the repository root on a GPU with CuPy (and PyTorch, whose profiler records the CUDA
kernels of the whole process through CUPTI, CuPy's included)::

    PYTHONPATH=. python3 benchmarks/crt_timeline.py --json benchmarks/results/crt_timeline.json

For each case (a square ``int8-crt-auto`` ZGEMM, a state-vector GEMM, a brickwork circuit) after
a warm-up: the wall time of one call (CUDA events), the time the GPU ran kernels (union of the
kernel intervals), the idle remainder (summed per transition ``previous kernel -> next kernel``),
the kernels by total time, and the host functions by own time (``cProfile``). Nothing here is
asserted; it prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from gemm_bench import _cupy as _cp  # noqa: E402
from gemm_bench import gpu_name, square_inputs, state_inputs  # noqa: E402


def _kernel_intervals(prof):
    """``[(name, start_us, end_us)]`` of the CUDA kernels in a ``torch.profiler`` trace."""
    out = []
    for ev in prof.events():
        if str(getattr(ev, "device_type", "")).endswith("CUDA") and ev.time_range.end:
            out.append((ev.name, ev.time_range.start, ev.time_range.end))
    return sorted(out, key=lambda t: t[1])


def _busy_us(intervals):
    busy, cur_s, cur_e = 0.0, None, None
    for _, s, e in intervals:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        busy += cur_e - cur_s
    return busy


def _gaps(intervals, top=8):
    """Idle time between kernels, summed per transition ``previous kernel -> next kernel``
    (the largest ``top``): ``[{"after", "before", "ms", "count"}]``."""
    by_pair: dict = {}
    last_name, last_end = None, None
    for name, s, e in intervals:
        if last_end is not None and s > last_end:
            key = (last_name[:40], name[:40])
            tot, cnt = by_pair.get(key, (0.0, 0))
            by_pair[key] = (tot + (s - last_end), cnt + 1)
        if last_end is None or e >= last_end:
            last_name, last_end = name, e
    pairs = sorted(by_pair.items(), key=lambda kv: -kv[1][0])[:top]
    return [{"after": a, "before": b, "ms": t / 1e3, "count": c} for (a, b), (t, c) in pairs]


def profile_case(label, fn, top=12):
    cp = _cp()
    fn()  # warm-up: kernels compiled, cuBLASLt tuned, pools filled
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    t0 = time.perf_counter()
    fn()
    t_host = time.perf_counter() - t0
    end.record()
    end.synchronize()
    wall_ms = cp.cuda.get_elapsed_time(start, end)
    row = {"case": label, "wall_ms": wall_ms, "host_call_ms": 1e3 * t_host}
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            cp.cuda.Device().synchronize()
        iv = _kernel_intervals(prof)
        if iv:
            span = iv[-1][2] - iv[0][1]
            busy = _busy_us(iv)
            by_name: dict = {}
            for name, s, e in iv:
                tot, cnt = by_name.get(name, (0.0, 0))
                by_name[name] = (tot + (e - s), cnt + 1)
            kern = sorted(by_name.items(), key=lambda kv: -kv[1][0])[:top]
            row.update(kernels=len(iv), span_ms=span / 1e3, busy_ms=busy / 1e3,
                       idle_ms=(span - busy) / 1e3, idle_gaps=_gaps(iv),
                       top_kernels=[{"name": n[:90], "ms": t / 1e3, "count": c}
                                    for n, (t, c) in kern])
    except Exception as exc:  # noqa: BLE001 - the profiler is optional
        row["profiler_error"] = f"{type(exc).__name__}: {exc}"
    pr = cProfile.Profile()
    pr.enable()
    fn()
    cp.cuda.Device().synchronize()
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    row["host_profile"] = s.getvalue().splitlines()[-(top + 3):]
    print(f"\n== {label}: wall {wall_ms:.2f} ms, host call {1e3 * t_host:.2f} ms, "
          f"kernels {row.get('kernels')}, busy {row.get('busy_ms', float('nan')):.2f} ms, "
          f"idle {row.get('idle_ms', float('nan')):.2f} ms {row.get('profiler_error', '')}",
          flush=True)
    for k in row.get("top_kernels", []):
        print(f"   {k['ms']:9.3f} ms x{k['count']:4d}  {k['name']}")
    for g in row.get("idle_gaps", []):
        print(f"   idle {g['ms']:7.3f} ms x{g['count']:4d}  {g['after']} -> {g['before']}")
    print("\n".join("   " + x for x in row["host_profile"]), flush=True)
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--square", default="8192")
    p.add_argument("--state-d", default="8,10")
    p.add_argument("--state-qubits", type=int, default=28)
    p.add_argument("--circuit-d", default="8,10")
    p.add_argument("--circuit-qubits", type=int, default=26)
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    cp = _cp()
    from ozsim.gates import brickwork
    from ozsim.gemm import zgemm
    from ozsim.simulator import Simulator

    rows = []
    for n in [int(x) for x in args.square.split(",") if x]:
        a, b = square_inputs(n, seed=n, phi=1.0)
        out = cp.empty((n, n), dtype=cp.complex128)
        for backend in ("zgemm", "int8-crt-auto"):
            rows.append(profile_case(f"square {n} {backend}",
                                     lambda a=a, b=b, be=backend: zgemm(a, b, backend=be, T=0.0,
                                                                        out=out)))
        del a, b, out
        cp.get_default_memory_pool().free_all_blocks()
    for d in [int(x) for x in args.state_d.split(",") if x]:
        gate, state = state_inputs(args.state_qubits, d, seed=100 + d)
        out = cp.empty(state.shape, dtype=cp.complex128)
        for backend in ("zgemm", "int8-crt-auto"):
            rows.append(profile_case(
                f"state N={args.state_qubits} d={d} {backend}",
                lambda g=gate, s=state, be=backend: zgemm(g, s, backend=be, T=0.0, out=out)))
        del gate, state, out
        cp.get_default_memory_pool().free_all_blocks()
    for d in [int(x) for x in args.circuit_d.split(",") if x]:
        circ = brickwork(args.circuit_qubits, 4, gate_qubits=d, seed=100 + d)
        for backend in ("zgemm", "int8-crt-auto"):
            sim = Simulator(backend=backend, T=0.0, device="gpu", max_fused_qubits=0)
            rows.append(profile_case(f"brickwork N={args.circuit_qubits} d={d} {backend}",
                                     lambda sim=sim: sim.run(circ)))
            cp.get_default_memory_pool().free_all_blocks()
    print("\n| case | wall ms | host call ms | GPU busy ms | GPU idle ms | kernels |")
    for r in rows:
        print(f"| {r['case']} | {r['wall_ms']:.2f} | {r['host_call_ms']:.2f} | "
              f"{r.get('busy_ms', float('nan')):.2f} | {r.get('idle_ms', float('nan')):.2f} | "
              f"{r.get('kernels')} |")
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"gpu": gpu_name(), "date": time.strftime("%Y-%m-%d"),
                       "command": " ".join(sys.argv), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
