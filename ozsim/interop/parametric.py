"""A parameterized Qiskit circuit converted once, bound many times (parameter sweeps).

:class:`ParametricCircuit` walks the circuit as :func:`ozsim.interop.qiskit.from_qiskit` does,
except that a standard gate whose parameters are unbound expressions becomes a slot, and a
composite instruction with unbound parameters is walked through its definition down to such
gates. Everything else (fixed gates, dense matrices of parameter-free composite instructions,
measurements, conditions) is converted once. :meth:`ParametricCircuit.bind` then fills the slots
from one set of parameter values: no Qiskit ``assign_parameters``, no new conversion.

Qiskit is imported inside the functions only.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..circuit import Circuit, Operation
from ..errors import NonFiniteError, UnsupportedOperationError
from ..gates import standard
from ..simulator import expand_counts  # noqa: F401  (re-exported for the Qiskit adapters)
from .qiskit import MAX_COMPOSITE_QUBITS, _Converter, _cregs, _import_qiskit, _names

__all__ = ["ParametricCircuit"]


def _free(op) -> set:
    out: set = set()
    for x in op.params:
        out.update(getattr(x, "parameters", ()) if not isinstance(x, (list, tuple)) else ())
    return out


class _TemplateConverter(_Converter):
    """``_Converter`` that leaves slots for parameterized standard gates and global phases."""

    def __init__(self, qc, circuit, max_composite_qubits, slots, phases):
        super().__init__(qc, circuit, max_composite_qubits)
        self.slots, self.phases = slots, phases

    def add(self, inst, pos, qmap, cmap, condition, outer):
        from qiskit.circuit import ControlFlowOp

        op = inst.operation
        if isinstance(op, ControlFlowOp) or not _free(op):
            return super().add(inst, pos, qmap, cmap, condition, outer)
        qubits = tuple(qmap[q] for q in inst.qubits)
        classes = self.std.get(op.name)
        plain = classes is not None and isinstance(op, classes) and not (
            isinstance(op, self.ControlledGate)
            and op.ctrl_state != (1 << op.num_ctrl_qubits) - 1)
        if plain:
            nq = len(qubits)
            self.circuit.unitary(np.eye(1 << nq), qubits, name=op.name, condition=condition,
                                 check=False)
            self.slots.append((len(self.circuit.operations) - 1, op.name, tuple(op.params), nq))
            return None
        if op.definition is not None:
            return self._add_body(op.definition, inst, pos, qmap, cmap, condition,
                                  outer or op.name)
        return super().add(inst, pos, qmap, cmap, condition, outer)  # raises, naming them

    def _phase(self, phase, pos, name, condition, qubits):
        if not getattr(phase, "parameters", None):
            return super()._phase(phase, pos, name, condition, qubits)
        if condition is None:
            self.phases.append(phase)
            return None
        q = qubits[0] if qubits else 0
        self.circuit.unitary(np.eye(2), [q], name="global_phase", condition=condition,
                             check=False)
        self.slots.append((len(self.circuit.operations) - 1, "global_phase", (phase,), 1))
        return None


def _value(expr, values: Mapping) -> float:
    """A parameter or parameter expression (or a number) evaluated at ``values``."""
    from qiskit.circuit import Parameter, ParameterExpression

    if isinstance(expr, Parameter):
        x = values[expr]
    elif isinstance(expr, ParameterExpression):
        bound = expr.bind({p: values[p] for p in expr.parameters})
        x = complex(bound)
        if abs(x.imag) > 1e-12 * max(1.0, abs(x.real)):
            raise UnsupportedOperationError(f"parameter expression {expr} has the complex value "
                                            f"{x} at the values given")
        x = x.real
    else:
        x = expr
    x = float(x)
    if not math.isfinite(x):
        raise NonFiniteError(f"parameter expression {expr} is not finite ({x}) at the values "
                             "given")
    return x


class ParametricCircuit:
    """A Qiskit circuit, converted once, whose unbound parameters are bound per run.

    Args:
        qc: a ``QuantumCircuit``; its parameters may be unbound.
        max_composite_qubits: as in :func:`~ozsim.interop.qiskit.from_qiskit`.

    Attributes:
        parameters: ``qc.parameters`` (Qiskit's order: the order of value columns).
        template: the converted :class:`~ozsim.Circuit`, identity matrices in the slots.
        num_slots: gates (and conditional phases) filled in by :meth:`bind`.
    """

    def __init__(self, qc, *, max_composite_qubits: int = MAX_COMPOSITE_QUBITS):
        _import_qiskit()
        self.parameters = list(qc.parameters)
        self.template = Circuit(qc.num_qubits, qc.num_clbits, name=qc.name, cregs=_cregs(qc))
        self._slots: list[tuple[int, str, tuple, int]] = []
        self._phases: list = []
        _TemplateConverter(qc, self.template, max_composite_qubits, self._slots,
                           self._phases).run()

    @property
    def num_slots(self) -> int:
        return len(self._slots)

    def bind(self, values: Sequence[float] | Mapping | None = None) -> Circuit:
        """The circuit at one set of parameter values.

        Args:
            values: one value per parameter in :attr:`parameters` order, or a mapping from
                ``Parameter`` (or its name) to value. ``None`` for a circuit without parameters.

        Raises:
            ValueError: the wrong number of values, or a parameter without a value (named).
        """
        if values is None:
            values = ()
        if isinstance(values, Mapping):
            by_name = {str(k): v for k, v in values.items()}
            missing = [p for p in self.parameters if p not in values and str(p) not in by_name]
            if missing:
                raise ValueError(f"no value for parameters ({_names(missing)})")
            vals = {p: float(values[p] if p in values else by_name[str(p)])
                    for p in self.parameters}
        else:
            arr = np.asarray(values, dtype=np.float64).reshape(-1)
            if arr.size != len(self.parameters):
                raise ValueError(f"{arr.size} parameter values for {len(self.parameters)} "
                                 f"parameters ({_names(self.parameters)})")
            vals = dict(zip(self.parameters, arr.tolist()))
        t = self.template
        ops = list(t.operations)
        for index, name, exprs, nq in self._slots:
            old = ops[index]
            params = tuple(_value(e, vals) for e in exprs)
            if name == "global_phase":
                matrix = np.exp(1j * params[0]) * np.eye(2)
            else:
                matrix = standard.standard_gate(name, params, num_qubits=nq)
            ops[index] = Operation("unitary", old.qubits, matrix, name, params=params,
                                   condition=old.condition)
        phase = t.global_phase + sum(_value(e, vals) for e in self._phases)
        return Circuit(t.num_qubits, t.num_clbits, name=t.name, global_phase=phase,
                       cregs=list(t.cregs), operations=ops)


def clbit_matrix(keys: Sequence[str], num_clbits: int) -> np.ndarray:
    """``(len(keys), num_clbits)`` uint8, column j the classical bit j of each counts key
    (registers separated by spaces, most significant first, as :class:`ozsim.Result` writes)."""
    out = np.zeros((len(keys), num_clbits), dtype=np.uint8)
    for i, key in enumerate(keys):
        bits = key.replace(" ", "")[::-1]
        out[i, :len(bits)] = np.frombuffer(bits.encode(), dtype=np.uint8) - ord("0")
    return out


def measured_nothing(result) -> bool:
    """A final-state run without measurements: its counts are of qubits, every clbit reads 0."""
    return result.metadata.get("mode") == "statevector" and not result.metadata["measurements"]


def merge_metadata(total: dict | None, result) -> dict:
    """Fold one run's :attr:`ozsim.Result.metadata` into a summary over many runs."""
    m = result.metadata
    if total is None:
        total = {"backend": m["backend"], "T": m["T"], "device": m["device"], "runs": 0,
                 "wall_time_s": 0.0, "splits": {}, "fallbacks": 0, "max_mean_loss_bits": 0.0}
    total["runs"] += 1
    total["wall_time_s"] += m["wall_time_s"]
    for k, v in m["splits"].items():
        total["splits"][k] = total["splits"].get(k, 0) + v
    total["fallbacks"] += m["fallbacks"]
    total["max_mean_loss_bits"] = max(total["max_mean_loss_bits"], m["max_mean_loss_bits"])
    return total
