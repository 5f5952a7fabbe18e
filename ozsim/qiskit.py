"""ozsim as a Qiskit backend: :class:`OzsimBackend`, a ``qiskit.providers.BackendV2``.

Code written for ``AerSimulator`` or any ``BackendV2`` runs on ozsim::

    from qiskit import transpile
    from ozsim.qiskit import OzsimBackend

    backend = OzsimBackend()                      # backend="auto": per block the fastest scheme
    counts = backend.run(transpile(qc, backend), shots=1000).result().get_counts()

``BackendSamplerV2(backend=OzsimBackend())`` and ``BackendEstimatorV2`` work with it; ozsim's
own primitives (:mod:`ozsim.primitives`) skip the per-shot round trip through ``Result``.

Importing this module imports Qiskit; ``import ozsim`` does not import it.
"""

from __future__ import annotations

import time
import uuid

import numpy as np
from qiskit import QuantumCircuit
from qiskit.circuit import Barrier, IfElseOp
from qiskit.circuit.library import UnitaryGate, get_standard_gate_name_mapping
from qiskit.providers import BackendV2, JobStatus, Options
from qiskit.providers.job import JobV1
from qiskit.result import Result
from qiskit.transpiler import Target

from . import __version__
from .auto import DEFAULT_BACKEND
from .errors import UnsupportedOperationError
from .gates import standard
from .interop.parametric import (
    ParametricCircuit,
    clbit_matrix,
    expand_counts,
    measured_nothing,
)
from .interop.qiskit import _names
from .simulator import GateCache, Simulator

__all__ = ["OzsimBackend", "OzsimJob"]

#: Non-gate instructions of the target besides the standard gates (``delay`` runs as identity).
_DIRECTIVES = ("measure", "reset", "barrier", "delay", "id", "global_phase")


def _target() -> Target:
    """Every Qiskit standard gate ozsim has a matrix for, ``unitary``, ``if_else``, measure,
    reset, barrier and delay; on any number of qubits (``num_qubits=None``)."""
    target = Target(description="ozsim state-vector simulator", num_qubits=None)
    mapping = get_standard_gate_name_mapping()
    for name in sorted(mapping):
        if name in standard.STANDARD_GATES or name in _DIRECTIVES:
            target.add_instruction(mapping[name], properties=None, name=name)
    target.add_instruction(UnitaryGate, name="unitary")
    target.add_instruction(IfElseOp, name="if_else")
    if "barrier" not in target.operation_names:
        target.add_instruction(Barrier, name="barrier")
    return target


class OzsimJob(JobV1):
    """A finished job: ``OzsimBackend.run`` simulates before it returns."""

    _async = False

    def __init__(self, backend, job_id: str, result: Result):
        super().__init__(backend, job_id)
        self._result = result

    def submit(self):
        return None

    def result(self, timeout=None) -> Result:
        """The ``qiskit.result.Result`` (counts, memory when asked, ozsim's metadata)."""
        return self._result

    def status(self) -> JobStatus:
        return JobStatus.DONE


class OzsimBackend(BackendV2):
    """A ``BackendV2`` whose circuits run on :class:`ozsim.Simulator`.

    Args:
        backend: ozsim's GEMM backend (``"auto"``, the default, ``"int8-auto"``, ``"zgemm"``,
            ``"int8x{s}"``, ...; as :class:`ozsim.Simulator`).
        T: the auto backends' threshold on the mean mantissa loss, in bits.
        device: ``"auto"``, ``"cpu"`` or ``"gpu"``.
        **options: initial run options (see below).

    Run options (``_default_options``; ``run(circuits, **options)`` overrides them per call):
        shots (1024), seed_simulator (None: fresh entropy), memory (False: per-shot hex
        records in ``Result.get_memory``), backend, T, device, precision (``"double"`` or
        ``"single"``, as Aer's option: complex64 amplitudes), max_fused_qubits (fusion limit:
        None lets the cost model choose, 0 off) and max_composite_qubits (custom instructions
        on at most this many qubits run as one dense matrix).

    Each experiment's ``metadata`` holds ozsim's :attr:`ozsim.Result.metadata` (``splits`` or
    moduli, ``fallbacks``, ``wall_time_s``, ``mode``, ...).
    """

    def __init__(self, backend: str = DEFAULT_BACKEND, T: float = 1.0, device: str = "auto",
                 **options):
        super().__init__(name="ozsim", description="ozsim: state vectors through emulated ZGEMM",
                         backend_version=__version__)
        self._target = _target()
        self.set_options(backend=backend, T=T, device=device, **options)
        self._simulator(dict(self.options.items()), None)  # checks the options

    @classmethod
    def _default_options(cls) -> Options:
        return Options(shots=1024, seed_simulator=None, memory=False, backend=DEFAULT_BACKEND, T=1.0,
                       device="auto", precision="double", max_fused_qubits=None,
                       max_composite_qubits=12)

    @property
    def target(self) -> Target:
        return self._target

    @property
    def max_circuits(self):
        return None

    def _simulator(self, opts: dict, seed) -> Simulator:
        cache = self.__dict__.setdefault("_gate_cache", GateCache())  # shared by all runs
        return Simulator(backend=opts["backend"], T=opts["T"], device=opts["device"], seed=seed,
                         max_fused_qubits=opts["max_fused_qubits"], gate_cache=cache,
                         precision=opts["precision"])

    def run(self, run_input, **options) -> OzsimJob:
        """Simulate one circuit or a list of them; returns a finished :class:`OzsimJob`.

        Raises:
            AttributeError: an option this backend does not have.
            UnsupportedOperationError: an instruction ozsim cannot run, or unbound parameters
                (all named).
        """
        circuits = [run_input] if isinstance(run_input, QuantumCircuit) else list(run_input)
        for key in options:
            if not hasattr(self.options, key):
                raise AttributeError(f"OzsimBackend has no option {key!r}; options: "
                                     f"{', '.join(sorted(dict(self.options.items())))}")
        opts = {**dict(self.options.items()), **options}
        shots = int(opts["shots"])
        rng = np.random.default_rng(opts["seed_simulator"])
        start = time.perf_counter()
        results = []
        for qc in circuits:
            if not isinstance(qc, QuantumCircuit):
                raise TypeError(f"OzsimBackend runs QuantumCircuits, got {type(qc).__name__}")
            seed = int(rng.integers(2**63))
            if qc.parameters:
                raise UnsupportedOperationError(
                    f"circuit {qc.name!r} has {len(qc.parameters)} unbound parameters "
                    f"({_names(qc.parameters)}): bind them with QuantumCircuit.assign_parameters, "
                    "or sweep them with ozsim.primitives.SamplerV2 / EstimatorV2")
            circ = ParametricCircuit(qc, max_composite_qubits=opts["max_composite_qubits"]).bind()
            res = self._simulator(opts, seed).run(circ, shots=shots)
            results.append(_experiment(qc, res, shots, seed, bool(opts["memory"])))
        return OzsimJob(self, str(uuid.uuid4()), Result.from_dict({
            "backend_name": self.name, "backend_version": self.backend_version,
            "job_id": str(uuid.uuid4()), "success": True, "status": "COMPLETED",
            "results": results, "time_taken": time.perf_counter() - start,
        }))


def _experiment(qc: QuantumCircuit, res, shots: int, seed: int, memory: bool) -> dict:
    if measured_nothing(res):
        hexes = ["0x0"] * shots
    else:
        keys, rows = expand_counts(res.counts, np.random.default_rng(seed))
        table = clbit_matrix(keys, qc.num_clbits)
        key_hex = [hex(int("".join(map(str, row[::-1])) or "0", 2)) for row in table]
        hexes = [key_hex[r] for r in rows] if memory else None
        counts = {}
        for k, key in enumerate(keys):
            counts[key_hex[k]] = counts.get(key_hex[k], 0) + res.counts[key]
    if measured_nothing(res):
        counts = {"0x0": shots}
    data = {"counts": counts}
    if memory:
        data["memory"] = hexes
    header = {
        "name": qc.name, "n_qubits": qc.num_qubits,
        "qreg_sizes": [[r.name, r.size] for r in qc.qregs],
        "creg_sizes": [[r.name, r.size] for r in qc.cregs],
        "qubit_labels": [[r.name, j] for r in qc.qregs for j in range(r.size)],
        "clbit_labels": [[r.name, j] for r in qc.cregs for j in range(r.size)],
        "memory_slots": qc.num_clbits, "global_phase": float(qc.global_phase),
        "metadata": qc.metadata if qc.metadata is not None else {},
    }
    return {"name": qc.name, "shots": shots, "seed_simulator": seed, "success": True,
            "status": "DONE", "data": data, "header": header, "metadata": dict(res.metadata),
            "time_taken": res.metadata["wall_time_s"]}
