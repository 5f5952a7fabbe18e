"""Double-double reference: complex GEMM and state-vector runs with about 106 significand bits.

The reference behind ``ozsim check`` and the accuracy benchmarks. A double-double number is an
unevaluated sum ``hi + lo`` of two float64 with ``|lo| <= ulp(hi) / 2``: about 106 bits of
significand and the exponent range of float64 (Dekker 1971; Hida, Li, Bailey 2001). The arithmetic
is xprec's ``ddouble`` NumPy dtype (M. Wallerberger, https://github.com/tuwien-cms/xprec): its
ufuncs and its ``matmul`` loop accumulate every product and sum in double-double. A complex
double-double array is a pair of ``ddouble`` arrays (real part, imaginary part); results leave this
module as a :class:`DDComplex`, two complex128 arrays ``hi`` and ``lo`` whose sum (part by part) is
the double-double value.

Accuracy. A length-``k`` dot product in double-double has relative error about
``k * 2**-104 * sum|a_i b_i| / |sum a_i b_i|``; for the products of this package (``k <= 4096``,
no catastrophic cancellation) that is below 1e-28, some 10**12 times below the FP64 errors it is
used to measure. ``tests/test_reference.py`` checks GEMMs and a 6-qubit circuit against mpmath at
256 bits.

Cost and memory. xprec's ``matmul`` runs about 7e7 double-double multiply-adds a second on one
core of this sandbox's CPU: a d-qubit gate on N qubits costs ``4 * 2**d * 2**N`` of them (four
real products). :func:`dd_statevector` holds at most :data:`REFERENCE_BYTES_PER_AMPLITUDE` bytes
per amplitude; :func:`reference_max_qubits` turns free host memory into a qubit limit.

xprec is imported lazily (inside the functions): ``import ozsim`` does not load it. With NumPy 2,
importing xprec before ``scipy.stats`` or ``numpy.ma`` breaks those later imports
(``'finfo' object has no attribute 'min'``), so :func:`_xprec` imports them first.

References:
    T. J. Dekker, "A floating-point technique for extending the available precision",
        Numer. Math. 18 (1971) 224-242.
    Y. Hida, X. S. Li, D. H. Bailey, "Algorithms for quad-double precision floating point
        arithmetic", ARITH-15 (2001).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .errors import InsufficientMemoryError, MissingDependencyError

__all__ = [
    "DDComplex",
    "dd_zgemm",
    "dd_statevector",
    "final_state_gates",
    "REFERENCE_BYTES_PER_AMPLITUDE",
    "reference_bytes",
    "reference_max_qubits",
    "check_reference_fits",
    "reference_macs",
]

#: Peak bytes per amplitude of :func:`dd_statevector`: four complex double-double buffers of 32
#: bytes an amplitude (the state, its gate-front copy, the product and one real product
#: temporary with the copy back; measured peak 112 bytes), rounded up.
REFERENCE_BYTES_PER_AMPLITUDE = 128


def _xprec():
    """``xprec.ddouble``, imported on first use (after ``scipy.stats`` and ``numpy.ma``).

    Raises:
        MissingDependencyError: xprec is not installed.
    """
    try:
        import numpy.ma  # noqa: F401  (must precede xprec, see the module docstring)
        import scipy.stats  # noqa: F401
    except ImportError:  # pragma: no cover - scipy is a hard dependency
        pass
    try:
        import xprec
    except ImportError as exc:  # pragma: no cover - xprec is a hard dependency
        raise MissingDependencyError(
            "the double-double reference needs xprec: pip install 'xprec>=1.4'"
        ) from exc
    return xprec.ddouble


class DDComplex(NamedTuple):
    """A complex double-double array as two complex128 arrays, ``value = hi + lo`` part by part.

    Attributes:
        hi: complex128, the value rounded to float64 (real and imaginary parts separately).
        lo: complex128 of the same shape, the remainders (``|lo.real| <= ulp(hi.real) / 2``,
            likewise for the imaginary parts).

    Unpacks as ``hi, lo = dd_statevector(circuit)``.
    """

    hi: np.ndarray
    lo: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self.hi.shape

    def to_complex128(self) -> np.ndarray:
        """The value rounded to complex128 (``hi``)."""
        return self.hi

    def parts(self):
        """``(re, im)`` as ``xprec.ddouble`` arrays."""
        dd = _xprec()
        re = self.hi.real.astype(dd) + self.lo.real.astype(dd)
        im = self.hi.imag.astype(dd) + self.lo.imag.astype(dd)
        return re, im

    @classmethod
    def from_parts(cls, re, im) -> DDComplex:
        """Build from ``ddouble`` real and imaginary parts of one shape."""
        dd = _xprec()
        rh, ih = re.astype(np.float64), im.astype(np.float64)
        rl = (re - rh.astype(dd)).astype(np.float64)
        il = (im - ih.astype(dd)).astype(np.float64)
        return cls(rh + 1j * ih, rl + 1j * il)


def _as_dd_parts(x, name: str):
    """``(re, im)`` ddouble arrays of a complex128 array or a :class:`DDComplex`."""
    if isinstance(x, DDComplex):
        return x.parts()
    arr = np.asarray(x)
    if arr.dtype != np.complex128:
        raise TypeError(f"{name} must be complex128 or a DDComplex, got {arr.dtype}")
    if not np.isfinite(arr).all():
        from .errors import NonFiniteError

        raise NonFiniteError(f"{name} has NaN or Inf entries")
    dd = _xprec()
    return np.ascontiguousarray(arr.real).astype(dd), np.ascontiguousarray(arr.imag).astype(dd)


def _cmatmul(ar, ai, br, bi):
    """``(ar + i ai) @ (br + i bi)`` in double-double: four real products (no Karatsuba, whose
    subtractions would cost accuracy on cancelling inputs)."""
    cr = ar @ br
    cr -= ai @ bi
    ci = ar @ bi
    ci += ai @ br
    return cr, ci


def dd_zgemm(a, b) -> DDComplex:
    """Complex matrix product ``A @ B`` with every operation in double-double.

    Args:
        a: ``(m, k)`` complex128 NumPy array, or a :class:`DDComplex` of that shape.
        b: ``(k, n)`` complex128 NumPy array, or a :class:`DDComplex` of that shape.

    Returns:
        :class:`DDComplex` ``(m, n)``: relative error about ``k * 2**-104`` times the condition of
        each dot product (see the module docstring), so ~1e-30 for well-conditioned inputs.

    Raises:
        TypeError: an operand neither complex128 nor :class:`DDComplex`.
        ValueError: not 2-D or mismatched inner dimensions.
        NonFiniteError: NaN or Inf in an operand.
        MissingDependencyError: xprec is not installed.
    """
    ar, ai = _as_dd_parts(a, "a")
    br, bi = _as_dd_parts(b, "b")
    if ar.ndim != 2 or br.ndim != 2:
        raise ValueError(f"a and b must be 2-D, got shapes {ar.shape} and {br.shape}")
    if ar.shape[1] != br.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {ar.shape}, b is {br.shape}")
    return DDComplex.from_parts(*_cmatmul(ar, ai, br, bi))


def reference_bytes(num_qubits: int) -> int:
    """Peak bytes :func:`dd_statevector` needs for ``num_qubits`` qubits."""
    return REFERENCE_BYTES_PER_AMPLITUDE << int(num_qubits)


def reference_max_qubits(available_bytes: int | None = None) -> int:
    """The most qubits whose double-double reference fits in ``available_bytes``.

    Args:
        available_bytes: defaults to the free host memory
            (:func:`ozsim.statevector.available_memory_bytes`).

    Returns:
        ``floor(log2(available / REFERENCE_BYTES_PER_AMPLITUDE))``, at least 0.
    """
    if available_bytes is None:
        from .statevector import available_memory_bytes

        available_bytes = available_memory_bytes(np)
    per = REFERENCE_BYTES_PER_AMPLITUDE
    return max(0, int(available_bytes // per).bit_length() - 1)


def check_reference_fits(num_qubits: int) -> None:
    """Refuse, before any work, a reference that would not fit in free host memory.

    Raises:
        InsufficientMemoryError: ``num_qubits`` above :func:`reference_max_qubits`; the message
            names the limit.
    """
    from .statevector import available_memory_bytes

    avail = available_memory_bytes(np)
    limit = reference_max_qubits(avail)
    if num_qubits > limit:
        need = reference_bytes(num_qubits)
        raise InsufficientMemoryError(
            f"the double-double reference of a {num_qubits}-qubit circuit needs "
            f"{need / 2**30:.2f} GiB ({REFERENCE_BYTES_PER_AMPLITUDE} bytes per amplitude) but "
            f"only {avail / 2**30:.2f} GiB of host memory is free: the limit on this machine is "
            f"{limit} qubits",
            need,
            avail,
        )


def reference_macs(circuit) -> int:
    """Real double-double multiply-adds :func:`dd_statevector` spends on ``circuit``:
    ``4 * 2**d * 2**N`` per d-qubit gate (divide by ~7e7 for seconds on one core)."""
    n = circuit.num_qubits
    return sum(4 << (op.num_qubits + n) for op in circuit.gates)


def _apply_gate(re, im, ur, ui, qubits: tuple[int, ...], n: int):
    """Apply a d-qubit gate to a canonical-order state in double-double; returns new parts.

    Same convention as :mod:`ozsim.statevector`: the state is a tensor of N axes, axis ``a``
    holding qubit ``N - 1 - a``; the target axes go to the front, most significant gate bit first
    (``qubits[d-1], ..., qubits[0]``), so the row index of the ``(2**d, 2**(N-d))`` view is the
    gate's little-endian index. After the product the axes go back to canonical order.
    """
    d = len(qubits)
    axes = [n - 1 - q for q in reversed(qubits)]
    front = list(range(d))

    def to_front(x):
        return np.moveaxis(x.reshape((2,) * n), axes, front).reshape(1 << d, -1)

    def to_canonical(x):
        return np.ascontiguousarray(np.moveaxis(x.reshape((2,) * n), front, axes)).reshape(-1)

    br, bi = to_front(re), to_front(im)
    cr, ci = _cmatmul(ur, ui, br, bi)
    del br, bi
    return to_canonical(cr), to_canonical(ci)


def final_state_gates(circuit) -> list:
    """The unitary operations of a circuit whose final state is well defined, in order.

    Allowed: unitaries, barriers, and measurements that nothing after them touches (final
    measurements, which a state-vector comparison ignores).

    Raises:
        UnsupportedOperationError: a reset, a classically conditioned gate, or a measurement
            followed by an operation on its qubit (the state then depends on the outcome); the
            message names the operation and its position.
    """
    from .errors import UnsupportedOperationError

    measured: dict[int, int] = {}
    for pos, op in enumerate(circuit.operations):
        where = f"operation {pos} ({op.name or op.kind} on qubits {list(op.qubits)})"
        why = None
        if op.kind == "reset":
            why = "a reset"
        elif op.condition is not None:
            why = "classically conditioned"
        elif op.kind == "measure":
            measured.setdefault(op.qubits[0], pos)
        elif op.kind == "unitary" and any(q in measured for q in op.qubits):
            q = next(q for q in op.qubits if q in measured)
            why = f"after the measurement of qubit {q} at operation {measured[q]}"
        if why:
            raise UnsupportedOperationError(
                f"{where} is {why}: the final state depends on measurement outcomes, so there is "
                "no single state vector to compare"
            )
    return circuit.gates


def dd_statevector(circuit) -> DDComplex:
    """Run ``circuit`` from ``|0...0>`` with every amplitude and operation in double-double.

    Gate matrices are taken at their float64 values (exactly as the FP64 engine receives them);
    the state, the products and the global phase ``exp(i * circuit.global_phase)`` (its cosine and
    sine evaluated in double-double, applied after the last gate) are double-double. Final
    measurements and barriers are ignored, as :meth:`ozsim.simulator.Simulator.run` ignores them
    for its state vector.

    Args:
        circuit: an :class:`ozsim.Circuit`.

    Returns:
        :class:`DDComplex` of shape ``(2**N,)``, little-endian amplitude order (qubit 0 is the
        least significant bit of the index).

    Raises:
        InsufficientMemoryError: above :func:`reference_max_qubits` (raised before allocating).
        UnsupportedOperationError: resets, mid-circuit measurements, conditioned gates
            (:func:`final_state_gates`).
        MissingDependencyError: xprec is not installed.
    """
    gates = final_state_gates(circuit)
    n = circuit.num_qubits
    check_reference_fits(n)
    dd = _xprec()
    re = np.zeros(1 << n, dtype=dd)
    im = np.zeros(1 << n, dtype=dd)
    re[0] = 1.0
    for op in gates:
        u = np.ascontiguousarray(op.matrix, dtype=np.complex128)
        ur = np.ascontiguousarray(u.real).astype(dd)
        ui = np.ascontiguousarray(u.imag).astype(dd)
        re, im = _apply_gate(re, im, ur, ui, op.qubits, n)
    if circuit.global_phase:
        phi = np.array([float(circuit.global_phase)]).astype(dd)
        c, s = np.cos(phi)[0], np.sin(phi)[0]
        re, im = re * c - im * s, re * s + im * c
    return DDComplex.from_parts(re, im)
