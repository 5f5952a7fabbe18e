"""Test helpers shipped with ozsim (like ``cirq.testing``): exact references and test inputs.

Nothing here is used by the simulator itself.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

__all__ = [
    "assert_same_distribution",
    "exact_zgemm",
    "max_relative_error",
    "ozaki_matrix",
    "phase_aligned",
]


def ozaki_matrix(rng: np.random.Generator, m: int, n: int, phi: float) -> np.ndarray:
    """Ozaki's test input: real and imaginary parts ``(rand - 0.5) * exp(phi * randn)``.

    ``phi`` controls the spread of exponents (phi = 0.1: nearly uniform; phi = 4: values spread
    over about 2**±23). From [ozIMMU] Sec. 5 and Ozaki et al. 2012.

    Returns:
        ``(m, n)`` complex128.
    """

    def part():
        return (rng.random((m, n)) - 0.5) * np.exp(phi * rng.standard_normal((m, n)))

    return part() + 1j * part()


def _to_scaled_ints(x: np.ndarray) -> tuple[np.ndarray, int]:
    """``x`` (float64) as an object array of Python ints ``X`` and ``E`` with ``x = X * 2**E``."""
    flat = x.ravel()
    _, exps = np.frexp(flat[flat != 0]) if np.any(flat != 0) else (None, np.array([0]))
    e_min = int(exps.min()) - 53
    scale = Fraction(2) ** (-e_min)
    ints = np.array([int(Fraction(float(v)) * scale) for v in flat], dtype=object)
    return ints.reshape(x.shape), e_min


def exact_zgemm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``A @ B`` computed exactly in integer arithmetic, then rounded once to complex128.

    Every float64 is an integer times a power of two; the products and sums are done on Python
    integers (no rounding), and each real and imaginary part is rounded to the nearest float64
    once at the end. Cost grows as ``m n k`` Python operations: keep ``m n k <= ~1e6``.

    Args:
        a: ``(m, k)`` complex128 (finite).
        b: ``(k, n)`` complex128 (finite).

    Returns:
        ``(m, n)`` complex128, each part the correctly rounded exact value (barring underflow
        below the subnormal range).
    """
    ar, ea = _to_scaled_ints(np.ascontiguousarray(a.real))
    ai, ea2 = _to_scaled_ints(np.ascontiguousarray(a.imag))
    br, eb = _to_scaled_ints(np.ascontiguousarray(b.real))
    bi, eb2 = _to_scaled_ints(np.ascontiguousarray(b.imag))
    ea_min, eb_min = min(ea, ea2), min(eb, eb2)
    ar, ai = ar * (1 << (ea - ea_min)), ai * (1 << (ea2 - ea_min))
    br, bi = br * (1 << (eb - eb_min)), bi * (1 << (eb2 - eb_min))
    re = ar.dot(br) - ai.dot(bi)
    im = ar.dot(bi) + ai.dot(br)
    scale = ea_min + eb_min

    def to_float(v: int) -> float:
        if v == 0:
            return 0.0
        # round-to-nearest of an exact rational v * 2**scale
        return float(Fraction(v) * Fraction(2) ** scale)

    out = np.empty(re.shape, dtype=np.complex128)
    out.real = np.vectorize(to_float, otypes=[float])(re)
    out.imag = np.vectorize(to_float, otypes=[float])(im)
    return out


def phase_aligned(psi: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """``psi`` multiplied by the global phase that best aligns it with ``ref``."""
    overlap = np.vdot(psi, ref)
    if overlap == 0:
        return psi
    return psi * (overlap / abs(overlap))


def max_relative_error(c: np.ndarray, ref: np.ndarray) -> float:
    """``max |c - ref| / |ref|`` over the nonzero entries of ``ref``; NaN anywhere gives inf."""
    if not np.isfinite(c).all():
        return math.inf
    nz = ref != 0
    return float(np.max(np.abs(c[nz] - ref[nz]) / np.abs(ref[nz]))) if nz.any() else 0.0


def assert_same_distribution(counts_a: dict, counts_b: dict, alpha: float = 1e-3):
    """Assert two count dictionaries come from one distribution (chi-square homogeneity test).

    Outcomes seen fewer than 10 times in both samples together are pooled into one column (the
    test's expected counts must not be tiny). Fails when the p-value is at most ``alpha``.

    Raises:
        AssertionError: with the p-value in the message.
    """
    from scipy.stats import chi2_contingency

    keys = sorted(set(counts_a) | set(counts_b))
    rows = [[counts_a.get(k, 0) for k in keys], [counts_b.get(k, 0) for k in keys]]
    table = np.array(rows)
    rare = table.sum(axis=0) < 10
    if rare.any():
        table = np.column_stack([table[:, ~rare], table[:, rare].sum(axis=1)])
    table = table[:, table.sum(axis=0) > 0]
    if table.shape[1] < 2:
        assert set(counts_a) == set(counts_b), (counts_a, counts_b)
        return
    p = chi2_contingency(table).pvalue
    assert p > alpha, f"p = {p:.2e}: {counts_a} vs {counts_b}"


def embed_gate(u: np.ndarray, qubits, n: int) -> np.ndarray:
    """The ``2**n x 2**n`` matrix of gate ``u`` on ``qubits`` by index arithmetic alone.

    An oracle independent of ozsim's engine (no reshapes, no transposes): bit ``j`` of ``u``'s
    index is qubit ``qubits[j]`` of the full index (little-endian); the other bits must agree.

    Args:
        u: ``(2**d, 2**d)`` complex.
        qubits: the d target qubits.
        n: number of qubits of the full space.

    Returns:
        ``(2**n, 2**n)`` complex128.
    """
    x = np.arange(1 << n)
    sub = np.zeros_like(x)
    for j, q in enumerate(qubits):
        sub |= ((x >> q) & 1) << j
    rest = x & ~sum(1 << q for q in qubits)
    return u[np.ix_(sub, sub)] * (rest[:, None] == rest[None, :])


def circuit_unitary(circuit) -> np.ndarray:
    """``exp(i global_phase)`` times the product of an ozsim Circuit's (unconditioned) unitaries,
    ``(2**N, 2**N)`` complex128, built with :func:`embed_gate` (keep N small)."""
    n = circuit.num_qubits
    full = np.eye(1 << n, dtype=np.complex128)
    for op in circuit.operations:
        if op.kind == "unitary":
            assert op.condition is None, "conditioned gates have no single unitary"
            full = embed_gate(op.matrix, op.qubits, n) @ full
    return np.exp(1j * circuit.global_phase) * full
