"""Tests of ozsim.interop.qiskit: QuantumCircuit and OpenQASM 2/3 -> ozsim.Circuit and back.

The reference for every conversion is ``qiskit.quantum_info.Operator`` of the Qiskit circuit; the
ozsim side is multiplied out with the plain-numpy oracle below, never with ozsim's engine.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ozsim
from ozsim import Circuit, Operation, QasmError, Simulator, UnsupportedOperationError, gates
from ozsim.interop import from_qiskit, load_qasm, loads_qasm, to_qiskit
from ozsim.testing import circuit_unitary

qiskit = pytest.importorskip("qiskit")
from qiskit import ClassicalRegister, QuantumCircuit, QuantumRegister, qasm2, qasm3  # noqa: E402
from qiskit.circuit import (  # noqa: E402
    Gate,
    IfElseOp,
    Parameter,
    library,  # noqa: E402
)
from qiskit.circuit.classical import expr  # noqa: E402
from qiskit.quantum_info import Operator  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
# QASMBench: the repository's copy, else the shared one.
QASMBENCH = next(
    (p for p in (REPO / "tests" / "data" / "qasmbench", Path("/work/shared/circuits/qasmbench"))
     if p.exists()),
    Path("/work/shared/circuits/qasmbench"),
)
# Products of <= 60 gates of 5 qubits, each exact to ~1e-16: 1e-12 is generous but still rejects
# any wrong qubit order, transposition or dropped phase (errors of order 1).
ATOL = 1e-12


# -- plain-numpy oracle --------------------------------------------------------------------------
def _apply(state: np.ndarray, u: np.ndarray, qubits, n: int) -> np.ndarray:
    """Apply gate ``u`` on ``qubits`` to an n-qubit state with tensordot (for larger n)."""
    d = len(qubits)
    psi = state.reshape((2,) * n)  # axis k is qubit n-1-k
    axes = [n - 1 - q for q in reversed(qubits)]  # u's axes: (q_{d-1}..q_0) out, then in
    out = np.tensordot(u.reshape((2,) * (2 * d)), psi, axes=(list(range(d, 2 * d)), axes))
    return np.moveaxis(out, list(range(d)), axes).reshape(-1)


def _state(circ: Circuit) -> np.ndarray:
    state = np.zeros(1 << circ.num_qubits, dtype=np.complex128)
    state[0] = 1.0
    for op in circ.gates:
        state = _apply(state, op.matrix, op.qubits, circ.num_qubits)
    return np.exp(1j * circ.global_phase) * state


def test_oracles_agree():
    circ = gates.brickwork(4, 3, 2, seed=1)
    circ.unitary(gates.haar_unitary(8, 2), [3, 0, 2])
    np.testing.assert_allclose(_state(circ), circuit_unitary(circ)[:, 0], rtol=0, atol=1e-14)
    np.testing.assert_allclose(
        circuit_unitary(circ), Operator(to_qiskit(circ)).data, rtol=0, atol=ATOL
    )


# -- from_qiskit ---------------------------------------------------------------------------------
_STANDARD = [
    g for name, g in library.get_standard_gate_name_mapping().items()
    if name not in ("delay", "reset", "measure", "global_phase")
]


def _random_circuit(n: int, num_gates: int, seed: int) -> QuantumCircuit:
    rng = np.random.default_rng(seed)
    qc = QuantumCircuit(n, global_phase=float(rng.uniform(-3, 3)))
    extra = [library.MCXGate(3), library.C3XGate(), library.C4XGate(), library.RC3XGate()]
    for _ in range(num_gates):
        kind = rng.integers(3)
        if kind == 0:  # a standard gate with random angles
            proto = _STANDARD[rng.integers(len(_STANDARD))]
            gate = proto.base_class(*rng.uniform(-7, 7, len(proto.params)))
        elif kind == 1:
            gate = extra[rng.integers(len(extra))]
        else:
            k = int(rng.integers(1, 4))
            gate = library.UnitaryGate(gates.haar_unitary(1 << k, rng))
        qc.append(gate, [int(q) for q in rng.permutation(n)[: gate.num_qubits]])
    return qc


@pytest.mark.parametrize("seed", range(4))
def test_from_qiskit_random_circuit(seed):
    qc = _random_circuit(5, 40, seed)
    circ = from_qiskit(qc)
    assert circ.num_qubits == 5 and circ.global_phase == qc.global_phase
    assert [op.name for op in circ.operations] == [
        i.operation.name for i in qc.data if i.operation.name != "id"  # id is dropped
    ]
    np.testing.assert_allclose(circuit_unitary(circ), Operator(qc).data, rtol=0, atol=ATOL)


@pytest.mark.parametrize("proto", _STANDARD, ids=lambda g: g.name)
def test_from_qiskit_each_standard_gate_on_permuted_qubits(proto):
    n = proto.num_qubits + 1
    params = np.random.default_rng(1).uniform(-4, 4, len(proto.params)).tolist()
    qc = QuantumCircuit(n)
    qc.append(proto.base_class(*params), list(range(n - 1, 0, -1)))
    circ = from_qiskit(qc)
    if proto.name == "id":
        assert circ.operations == []  # dropped: no effect on the state
        return
    (op,) = circ.operations
    assert op.name == proto.name and op.params == pytest.approx(tuple(params))
    np.testing.assert_allclose(circuit_unitary(circ), Operator(qc).data, rtol=0, atol=ATOL)


def test_unitary_gate_and_global_phase():
    u = gates.haar_unitary(8, 4)
    qc = QuantumCircuit(4, global_phase=0.7)
    qc.append(library.UnitaryGate(u), [2, 0, 3])
    qc.append(library.GlobalPhaseGate(0.2))
    circ = from_qiskit(qc)
    (op,) = circ.operations
    assert op.name == "unitary" and op.qubits == (2, 0, 3)
    np.testing.assert_array_equal(op.matrix, u)
    assert circ.global_phase == pytest.approx(0.9)
    np.testing.assert_allclose(circuit_unitary(circ), Operator(qc).data, rtol=0, atol=ATOL)


def test_composite_gate_kept_whole_or_decomposed():
    sub = QuantumCircuit(3, global_phase=0.3, name="mygate")
    sub.h(0)
    sub.cx(0, 2)
    sub.rz(0.5, 1)
    qc = QuantumCircuit(4)
    qc.append(sub.to_gate(), [3, 1, 0])
    whole = from_qiskit(qc)
    assert [(op.name, op.qubits) for op in whole.operations] == [("mygate", (3, 1, 0))]
    split = from_qiskit(qc, max_composite_qubits=2)
    assert [(op.name, op.qubits) for op in split.operations] == [
        ("h", (3,)), ("cx", (3, 0)), ("rz", (1,))
    ]
    for circ in (whole, split):
        np.testing.assert_allclose(circuit_unitary(circ), Operator(qc).data, rtol=0, atol=ATOL)


def test_wide_composite_gate_is_decomposed_one_level():
    inner = QuantumCircuit(2, name="pair")
    inner.h(0)
    inner.cx(0, 1)
    wide = QuantumCircuit(14, name="wide")
    for q in range(0, 14, 2):
        wide.append(inner.to_gate(), [q, q + 1])
    qc = QuantumCircuit(14)
    qc.append(wide.to_gate(), range(14))
    circ = from_qiskit(qc)
    assert [op.name for op in circ.operations] == ["pair"] * 7  # inner gates stay whole
    assert [op.qubits for op in circ.operations] == [(q, q + 1) for q in range(0, 14, 2)]


def test_measure_reset_barrier_delay_id_and_registers():
    qa, qb = QuantumRegister(1, "a"), QuantumRegister(2, "b")
    ca, cb = ClassicalRegister(2, "x"), ClassicalRegister(1, "y")
    qc = QuantumCircuit(qa, qb, ca, cb)
    qc.h(qb[1])
    qc.id(0)
    qc.delay(100, 0)
    qc.barrier()
    qc.measure(qb[1], cb[0])
    qc.reset(qa[0])
    circ = from_qiskit(qc)
    assert circ.cregs == [("x", 2), ("y", 1)] and circ.num_clbits == 3
    assert [(op.kind, op.qubits, op.clbits) for op in circ.operations] == [
        ("unitary", (2,), ()),
        ("barrier", (0, 1, 2), ()),
        ("measure", (2,), (2,)),
        ("reset", (0,), ()),
    ]


def test_loose_clbits_give_one_register():
    from qiskit.circuit import Clbit

    qc = QuantumCircuit([*QuantumRegister(1)], [Clbit(), Clbit()])
    qc.measure(0, 1)
    circ = from_qiskit(qc)
    assert circ.cregs == [("c", 2)] and circ.operations[0].clbits == (1,)


def test_conditional_gates():
    qr, cr, flag = QuantumRegister(3, "q"), ClassicalRegister(2, "c"), ClassicalRegister(1, "f")
    qc = QuantumCircuit(qr, flag, cr)
    qc.measure(0, cr[1])
    with qc.if_test((cr, 2)):
        qc.x(1)
        qc.cx(1, 2)
        qc.barrier()
    with qc.if_test((flag[0], True)):
        qc.h(0)
    body = QuantumCircuit(1, 1, global_phase=0.25)
    body.rz(0.5, 0)
    qc.append(IfElseOp((cr[0], 0), body), [qr[2]], [cr[0]])
    circ = from_qiskit(qc)
    got = [(op.name, op.qubits, op.condition) for op in circ.operations[1:]]
    assert got == [
        ("x", (1,), ((1, 2), 2)),
        ("cx", (1, 2), ((1, 2), 2)),
        ("h", (0,), ((0,), 1)),
        ("global_phase", (2,), ((1,), 0)),  # a body's phase is only global within the branch
        ("rz", (2,), ((1,), 0)),
    ]
    np.testing.assert_allclose(circ.operations[-2].matrix, np.exp(0.25j) * np.eye(2))


def test_box_is_inlined():
    qc = QuantumCircuit(2)
    with qc.box():
        qc.h(1)
        qc.cx(1, 0)
    circ = from_qiskit(qc)
    assert [(op.name, op.qubits) for op in circ.operations] == [("h", (1,)), ("cx", (1, 0))]


# -- unsupported operations ----------------------------------------------------------------------
def _cond_circuit():
    qc = QuantumCircuit(2, 2)
    qc.h(0)
    qc.measure(0, 0)
    return qc


def test_unbound_parameter():
    qc = QuantumCircuit(1)
    qc.rx(Parameter("theta"), 0)
    with pytest.raises(UnsupportedOperationError, match=r"instruction 0 \(rx\) has unbound "
                       r"parameters \(theta\)"):
        from_qiskit(qc)


def test_unbound_global_phase():
    qc = QuantumCircuit(1, global_phase=Parameter("g"))
    with pytest.raises(UnsupportedOperationError, match=r"the circuit has an unbound global "
                       r"phase \(g\)"):
        from_qiskit(qc)
    qc = _cond_circuit()
    body = QuantumCircuit(1, global_phase=Parameter("b"))
    body.x(0)
    qc.append(IfElseOp((qc.clbits[0], 1), body), [1], [])
    with pytest.raises(UnsupportedOperationError, match=r"instruction 2 \(if_else\) has an "
                       r"unbound global phase \(b\)"):
        from_qiskit(qc)


def test_loops_are_unsupported():
    qc = _cond_circuit()
    with qc.while_loop((qc.clbits[0], 1)):
        qc.x(0)
    with pytest.raises(UnsupportedOperationError, match=r"instruction 2 \(while_loop\) is "
                       r"control flow that ozsim does not support"):
        from_qiskit(qc)


def test_else_branch_and_expr_condition_are_unsupported():
    qc = _cond_circuit()
    with qc.if_test((qc.clbits[0], 1)) as else_:
        qc.x(1)
    with else_:
        qc.h(1)
    with pytest.raises(UnsupportedOperationError, match=r"instruction 2 \(if_else\) has an else "
                       "branch"):
        from_qiskit(qc)
    qc = _cond_circuit()
    with qc.if_test(expr.logic_and(qc.clbits[0], qc.clbits[1])):
        qc.x(1)
    with pytest.raises(UnsupportedOperationError, match=r"instruction 2 \(if_else\) has a "
                       "classical-expression condition"):
        from_qiskit(qc)


def test_conditioned_measure_is_unsupported():
    qc = _cond_circuit()
    with qc.if_test((qc.clbits[0], 1)):
        qc.measure(1, 1)
    with pytest.raises(UnsupportedOperationError, match=r"instruction 2 \(if_else\) has a "
                       r"'measure' in its body \(only gates may be conditioned\)"):
        from_qiskit(qc)


def test_initialize_runs_through_its_definition():
    qc = QuantumCircuit(2)
    qc.h(1)
    qc.initialize([0, 1], 0)  # a reset, then a state preparation gate
    kinds = [op.kind for op in from_qiskit(qc).operations]
    assert kinds == ["unitary", "reset", "unitary"]
    qc.measure_all()
    counts = Simulator(backend="zgemm", device="cpu", seed=1).run(qc, shots=100).counts
    assert set(counts) <= {"01", "11"} and sum(counts.values()) == 100


def test_opaque_gate_has_no_matrix():
    qc = QuantumCircuit(1)
    qc.append(Gate("blackbox", 1, []), [0])
    with pytest.raises(UnsupportedOperationError, match=r"instruction 0 \(blackbox\) has no "
                       "matrix"):
        from_qiskit(qc)
    wide = QuantumCircuit(1)
    wide.append(Gate("blackbox", 1, []), [0])
    qc = QuantumCircuit(1)
    qc.append(wide.to_gate(label="w"), [0])
    with pytest.raises(UnsupportedOperationError, match=r"instruction 0 \(circuit-\d+\) "
                       r"contains 'blackbox' which has no matrix"):
        from_qiskit(qc, max_composite_qubits=0)


# -- to_qiskit -----------------------------------------------------------------------------------
def test_to_qiskit_round_trip():
    circ = gates.brickwork(4, 3, 2, seed=5)
    circ.unitary(gates.rx(0.3), [1], name="rx", params=(0.3,))
    circ.unitary(gates.H, [0], name="rx", params=(0.3,))  # lying name: must stay a UnitaryGate
    circ.global_phase = 0.4
    circ.num_clbits, circ.cregs = 3, [("m", 2), ("k", 1)]
    circ.measure(0, 1)
    circ.reset(2)
    circ.barrier(0, 1)
    circ.unitary(gates.X, [3], name="x", condition=((0, 1), 2))
    circ.unitary(gates.Z, [3], name="z", condition=((2,), 1))
    qc = to_qiskit(circ)
    names = [i.operation.name for i in qc.data]
    assert names[:5] == ["unitary"] * 5 and names[5:] == [
        "rx", "unitary", "measure", "reset", "barrier", "if_else", "if_else"
    ]
    assert [r.name for r in qc.cregs] == ["m", "k"] and qc.global_phase == pytest.approx(0.4)
    back = from_qiskit(qc)
    assert [(op.kind, op.qubits, op.clbits, op.condition) for op in back.operations] == [
        (op.kind, op.qubits, op.clbits, op.condition) for op in circ.operations
    ]
    for a, b in zip(back.operations, circ.operations):
        if a.kind == "unitary":
            np.testing.assert_array_equal(a.matrix, b.matrix)


def test_to_qiskit_errors():
    circ = Circuit(2, 3)
    circ.unitary(gates.X, [0], condition=((0, 2), 1))
    with pytest.raises(ValueError, match=r"operation 0 \(unitary\): condition on clbits \(0, 2\) "
                       "that are neither a whole classical register nor a single bit"):
        to_qiskit(circ)
    circ = Circuit(1)
    circ.operations.append(Operation("weird", (0,)))
    with pytest.raises(ValueError, match="operation 0: unknown kind 'weird'"):
        to_qiskit(circ)


# -- OpenQASM 2 ----------------------------------------------------------------------------------
_LEGACY = """OPENQASM 2.0;
include "qelib1.inc";
qreg q[5];
U(0.1,0.2,0.3) q[0];
u(0.4,-0.5,0.6) q[1];
u3(1.1,2.2,-3.3) q[2];
u2(0.7,-0.8) q[3];
u1(0.9) q[4];
u0(3) q[0];
id q[1];
p(-1.2) q[2];
CX q[0],q[1];
cu1(0.3) q[1],q[3];
cu3(0.1,0.2,0.3) q[4],q[0];
cu(0.1,0.2,0.3,0.4) q[2],q[0];
crx(0.5) q[3],q[2]; cry(0.6) q[0],q[4]; crz(0.7) q[1],q[0];
ch q[2],q[1]; cy q[0],q[3]; cz q[4],q[2]; csx q[1],q[4]; swap q[0],q[4];
rxx(0.2) q[1],q[3]; rzz(0.3) q[0],q[2];
sx q[0]; sxdg q[1]; s q[2]; sdg q[3]; t q[4]; tdg q[0];
ccx q[0],q[1],q[2]; cswap q[3],q[0],q[4]; rccx q[4],q[2],q[0];
c3x q[0],q[1],q[2],q[3]; c3sqrtx q[4],q[3],q[2],q[1]; rc3x q[1],q[2],q[3],q[4];
c4x q[4],q[0],q[3],q[1],q[2];
"""


def test_qasm2_legacy_gates():
    circ = loads_qasm(_LEGACY)
    ref = qasm2.loads(_LEGACY, custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)
    np.testing.assert_allclose(circuit_unitary(circ), Operator(ref).data, rtol=0, atol=ATOL)
    ops = circ.operations
    np.testing.assert_array_equal(ops[0].matrix, gates.u3(0.1, 0.2, 0.3))  # U is u3
    np.testing.assert_array_equal(ops[1].matrix, gates.u3(0.4, -0.5, 0.6))  # so is u
    np.testing.assert_array_equal(ops[3].matrix, gates.u2(0.7, -0.8))
    assert [op.name for op in ops[:6]] == ["u", "u", "u3", "u2", "u1", "u0"]  # id dropped
    assert circ.name == "circuit"


def test_qasm2_conditional_reset_measure_and_registers():
    text = """OPENQASM 2.0;
include "qelib1.inc";
qreg q[2];
creg a[1];
creg c[2];
h q[0];
measure q[0] -> c[0];
if(c==1) x q[1];
reset q[0];
measure q -> c;
"""
    circ = loads_qasm(text)
    assert circ.cregs == [("a", 1), ("c", 2)]
    assert [(op.kind, op.name, op.qubits, op.clbits, op.condition) for op in circ.operations] == [
        ("unitary", "h", (0,), (), None),
        ("measure", "measure", (0,), (1,), None),
        ("unitary", "x", (1,), (), ((1, 2), 1)),
        ("reset", "reset", (0,), (), None),
        ("measure", "measure", (0,), (1,), None),
        ("measure", "measure", (1,), (2,), None),
    ]


def test_qasm2_custom_gate_is_one_operation(tmp_path):
    text = """// a comment before the header
OPENQASM 2.0;
include "qelib1.inc";
gate majority a,b,c { cx c,b; cx c,a; ccx a,b,c; }
qreg q[4];
majority q[3],q[0],q[2];
"""
    path = tmp_path / "maj.qasm"
    path.write_text(text)
    circ = load_qasm(path)
    assert circ.name == "maj" and [(op.name, op.qubits) for op in circ.operations] == [
        ("majority", (3, 0, 2))
    ]
    ref = qasm2.loads(text, custom_instructions=qasm2.LEGACY_CUSTOM_INSTRUCTIONS)
    np.testing.assert_allclose(circuit_unitary(circ), Operator(ref).data, rtol=0, atol=ATOL)


def test_qasm2_parse_error_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.qasm"
    bad.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2]; cx q[0] q[1];\n')
    with pytest.raises(QasmError, match=r"bad\.qasm:3: needed the end of the argument") as info:
        load_qasm(bad)
    assert info.value.path == str(bad) and info.value.line == 3
    assert "\n" not in str(info.value)
    # A missing ';' is reported where the parser meets the next token: the following line.
    bad.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2]\nh q[0];\n')
    with pytest.raises(QasmError, match=r"bad\.qasm:4: needed ';', but instead saw an identifier"):
        load_qasm(bad)
    with pytest.raises(QasmError, match=r"^<string>:4: 'foo' is not defined in this scope$"):
        loads_qasm('OPENQASM 2.0;\ninclude "qelib1.inc";\nqreg q[2];\nfoo q[0];\n')


def test_qasm2_error_in_included_file(tmp_path):
    (tmp_path / "mylib.inc").write_text("gate foo a {\n  h a;\n  bar a;\n}\n")
    main = tmp_path / "main.qasm"
    main.write_text('OPENQASM 2.0;\ninclude "qelib1.inc";\ninclude "mylib.inc";\nqreg q[1];\n')
    with pytest.raises(QasmError, match=r"mylib\.inc:3: 'bar' is not defined") as info:
        load_qasm(main)
    assert info.value.path == str(tmp_path / "mylib.inc")


def test_qasm2_error_without_position(monkeypatch):
    def fail(*args, **kwargs):
        raise qasm2.QASM2ParseError("something odd\nhappened")

    monkeypatch.setattr(qasm2, "loads", fail)
    with pytest.raises(QasmError, match=r"^<string>: something odd happened$"):
        loads_qasm("OPENQASM 2.0;")


@pytest.mark.skipif(not (QASMBENCH / "vqe_uccsd_n4.qasm").exists(), reason="no QASMBench copy")
def test_qasmbench_vqe_uccsd_fails_with_file_and_line():
    path = QASMBENCH / "vqe_uccsd_n4.qasm"
    with pytest.raises(QasmError, match=r"vqe_uccsd_n4\.qasm:225: 'q' is not defined") as info:
        load_qasm(path)
    assert info.value.line == 225


@pytest.mark.skipif(not QASMBENCH.exists(), reason="no QASMBench copy")
def test_qasmbench_files_load():
    for path in sorted(QASMBENCH.glob("*.qasm")):
        if path.name == "vqe_uccsd_n4.qasm":
            continue
        circ = load_qasm(path)
        assert circ.name == path.stem and circ.num_qubits == int(path.stem.rsplit("_n", 1)[1])


def test_load_qasm_unreadable(tmp_path):
    with pytest.raises(QasmError, match=r"nothere\.qasm: cannot read file: No such file"):
        load_qasm(tmp_path / "nothere.qasm")
    binary = tmp_path / "binary.qasm"
    binary.write_bytes(b"OPENQASM 2.0;\n\xff\xfe")
    with pytest.raises(QasmError, match=r"binary\.qasm: not a UTF-8 text file"):
        load_qasm(binary)


def test_unsupported_in_file_names_the_file(tmp_path):
    path = tmp_path / "loop.qasm"
    path.write_text(
        'OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[1] q;\nbit[1] c;\n'
        "c[0] = measure q[0];\nwhile (c[0]) { x q[0]; c[0] = measure q[0]; }\n"
    )
    with pytest.raises(UnsupportedOperationError, match=r"loop\.qasm: instruction 1 "
                       r"\(while_loop\)"):
        load_qasm(path)


# -- OpenQASM 3 ----------------------------------------------------------------------------------
_QASM3 = """OPENQASM 3.0;
include "stdgates.inc";
qubit[3] q;
bit[3] c;
U(0.1, 0.2, 0.3) q[0];
phase(0.4) q[1];
cphase(0.5) q[1], q[2];
cu(0.1, 0.2, 0.3, 0.4) q[2], q[0];
u2(0.3, 0.1) q[1];
CX q[0], q[2];
crx(0.2) q[0], q[1];
gate mine(a) x, y { rz(a) x; cx x, y; h y; }
mine(0.25) q[2], q[0];
"""


def test_qasm3_gates():
    circ = loads_qasm(_QASM3)
    assert circ.cregs == [("c", 3)]
    assert [op.name for op in circ.operations][-1] == "mine"
    np.testing.assert_allclose(
        circuit_unitary(circ), Operator(qasm3.loads(_QASM3)).data, rtol=0, atol=ATOL
    )


def test_qasm3_conditions_and_reset():
    text = _QASM3 + "c = measure q;\nif (c == 5) x q[1];\nif (c[1]) { h q[0]; }\nreset q[2];\n"
    circ = loads_qasm(text)
    tail = [(op.kind, op.qubits, op.condition) for op in circ.operations[-3:]]
    assert tail == [("unitary", (1,), ((0, 1, 2), 5)), ("unitary", (0,), ((1,), 1)),
                    ("reset", (2,), None)]


def test_qasm3_without_header_is_detected():
    circ = loads_qasm('include "stdgates.inc";\nqubit[2] q;\nh q[1];\n')
    assert [(op.name, op.qubits) for op in circ.operations] == [("h", (1,))]


@pytest.mark.parametrize(
    "text, pattern, line",
    [
        # syntax error caught by ANTLR's bail-out: the position of the offending token
        ('OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[2] q;\nh q[0]\ncx q[0], q[1];\n',
         r"^bad3\.qasm:5: syntax error at 'cx'$", 5),
        ("OPENQASM 3.0;\nqubit[1] q;\ngate g a {\n U(0, 0, 0) a;\n",
         r"^bad3\.qasm:5: syntax error at end of input$", 5),
        # ANTLR's own message, which it prints to stderr
        ("OPENQASM 3.0;\nqubit[2] q;\n\nh q[0) ;\n",
         r"^bad3\.qasm:4: no viable alternative at input '0\)'$", 4),
        # errors of the reference AST visitor ("L3:C0: ...") and of Qiskit's importer ("4,0: ...")
        ("OPENQASM 3.0;\nqubit[2] q;\nbreak;\n", r"^bad3\.qasm:3: 'break' statement outside loop$",
         3),
        ('OPENQASM 3.0;\ninclude "stdgates.inc";\nqubit[2] q;\nfoo q[0];\n',
         r"^bad3\.qasm:4: gate 'foo' is not defined\.$", 4),
    ],
)
def test_qasm3_errors(text, pattern, line, capfd):
    with pytest.raises(QasmError, match=pattern) as info:
        loads_qasm(text, path="bad3.qasm")
    assert info.value.line == line and info.value.path == "bad3.qasm"
    assert capfd.readouterr().err == ""  # ANTLR's stderr chatter is swallowed


def test_qasm3_errors_without_position(monkeypatch):
    def fail_plain(*args, **kwargs):
        raise qasm3.QASM3ImporterError("no position here")

    monkeypatch.setattr(qasm3, "loads", fail_plain)
    with pytest.raises(QasmError, match=r"^<string>: no position here$"):
        loads_qasm("OPENQASM 3.0;")

    def fail_internal(*args, **kwargs):
        raise KeyError("oops")

    monkeypatch.setattr(qasm3, "loads", fail_internal)
    with pytest.raises(QasmError, match=r"^<string>: OpenQASM 3 importer failed: KeyError: "
                       "'oops'$"):
        loads_qasm("OPENQASM 3.0;")


def test_missing_dependencies(monkeypatch):
    monkeypatch.setitem(sys.modules, "qiskit_qasm3_import", None)
    with pytest.raises(ozsim.MissingDependencyError, match="needs qiskit-qasm3-import"):
        loads_qasm("OPENQASM 3.0;\nqubit[1] q;\n")
    monkeypatch.setitem(sys.modules, "qiskit", None)
    with pytest.raises(ozsim.MissingDependencyError, match="this feature needs Qiskit"):
        loads_qasm("OPENQASM 2.0;\n")


# -- the example circuits ------------------------------------------------------------------------
_EXAMPLES = {
    "brickwork_n12_d2_L10": lambda: gates.brickwork(12, 10, 2, seed=2012),
    "brickwork_n12_d4_L8": lambda: gates.brickwork(12, 8, 4, seed=4012),
    "qft_n16": lambda: gates.qft(16),
    "ghz_n20": lambda: gates.ghz(20),
}


@pytest.mark.parametrize("stem", sorted(_EXAMPLES))
def test_example_circuit_files(stem):
    path = REPO / "circuits" / f"{stem}.qasm"
    assert path.stat().st_size < 1 << 20
    assert path.read_text().startswith("// Generated by circuits/make_circuits.py:")
    circ = load_qasm(path)
    ref = _EXAMPLES[stem]()
    assert circ.num_gates == ref.num_gates
    assert [op.qubits for op in circ.gates] == [op.qubits for op in ref.gates]
    assert circ.count_ops()["measure"] == circ.num_qubits
    a, b = _state(circ), _state(ref)
    overlap = np.vdot(b, a)  # the QASM export drops each gate's global phase
    np.testing.assert_allclose(a, b * overlap / abs(overlap), rtol=0, atol=1e-10)


def test_example_circuits_all_load():
    files = sorted((REPO / "circuits").glob("*.qasm"))
    assert len(files) == 7
    for path in files:
        assert load_qasm(path).num_qubits == int(path.stem.split("_")[1][1:])


# -- import hygiene ------------------------------------------------------------------------------
def test_import_does_not_load_qiskit():
    code = (
        "import sys, ozsim, ozsim.gates, ozsim.interop, ozsim.interop.qiskit\n"
        "bad = [m for m in ('qiskit', 'cupy') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
