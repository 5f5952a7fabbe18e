"""Circuit builders: the ozIMMU brickwork random circuit, the QFT and the GHZ state."""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..circuit import Circuit
from . import standard
from .haar import haar_unitary

__all__ = ["brickwork_blocks", "brickwork", "qft", "ghz"]


def _check_int(name: str, value, minimum: int) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def brickwork_blocks(num_qubits: int, gate_qubits: int, layer: int) -> list[tuple[int, ...]]:
    """The qubit blocks of one brickwork layer.

    Layer ``l`` covers blocks ``(o + j*d, ..., o + j*d + d - 1)`` for ``j = 0, 1, ...`` with offset
    ``o = 0`` on even layers and ``o = d // 2`` on odd ones; a block that would run past qubit
    ``num_qubits - 1`` is left out.

    Args:
        num_qubits: N >= 1.
        gate_qubits: d, 1 <= d <= N.
        layer: l >= 0.

    Returns:
        The blocks in increasing qubit order, each a tuple of d consecutive qubits.

    Raises:
        ValueError: an argument out of range.
    """
    n = _check_int("num_qubits", num_qubits, 1)
    d = _check_int("gate_qubits", gate_qubits, 1)
    layer = _check_int("layer", layer, 0)
    if d > n:
        raise ValueError(f"gate_qubits={d} exceeds num_qubits={n}")
    offset = 0 if layer % 2 == 0 else d // 2
    return [tuple(range(s, s + d)) for s in range(offset, n - d + 1, d)]


def brickwork(
    num_qubits: int,
    depth: int,
    gate_qubits: int = 2,
    seed: int | np.random.Generator | None = None,
    *,
    measure: bool = False,
) -> Circuit:
    """The brickwork random-unitary circuit of the ozIMMU paper's simulation experiment.

    ``depth`` layers of Haar-random ``gate_qubits``-qubit unitaries on the blocks given by
    :func:`brickwork_blocks` (offset 0 on even layers, ``d // 2`` on odd layers; with d = 1 every
    qubit in every layer). The unitaries are drawn layer by layer, block by block, from one
    ``numpy.random.default_rng(seed)``, so a seed fixes the circuit. Operations are named
    ``"haar{d}"``.

    Args:
        num_qubits: N >= 1.
        depth: number of layers L >= 0.
        gate_qubits: qubits per random gate d, 1 <= d <= N.
        seed: seed or generator for :func:`haar_unitary`.
        measure: append a measurement of qubit i into classical bit i for every qubit.

    Returns:
        A :class:`~ozsim.Circuit` named ``"brickwork_n{N}_d{d}_L{L}"``.

    Raises:
        ValueError: an argument out of range.

    References:
        H. Ootomo, K. Ozaki, R. Yokota, "DGEMM on integer matrix multiplication unit",
        Int. J. High Perform. Comput. Appl. (2024), arXiv:2306.11975 (the quantum circuit
        simulation experiment).
    """
    n = _check_int("num_qubits", num_qubits, 1)
    depth = _check_int("depth", depth, 0)
    d = _check_int("gate_qubits", gate_qubits, 1)
    if d > n:
        raise ValueError(f"gate_qubits={d} exceeds num_qubits={n}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    circ = Circuit(n, n if measure else 0, name=f"brickwork_n{n}_d{d}_L{depth}")
    for layer in range(depth):
        for block in brickwork_blocks(n, d, layer):
            circ.unitary(haar_unitary(1 << d, rng), block, name=f"haar{d}")
    if measure:
        for q in range(n):
            circ.measure(q, q)
    return circ


def qft(num_qubits: int, *, measure: bool = False) -> Circuit:
    """The quantum Fourier transform ``|x> -> 2^{-N/2} sum_y e^{2 pi i x y / 2^N} |y>``.

    The same gate sequence as ``qiskit.circuit.library.QFT(N)`` (``synth_qft_full``): for
    ``j = N-1 .. 0``: ``h(j)``, then ``cp(pi / 2**(j-k), j, k)`` for ``k = j-1 .. 0``; then
    ``swap(i, N-1-i)``. Its unitary equals ``Operator(QFTGate(N))`` exactly (no global phase).

    Args:
        num_qubits: N >= 1.
        measure: append a measurement of qubit i into classical bit i for every qubit.

    Returns:
        A :class:`~ozsim.Circuit` named ``"qft_n{N}"`` with ops named ``h``, ``cp``, ``swap``.

    Raises:
        ValueError: ``num_qubits < 1``.
    """
    n = _check_int("num_qubits", num_qubits, 1)
    circ = Circuit(n, n if measure else 0, name=f"qft_n{n}")
    for j in reversed(range(n)):
        circ.unitary(standard.H, [j], name="h")
        for k in reversed(range(j)):
            lam = math.pi * 2.0 ** (k - j)
            circ.unitary(standard.cp(lam), [j, k], name="cp", params=(lam,))
    for i in range(n // 2):
        circ.unitary(standard.SWAP, [i, n - 1 - i], name="swap")
    if measure:
        for q in range(n):
            circ.measure(q, q)
    return circ


def ghz(num_qubits: int, *, measure: bool = False) -> Circuit:
    """The GHZ state ``(|0...0> + |1...1>) / sqrt(2)``: ``h(0)`` then ``cx(i-1, i)`` for i >= 1.

    Args:
        num_qubits: N >= 1.
        measure: append a measurement of qubit i into classical bit i for every qubit.

    Returns:
        A :class:`~ozsim.Circuit` named ``"ghz_n{N}"``.

    Raises:
        ValueError: ``num_qubits < 1``.
    """
    n = _check_int("num_qubits", num_qubits, 1)
    circ = Circuit(n, n if measure else 0, name=f"ghz_n{n}")
    circ.unitary(standard.H, [0], name="h")
    for i in range(1, n):
        circ.unitary(standard.CX, [i - 1, i], name="cx")
    if measure:
        for q in range(n):
            circ.measure(q, q)
    return circ
