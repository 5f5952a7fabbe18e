"""Amplitude accuracy against the double-double reference: the metrics behind ``ozsim check``.

:func:`check` runs one circuit with each requested backend (through
:class:`~ozsim.simulator.Simulator`) and once in double-double
(:func:`ozsim.reference.dd_statevector`, always on the CPU), and returns a :class:`CheckReport`
of one :class:`CheckRow` per backend. Both runs start from the same parsed
:class:`~ozsim.Circuit`, so gates and global phase are identical (a QASM round trip would change
the global phase).

Metrics (:func:`state_errors`), for a computed state ``psi`` and the reference ``r`` (both
``2**N`` amplitudes, ``r`` double-double):

``re0``
    ``|Re psi_0 - Re r_0| / |Re r_0|``: the relative error of the real part of amplitude
    ``|0...0>``, the metric of the ozIMMU paper's quantum-circuit experiment. NaN when
    ``Re r_0 == 0`` (the ratio is undefined; :attr:`StateErrors.note` says so).
``max_rel``
    ``max_i |psi_i - r_i| / |r_i|`` over the amplitudes with ``|r_i| >= floor``, where
    ``floor = floor_factor * ||r|| / sqrt(2**N)`` (default ``floor_factor`` = 1e-3). Why: any
    method with a normwise error ``e`` has absolute errors about ``e * ||r|| / sqrt(2**N)`` per
    amplitude, so amplitudes far below the typical size ``||r|| / sqrt(2**N)`` have relative errors
    set by their smallness, not by the method; and exact zeros (GHZ, QFT of a basis state) have
    none at all. For a Haar-random state ``2**N |r_i|**2`` is Exp(1) distributed (Porter-Thomas),
    so the floor leaves out a fraction ``1 - exp(-1e-6)`` ~ 1e-6 of the amplitudes: the metric
    covers essentially all of them while staying finite. The number counted is reported.
``normwise``
    ``||psi - r|| / ||r||`` (2-norms, no phase alignment: the runs share their global phase).
``infidelity``
    ``1 - F`` with ``F = |<r|psi>|**2 / (<r|r> <psi|psi>)``, the fidelity of the two pure states.
    Computed without cancellation as ``||psi_perp||**2 / ||psi||**2``, ``psi_perp = psi - c r``,
    ``c = <r|psi> / <r|r>`` (the part of ``psi`` orthogonal to ``r``): ``1 - |<r|psi>|**2``
    evaluated directly loses everything below 1e-16, while FP64 runs land near 1e-26. A norm
    drift of ``psi`` does not count here (it shows in ``normwise``).

Differences ``psi - r`` are formed as ``(psi - r.hi) - r.lo`` in float64: ``psi - r.hi`` is exact
or nearly so (the two agree to ~13 digits), so each metric is accurate to a few digits, far more
than the comparison needs.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .reference import DDComplex, check_reference_fits, dd_statevector, final_state_gates

__all__ = [
    "DEFAULT_FLOOR_FACTOR",
    "StateErrors",
    "state_errors",
    "amplitude_floor",
    "BackendSpec",
    "parse_backend_specs",
    "CheckRow",
    "CheckReport",
    "check",
]

#: Default ``floor_factor`` of :func:`state_errors` (see the module docstring).
DEFAULT_FLOOR_FACTOR = 1e-3


@dataclass(frozen=True)
class StateErrors:
    """Errors of one computed state against the double-double reference (module docstring).

    Attributes:
        re0: relative error of ``Re <0...0|psi>``; NaN when the reference's is exactly 0.
        max_rel: largest relative error over amplitudes with ``|r_i| >= floor``.
        normwise: ``||psi - r|| / ||r||``.
        infidelity: ``1 - F``, ``F`` the fidelity of the normalised states.
        floor: the magnitude floor used by ``max_rel``.
        counted: how many amplitudes ``max_rel`` covered.
        note: why ``re0`` is NaN, else ``""``.
    """

    re0: float
    max_rel: float
    normwise: float
    infidelity: float
    floor: float
    counted: int
    note: str = ""


def state_errors(psi, ref: DDComplex, floor_factor: float = DEFAULT_FLOOR_FACTOR) -> StateErrors:
    """The four error metrics of ``psi`` against ``ref`` (see the module docstring).

    Args:
        psi: ``(2**N,)`` complex128 NumPy array.
        ref: ``(2**N,)`` :class:`~ozsim.reference.DDComplex`, the double-double state.
        floor_factor: ``max_rel`` covers ``|r_i| >= floor_factor * ||r|| / sqrt(2**N)`` (>= 0).

    Returns:
        :class:`StateErrors`. Non-finite entries in ``psi`` make every error ``inf``.

    Raises:
        ValueError: shapes differ, or ``floor_factor < 0``.
    """
    psi = np.asarray(psi)
    hi, lo = ref
    if psi.shape != hi.shape or psi.ndim != 1:
        raise ValueError(f"psi has shape {psi.shape} but the reference has {hi.shape}")
    if not floor_factor >= 0:
        raise ValueError(f"floor_factor must be >= 0, got {floor_factor}")
    ref_norm = float(np.linalg.norm(hi))
    floor, counted = amplitude_floor(ref, floor_factor)
    if not np.isfinite(psi).all():
        return StateErrors(
            math.inf, math.inf, math.inf, math.inf, floor, counted, "non-finite amplitudes"
        )

    diff = (psi - hi) - lo

    note = ""
    r0 = hi.real[0]
    if r0 == 0:
        re0 = math.nan
        note = "Re <0...0|psi_dd> is exactly 0: its relative error is undefined"
    else:
        re0 = abs(float(diff.real[0])) / abs(float(r0))

    mag = np.abs(hi)
    keep = mag >= floor
    max_rel = float(np.max(np.abs(diff[keep]) / mag[keep])) if counted else math.nan

    normwise = float(np.linalg.norm(diff)) / ref_norm if ref_norm else math.nan

    # 1 - F from the component of psi orthogonal to r (no cancellation).
    rr = float(np.vdot(hi, hi).real) + 2.0 * float(np.vdot(hi, lo).real)
    c = (np.vdot(hi, psi) + np.vdot(lo, psi)) / rr
    perp = (psi - c * hi) - c * lo
    psi_sq = float(np.vdot(psi, psi).real)
    infidelity = float(np.vdot(perp, perp).real) / psi_sq if psi_sq else math.nan
    return StateErrors(re0, max_rel, normwise, infidelity, floor, counted, note)


def amplitude_floor(ref: DDComplex, floor_factor: float = DEFAULT_FLOOR_FACTOR):
    """``(floor, counted)``: ``floor = floor_factor * ||r|| / sqrt(2**N)`` and how many
    amplitudes of ``ref`` reach it (module docstring, ``max_rel``)."""
    hi = ref[0]
    floor = floor_factor * float(np.linalg.norm(hi)) / math.sqrt(hi.size)
    return floor, int(np.count_nonzero(np.abs(hi) >= floor))


@dataclass(frozen=True)
class BackendSpec:
    """One row of a check: a backend name and, for ``int8-auto``, its threshold ``T``.

    Attributes:
        backend: a name :func:`ozsim.gemm.parse_backend` accepts.
        T: INT8-AUTO's threshold in bits (``None`` for the other backends).
    """

    backend: str
    T: float | None = None

    @property
    def label(self) -> str:
        return self.backend if self.T is None else f"{self.backend}:T={self.T:g}"


_SPEC = re.compile(r"^\s*([A-Za-z0-9\-]+)\s*(?::\s*T\s*=\s*([^\s]+)\s*)?$")


def parse_backend_specs(text: str | list[str], thresholds=(1.0,),
                        precision: str = "double") -> list[BackendSpec]:
    """Parse ``--backends``: a comma list of ``zgemm``, ``int8x{s}``, ``int8-crt{N}``,
    ``int8-auto``, ``int8-crt-auto``, ``auto`` (:mod:`ozsim.auto`), or one with a threshold
    (``int8-auto:T=<bits>``, ``auto:T=0``);
    ``"all"`` stands for one name per registered pattern (:func:`ozsim.gemm.registry.all_names`).

    A plain ``int8-auto`` or ``int8-crt-auto`` gives one spec per value of ``thresholds`` (the
    ``-T`` option); an explicit ``int8-auto:T=0.5`` gives one spec with that ``T``. Duplicates are dropped, order
    kept.

    Args:
        text: ``"zgemm,int8-auto,int8x9"`` or a list of such names.
        thresholds: the ``T`` values for a plain ``int8-auto`` (each >= 0).
        precision: whose backend list the names come from (``"double"`` or ``"single"``,
            :func:`ozsim.gemm.registry.parse`).

    Returns:
        The specs, in order.

    Raises:
        ValueError: an empty list, an unknown backend, ``:T=`` on a backend that is not an auto
            backend, or a negative or non-numeric ``T``.
    """
    from .auto import is_auto
    from .gemm import registry

    items = text.split(",") if isinstance(text, str) else list(text)
    items = [i for i in (s.strip() for s in items) if i]
    if [i.lower() for i in items] == ["all"]:
        items = registry.all_names(precision)
    if not items:
        raise ValueError("no backends given; expected a comma list such as zgemm,int8-auto")
    ts = [_threshold(t) for t in thresholds]
    if not ts:
        raise ValueError("no threshold T given")
    specs: list[BackendSpec] = []
    for item in items:
        m = _SPEC.match(item)
        if not m:
            raise ValueError(f"cannot parse backend {item!r}; expected e.g. int8-auto:T=0")
        name, t = m.group(1).lower(), m.group(2)
        auto = is_auto(name) or registry.parse(name, precision).auto
        if t is not None and not auto:
            raise ValueError(f"backend {item!r}: only int8-auto, int8-crt-auto and auto take a "
                             "threshold")
        if auto:
            new = [BackendSpec(name, _threshold(t))] if t is not None else [
                BackendSpec(name, v) for v in ts
            ]
        else:
            new = [BackendSpec(name)]
        specs.extend(s for s in new if s not in specs)
    return specs


def _threshold(t) -> float:
    try:
        v = float(t)
    except (TypeError, ValueError):
        raise ValueError(f"threshold T must be a number of bits, got {t!r}") from None
    if not v >= 0 or not math.isfinite(v):
        raise ValueError(f"threshold T must be >= 0 bits, got {t!r}")
    return v


@dataclass(frozen=True)
class CheckRow:
    """One backend's run against the reference.

    Attributes:
        backend: the backend name.
        T: INT8-AUTO's threshold (``None`` for the others).
        device: ``"cpu"`` or ``"gpu"``: where the backend ran.
        errors: :class:`StateErrors` against the double-double state.
        splits: ``{num_splits: GEMM count}`` (``"zgemm"`` for native GEMMs), from the run's
            metadata.
        fallbacks: INT8-AUTO GEMMs that ran native ZGEMM.
        time_s: the simulation's wall time (parsing excluded).
        gemms: GEMMs the run made (gates after fusion).
        fusion: the run's fusion report (``Result.metadata["fusion"]``), or ``None``.
    """

    backend: str
    T: float | None
    device: str
    errors: StateErrors
    splits: dict
    fallbacks: int
    time_s: float
    gemms: int = 0
    fusion: dict | None = None

    @property
    def label(self) -> str:
        return BackendSpec(self.backend, self.T).label

    def splits_text(self) -> str:
        """``"s=9 x20, s=10 x8"``: splits and GEMM counts; scheme II as ``crt15 x26`` (moduli);
        native GEMMs as ``zgemm x28`` (with ``(fallback)`` when an auto backend fell back)."""
        keys = sorted(self.splits, key=lambda k: (isinstance(k, str), str(k).zfill(8)))
        parts = []
        for k in keys:
            v = self.splits[k]
            if k == "zgemm":
                parts.append(f"zgemm x{v}" + (" (fallback)" if self.fallbacks else ""))
            elif isinstance(k, str):
                parts.append(f"{k} x{v}")
            else:
                parts.append(f"s={k} x{v}")
        return ", ".join(parts) or "-"


@dataclass
class CheckReport:
    """The result of :func:`check`.

    Attributes:
        circuit: the circuit's name.
        num_qubits: N.
        num_gates: unitary operations.
        floor_factor, floor: the magnitude floor of ``max_rel`` (``floor = floor_factor *
            ||r|| / sqrt(2**N)``) and how many amplitudes it kept (``counted``).
        counted: amplitudes covered by ``max_rel``.
        reference_time_s: wall time of the double-double run.
        re0_reference: ``Re <0...0|psi_dd>`` rounded to float64.
        rows: one :class:`CheckRow` per backend, in the order asked.
        reference: the double-double state (not serialised).
        precision: the backend runs' precision, ``"double"`` or ``"single"`` (complex64).
    """

    circuit: str
    num_qubits: int
    num_gates: int
    floor_factor: float
    floor: float
    counted: int
    reference_time_s: float
    re0_reference: float
    rows: list[CheckRow] = field(default_factory=list)
    reference: DDComplex | None = field(default=None, repr=False)
    precision: str = "double"

    def to_dict(self) -> dict:
        """A JSON-ready dict (NaN and inf as strings ``"nan"``/``"inf"``)."""

        def num(x):
            return x if x is None or math.isfinite(x) else str(x)

        rows = []
        for r in self.rows:
            e = asdict(r.errors)
            rows.append(
                {
                    "backend": r.backend,
                    "T": r.T,
                    "device": r.device,
                    "re0_rel_error": num(e["re0"]),
                    "max_rel_error": num(e["max_rel"]),
                    "normwise_rel_error": num(e["normwise"]),
                    "infidelity": num(e["infidelity"]),
                    "note": e["note"],
                    "splits": {str(k): v for k, v in r.splits.items()},
                    "fallbacks": r.fallbacks,
                    "gemms": r.gemms,
                    "fusion": r.fusion,
                    "time_s": r.time_s,
                }
            )
        return {
            "circuit": self.circuit,
            "num_qubits": self.num_qubits,
            "num_gates": self.num_gates,
            "reference": "double-double (xprec ddouble), CPU",
            "reference_time_s": self.reference_time_s,
            "re0_reference": self.re0_reference,
            "floor_factor": self.floor_factor,
            "floor": self.floor,
            "amplitudes_above_floor": self.counted,
            "precision": self.precision,
            "rows": rows,
        }

    def format_table(self) -> str:
        """The human-readable table ``ozsim check`` prints."""
        n = self.num_qubits
        ref_line = (
            f"reference  double-double (~106 bits, xprec) on the CPU, "
            f"{self.reference_time_s:.2f} s; Re<0..0|psi_dd> = {self.re0_reference:+.6e}"
        )
        floor_line = (
            f"max rel    over the {self.counted} of {1 << n} amplitudes with |psi_dd| >= "
            f"{self.floor_factor:g} * ||psi_dd|| / sqrt(2^{n}) = {self.floor:.3e}"
        )
        lines = [f"circuit    {self.circuit}: {n} qubits, {self.num_gates} gates", ref_line,
                 floor_line, ""]
        if self.precision != "double":
            lines.insert(1, f"precision  {self.precision} (complex64 amplitudes)")
        head = ("backend", "device", "Re<0|psi> rel", "max rel", "normwise", "1-fidelity",
                "time s", "GEMMs", "splits (x GEMMs)")
        body = []
        for r in self.rows:
            e = r.errors
            body.append((r.label, r.device, _fmt(e.re0), _fmt(e.max_rel), _fmt(e.normwise),
                         _fmt(e.infidelity), f"{r.time_s:.3f}", str(r.gemms), r.splits_text()))
        widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
                  for i, h in enumerate(head)]

        def fmt_row(cells):
            return "  ".join(
                c.ljust(w) if i in (0, 1, 8) else c.rjust(w)
                for i, (c, w) in enumerate(zip(cells, widths))
            ).rstrip()

        lines.append(fmt_row(head))
        lines.extend(fmt_row(b) for b in body)
        notes = sorted({r.errors.note for r in self.rows if r.errors.note})
        lines.extend(f"note: {x}" for x in notes)
        return "\n".join(lines)


def _fmt(x: float) -> str:
    return f"{x:.2e}" if math.isfinite(x) else str(x)


def check(
    circuit,
    backends="zgemm,int8-auto",
    T=(1.0,),
    device: str = "auto",
    floor_factor: float = DEFAULT_FLOOR_FACTOR,
    max_fused_qubits: int | None = None,
    workspace_bytes: int | None = None,
    precision: str = "double",
) -> CheckReport:
    """Run ``circuit`` with each backend and in double-double, and compare.

    Args:
        circuit: an :class:`~ozsim.Circuit`, a ``qiskit.QuantumCircuit`` or a path to an OpenQASM
            file (parsed once; every run uses the same parsed circuit).
        backends: comma list or list of names (see :func:`parse_backend_specs`), or a list of
            :class:`BackendSpec`.
        T: INT8-AUTO threshold(s) in bits for a plain ``int8-auto`` (a number or a sequence).
        device: where the backends run (``"auto"``, ``"cpu"``, ``"gpu"``); the reference always
            runs on the CPU.
        floor_factor: see :func:`state_errors`.
        max_fused_qubits: gate fusion of the backend runs, as
            :class:`~ozsim.simulator.Simulator` (``None``: its cost model, as ``ozsim run``
            does; ``0``: every gate its own GEMM, as in the ozIMMU paper). The reference never
            fuses: it applies the circuit's own gates, so fusion's FP64 rounding counts as part
            of a backend's error.
        workspace_bytes: passed to :class:`~ozsim.simulator.Simulator`.
        precision: the backend runs' precision (``"single"``: complex64 runs of the
            single-precision backends, against the same double-double reference).

    Returns:
        :class:`CheckReport`.

    Raises:
        InsufficientMemoryError: the circuit has more qubits than the reference can hold in free
            host memory (raised before any run; the message gives the limit).
        ValueError: bad backends, thresholds or ``floor_factor``.
        UnsupportedOperationError, QasmError, DeviceUnavailableError: as
            :meth:`ozsim.simulator.Simulator.run`.
    """
    from .simulator import Simulator, _as_circuit, get_array_module

    if isinstance(backends, (list, tuple)) and backends and isinstance(backends[0], BackendSpec):
        specs = list(backends)
    else:
        thresholds = (T,) if isinstance(T, (int, float)) else tuple(T)
        specs = parse_backend_specs(backends, thresholds, precision)
    if not floor_factor >= 0:
        raise ValueError(f"floor_factor must be >= 0, got {floor_factor}")
    sims = [
        Simulator(backend=s.backend, T=1.0 if s.T is None else s.T, device=device,
                  max_fused_qubits=max_fused_qubits, workspace_bytes=workspace_bytes,
                  precision=precision)
        for s in specs
    ]
    circ = _as_circuit(circuit)
    final_state_gates(circ)  # refuse circuits without one final state, before any run
    check_reference_fits(circ.num_qubits)
    get_array_module(device)  # a missing GPU is an error before the long reference run

    t0 = time.perf_counter()
    ref = dd_statevector(circ)
    t_ref = time.perf_counter() - t0

    rows = []
    for spec, sim in zip(specs, sims):
        res = sim.run(circ)
        md = res.metadata
        errs = state_errors(np.asarray(res.statevector, dtype=np.complex128), ref, floor_factor)
        rows.append(CheckRow(spec.backend, spec.T, md["device"], errs, md["splits"],
                             md["fallbacks"], md["wall_time_s"], md.get("num_gates", 0),
                             md.get("fusion")))
    floor, counted = amplitude_floor(ref, floor_factor)
    return CheckReport(
        circuit=circ.name,
        num_qubits=circ.num_qubits,
        num_gates=circ.num_gates,
        floor_factor=floor_factor,
        floor=floor,
        counted=counted,
        reference_time_s=t_ref,
        re0_reference=float(ref.hi.real[0]),
        rows=rows,
        reference=ref,
        precision=precision,
    )
