"""The ``ozsim`` command line: ``ozsim run``, ``ozsim check``, ``ozsim info``.

Bad input (a missing or malformed file, an unsupported operation, an unknown backend, too little
memory, no GPU when one was asked for) exits with status 2 and one line on stderr, no traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from . import __version__, config
from .errors import OzsimError
from .gemm import registry

__all__ = ["main"]

EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ozsim",
        description="State-vector simulation on an emulated ZGEMM (Ozaki scheme over INT8).",
    )
    p.add_argument("--version", action="version", version=f"ozsim {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="simulate an OpenQASM 2/3 circuit")
    run.add_argument("circuit", help="path to a .qasm file (OpenQASM 2 or 3)")
    run.add_argument(
        "--backend",
        default="int8-auto",
        help=f"{registry.help_text()} (default: int8-auto; `ozsim info` lists them)",
    )
    run.add_argument(
        "-T",
        type=float,
        default=1.0,
        help="INT8-AUTO threshold on the mean mantissa loss, bits (default: 1)",
    )
    run.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"))
    run.add_argument("--shots", type=int, default=0, help="sample the final measurements N times")
    run.add_argument("--seed", type=int, default=None, help="seed for sampling")
    run.add_argument("--top", type=int, default=8, help="how many largest probabilities to print")
    run.add_argument(
        "--output",
        default=None,
        help="write the result: .json (summary, counts, probabilities > 1e-12) or .npy (amplitudes)",
    )
    run.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    run.add_argument(
        "--fusion-max-qubits",
        type=int,
        default=None,
        metavar="N",
        help="fuse gates into blocks of at most N qubits (0: no fusion; default: cost model)",
    )

    chk = sub.add_parser(
        "check",
        help="compare backends' amplitudes with a double-double reference",
        description="Run the circuit with each backend and once in double-double (~106 bits, on "
        "the CPU) and print, per backend: the relative error of Re<0...0|psi> (the ozIMMU "
        "paper's metric), the max relative error over amplitudes with |psi_dd| >= "
        "FLOOR * ||psi_dd|| / sqrt(2^N), the normwise relative error, 1 - fidelity, the splits "
        "chosen and the time.",
    )
    chk.add_argument("circuit", help="path to a .qasm file (OpenQASM 2 or 3)")
    chk.add_argument(
        "--backends",
        default="zgemm,int8-auto",
        help=f"comma list of {registry.help_text()}, or an auto backend with its threshold "
        "such as int8-auto:T=0, or 'all' (one of each; default: zgemm,int8-auto)",
    )
    chk.add_argument(
        "-T",
        default="1",
        help="INT8-AUTO threshold(s) in bits for a plain int8-auto, comma list: -T 0,1 gives one "
        "row per value (default: 1)",
    )
    chk.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"),
                     help="where the backends run; the reference always runs on the CPU")
    chk.add_argument(
        "--fusion-max-qubits",
        type=int,
        default=None,
        metavar="N",
        help="fusion of the backend runs, as for ozsim run (0: every gate its own GEMM, as in "
        "the ozIMMU paper; default: cost model); the reference applies the unfused gates",
    )
    chk.add_argument("--floor", type=float, default=1e-3,
                     help="magnitude floor factor of the max relative error (default: 1e-3)")
    chk.add_argument("--json", action="store_true", help="print JSON instead of the table")

    sub.add_parser("info", help="print versions, devices, backends and environment switches")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 success, 2 bad input)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line message
        return int(exc.code or 0)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "check":
            return _check(args)
        return _info()
    except (OzsimError, ValueError, TypeError, OSError, MemoryError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        print(f"ozsim: error: {msg}", file=sys.stderr)
        return EXIT_USAGE


def _run(args) -> int:
    from .simulator import Simulator

    if args.shots < 0:
        raise ValueError(f"--shots must be >= 0, got {args.shots}")
    if args.output and Path(args.output).suffix not in (".json", ".npy"):
        raise ValueError(f"--output must end in .json or .npy, got {args.output!r}")
    sim = Simulator(
        backend=args.backend,
        T=args.T,
        device=args.device,
        seed=args.seed,
        max_fused_qubits=args.fusion_max_qubits,
    )
    from .interop.qiskit import load_qasm

    circuit = load_qasm(args.circuit)
    shots = args.shots or None
    show_bar = not args.no_progress and sys.stderr.isatty() and (
        circuit.num_qubits >= 18 or circuit.num_gates >= 500
    )
    if show_bar:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task(f"{circuit.name}", total=circuit.num_gates)
            result = sim.run(
                circuit, shots, progress=lambda done, total: bar.update(task, completed=done)
            )
    else:
        result = sim.run(circuit, shots)
    print(_summary(circuit, result, result.counts, args.top))
    if args.output:
        if Path(args.output).suffix == ".npy" and result.metadata["mode"] == "trajectories":
            raise ValueError("--output .npy needs a final state; this circuit has mid-circuit "
                             "operations: use --output result.json for its counts")
        _write_output(Path(args.output), circuit, result, result.counts)
        print(f"wrote {args.output}")
    return 0


def _check(args) -> int:
    from .accuracy import check, parse_backend_specs
    from .interop.qiskit import load_qasm
    from .reference import check_reference_fits, reference_macs

    specs = parse_backend_specs(args.backends, args.T.split(","))  # bad names: exit 2, no parse
    circuit = load_qasm(args.circuit)
    check_reference_fits(circuit.num_qubits)
    est = reference_macs(circuit) / 5e7
    if est > 60 and not args.json:
        print(f"ozsim: the double-double reference will take about {est / 60:.0f} min on one core",
              file=sys.stderr)
    report = check(circuit, specs, device=args.device, floor_factor=args.floor,
                   max_fused_qubits=args.fusion_max_qubits)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.format_table())
    return 0


def _summary(circuit, result, counts, top: int) -> str:
    md = result.metadata
    splits = ", ".join(f"{k}: {v}" for k, v in md["splits"].items()) or "none"
    fusion = md["fusion"]
    fusion_text = (
        "off" if fusion["max_fused_qubits"] == 0 else
        f"{fusion['gates_in']} gates -> {fusion['blocks_out']} blocks of <= "
        f"{fusion['max_fused_qubits']} qubits ({fusion['chosen_by']}), sizes "
        + ", ".join(f"{k}q: {v}" for k, v in fusion["block_sizes"].items())
    )
    lines = [
        f"circuit   {circuit.name}: {circuit.num_qubits} qubits, {circuit.num_gates} gates"
        f" ({_ops_text(circuit)})",
        f"fusion    {fusion_text}",
        f"backend   {md['backend']}" + (f" (T = {md['T']:g} bits)" if registry.parse(md["backend"]).auto
                                        else "") + f" on {md['device']}",
        f"splits    {{{splits}}} GEMMs" + (f", {md['fallbacks']} fell back to native ZGEMM"
                                          if md["fallbacks"] else ""),
        f"time      {md['wall_time_s']:.3f} s",
        f"memory    {md['peak_memory_bytes'] / 2**20:.1f} MiB peak working memory",
    ]
    if md["mode"] == "trajectories":
        lines.append(f"mode      per-shot trajectories (mid-circuit measurements, resets or "
                     f"conditions): {md['branches']} branches simulated")
    else:
        probs = result.probabilities()
        k = min(top, probs.size)
        idx = np.argpartition(probs, -k)[-k:] if k else []
        idx = sorted(idx, key=lambda i: -probs[i])
        lines.append(f"top {k} probabilities (basis state, qubit 0 rightmost):")
        for i in idx:
            amp = result.statevector[i]
            lines.append(
                f"  |{i:0{circuit.num_qubits}b}>  {probs[i]:.6f}   amplitude {amp.real:+.6e} "
                f"{amp.imag:+.6e}i"
            )
    if counts is not None:
        shots = sum(counts.values())
        lines.append(f"counts ({shots} shots, {len(counts)} outcomes):")
        for key, c in sorted(counts.items(), key=lambda kv: -kv[1])[:top]:
            lines.append(f"  {key}  {c}")
    return "\n".join(lines)


def _ops_text(circuit) -> str:
    ops = circuit.count_ops()
    text = ", ".join(f"{name} {n}" for name, n in list(ops.items())[:6])
    return text + (", ..." if len(ops) > 6 else "")


def _write_output(path: Path, circuit, result, counts) -> None:
    if path.suffix == ".npy":
        np.save(path, result.statevector)
        return
    doc = {
        "circuit": circuit.name,
        "num_qubits": circuit.num_qubits,
        "metadata": {k: v for k, v in result.metadata.items() if k != "measurements"},
        "measurements": {str(q): c for q, c in result.metadata["measurements"].items()},
        "counts": counts,
    }
    if result.metadata["mode"] == "statevector":
        probs = result.probabilities()
        nz = np.flatnonzero(probs > 1e-12)
        doc["probabilities"] = {
            format(int(i), f"0{circuit.num_qubits}b"): float(probs[i]) for i in nz
        }
    doc["metadata"]["splits"] = {str(k): v for k, v in doc["metadata"]["splits"].items()}
    path.write_text(json.dumps(doc, indent=2))


def _info() -> int:
    import platform

    import scipy

    print(f"ozsim {__version__}")
    print(f"python {platform.python_version()} ({platform.machine()})")
    print(f"numpy {np.__version__}, scipy {scipy.__version__}")
    try:
        import qiskit

        print(f"qiskit {qiskit.__version__}")
    except ImportError:
        print("qiskit: not installed")
    from .simulator import gpu_available

    ok, reason = gpu_available()
    if ok:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(0)
        name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        free, total = cupy.cuda.Device(0).mem_info
        print(f"cupy {cupy.__version__}; GPU 0: {name}, {total / 2**30:.1f} GiB "
              f"({free / 2**30:.1f} GiB free)")
    else:
        print(f"GPU: none ({reason}); device='auto' runs on the CPU")
    print("\nbackends (ozsim.gemm.registry):")
    for scheme in registry.SCHEMES:
        devices = "/".join(scheme.devices)
        for pat in scheme.names:
            print(f"  {pat.display():<26} {devices:<8} {pat.summary}")
    print("\nenvironment switches (value in force):")
    for sw in config.SWITCHES:
        try:
            value = config.get(sw.name)
        except config.ConfigError as exc:
            value = f"invalid: {exc}"
        print(f"  {sw.name + '=' + value:<22} {sw.description}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
