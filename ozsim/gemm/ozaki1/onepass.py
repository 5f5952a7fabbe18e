"""One-pass gates by Ozaki scheme I on the GPU (``int8x{s}``, ``int8-auto``) for ``d <= 6``.

Private; imported only when a CuPy state meets a gate of at most :data:`MAX_QUBITS` qubits. The
GEMM path of a state-vector gate makes many passes over the state (a transposing copy, the
analysis, the slices, the INT32 products, the accumulation: 17 to 23 times the time of one read
and one write of the state at d <= 4 on an H100). This kernel does the whole of
:func:`ozsim.gemm.ozaki1.scheme.int8_zgemm` for one amplitude group in registers and writes the
result in place (algorithm and exactness argument: ``ozsim/gemm/kernels/int8_gate.cu``), so a
gate reads the state once and writes it once; ``int8-auto`` adds one read for its statistics
(the loss histogram of the state's columns decides the number of slices before any slice is
made). Same bits as the CPU path.

Two kernels:

- ``d <= 2``: ``kernels/int8_gate.cu``, one thread per amplitude group on the CUDA cores:
  ``2 s (s + 1) 2**d`` FP32 multiply-adds of the slice products per amplitude (exact: integers
  below ``2**24``) plus ``2 s`` FP64 operations of the accumulation; at ``s = 9``, ``d = 1`` that
  is about 360 multiply-adds, near an H100's CUDA-core rate at its memory rate.
- ``3 <= d <= 6``: ``kernels/int8_gate_mma.cu`` on the INT8 tensor cores (``mma.sync``
  m16n8k32), a block per tile of 64 (``d = 3``: 128) amplitude groups, B's slices in shared
  memory, A's slices as ready-made mma fragments (:func:`mma_fragments`, made once per gate and
  ``s``): ``4 s (s + 1) max(2**d, 16)`` INT8 operations per amplitude (the real embedding
  ``[[Ar, -Ai], [Ai, Ar]]`` of ``s (s + 1) / 2`` slice products), ``2 s`` FP64 operations to cut
  its slices and ``4 s`` to accumulate. At ``d = 5, 6`` on Hopper the same kernel's wgmma form
  (``-DWGMMA=1``, compiled for ``sm_90a``; :data:`WGMMA_THREADS`): A as a core-matrix image in
  shared memory (:func:`wgmma_image`), where it fits (``d = 6``: ``s <= 9``);
  ``OZSIM_INT8_WGMMA=0`` keeps ``mma.sync``. Same bits either way.

``int8-auto``'s statistics cost one extra read of the state (``int8_gate_stats`` /
``int8_gate_mma_stats``: a histogram in shared memory, one atomic add per nonzero scalar; a
persistent grid of the blocks the multiprocessors hold, one transfer back), 0.55-0.73x the
copy floor on an H200. While it reads, the host makes A's slices for the likely ``s`` (the
larger of A's fewest and the last gate's B's), so the gate kernel starts as soon as ``s`` is
known; a gate analysed on the host (:class:`~ozsim.gemm.ozaki1.PreparedOperand`'s ``host``)
does not wait for the device either. (Counting the next gate's statistics in a gate's
write-back instead was measured slower, and so was counting them in the gate's own read with a
guessed ``s``, out of place: in the split, the phase that bounds the kernel, the counting costs
about as much as the read, at 5 and 6 qubits more; ``benchmarks/RESULTS.md`` section 7.)

Measured (H200, N = 30, ``int8-auto`` T = 1, statistics included; ``benchmarks/RESULTS.md``
section 2): 2.31x the copy floor at d = 3, 2.49x at 4, 3.33x at 5, 4.97x at 6 (wgmma; the
kernel alone at s = 8: 1.73x, 1.83x, 2.77x, 4.14x; mma.sync at 5, 6: 3.3x, 5.3x before the
group barriers of ``kernels/group_sync.cuh``).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import cupy as cp
import numpy as np

from ... import config
from ...errors import NonFiniteError
from .. import _mma_gate
from .._gpu import (_sms, persistent_grid, raw_module, resident_blocks, set_dynamic_smem,
                    sm90a_module)
from .scheme import (_MAX_EXP_DIFF, MIN_SPLITS, bits_per_slice, choose_num_splits,
                     fewest_splits)

__all__ = ["MAX_QUBITS", "WGMMA_THREADS", "apply", "statistics", "wgmma_image"]

#: Largest gate of the one-pass kernels.
MAX_QUBITS = 6
#: Largest gate of the CUDA-core kernel (its registers hold 2 * 2**d * s slices a thread); the
#: tensor-core kernel takes 3..MAX_QUBITS.
MAX_SCALAR_QUBITS = 2
_THREADS = 256
_KERNELS = Path(__file__).resolve().parent.parent / "kernels"
_SOURCE = _KERNELS / "int8_gate.cu"
_MMA_SOURCE = _KERNELS / "int8_gate_mma.cu"
_MEMCPY_D2D = 3
#: Threads a block of the wgmma form of ``int8_gate_mma.cu`` (Hopper) by gate size: at d = 5 one
#: warpgroup (four blocks an SM), at d = 6 two (one block, 232 registers a thread). H200, N = 30,
#: s = 8, kernel alone: d = 5 2.9x the copy floor (256 threads 3.1-3.2x), d = 6 4.5x (128
#: threads 6.1x).
WGMMA_THREADS = {5: 128, 6: 256}
_wgmma_state: dict = {}
_last_splits: dict = {}  # the fewest s for the last B by gate size (apply: A's slices early)


def _module(d: int, s: int, bits: int, device: int):
    if d > MAX_SCALAR_QUBITS:
        return raw_module(_MMA_SOURCE, ("-std=c++17", f"-DGATE_QUBITS={d}", f"-DSPLITS={s}"))
    return raw_module(_SOURCE, ("-std=c++17", f"-DGATE_QUBITS={d}", f"-DSPLITS={s}",
                                f"-DBITS={bits}"))


def mma_smem_bytes(d: int, s: int, wgmma: bool = False) -> int:
    """Dynamic shared memory of ``int8_gate_mma`` in bytes: B's ``s`` slices of a tile, and at
    ``d <= 5`` A's fragments beside them; ``wgmma``: the wgmma form's (B's slices without
    padding, A's image at both d)."""
    if wgmma:
        nc, kd, _ = _mma_gate.tile(d, threads=WGMMA_THREADS[d])
        return s * nc * kd + _mma_gate.a_fragment_bytes(d, s)
    nc, _, w = _mma_gate.tile(d)
    return 4 * s * nc * w + (_mma_gate.a_fragment_bytes(d, s) if d <= 5 else 0)


def _wgmma_kernel(d: int, s: int):
    """The wgmma form's kernel for ``(d, s)`` on this device and its dynamic shared memory, or
    ``None`` where it does not run: ``d`` not in :data:`WGMMA_THREADS`, ``OZSIM_INT8_WGMMA=0``,
    not compute capability 9.0, more shared memory than a block may have, or NVRTC without
    ``sm_90a`` (then the reason is kept in ``_wgmma_state["error"]`` and a ``RuntimeWarning``
    says it once; same bits through mma.sync)."""
    if d not in WGMMA_THREADS or config.get("OZSIM_INT8_WGMMA") != "1":
        return None
    dev = cp.cuda.Device()
    key = (dev.id, d, s)
    if key not in _wgmma_state:
        found = None
        smem = mma_smem_bytes(d, s, wgmma=True)
        if (dev.compute_capability == "90"
                and smem <= dev.attributes["MaxSharedMemoryPerBlockOptin"]
                and "error" not in _wgmma_state):
            try:
                kernel = sm90a_module(_MMA_SOURCE, (
                    "-std=c++17", f"-DGATE_QUBITS={d}", f"-DSPLITS={s}", "-DWGMMA=1",
                    f"-DTHREADS={WGMMA_THREADS[d]}")).get_function("int8_gate_mma")
                set_dynamic_smem(kernel, smem)
                found = (kernel, smem, resident_blocks(kernel, WGMMA_THREADS[d], smem))
            except RuntimeError as exc:  # no sm_90a in this NVRTC: mma.sync, same bits
                _wgmma_state["error"] = str(exc)
                warnings.warn(f"scheme I's wgmma gate kernel is unavailable, mma.sync runs "
                              f"instead (same results, slower): {exc}", RuntimeWarning,
                              stacklevel=2)
        _wgmma_state[key] = found
    return _wgmma_state[key]


def wgmma_image(prep, s: int):
    """A's ``s`` slices as the wgmma form's A operand (:func:`ozsim.gemm._mma_gate.core_image`),
    made once per gate and ``s`` and cached beside the operand's splits."""
    return _slices_as(prep, s, "wgmma-image", _mma_gate.core_image)


def mma_fragments(prep, s: int):
    """A's ``s`` slices as ``mma.sync`` A fragments (:func:`ozsim.gemm._mma_gate.a_fragments`),
    made once per gate and ``s`` and cached beside the operand's splits."""
    return _slices_as(prep, s, "mma-fragments", _mma_gate.a_fragments)


def _slices_as(prep, s: int, name: str, layout):
    """``layout(re, im)`` of A's ``s`` slices (``(s, K, K)`` each), cached in ``prep._splits``
    under ``(name, s)``."""
    key = (name, s)
    out = prep._splits.get(key)
    if out is None:
        k = prep.shape[1]
        sl = prep.split(s, bits_per_slice(k)).slices  # (2K, s, K): Re rows, then Im rows
        out = prep._splits[key] = layout(cp.transpose(sl[:k], (1, 0, 2)),
                                         cp.transpose(sl[k:], (1, 0, 2)))
    return out


def _positions(positions) -> list[np.int32]:
    return [np.int32(p) for p in positions] + [np.int32(0)] * (6 - len(positions))


def statistics(psi, positions, while_counting=None):
    """INT8-AUTO's statistics of the state viewed as B through ``positions``, in one read.

    Args:
        psi: ``(2**n,)`` complex128 CuPy state; positions: the d target bit positions.
        while_counting: called once the kernel is launched, before its result is awaited
            (host work that overlaps the read: :func:`apply` prepares A's slices there).

    Returns:
        ``(_MAX_EXP_DIFF + 1,)`` int64 NumPy loss histogram of B's columns
        (:func:`ozsim.gemm.ozaki1.scheme.loss_histogram` of ``B.T``).

    Raises:
        NonFiniteError: NaN or Inf in the state.
    """
    d = len(positions)
    mod = _module(d, MIN_SPLITS, bits_per_slice(1 << d), cp.cuda.Device().id)
    out = cp.zeros(_MAX_EXP_DIFF + 2, dtype=cp.uint64)  # the histogram, then the flag
    hist, flag = out[:-1], out[-1:].view(cp.int32)
    groups = psi.size >> d
    per_block = _mma_gate.tile(d)[0] if d > MAX_SCALAR_QUBITS else _THREADS
    kernel = mod.get_function("int8_gate_mma_stats" if d > MAX_SCALAR_QUBITS
                              else "int8_gate_stats")
    blocks = persistent_grid(kernel, _THREADS, 0, -(-groups // per_block))
    kernel((blocks,), (_THREADS,), (psi, np.int64(groups), *_positions(positions), hist, flag))
    if while_counting is not None:
        while_counting()
    host = out.get()  # (one transfer)
    if host[-1]:
        raise NonFiniteError("the state vector has NaN or Inf amplitudes")
    return host[:-1].astype(np.int64)


def apply(psi, prep, positions, num_splits: int | None, T: float, check_finite: bool = True):
    """``psi <- U psi`` by scheme I in one pass (plus one read for ``int8-auto``'s statistics).

    Args:
        psi: ``(2**n,)`` complex128 CuPy state, C-contiguous.
        prep: :class:`~ozsim.gemm.ozaki1.PreparedOperand` of the ``(2**d, 2**d)`` gate (CuPy),
            little-endian over the amplitude-index bits ``positions``.
        positions: d distinct bit positions, ``1 <= d <= MAX_QUBITS``.
        num_splits: ``s`` for ``int8x{s}``, or ``None`` for INT8-AUTO at threshold ``T``.
        T: INT8-AUTO's threshold in bits.
        check_finite: for a fixed ``s``, wait for the kernel's NaN/Inf flag (one device sync a
            gate; INT8-AUTO's statistics read finds them anyway); without it a non-finite
            column is left as it was, unreported here.

    Returns:
        ``(s, hist_b)``: the splits used and B's loss histogram (``None`` for a fixed ``s``), or
        ``(None, hist_b)`` when INT8-AUTO finds no ``s <= 18`` (nothing applied: the caller
        runs native).

    Raises:
        NonFiniteError: NaN or Inf in the state (the gate's were found at its preparation).
    """
    d = len(positions)
    bits = bits_per_slice(1 << d)
    hist_b = None
    s = num_splits
    if s is None:
        def guess():  # A's slices for the likely s, made (GPU work and host overhead) while
            # the statistics are read: s = max(A's fewest, B's fewest), B's as the last gate's
            # of this size (a run's state statistics change slowly)
            s_a = fewest_splits(prep.histogram, bits, T)
            if d > MAX_SCALAR_QUBITS and s_a is not None:
                _a_operand(prep, d, max(s_a, _last_splits.get(d, MIN_SPLITS)))

        hist_b = statistics(psi, positions, guess)
        s = choose_num_splits(prep.histogram, hist_b, bits, T)
        if s is None:
            return None, hist_b
        _last_splits[d] = fewest_splits(hist_b, bits, T) or s  # (None: a shard's own B)
    flag = cp.zeros(1, dtype=cp.int32)
    groups = psi.size >> d
    if d > MAX_SCALAR_QUBITS:
        _apply_mma(psi, prep, positions, s, groups, flag)
    else:
        _apply_scalar(_module(d, s, bits, cp.cuda.Device().id), psi, prep, positions, s, bits,
                      groups, flag)
    if hist_b is None and check_finite and int(flag.get()[0]):  # (int8-auto: its statistics)
        raise NonFiniteError("the state vector has NaN or Inf amplitudes")
    return s, hist_b


def _a_operand(prep, d: int, s: int):
    """A's ``s`` slices as the tensor-core kernel that runs ``(d, s)`` reads them (cached)."""
    return wgmma_image(prep, s) if _wgmma_kernel(d, s) is not None else mma_fragments(prep, s)


def _apply_mma(psi, prep, positions, s, groups, flag):
    d = len(positions)
    exps = cp.ascontiguousarray(prep.exponents, dtype=cp.int32)
    wgmma = _wgmma_kernel(d, s)
    if wgmma is not None:  # a persistent grid of the blocks the multiprocessors hold at once
        kernel, smem, per_sm = wgmma
        threads = WGMMA_THREADS[d]
        nc = _mma_gate.tile(d, threads=threads)[0]
        blocks = int(max(1, min(-(-groups // nc), per_sm * _sms())))
        kernel((blocks,), (threads,), (psi, np.int64(groups), *_positions(positions),
                                       _a_operand(prep, d, s), exps, flag), shared_mem=smem)
        return
    nc = _mma_gate.tile(d)[0]
    frags = _a_operand(prep, d, s)
    kernel = _module(d, s, bits_per_slice(1 << d), cp.cuda.Device().id).get_function("int8_gate_mma")
    smem = mma_smem_bytes(d, s)
    if kernel.max_dynamic_shared_size_bytes < smem:
        kernel.max_dynamic_shared_size_bytes = smem
    blocks = int(max(1, min(-(-groups // nc), 8 * _sms())))
    kernel((blocks,), (_THREADS,), (psi, np.int64(groups), *_positions(positions), frags, exps,
                                    flag), shared_mem=smem)


def _apply_scalar(mod, psi, prep, positions, s, bits, groups, flag):
    sl = prep.split(s, bits).slices.astype(cp.float32)  # (2m, s, k): Re rows, then Im rows
    m = sl.shape[0] // 2
    slices = cp.ascontiguousarray(cp.concatenate([sl[:m], sl[m:], sl[:m] + sl[m:]]))
    exps = cp.ascontiguousarray(prep.exponents, dtype=cp.int32)
    stream = cp.cuda.get_current_stream().ptr
    cp.cuda.runtime.memcpyAsync(mod.get_global("a_slices").ptr, slices.data.ptr, slices.nbytes,
                                _MEMCPY_D2D, stream)
    cp.cuda.runtime.memcpyAsync(mod.get_global("a_exp").ptr, exps.data.ptr, exps.nbytes,
                                _MEMCPY_D2D, stream)
    mod.get_function("int8_gate")((int(-(-groups // _THREADS)),), (_THREADS,),
                                  (psi, np.int64(groups), *_positions(positions), flag))
