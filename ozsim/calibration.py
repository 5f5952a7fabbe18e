"""``ozsim calibrate``: measured gate costs per backend and device, cached for fusion.

Fusion picks block sizes from each scheme's cost model (:mod:`ozsim.gemm.registry`); the
shipped models are calibrated on one machine of each kind. ``calibrate`` measures, on this
machine, the time of one d-qubit gate through :meth:`ozsim.statevector.StateVector.apply` for
each backend and ``d``, divides it by the state's amplitudes (gate times grow with ``2**N``
once the state leaves the caches) and writes the table to the user's cache directory
(``$XDG_CACHE_HOME/ozsim`` or ``~/.cache/ozsim``), one file per device. Later runs on the same
device plan fusion with the measured costs (:func:`cost_model`); the fusion report then says
``"cost model (calibrated)"``.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from .gemm import registry
from .gemm.cost import CostModel

__all__ = ["cache_path", "calibrate", "cost_model", "device_tag", "load"]

FORMAT = 1


def device_tag(device: str) -> str:
    """``"cpu"``, or the GPU's name as a file-name tag (``"nvidia-h100-80gb-hbm3"``)."""
    if device == "cpu":
        return "cpu"
    import cupy

    name = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "gpu"


def cache_path(tag: str) -> Path:
    """The calibration file of a device tag."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ozsim"
    return root / f"costs-{tag}.json"


def load(tag: str) -> dict | None:
    """The cached table ``{backend: {d: seconds per amplitude}}`` of a device, or ``None``."""
    path = cache_path(tag)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if doc.get("format") != FORMAT:
        return None
    return {b: {int(d): float(t) for d, t in row.items()} for b, row in doc["costs"].items()}


def cost_model(device: str, backend: str, tag: str | None = None,
               precision: str = "double") -> tuple[CostModel, bool]:
    """``(model, calibrated)``: the registry's model for ``backend`` on ``device``, with this
    device's measured costs where ``ozsim calibrate`` has cached them (double precision; the
    single-precision backends keep the registry's model)."""
    model = registry.cost_model(device, backend, precision)
    if precision != "double":
        return model, False
    table = load(tag or device_tag(device))
    name = registry.parse(backend).name
    if not table or name not in table:
        return model, False
    return replace(model, measured=tuple(sorted(table[name].items()))), True


def calibrate(device: str, backends: list[str], num_qubits: int, max_gate_qubits: int,
              reps: int = 3, seed: int = 1, write: bool = True) -> dict:
    """Measure ``{backend: {d: seconds per amplitude}}`` and cache it (``write``).

    Args:
        device: ``"cpu"`` or ``"gpu"`` (a usable one: ``ozsim calibrate`` resolves ``"auto"``
            and checks the GPU with :func:`ozsim.simulator.get_array_module`).
        backends: backend names (:func:`ozsim.gemm.registry.parse`).
        num_qubits: N of the state measured on (>= max_gate_qubits + 1).
        max_gate_qubits: d runs over ``1..max_gate_qubits``.
        reps: timed applications per entry (the median is kept), after one untimed.

    Returns:
        The table; the file is :func:`cache_path` of the device's tag.

    Raises:
        ValueError: an unknown backend, or ``num_qubits <= max_gate_qubits``.
    """
    from .gates.haar import haar_unitary
    from .statevector import StateVector

    if num_qubits <= max_gate_qubits or max_gate_qubits < 1:
        raise ValueError(f"need 1 <= max_gate_qubits < num_qubits, got {max_gate_qubits} and "
                         f"{num_qubits}")
    names = [registry.parse(b).name for b in backends]
    if device not in ("cpu", "gpu"):
        raise ValueError(f"device must be 'cpu' or 'gpu' (resolve 'auto' first), got {device!r}")
    if device == "gpu":  # pragma: no cover - GPU
        import cupy as xp
    else:
        xp = np
    dev = device
    rng = np.random.default_rng(seed)
    sv = StateVector(num_qubits, xp)
    psi = rng.standard_normal(1 << num_qubits) + 1j * rng.standard_normal(1 << num_qubits)
    sv._buf[...] = xp.asarray(psi / np.linalg.norm(psi))
    table: dict[str, dict[int, float]] = {}
    for name in names:
        table[name] = {}
        for d in range(1, max_gate_qubits + 1):
            gate = registry.parse(name).scheme.prepare(xp.asarray(haar_unitary(1 << d, rng)))
            sets = [tuple(int(q) for q in rng.choice(num_qubits, d, replace=False))
                    for _ in range(reps + 1)]
            times = []
            for i, qubits in enumerate(sets):
                if xp is not np:
                    xp.cuda.Device().synchronize()
                t0 = time.perf_counter()
                sv.apply(gate, qubits, backend=name, T=1.0)
                if xp is not np:
                    xp.cuda.Device().synchronize()
                if i:
                    times.append(time.perf_counter() - t0)
            table[name][d] = float(np.median(times)) / 2.0**num_qubits
    if write:
        path = cache_path(device_tag(dev))
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"format": FORMAT, "device": device_tag(dev),
                                   "num_qubits": num_qubits, "costs": table}, indent=1))
        os.replace(tmp, path)
    return table
