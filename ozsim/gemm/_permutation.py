"""The plan of the GPU state permutation kernel, ``kernels/permute_state.cu``, and the order in
which the one-pass tensor-core gate reads its targets (private; NumPy only, so that CPU tests can
run both).

A state vector held in one qubit order (``layout``: the qubit of each axis, most significant
first) is copied into another (``new_layout``) by moving every amplitude once; the kernel reads
the offsets of each amplitude from the tables built here instead of computing per-qubit index
arithmetic, so every permutation costs the same (:meth:`ozsim.statevector.StateVector._permute`).
"""

from __future__ import annotations

import numpy as np

__all__ = ["CHUNK_BITS", "LINE_QUBITS", "inner_qubits", "line_first_order",
           "permutation_tables", "permute_gate_qubits"]

#: A block of the kernel moves ``2**CHUNK_BITS`` amplitudes at a time (its ``-DCHUNK_BITS``); a
#: state of fewer qubits is left to CuPy's copy.
CHUNK_BITS = 11


#: Qubits inside one 128-byte cache line of complex128 amplitudes (bit positions 0, 1, 2).
LINE_QUBITS = 3


def line_first_order(positions) -> tuple[int, ...]:
    """The order in which ``kernels/dense_gate_mma.cu`` should take a gate's targets: those inside
    a 128-byte line (bit positions below :data:`LINE_QUBITS`) first, ascending, then the others
    as given. The kernel's adjacent lanes store the members that differ in the first three
    targets (and load those that differ in the first one or two), so a line's two halves then
    travel in one instruction instead of two partial-sector writes. N = 30, 12 random target sets
    a d, the orders interleaved in one process, mean multiple of the copy floor (worst set) as
    given / this order: H200 d = 4 1.198 (1.46) / 1.172 (1.20), d = 6 1.631 (1.88) / 1.591
    (1.72), d = 7 3.545 / 3.361; H100 d = 6 1.187 (1.53) / 1.143 (1.22). The other targets
    descending instead measured no better and, on the H100 at d = 5, 2% slower
    (benchmarks/RESULTS.md, section 2).

    Args:
        positions: d distinct bit positions (the gate's bit j at ``positions[j]``).

    Returns:
        A permutation ``perm`` of ``range(d)``: the new bit j is the old bit ``perm[j]``.
    """
    pos = [int(p) for p in positions]
    low = sorted((j for j in range(len(pos)) if pos[j] < LINE_QUBITS), key=lambda j: pos[j])
    return tuple(low + [j for j in range(len(pos)) if pos[j] >= LINE_QUBITS])


def permute_gate_qubits(matrix, perm):
    """The same gate with its target bits reordered: new bit j is old bit ``perm[j]``
    (:func:`line_first_order`; :meth:`ozsim.statevector.StateVector.aligned`), for NumPy or CuPy.

    Args:
        matrix: ``(2**d, 2**d)`` array, little-endian over its targets.
        perm: a permutation of ``range(d)``.

    Returns:
        ``(2**d, 2**d)`` array (a view where the reshape allows; callers make it contiguous):
        ``U'[r, c] = U[r_old, c_old]``, with bit ``perm[j]`` of ``r_old`` bit j of ``r``.
    """
    d = len(perm)
    # axis a of the (2,)*d row tensor holds bit d-1-a; permute rows and columns alike
    axes = [d - 1 - int(perm[d - 1 - a]) for a in range(d)]
    t = matrix.reshape((2,) * (2 * d)).transpose(axes + [d + a for a in axes])
    return t.reshape(1 << d, 1 << d)


def inner_qubits(itemsize: int) -> int:
    """Qubits of a thread's contiguous input run: 64 bytes of amplitudes (2 for complex128, 3
    for complex64)."""
    return (64 // itemsize).bit_length() - 1


def permutation_tables(layout: tuple[int, ...], new_layout: tuple[int, ...], inner: int):
    """The offset tables of the GPU permutation kernel (``kernels/permute_state.cu``) that takes
    a state held in ``layout`` to ``new_layout`` (both: the qubit held by each axis, most
    significant first), ``N >= CHUNK_BITS``.

    The qubits at input bits ``0 .. inner-1`` are numbered by ``i`` (``2**inner`` contiguous
    input amplitudes); the other ``N - inner`` qubits, in ascending output bit order, are the
    bits of a work index ``w``, cut into fields: ``lo`` (the low ``CHUNK_BITS - inner`` bits),
    ``mid`` and ``top``. Amplitude ``(w, i)`` moves from input index ``lo[w_lo, 1] + mid[w_mid, 1] +
    top[w_top, 1] + i`` to output index ``lo[w_lo, 0] + mid[w_mid, 0] + top[w_top, 0] +
    inner_out[i]`` (each qubit is one bit, so the fields' deposits add).

    Args:
        layout, new_layout: permutations of ``range(N)``.
        inner: the qubits of ``i`` (:func:`inner_qubits`).

    Returns:
        ``(lo, mid, top, inner_out, mid_bits)``: int64 NumPy arrays of shapes
        ``(2**(CHUNK_BITS - inner), 2)``, ``(2**mid_bits, 2)``,
        ``(2**(N - CHUNK_BITS - mid_bits), 2)``,
        ``(2**inner,)``, and ``mid_bits``.
    """
    n = len(layout)
    pin = {q: n - 1 - a for a, q in enumerate(layout)}
    pout = {q: n - 1 - a for a, q in enumerate(new_layout)}
    inner_q = [layout[n - 1 - b] for b in range(inner)]
    inner_out = np.array([sum(((i >> b) & 1) << pout[q] for b, q in enumerate(inner_q))
                          for i in range(1 << inner)], dtype=np.int64)
    others = sorted((q for q in layout if pin[q] >= inner), key=pout.__getitem__)
    lo_bits = CHUNK_BITS - inner
    high = n - CHUNK_BITS
    mid_bits = (high + 1) // 2

    def table(first: int, bits: int) -> np.ndarray:
        w = np.arange(1 << bits, dtype=np.int64)
        out = np.zeros((1 << bits, 2), dtype=np.int64)
        for j, q in enumerate(others[first:first + bits]):
            bit = (w >> j) & 1
            out[:, 0] |= bit << pout[q]
            out[:, 1] |= bit << pin[q]
        return out

    return (table(0, lo_bits), table(lo_bits, mid_bits), table(lo_bits + mid_bits,
                                                                high - mid_bits),
            inner_out, mid_bits)
