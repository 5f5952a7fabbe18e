"""Gate fusion: exactness of the plan and of block matrices, and the brickwork round trip."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import qiskit.qasm2
from qiskit import QuantumCircuit, transpile
from qiskit.quantum_info import Operator, Statevector

from ozsim import Circuit, gates
from ozsim.fusion import (
    block_matrix,
    choose_max_fused_qubits,
    cost_model,
    fuse,
    plan_fusion,
)
from ozsim.gemm.registry import SCHEMES
from ozsim.interop.qiskit import from_qiskit, loads_qasm, to_qiskit
from ozsim.simulator import Simulator
from ozsim.testing import phase_aligned


def _random_circuit(rng, n, num_gates, measure_mid=False):
    c = Circuit(n, n)
    for _ in range(num_gates):
        d = int(rng.integers(1, 4))
        qs = [int(q) for q in rng.permutation(n)[:d]]
        c.unitary(gates.haar_unitary(2**d, rng), qs)
        if rng.random() < 0.1:
            c.barrier(*qs)
    return c


@pytest.mark.parametrize("seed", range(8))
def test_fusion_never_changes_the_state(seed):
    rng = np.random.default_rng(seed)
    c = _random_circuit(rng, 7, 40)
    limit = int(rng.integers(1, 8))
    ref = Simulator(backend="zgemm", device="cpu", max_fused_qubits=0).run(c).statevector
    res = Simulator(backend="zgemm", device="cpu", max_fused_qubits=limit).run(c)
    assert res.metadata["fusion"]["max_fused_qubits"] == limit
    assert max(res.metadata["fusion"]["block_sizes"]) <= max(limit, 3)
    assert np.max(np.abs(res.statevector - ref)) < 1e-12  # global phase kept too


def test_block_matrix_matches_qiskit_operator():
    rng = np.random.default_rng(10)
    ops = []
    qc = QuantumCircuit(4)
    c = Circuit(6)
    block_qubits = (5, 1, 3, 4)  # any order: bit j of the result is block_qubits[j]
    for _ in range(10):
        d = int(rng.integers(1, 4))
        qs = [int(q) for q in rng.choice(block_qubits, size=d, replace=False)]
        ops.append(c.unitary(gates.haar_unitary(2**d, rng), qs))
        qc.unitary(ops[-1].matrix, [block_qubits.index(q) for q in qs])
    np.testing.assert_allclose(block_matrix(ops, block_qubits), Operator(qc).data, atol=1e-13)


def _assert_plan_keeps_order_and_fences(ops, items, limit: int, num_qubits: int):
    """Every non-barrier operation once; each qubit's operations in circuit order; only
    unconditional unitaries fused, within ``limit`` qubits."""
    flat = [i for item in items for i in item]
    assert sorted(flat) == [i for i, op in enumerate(ops) if op.kind != "barrier"]
    for q in range(num_qubits):
        seq = [i for i in flat if q in ops[i].qubits]
        assert seq == sorted(seq), f"qubit {q} reordered at limit {limit}"
    for item in items:
        if len(item) > 1:
            assert all(ops[i].kind == "unitary" and ops[i].condition is None for i in item)
            assert len(set().union(*(ops[i].qubits for i in item))) <= limit


def test_plan_keeps_per_qubit_order_and_fences():
    rng = np.random.default_rng(11)
    c = _random_circuit(rng, 6, 30)
    c.measure(2, 2)
    c.unitary(gates.X, [2], name="x", condition=((2,), 1))
    c.unitary(gates.H, [0], name="h")
    c.reset(4)
    ops = c.operations
    for limit in range(1, 7):
        _assert_plan_keeps_order_and_fences(ops, plan_fusion(ops, limit), limit, 6)


@pytest.mark.parametrize("seed", range(6))
def test_second_pass_merges_neighbours_where_cheaper_and_keeps_the_map(seed):
    """plan_fusion's second pass (gate_cost given): every qubit's operations keep their order,
    measurements, resets and conditional gates stay single items, blocks stay within the limit;
    under a flat cost it leaves fewer blocks than the greedy pass and the fused circuit is the
    same map (state vectors of the unfused and fused circuits); under a cost that grows 4x a
    qubit the modelled total is never above the greedy plan's and no block grows past it."""
    rng = np.random.default_rng(100 + seed)
    c = _random_circuit(rng, 7, 40)
    c.measure(3, 3)
    c.unitary(gates.X, [5], name="x", condition=((3,), 1))
    for _ in range(10):
        q = int(rng.integers(7))
        c.unitary(gates.haar_unitary(2, rng), [q])
    c.reset(0)
    ops = c.operations
    for limit in (2, 3, 4, 5):
        greedy = plan_fusion(ops, limit)
        items = plan_fusion(ops, limit, lambda d: 1.0 + 0.01 * d)
        _assert_plan_keeps_order_and_fences(ops, items, limit, 7)
        assert len(items) < len(greedy)

        def total(plan, cost):
            return sum(cost(len(set().union(*(ops[i].qubits for i in item)))) for item in plan
                       if ops[item[0]].kind == "unitary")

        steep = plan_fusion(ops, limit, lambda d: 4.0**d)  # (only merges into a larger block)
        assert total(steep, lambda d: 4.0**d) <= total(greedy, lambda d: 4.0**d)
        assert max(len(set().union(*(ops[i].qubits for i in it))) for it in steep) <= \
            max(len(set().union(*(ops[i].qubits for i in it))) for it in greedy)
    unitary = Circuit(7)
    for op in ops:
        if op.kind == "unitary" and op.condition is None:
            unitary.operations.append(op)
    flat_model = replace(cost_model("gpu", "zgemm"), one_pass_passes=(1.0,) * 6)
    fused, report = fuse(unitary, 4, flat_model)
    assert len(report.blocks) <= len(fuse(unitary, 4)[1].blocks)
    ref = Simulator(backend="zgemm", device="cpu", max_fused_qubits=0).run(unitary).statevector
    got = Simulator(backend="zgemm", device="cpu", max_fused_qubits=0).run(fused).statevector
    assert np.max(np.abs(got - ref)) < 1e-12


def test_brickwork_qasm_roundtrip_fuses_back():
    """A brickwork of 4-qubit Haar unitaries, exported to u/cx QASM and read back, fuses into no
    more blocks than it had unitaries and matches the unfused run within 1e-12."""
    circ = gates.brickwork(8, depth=4, gate_qubits=4, seed=5)
    qc = transpile(to_qiskit(circ), basis_gates=["u", "cx"], optimization_level=0)
    text = qiskit.qasm2.dumps(qc)
    back = loads_qasm(text)
    assert back.num_gates > 10 * circ.num_gates  # arrives unfused
    _, report = fuse(back, 4)
    assert len(report.blocks) <= circ.num_gates
    ref = Simulator(backend="zgemm", device="cpu", max_fused_qubits=0).run(back).statevector
    for backend in ("zgemm", "int8-auto"):
        psi = Simulator(backend=backend, device="cpu", max_fused_qubits=4).run(back).statevector
        np.testing.assert_allclose(phase_aligned(psi, ref), ref, atol=1e-12)
    orig = Statevector(to_qiskit(circ)).data
    np.testing.assert_allclose(phase_aligned(ref, orig), orig, atol=1e-12)


def test_cost_model_choices():
    qft = from_qiskit(transpile(_qft(16), basis_gates=["h", "cp", "swap"], optimization_level=0))
    for scheme in SCHEMES:
        for device, model in scheme.costs.items():
            limit = choose_max_fused_qubits(qft, model)
            assert 2 <= limit <= model.max_limit, (scheme.key, device)
    # fusing is what the model prefers over one GEMM per gate on a QFT
    cpu = cost_model("cpu", "int8-auto")
    assert choose_max_fused_qubits(qft, cpu) > 1
    res = Simulator(device="cpu").run(qft)
    assert res.metadata["fusion"]["chosen_by"] == "cost model"
    assert res.metadata["fusion"]["blocks_out"] < qft.num_gates


def _qft(n):
    from qiskit.synthesis.qft import synth_qft_full

    return synth_qft_full(n)


def test_fuse_rejects_bad_limits():
    c = Circuit(2)
    with pytest.raises(ValueError, match="max_fused_qubits must be an integer >= 0"):
        fuse(c, -2)
    with pytest.raises(ValueError, match="needs a cost model"):
        fuse(c, None)


def test_gpu_cost_model_keeps_quantum_volume_in_one_pass_blocks():
    """zgemm's GEMM path costs about 3.8 passes a gate on the GPU (transposing copy, cuBLAS,
    ping-pong: 3.76 measured on QV-30's 7-qubit blocks, H200); priced at 2, with the m8n8k4
    one-pass kernel's costs (1.55, 2.78 passes at d = 5, 6), fusion chose 7-qubit GEMM blocks
    for QV-30 and ran it in 2.6 s instead of 1.5 s with one-pass blocks of at most 4 qubits
    (benchmarks/RESULTS.md, section 3)."""
    from dataclasses import replace

    from ozsim.gates.haar import haar_unitary

    rng = np.random.default_rng(7)
    qv = Circuit(30, 0)
    for _ in range(30):  # quantum volume: a random pairing and an SU(4) a pair, 30 layers
        perm = rng.permutation(30)
        for j in range(15):
            qv.unitary(haar_unitary(4, rng), (int(perm[2 * j]), int(perm[2 * j + 1])))
    model = cost_model("gpu", "zgemm")
    limit = choose_max_fused_qubits(qv, model)
    assert 3 <= limit <= model.one_pass_qubits
    m8n8k4 = model.one_pass_passes[:4] + (1.55, 2.78)
    assert choose_max_fused_qubits(qv, replace(model, passes=2, one_pass_qubits=6,
                                                one_pass_passes=m8n8k4)) > 6
