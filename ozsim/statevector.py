"""The state-vector engine: ``2**N`` complex128 (or, in single precision, complex64) amplitudes,
one GEMM per gate.

A ``d``-qubit gate ``U`` on target qubits ``(q_0, ..., q_{d-1})`` (``q_0`` the least significant
bit of ``U``'s index, Qiskit's convention) acts on the state ``psi`` as one matrix product, the
algorithm of Qiskit's ``Statevector._evolve_operator`` and of the ozIMMU paper's quantum-circuit
application (matmul-(2**(N-d), 2**d, 2**d)):

1. View ``psi`` as a tensor of ``N`` axes of length 2.
2. Bring the target axes to the front, most significant first: ``(q_{d-1}, ..., q_0, rest...)``.
3. Reshape to ``S`` of shape ``(2**d, 2**(N-d))``; row ``r`` of ``S`` is the gate index ``r``.
4. ``S' = U @ S``: one ZGEMM through :func:`ozsim.gemm.zgemm` (native or emulated).

Worked example, ``N = 3``, a 2-qubit gate on ``(0, 2)``: the canonical layout is axes
``(q2, q1, q0)``; the gate wants ``(q2, q0)`` in front, so the state is permuted to
``(q2, q0, q1)`` and viewed as a ``4 x 2`` matrix whose row index is ``2*q2 + q0``, exactly the
gate's index with ``q_0 = 0`` as its low bit and ``q_1 = 2`` as its high bit.

The engine never permutes back: it records which qubit each axis holds (``layout``) and permutes
only when the next gate needs a different front. A gate whose targets already lead costs one
GEMM and no copy; otherwise one transposing copy into the spare buffer (on the GPU
``gemm/kernels/permute_state.cu``: one read and one write whatever the permutation; CuPy's
strided copy of a view with many axes takes up to 24 times that, ``OZSIM_PERMUTE=0``). The
two buffers are reused for the whole run (ping-pong), as in Cirq's ``ApplyUnitaryArgs``.

On the GPU the ``int8-crt*`` and scheme I (``int8x{s}``, ``int8-auto``) backends skip that copy
for gates of at least :data:`GATHER_MIN_QUBITS` qubits: their kernels read the state *through*
the permutation (a
``_cuda_crt.GatheredMatrix``: ``S[r, c] = psi[row_offsets[r] + col_offsets[c]]``, the offsets
depositing the bits of ``r`` and ``c`` into the qubits' current bit positions), and the GEMM
writes its result in the new order. Same numbers as with the copy (the same values reach the
same kernels); ``OZSIM_GATHER=0`` turns it off.

One pass: where a backend's scheme has a one-pass kernel for the device and the gate's size
(:attr:`ozsim.gemm.registry.Scheme.one_pass_qubits`; on the GPU: ``zgemm`` for ``d <= 7``
from compute capability 9.0, else ``d <= 6``, scheme I (``int8x{s}``, ``int8-auto``) for ``d <= 6``, scheme II for ``d <= 6``; in single
precision ``cgemm`` for ``d <= 4``, ``tf32x*`` and ``fp16-le`` for ``d <= 5``), the gate is
applied in place, reading each amplitude group through the targets' current bit positions: no permutation, no second buffer, one read and one write of the state.
``StateVector.one_pass = False`` turns it off (the GEMM path, for comparison). A one-pass
kernel that meets NaN or Inf leaves those amplitudes as they were and raises
``NonFiniteError``; ``StateVector.check_each_gate = False`` skips the wait for that verdict (one
device sync a gate that keeps the host from preparing the next gate while the GPU works), for a
caller that checks the final state, where the NaN stays (:class:`ozsim.Simulator` does).
"""

from __future__ import annotations

import os
from types import ModuleType

import numpy as np

from . import config
from ._array import to_numpy
from .errors import InsufficientMemoryError
from .gemm import GemmInfo, registry, zgemm
from .gemm._permutation import CHUNK_BITS, permute_gate_qubits
from .gemm.ozaki1 import default_workspace_bytes

__all__ = ["StateVector", "available_memory_bytes", "check_memory", "state_bytes"]

AMPLITUDE_BYTES = 16  # complex128
PRECISIONS = registry.PRECISIONS  # precision -> the amplitudes' dtype
#: Smallest gate (qubits) for which the GPU's scheme I and II backends read the state through the
#: permutation instead of copying it (the column offset table is ``8 * 2**(N - d)`` bytes).
GATHER_MIN_QUBITS = 6
#: Schemes whose GPU kernels read a gathered state (scheme II: analysis and residues; scheme I:
#: analysis and split).
_GATHER_SCHEMES = ("ozaki1", "ozaki2")
#: Offset tables kept per state vector (keyed by bit positions; brickwork layers repeat).
_GATHER_TABLES = 4


def state_bytes(num_qubits: int, precision: str = "double") -> int:
    """Bytes of one ``2**num_qubits`` state vector: 16 an amplitude in double precision
    (complex128), 8 in single (complex64)."""
    return (AMPLITUDE_BYTES if precision == "double" else AMPLITUDE_BYTES // 2) << num_qubits


def available_memory_bytes(xp: ModuleType) -> int:
    """Free memory on the device of ``xp``: host ``MemAvailable`` or the GPU's free memory."""
    if xp is not np:  # pragma: no cover - GPU
        free, _ = xp.cuda.Device().mem_info
        return int(free) + int(xp.get_default_memory_pool().free_bytes())
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_memory(needed: int, xp: ModuleType, what: str) -> None:
    """Raise :class:`InsufficientMemoryError` if ``needed`` bytes exceed the free memory."""
    avail = available_memory_bytes(xp)
    if needed > avail:
        where = "host memory" if xp is np else "GPU memory"
        raise InsufficientMemoryError(
            f"{what} needs {needed / 2**30:.2f} GiB but only {avail / 2**30:.2f} GiB of {where} "
            "is free",
            needed,
            avail,
        )


class StateVector:
    """``2**N`` complex128 (complex64 in single precision) amplitudes with two reusable buffers,
    on NumPy or CuPy.

    Args:
        num_qubits: N (>= 1).
        xp: ``numpy`` or ``cupy``.
        workspace_bytes: bound on the emulated GEMM's slice buffers; ``None``: 256 MiB on the
            CPU, on the GPU half the device memory left free by the two buffers (at most 16 GiB).
        in_place: ``(backend, largest gate in qubits)`` of the run ahead; when every gate of it
            runs through the backend's one-pass kernel on this device, only the state's own
            buffer is allocated (half the memory: one qubit more fits), the spare buffer and
            the GEMM workspace only if a gate needs them after all.
        precision: ``"double"`` (complex128 amplitudes, the ZGEMM backends) or ``"single"``
            (complex64, half the memory: the single-precision backends of
            :mod:`ozsim.gemm.single`).

    Raises:
        InsufficientMemoryError: the buffers plus the workspace do not fit (before
            allocating).
    """

    def __init__(
        self, num_qubits: int, xp: ModuleType = np, workspace_bytes: int | None = None,
        in_place: tuple[str, int] | None = None, precision: str = "double",
    ):
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got "
                             f"{precision!r}")
        self.num_qubits = n = int(num_qubits)
        self.xp = xp
        self.precision = precision
        self.dtype = getattr(xp, PRECISIONS[precision])
        self.device = "cpu" if xp is np else "gpu"
        self.one_pass = True  # use a scheme's one-pass kernel where it has one (module doc)
        self.check_each_gate = True  # one-pass gates wait for their NaN/Inf flag (module doc)
        one = in_place is not None and (in_place[1] == 0 or (
            in_place[1] < n and registry.parse(in_place[0], precision).scheme.one_pass(
                self.device, in_place[1])))
        size = state_bytes(n, precision)
        if one:  # every gate in place: one buffer, no GEMM workspace
            self.workspace_bytes = 0 if workspace_bytes is None else int(workspace_bytes)
            self.peak_bytes = size
            check_memory(self.peak_bytes, xp, f"a {n}-qubit state vector (one buffer: every gate "
                         "of the run is applied in place)")
        else:
            if workspace_bytes is None:
                workspace_bytes = default_workspace_bytes(xp, reserve=2 * size)
            self.workspace_bytes = int(workspace_bytes)
            self.peak_bytes = 2 * size + min(self.workspace_bytes, self._workspace_cap())
            check_memory(self.peak_bytes, xp,
                         f"a {n}-qubit state vector (two buffers and workspace)")
        self._buf = xp.zeros(1 << n, dtype=self.dtype)
        self._spare_buf = None if one else xp.empty(1 << n, dtype=self.dtype)
        self._buf[0] = 1.0
        self.layout: tuple[int, ...] = tuple(range(n - 1, -1, -1))  # qubit held by each axis
        self._tables: dict = {}  # GPU offset tables by bit positions (_gathered)

    @property
    def _spare(self):
        """The second buffer, allocated on first use (a one-buffer state vector that meets a
        gate needing it: the memory check comes first)."""
        if self._spare_buf is None:
            n, size = self.num_qubits, state_bytes(self.num_qubits, self.precision)
            if self.workspace_bytes == 0:
                self.workspace_bytes = default_workspace_bytes(self.xp, reserve=size)
            need = size + min(self.workspace_bytes, self._workspace_cap())
            check_memory(need, self.xp, f"the second buffer of a {n}-qubit state vector")
            self._spare_buf = self.xp.empty(1 << n, dtype=self.dtype)
            self.peak_bytes = size + need
        return self._spare_buf

    def _workspace_cap(self) -> int:
        """The most GEMM workspace a gate can use: 12 states' worth of slice buffers."""
        return 12 * state_bytes(self.num_qubits, self.precision)

    @_spare.setter
    def _spare(self, value):
        self._spare_buf = value

    # -- gates --------------------------------------------------------------------------------
    def apply(
        self,
        gate,
        qubits: tuple[int, ...],
        backend: str = "int8-auto",
        T: float = 1.0,
    ) -> GemmInfo:
        """Apply a d-qubit gate: in place through the scheme's one-pass kernel where it has one
        for this device and d (:attr:`one_pass`), else permute (only if needed) and one ZGEMM
        (in single precision one complex64 GEMM, in blocks of columns that keep the emulated
        backends' split copies of the state within :attr:`workspace_bytes`).

        Args:
            gate: ``(2**d, 2**d)`` complex128 (complex64 in single precision) on the engine's
                device, little-endian over ``qubits``, or a prepared operand of one
                (:func:`gemm_prepare`).
            qubits: d distinct target qubits.
            backend, T: see :func:`ozsim.gemm.zgemm`.

        Returns:
            The GEMM's :class:`~ozsim.gemm.GemmInfo`, without its ``error_bound`` (the caller
            has the gate on the host: :func:`ozsim.gemm.bounds.of`; no device sync here).
        """
        d = len(qubits)
        spec = registry.parse(backend, self.precision)
        if self.one_pass and d < self.num_qubits and spec.scheme.one_pass(self.device, d):
            n = self.num_qubits
            positions = [n - 1 - self.layout.index(q) for q in qubits]
            return spec.scheme.apply_one_pass(self._buf, gate, positions, spec, T,
                                              check_finite=self.check_each_gate)
        want = tuple(reversed(qubits))
        rows, cols = 1 << d, 1 << (self.num_qubits - d)
        b, layout = self._gathered(want, backend) if self.layout[:d] != want else (None, None)
        if b is None:  # the targets lead already, or a transposing copy brings them there
            if self.layout[:d] != want:
                self._permute(want)
            b, layout = self._buf.reshape(rows, cols), self.layout
        if self.precision == "single":
            info = self._single_gemm(gate, b, spec, T, self._spare.reshape(rows, cols))
            self._buf, self._spare = self._spare, self._buf
            self.layout = layout
            return info
        _, info = zgemm(
            gate,
            b,
            backend=backend,
            T=T,
            out=self._spare.reshape(rows, cols),
            check_finite=False,
            return_info=True,
            workspace_bytes=self.workspace_bytes,
            error_bound=False,
        )
        self._buf, self._spare = self._spare, self._buf
        self.layout = layout
        return info

    def _single_gemm(self, gate, b, spec, T: float, out):
        """``out = gate @ b`` in single precision through ``spec``'s scheme, in blocks of
        columns: an emulated backend holds about ``4 * 2**d`` words an amplitude column in split
        copies (TF32 or FP16 words, INT8 slices), so a block is at most
        ``workspace_bytes / (16 * rows)`` columns (native ``cgemm``: one block). ``int8-auto``
        chooses its slices once, from the whole state's loss histogram (one more read of the
        state), so the result does not depend on the blocking."""
        from contextlib import nullcontext

        from .gemm.ozaki1.scheme import reduce_histograms, reduced_histogram

        rows, cols = b.shape
        step = cols
        if spec.name != "cgemm" and self.workspace_bytes:
            step = max(1024, min(cols, self.workspace_bytes // (16 * rows)))
        whole = nullcontext()
        if spec.name == "int8-auto" and step < cols:  # one choice of slices for the whole state
            from .gemm.single.int8 import loss_histogram_columns

            hist = reduced_histogram(loss_histogram_columns(b, step, self.xp))
            whole = reduce_histograms(lambda _block: hist)
        info = None
        with whole:
            for j in range(0, cols, step):
                _, info = spec.scheme.run(gate, b[:, j:j + step], spec, T=T,
                                          out=out[:, j:j + step], xp=self.xp,
                                          check_finite=False,
                                          workspace_bytes=self.workspace_bytes)
        return info

    def _gathered(self, front: tuple[int, ...], backend: str):
        """``(GatheredMatrix, new layout)`` of the state with ``front`` leading, read in place,
        where the backend's GPU kernels take one (module doc); else ``(None, None)``."""
        n, d = self.num_qubits, len(front)
        if (self.xp is np or self.precision != "double"
                or registry.parse(backend, self.precision).scheme.key not in _GATHER_SCHEMES
                or d < GATHER_MIN_QUBITS
                or d >= n or config.get("OZSIM_GATHER") == "0"
                or available_memory_bytes(self.xp) < state_bytes(n)):  # (a fallback copies)
            return None, None
        from .gemm.ozaki2.cuda import GatheredMatrix, deposit_offsets  # GPU only

        view, layout = self._transposed(front)
        bit = [n - 1 - self.layout.index(q) for q in layout]  # buffer index bit of each axis
        key = (tuple(bit[:d]), tuple(bit[d:]))
        tables = self._tables
        if key not in tables:
            if len(tables) >= _GATHER_TABLES:
                del tables[next(iter(tables))]
            tables[key] = (deposit_offsets(key[0]), deposit_offsets(key[1]))
        rows, cols = tables[key]
        b = GatheredMatrix(self._buf, rows, cols, (1 << bit[d - 1], 1 << bit[-1]), view)
        return b, layout

    def _permute(self, front: tuple[int, ...]) -> None:
        src, new_layout = self._transposed(front)
        if (self.xp is not np and self.num_qubits >= CHUNK_BITS
                and config.get("OZSIM_PERMUTE") == "1"):  # pragma: no cover - GPU
            from .gemm._gpu import permute_state

            permute_state(self._buf, self._spare, self.layout, new_layout)
        else:
            self._spare.reshape(src.shape)[...] = src
        self._buf, self._spare = self._spare, self._buf
        self.layout = new_layout

    def _transposed(self, front: tuple[int, ...]):
        """``(view, new layout)``: the buffer as a strided N-d view with ``front`` leading (its
        C-order reshape is the permuted state) and the layout it stands for."""
        rest = tuple(q for q in self.layout if q not in front)
        new_layout = front + rest
        perm = [self.layout.index(q) for q in new_layout]
        # Merge runs of axes that stay adjacent and in order: the copy then has as few
        # dimensions as the permutation allows (N-dimensional index math is slow on CPU and GPU).
        groups: list[list[int]] = []  # [first old axis, length] in new order
        for i, p in enumerate(perm):
            if i and p == perm[i - 1] + 1:
                groups[-1][1] += 1
            else:
                groups.append([p, 1])
        old_order = sorted(range(len(groups)), key=lambda g: groups[g][0])
        shape = tuple(1 << groups[g][1] for g in old_order)
        axes = [old_order.index(g) for g in range(len(groups))]
        return self._buf.reshape(shape).transpose(axes), new_layout

    def scale(self, factor: complex) -> None:
        """Multiply every amplitude by ``factor`` (a global phase)."""
        self._buf *= factor

    def aligned(self, matrix, qubits: tuple[int, ...]):
        """``(matrix', qubits')``: the same gate with its qubits reordered to match the state's
        current leading axes when they hold the same set of qubits (permuting a ``2**d`` matrix
        instead of the ``2**N`` state); otherwise the gate unchanged.

        Args:
            matrix: ``(2**d, 2**d)`` NumPy complex128, little-endian over ``qubits``.
            qubits: its target qubits.
        """
        d = len(qubits)
        front = self.layout[:d]
        if front == tuple(reversed(qubits)) or set(front) != set(qubits):
            return matrix, tuple(qubits)
        new_qubits = tuple(reversed(front))
        perm = [qubits.index(q) for q in new_qubits]
        return np.ascontiguousarray(permute_gate_qubits(matrix, perm)), new_qubits

    # -- measurement and reset ----------------------------------------------------------------
    def _halves(self, qubit: int):
        t = self._buf.reshape((2,) * self.num_qubits)
        axis = self.layout.index(qubit)
        zero = (slice(None),) * axis + (0,)
        one = (slice(None),) * axis + (1,)
        return t, zero, one

    def probability_one(self, qubit: int) -> float:
        """Probability that measuring ``qubit`` gives 1 (the state need not be normalised: the
        probability is relative to the squared norm)."""
        t, _, one = self._halves(qubit)
        p1 = float(self.xp.vdot(t[one], t[one]).real)
        total = float(self.xp.vdot(self._buf, self._buf).real)
        return p1 / total if total > 0 else 0.0

    def project(self, qubit: int, outcome: int, probability: float, to_zero: bool = False) -> None:
        """Collapse onto ``qubit == outcome`` and renormalise by ``1 / sqrt(probability)``.

        With ``to_zero`` the surviving amplitudes are moved to ``qubit == 0`` (a reset).
        """
        t, zero, one = self._halves(qubit)
        keep, drop = (one, zero) if outcome else (zero, one)
        t[keep] *= 1.0 / np.sqrt(probability)
        t[drop] = 0
        if to_zero and outcome:
            t[zero] = t[one]
            t[one] = 0

    def copy(self) -> StateVector:
        """An independent copy (new buffers; same layout and options)."""
        check_memory((1 + (self._spare_buf is not None)) * state_bytes(self.num_qubits,
                                                                       self.precision), self.xp,
                     "a copy of the state vector")
        new = object.__new__(StateVector)
        new.__dict__.update(self.__dict__)
        new._buf = self._buf.copy()
        new._spare_buf = None if self._spare_buf is None else self.xp.empty_like(self._spare_buf)
        return new

    # -- read-out -----------------------------------------------------------------------------
    def amplitudes(self):
        """The amplitudes in canonical little-endian order, ``(2**N,)`` complex128 on the device.

        Permutes the engine's buffer in place into canonical order if needed (one copy).
        """
        canonical = tuple(range(self.num_qubits - 1, -1, -1))
        if self.layout != canonical:
            self._permute(canonical)
        return self._buf

    def to_numpy(self) -> np.ndarray:
        """The amplitudes as a NumPy array (a host copy for CuPy)."""
        return to_numpy(self.amplitudes())


def pad_gate(matrix, qubits: tuple[int, ...], backend: str, num_qubits: int,
             precision: str = "double"):
    """A gate of a size its scheme pads (``pad_gates``) as ``I (x) U`` on more qubits.

    Args:
        matrix: ``(2**d, 2**d)`` NumPy complex128, little-endian over ``qubits``.
        qubits: its d target qubits.
        backend: the backend that will apply it (:mod:`ozsim.gemm.registry`).
        num_qubits: N.
        precision: ``"double"`` or ``"single"`` (the backend's registry).

    Returns:
        ``(matrix', qubits')``: unchanged, or ``kron(I, U)`` over ``qubits`` followed by the
        lowest-numbered other qubits (the identity on the new, most significant bits), at most
        ``N - 1`` qubits in all. The same product; on every device the same bits, since the
        choice depends on the backend, d and N alone.
    """
    d = len(qubits)
    parsed = registry.parse(backend, precision)
    target = min(parsed.scheme.padded(parsed.count, d), num_qubits - 1)
    if d == 0 or d >= target:
        return matrix, tuple(qubits)
    partners = tuple(q for q in range(num_qubits) if q not in qubits)[: target - d]
    return np.kron(np.eye(1 << (target - d)), matrix), tuple(qubits) + partners


def gemm_prepare(matrix, backend: str, precision: str = "double", host=None):
    """The A operand for :meth:`StateVector.apply`: a :class:`PreparedOperand` for the scheme I
    INT8 backends (exponents, loss histogram and slices computed once per gate), a
    :class:`~ozsim.gemm.PreparedCRTOperand` for scheme II (norm exponents, the auto rule's
    statistics and the residues of every modulus computed once per gate), the matrix itself
    otherwise; in single precision the single-precision scheme's operand (the gate rounded to
    complex64 at least). ``host``: the same matrix as NumPy where ``matrix`` is on the device
    (a scheme may analyse it there instead, without waiting for the device)."""
    return registry.parse(backend, precision).scheme.prepare(matrix, host=host)
