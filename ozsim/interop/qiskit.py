"""Conversion between Qiskit circuits / OpenQASM files and ozsim's :class:`~ozsim.Circuit`.

Qiskit is imported inside the functions only, so ``import ozsim.interop.qiskit`` stays cheap and
works without Qiskit installed.

What :func:`from_qiskit` accepts:

=====================================  =========================================================
Qiskit instruction                     ozsim
=====================================  =========================================================
standard gate with numeric parameters  ``unitary`` op, matrix from :func:`ozsim.gates.standard_gate`
``UnitaryGate``                        ``unitary`` op with its matrix (any size)
other gate on <= 12 qubits             one ``unitary`` op, ``Operator(gate).data`` (a custom
                                       composite gate from a QASM file stays one op)
other gate on > 12 qubits              its definition, one level down (recursively)
other instruction with a definition    one ``unitary`` op (``Operator``) when it has no clbits,
(``to_instruction()``, a composed      fits 12 qubits and its definition is unitary; else its
library circuit, ``initialize``)       definition, one level down
``global_phase`` gate, circuit phase   added to ``Circuit.global_phase``
``measure`` / ``reset`` / ``barrier``  ``measure`` / ``reset`` / ``barrier`` ops
``id``, ``delay``                      dropped (no effect on the state)
``if_else`` on ``(register or bit,     the gates of the true body, each with
int)``, no else branch, gates only     ``condition=(clbits, value)``
``box``                                its body, inlined
anything else                          :class:`~ozsim.UnsupportedOperationError`
=====================================  =========================================================
"""

from __future__ import annotations

import ast
import contextlib
import io
import math
import numbers
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..circuit import Circuit, Operation
from ..errors import MissingDependencyError, NonFiniteError, QasmError, UnsupportedOperationError
from ..gates import standard

if TYPE_CHECKING:  # pragma: no cover
    import qiskit

__all__ = ["from_qiskit", "to_qiskit", "load_qasm", "loads_qasm", "MAX_COMPOSITE_QUBITS"]

#: Custom gates on at most this many qubits become one dense operation (a 2^12 x 2^12 complex128
#: matrix is 256 MiB); wider ones are decomposed one level through their definition.
MAX_COMPOSITE_QUBITS = 12

_IGNORED = ("id", "delay")


class _NonFiniteParameter(NonFiniteError, ValueError):
    """A gate parameter that is NaN or infinite (an overflowing literal such as ``1e400``)."""

    def __init__(self, message: str, gate: str, value: float):
        super().__init__(message)
        self.gate = gate
        self.value = value


def _import_qiskit():
    try:
        import qiskit  # noqa: F401
    except ImportError as exc:  # pragma: no cover - qiskit is a hard dependency
        raise MissingDependencyError(
            "this feature needs Qiskit: pip install 'qiskit>=1.2' qiskit-qasm3-import"
        ) from exc
    return qiskit


def _std_classes() -> dict[str, tuple[type, ...]]:
    """Qiskit gate name -> classes whose instances ozsim's standard matrices describe."""
    from qiskit.circuit.library import C3XGate, C4XGate, MCXGate, get_standard_gate_name_mapping

    table: dict[str, tuple[type, ...]] = {}
    for name, gate in get_standard_gate_name_mapping().items():
        if name in standard.STANDARD_GATES:
            table[name] = (gate.base_class,)
    table["mcx"] = (MCXGate, C3XGate, C4XGate)
    return table


class _Converter:
    """Walks a QuantumCircuit (and nested bodies / definitions), appending to a Circuit."""

    def __init__(self, qc: qiskit.QuantumCircuit, circuit: Circuit, max_composite_qubits: int):
        from qiskit.circuit import ControlledGate, Gate
        from qiskit.quantum_info import Operator

        self.qc = qc
        self.circuit = circuit
        self.max_composite = max_composite_qubits
        self.std = _std_classes()
        self.Gate, self.ControlledGate, self.Operator = Gate, ControlledGate, Operator

    # -- helpers ---------------------------------------------------------------------------------
    @staticmethod
    def _fail(pos: int, name: str, reason: str, outer: str | None = None):
        where = f"instruction {pos} ({name})" if outer is None else (
            f"instruction {pos} ({outer}) contains {name!r} which"
        )
        raise UnsupportedOperationError(f"{where} {reason}")

    def _params(self, op, pos: int, outer: str | None) -> tuple[float, ...] | None:
        """Numeric parameters as floats; None if some are not numbers (arrays, durations...)."""
        from qiskit.circuit import ParameterExpression

        free = set()
        for x in op.params:
            if isinstance(x, ParameterExpression):
                free.update(x.parameters)
        if free:
            self._fail(pos, op.name, f"has unbound parameters ({_names(free)})"
                       + _all_unbound(self.qc, free), outer)
        out = []
        for x in op.params:
            if isinstance(x, ParameterExpression):
                x = complex(x)
                if x.imag:
                    return None
                x = x.real
            if isinstance(x, numbers.Real) and not isinstance(x, bool):
                x = float(x)
                if not math.isfinite(x):
                    where = f"instruction {pos} ({op.name})" if outer is None else (
                        f"instruction {pos} ({outer}) contains {op.name!r} which")
                    raise _NonFiniteParameter(
                        f"{where} has a parameter that is not a finite number ({x})", op.name, x
                    )
                out.append(x)
            else:
                return None
        return tuple(out)

    def _phase(self, phase, pos: int, name: str, condition, qubits: tuple[int, ...]) -> None:
        """Add a global phase; under a condition it becomes a conditional phase gate."""
        from qiskit.circuit import ParameterExpression

        if isinstance(phase, ParameterExpression):
            if phase.parameters:
                names = ", ".join(sorted(str(s) for s in phase.parameters))
                where = "the circuit" if pos < 0 else f"instruction {pos} ({name})"
                raise UnsupportedOperationError(f"{where} has an unbound global phase ({names})")
            phase = float(phase)
        phase = float(phase)
        if not math.isfinite(phase):
            where = "the circuit" if pos < 0 else f"instruction {pos} ({name})"
            raise _NonFiniteParameter(f"{where} has a global phase that is not a finite number "
                                      f"({phase})", name or "global phase", phase)
        if phase == 0.0:
            return
        if condition is None:
            self.circuit.global_phase += phase
        else:
            q = qubits[0] if qubits else 0
            self.circuit.unitary(
                np.exp(1j * phase) * np.eye(2), [q], name="global_phase", params=(phase,),
                condition=condition,
            )

    def _matrix(self, op, params, nq: int) -> np.ndarray | None:
        """The gate's matrix from ozsim's table, or None where the table does not apply."""
        classes = self.std.get(op.name)
        if classes is None or params is None or not isinstance(op, classes):
            return None
        if isinstance(op, self.ControlledGate) and op.ctrl_state != (1 << op.num_ctrl_qubits) - 1:
            return None  # open controls (Qiskit renames these "cx_o0"..., but be safe)
        return standard.standard_gate(op.name, params, num_qubits=nq)

    # -- the walk --------------------------------------------------------------------------------
    def run(self) -> None:
        qc = self.qc
        qmap = {q: qc.find_bit(q).index for q in qc.qubits}
        cmap = {c: qc.find_bit(c).index for c in qc.clbits}
        self._phase(qc.global_phase, -1, "", None, ())
        for pos, inst in enumerate(qc.data):
            self.add(inst, pos, qmap, cmap, condition=None, outer=None)

    def add(self, inst, pos: int, qmap, cmap, condition, outer: str | None) -> None:
        from qiskit.circuit import BoxOp, ControlFlowOp, IfElseOp

        op = inst.operation
        name = op.name
        qubits = tuple(qmap[q] for q in inst.qubits)
        clbits = tuple(cmap[c] for c in inst.clbits)
        circ = self.circuit

        if name in _IGNORED:
            return
        if name == "barrier":
            if condition is None:
                circ.barrier(*qubits)
            return
        if name == "global_phase" and not qubits:
            params = self._params(op, pos, outer)
            self._phase(params[0] if params else op.params[0], pos, name, condition, qubits)
            return
        if name in ("measure", "reset"):  # never conditioned: _add_if admits gates only
            if name == "measure":
                circ.measure(qubits[0], clbits[0])
            else:
                circ.reset(qubits[0])
            return
        if isinstance(op, IfElseOp):
            self._add_if(op, inst, pos, qmap, cmap, condition, outer)
            return
        if isinstance(op, BoxOp):
            (body,) = op.params
            self._add_body(body, inst, pos, qmap, cmap, condition, outer or name)
            return
        if isinstance(op, ControlFlowOp):
            self._fail(pos, name, "is control flow that ozsim does not support", outer)
        if not isinstance(op, self.Gate):
            if op.definition is None or getattr(op, "_directive", False):
                self._fail(pos, name, "is not a unitary gate and not supported", outer)
            self._add_instruction(op, inst, pos, qmap, cmap, condition, outer)
            return
        params = self._params(op, pos, outer)  # raises on unbound parameters
        nq = len(qubits)
        matrix = self._matrix(op, params, nq)
        if matrix is None and name == "unitary":
            matrix = np.asarray(op.to_matrix(), dtype=np.complex128)
        if matrix is None and nq > self.max_composite and op.definition is not None:
            self._add_body(op.definition, inst, pos, qmap, cmap, condition, outer or name)
            return
        if matrix is None:
            try:
                matrix = self.Operator(op).data
            except Exception as exc:  # QiskitError, TypeError from odd definitions...
                self._fail(pos, name, f"has no matrix ({type(exc).__name__}: {exc})", outer)
        circ.unitary(
            matrix, qubits, name=name, params=params or (), condition=condition
        )

    def _add_instruction(self, op, inst, pos, qmap, cmap, condition, outer) -> None:
        """A composite non-gate instruction (``QuantumCircuit.to_instruction()``, a library
        circuit composed into another): one dense op when it is unitary, has no clbits and fits
        ``max_composite_qubits``; else its definition, one level down."""
        free = set().union(*(getattr(x, "parameters", ()) for x in op.params))
        if free:
            self._fail(pos, op.name, f"has unbound parameters ({_names(free)})"
                       + _all_unbound(self.qc, free), outer)
        if op.num_clbits == 0 and op.num_qubits <= self.max_composite:
            try:
                matrix = self.Operator(op).data
            except Exception:  # measurements, resets... inside: walk the definition instead
                matrix = None
            if matrix is not None:
                qubits = tuple(qmap[q] for q in inst.qubits)
                self.circuit.unitary(matrix, qubits, name=op.name, condition=condition)
                return
        self._add_body(op.definition, inst, pos, qmap, cmap, condition, outer or op.name)

    def _add_body(self, body, inst, pos, qmap, cmap, condition, outer) -> None:
        """Inline a sub-circuit whose qubits/clbits map in order to the instruction's."""
        bq = {b: qmap[q] for b, q in zip(body.qubits, inst.qubits)}
        bc = {b: cmap[c] for b, c in zip(body.clbits, inst.clbits)}
        self._phase(body.global_phase, pos, outer, condition, tuple(bq.values()))
        for sub in body.data:
            self.add(sub, pos, bq, bc, condition, outer)

    def _add_if(self, op, inst, pos, qmap, cmap, condition, outer) -> None:
        # Only reached with condition None: an if_else body may hold gates only (checked below).
        from qiskit.circuit import Clbit

        name = op.name
        true_body, false_body = op.params
        if false_body is not None and len(false_body.data):
            self._fail(pos, name, "has an else branch", outer)
        cond = op.condition
        if not isinstance(cond, tuple):
            self._fail(pos, name, f"has a classical-expression condition ({cond})", outer)
        target, value = cond
        if isinstance(target, Clbit):
            bits = (self._outer_clbit(target, cmap),)
        else:  # a ClassicalRegister, the only other target Qiskit allows
            bits = tuple(self._outer_clbit(b, cmap) for b in target)
        for sub in true_body.data:
            if not isinstance(sub.operation, self.Gate) and sub.operation.name not in (
                "barrier", *_IGNORED,
            ):
                self._fail(
                    pos, name,
                    f"has a {sub.operation.name!r} in its body (only gates may be conditioned)",
                    outer,
                )
        self._add_body(true_body, inst, pos, qmap, cmap, (bits, int(value)), outer or name)

    def _outer_clbit(self, bit, cmap) -> int:
        # Registers in conditions refer to the outermost circuit's bits (Qiskit's convention).
        if bit in cmap:
            return cmap[bit]
        return self.qc.find_bit(bit).index


def _names(params, limit: int = 10) -> str:
    """``"a, b, theta"``: sorted parameter names, the first ``limit`` and how many in all."""
    names = sorted((str(p) for p in params),
                   key=lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n)])
    if len(names) <= limit:
        return ", ".join(names)
    return ", ".join(names[:limit]) + f", ... ({len(names)} in all)"


def _all_unbound(qc, free) -> str:
    """``"; the circuit has 12 unbound parameters (...)"`` when ``qc`` has more than ``free``."""
    every = set(qc.parameters)
    if every <= set(free):
        return ""
    return (f"; the circuit has {len(every)} unbound parameters ({_names(every)}): bind them with "
            "QuantumCircuit.assign_parameters, or sweep them with ozsim.primitives")


def _cregs(qc) -> list[tuple[str, int]] | None:
    """The classical registers if they tile ``qc.clbits`` in order, else None (one register)."""
    bits = [b for reg in qc.cregs for b in reg]
    if bits == list(qc.clbits):
        return [(reg.name, reg.size) for reg in qc.cregs]
    return None


def from_qiskit(
    qc: qiskit.QuantumCircuit,
    *,
    name: str | None = None,
    max_composite_qubits: int = MAX_COMPOSITE_QUBITS,
) -> Circuit:
    """Convert a Qiskit circuit to an ozsim :class:`~ozsim.Circuit`, instruction by instruction.

    Qubit and clbit indices are ``qc.find_bit(bit).index`` (little-endian, as in Qiskit). The
    classical registers become ``Circuit.cregs`` in declaration order when they tile
    ``qc.clbits`` in order; otherwise (loose bits, overlapping registers) one register ``"c"``
    holds every bit. See the module docstring for what each instruction becomes.

    Args:
        qc: the circuit; every parameter must be bound.
        name: ``Circuit.name``; default ``qc.name``.
        max_composite_qubits: custom gates on at most this many qubits become one dense op.

    Returns:
        The equivalent :class:`~ozsim.Circuit` (``global_phase`` included): the product of its
        unitary ops times ``exp(i global_phase)`` equals ``Operator(qc)`` for a measurement-free
        circuit.

    Raises:
        UnsupportedOperationError: an instruction ozsim cannot simulate (unbound parameters,
            loops, switch, classical-expression conditions, else branches, conditioned
            measurements, ``initialize`` and other non-gate instructions); the message reads
            ``"instruction 17 (initialize) ..."`` with the position in ``qc.data``.
        NonFiniteError: (also a ``ValueError``) a gate parameter or phase that is NaN or
            infinite; the message names the instruction's position and the gate.
    """
    _import_qiskit()
    circuit = Circuit(
        qc.num_qubits, qc.num_clbits, name=name if name is not None else qc.name,
        cregs=_cregs(qc),
    )
    _Converter(qc, circuit, max_composite_qubits).run()
    return circuit


def _qiskit_gate(op: Operation):
    """A Qiskit standard gate equal to ``op`` when its name says it is one, else a UnitaryGate."""
    from qiskit.circuit.library import UnitaryGate, get_standard_gate_name_mapping

    mapping = get_standard_gate_name_mapping()
    if op.name in mapping and op.name in standard.STANDARD_GATES:
        nparams, nq, _ = standard.STANDARD_GATES[op.name]
        if nparams == len(op.params) and nq == op.num_qubits:
            ref = standard.standard_gate(op.name, op.params)
            if np.allclose(ref, op.matrix, rtol=0.0, atol=1e-14):
                return mapping[op.name].base_class(*op.params)
    return UnitaryGate(op.matrix, label=op.name or None, check_input=False)


def to_qiskit(circuit: Circuit) -> qiskit.QuantumCircuit:
    """Convert an ozsim circuit to a Qiskit ``QuantumCircuit`` (handy for tests and export).

    A unitary op whose name is a Qiskit standard gate and whose matrix equals that gate with the
    op's params becomes that gate; any other becomes a ``UnitaryGate`` labelled with the op's name.
    Measurements, resets, barriers, the global phase and conditions (as ``if_test`` on a whole
    register or a single bit) carry over. Qubit register ``"q"``, classical registers as in
    ``circuit.cregs``.

    Args:
        circuit: the ozsim circuit.

    Returns:
        A new ``qiskit.QuantumCircuit``.

    Raises:
        ValueError: a condition on clbits that are neither one whole register nor one bit, or an
            operation kind Qiskit has no instruction for.
    """
    _import_qiskit()
    from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister

    qreg = QuantumRegister(circuit.num_qubits, "q")
    cregs = [ClassicalRegister(size, rname) for rname, size in circuit.cregs]
    qc = QuantumCircuit(qreg, *cregs, name=circuit.name, global_phase=circuit.global_phase)
    by_bits = {tuple(qc.find_bit(b).index for b in reg): reg for reg in cregs}

    for k, op in enumerate(circuit.operations):
        ctx: Any = contextlib.nullcontext()
        if op.condition is not None:
            bits, value = op.condition
            if bits in by_bits:
                target = by_bits[bits]
            elif len(bits) == 1:
                target = qc.clbits[bits[0]]
            else:
                raise ValueError(
                    f"operation {k} ({op.name}): condition on clbits {bits} that are neither a "
                    "whole classical register nor a single bit"
                )
            ctx = qc.if_test((target, value))
        with ctx:
            if op.kind == "unitary":
                qc.append(_qiskit_gate(op), list(op.qubits))
            elif op.kind == "measure":
                qc.measure(op.qubits[0], op.clbits[0])
            elif op.kind == "reset":
                qc.reset(op.qubits[0])
            elif op.kind == "barrier":
                qc.barrier(*op.qubits)
            else:
                raise ValueError(f"operation {k}: unknown kind {op.kind!r}")
    return qc


# -- OpenQASM --------------------------------------------------------------------------------------
_COMMENTS = re.compile(r"\A(?:\s+|//[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.S)
_QASM2_POS = re.compile(r"\A(?P<file>.*?):(?P<line>\d+),(?P<col>\d+): (?P<msg>.*)\Z", re.S)
_QASM3_POS = re.compile(r"\A(?:L(?P<line1>\d+):C\d+|(?P<line2>\d+),\d+): (?P<msg>.*)\Z", re.S)
_ANTLR_LINE = re.compile(r"line (\d+):(\d+) (.*)")


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(((?:[^()]|\([^()]*\))*)\)")
_QASM_FUNCS = {"sin": math.sin, "cos": math.cos, "tan": math.tan, "exp": math.exp,
               "ln": math.log, "log": math.log, "sqrt": math.sqrt, "asin": math.asin,
               "acos": math.acos, "atan": math.atan, "arcsin": math.asin, "arccos": math.acos,
               "arctan": math.atan}
_QASM_CONSTS = {"pi": math.pi, "π": math.pi, "tau": math.tau, "τ": math.tau, "euler": math.e,
                "ℇ": math.e}


def _eval_qasm_number(text: str) -> float | None:
    """The value of a constant QASM parameter expression (``inf`` where it overflows, ``nan``
    for a domain error), or None where it is not a constant numeric expression."""
    try:
        tree = ast.parse(text.strip().replace("^", "**"), mode="eval")
    except SyntaxError:
        return None
    ops = {ast.Add: float.__add__, ast.Sub: float.__sub__, ast.Mult: float.__mul__,
           ast.Div: float.__truediv__, ast.Pow: float.__pow__}

    def ev(node) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name) and node.id in _QASM_CONSTS:
            return _QASM_CONSTS[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            a, b = ev(node.left), ev(node.right)
            try:
                return ops[type(node.op)](a, b)
            except OverflowError:
                return math.inf
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _QASM_FUNCS and len(node.args) == 1 and not node.keywords):
            v = ev(node.args[0])
            try:
                return _QASM_FUNCS[node.func.id](v)
            except OverflowError:
                return math.inf
            except ValueError:
                return math.nan
        raise ValueError("not a constant")

    try:
        return ev(tree.body)
    except (ValueError, ZeroDivisionError, TypeError, RecursionError):
        return None


def _nonfinite_parameter_line(text: str, gate: str) -> int | None:
    """The 1-based line of the first call of ``gate`` (else of any gate) whose parameters are
    constant expressions and one is not a finite number; None if there is none."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    first_any = None
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("//", 1)[0]
        for m in _CALL.finditer(line):
            values = [_eval_qasm_number(a) for a in m.group(2).split(",")]
            if not any(v is not None and not math.isfinite(v) for v in values):
                continue
            if m.group(1).lower() == gate.lower():
                return number
            if first_any is None:
                first_any = number
    return first_any


def _qasm_version(text: str) -> int:
    """3 for OpenQASM 3, else 2: the ``OPENQASM`` header after comments, or a guess without one."""
    body = text[_COMMENTS.match(text).end():]
    m = re.match(r"OPENQASM\s+(\d+)", body)
    if m:
        return 3 if m.group(1) == "3" else 2
    # The header is optional in OpenQASM 3 only; QASM 3 declares qubits with `qubit`.
    return 3 if re.search(r"\bqubit\b|stdgates\.inc", text) else 2


def _parse_qasm2(text: str, path: str | None):
    import qiskit.qasm2 as qasm2

    include_path = [str(Path(path).parent)] if path is not None else []
    include_path.append(".")
    try:
        return qasm2.loads(
            text,
            include_path=include_path,
            custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS,
        )
    except qasm2.QASM2Error as exc:
        message = str(getattr(exc, "message", exc))
        m = _QASM2_POS.match(message)
        if m is None:
            raise QasmError(_one_line(message), path) from exc
        where = m.group("file")
        if where != "<input>":
            # The error is inside an included file: name it (Qiskit gives the name as included).
            for folder in include_path:
                if (Path(folder) / where).is_file():
                    where = str(Path(folder) / where)
                    break
            raise QasmError(_one_line(m.group("msg")), where, int(m.group("line"))) from exc
        raise QasmError(_one_line(m.group("msg")), path, int(m.group("line"))) from exc


def _parse_qasm3(text: str, path: str | None):
    try:
        import qiskit.qasm3 as qasm3
        import qiskit_qasm3_import  # noqa: F401
        from openqasm3.parser import QASM3ParsingError
    except ImportError as exc:
        raise MissingDependencyError(
            "reading OpenQASM 3 needs qiskit-qasm3-import: pip install qiskit-qasm3-import"
        ) from exc

    stderr = io.StringIO()  # ANTLR prints its syntax messages to stderr: keep them for ours
    try:
        with contextlib.redirect_stderr(stderr):
            return qasm3.loads(text)
    except (qasm3.QASM3Error, QASM3ParsingError) as exc:
        message = str(getattr(exc, "message", None) or exc)
        m = _QASM3_POS.match(message)
        if m is not None:
            line = int(m.group("line1") or m.group("line2"))
            raise QasmError(_one_line(m.group("msg")), path, line) from exc
        # ANTLR bail-out: the position is on the offending token of the cause.
        printed = _ANTLR_LINE.search(stderr.getvalue())
        if printed:
            raise QasmError(_one_line(printed.group(3)), path, int(printed.group(1))) from exc
        cause = exc.__cause__
        token = None
        if cause is not None and cause.args:
            token = getattr(cause.args[0], "offendingToken", None)
        if token is not None:
            seen = "end of input" if token.type == -1 else repr(token.text)
            raise QasmError(f"syntax error at {seen}", path, int(token.line)) from exc
        raise QasmError(_one_line(message) or "syntax error", path) from exc
    except Exception as exc:  # the importer's internal errors on unusual input
        raise QasmError(
            _one_line(f"OpenQASM 3 importer failed: {type(exc).__name__}: {exc}"), path
        ) from exc


def loads_qasm(text: str, *, path: str | os.PathLike | None = None) -> Circuit:
    """Parse an OpenQASM 2 or 3 program from a string.

    OpenQASM 3 is recognised by its header ``OPENQASM 3`` (after comments), or, without any
    header, by a ``qubit`` declaration or ``stdgates.inc``; it goes through ``qiskit.qasm3.loads``
    (needs ``qiskit-qasm3-import``). Anything else is OpenQASM 2, parsed by ``qiskit.qasm2.loads``
    with ``LEGACY_CUSTOM_INSTRUCTIONS`` (qelib1's ``u``, ``u0``...``c4x`` as Qiskit's gates) and
    the file's directory on the include path. The circuit is then converted by
    :func:`from_qiskit`.

    Args:
        text: the program.
        path: where it came from: used in error messages, as ``Circuit.name`` (its stem) and for
            resolving ``include`` statements. ``None``: name ``"circuit"``, includes from ``.``.

    Returns:
        The :class:`~ozsim.Circuit`.

    Raises:
        QasmError: the program does not parse, or a gate parameter overflows or is NaN
            (``rx(1e400)``); the message is one line ``"file:line: what"`` (``<string>``
            without a path; an error inside an included file names that file).
        UnsupportedOperationError: it parses but contains an operation ozsim cannot simulate;
            the message starts with the path.
        MissingDependencyError: OpenQASM 3 without ``qiskit-qasm3-import``.
    """
    _import_qiskit()
    spath = os.fspath(path) if path is not None else None
    if _qasm_version(text) == 3:
        qc = _parse_qasm3(text, spath)
    else:
        qc = _parse_qasm2(text, spath)
    name = Path(spath).stem if spath is not None else "circuit"
    try:
        return from_qiskit(qc, name=name)
    except UnsupportedOperationError as exc:
        raise UnsupportedOperationError(f"{spath or '<string>'}: {exc}") from exc
    except _NonFiniteParameter as exc:
        line = _nonfinite_parameter_line(text, exc.gate)
        what = (f"gate {exc.gate!r} has a parameter that is not a finite number ({exc.value})"
                if line is not None else str(exc))
        raise QasmError(what, spath, line) from exc


def load_qasm(path: str | os.PathLike) -> Circuit:
    """Read an OpenQASM 2 or 3 file (see :func:`loads_qasm`); ``Circuit.name`` is the file stem.

    Args:
        path: the ``.qasm`` file.

    Returns:
        The :class:`~ozsim.Circuit`.

    Raises:
        QasmError: the file cannot be read (missing, unreadable, not UTF-8: ``line`` is None,
            the ``OSError`` is chained) or does not parse (``"path:line: what"``).
        UnsupportedOperationError: see :func:`loads_qasm`.
    """
    spath = os.fspath(path)
    try:
        text = Path(spath).read_text(encoding="utf-8")
    except OSError as exc:
        raise QasmError(f"cannot read file: {exc.strerror or exc}", spath) from exc
    except UnicodeDecodeError as exc:
        raise QasmError(f"not a UTF-8 text file ({exc.reason})", spath) from exc
    return loads_qasm(text, path=spath)
