"""Expectation values of Pauli observables, computed where the state lives, in place.

A Pauli string ``P`` over N qubits (qubit 0 rightmost, Qiskit's label order) is
``P = i**ny X^x Z^z`` with bit masks ``x`` (letters X, Y) and ``z`` (Z, Y) and ``ny`` the number of
Ys: ``P|i> = i**ny (-1)**popcount(i & z) |i ^ x>``, so

    <psi|P|psi> = i**ny * sum_i conj(psi[i ^ x]) psi[i] (-1)**popcount(i & z).

Terms that share ``x`` share the products ``conj(psi[i ^ x]) psi[i]``: an observable is grouped by
``x`` and each group costs one pass over the state (two reads of each amplitude, no write), every
term of the group evaluated from the same loaded values. On the GPU one kernel per group reduces
the whole group (``kernels/pauli_expectation.cu``; extra memory: one partial sum per block); on
the CPU the state is walked in chunks of :data:`CHUNK` amplitudes (extra memory a few times
``CHUNK * 16`` bytes, whatever N). No permuted copy, no index arrays of the state's size, no host
round trip of the state.

A non-Hermitian observable (after merging equal Paulis, a coefficient with an imaginary part) is
an error unless the caller asks for the complex value.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ._array import array_namespace

__all__ = ["CHUNK", "expectation", "grouped_terms", "pauli_terms"]

#: Amplitudes per chunk of the CPU walk.
CHUNK = 1 << 14
_LABEL = re.compile(r"^([+-]?)(1j|i|j)?([IXYZ]+)$")
_SOURCE = Path(__file__).resolve().parent / "gemm" / "kernels" / "pauli_expectation.cu"


def pauli_terms(observable, num_qubits: int) -> list[tuple[int, int, complex]]:
    """``[(x, z, c), ...]``: the observable as ``sum c P(x, z)`` with equal Paulis merged, where
    ``P(x, z) = i**popcount(x & z) X^x Z^z`` is the Hermitian Pauli of the masks.

    Args:
        observable: a label over ``IXYZ`` of length N (qubit 0 rightmost), optionally with a
            leading sign or phase (``"-XZ"``, ``"iY"``); a list of ``(label, coeff)``; or a
            ``qiskit.quantum_info.SparsePauliOp`` (anything with ``to_list()``).
        num_qubits: N.

    Returns:
        Terms with the label's sign or phase folded into ``c``; the observable is Hermitian
        exactly when every ``c`` is real.

    Raises:
        ValueError: a label of the wrong length or with letters outside ``IXYZ``.
    """
    if hasattr(observable, "to_list"):
        items = observable.to_list()
    elif isinstance(observable, str):
        items = [(observable, 1.0)]
    else:
        items = list(observable)
    merged: dict[tuple[int, int], complex] = {}
    for label, coeff in items:
        m = _LABEL.fullmatch(str(label).strip())
        if not m or len(m.group(3)) != num_qubits:
            raise ValueError(f"Pauli label {label!r}: expected {num_qubits} letters from IXYZ "
                             "(qubit 0 rightmost), optionally after a sign or phase")
        phase = (-1 if m.group(1) == "-" else 1) * (1j if m.group(2) else 1)
        x = z = 0
        for q, ch in enumerate(reversed(m.group(3))):
            x |= (ch in "XY") << q
            z |= (ch in "ZY") << q
        key = (x, z)
        merged[key] = merged.get(key, 0j) + complex(coeff) * phase
    return [(x, z, c) for (x, z), c in merged.items() if c != 0]


def _parity(v):
    """``popcount(v) & 1`` of a non-negative int64 array, by folding."""
    for s in (32, 16, 8, 4, 2, 1):
        v = v ^ (v >> s)
    return v & 1


def _group_cpu(psi, x: int, zs, cs) -> complex:
    total = 0j
    n = psi.size
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        idx = np.arange(start, stop, dtype=np.int64)
        w = np.conj(psi[idx ^ x]) * psi[start:stop]
        for z, c in zip(zs, cs):
            sign = 1 - 2 * _parity(idx & z)
            total += c * complex(np.dot(w, sign))
    return total


def _group_gpu(psi, x: int, zs, cs) -> complex:  # pragma: no cover - GPU
    import cupy as cp

    from .gemm._gpu import raw_module

    kern = raw_module(_SOURCE, ("-std=c++17",)).get_function("pauli_group")
    threads = 256
    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    blocks = int(max(1, min(-(-psi.size // threads), 8 * sms)))
    partial = cp.empty(blocks, dtype=cp.complex128)
    zd = cp.asarray(np.array(zs, dtype=np.int64))
    cd = cp.asarray(np.array(cs, dtype=np.complex128))
    kern((blocks,), (threads,), (psi, np.int64(psi.size), np.int64(x), zd, cd,
                                 np.int32(len(zs)), partial))
    return complex(partial.sum().get())


def grouped_terms(observable, num_qubits: int, complex_value: bool):
    """The observable's terms grouped by X mask: ``{x: [(z, c'), ...]}`` with ``c'`` the
    coefficient times ``i**ny`` (``P(x, z) = i**ny X^x Z^z``, ``ny = popcount(x & z)``, the Ys),
    so that ``<psi|O|psi> = sum_x sum_(z, c') c' sum_i conj(psi[i ^ x]) (-1)**popcount(i & z)
    psi[i]``.

    Raises:
        ValueError: a bad label (:func:`pauli_terms`), or a non-Hermitian observable without
            ``complex_value``.
    """
    terms = pauli_terms(observable, num_qubits)
    scale = max((abs(c) for _, _, c in terms), default=0.0)
    if not complex_value and any(abs(c.imag) > 1e-12 * scale for _, _, c in terms):
        raise ValueError("the observable is not Hermitian (a Pauli term with a complex "
                         "coefficient): its expectation value is complex; pass "
                         "complex_value=True to get it")
    groups: dict[int, list[tuple[int, complex]]] = {}
    for x, z, c in terms:
        groups.setdefault(x, []).append((z, c * 1j ** (bin(x & z).count("1") % 4)))
    return groups


def expectation(psi, observable, *, complex_value: bool = False):
    """``<psi| O |psi>`` for a Pauli observable, on the state's own device, in place.

    Args:
        psi: ``(2**N,)`` complex128 amplitudes, NumPy or CuPy, little-endian (not modified, not
            normalised: an unnormalised state gives ``<psi|O|psi>`` as written).
        observable: see :func:`pauli_terms`.
        complex_value: return the complex value (for a non-Hermitian ``O``).

    Returns:
        A float (the value of a Hermitian observable), or a complex with ``complex_value``.

    Raises:
        ValueError: a bad label, or a non-Hermitian observable without ``complex_value``.
    """
    xp = array_namespace(psi)
    n = int(psi.size).bit_length() - 1
    groups = grouped_terms(observable, n, complex_value)
    run = _group_cpu if xp is np else _group_gpu
    total = 0j
    for x, zc in groups.items():
        total += run(psi, x, [z for z, _ in zc], [c for _, c in zc])
    return total if complex_value else float(total.real)
