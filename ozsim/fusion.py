"""Gate fusion: merge runs of small gates into blocks of at most ``max_fused_qubits`` qubits.

A GEMM engine gains from fusion twice: fewer passes over the state (every gate costs at least one
read and one write of all ``2**N`` amplitudes) and larger, more efficient GEMMs (``k = 2**d``).

Algorithm (greedy, order-preserving up to provable commutation):
    Walk the operations in order, appending *items* (fused blocks or single operations) and
    remembering, for every qubit, the last item that touches it. A gate on qubits Q goes into
    ``b``, the latest of the items last touching Q, when ``b`` is a fusable block and the union
    stays within ``max_fused_qubits``: nothing after ``b`` touches Q, so the gate commutes past
    everything emitted after ``b``. Earlier blocks that are still the last item on all of their
    qubits commute forward to ``b`` the same way and are merged too when the union allows. Any
    other gate starts a new item. Measurements, resets, classically conditioned gates and gates
    larger than the limit are never merged (their items are not fusable); barriers are dropped
    (they do nothing to a state). For every qubit the operations touching it keep their order,
    and operations are only moved past operations on other qubits (which commute: a unitary
    writes no classical bit), so the fused circuit is the same map.
    Block matrices are products of the gate matrices in complex128 (one rounding per product).

    With a cost model, a second pass merges neighbouring items that the first leaves apart:
    two fusable items whose union stays within the limit, with nothing between them touching
    the qubits of the one that moves (so it commutes there), become one block where the model
    prices the union below the two (a memory-bound one-pass gate costs nearly the same at
    every small d, so two small blocks on other qubits cost about twice one larger block:
    QV-30's 2- and 3-qubit leftovers, H200 int8-auto costs, 3.94 -> 3.85 s modelled). Sweeps
    repeat, the largest gain of each item first, until nothing merges.

Cost model (:class:`~ozsim.gemm.cost.CostModel`), used when ``max_fused_qubits`` is not given: a
d-qubit gate on N qubits costs ``max(passes * 32 * 2**N / bandwidth, 8 * 2**(N+d) / gemm_rate) +
overhead`` seconds (memory traffic of its passes over the state versus the flops of the ZGEMM
``(2**d x 2**d) @ (2**d x 2**(N-d))``); every limit 1..``max_limit`` is planned and the one with
the smallest modelled total time wins. Each scheme's constants per device are in its entry of
:mod:`ozsim.gemm.registry`, with where each number comes from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .circuit import Circuit, Operation
from .gemm import registry
from .gemm.cost import CostModel

__all__ = [
    "CostModel",
    "FusionReport",
    "block_matrix",
    "choose_max_fused_qubits",
    "fuse",
    "plan_fusion",
]


def cost_model(device: str, backend: str) -> CostModel:
    """The cost model of ``backend``'s scheme on ``device`` (``"cpu"``/``"gpu"``), from the
    backend registry (:func:`ozsim.gemm.registry.cost_model`)."""
    return registry.cost_model(device, backend)


@dataclass(frozen=True)
class FusionReport:
    """What fusion did.

    Attributes:
        max_fused_qubits: the limit used (0: fusion off).
        gates_in: unitary operations before fusion.
        blocks: size in qubits of each emitted unitary, in order.
        chosen_by: ``"user"``, ``"cost model"`` or, where two state buffers do not fit the
            GPU, ``"cost model, at most d qubits: ..."`` (the one-pass range: blocks in place).
    """

    max_fused_qubits: int
    gates_in: int
    blocks: tuple[int, ...]
    chosen_by: str

    def as_dict(self) -> dict:
        sizes: dict[int, int] = {}
        for b in self.blocks:
            sizes[b] = sizes.get(b, 0) + 1
        return {
            "max_fused_qubits": self.max_fused_qubits,
            "chosen_by": self.chosen_by,
            "gates_in": self.gates_in,
            "blocks_out": len(self.blocks),
            "block_sizes": dict(sorted(sizes.items())),
            "blocks": list(self.blocks),
        }


def plan_fusion(ops: list[Operation], max_fused_qubits: int,
                gate_cost=None) -> list[tuple[int, ...]]:
    """Group operation indices into emitted items (the algorithm of the module docstring).

    Args:
        ops: a circuit's operations.
        max_fused_qubits: largest block (>= 1).
        gate_cost: ``gate_cost(d) -> seconds`` of a d-qubit block, or ``None``: with it, the
            second pass merges neighbouring items where it lowers the total (module docstring).

    Returns:
        Items in emission order; each a tuple of indices into ``ops``: several unitary indices form
        a fused block, a single index is emitted as that operation. Barriers are left out.
    """
    items: list[list] = []  # [qubits set, op indices, fusable, alive]
    last: dict[int, int] = {}  # qubit -> index of the last item touching it

    def frontier(c: int) -> bool:
        return all(last[q] == c for q in items[c][0])

    for i, op in enumerate(ops):
        if op.kind == "barrier":
            continue
        qs = set(op.qubits)
        fusable = op.kind == "unitary" and op.condition is None
        target = None
        moved: set[int] = set()
        cands = sorted({last[q] for q in qs if q in last})
        if fusable and cands and items[cands[-1]][2]:
            b = cands[-1]
            movable = [c for c in cands[:-1] if items[c][2] and frontier(c)]
            full = qs.union(items[b][0], *(items[c][0] for c in movable))
            if len(full) <= max_fused_qubits:
                for c in movable:  # c commutes forward to b: nothing between touches its qubits
                    items[b][1][:0] = items[c][1]
                    items[b][0] |= items[c][0]
                    moved |= items[c][0]
                    items[c][3] = False
                target = b
            elif len(qs | items[b][0]) <= max_fused_qubits:
                target = b
        if target is None:
            items.append([set(qs), [], fusable and len(qs) <= max_fused_qubits, True])
            target = len(items) - 1
        items[target][0] |= qs
        items[target][1].append(i)
        for q in qs | moved:  # b's other qubits may have later items: leave them
            last[q] = target
    kept = [item for item in items if item[3]]
    if gate_cost is not None:
        kept = _merge_neighbours(kept, max_fused_qubits, gate_cost)
    return [tuple(item[1]) for item in kept]


#: Items the second fusion pass looks past on each side of an item.
_MERGE_WINDOW = 64


def _merge_neighbours(items: list[list], limit: int, gate_cost) -> list[list]:
    """The second pass of :func:`plan_fusion` on its items ``[qubits, op indices, fusable,
    alive]``: item j joins the item t before it (its operations after t's) or after it (before
    t's) with the largest modelled gain ``cost(t) + cost(j) - cost(t | j) > 0``, where no item
    between them touches j's qubits (and at most :data:`_MERGE_WINDOW` items lie between) and
    the union has at most ``limit`` qubits."""
    cost = {}

    def c(d: int) -> float:
        if d not in cost:
            cost[d] = gate_cost(d)
        return cost[d]

    changed = True
    while changed:
        changed = False
        j = 0
        while j < len(items):
            qj = items[j][0]
            best = None
            if items[j][2]:
                for step in (-1, 1):  # the items before j, then after, up to one touching qj
                    t = j + step  # (within _MERGE_WINDOW items: bounded work on long circuits)
                    while 0 <= t < len(items) and abs(t - j) <= _MERGE_WINDOW:
                        qt = items[t][0]
                        if items[t][2] and len(qt | qj) <= limit:
                            gain = c(len(qt)) + c(len(qj)) - c(len(qt | qj))
                            if gain > 1e-12 * c(len(qt | qj)) and (best is None or gain > best[0]):
                                best = (gain, t)
                        if qt & qj:
                            break
                        t += step
            if best is None:
                j += 1
                continue
            t = best[1]
            items[t][1] = items[t][1] + items[j][1] if t < j else items[j][1] + items[t][1]
            items[t][0] = items[t][0] | qj
            del items[j]
            changed = True
    return items


def block_matrix(ops: list[Operation], qubits: tuple[int, ...]) -> np.ndarray:
    """The unitary of ``ops`` (applied in order) on ``qubits``, little-endian over ``qubits``.

    Args:
        ops: unitary operations whose qubits lie in ``qubits``.
        qubits: the block's qubits; bit j of the result's index is ``qubits[j]``.

    Returns:
        ``(2**b, 2**b)`` complex128, ``b = len(qubits)``: the product, rounded in complex128.
    """
    b = len(qubits)
    pos = {q: j for j, q in enumerate(qubits)}
    u = np.eye(1 << b, dtype=np.complex128).reshape((2,) * b + (1 << b,))
    for op in ops:
        d = op.num_qubits
        # axis of local bit j in u's tensor: axes run most significant first
        axes = [b - 1 - pos[q] for q in reversed(op.qubits)]
        g = op.matrix.reshape((2,) * (2 * d))
        u = np.tensordot(g, u, axes=(list(range(d, 2 * d)), axes))
        u = np.moveaxis(u, list(range(d)), axes)
    return np.ascontiguousarray(u.reshape(1 << b, 1 << b))


def choose_max_fused_qubits(circuit: Circuit, model: CostModel) -> int:
    """The limit with the smallest modelled run time (of equally cheap plans the smallest limit;
    a larger limit that yields the very same plan is reported instead)."""
    ops = circuit.operations
    n = circuit.num_qubits
    best, best_time, best_plan = 1, np.inf, None

    def gate_cost(d: int) -> float:
        return model.gate_time(n, d)

    for limit in range(1, min(model.max_limit, n) + 1):
        total = 0.0
        plan = plan_fusion(ops, limit, gate_cost)
        for item in plan:
            if ops[item[0]].kind != "unitary":
                continue
            d = len(set().union(*(ops[i].qubits for i in item)))
            total += model.gate_time(n, d)
        # a strictly cheaper plan wins; the same plan under a larger limit is reported with it
        if total < best_time * (1 - 1e-9) or plan == best_plan:
            best, best_time, best_plan = limit, min(total, best_time), plan
    return best


def fuse(
    circuit: Circuit, max_fused_qubits: int | None = None, model: CostModel | None = None
) -> tuple[Circuit, FusionReport]:
    """Fuse ``circuit``'s gates into blocks of at most ``max_fused_qubits`` qubits.

    Args:
        circuit: the circuit (left unchanged).
        max_fused_qubits: the limit (>= 1), 0 to switch fusion off, or ``None`` to let ``model``
            choose (:func:`choose_max_fused_qubits`).
        model: the cost model, required when ``max_fused_qubits`` is ``None``.

    Returns:
        ``(fused circuit, report)``. The fused circuit has the same qubits, classical bits,
        registers, global phase and non-unitary operations; fused blocks are named ``"fused"``
        and act on their qubits in ascending order.

    Raises:
        ValueError: ``max_fused_qubits < 0``, or ``None`` without a model.
    """
    gates_in = circuit.num_gates
    if max_fused_qubits is None:
        if model is None:
            raise ValueError("max_fused_qubits=None needs a cost model")
        limit, chosen_by = choose_max_fused_qubits(circuit, model), "cost model"
    else:
        if int(max_fused_qubits) != max_fused_qubits or max_fused_qubits < 0:
            raise ValueError(f"max_fused_qubits must be an integer >= 0, got {max_fused_qubits!r}")
        limit, chosen_by = int(max_fused_qubits), "user"
    if limit == 0:
        blocks = tuple(op.num_qubits for op in circuit.operations if op.kind == "unitary")
        return circuit, FusionReport(0, gates_in, blocks, chosen_by)
    ops = circuit.operations
    fused = Circuit(
        circuit.num_qubits,
        circuit.num_clbits,
        name=circuit.name,
        global_phase=circuit.global_phase,
        cregs=list(circuit.cregs),
    )
    sizes = []
    n = circuit.num_qubits
    gate_cost = None if model is None else (lambda d: model.gate_time(n, d))
    for item in plan_fusion(ops, limit, gate_cost):
        if len(item) == 1:
            fused.operations.append(ops[item[0]])
            if ops[item[0]].kind == "unitary":
                sizes.append(ops[item[0]].num_qubits)
            continue
        members = [ops[i] for i in item]
        qubits = tuple(sorted(set().union(*(op.qubits for op in members))))
        fused.operations.append(
            Operation("unitary", qubits, block_matrix(members, qubits), name="fused")
        )
        sizes.append(len(qubits))
    return fused, FusionReport(limit, gates_in, tuple(sizes), chosen_by)
