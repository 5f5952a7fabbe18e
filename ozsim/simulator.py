"""``Simulator`` and ``Result``: run a circuit on the state-vector engine."""

from __future__ import annotations

import cmath
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .circuit import Circuit
from .errors import DeviceUnavailableError, NonFiniteError, UnsupportedOperationError
from .gemm import parse_backend
from .statevector import StateVector, gemm_prepare

__all__ = ["Simulator", "Result", "get_array_module", "gpu_available"]

DEVICES = ("auto", "cpu", "gpu")


def gpu_available() -> tuple[bool, str]:
    """Whether CuPy imports and sees a CUDA device: ``(ok, reason)``. Imports CuPy."""
    try:
        import cupy
    except Exception as exc:  # ImportError, or a broken CUDA install
        return False, f"CuPy is not importable ({exc.__class__.__name__}: {exc})"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return False, f"CuPy sees no CUDA device ({exc.__class__.__name__}: {exc})"
    if count < 1:
        return False, "CuPy sees no CUDA device"
    return True, f"{count} CUDA device(s)"


def get_array_module(device: str):
    """The array module for ``device`` and the device actually used: ``(xp, "cpu"|"gpu")``.

    Raises:
        ValueError: ``device`` not one of ``"auto"``, ``"cpu"``, ``"gpu"``.
        DeviceUnavailableError: ``device="gpu"`` and no GPU is usable (never a silent fallback).
    """
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {device!r}")
    if device == "cpu" or (device == "auto" and os.environ.get("OZSIM_DEVICE") == "cpu"):
        return np, "cpu"
    ok, reason = gpu_available()
    if ok:
        import cupy

        return cupy, "gpu"
    if device == "gpu":
        raise DeviceUnavailableError(
            f"device='gpu' was requested but {reason}; install ozsim[cuda12] or ozsim[cuda13] on a "
            "machine with an NVIDIA GPU, or use device='cpu'"
        )
    return np, "cpu"


@dataclass
class Result:
    """The outcome of :meth:`Simulator.run`.

    Attributes:
        num_qubits: N.
        circuit_name: the circuit's name.
        metadata: ``backend``, ``T``, ``device``, ``num_gates``, ``splits`` (histogram
            ``{num_splits: GEMM count}``, ``"zgemm"`` for native), ``fallbacks`` (INT8-AUTO GEMMs
            that ran native ZGEMM), ``max_mean_loss_bits``, ``wall_time_s``, ``peak_memory_bytes``,
            ``measurements`` (``{qubit: [clbits]}``).
        cregs: classical registers ``(name, size)`` in declaration order.
    """

    num_qubits: int
    circuit_name: str
    metadata: dict
    cregs: list[tuple[str, int]]
    _amplitudes: object = field(repr=False, default=None)
    _seed: int | None = field(repr=False, default=None)

    @property
    def statevector(self) -> np.ndarray:
        """Final amplitudes before measurement, ``(2**N,)`` complex128 NumPy, little-endian."""
        if not isinstance(self._amplitudes, np.ndarray):
            self._amplitudes = self._amplitudes.get()
        return self._amplitudes

    def probabilities(self) -> np.ndarray:
        """``|amplitude|**2``, ``(2**N,)`` float64, little-endian index."""
        psi = self.statevector
        return psi.real**2 + psi.imag**2

    def sample_counts(self, shots: int, seed: int | None = None) -> dict[str, int]:
        """Sample the circuit's final measurements ``shots`` times.

        Keys are Qiskit's: classical registers in reverse declaration order separated by spaces,
        each written most significant bit first (``'01 10'`` for ``c1 = 0b01, c0 = 0b10``).
        Classical bits that no measurement writes read 0. A circuit without measurements samples
        every qubit (keys are N-bit strings, qubit 0 rightmost, as ``Statevector.sample_counts``).

        Args:
            shots: number of samples (>= 1).
            seed: for the sampler; defaults to the Simulator's seed.

        Returns:
            ``{bitstring: count}``, sorted by bitstring.
        """
        if shots < 1:
            raise ValueError(f"shots must be >= 1, got {shots}")
        rng = np.random.default_rng(self._seed if seed is None else seed)
        p = self.probabilities()
        p = p / p.sum()
        outcomes = rng.choice(p.size, size=int(shots), p=p)
        meas = self.metadata["measurements"]
        if not meas:
            width = self.num_qubits
            keys = Counter(outcomes.tolist())
            return {format(i, f"0{width}b"): c for i, c in sorted(keys.items())}
        counts: Counter = Counter()
        for index, c in Counter(outcomes.tolist()).items():
            bits = 0
            for q, clbits in meas.items():
                if (index >> q) & 1:
                    for cb in clbits:
                        bits |= 1 << cb
            counts[self._format_clbits(bits)] += c
        return dict(sorted(counts.items()))

    def _format_clbits(self, bits: int) -> str:
        words, start = [], 0
        for _, size in self.cregs:
            words.append(format((bits >> start) & ((1 << size) - 1), f"0{size}b"))
            start += size
        return " ".join(reversed(words))


@dataclass(frozen=True)
class Simulator:
    """Runs circuits with gates applied through native or emulated ZGEMM.

    Args:
        backend: ``"int8-auto"`` (default), ``"zgemm"`` or ``"int8x{s}"``, s = 3..18.
        T: INT8-AUTO's threshold on the mean mantissa loss per GEMM, in bits (>= 0).
        device: ``"auto"`` (GPU when CuPy sees one, else CPU; ``OZSIM_DEVICE=cpu`` forces the
            CPU), ``"cpu"`` or ``"gpu"`` (an error if there is no usable GPU).
        seed: seeds the sampling of measurements.
        workspace_bytes: bound on the emulated GEMM's slice buffers.

    Example:
        >>> from ozsim import Simulator
        >>> result = Simulator(backend="int8-auto", T=1).run("circuits/ghz_n20.qasm")
        >>> result.sample_counts(1000)
    """

    backend: str = "int8-auto"
    T: float = 1.0
    device: str = "auto"
    seed: int | None = None
    workspace_bytes: int = 1 << 28

    def __post_init__(self):
        parse_backend(self.backend)
        if not self.T >= 0:
            raise ValueError(f"T must be >= 0 bits, got {self.T}")
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {self.device!r}")

    def run(self, circuit, progress: Callable[[int, int], None] | None = None) -> Result:
        """Simulate ``circuit`` from ``|0...0>``.

        Args:
            circuit: an :class:`ozsim.Circuit`, a ``qiskit.QuantumCircuit``, or a path to an
                OpenQASM 2 or 3 file.
            progress: called as ``progress(done, total)`` after each gate.

        Returns:
            :class:`Result`.

        Raises:
            QasmError: a file that cannot be parsed (file and line in the message).
            UnsupportedOperationError: resets, mid-circuit measurements and classically
                conditioned gates (named, with their position).
            InsufficientMemoryError: the state does not fit (raised before allocating).
            DeviceUnavailableError: ``device="gpu"`` without a usable GPU.
            NonFiniteError: the final amplitudes hold NaN or Inf.
        """
        circ = _as_circuit(circuit)
        measurements = _final_measurements(circ)
        xp, device = get_array_module(self.device)
        t0 = time.perf_counter()
        sv = StateVector(circ.num_qubits, xp, self.workspace_bytes)
        splits: Counter = Counter()
        fallbacks = 0
        max_loss = 0.0
        gates = circ.gates
        phase = cmath.exp(1j * circ.global_phase) if circ.global_phase else None
        for i, op in enumerate(gates):
            matrix = op.matrix
            if i == 0 and phase is not None:
                matrix, phase = matrix * phase, None
            info = sv.apply(gemm_prepare(xp.asarray(matrix), self.backend), op.qubits,
                            self.backend, self.T)
            splits[info.num_splits if info.num_splits is not None else "zgemm"] += 1
            fallbacks += info.fallback
            for loss in (info.mean_loss_a, info.mean_loss_b):
                if loss is not None:
                    max_loss = max(max_loss, loss)
            if progress is not None:
                progress(i + 1, len(gates))
        if phase is not None:
            sv.scale(phase)
        amps = sv.amplitudes()
        if not bool(xp.isfinite(amps).all()):
            raise NonFiniteError("the final state vector holds NaN or Inf amplitudes")
        if xp is not np:  # pragma: no cover - GPU
            xp.cuda.Device().synchronize()
        wall = time.perf_counter() - t0
        metadata = {
            "backend": self.backend,
            "T": self.T,
            "device": device,
            "num_qubits": circ.num_qubits,
            "num_gates": len(gates),
            "splits": dict(sorted(splits.items(), key=lambda kv: str(kv[0]))),
            "fallbacks": fallbacks,
            "max_mean_loss_bits": max_loss,
            "wall_time_s": wall,
            "peak_memory_bytes": sv.peak_bytes,
            "measurements": measurements,
        }
        return Result(circ.num_qubits, circ.name, metadata, list(circ.cregs), amps, self.seed)


def _as_circuit(x) -> Circuit:
    if isinstance(x, Circuit):
        return x
    if isinstance(x, (str, os.PathLike)):
        from .interop.qiskit import load_qasm

        return load_qasm(x)
    if type(x).__name__ == "QuantumCircuit":
        from .interop.qiskit import from_qiskit

        return from_qiskit(x)
    raise TypeError(
        f"cannot run a {type(x).__name__}; expected an ozsim.Circuit, a qiskit.QuantumCircuit or "
        "a path to an OpenQASM file"
    )


def _final_measurements(circ: Circuit) -> dict[int, list[int]]:
    """``{qubit: [clbits]}`` for the final measurements; refuse what needs per-shot simulation."""
    meas: dict[int, list[int]] = {}
    meas_pos: dict[int, int] = {}
    for pos, op in enumerate(circ.operations):
        where = f"operation {pos} ({op.name or op.kind} on qubits {list(op.qubits)})"
        if op.condition is not None:
            raise UnsupportedOperationError(
                f"{where} is classically conditioned; conditioned gates are not supported yet"
            )
        if op.kind == "reset":
            raise UnsupportedOperationError(f"{where} is a reset; resets are not supported yet")
        if op.kind == "measure":
            meas.setdefault(op.qubits[0], []).extend(op.clbits)
            meas_pos.setdefault(op.qubits[0], pos)
        elif op.kind == "unitary" and any(q in meas for q in op.qubits):
            q = next(q for q in op.qubits if q in meas)
            raise UnsupportedOperationError(
                f"operation {meas_pos[q]} (measure on qubit {q}) is a mid-circuit measurement: "
                f"{where} follows it; mid-circuit measurements are not supported yet"
            )
    return meas
