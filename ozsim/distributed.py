"""State vectors over several processes: ``P = 2**g`` ranks, each holding ``2**(N-g)`` amplitudes.

Run a script or the CLI under an MPI launcher (``pip install -e ".[mpi]"`` brings mpi4py and
MPICH as wheels)::

    mpiexec -n 2 ozsim run circuit.qasm --device gpu

or, from Python, give the simulator the communicator::

    from mpi4py import MPI
    from ozsim import Simulator
    result = Simulator(backend="int8-auto", comm=MPI.COMM_WORLD).run("circuit.qasm", shots=1000)
    if MPI.COMM_WORLD.rank == 0:
        print(result.counts)

The layout is Qiskit Aer's and cuStateVec's (Aer's "chunks", cusvaer's "global index bits"):
the amplitude index ``i`` (over *physical* bits) splits into the rank ``i >> (N - g)`` (the g
most significant bits are *global*) and the index into the rank's shard (the ``N - g`` *local*
bits). Each shard is an ordinary :class:`~ozsim.statevector.StateVector` of ``N - g`` qubits on
the rank's CPU or GPU, so a gate on local qubits runs through the same engine and the same
emulated GEMM as in one process: one-pass kernels, permutations, INT8 slices or residues alike.

A gate that touches a global qubit first *swaps* it with a local qubit that the gate does not
touch (physical bit ``G = N - g + j`` with local bit ``L``): rank ``r``, whose bit ``j`` is
``c``, keeps the half of its shard with bit ``L = c`` and exchanges the half with ``L = 1 - c``
with rank ``r ^ 2**j`` (``psi'[i] = psi[swap_bits(i, G, L)]``: half a shard crosses the network
each way, in chunks of :data:`CHUNK_BYTES`). The logical-to-physical map then records that the
two qubits traded places; nothing moves back. Which local qubit leaves is the one whose next use
lies furthest ahead (Belady's rule over the fused circuit), and at the start the global bits
hold the qubits the fused circuit touches least (:func:`initial_layout`), so a circuit whose
gates stay on ``N - g`` qubits never swaps.

Exchanges run over MPI (``mpi4py``, host buffers: CPU ranks) or, for GPU ranks, over NCCL
(``cupy.cuda.nccl``: the NCCL id is broadcast over MPI, each rank drives the GPU
``local_rank`` of its node).

Bits: every emulated backend's product of a column depends on that column and the gate alone,
except INT8-AUTO's choice of the number of slices, which reads the whole state's loss
histogram: each rank's histogram is summed over the ranks (an allreduce of 2200 integers a
gate, :func:`ozsim.gemm.ozaki1.scheme.reduce_histograms`), so ``int8-auto``, ``int8x{s}``,
``int8-crt{N}`` and ``int8-crt-auto`` give the bits of the one-process run; native ``zgemm``
agrees to rounding (BLAS sums in its own order).

References:
    Qiskit Aer, "Running with multiple GPUs and/or multiple nodes" (cache blocking, chunk swaps);
    NVIDIA cuStateVec, ``custatevecSVSwapWorker`` and cusvaer (global index bit swaps).
"""

from __future__ import annotations

import math
import os
import time
from types import ModuleType

import numpy as np

from .statevector import StateVector, check_memory, state_bytes

__all__ = ["CHUNK_BYTES", "GPU_CHUNK_BYTES", "DistributedStateVector", "initial_layout",
           "world"]

#: Bytes of one piece of a swap's exchange over MPI (the send and receive buffers hold one each).
CHUNK_BYTES = 64 << 20
#: A swap prefers local bits whose half of the shard is made of contiguous runs this long.
SWAP_MIN_RUN_BYTES = 16 << 20
#: The same over NCCL: two receive and two send buffers of this size (fewer, larger messages:
#: NCCL and the launch overhead per piece).
GPU_CHUNK_BYTES = 512 << 20


def world():
    """``mpi4py``'s ``COMM_WORLD`` when this process runs under an MPI launcher with more than
    one rank (``mpiexec -n 2 ...``), else ``None`` (mpi4py not installed, or a lone process)."""
    launched = any(k in os.environ for k in ("PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE",
                                             "MPI_LOCALNRANKS", "PMIX_RANK"))
    if not launched:
        return None
    try:
        from mpi4py import MPI
    except ImportError:
        return None
    comm = MPI.COMM_WORLD
    return comm if comm.Get_size() > 1 else None


def global_bits(comm) -> int:
    """``g`` with ``comm``'s size ``P = 2**g``.

    Raises:
        ValueError: the number of ranks is not a power of two.
    """
    p = comm.Get_size()
    if p < 1 or p & (p - 1):
        raise ValueError(f"a distributed state vector needs a power-of-two number of ranks, got "
                         f"{p}")
    return p.bit_length() - 1


def initial_layout(uses: list[tuple[int, ...]], num_qubits: int, g: int) -> list[int]:
    """The starting logical-to-physical map: the ``g`` qubits the gates touch least sit on the
    global bits (the most touched of them on the highest), the rest keep their order on the
    local bits.

    Args:
        uses: each gate's (fused block's) logical qubits, in circuit order.
        num_qubits: N. g: global bits.

    Returns:
        ``phys`` with ``phys[q]`` the physical bit of logical qubit ``q``.
    """
    touched = [0] * num_qubits
    for qs in uses:
        for q in qs:
            touched[q] += 1
    order = sorted(range(num_qubits), key=lambda q: (touched[q], -q))  # least touched first
    glob = sorted(order[:g], key=lambda q: (touched[q], q))
    local = [q for q in range(num_qubits) if q not in glob]
    phys = [0] * num_qubits
    for p, q in enumerate(local + glob):
        phys[q] = p
    return phys


class _MpiExchange:
    """Sendrecv of host arrays over MPI."""

    def __init__(self, comm):
        self.comm = comm

    def sendrecv(self, send, recv, peer: int) -> None:
        self.comm.Sendrecv(send, dest=peer, recvbuf=recv, source=peer)


class _NcclExchange:  # pragma: no cover - GPU
    """Send and receive of device arrays over NCCL, one communicator over the ranks (its id
    broadcast over MPI); each rank uses GPU ``local rank mod devices``."""

    def __init__(self, comm):
        import cupy as cp
        from cupy.cuda import nccl

        self.cp, self.nccl = cp, nccl
        uid = nccl.get_unique_id() if comm.Get_rank() == 0 else None
        uid = comm.bcast(uid, root=0)
        self.nc = nccl.NcclCommunicator(comm.Get_size(), uid, comm.Get_rank())

    def sendrecv(self, send, recv, peer: int) -> None:
        nccl, stream = self.nccl, self.cp.cuda.get_current_stream().ptr
        nbytes = send.nbytes
        nccl.groupStart()
        self.nc.send(send.data.ptr, nbytes, nccl.NCCL_UINT8, peer, stream)
        self.nc.recv(recv.data.ptr, nbytes, nccl.NCCL_UINT8, peer, stream)
        nccl.groupEnd()


_NCCL: dict = {}


def _nccl(comm) -> _NcclExchange:  # pragma: no cover - GPU
    """One NCCL communicator per MPI communicator and GPU, made on first use (its setup takes
    a collective and tens of milliseconds)."""
    import cupy as cp

    key = (id(comm), cp.cuda.Device().id)
    if key not in _NCCL:
        _NCCL[key] = _NcclExchange(comm)
    return _NCCL[key]


def select_gpu(comm) -> None:  # pragma: no cover - GPU
    """Make this rank's current GPU the one of its rank on its node (``local rank mod devices``)."""
    import cupy as cp
    from mpi4py import MPI

    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    cp.cuda.Device(local.Get_rank() % cp.cuda.runtime.getDeviceCount()).use()
    local.Free()


class DistributedStateVector:
    """A state vector of ``N`` qubits over the ``P = 2**g`` ranks of ``comm`` (module doc).

    It offers what :class:`~ozsim.simulator.Simulator` uses of a
    :class:`~ozsim.statevector.StateVector` (``apply``, ``aligned``, ``scale``, ``amplitudes``)
    over logical qubits; the rank's shard is :attr:`local`.

    Args:
        num_qubits: N (``N - g >= 1``).
        comm: an mpi4py communicator of ``2**g`` ranks.
        xp: ``numpy`` (exchanges over MPI) or ``cupy`` (over NCCL).
        workspace_bytes, in_place, precision: the shard's, as :class:`StateVector`'s
            (``in_place`` with the shard's qubit count).
        layout: the starting logical-to-physical map (:func:`initial_layout`); default the
            identity (the top ``g`` logical qubits global).
        upcoming: each gate's logical qubits in the order they will be applied, for the choice
            of the local qubit a swap sends away (default: the lowest free one).

    Raises:
        ValueError: a non-power-of-two number of ranks, or ``N - g < 1``.
        InsufficientMemoryError: the shard does not fit the rank's device (before allocating).
    """

    def __init__(self, num_qubits: int, comm, xp: ModuleType = np,
                 workspace_bytes: int | None = None, in_place=None, precision: str = "double",
                 layout: list[int] | None = None, upcoming: list[tuple[int, ...]] | None = None):
        self.comm = comm
        self.rank = comm.Get_rank()
        self.g = g = global_bits(comm)
        self.num_qubits = n = int(num_qubits)
        self.nl = nl = n - g
        if nl < 1:
            raise ValueError(f"{n} qubits over {1 << g} ranks leave {nl} local qubits; need >= 1")
        self.xp = xp
        self.precision = precision
        self.local = StateVector(nl, xp, workspace_bytes, in_place=in_place, precision=precision)
        if self.rank != 0:
            self.local._buf[0] = 0  # |0...0> lives on rank 0
        self.device = self.local.device
        self.phys = list(range(n)) if layout is None else list(layout)
        if sorted(self.phys) != list(range(n)):
            raise ValueError(f"layout must be a permutation of 0..{n - 1}, got {layout}")
        self._upcoming = list(upcoming or [])
        self._next = 0
        self.swaps = 0
        self.swap_bytes = 0
        self.swap_seconds = 0.0
        self._exchange = _nccl(comm) if xp is not np else _MpiExchange(comm)

    # -- what the simulator uses ------------------------------------------------------------
    @property
    def peak_bytes(self) -> int:
        """The shard's buffers and workspace plus a swap's two chunk buffers, bytes (per rank)."""
        chunk = CHUNK_BYTES if self.xp is np else 2 * GPU_CHUNK_BYTES
        return self.local.peak_bytes + 2 * min(chunk, state_bytes(self.nl, self.precision) // 2)

    def aligned(self, matrix, qubits: tuple[int, ...]):
        """Bring ``qubits`` onto local bits (swaps), then :meth:`StateVector.aligned` over them:
        ``(matrix', qubits')`` over logical qubits."""
        self._localise(tuple(qubits))
        local = tuple(self.phys[q] for q in qubits)
        matrix, local = self.local.aligned(matrix, local)
        inv = self._inverse()
        return matrix, tuple(inv[p] for p in local)

    def apply(self, gate, qubits: tuple[int, ...], backend: str = "int8-auto", T: float = 1.0):
        """Apply a gate on logical ``qubits`` (swapping global ones in first) through the shard's
        engine: :meth:`StateVector.apply`'s arguments and result."""
        from .gemm.ozaki1.scheme import reduce_histograms

        self._localise(tuple(qubits))
        self._next += 1
        with reduce_histograms(self._allreduce):  # INT8-AUTO's statistics of the whole state
            return self.local.apply(gate, tuple(self.phys[q] for q in qubits), backend, T)

    def _allreduce(self, hist):
        """The ranks' histograms summed (``MPI.SUM`` over int64)."""
        hist = np.ascontiguousarray(hist, dtype=np.int64)
        out = np.empty_like(hist)
        self.comm.Allreduce(hist, out, op=_mpi_op("SUM"))
        return out

    def scale(self, factor: complex) -> None:
        self.local.scale(factor)

    def all_finite(self) -> bool:
        """Whether every rank's amplitudes are finite (an allreduce)."""
        xp = self.xp
        ok = bool(xp.isfinite(self.local._buf).all())
        return bool(self.comm.allreduce(ok, op=_mpi_op("LAND")))

    def gather_fits(self, root: int = 0) -> bool:
        """Whether the whole state (and its permuted copy) fits half of rank ``root``'s free
        host memory, as ``root`` decides for every rank (a broadcast)."""
        from .statevector import available_memory_bytes

        ok = None
        if self.rank == root:
            ok = 4 * state_bytes(self.num_qubits, self.precision) <= available_memory_bytes(np)
        return bool(self.comm.bcast(ok, root=root))

    def logical_index(self, local_index):
        """Basis-state indices over logical qubits (little-endian) of this rank's local
        indices (int64 NumPy)."""
        phys_index = np.asarray(local_index, dtype=np.int64) | (np.int64(self.rank) << self.nl)
        out = np.zeros_like(phys_index)
        for q, p in enumerate(self.phys):
            out |= ((phys_index >> p) & 1) << q
        return out

    def sample(self, shots: int, seed: int, draw, root: int = 0):
        """Sample ``shots`` basis states of the whole state without gathering it: ``root``
        splits the shots over the ranks by one multinomial draw on the ranks' probability
        totals, and each rank draws its share from its shard (its own stream of ``seed``).

        Args:
            shots: samples (>= 1). seed: an integer seed.
            draw: ``draw(probs, shots, rng) -> (indices, counts)``, the one-process multinomial
                draw (:func:`ozsim.simulator._multinomial`).

        Returns:
            ``(indices, counts)`` on ``root``: int64 basis states over logical qubits and how
            often each was drawn; ``None`` on the others.
        """
        psi = self.local.amplitudes()
        probs = psi.real**2 + psi.imag**2
        probs = probs.get() if hasattr(probs, "get") else probs
        totals = self.comm.allgather(float(probs.sum()))
        share = None
        if self.rank == root:
            t = np.asarray(totals)
            share = np.random.default_rng(seed).multinomial(int(shots), t / t.sum()).tolist()
        mine = self.comm.scatter(share, root=root)
        index, count = draw(probs, mine, np.random.default_rng([seed, self.rank + 1]))
        parts = self.comm.gather((self.logical_index(index), count), root=root)
        if self.rank != root:
            return None
        return (np.concatenate([p[0] for p in parts]).astype(np.int64),
                np.concatenate([p[1] for p in parts]).astype(np.int64))

    def expectation(self, observable, *, complex_value: bool = False):
        """``<psi| O |psi>`` of a Pauli observable over the whole state, without moving qubits:
        for a term whose X / Y part flips global bits the rank pairs with ``rank ^ flips`` and
        the two exchange their shards (in chunks) to form ``conj(psi[i ^ x]) psi[i]``; Z on a
        global bit is a sign per rank; each rank sums its shard, then an allreduce. Every rank
        calls it and gets the value.

        Args, Returns, Raises: as :func:`ozsim.observables.expectation`.
        """
        from . import observables as obs

        n, nl = self.num_qubits, self.nl

        def physical(mask: int) -> int:
            return sum(1 << self.phys[q] for q in range(n) if (mask >> q) & 1)

        groups: dict[int, list[tuple[int, complex]]] = {}
        for x, zc in obs.grouped_terms(observable, n, complex_value).items():
            for z, c in zc:  # Z on a global bit: this rank's sign
                zp = physical(z)
                sign = -1 if bin((zp >> nl) & self.rank).count("1") % 2 else 1
                groups.setdefault(physical(x), []).append((zp & ((1 << nl) - 1), sign * c))
        psi = self.local.amplitudes()
        local = 0j
        for x in sorted(groups):  # (the same order on every rank: exchanges pair up)
            zs, cs = [z for z, _ in groups[x]], [c for _, c in groups[x]]
            if x >> nl == 0:
                run = obs._group_cpu if self.xp is np else obs._group_gpu
                local += run(psi, x, zs, cs)
            else:
                other = self._exchange_shard(psi, self.rank ^ (x >> nl))
                local += _pair_sum(self.xp, psi, other, x & ((1 << nl) - 1), zs, cs)
                del other
        value = complex(self.comm.allreduce(local, op=_mpi_op("SUM")))
        return value if complex_value else value.real

    def _exchange_shard(self, psi, peer: int):
        """The shard of rank ``peer`` (canonical local order), in exchange for this one, in
        chunks of :data:`CHUNK_BYTES`."""
        other = self.xp.empty_like(psi)
        step = max(1, CHUNK_BYTES // psi.dtype.itemsize)
        for s0 in range(0, psi.size, step):
            self._exchange.sendrecv(psi[s0:s0 + step], other[s0:s0 + step], peer)
        return other

    def amplitudes(self, root: int = 0):
        """The whole state in canonical little-endian order over logical qubits, ``(2**N,)``
        NumPy, on rank ``root`` (``None`` on the others): the shards gathered over MPI, then the
        physical bits permuted into logical order.

        Raises:
            InsufficientMemoryError: the whole state does not fit ``root``'s host memory
                (checked before anything is sent).
        """
        n = self.num_qubits
        need = 2 * state_bytes(n, self.precision) if self.rank == root else 0
        err = None
        if self.rank == root:
            try:
                check_memory(need, np, f"gathering a {n}-qubit state on rank {root}")
            except Exception as exc:  # (raised on every rank below, after the others know)
                err = exc
        if self.comm.bcast(err is not None, root=root):
            if err is not None:
                raise err
            from .errors import InsufficientMemoryError

            raise InsufficientMemoryError(f"gathering a {n}-qubit state on rank {root} does not "
                                          "fit its host memory", need, 0)
        shard = self.local.to_numpy()  # canonical over the shard's local bits
        full = np.empty(1 << n, dtype=shard.dtype) if self.rank == root else None
        self.comm.Gather(shard, full, root=root)
        if self.rank != root:
            return None
        # full[(rank << nl) | local] is physical order; axis a of the (2,)*n view holds
        # physical bit n-1-a. Logical bit q sits at physical bit phys[q].
        t = full.reshape((2,) * n)
        axes = [n - 1 - self.phys[q] for q in range(n - 1, -1, -1)]
        return np.ascontiguousarray(t.transpose(axes)).reshape(-1)

    # -- swaps ------------------------------------------------------------------------------
    def _inverse(self) -> list[int]:
        inv = [0] * self.num_qubits
        for q, p in enumerate(self.phys):
            inv[p] = q
        return inv

    def _localise(self, qubits: tuple[int, ...]) -> None:
        """Swap every global qubit of ``qubits`` with a local qubit outside ``qubits``."""
        for q in qubits:
            if self.phys[q] < self.nl:
                continue
            busy = {self.phys[x] for x in qubits}
            self._swap(self.phys[q] - self.nl, self._victim(busy))

    def _victim(self, busy: set[int]) -> int:
        """The local bit to send to a global one: among the free local bits whose half of the
        shard comes in runs of at least :data:`SWAP_MIN_RUN_BYTES` (a low bit's half is strided
        element by element and exchanges at two thirds of a contiguous one's rate), the one
        whose logical qubit is used furthest ahead (never again first; ties: the one on the
        engine's most significant axis, whose half is contiguous)."""
        inv = self._inverse()
        free = [p for p in range(self.nl) if p not in busy]
        if not free:
            raise ValueError(f"a gate on {len(busy)} qubits needs more than the {self.nl} local "
                             f"qubits of each rank; use fewer ranks or smaller blocks")
        horizon = {}
        for t, qs in enumerate(self._upcoming[self._next:]):
            for q in qs:
                horizon.setdefault(q, t)
        axis = self.local.layout.index  # (the most significant axis: a contiguous half)
        item = self.local._buf.dtype.itemsize
        wide = [p for p in free if item << (self.nl - axis(p) - 1) >= SWAP_MIN_RUN_BYTES]
        return max(wide or free, key=lambda p: (horizon.get(inv[p], math.inf), -axis(p)))

    def _swap(self, j: int, p: int) -> None:
        """Exchange global bit ``j`` with local bit ``p`` (module doc): half the shard each way,
        in chunks (:meth:`_pieces`; on the GPU pipelined, :meth:`_exchange_gpu`)."""
        t0 = time.perf_counter()
        peer = self.rank ^ (1 << j)
        c = (self.rank >> j) & 1
        half = self._half(p, 1 - c)  # (rows, cols) view: the shard with bit p = 1 - c
        xp = self.xp
        if xp is np:
            for piece in self._pieces(half, CHUNK_BYTES):
                send = np.ascontiguousarray(piece)
                recv = np.empty_like(send)
                self._exchange.sendrecv(send, recv, peer)
                piece[...] = recv
                self.swap_bytes += send.nbytes
        else:  # pragma: no cover - GPU
            self._exchange_gpu(half, peer)
        inv = self._inverse()
        a, b = inv[p], inv[self.nl + j]
        self.phys[a], self.phys[b] = self.nl + j, p
        self.swaps += 1
        self.swap_seconds += time.perf_counter() - t0

    @staticmethod
    def _pieces(half, chunk_bytes: int) -> list:
        """``half`` (a 2-D view with contiguous rows) cut into blocks of at most
        ``chunk_bytes``: whole rows where a row fits (contiguous when ``half`` has one row or
        its rows are adjacent), else pieces of one row."""
        rows, cols = half.shape
        item = half.dtype.itemsize
        col_step = max(1, min(cols, chunk_bytes // item))
        row_step = max(1, chunk_bytes // (col_step * item))
        return [half[r0:r0 + row_step, c0:c0 + col_step] for r0 in range(0, rows, row_step)
                for c0 in range(0, cols, col_step)]

    def _exchange_gpu(self, half, peer: int) -> None:  # pragma: no cover - GPU
        """The GPU's swap: pieces of :data:`GPU_CHUNK_BYTES` through two receive (and, for a
        strided half, two send) buffers, NCCL on one stream and the copies on another, so
        that piece ``k``'s copy back overlaps piece ``k + 1``'s transfer. A contiguous piece is
        sent straight from the state."""
        cp = self.xp
        pieces = self._pieces(half, GPU_CHUNK_BYTES)
        comm_stream = cp.cuda.get_current_stream()
        copy_stream = cp.cuda.Stream(non_blocking=True)
        copy_stream.wait_event(comm_stream.record())  # (the gates before the swap are done)
        size = max(pc.size for pc in pieces)
        recv = [cp.empty(size, dtype=half.dtype) for _ in range(2)]
        send = [cp.empty(size, dtype=half.dtype) for _ in range(2)]
        done = [None, None]  # event: buffer pair k % 2 free again (its piece copied back)

        def packed(k):
            """Piece ``k`` as sent, and the event its packing ends with (None: sent in place)."""
            pc = pieces[k]
            if pc.flags.c_contiguous:
                return pc, None
            buf = send[k % 2][: pc.size].reshape(pc.shape)
            with copy_stream:
                if done[k % 2] is not None:  # (piece k - 2, sent from this buffer, is back)
                    copy_stream.wait_event(done[k % 2])
                buf[...] = pc
                return buf, copy_stream.record()

        staged, ev = packed(0)
        for k, pc in enumerate(pieces):
            if ev is not None:
                comm_stream.wait_event(ev)
            if done[k % 2] is not None:  # recv[k % 2] free: piece k - 2 copied back
                comm_stream.wait_event(done[k % 2])
            out = recv[k % 2][: pc.size]
            self._exchange.sendrecv(staged, out, peer)
            arrived = comm_stream.record()
            if k + 1 < len(pieces):
                staged, ev = packed(k + 1)  # (queued before piece k's copy back)
            with copy_stream:
                copy_stream.wait_event(arrived)
                pc[...] = out.reshape(pc.shape)
                done[k % 2] = copy_stream.record()
            self.swap_bytes += pc.nbytes
        comm_stream.wait_event(copy_stream.record())
        comm_stream.synchronize()

    def _half(self, p: int, bit: int):
        """The shard's amplitudes with local bit ``p`` equal to ``bit``, as a 2-D view
        ``(2**a, 2**(nl - a - 1))`` of the buffer (rows contiguous) where ``a`` is the axis of
        that bit in the engine's current layout."""
        sv = self.local
        a = sv.layout.index(p)
        t = sv._buf.reshape(1 << a, 2, 1 << (self.nl - a - 1))
        return t[:, bit, :]


def _pair_sum(xp, psi, other, x: int, zs, cs) -> complex:
    """``sum_c cs[c] sum_i conj(other[i ^ x]) (-1)**popcount(i & zs[c]) psi[i]`` in chunks
    (:func:`ozsim.observables._group_cpu` with the conjugated side from another shard)."""
    from .observables import CHUNK, _parity

    total = 0j
    for start in range(0, psi.size, CHUNK):
        stop = min(psi.size, start + CHUNK)
        idx = xp.arange(start, stop, dtype=xp.int64)
        w = xp.conj(other[idx ^ x]) * psi[start:stop]
        for z, c in zip(zs, cs):
            sign = 1 - 2 * _parity(idx & z)
            total += c * complex((w * sign).sum())
    return total


def _mpi_op(name: str):
    from mpi4py import MPI

    return getattr(MPI, name)
