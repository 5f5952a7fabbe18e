"""Qiskit primitives on ozsim: :class:`SamplerV2` and :class:`EstimatorV2`.

They implement Qiskit's ``BaseSamplerV2`` and ``BaseEstimatorV2``: PUBs with parameter-value
arrays (and observables) broadcast as Qiskit specifies, results as ``PrimitiveResult`` /
``PubResult`` / ``DataBin`` / ``BitArray``. A PUB's circuit is converted once
(:class:`ozsim.interop.parametric.ParametricCircuit`) and run once per parameter set; every
observable paired with that set is evaluated on the same final state.

Importing this module imports Qiskit; ``import ozsim`` does not import it.

Example:
    >>> from ozsim.primitives import EstimatorV2, SamplerV2
    >>> evs = EstimatorV2(backend="zgemm").run([(qc, ["ZZ", "XX"], values)]).result()[0].data.evs
    >>> bits = SamplerV2(seed=1).run([qc_measured], shots=1000).result()[0].data.meas
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
from qiskit.primitives import BaseEstimatorV2, BaseSamplerV2, PrimitiveJob
from qiskit.primitives.containers import (
    BitArray,
    DataBin,
    PrimitiveResult,
    PubResult,
    SamplerPubResult,
)
from qiskit.primitives.containers.estimator_pub import EstimatorPub
from qiskit.primitives.containers.sampler_pub import SamplerPub

from .auto import DEFAULT_BACKEND
from .interop.parametric import (
    ParametricCircuit,
    clbit_matrix,
    expand_counts,
    measured_nothing,
    merge_metadata,
)
from .simulator import GateCache, Simulator

__all__ = ["SamplerV2", "EstimatorV2"]


class _Base:
    def __init__(self, backend, T, device, seed, max_fused_qubits):
        Simulator(backend=backend, T=T, device=device, max_fused_qubits=max_fused_qubits)  # checks
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer))
                                 or seed < 0):
            raise ValueError(f"seed must be an integer >= 0 or None, got {seed!r}")
        self._options = {"backend": backend, "T": T, "device": device,
                         "max_fused_qubits": max_fused_qubits}
        self._seed = seed
        self._gate_cache = GateCache()  # parameter-free blocks prepared once for every run

    @property
    def options(self) -> dict:
        """ozsim's simulator options (backend, T, device, max_fused_qubits) and the seed."""
        return {**self._options, "seed": self._seed}

    def _simulator(self, seed: int | None) -> Simulator:
        return Simulator(seed=seed, gate_cache=self._gate_cache, **self._options)

    @staticmethod
    def _values(pub) -> np.ndarray:
        """``(*pub.parameter_values.shape, num_parameters)`` float64, circuit parameter order."""
        return np.asarray(pub.parameter_values.as_array(pub.circuit.parameters), dtype=np.float64)


class SamplerV2(_Base, BaseSamplerV2):
    """Qiskit's ``SamplerV2`` interface on ozsim's simulator.

    Each parameter set of a PUB is one :meth:`ozsim.Simulator.run` with the PUB's shots; the
    per-shot records of each classical register come back as ``BitArray`` fields of the
    ``DataBin``, named as the registers. Circuits with mid-circuit measurements, resets and
    conditioned gates run as trajectories (:meth:`ozsim.Simulator.run`).

    Args:
        backend, T, device, max_fused_qubits: as :class:`ozsim.Simulator`.
        default_shots: shots of a PUB that gives none and a ``run`` without ``shots``.
        seed: seeds the runs (one seed per parameter set drawn from it); ``None``: fresh entropy.
    """

    def __init__(self, *, backend: str = DEFAULT_BACKEND, T: float = 1.0, device: str = "auto",
                 default_shots: int = 1024, seed: int | None = None,
                 max_fused_qubits: int | None = None):
        super().__init__(backend, T, device, seed, max_fused_qubits)
        self._default_shots = int(default_shots)

    @property
    def default_shots(self) -> int:
        return self._default_shots

    def run(self, pubs: Iterable, *, shots: int | None = None) -> PrimitiveJob:
        if shots is None:
            shots = self._default_shots
        coerced = [SamplerPub.coerce(pub, shots) for pub in pubs]
        job = PrimitiveJob(self._run, coerced)
        job._submit()
        return job

    def _run(self, pubs: list[SamplerPub]) -> PrimitiveResult:
        rng = np.random.default_rng(self._seed)
        return PrimitiveResult([self._run_pub(pub, rng) for pub in pubs],
                               metadata={"version": 2})

    def _run_pub(self, pub: SamplerPub, rng) -> SamplerPubResult:
        qc = pub.circuit
        pc = ParametricCircuit(qc)
        values = self._values(pub)
        shape, shots = pub.shape, pub.shots
        regs = [(reg.name, [qc.find_bit(b).index for b in reg]) for reg in qc.cregs]
        arrays = {name: np.zeros(shape + (shots, (len(bits) + 7) // 8), dtype=np.uint8)
                  for name, bits in regs}
        summary = None
        for index in np.ndindex(*shape):
            seed = int(rng.integers(2**63))
            result = self._simulator(seed).run(pc.bind(values[index]), shots=shots)
            summary = merge_metadata(summary, result)
            if measured_nothing(result) or not regs:
                continue
            keys, rows = expand_counts(result.counts, np.random.default_rng(seed))
            table = clbit_matrix(keys, qc.num_clbits)
            for name, bits in regs:
                arrays[name][index] = _pack(table[:, bits])[rows]
        meas = {name: BitArray(arrays[name], len(bits)) for name, bits in regs}
        return SamplerPubResult(
            DataBin(**meas, shape=shape),
            metadata={"shots": shots, "circuit_metadata": qc.metadata, "simulator": summary},
        )


def _pack(bits: np.ndarray) -> np.ndarray:
    """Little-endian bit columns -> big-endian bytes, as ``BitArray`` stores them."""
    pad = -bits.shape[-1] % 8
    msb_first = np.concatenate(
        [np.zeros(bits.shape[:-1] + (pad,), dtype=np.uint8), bits[..., ::-1]], axis=-1)
    return np.packbits(msb_first, axis=-1)


class EstimatorV2(_Base, BaseEstimatorV2):
    """Qiskit's ``EstimatorV2`` interface on ozsim's simulator.

    Each distinct parameter set of a PUB runs once to its final state; the observables that
    broadcast against it are evaluated there (:meth:`ozsim.Result.expectation`). With precision
    0 (the default) the values are exact and ``stds`` are 0. With precision p > 0 each Pauli
    term is shot-sampled: ``ceil(1 / p**2)`` shots in its eigenbasis (a binomial draw with the
    exact Born probability), the term estimates combined with the coefficients; ``stds`` are
    the standard errors of those estimates (at most p times the coefficients' 2-norm).

    Args:
        backend, T, device, max_fused_qubits: as :class:`ozsim.Simulator`.
        default_precision: precision of a PUB that gives none and a ``run`` without one.
        seed: seeds the shot sampling; ``None``: fresh entropy.
    """

    def __init__(self, *, backend: str = DEFAULT_BACKEND, T: float = 1.0, device: str = "auto",
                 default_precision: float = 0.0, seed: int | None = None,
                 max_fused_qubits: int | None = None):
        super().__init__(backend, T, device, seed, max_fused_qubits)
        self._default_precision = float(default_precision)

    @property
    def default_precision(self) -> float:
        return self._default_precision

    def run(self, pubs: Iterable, *, precision: float | None = None) -> PrimitiveJob:
        if precision is None:
            precision = self._default_precision
        coerced = [EstimatorPub.coerce(pub, precision) for pub in pubs]
        job = PrimitiveJob(self._run, coerced)
        job._submit()
        return job

    def _run(self, pubs: list[EstimatorPub]) -> PrimitiveResult:
        rng = np.random.default_rng(self._seed)
        return PrimitiveResult([self._run_pub(pub, rng) for pub in pubs],
                               metadata={"version": 2})

    def _run_pub(self, pub: EstimatorPub, rng) -> PubResult:
        qc = pub.circuit
        if any(inst.operation.name == "measure" for inst in qc.data):
            qc = qc.remove_final_measurements(inplace=False)
        pc = ParametricCircuit(qc)
        values = self._values(pub)
        pv_shape, obs_shape = pub.parameter_values.shape, pub.observables.shape
        shape = pub.shape  # np.broadcast_shapes(pv_shape, obs_shape)
        pv_index = np.broadcast_to(np.arange(math.prod(pv_shape)).reshape(pv_shape), shape)
        obs_index = np.broadcast_to(np.arange(math.prod(obs_shape)).reshape(obs_shape), shape)
        observables = pub.observables.ravel().tolist() if obs_shape else [
            pub.observables.tolist()]
        flat_values = values.reshape((math.prod(pv_shape), values.shape[-1]))
        jobs: dict[int, list[tuple[tuple, int]]] = {}
        for index in np.ndindex(*shape):
            jobs.setdefault(int(pv_index[index]), []).append((index, int(obs_index[index])))
        evs = np.zeros(shape, dtype=np.float64)
        stds = np.zeros(shape, dtype=np.float64)
        precision = pub.precision
        summary = None
        for p, wanted in jobs.items():
            result = self._simulator(None).run(pc.bind(flat_values[p]), shots=0)
            summary = merge_metadata(summary, result)
            cache: dict[int, tuple[float, float]] = {}
            for index, o in wanted:
                if o not in cache or precision > 0:
                    cache[o] = _estimate(result, observables[o], precision, rng)
                evs[index], stds[index] = cache[o]
        return PubResult(
            DataBin(evs=evs, stds=stds, shape=shape),
            metadata={"target_precision": precision, "circuit_metadata": pub.circuit.metadata,
                      "simulator": summary},
        )


def _estimate(result, observable: dict, precision: float, rng) -> tuple[float, float]:
    """``(value, std)`` of one observable ``{label: coeff}`` on a run's final state."""
    terms = list(observable.items())
    if precision == 0:
        value = result.expectation(terms, complex_value=True)
        if abs(value.imag) > 1e-10 * max(1.0, abs(value.real)):
            raise ValueError(f"the observable is not Hermitian: <O> = {value}")
        return float(value.real), 0.0
    shots = math.ceil(1.0 / precision**2)
    value, var = 0.0, 0.0
    for label, coeff in terms:
        coeff = complex(coeff)
        if coeff.imag:
            raise ValueError("given operator is not Hermitian and cannot be shot-sampled")
        if set(label) <= {"I"}:
            value += coeff.real
            continue
        exact = min(max(float(result.expectation(label)), -1.0), 1.0)
        k = rng.binomial(shots, (1.0 + exact) / 2.0)
        est = 2.0 * k / shots - 1.0
        value += coeff.real * est
        var += coeff.real**2 * max(1.0 - est * est, 0.0) / shots
    return value, math.sqrt(var)
