"""``backend="auto"``: each fused block runs through the scheme with the lowest modelled cost.

Which scheme is fastest depends on the device, the block's qubit count d and the state's size:
on a CPU native ZGEMM wins at every d (no INT8 units), on a GPU the one-pass kernels and the
GEMM paths cross at different d per scheme. :class:`AutoPlan` holds the cost model of each
candidate on the device (:func:`ozsim.calibration.cost_model`: the registry's defaults, or this
machine's ``ozsim calibrate`` table where one is cached) and answers two questions with them:

- fusion: a block of d qubits costs the cheapest candidate's time (:meth:`AutoPlan.gate_time`),
  so the block size is chosen for the scheme that will run it;
- the engine: block by block, which candidate runs it (:meth:`AutoPlan.choose`).

The candidates are the auto variants of every registered scheme (``zgemm``, ``int8-auto``,
``int8-crt-auto``), each at the run's threshold ``T``: each one meets ``T`` by its own rule
(native ZGEMM trivially; scheme I by its mean mantissa loss, scheme II by its error bound against
FP64's, each with a native fallback where no split or moduli count does), so the choice among them is by cost alone. Fixed
counts (``int8x{s}``, ``int8-crt{N}``) are not candidates: they promise no accuracy. The choice
depends only on the cost table, the device, N and d, so a run repeats exactly on the same device
with the same table; ``Result.metadata["auto"]["table"]`` names the table.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gemm.cost import CostModel

__all__ = ["AUTO", "CANDIDATES", "DEFAULT_BACKEND", "AutoPlan", "is_auto", "plan"]

#: The backend name.
AUTO = "auto"
#: The backend a Simulator, the CLI, OzsimBackend and the primitives use when none is named.
DEFAULT_BACKEND = AUTO
#: The candidates, in the order ties are broken (native first).
CANDIDATES = ("zgemm", "int8-auto", "int8-crt-auto")


def is_auto(backend) -> bool:
    """Whether ``backend`` names :data:`AUTO` (case and surrounding blanks ignored)."""
    return isinstance(backend, str) and backend.strip().lower() == AUTO


@dataclass(frozen=True)
class AutoPlan:
    """The candidates' cost models on one device (fusion reads it as a cost model).

    Attributes:
        models: ``((backend name, CostModel), ...)`` in :data:`CANDIDATES` order.
        table: the cost table in use: ``"registry defaults"`` or ``"calibrated (<path>)"``.
    """

    models: tuple[tuple[str, CostModel], ...]
    table: str

    @property
    def max_limit(self) -> int:
        """The largest block size any candidate's model considers."""
        return max(m.max_limit for _, m in self.models)

    def gate_time(self, num_qubits: int, d: int) -> float:
        """Modelled seconds of a d-qubit block on ``num_qubits`` qubits: the cheapest candidate's."""
        return self.choose(num_qubits, d)[1]

    def choose(self, num_qubits: int, d: int) -> tuple[str, float]:
        """``(backend, modelled seconds)`` of the cheapest candidate for a d-qubit block (ties
        to the earlier candidate)."""
        best = None
        for name, model in self.models:
            t = model.gate_time(num_qubits, d)
            if best is None or t < best[1]:
                best = (name, t)
        return best


def plan(device: str, tag: str | None = None) -> AutoPlan:
    """The :class:`AutoPlan` of ``device`` (``"cpu"`` or ``"gpu"``), with the calibrated costs of
    the machine (``tag``: :func:`ozsim.calibration.device_tag`, found from ``device`` if None)."""
    from .calibration import cache_path, cost_model, device_tag

    models, calibrated = [], False
    for name in CANDIDATES:
        model, cal = cost_model(device, name, tag)
        models.append((name, model))
        calibrated = calibrated or cal
    table = (f"calibrated ({cache_path(tag or device_tag(device))})" if calibrated
             else "registry defaults")
    return AutoPlan(tuple(models), table)
