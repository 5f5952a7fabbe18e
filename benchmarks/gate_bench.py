"""Time per gate by the number of target qubits d, against the copy floor and native kernels.

The question: how long does one d-qubit gate on an N-qubit state take with each backend, and how
far is that from the floor, one read and one write of the state (measured in the same run as a
device-to-device copy of the state)? Rows, all in one run on one device:

* ``floor``: ``copyto`` of the state into a second buffer (``2 * 16 * 2**N`` bytes moved);
* ``zgemm``: the ``zgemm`` backend through ``StateVector.apply``: the one-pass FP64 kernel for
  ``d <= 6`` on the GPU, and 7 where it has FP64 ``m16n8k8`` (compute capability 9.0);
* ``zgemm-gemm``: the same backend with the one-pass kernel off (a transposing copy where the
  targets do not lead, then cuBLAS ZGEMM into the spare buffer): the cuBLAS ZGEMM path;
* ``int8-auto:T=1``, ``int8-crt-auto:T=0``: the emulated backends through ``StateVector.apply``;
* ``custatevec``: ``custatevecApplyMatrix`` (FP64, complex128) when ``CUSTATEVEC_LIB`` names a
  ``libcustatevec.so.1`` (the custatevec-cu13 wheel's; libcublas is loaded first).

A gate is applied as a :class:`~ozsim.Simulator` applies it: scheme I (and scheme II with 16
or more moduli) pads 1- and 2-qubit gates to ``I (x) U`` on 3 qubits (``pad_gates``; the extra
targets are the lowest-numbered other qubits, :func:`ozsim.statevector.pad_gate`), so those d =
1, 2 cells are a 3-qubit kernel's time, marked ``*`` in the table (``applied_qubits`` in the
JSON); ``--unpadded`` times the d-qubit kernels themselves.

The targets cycle through four random sets per d (seeded), so the GEMM paths pay the
permutations a real circuit makes them pay; ``--targets low`` / ``high`` puts them on the d
lowest / highest qubits instead (the CUDA-core one-pass kernels are slowest on the lowest). Each
cell is the median of the timed runs after a warm-up of one gate on each of the four sets (the
first gate of a set may compile or load a kernel). The state is a random dense vector, so the
auto backends see realistic exponent statistics.

Usage:
    python benchmarks/gate_bench.py                               # GPU: N = 28, 30; d = 1..8, 10, 12
    python benchmarks/gate_bench.py --device cpu --qubits 14 --gates 1,2,3,4
    python benchmarks/gate_bench.py --qubits 30 --baseline results/gate_bench-h200-<date>.json

``--baseline`` compares each cell's multiple of the floor with an earlier run's and lists the
cells more than ``--tolerance`` (10%) slower: a kernel change is checked at every d, not only at
the d it was made for (kernels share code: one change to the products kernel's epilogue once
cost its 12-qubit gates 17%).

Writes ``benchmarks/results/gate_bench-<device>-<date>.json`` (``--json`` overrides) and prints
one table per N: milliseconds per gate and the multiple of the floor; on the GPU also the INT8
GEMM rate R of the device (cuBLAS, 8192^3, in the same run) and each emulated row against its
INT8 ceiling: its GEMM's INT8 operations (``2 s (s + 1)`` products for ``s`` slices, ``3 N``
for ``N`` moduli, each ``2 * 2**(N + d)`` operations) at rate R (scheme II's one-pass gates of 3
to 6 qubits: 64 byte-slice products of the real embedding, 256 such products; none where its
gates are made by exact integer products on the CUDA cores, without INT8 products).
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import cpu_timed, device_tag, gpu_name, result_path, timed, write_json  # noqa: E402

from ozsim.gates.haar import haar_unitary  # noqa: E402
from ozsim.statevector import StateVector, pad_gate  # noqa: E402

METHODS = ("zgemm", "zgemm-gemm", "int8-auto:T=1", "int8-crt-auto:T=0", "custatevec")


class CuStateVec:
    """``custatevecApplyMatrix`` through ctypes (FP64 matrix and state, compute 64F)."""

    C64F, ROW_MAJOR, COMPUTE_64F = 5, 1, 1 << 4

    def __init__(self, path: str, cp):
        for pat in ("/usr/local/cuda*/lib64/libcublasLt.so.13*", "/usr/local/cuda*/lib64/libcublas.so.13*",
                    "/opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib/libcublasLt.so.13*",
                    "/opt/torch/.venv/lib/python3*/site-packages/nvidia/cu13/lib/libcublas.so.13*"):
            hits = sorted(glob.glob(pat))
            if hits:
                ctypes.CDLL(hits[0], mode=ctypes.RTLD_GLOBAL)
        self.lib, self.cp = ctypes.CDLL(path), cp
        self.handle = ctypes.c_void_p()
        assert self.lib.custatevecCreate(ctypes.byref(self.handle)) == 0
        self.lib.custatevecSetStream(self.handle, ctypes.c_void_p(cp.cuda.get_current_stream().ptr))

    def applier(self, sv, n: int, u: np.ndarray):
        lib, cp = self.lib, self.cp
        m = np.ascontiguousarray(u, dtype=np.complex128)
        d = int(u.shape[0]).bit_length() - 1
        ws = ctypes.c_size_t(0)
        st = lib.custatevecApplyMatrixGetWorkspaceSize(
            self.handle, self.C64F, ctypes.c_uint32(n), m.ctypes.data_as(ctypes.c_void_p),
            self.C64F, self.ROW_MAJOR, 0, ctypes.c_uint32(d), ctypes.c_uint32(0),
            self.COMPUTE_64F, ctypes.byref(ws))
        assert st == 0, st
        wbuf = cp.empty(max(ws.value, 1), dtype=cp.uint8)

        def apply(targets):
            t = np.asarray(targets, dtype=np.int32)
            st = lib.custatevecApplyMatrix(
                self.handle, ctypes.c_void_p(sv.data.ptr), self.C64F, ctypes.c_uint32(n),
                m.ctypes.data_as(ctypes.c_void_p), self.C64F, self.ROW_MAJOR, 0,
                t.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint32(d), None, None,
                ctypes.c_uint32(0), self.COMPUTE_64F, ctypes.c_void_p(wbuf.data.ptr),
                ctypes.c_size_t(ws.value))
            assert st == 0, st
        return apply


def target_sets(n: int, d: int, where: str, rng) -> list[tuple[int, ...]]:
    """The four target sets a d-qubit gate cycles through: ``random`` (distinct random qubits),
    ``low`` (qubits 0..d-1, the lowest amplitude-index bits, and its reverse order) or ``high``
    (the d highest)."""
    if where == "low":
        return [tuple(range(d)), tuple(reversed(range(d)))] * 2
    if where == "high":
        top = tuple(range(n - d, n))
        return [top, tuple(reversed(top))] * 2
    return [tuple(int(q) for q in rng.choice(n, d, replace=False)) for _ in range(4)]


def bench(n: int, ds: list[int], xp, methods, reps: int, seed: int, csv=None,
          int8_rate: float = 0.0, targets: str = "random", pad: bool = True) -> list[dict]:
    gpu = xp is not np
    rng = np.random.default_rng(seed)
    sv = StateVector(n, xp)
    psi = xp.asarray(rng.standard_normal(1 << n) + 1j * rng.standard_normal(1 << n))
    psi /= xp.linalg.norm(psi)
    sv._buf[...] = psi
    del psi
    # (the warm-up meets every target set first: a set's first gate may compile or load its
    # kernel, which would otherwise fall into a timed run)
    clock = (lambda fn, r: timed(fn, r, warmup=4)) if gpu else cpu_timed
    floor = clock(lambda: xp.copyto(sv._spare, sv._buf), max(reps, 3))
    rows = []
    for d in ds:
        u = haar_unitary(1 << d, rng)
        ug = xp.asarray(u)
        sets = target_sets(n, d, targets, rng)
        for method in methods:
            name, _, t = method.partition(":T=")
            name = name.removesuffix("-gemm")
            applied, mat, msets = d, ug, sets
            if method != "custatevec" and pad:  # as a Simulator applies it (pad_gates)
                padded = [pad_gate(u, qs, name, n) for qs in sets]
                if len(padded[0][1]) > d:
                    applied, mat = len(padded[0][1]), xp.asarray(padded[0][0])
                    msets = [qs for _, qs in padded]
            if method == "custatevec":
                if csv is None:
                    continue
                apply = csv.applier(sv._buf, n, u)
                it = iter(sets * 1000)
                fn = lambda: apply(next(it))  # noqa: E731
            else:
                from ozsim.gemm import registry

                if method == "zgemm" and not (gpu and registry.parse(name).scheme.one_pass(
                        "gpu", d)):
                    continue  # the one-pass kernel (GPU, d <= 6 or 7); elsewhere = zgemm-gemm

                op = registry.parse(name).scheme.prepare(mat)
                T = float(t) if t else 1.0
                it = iter(msets * 1000)
                last = {}

                def fn(op=op, name=name, T=T, it=it, one_pass=(method != "zgemm-gemm"),
                       last=last):
                    sv.one_pass = one_pass
                    last["info"] = sv.apply(op, next(it), backend=name, T=T)
            slow = applied <= 2 and method.startswith("int8-auto")  # (the CUDA-core kernels)
            sec = clock(fn, 1 if slow else reps)
            row = dict(device=DEVICE, N=n, d=d, method=method, seconds=sec, floor_s=floor,
                       x_floor=sec / floor, applied_qubits=applied)
            info = None if method == "custatevec" else last.get("info")
            ceiling = ""
            kernel = (_crt_kernel(info, applied)
                      if info is not None and int8_rate and info.num_moduli else None)
            if (info is not None and int8_rate and (info.num_splits or info.num_moduli)
                    and kernel != "exact"):
                # INT8 operations of the GEMM: 2s(s+1) products (scheme I), 3N (scheme II's
                # residues), 64 real embeddings of 4 products each (its byte slices)
                per = (2 * info.num_splits * (info.num_splits + 1) if info.num_splits
                       else 256 if kernel == "slices" else 3 * info.num_moduli)
                row["int8_ops"] = per * 2.0 * 2.0 ** (n + applied)
                row["ceiling_s"] = row["int8_ops"] / int8_rate
                row["x_ceiling"] = sec / row["ceiling_s"]
                ceiling = f"  {row['x_ceiling']:6.2f}x its INT8 ceiling"
            rows.append(row)
            as_ = f" (as {applied} qubits)" if applied != d else ""
            print(f"  N={n} d={d:2d} {method:<18} {sec * 1e3:10.2f} ms  {sec / floor:7.2f}x floor"
                  f"{ceiling}{as_}", flush=True)
        norm = float(xp.linalg.norm(sv._buf))
        assert abs(norm - 1) < 1e-9, f"norm drifted to {norm}"
    sv.one_pass = True
    return rows


def _grid(sel: list[dict], cell) -> list[str]:
    """Markdown rows, one per method, one column per d, ``cell(row)`` in each."""
    ds = sorted({r["d"] for r in sel})
    out = ["| method | " + " | ".join(f"d={d}" for d in ds) + " |", "| --- |" + " --- |" * len(ds)]
    for m in dict.fromkeys(r["method"] for r in sel):
        cells = []
        for d in ds:
            r = next((r for r in sel if r["d"] == d and r["method"] == m), None)
            cells.append("" if r is None else cell(r))
        out.append(f"| {m} | " + " | ".join(cells) + " |")
    return out


def _crt_kernel(info, d: int) -> str | None:
    """Which scheme II kernel applied this GPU gate (``ozsim.gemm.ozaki2.onepass.
    one_pass_kernel``): ``"exact"`` (exact integer products on the CUDA cores: no INT8 products,
    no INT8 ceiling), ``"slices"`` (exact products of byte slices: 64 INT8 products of the real
    embedding), ``"residues"`` (also every GEMM-path gate above 6 qubits), or None (no plan)."""
    if info.kept_bits is None:
        return None
    from ozsim.gemm.ozaki2 import onepass
    from ozsim.gemm.ozaki2.scheme import CRTPlan

    if d > onepass.MAX_QUBITS:
        return "residues"
    return onepass.one_pass_kernel(d, CRTPlan(info.num_moduli, *info.kept_bits))


def ceiling_table(rows: list[dict], n: int) -> str:
    """The emulated rows as multiples of their INT8 ceiling (their INT8 operations at the run's
    INT8 GEMM rate)."""
    sel = [r for r in rows if r["N"] == n and "x_ceiling" in r]
    if not sel:
        return ""
    return "\n".join(["x INT8 ceiling:"] + _grid(sel, lambda r: f"{r['x_ceiling']:.2f}"))


def baseline_table(rows: list[dict], n: int, base: dict, tolerance: float) -> str:
    """Each cell's multiple of the floor against the same cell (N, d, method, qubits applied) of
    an earlier run's JSON ``base`` (its top-level rows): ``x_baseline`` is added to ``rows``, and
    a cell more than ``tolerance`` (a fraction) above its baseline is marked ``!`` and listed.
    Both runs' floors cancel, so runs on two machines of one kind compare within their spread
    (about 5% between H200s)."""
    def key(r):
        return r["N"], r["d"], r["method"], r.get("applied_qubits", r["d"])

    old = {key(r): r for r in base.get("rows", [])}
    sel = [r for r in rows if r["N"] == n and key(r) in old]
    for r in sel:
        r["x_baseline"] = r["x_floor"] / old[key(r)]["x_floor"]
    if not sel:
        return ""
    slower = [r for r in sel if r["x_baseline"] > 1 + tolerance]
    lines = [f"x baseline ({base.get('device', '?')}: multiple of the floor now / then; "
             f"! more than {tolerance:.0%} slower):"]
    lines += _grid(sel, lambda r: f"{r['x_baseline']:.2f}"
                   + (" !" if r["x_baseline"] > 1 + tolerance else ""))
    lines.append(f"{len(slower)} of {len(sel)} cells slower than the baseline"
                 + "".join(f"\n  d = {r['d']} {r['method']}: {r['x_floor']:.2f}x the floor "
                           f"against {old[key(r)]['x_floor']:.2f}x" for r in slower))
    return "\n".join(lines)


def table(rows: list[dict], n: int) -> str:
    sel = [r for r in rows if r["N"] == n]
    floor = sel[0]["floor_s"]
    head = (f"N = {n} on {DEVICE}: floor {floor * 1e3:.2f} ms "
            f"({2 * 16 * 2**n / floor / 1e12:.2f} TB/s); ms per gate (x floor)")
    def cell(r):
        star = "*" if r.get("applied_qubits", r["d"]) != r["d"] else ""
        return f"{r['seconds'] * 1e3:.1f} ({r['x_floor']:.2f}x){star}"

    lines = [head] + _grid(sel, cell)
    padded = sorted({(r["d"], r["applied_qubits"]) for r in sel
                     if r.get("applied_qubits", r["d"]) != r["d"]})
    if padded:
        lines.append("* applied as I (x) U on more qubits, as a Simulator applies it (pad_gates: "
                     + ", ".join(f"d = {d} as {a}" for d, a in padded)
                     + "); --unpadded times the d-qubit kernels")
    return "\n".join(lines)


def main(argv=None) -> int:
    global DEVICE
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", choices=("gpu", "cpu"), default="gpu")
    p.add_argument("--qubits", default=None, help="comma list of N (GPU: 28,30; CPU: 14)")
    p.add_argument("--gates", default=None, help="comma list of d (GPU: 1..8,10,12; CPU: 1..4)")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--targets", choices=("random", "low", "high"), default="random",
                   help="the gates' target qubits: four random sets per d (default), the d "
                   "lowest qubits (the one-pass kernels' slowest case) or the d highest")
    p.add_argument("--unpadded", action="store_true",
                   help="time the INT8 schemes' 1- and 2-qubit kernels themselves, not the "
                   "3-qubit gate a Simulator applies in their place (pad_gates)")
    p.add_argument("--json", default=None, help="output path (default: benchmarks/results/...)")
    p.add_argument("--baseline", default=None, metavar="JSON",
                   help="an earlier run's JSON: print each cell's multiple of the floor against "
                   "it and list the cells more than --tolerance slower (a kernel change's check "
                   "across every d)")
    p.add_argument("--tolerance", type=float, default=0.10,
                   help="fraction above the baseline that counts as slower (default 0.10)")
    args = p.parse_args(argv)
    base = None
    if args.baseline:
        with open(args.baseline) as f:  # read first: a wrong path fails before the timing
            base = json.load(f)
    if args.device == "gpu":
        import cupy as xp

        DEVICE = gpu_name()
        tag = device_tag(DEVICE)
        qubits, gates = args.qubits or "28,30", args.gates or "1,2,3,4,5,6,7,8,10,12"
    else:
        xp, DEVICE, tag = np, "cpu", "cpu"
        qubits, gates = args.qubits or "14", args.gates or "1,2,3,4"
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    csv = None
    if "custatevec" in methods and args.device == "gpu" and os.environ.get("CUSTATEVEC_LIB"):
        csv = CuStateVec(os.environ["CUSTATEVEC_LIB"], xp)
    rate = 0.0
    if args.device == "gpu" and any("int8" in m for m in methods):
        from gemm_bench import int8_rate

        rate = int8_rate(4096, 8192, 4096, args.reps)  # an 8192 x 8192 x 8192 INT8 GEMM
        print(f"INT8 GEMM rate (cuBLAS, 8192^3, TN): {rate / 1e12:.0f} TOP/s", flush=True)
    rows = []
    for n in (int(q) for q in qubits.split(",")):
        rows += bench(n, [int(d) for d in gates.split(",")], xp, methods, args.reps, args.seed,
                      csv, rate, args.targets, pad=not args.unpadded)
        if xp is not np:
            xp.get_default_memory_pool().free_all_blocks()
    compared = {n: baseline_table(rows, n, base, args.tolerance) if base else ""
                for n in sorted({r["N"] for r in rows})}
    path = write_json(args.json or result_path("gate_bench", tag),
                      {"command": " ".join(["python", "benchmarks/gate_bench.py"] + (argv or sys.argv[1:])),
                       "device": DEVICE, "int8_rate_ops": rate, "rows": rows})
    for n, cmp_ in compared.items():
        print(table(rows, n))
        print(ceiling_table(rows, n))
        if cmp_:
            print(cmp_)
    print(f"wrote {path}")
    return 0


DEVICE = "cpu"

if __name__ == "__main__":
    sys.exit(main())
