"""``Simulator`` and ``Result``: run a circuit on the state-vector engine."""

from __future__ import annotations

import cmath
import math
import numbers
import os
import re
import sys
import time
import warnings
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field, replace
from typing import TypedDict

import numpy as np

from . import config
from .circuit import Circuit, Operation
from .errors import (
    DeviceUnavailableError,
    InsufficientMemoryError,
    NonFiniteError,
    RunInterrupted,
    UnsupportedOperationError,
)
from .auto import DEFAULT_BACKEND, AutoPlan, is_auto
from .auto import plan as auto_plan
from .gemm.registry import parse as parse_backend_spec
from .gemm import bounds
from .statevector import (PRECISIONS, StateVector, available_memory_bytes, gemm_prepare,
                          pad_gate, state_bytes)

__all__ = ["Result", "RunMetadata", "Simulator", "get_array_module", "gpu_available",
           "needs_trajectories"]

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
    if device == "cpu" or (device == "auto" and config.get("OZSIM_DEVICE") == "cpu"):
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


class RunMetadata(TypedDict, total=False):
    """The keys of :attr:`Result.metadata`, documented in this one place.

    Attributes:
        backend: the backend name asked for; T: its threshold in bits (auto backends).
        device: ``"cpu"`` or ``"gpu"``, where the run went.
        precision: ``"double"`` (complex128 amplitudes) or ``"single"`` (complex64).
        num_qubits: N. num_gates: unitaries applied, after fusion.
        fusion: :meth:`ozsim.fusion.FusionReport.as_dict`.
        splits: histogram of the GEMMs' choices: ``{num_splits: count}`` (scheme I),
            ``{"crt{N}": count}`` (scheme II, N moduli), ``{"zgemm": count}`` (native); in
            single precision ``{backend: count}`` for backends without slices.
        fallbacks: GEMMs of an auto backend that ran native ZGEMM (warned once a run).
        max_mean_loss_bits: the largest quantity an auto backend held to ``T``, in bits: the
            mean mantissa loss of a GEMM's operand (``int8-auto``), ``log2`` of scheme II's
            error bound over FP64's (``int8-crt-auto``, signed; :class:`ozsim.gemm.GemmInfo`).
        error_bound: a-priori bound on the final state's norm-wise relative error, the sum of
            every GEMM's bound (:mod:`ozsim.gemm.bounds`; for trajectories the sum over every
            branch's gates, a bound for each branch).
        wall_time_s: seconds. peak_memory_bytes: the state's buffers and workspace at most.
        measurements: ``{qubit: [clbits]}`` of the final measurements.
        mode: ``"statevector"``, or ``"trajectories"`` for circuits with mid-circuit
            measurements, resets or conditioned gates.
        branches: trajectories only: distinct measurement histories simulated.
        partial, shots_completed: a stopped trajectory run: ``True`` and the shots done.
        gates_reused: gates whose preparation (analysis, splits or residues, device copy) came
            from the :class:`GateCache` of earlier runs or earlier in this run.
        auto: ``backend="auto"`` only (:mod:`ozsim.auto`): ``{"table": the cost table used,
            "blocks": {backend: fused blocks it ran}, "choices": [[d, backend, modelled seconds,
            measured seconds, measured passes], ...] per block in order}``: the time of each
            block (the CPU's clock; on the GPU CUDA events around it, read after the run, so no
            block waits for the host) and that time as a multiple of one read and one write of
            the state at the cost table's bandwidth (1.0: the floor).
        distributed: runs over several ranks only (``Simulator(comm=...)``): ``{"ranks",
            "rank", "global_qubits", "swaps", "swap_bytes" (sent by this rank),
            "swap_seconds", "layout" (the final logical-to-physical qubit map)}``;
            ``peak_memory_bytes`` is then per rank.
    """

    backend: str
    T: float
    device: str
    precision: str
    num_qubits: int
    num_gates: int
    fusion: dict
    splits: dict
    fallbacks: int
    max_mean_loss_bits: float
    error_bound: float
    wall_time_s: float
    peak_memory_bytes: int
    measurements: dict[int, list[int]]
    mode: str
    branches: int
    partial: bool
    shots_completed: int
    gates_reused: int
    auto: dict
    distributed: dict


class GateCache:
    """Prepared gates reused across runs: a fused block's matrix once analysed, split (scheme I)
    or reduced mod its moduli (scheme II) and copied to the device serves every later
    application of the same matrix to the same targets with the same backend.

    A parameter sweep runs a circuit once per parameter set; its blocks of parameter-free gates
    are the same matrices in every run, so their preparation is done once (the blocks that hold a
    parameter are new matrices each run and are prepared each run). A :class:`Simulator` keeps
    one for all its runs; the primitives and :class:`ozsim.qiskit.OzsimBackend` share one
    across the runs of a sweep. Results are bitwise the same with or without it (a prepared gate
    depends only on the matrix's bits and the backend).

    Args:
        max_bytes: bound on the bytes of the matrices held (least recently used first out; each
            one's splits or residues add up to about twice as much again). Default 64 MiB.
        max_matrix_bytes: larger matrices are prepared afresh, never looked up: the lookup
            hashes and compares the matrix's bytes, which for a 10-qubit block (16 MiB) costs as
            much as preparing it. Default 1 MiB (blocks of up to 8 qubits).

    Attributes:
        hits, misses: lookups served from the cache, and preparations made.
    """

    def __init__(self, max_bytes: int = 64 << 20, max_matrix_bytes: int = 1 << 20):
        for name, v in (("max_bytes", max_bytes), ("max_matrix_bytes", max_matrix_bytes)):
            if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 0:
                raise ValueError(f"{name} must be an integer >= 0, got {v!r}")
        self.max_bytes = int(max_bytes)
        self.max_matrix_bytes = int(max_matrix_bytes)
        self._items: OrderedDict = OrderedDict()
        self._bytes = 0
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._items)

    def get(self, backend: str, device: str, matrix: np.ndarray, prepare: Callable):
        """The prepared gate for ``matrix`` (host ``(2**d, 2**d)`` complex128; a prepared gate
        does not depend on its targets): from the cache, or ``prepare()`` (then kept while the
        byte bound allows)."""
        if matrix.nbytes > min(self.max_matrix_bytes, self.max_bytes):
            self.misses += 1
            return prepare()
        key = (backend, device, matrix.shape, matrix.tobytes())
        gate = self._items.get(key)
        if gate is not None:
            self._items.move_to_end(key)
            self.hits += 1
            return gate
        self.misses += 1
        gate = prepare()
        self._items[key] = gate
        self._bytes += matrix.nbytes
        while self._bytes > self.max_bytes:
            old, _ = self._items.popitem(last=False)
            self._bytes -= len(old[3])
        return gate


def in_place_limit(backend, device: str, num_qubits: int, precision: str = "double") -> int:
    """The largest d such that blocks of 1..d qubits all run through a one-pass kernel (in place:
    the state's one buffer, no spare, no GEMM workspace) on ``device``.

    Args:
        backend: a backend name, or an :class:`~ozsim.auto.AutoPlan` (its choice per block size).
        device: ``"cpu"`` or ``"gpu"``.
        num_qubits: N (a block of N qubits is a plain GEMM).
        precision: ``"double"`` or ``"single"`` (the backend's registry list).

    Returns:
        0 when even a 1-qubit gate needs the GEMM path.
    """
    d = 0
    while d + 1 < num_qubits:
        name = backend.choose(num_qubits, d + 1)[0] if isinstance(backend, AutoPlan) else backend
        if not parse_backend_spec(name, precision).scheme.one_pass(device, d + 1):
            break
        d += 1
    return d


@dataclass
class Result:
    """The outcome of :meth:`Simulator.run`.

    Args:
        num_qubits: N.
        circuit_name: the circuit's name.
        metadata: :class:`RunMetadata`.
        cregs: classical registers ``(name, size)`` in declaration order.
        counts: ``{bitstring: count}`` when the run was asked for shots (always for
            trajectories), else ``None``. Keys as :meth:`sample_counts` describes.
        amplitudes: the final state, ``(2**N,)`` complex128 NumPy or CuPy (left on the device
            until read), or ``None`` for a trajectory run (and on the ranks other than 0 of a
            distributed run).
        seed: the seed :meth:`sample_counts` draws with by default.
        memory: per-shot records (``run(..., memory=True)``): ``shots`` keys of :attr:`counts`,
            one per shot in the order drawn, else ``None``.
    """

    num_qubits: int
    circuit_name: str
    metadata: RunMetadata
    cregs: list[tuple[str, int]]
    counts: dict[str, int] | None = None
    memory: list[str] | None = None
    amplitudes: InitVar[object] = None
    seed: InitVar[int | None] = None
    _amplitudes: object = field(init=False, repr=False, default=None)
    _seed: int | None = field(init=False, repr=False, default=None)
    _distributed: object = field(init=False, repr=False, default=None)

    def __post_init__(self, amplitudes, seed):
        self._amplitudes, self._seed = amplitudes, seed

    @property
    def statevector(self) -> np.ndarray:
        """Final amplitudes before measurement, ``(2**N,)`` complex128 NumPy, little-endian.

        Raises:
            UnsupportedOperationError: for a trajectory run, whose final state depends on
                mid-circuit outcomes (use :attr:`counts`).
        """
        if self._amplitudes is None and "distributed" in self.metadata:
            raise UnsupportedOperationError(
                "a distributed run gathers its final state on rank 0 only, and only where it "
                "fits half of rank 0's free host memory; use counts and expectation values "
                "(computed shard by shard) instead")
        if self._amplitudes is None:
            raise UnsupportedOperationError(
                "this circuit has mid-circuit measurements, resets or conditioned gates: its final "
                "state is a mixture over measurement outcomes; use Result.counts"
            )
        if not isinstance(self._amplitudes, np.ndarray):
            self._amplitudes = self._amplitudes.get()
        return self._amplitudes

    def amplitude_range(self, start: int = 0, stop: int | None = None) -> np.ndarray:
        """Amplitudes ``start .. stop - 1`` (little-endian index) as a NumPy copy, taken where the
        state lives: of a GPU run's state only those ``16 (stop - start)`` bytes come to the host
        (:attr:`statevector` brings all ``16 * 2**N``, which a large state's host may not hold
        beside it).

        Args:
            start, stop: ``0 <= start <= stop <= 2**N`` (``stop=None``: ``2**N``).

        Returns:
            ``(stop - start,)`` complex128 (complex64 in single precision) NumPy.

        Raises:
            ValueError: a range outside ``0 .. 2**N``.
            UnsupportedOperationError: as :attr:`statevector` (a trajectory or distributed run).
        """
        size = 1 << self.num_qubits
        stop = size if stop is None else stop
        if isinstance(start, bool) or isinstance(stop, bool) or not (
                isinstance(start, numbers.Integral) and isinstance(stop, numbers.Integral)
                and 0 <= start <= stop <= size):
            raise ValueError(f"need integers 0 <= start <= stop <= 2**{self.num_qubits}, got "
                             f"start={start!r}, stop={stop!r}")
        psi = self._amplitudes
        if psi is None or isinstance(psi, np.ndarray):
            return np.array(self.statevector[start:stop])
        return psi[start:stop].get()

    def probabilities(self) -> np.ndarray:
        """``|amplitude|**2``, ``(2**N,)`` float64, little-endian index."""
        psi = self.statevector
        return psi.real**2 + psi.imag**2

    def sample_counts(self, shots: int, seed: int | None = None) -> dict[str, int]:
        """Sample the circuit's final measurements ``shots`` times from the final state.

        Keys are Qiskit's: classical registers in reverse declaration order separated by spaces,
        each written most significant bit first (``'01 10'`` for ``c1 = 0b01, c0 = 0b10``).
        Classical bits that no measurement writes read 0. A circuit without measurements samples
        every qubit (keys are N-bit strings, qubit 0 rightmost, as ``Statevector.sample_counts``).

        Args:
            shots: number of samples (>= 1).
            seed: for the sampler; defaults to the Simulator's seed.

        Returns:
            ``{bitstring: count}``, sorted by bitstring.

        Raises:
            TypeError: ``shots`` is not an integer.
            ValueError: ``shots < 1``.
            UnsupportedOperationError: a trajectory run (see :attr:`counts`).
        """
        if _check_shots(shots) is None or shots < 1:
            raise ValueError(f"shots must be >= 1, got {shots!r}")
        rng = np.random.default_rng(self._seed if seed is None else seed)
        counts = _sample(self.probabilities(), int(shots), rng, self.metadata["measurements"], 0)
        return self._format(counts)

    def expectation(self, observable, *, complex_value: bool = False):
        """``<psi| O |psi>`` for a Pauli observable, computed where the state lives (the GPU
        for a GPU run), in place: one pass over the state per distinct X mask
        (:func:`ozsim.observables.expectation`). For a distributed run every rank calls it
        and gets the value: each shard's sum, then an allreduce
        (:meth:`ozsim.distributed.DistributedStateVector.expectation`).

        Args:
            observable: a string over ``IXYZ`` of length N, qubit 0 rightmost (Qiskit's label
                order), optionally with a leading sign/phase (``"-XZ"``, ``"iY"``); a list of
                ``(label, coeff)``; or a ``SparsePauliOp`` (anything with ``.to_list()``).
            complex_value: return the complex value (needed for a non-Hermitian observable).

        Returns:
            float, or complex with ``complex_value``.

        Raises:
            ValueError: a label of the wrong length or with letters outside ``IXYZ``, or a
                non-Hermitian observable without ``complex_value``.
            UnsupportedOperationError: a trajectory run (no single final state).
        """
        from .observables import expectation

        if self._distributed is not None:  # every rank calls it: an allreduce over the shards
            return self._distributed.expectation(observable, complex_value=complex_value)
        psi = self._amplitudes if self._amplitudes is not None else self.statevector
        return expectation(psi, observable, complex_value=complex_value)

    def _format(self, clbit_counts: Counter) -> dict[str, int]:
        meas = self.metadata["measurements"]
        if not meas and self.metadata.get("mode") != "trajectories":
            width = self.num_qubits
            return {format(i, f"0{width}b"): c for i, c in sorted(clbit_counts.items())}
        out: Counter = Counter()
        for bits, c in clbit_counts.items():
            words, start = [], 0
            for _, size in self.cregs:
                words.append(format((bits >> start) & ((1 << size) - 1), f"0{size}b"))
                start += size
            out[" ".join(reversed(words))] += c
        return dict(sorted(out.items()))


#: Outcomes per multinomial draw: larger probability vectors are drawn chunk by chunk.
_SAMPLE_CHUNK = 1 << 20


def _multinomial(probs, shots: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """A multinomial draw of ``shots`` over the (normalised) ``probs``: ``(indices, counts)`` of
    the outcomes drawn. Memory is independent of ``shots``: besides ``probs``, O(chunk + 2**N /
    chunk) for vectors longer than a chunk (first the shots per chunk, then within each chunk)."""
    p = np.asarray(probs, dtype=np.float64)
    if p.size <= _SAMPLE_CHUNK:
        chunks = [(0, p)]
        per_chunk = np.array([shots])
    else:
        starts = np.arange(0, p.size, _SAMPLE_CHUNK)
        sums = np.add.reduceat(p, starts)
        total = sums.sum()
        if not (math.isfinite(total) and total > 0):
            raise NonFiniteError(f"cannot sample: the probabilities sum to {total}")
        per_chunk = rng.multinomial(shots, sums / total)
        chunks = [(int(s), p[s:s + _SAMPLE_CHUNK]) for s in starts]
    idx_parts, count_parts = [], []
    for (start, chunk), n in zip(chunks, per_chunk):
        if n == 0:
            continue
        total = chunk.sum()
        if not (math.isfinite(total) and total > 0):
            raise NonFiniteError(f"cannot sample: the probabilities sum to {total}")
        c = rng.multinomial(int(n), chunk / total)
        nz = np.flatnonzero(c)
        idx_parts.append(nz + start)
        count_parts.append(c[nz])
    if not idx_parts:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.concatenate(idx_parts), np.concatenate(count_parts)


def _sample(probs, shots: int, rng, meas: dict[int, list[int]], bits: int) -> Counter:
    """Sample basis states and map them to classical-bit integers (``bits`` preset).

    Without measurements the basis index itself is returned (all qubits sampled). One
    multinomial draw (:func:`_multinomial`): memory grows with the distinct outcomes, never with
    ``shots``."""
    index, count = _multinomial(probs, shots, rng)
    return _clbit_counts(index, count, meas, bits)


def _clbit_counts(index, count, meas: dict[int, list[int]], bits: int) -> Counter:
    """``{clbit value: count}`` of sampled basis states ``index`` (int64, little-endian over the
    qubits) drawn ``count`` times each (:func:`_sample`)."""
    if not meas:
        return Counter(dict(zip(index.tolist(), count.tolist())))
    top = max((cb for clbits in meas.values() for cb in clbits), default=0)
    if top < 62 and 0 <= bits < (1 << 62):  # vectorised over the outcomes
        value = np.full(index.size, bits, dtype=np.int64)
        for q, clbits in meas.items():
            bit = ((index >> q) & 1).astype(bool)
            for cb in clbits:
                value = np.where(bit, value | (1 << cb), value & ~np.int64(1 << cb))
        keys, inverse = np.unique(value, return_inverse=True)
        sums = np.zeros(keys.size, dtype=np.int64)
        np.add.at(sums, inverse, count)
        return Counter(dict(zip(keys.tolist(), sums.tolist())))
    counts: Counter = Counter()
    for i, c in zip(index.tolist(), count.tolist()):
        value = bits
        for q, clbits in meas.items():
            bit = (i >> q) & 1
            for cb in clbits:
                value = (value | (1 << cb)) if bit else (value & ~(1 << cb))
        counts[value] += c
    return counts


def _check_shots(shots) -> int | None:
    """``shots`` as an int (``None`` kept); TypeError or ValueError naming what is allowed."""
    if shots is None:
        return None
    if isinstance(shots, bool) or not isinstance(shots, numbers.Integral):
        raise TypeError(f"shots must be an integer >= 0 or None, got {type(shots).__name__} "
                        f"{shots!r}")
    if shots < 0:
        raise ValueError(f"shots must be an integer >= 0 or None, got {shots}")
    return int(shots)


@dataclass(frozen=True)
class Simulator:
    """Runs circuits with gates applied through native or emulated ZGEMM.

    Args:
        backend: ``"auto"`` (default): each fused block through the candidate (zgemm,
            int8-auto, int8-crt-auto at ``T``) with the lowest modelled cost on the device
            (:mod:`ozsim.auto`); or one scheme for every block: ``"int8-auto"``, ``"zgemm"``,
            ``"int8x{s}"`` (s = 3..18), Ozaki scheme II: ``"int8-crt-auto"`` or
            ``"int8-crt{N}"`` (N = 2..20 moduli), see :mod:`ozsim.gemm`.
        T: the auto backends' threshold on the mean mantissa loss per GEMM, in bits (a finite
            real number >= 0).
        device: ``"auto"`` (GPU when CuPy sees one, else CPU; ``OZSIM_DEVICE=cpu`` forces the
            CPU), ``"cpu"`` or ``"gpu"`` (an error if there is no usable GPU).
        seed: seeds the sampling of measurements and of mid-circuit outcomes: an integer >= 0,
            or ``None`` (fresh entropy).
        max_fused_qubits: gate fusion (:mod:`ozsim.fusion`): ``None`` (default) lets the cost
            model of the device and backend choose the block size, ``0`` switches fusion off
            (every gate is its own GEMM, as in the ozIMMU paper's experiments), ``n >= 1`` fuses
            into blocks of at most n qubits.
        workspace_bytes: bound on the emulated GEMM's working buffers (``None``: 256 MiB on the
            CPU; on the GPU half the device memory the state leaves free, at most 16 GiB).
        max_error_bound: the accuracy guard: when the a-priori bound on the final state's
            norm-wise relative error (``Result.metadata["error_bound"]``, the sum of every
            GEMM's bound, :mod:`ozsim.gemm.bounds`) exceeds it, the run warns once (a
            ``RuntimeWarning``). A positive number; default ``1e-8`` (in single precision the
            guard compares the bound with ``max_error_bound * 2**29``, FP32's unit roundoff
            over FP64's: the same margin over the arithmetic's own rounding).
        gate_cache: the :class:`GateCache` of prepared gates its runs share (default: a new one
            per Simulator; pass one to share it between Simulators, as a sweep does).
        precision: ``"double"`` (default: complex128 amplitudes, the ZGEMM backends above) or
            ``"single"`` (Qiskit Aer's word: complex64 amplitudes, half the memory, one qubit
            more on the same device), whose backends are ``"cgemm"`` (native complex64 GEMM;
            what ``"auto"`` runs), ``"tf32x3"``, ``"tf32x4"`` (two TF32 words a value),
            ``"fp16-le"`` (LE-GEMM) and ``"int8-auto"`` (INT8-AUTO with ``T`` counted against
            FP32's 24-bit significand): :mod:`ozsim.gemm.single`. Gates are fused in complex128
            and rounded to complex64 once per block.
        comm: an mpi4py communicator of ``2**g`` ranks (``MPI.COMM_WORLD`` under ``mpiexec``)
            to spread the state over (:mod:`ozsim.distributed`), each rank holding
            ``2**(N-g)`` amplitudes on its own CPU or GPU; every rank calls :meth:`run`, and
            rank 0's :class:`Result` holds the gathered state and the counts (the others' hold
            the counts). ``None`` (default) or a one-rank communicator: one process.
        one_pass: ``True`` (default): gates that a backend's one-pass kernel covers run through
            it, in place (one read and one write of the state). ``False``: every gate through
            the GEMM path (for ``zgemm`` on a GPU, cuBLAS ZGEMM on the state viewed as a
            matrix, after a transposing copy where the targets are not the leading qubits),
            with fusion planned from that path's costs: the baseline the one-pass kernels are
            measured against (``benchmarks/qv_bench.py``'s ``zgemm-gemm``). A named backend and
            one process only.

    Example:
        >>> from ozsim import Simulator
        >>> result = Simulator(backend="int8-auto", T=1).run("circuits/ghz_n20.qasm")
        >>> result.sample_counts(1000)
    """

    backend: str = DEFAULT_BACKEND
    T: float = 1.0
    device: str = "auto"
    seed: int | None = None
    max_fused_qubits: int | None = None
    workspace_bytes: int | None = None
    max_error_bound: float = 1e-8
    gate_cache: GateCache = field(default_factory=GateCache, repr=False, compare=False)
    precision: str = "double"
    comm: object = field(default=None, repr=False, compare=False)
    one_pass: bool = True

    def __post_init__(self):
        """Check every argument; TypeError or ValueError naming it and what is allowed."""
        if not isinstance(self.backend, str):
            raise TypeError(f"backend must be a string such as 'int8-auto' (see `ozsim info`), "
                            f"got {type(self.backend).__name__} {self.backend!r}")
        if not isinstance(self.precision, str) or self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got "
                             f"{self.precision!r}")
        if not is_auto(self.backend):
            try:
                parse_backend_spec(self.backend, self.precision)
            except ValueError as exc:
                if not str(exc).startswith("unknown backend"):
                    raise
                raise ValueError(f"{exc}, or auto") from None
        T = self.T
        if isinstance(T, bool) or not isinstance(T, numbers.Real):
            raise TypeError(f"T must be a real number of bits >= 0, got {type(T).__name__} {T!r}")
        if not (math.isfinite(T) and T >= 0):
            raise ValueError(f"T must be >= 0 bits and finite, got {T}")
        if not isinstance(self.device, str) or self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)}; got {self.device!r}")
        seed = self.seed
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
            raise TypeError(f"seed must be an integer >= 0 or None, got {type(seed).__name__} "
                            f"{seed!r}")
        if seed is not None and seed < 0:
            raise ValueError(f"seed must be an integer >= 0 or None, got {seed}")
        m = self.max_fused_qubits
        if m is not None and (isinstance(m, bool) or not isinstance(m, numbers.Integral)):
            raise TypeError(f"max_fused_qubits must be None or an integer >= 0, got "
                            f"{type(m).__name__} {m!r}")
        if m is not None and m < 0:
            raise ValueError(f"max_fused_qubits must be None or an integer >= 0, got {m!r}")
        eb = self.max_error_bound
        if isinstance(eb, bool) or not isinstance(eb, numbers.Real):
            raise TypeError(f"max_error_bound must be a positive number, got {type(eb).__name__} "
                            f"{eb!r}")
        if not eb > 0:
            raise ValueError(f"max_error_bound must be a positive number, got {eb!r}")
        if not isinstance(self.gate_cache, GateCache):
            raise TypeError(f"gate_cache must be a GateCache, got {type(self.gate_cache).__name__}")
        if self.comm is not None and not hasattr(self.comm, "Get_size"):
            raise TypeError(f"comm must be an mpi4py communicator or None, got "
                            f"{type(self.comm).__name__}")
        if not isinstance(self.one_pass, bool):
            raise TypeError(f"one_pass must be True or False, got {self.one_pass!r}")
        if not self.one_pass and (is_auto(self.backend) or self.comm is not None):
            raise ValueError("one_pass=False (every gate through the GEMM path) needs a named "
                             "backend such as 'zgemm' and one process, not backend='auto' or comm")

    def _fixed_backend(self) -> str:
        """The backend every block runs through when no :class:`~ozsim.auto.AutoPlan` chooses
        per block: the one named, or ``cgemm`` for ``"auto"`` in single precision."""
        return "cgemm" if is_auto(self.backend) else self.backend

    def run(
        self,
        circuit,
        shots: int | None = None,
        progress: Callable[[int, int], None] | None = None,
        memory: bool = False,
    ) -> Result:
        """Simulate ``circuit`` from ``|0...0>``.

        Circuits whose only non-unitary operations are final measurements (and barriers) are
        run once; ``shots`` then samples the final state (one multinomial draw over the basis
        states: memory independent of ``shots``). Circuits with mid-circuit
        measurements, resets or classically conditioned gates run as per-shot trajectories with
        Qiskit Aer's semantics, batched: at each measurement or reset the shots still on a
        branch are split between the two outcomes by a binomial draw with the Born probability,
        and each outcome with shots continues as one state vector (the same distribution as
        independent shots, with at most ``min(shots, 2**m)`` branches for m random outcomes).
        Deterministic for a given ``seed``. Trajectories keep counts, never per-shot records.

        ``shots``: ``None`` (default) samples nothing for a final-measurement circuit and runs
        1024 shots (Aer's default) for a trajectory circuit; ``0`` means no sampling, the final
        state only (a trajectory circuit has no single final state, so it raises ValueError:
        it needs ``shots >= 1``); ``n >= 1`` samples n shots.

        ``memory=True`` also keeps per-shot records (:attr:`Result.memory`, as Qiskit Aer's
        ``memory=True``): the sampled counts expanded to one key per shot in a uniformly random
        order (the distribution of independent shots), drawn from the run's seed. They cost about
        ``60 + width`` bytes a shot, checked against free host memory before the run starts;
        counts alone never grow with the shot count.

        A ``KeyboardInterrupt`` (Ctrl-C) during the simulation becomes
        :class:`~ozsim.errors.RunInterrupted`: for a trajectory run its ``partial`` is a Result
        with the counts of the shots completed so far (``metadata["partial"]`` True,
        ``metadata["shots_completed"]``); branches of mid-circuit outcomes are finished
        depth-first, so these shots are those of the branches done, not a uniform subsample.
        A final-state run has no partial result (``partial`` is None).

        Args:
            circuit: an :class:`ozsim.Circuit`, a ``qiskit.QuantumCircuit``, or a path to an
                OpenQASM 2 or 3 file.
            shots: samples of the classical bits, an integer >= 0 or ``None`` (see above).
            progress: called as ``progress(done, total)`` after each gate (plain circuits).
            memory: keep per-shot records (needs shots >= 1; see above).

        Returns:
            :class:`Result`.

        Raises:
            QasmError: a file that cannot be parsed (file and line in the message).
            UnsupportedOperationError: an operation the engine cannot run (named).
            InsufficientMemoryError: the state does not fit (raised before allocating), or the
                GPU ran out of memory during the run (the failed allocation's bytes and the bytes
                in use in the message; the memory pool's cached blocks are freed, so the
                simulator and the caller's arrays stay usable).
            DeviceUnavailableError: ``device="gpu"`` without a usable GPU.
            NonFiniteError: the final amplitudes hold NaN or Inf.
            TypeError: ``shots`` is not an integer or None.
            ValueError: ``shots < 0``, ``shots=0`` for a circuit that needs trajectories, or
                ``memory=True`` without shots to record.
            RunInterrupted: a ``KeyboardInterrupt`` during the simulation (see above).
        """
        from .calibration import cost_model
        from .fusion import choose_max_fused_qubits, fuse

        shots = _check_shots(shots)
        circ = _as_circuit(circuit)
        if shots == 0 and needs_trajectories(circ):
            raise ValueError(
                "shots=0 means the final state only, but this circuit has mid-circuit "
                "measurements, resets or conditioned gates: it runs as trajectories and needs "
                "shots >= 1"
            )
        if not isinstance(memory, bool):
            raise TypeError(f"memory must be True or False, got {memory!r}")
        if memory:
            _check_memory_records(circ, shots)
        comm = self.comm if self.comm is not None and self.comm.Get_size() > 1 else None
        if comm is not None and self.device != "cpu":
            from .distributed import select_gpu

            if gpu_available()[0]:  # pragma: no cover - GPU
                select_gpu(comm)
        xp, device = get_array_module(self.device)
        t0 = time.perf_counter()
        prec = self.precision
        auto = auto_plan(device) if is_auto(self.backend) and prec == "double" else None
        if auto is not None:  # fusion sees the cheapest candidate's cost of every block size
            model, calibrated = auto, auto.table != "registry defaults"
        else:
            model, calibrated = cost_model(device, self._fixed_backend(), precision=prec)
            if not self.one_pass:  # fusion sees the GEMM path's cost at every block size
                model = replace(model, one_pass_qubits=0)
        local_qubits = circ.num_qubits  # (a rank's shard in a distributed run)
        if comm is not None:
            from .distributed import global_bits

            local_qubits -= global_bits(comm)
        limit, why = self.max_fused_qubits, None
        if (limit is None and xp is not np and self.one_pass
                and 2 * state_bytes(local_qubits, prec) > available_memory_bytes(xp)):
            # two state buffers do not fit: blocks that run in place (one-pass kernels) only
            cap = in_place_limit(self._fixed_backend() if auto is None else auto, device,
                                 local_qubits, prec)
            if cap:
                limit = min(cap, choose_max_fused_qubits(circ, model))
                why = (f"cost model, at most {cap} qubits: two state buffers do not fit, "
                       "blocks run in place")
        if local_qubits < circ.num_qubits:
            # a block must fit a rank's local qubits; within that, the same blocks as one process
            if limit is None:
                limit = choose_max_fused_qubits(circ, model)
                why = f"cost model, at most {local_qubits} qubits (a rank's local qubits)"
            limit = min(limit, local_qubits) if limit else limit
        circ, report = fuse(circ, limit, model)
        if why:
            report = replace(report, chosen_by=why)
        if calibrated and report.chosen_by == "cost model":
            report = replace(report, chosen_by="cost model (calibrated)")
        ops, meas, mode = _split_final_measurements(circ)
        run = _Run(self, xp, circ.num_qubits, progress, sum(op.kind == "unitary" for op in ops),
                   auto)
        rng = np.random.default_rng(self.seed)
        largest = max((op.num_qubits for op in ops if op.kind == "unitary"), default=0)
        first = self._fixed_backend() if auto is None else auto.choose(circ.num_qubits,
                                                                         largest)[0]
        try:
            if comm is None:
                sv = StateVector(circ.num_qubits, xp, self.workspace_bytes,
                                 in_place=(first, largest) if self.one_pass else None,
                                 precision=prec)
                sv.one_pass = self.one_pass
            else:
                sv = _distributed_state(circ, ops, mode, comm, xp, self.workspace_bytes,
                                        (first, largest), prec)
        except MemoryError as exc:
            raise _out_of_memory(exc, xp) from exc
        phase = cmath.exp(1j * circ.global_phase) if circ.global_phase else None
        amps, counts, stopped = None, None, None
        try:
            if mode == "statevector":
                if comm is None:  # (the final state is checked for NaN/Inf below)
                    sv.check_each_gate = False
                for op in ops:
                    phase = run.apply(sv, op, phase)
                if phase is not None:
                    sv.scale(phase)
                if comm is None:
                    amps = sv.amplitudes()
                    finite = bool(xp.isfinite(amps).all())
                else:
                    finite = sv.all_finite()
                if not finite:
                    raise NonFiniteError("the final state vector holds NaN or Inf amplitudes")
                if comm is not None:  # counts sampled shard by shard, summed on rank 0
                    if shots:
                        seed = comm.bcast(int(rng.integers(2**62)), root=0)
                        drawn = sv.sample(shots, seed, _multinomial)
                        counts = _clbit_counts(*drawn, meas, 0) if drawn is not None else None
                        counts = comm.bcast(counts, root=0)
                    # the state gathered on rank 0 where it fits (None on the others)
                    amps = sv.amplitudes() if sv.gather_fits() else None
                elif shots:
                    counts = _sample(_probabilities(sv), shots, rng, meas, 0)
            else:
                counts = run.trajectories(sv, ops, meas, 1024 if shots is None else shots, rng)
        except KeyboardInterrupt as exc:
            if mode == "statevector" or isinstance(exc, RunInterrupted):
                raise RunInterrupted("stopped before the final state was complete") from exc
            stopped, counts, amps = exc, Counter(run.counts), None
        except MemoryError as exc:
            del sv, amps  # (the state's memory goes back before the error reaches the caller)
            raise _out_of_memory(exc, xp) from exc
        if xp is not np:  # pragma: no cover - GPU
            xp.cuda.Device().synchronize()
        wall = time.perf_counter() - t0
        metadata: RunMetadata = {
            "backend": self.backend,
            "T": self.T,
            "device": device,
            "precision": self.precision,
            "num_qubits": circ.num_qubits,
            "num_gates": run.gates_applied,
            "fusion": report.as_dict(),
            "splits": dict(sorted(run.splits.items(), key=lambda kv: str(kv[0]))),
            "fallbacks": run.fallbacks,
            "max_mean_loss_bits": run.max_loss,
            "error_bound": run.error_bound,
            "wall_time_s": wall,
            "peak_memory_bytes": sv.peak_bytes + run.extra_bytes,
            "measurements": meas,
            "mode": mode,
            "gates_reused": run.gates_reused,
        }
        if comm is not None:
            metadata["distributed"] = {
                "ranks": comm.Get_size(), "rank": comm.Get_rank(), "global_qubits": sv.g,
                "swaps": sv.swaps, "swap_bytes": sv.swap_bytes, "swap_seconds": sv.swap_seconds,
                "layout": list(sv.phys)}
        if auto is not None:
            metadata["auto"] = {"table": auto.table, "blocks": dict(Counter(b[1] for b in run.blocks)),
                                "choices": run.block_times(auto)}
        if mode == "trajectories":
            metadata["branches"] = run.branches
        result = Result(circ.num_qubits, circ.name, metadata, list(circ.cregs),
                        amplitudes=amps, seed=self.seed)
        if comm is not None:
            result._distributed = sv  # (expectation values by allreduce over the shards)
        if counts is not None:
            result.counts = result._format(counts)
            if memory and stopped is None:
                keys, rows = expand_counts(result.counts, rng)
                result.memory = [keys[r] for r in rows]
        if stopped is not None:
            done = sum(counts.values())
            result.metadata["partial"] = True
            result.metadata["shots_completed"] = done
            raise RunInterrupted(f"stopped after {done} of {1024 if shots is None else shots} "
                                 "shots", result) from stopped
        return result


def expand_counts(counts, rng) -> tuple[list[str], np.ndarray]:
    """Per-shot records from counts: ``(keys, rows)`` with ``keys[rows[s]]`` the outcome of shot
    s, the shots in a random order (a uniformly shuffled multinomial draw has the distribution
    of independent shots). ``counts``: ``{key: count}``; ``rng``: a NumPy Generator."""
    keys = list(counts)
    rows = np.repeat(np.arange(len(keys)), [int(counts[k]) for k in keys])
    rng.shuffle(rows)
    return keys, rows


def _check_memory_records(circ, shots: int | None) -> None:
    """``memory=True``'s checks, before any work: there are shots to record, and their records
    (a Python string and a list slot each, ~60 bytes plus the key's width) fit in free host
    memory."""
    trajectories = needs_trajectories(circ)
    if shots is None and not trajectories or shots == 0:
        raise ValueError("memory=True records each shot: pass shots >= 1")
    n = 1024 if shots is None else shots
    width = sum(size for _, size in circ.cregs) + max(len(circ.cregs) - 1, 0) or circ.num_qubits
    needed = n * (57 + width)
    avail = available_memory_bytes(np)
    if needed > avail:
        raise InsufficientMemoryError(
            f"memory=True keeps {n} per-shot records: about {needed / 2**30:.2f} GiB, but only "
            f"{avail / 2**30:.2f} GiB of host memory is free (counts alone need no memory per "
            "shot)", needed, avail)


def _out_of_memory(exc: MemoryError, xp) -> MemoryError:
    """A CuPy out-of-memory error as :class:`InsufficientMemoryError` naming the bytes (after
    freeing the memory pool's cached blocks); any other MemoryError unchanged."""
    if isinstance(exc, InsufficientMemoryError) or xp is np:
        return exc
    size = getattr(exc, "_size", None)
    total = getattr(exc, "_total", None)
    limit = getattr(exc, "_limit", 0) or 0
    if size is None:  # (another CuPy layout: the numbers from the message)
        m = re.search(r"allocating ([\d,]+) bytes.*?so far: ([\d,]+)", str(exc))
        size, total = (int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))) \
            if m else (0, 0)
    pool = xp.get_default_memory_pool()
    pool.free_all_blocks()
    avail = available_memory_bytes(xp)
    cap = f", the memory pool's limit {limit} bytes" if limit else ""
    return InsufficientMemoryError(
        f"the GPU ran out of memory during the run: allocating {size} bytes failed with "
        f"{total} bytes in use{cap} ({(size + total) / 2**30:.2f} GiB needed, "
        f"{avail / 2**30:.2f} GiB free now); free GPU memory, pass a smaller workspace_bytes "
        "or run fewer qubits",
        size + total,
        avail,
    )


def needs_trajectories(circuit) -> bool:
    """Whether ``circuit`` runs as trajectories (mid-circuit measurements, resets or conditioned
    gates) rather than once to a final state; ``circuit`` as :meth:`Simulator.run` takes it."""
    return _split_final_measurements(_as_circuit(circuit))[2] == "trajectories"


def _probabilities(sv: StateVector) -> np.ndarray:
    amps = sv.amplitudes()
    p = amps.real**2 + amps.imag**2
    return p.get() if hasattr(p, "get") else p


class _Run:
    """Per-run state: gate application with statistics, and the trajectory branching."""

    def __init__(self, sim: Simulator, xp, num_qubits: int, progress, total_gates: int,
                 auto: AutoPlan | None = None):
        self.sim, self.xp, self.n = sim, xp, num_qubits
        self.progress, self.total = progress, total_gates
        self.splits: Counter = Counter()
        self.fallbacks = 0
        self.max_loss = 0.0
        self.error_bound = 0.0
        self.warned_bound = False
        self.gates_applied = 0
        self.gates_reused = 0
        self.auto = auto
        self.blocks: list = []  # backend="auto": [d, backend, modelled s, measured s or events]
        self.extra_bytes = 0
        self.branches = 0
        self.counts: Counter = Counter()

    def block_times(self, auto: AutoPlan) -> list:
        """``run.blocks`` with measured seconds (GPU: the elapsed time between the events around
        each block, read once the run has synchronised) and the measured multiple of one read
        and one write of the state at the cost table's bandwidth."""
        models = dict(auto.models)
        out = []
        for d, backend, predicted, measured in self.blocks:
            if isinstance(measured, tuple):  # pragma: no cover - GPU
                measured = self.xp.cuda.get_elapsed_time(*measured) / 1e3
            one_pass = 32.0 * 2.0**self.n / models[backend].bandwidth
            out.append([d, backend, predicted, measured, measured / one_pass])
        return out

    def apply(self, sv: StateVector, op: Operation, phase):
        """Apply one unitary (folding a pending global phase into it); returns the phase left."""
        matrix = op.matrix
        if phase is not None and op.condition is None:
            matrix, phase = matrix * phase, None
        backend, prec = self.sim._fixed_backend(), self.sim.precision
        if self.auto is not None:
            backend, predicted = self.auto.choose(self.n, len(op.qubits))
        matrix, qubits = pad_gate(matrix, op.qubits, backend, self.n, prec)  # (pad_gates)
        matrix, qubits = sv.aligned(matrix, qubits)
        cache = self.sim.gate_cache
        hits = cache.hits
        gate = cache.get(backend if prec == "double" else f"{backend}/{prec}", sv.device,
                         np.asarray(matrix),
                         lambda: gemm_prepare(self.xp.asarray(matrix), backend, prec,
                                              host=matrix if self.xp is not np else None))
        self.gates_reused += cache.hits - hits
        if self.auto is not None and self.xp is not np:  # pragma: no cover - GPU
            start = self.xp.cuda.Event()
            start.record()  # (GPU kernels run asynchronously: events, read after the run)
        t0 = time.perf_counter()
        info = sv.apply(gate, qubits, backend, self.sim.T)
        if self.auto is not None:
            if self.xp is np:
                measured = time.perf_counter() - t0
            else:  # pragma: no cover - GPU
                end = self.xp.cuda.Event()
                end.record()
                measured = (start, end)
            self.blocks.append([len(op.qubits), backend, predicted, measured])
        if prec == "double":
            info = replace(info, error_bound=bounds.of(info, matrix))  # from the host copy
        else:  # FP32-level backends: CGEMM's bound (plus the gate's rounding to complex64)
            info = replace(info, error_bound=bounds.native(
                matrix.shape[1], bounds.frobenius(matrix), 2.0**-24) + 2.0**-24 * math.sqrt(
                    matrix.shape[0]))
        if info.num_moduli is not None:
            self.splits[f"crt{info.num_moduli}"] += 1
        elif info.num_splits is not None:
            self.splits[info.num_splits] += 1
        else:
            self.splits["zgemm" if prec == "double" else info.backend] += 1
        if info.fallback and not self.fallbacks:  # deliberate, recorded, and said once a run
            warnings.warn(f"{self.sim.backend} (T = {self.sim.T:g}) found no split or moduli count "
                          "within its range that meets T for a GEMM and ran native ZGEMM for it; "
                          "Result.metadata['fallbacks'] counts such GEMMs", RuntimeWarning,
                          stacklevel=4)
        self.fallbacks += info.fallback
        self.error_bound += info.error_bound or 0.0
        limit = self.sim.max_error_bound * (1.0 if prec == "double" else 2.0**29)
        if self.error_bound > limit and not self.warned_bound:
            self.warned_bound = True
            warnings.warn(f"the a-priori bound on the state's relative error has reached "
                          f"{self.error_bound:.2e} (> {limit:g}) with "
                          f"{self.sim.backend}: the result may not be "
                          f"{'FP64' if prec == 'double' else 'FP32'}-accurate; use more "
                          "splits or moduli, an auto backend, or zgemm", RuntimeWarning,
                          stacklevel=4)
        for loss in (info.mean_loss_a, info.mean_loss_b, info.bound_bits):
            if loss is not None:
                self.max_loss = max(self.max_loss, loss)
        self.gates_applied += 1
        if self.progress is not None:
            self.progress(min(self.gates_applied, self.total), self.total)
        return phase

    def trajectories(self, sv, ops, meas, shots: int, rng) -> Counter:
        """Run ``ops`` (mid-circuit operations included) for ``shots`` shots; clbit counts."""
        from .statevector import state_bytes

        counts = self.counts = Counter()  # read back when a KeyboardInterrupt stops the run
        stack = [(0, sv, shots, 0)]  # (next op, state, shots on this branch, clbit value)
        live = 1
        while stack:
            pos, st, n_shots, bits = stack.pop()
            while pos < len(ops):
                op = ops[pos]
                pos += 1
                if op.kind == "unitary":
                    if op.condition is None or _condition_holds(op.condition, bits):
                        self.apply(st, op, None)
                    continue
                if op.kind == "barrier":
                    continue
                q = op.qubits[0]
                p1 = min(max(st.probability_one(q), 0.0), 1.0)
                n1 = int(rng.binomial(n_shots, p1))
                outcomes = [(o, c) for o, c in ((0, n_shots - n1), (1, n1)) if c > 0]
                if len(outcomes) == 2:
                    other = st.copy()
                    live += 1
                    self.extra_bytes = max(self.extra_bytes, (live - 1) * 2 * state_bytes(
                        self.n, self.sim.precision))
                    o, c = outcomes[1]
                    self._collapse(other, op, o, p1)
                    stack.append((pos, other, c, _set_bits(op, bits, o)))
                o, c = outcomes[0]
                self._collapse(st, op, o, p1)
                n_shots, bits = c, _set_bits(op, bits, o)
            self.branches += 1
            if meas:
                counts.update(_sample(_probabilities(st), n_shots, rng, meas, bits))
            else:
                counts[bits] += n_shots
            live -= 1
        return counts

    @staticmethod
    def _collapse(st: StateVector, op: Operation, outcome: int, p1: float) -> None:
        prob = p1 if outcome else 1.0 - p1
        st.project(op.qubits[0], outcome, prob, to_zero=(op.kind == "reset"))


def _set_bits(op: Operation, bits: int, outcome: int) -> int:
    if op.kind != "measure":
        return bits
    for cb in op.clbits:
        bits = (bits | (1 << cb)) if outcome else (bits & ~(1 << cb))
    return bits


def _condition_holds(condition: tuple[tuple[int, ...], int], bits: int) -> bool:
    clbits, value = condition
    read = sum(((bits >> cb) & 1) << j for j, cb in enumerate(clbits))
    return read == value


def _as_circuit(x) -> Circuit:
    if isinstance(x, Circuit):
        return x
    if isinstance(x, (str, os.PathLike)):
        from .interop.qiskit import load_qasm

        return load_qasm(x)
    qiskit = sys.modules.get("qiskit")  # a QuantumCircuit exists only once Qiskit is imported
    if qiskit is not None and isinstance(x, qiskit.QuantumCircuit):  # subclasses included
        from .interop.qiskit import from_qiskit

        return from_qiskit(x)
    raise TypeError(
        f"cannot run a {type(x).__name__}; expected an ozsim.Circuit, a qiskit.QuantumCircuit or "
        "a path to an OpenQASM file"
    )


def _distributed_state(circ, ops, mode: str, comm, xp, workspace_bytes, in_place,
                       precision: str):
    """The :class:`~ozsim.distributed.DistributedStateVector` of a run over ``comm``: the
    least-used qubits global, swaps planned over the fused gates' qubits.

    Raises:
        UnsupportedOperationError: a circuit that needs trajectories (mid-circuit
            measurements, resets, conditions), which distributed runs do not take.
    """
    from .distributed import DistributedStateVector, global_bits, initial_layout

    if mode != "statevector":
        raise UnsupportedOperationError(
            "distributed runs take circuits whose measurements are final; this one has "
            "mid-circuit measurements, resets or conditioned gates: run it in one process")
    uses = [tuple(op.qubits) for op in ops if op.kind == "unitary"]
    layout = initial_layout(uses, circ.num_qubits, global_bits(comm))
    return DistributedStateVector(circ.num_qubits, comm, xp, workspace_bytes,
                                  in_place=in_place, precision=precision, layout=layout,
                                  upcoming=uses)


def _split_final_measurements(circ: Circuit):
    """``(ops, final measurements {qubit: [clbits]}, mode)``.

    The final measurements are the trailing measure operations (barriers between them ignored)
    after which nothing touches their qubit or reads their bit; they are sampled from the final
    state. ``mode`` is ``"statevector"`` when what remains is unitary and unconditioned, else
    ``"trajectories"``.
    """
    ops = [op for op in circ.operations if op.kind != "barrier"]
    read_later: set[int] = set()
    touched_later: set[int] = set()
    written_final: set[int] = set()
    final: list[Operation] = []
    keep: list[Operation] = []
    for op in reversed(ops):
        is_final = (
            op.kind == "measure"
            and op.qubits[0] not in touched_later
            and not read_later.intersection(op.clbits)
        )
        if is_final:
            if not written_final.issuperset(op.clbits):  # else a later measurement overwrites it
                final.append(op)
                written_final.update(op.clbits)
        else:
            keep.append(op)
            touched_later.update(op.qubits)
            if op.condition is not None:
                read_later.update(op.condition[0])
            if op.kind == "measure":
                read_later.update(op.clbits)  # a later final measurement must not overwrite it
    keep.reverse()
    meas: dict[int, list[int]] = {}
    for op in reversed(final):
        meas.setdefault(op.qubits[0], []).extend(op.clbits)
    plain = all(op.kind == "unitary" and op.condition is None for op in keep)
    return keep, meas, "statevector" if plain else "trajectories"
