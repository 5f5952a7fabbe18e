"""The ``ozsim`` command line: ``ozsim run``, ``ozsim check``, ``ozsim info``.

Bad input (a missing or malformed file, an unsupported operation, an unknown backend, too little
memory, no GPU when one was asked for, an ``--output`` that cannot be written) exits with status 2
and one line on stderr, no traceback; the output destination is checked before any work.
SIGINT (Ctrl-C) and SIGTERM stop ``ozsim run`` with one line on stderr and exit statuses 130 and
143; a trajectory run with ``--output`` first writes the counts of the shots completed, marked
``"partial": true`` with ``"shots_completed"``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import threading
import warnings
from pathlib import Path

import numpy as np

from . import __version__, config
from .errors import OzsimError
from .auto import DEFAULT_BACKEND, is_auto
from .gemm import registry

__all__ = ["main"]

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``ozsim: error: ...``), exit status 2."""

    def error(self, message: str):
        self.exit(EXIT_USAGE, f"ozsim: error: {message} (see `{self.prog} --help`)\n")


def _int_at_least(lo: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lo}, got {text!r}") from None
        if value < lo:
            raise argparse.ArgumentTypeError(f"must be an integer >= {lo}, got {value}")
        return value

    parse.__name__ = f"integer >= {lo}"
    return parse


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="ozsim",
        description="State-vector simulation on an emulated ZGEMM (Ozaki scheme over INT8).",
    )
    p.add_argument("--version", action="version", version=f"ozsim {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="simulate an OpenQASM 2/3 circuit")
    run.add_argument("circuit", help="path to a .qasm file (OpenQASM 2 or 3)")
    run.add_argument(
        "--backend",
        default=DEFAULT_BACKEND,
        help=f"auto (each fused block through the candidate zgemm, int8-auto or int8-crt-auto "
        f"with the lowest modelled cost on the device; the default), or one scheme: "
        f"{registry.help_text()} (`ozsim info` lists them)",
    )
    run.add_argument(
        "-T",
        type=float,
        default=1.0,
        help="threshold of the auto backends, bits (default: 1): int8-auto's mean mantissa "
        "loss; int8-crt-auto's error bound over FP64's",
    )
    run.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"))
    run.add_argument(
        "--precision", default="double", choices=("double", "single"),
        help="amplitudes in complex128 (double, the default) or complex64 (single: half the "
        f"memory; backends {registry.help_text('single')}, auto = cgemm)",
    )
    run.add_argument(
        "--shots", type=_int_at_least(0), default=None, metavar="N",
        help="sample the final measurements N times; 0: the final state only (an error for a "
        "circuit with mid-circuit measurements, resets or conditions); default: none for plain "
        "circuits, 1024 for those",
    )
    run.add_argument("--seed", type=_int_at_least(0), default=None, help="seed for sampling")
    run.add_argument("--memory", action="store_true",
                     help="keep per-shot records (needs shots): the first --top printed, all of "
                     "them in a .json --output as \"memory\"")
    run.add_argument("--top", type=_int_at_least(0), default=8,
                     help="how many largest probabilities and counts to print (default: 8)")
    run.add_argument(
        "--output",
        default=None,
        help="write the result: .json (summary, counts, probabilities > 1e-12) or .npy (amplitudes)",
    )
    run.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    run.add_argument(
        "--fusion-max-qubits",
        type=_int_at_least(0),
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
    chk.add_argument("--precision", default="double", choices=("double", "single"),
                     help="run the backends in complex128 (double) or complex64 (single, "
                     f"backends {registry.help_text('single')}); the reference is "
                     "double-double either way")
    chk.add_argument(
        "--fusion-max-qubits",
        type=_int_at_least(0),
        default=None,
        metavar="N",
        help="fusion of the backend runs, as for ozsim run (0: every gate its own GEMM, as in "
        "the ozIMMU paper; default: cost model); the reference applies the unfused gates",
    )
    chk.add_argument("--floor", type=float, default=1e-3,
                     help="magnitude floor factor of the max relative error (default: 1e-3)")
    chk.add_argument("--json", action="store_true", help="print JSON instead of the table")

    sub.add_parser("info", help="print versions, devices, backends and environment switches")

    cal = sub.add_parser(
        "calibrate", help="measure gate costs on this device for fusion's cost model",
        description="Time one d-qubit gate per backend and d on this device and cache the costs "
        "(per amplitude) in the user's cache directory; later runs on this device plan fusion "
        "with them.")
    cal.add_argument("--device", default="auto", choices=("auto", "cpu", "gpu"))
    cal.add_argument("--qubits", type=_int_at_least(2), default=None, metavar="N",
                     help="state size measured on (default: 16 on the CPU, 26 on a GPU)")
    cal.add_argument("--max-gate-qubits", type=_int_at_least(1), default=None, metavar="D",
                     help="gates of 1..D qubits (default: 6 on the CPU, 10 on a GPU)")
    cal.add_argument("--backends", default=None,
                     help="comma list (default: one of each kind, as `ozsim check --backends all`)")
    return p


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status (0 success, 2 bad input, 130 / 143 stopped by SIGINT /
    SIGTERM)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed its one-line message
        return int(exc.code or 0)
    with warnings.catch_warnings():
        warnings.showwarning = _one_line_warning  # (restored on leaving the block)
        return _main(args)


def _one_line_warning(message, category, filename, lineno, file=None, line=None):
    print(f"ozsim: warning: {message}", file=sys.stderr)


def _main(args) -> int:
    try:
        if args.command == "run":
            with _stop_signals() as stop:
                try:
                    return _run(args, stop)
                except KeyboardInterrupt as exc:  # before or after the simulation
                    return _stopped(exc, stop, None, None)
        if args.command == "check":
            return _check(args)
        if args.command == "calibrate":
            return _calibrate(args)
        return _info()
    except (OzsimError, ValueError, TypeError, OSError, MemoryError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        print(f"ozsim: error: {msg}", file=sys.stderr)
        _abort_other_ranks(args)
        return EXIT_USAGE


def _abort_other_ranks(args) -> None:
    """Under ``mpiexec`` one rank's error would leave the others waiting in a collective
    forever: ``ozsim run`` ends them all (``MPI_Abort`` with the usage status)."""
    if getattr(args, "command", None) != "run":
        return
    from .distributed import world

    comm = world()
    if comm is not None:  # pragma: no cover - needs an MPI launcher
        sys.stderr.flush()
        comm.Abort(EXIT_USAGE)


class _Stop:
    """The signal that stopped the run (SIGINT unless SIGTERM came)."""

    def __init__(self):
        self.signum = signal.SIGINT

    def handler(self, signum, frame):
        self.signum = signum
        # A second signal while the stop is handled (writing partial counts) is ignored.
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)
        raise KeyboardInterrupt


@contextlib.contextmanager
def _stop_signals():
    """SIGINT and SIGTERM raise KeyboardInterrupt (noting which) while ``ozsim run`` works; the
    previous handlers are restored after."""
    stop = _Stop()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        for s in old:
            signal.signal(s, stop.handler)
        yield stop
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _run(args, stop: _Stop) -> int:
    from .output import check_output_path
    from .simulator import Simulator, needs_trajectories

    from .distributed import world

    comm = world()  # under mpiexec: the state spread over the ranks, rank 0 reports
    root = comm is None or comm.Get_rank() == 0
    output = check_output_path(args.output) if args.output and root else None  # before work
    sim = Simulator(
        comm=comm,
        backend=args.backend,
        T=args.T,
        device=args.device,
        seed=args.seed,
        max_fused_qubits=args.fusion_max_qubits,
        precision=args.precision,
    )
    from .interop.qiskit import load_qasm

    circuit = load_qasm(args.circuit)
    if output is not None and output.suffix == ".npy" and needs_trajectories(circuit):
        raise ValueError("--output .npy needs a final state; this circuit has mid-circuit "
                         "operations: use --output result.json for its counts")
    try:
        result = _simulate(args, sim, circuit)
    except KeyboardInterrupt as exc:
        return _stopped(exc, stop, circuit, output)
    if not root:
        return 0
    print(_summary(circuit, result, result.counts, args.top))
    if output is not None:
        _write_output(output, circuit, result, result.counts)
        print(f"wrote {args.output}")
    return 0


def _stopped(exc: KeyboardInterrupt, stop: _Stop, circuit, output) -> int:
    """One line on stderr; partial trajectory counts written to a .json --output; 128 + signum."""
    from .errors import RunInterrupted

    name = signal.Signals(stop.signum).name
    partial = exc.partial if isinstance(exc, RunInterrupted) else None
    if partial is None:
        what = ("stopped before the final state was complete" if isinstance(exc, RunInterrupted)
                else "stopped") + "; nothing written"
    else:
        what = str(exc)  # "stopped after k of n shots"
        if output is not None and output.suffix == ".json":
            try:
                _write_output(output, circuit, partial, partial.counts)
                what += f"; wrote their counts to {output} (\"partial\": true)"
            except OSError as err:
                what += f"; could not write {output}: {err}"
        else:
            what += "; nothing written (no --output .json)"
    print(f"ozsim: {name}: {what}", file=sys.stderr)
    return 128 + int(stop.signum)


def _simulate(args, sim, circuit):
    shots = args.shots
    show_bar = not args.no_progress and sys.stderr.isatty() and sim.comm is None and (
        circuit.num_qubits >= 18 or circuit.num_gates >= 500
    )
    if show_bar:
        from rich.progress import Progress

        with Progress(transient=True) as bar:
            task = bar.add_task(f"{circuit.name}", total=circuit.num_gates)
            result = sim.run(
                circuit, shots, progress=lambda done, total: bar.update(task, completed=done),
                memory=args.memory,
            )
    else:
        result = sim.run(circuit, shots, memory=args.memory)
    return result


def _check(args) -> int:
    from .accuracy import check, parse_backend_specs
    from .interop.qiskit import load_qasm
    from .reference import check_reference_fits, reference_macs

    specs = parse_backend_specs(args.backends, args.T.split(","),  # bad names: exit 2, no parse
                                args.precision)
    circuit = load_qasm(args.circuit)
    check_reference_fits(circuit.num_qubits)
    est = reference_macs(circuit) / 5e7
    if est > 60 and not args.json:
        print(f"ozsim: the double-double reference will take about {est / 60:.0f} min on one core",
              file=sys.stderr)
    report = check(circuit, specs, device=args.device, floor_factor=args.floor,
                   max_fused_qubits=args.fusion_max_qubits, precision=args.precision)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(report.format_table())
    return 0


def _has_T(backend: str, precision: str = "double") -> bool:
    return is_auto(backend) or registry.parse(backend, precision).auto


def _auto_text(md) -> str:
    """backend="auto"'s choices in one line: blocks per backend and the cost table."""
    if "auto" not in md:
        return ""
    blocks = ", ".join(f"{name} {n}" for name, n in md["auto"]["blocks"].items()) or "none"
    return f"; blocks by backend: {blocks} (cost table: {md['auto']['table']})"


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
        f"backend   {md['backend']}" + (f" (T = {md['T']:g} bits)" if _has_T(
            md["backend"], md.get("precision", "double")) else "") + f" on {md['device']}"
        + ("" if md.get("precision", "double") == "double" else " in single precision")
        + _auto_text(md),
        f"splits    {{{splits}}} GEMMs" + (f", {md['fallbacks']} fell back to native ZGEMM"
                                          if md["fallbacks"] else ""),
        f"accuracy  error bound {md['error_bound']:.1e} (a priori, relative to the state's norm)",
        f"time      {md['wall_time_s']:.3f} s",
        f"memory    {md['peak_memory_bytes'] / 2**20:.1f} MiB peak working memory"
        + (" per rank" if "distributed" in md else ""),
    ]
    if "distributed" in md:
        dist = md["distributed"]
        lines.append(f"ranks     {dist['ranks']} ({dist['global_qubits']} global qubits), "
                     f"{dist['swaps']} swaps, {dist['swap_bytes'] / 2**20:.1f} MiB sent by rank 0 "
                     f"in {dist['swap_seconds']:.3f} s")
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
    if result.memory is not None and top:
        lines.append(f"memory (first {min(top, len(result.memory))} of {len(result.memory)} "
                     f"shots): {' '.join(result.memory[:top])}")
    return "\n".join(lines)


def _ops_text(circuit) -> str:
    ops = circuit.count_ops()
    text = ", ".join(f"{name} {n}" for name, n in list(ops.items())[:6])
    return text + (", ..." if len(ops) > 6 else "")


def _write_output(path: Path, circuit, result, counts) -> None:
    """Write ``result`` to ``path`` (.npy amplitudes or .json summary), atomically."""
    from .output import write_atomic

    if path.suffix == ".npy":
        psi = result.statevector
        write_atomic(path, lambda f: np.save(f, psi))
        return
    doc = {
        "circuit": circuit.name,
        "num_qubits": circuit.num_qubits,
        "metadata": {k: v for k, v in result.metadata.items() if k != "measurements"},
        "measurements": {str(q): c for q, c in result.metadata["measurements"].items()},
        "counts": counts,
    }
    if result.memory is not None:
        doc["memory"] = result.memory
    if result.metadata["mode"] == "statevector":
        probs = result.probabilities()
        nz = np.flatnonzero(probs > 1e-12)
        doc["probabilities"] = {
            format(int(i), f"0{circuit.num_qubits}b"): float(probs[i]) for i in nz
        }
    if result.metadata.get("partial"):
        doc["partial"] = True
        doc["shots_completed"] = result.metadata["shots_completed"]
    doc["metadata"]["splits"] = {str(k): v for k, v in doc["metadata"]["splits"].items()}
    text = json.dumps(doc, indent=2).encode()
    write_atomic(path, lambda f: f.write(text))


def _calibrate(args) -> int:
    from .calibration import cache_path, calibrate, device_tag
    from .simulator import get_array_module

    _, device = get_array_module(args.device)
    n = args.qubits or (16 if device == "cpu" else 26)
    dmax = args.max_gate_qubits or (6 if device == "cpu" else 10)
    backends = args.backends.split(",") if args.backends else registry.all_names()
    table = calibrate(device, backends, n, dmax)
    print(f"gate cost on {device_tag(device)}, N = {n}: nanoseconds per amplitude")
    print("backend".ljust(16) + "".join(f"d={d}".rjust(9) for d in range(1, dmax + 1)))
    for name, row in table.items():
        print(name.ljust(16) + "".join(f"{row[d] * 1e9:9.3f}" for d in range(1, dmax + 1)))
    print(f"wrote {cache_path(device_tag(device))}")
    return 0


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
    print(f"  {'auto':<26} {'cpu/gpu':<8} per fused block the cheapest of zgemm, int8-auto, "
          "int8-crt-auto at T by the device's cost table (ozsim.auto)")
    print("\nsingle-precision backends (--precision single, complex64 amplitudes):")
    for scheme in registry.SINGLE_SCHEMES:
        devices = "/".join(scheme.devices)
        for pat in scheme.names:
            print(f"  {pat.display():<26} {devices:<8} {pat.summary}")
    print(f"  {'auto':<26} {'cpu/gpu':<8} cgemm")
    try:
        import mpi4py
        from mpi4py import MPI

        library = " ".join(MPI.Get_library_version().split())[:48]
        mpi = f"mpi4py {mpi4py.__version__} ({library})"
    except Exception as exc:  # (not installed, or no MPI library for it to load)
        mpi = f"not available ({exc.__class__.__name__}): pip install -e '.[mpi]'"
    print(f"\ndistributed runs (mpiexec -n P ozsim run ...): {mpi}")
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
