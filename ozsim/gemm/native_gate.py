"""One-pass dense gates in FP64 on the GPU: the ``zgemm`` backend's kernels for ``d <= 7``.

Private; imported only when a CuPy state meets a gate the one-pass kernels take. A gate through
cuBLAS ZGEMM costs a transposing copy of the state plus the GEMM's read and write (2.2x to 6.4x
the time of one read and one write of the state at d <= 8 on an H100); these kernels read each
amplitude group through the target qubits' bit positions, multiply it by the gate and write it
back in place: one read and one write of the state, no second buffer.

- ``d <= 3``: :func:`apply_dense_cuda_cores` (``kernels/dense_gate.cu``), FP64 fused
  multiply-adds on CUDA cores, a thread per group, the gate in constant memory; where a target
  is among the 5 lowest bits, the block's amplitudes pass through shared memory so that loads
  and stores stay coalesced (``dense_gate_low``; the same sums, the same bits), except at
  d = 3, where the tensor-core kernel below takes such gates;
- ``4 <= d <= 7``: :func:`apply_dense_mma` (``kernels/dense_gate_mma.cu``), FP64 tensor-core
  products (``mma.sync m16n8k8 f64`` from compute capability 9.0, else ``m8n8k4``, which runs
  at half the FP64 tensor rate on Hopper) on tiles of 32 to 128 groups staged in shared memory:
  at ``8 * 2**d`` flops an amplitude the CUDA cores fall behind the memory from d = 4 on. From
  d = 5 (with m16n8k8) Gauss's three real products instead of the real embedding's four
  (:func:`gauss_fragments`; Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed.,
  section 23.2.4): 3/4 of the FP64 tensor work, with an error bound that is normwise, as
  ZGEMM3M's. d = 7 only where :func:`one_pass_qubits` says (else the GEMM path). From d = 4
  the kernel takes the targets line first (:data:`REORDER_FROM`), the gate permuted to match.

On an H200 (``benchmarks/gate_bench.py``, N = 30, floor = one read and one write of the state,
8.07 ms; the run before the line-first order): 1.11x at d = 3, 1.12x, 1.13x, 1.43x, 3.23x at
d = 4, 5, 6, 7 (tensor cores; the real embedding took 1.66x at d = 6 and 4.4x at 7, the
CUDA-core kernel 1.50x, 3.54x, 10.9x at d = 4..6), cuStateVec's ``custatevecApplyMatrix``
1.02x, 1.09x, 1.32x, 1.44x, 6.25x in the same run, the cuBLAS path 4.37x at d = 7. The newest
run (line first from d = 4): 1.16x, 1.15x, 1.40x, 3.24x at d = 4..7 against cuStateVec's 1.09x,
1.33x, 1.44x, 6.24x; on an H100 1.09x, 1.09x, 1.14x, 2.45x (``benchmarks/RESULTS.md``).

The products are FP64 fused multiply-adds in a fixed order; they agree with cuBLAS or BLAS ZGEMM
to rounding (not bitwise: BLAS libraries order their sums in their own ways).
"""

from __future__ import annotations

import functools
from pathlib import Path

import cupy as cp
import numpy as np

from ._gpu import _sms, raw_module
from ._permutation import line_first_order, permute_gate_qubits

__all__ = ["MAX_QUBITS", "MMA_QUBITS", "apply_dense", "apply_dense_cuda_cores",
           "apply_dense_mma", "gauss_fragments", "mma_fragments", "mma_smem_bytes",
           "one_pass_qubits"]

#: Largest gate the CUDA-core kernel takes (:func:`apply_dense` takes 7 on the tensor cores:
#: :func:`one_pass_qubits`).
MAX_QUBITS = 6
#: Gate sizes of the FP64 tensor-core (DMMA) kernel, ``kernels/dense_gate_mma.cu``.
MMA_QUBITS = range(3, 8)
#: Smallest gate :func:`apply_dense` sends to the tensor-core kernel.
MMA_FROM = 4
#: Smallest gate whose targets :func:`apply_dense_mma` reorders line first
#: (:func:`ozsim.gemm._permutation.line_first_order`). N = 30, 12 random target sets a d, the
#: orders interleaved in one process, multiples of the copy floor, given order / line first:
#: H200 d = 4, 5, 6, 7 1.198 / 1.172, 1.194 / 1.182, 1.631 / 1.591, 3.545 / 3.361; H100 1.091 /
#: 1.087, 1.078 / 1.088, 1.187 / 1.143, 2.516 / 2.407 (d = 3 not measured).
REORDER_FROM = 4
_THREADS = 256
_SOURCE = Path(__file__).parent / "kernels" / "dense_gate.cu"
_MMA_SOURCE = Path(__file__).parent / "kernels" / "dense_gate_mma.cu"
_MEMCPY_D2D = 3  # cudaMemcpyDeviceToDevice


def _module(d: int, device: int, single: bool = False, words: tuple = ()):
    return raw_module(_SOURCE, ("-std=c++17", f"-DGATE_QUBITS={d}", f"-DSINGLE={int(single)}")
                      + words)


def _mma_columns(d: int) -> int:
    """Columns (amplitude groups) per tile of ``dense_gate_mma.cu`` (its ``NC``: the option's,
    else the kernel's default)."""
    return MMA_OPTIONS.get(d, {}).get("NC", 32 if d >= 7 else 64)


#: Options of ``dense_gate_mma.cu`` per d, the fastest measured on an H200 at N = 30 (m16n8k8,
#: ``MMA_K8``, from compute capability 9.0: :func:`_mma_options`): register loads one tile ahead
#: at d = 3..6 (cp.async with 2 or 3 stages: 1.5x / 1.6x / 2.6-2.8x at d = 4 / 5 / 6); at d = 3..5
#: U itself in shared memory (A_SMEM = 2), with 128-column tiles at d = 4, 5 (d = 5: 1.21-1.42x
#: random targets against 1.33-1.55x with 64; d = 3: 1.29x against 1.16x); at d = 6 the
#: fragments in shared memory (A_SMEM = 1; U itself 1.74x against 1.73x; 32-column tiles
#: 1.84x; cp.async 1.72-1.76x). From d = 5, Gauss's three real products (GAUSS = 1, the
#: kernel's ``gauss_products``) instead of the real embedding's four: random targets d = 5
#: 1.14 -> 1.11x, d = 6 2.13 -> 1.73x with two warps along m (WGM = 2; 4: 2.08x, 1: 1.83x),
#: d = 7 3.84 -> 3.13x (the GEMM path: 4.4x); d = 4 1.11 -> 1.15x, so not there. At d = 6 its
#: k loop fully unrolled (GAUSS_UNROLL = 8: 1.65x against 1.77x with 2; 1 and 4 1.89x). With
#: m8n8k4 (before): d = 5 1.51-1.71x, d = 6 2.77-3.03x, d = 7 5.8x.
MMA_OPTIONS: dict = {3: {"ASYNC": 0, "A_SMEM": 2}, 4: {"ASYNC": 0, "A_SMEM": 2, "NC": 128},
                     5: {"ASYNC": 0, "A_SMEM": 2, "NC": 128, "GAUSS": 1},
                     6: {"ASYNC": 0, "A_SMEM": 1, "GAUSS": 1, "WGM": 2, "GAUSS_UNROLL": 8},
                     7: {"STAGES": 2, "GAUSS": 1}}
#: Options that need ``mma.sync m16n8k8 f64`` (dropped on devices without it).
_K8_ONLY = ("GAUSS", "WGM", "GAUSS_UNROLL")


def _options(d: int) -> dict:
    """:data:`MMA_OPTIONS` at d as this device compiles them: Gauss's form needs m16n8k8."""
    opts = dict(MMA_OPTIONS.get(d, {}))
    if not _has_k8(cp.cuda.Device().id):
        for key in _K8_ONLY:
            opts.pop(key, None)
    return opts


def _mma_options(d: int) -> tuple:
    """``-D`` options of ``dense_gate_mma.cu`` at d on this device: :func:`_options`, and
    ``MMA_K8`` (``mma.sync m16n8k8 f64``) from compute capability 9.0, where m8n8k4 runs at half
    the FP64 tensor rate (H200: 33 against 67 TFLOP/s, a products-only loop of each)."""
    k8 = _has_k8(cp.cuda.Device().id)
    return tuple(f"-D{k}={v}" for k, v in {"MMA_K8": k8, **_options(d)}.items())


@functools.lru_cache(maxsize=None)
def _has_k8(device: int) -> int:
    """1 where ``mma.sync m16n8k8 f64`` exists (compute capability 9.0 on), else 0."""
    return int(int(cp.cuda.Device(device).compute_capability) >= 90)


def mma_smem_bytes(d: int) -> int:
    """Dynamic shared memory of ``dense_gate_mma.cu`` at d on this device: ``STAGES`` B tiles
    (``NC`` columns of ``2**(d+1) + 4`` doubles, ``+ 8`` with GAUSS) with their ``NC`` column
    bases and, with A_SMEM, A's fragments or U, bytes."""
    opts = _options(d)
    nc, r = _mma_columns(d), 2 << d
    gauss = opts.get("GAUSS", 0)
    a = {0: 0, 1: (3 * r * r // 4 if gauss else r * r) * 8,
         2: (r // 2) * (r // 2 + (4 if gauss else 1)) * 16}[opts.get("A_SMEM", 0)]
    stages = opts.get("STAGES", 3) if opts.get("ASYNC", 1) else 1
    return stages * (nc * (r + (8 if gauss else 4)) + nc) * 8 + a


def mma_fragments(matrix):
    """The real form of a gate as m8n8k4 f64 A fragments of ``kernels/dense_gate_mma.cu``.

    Args:
        matrix: ``(K, K)`` complex128 CuPy array, ``K = 2**d >= 8``.

    Returns:
        ``(2K / 8, 2K / 4, 32)`` float64 CuPy array: m tile ``t``, k step ``ks``, lane ``l``
        holds row ``l // 4`` of the tile, column ``4 ks + l % 4`` (PTX ISA, "Matrix Fragments
        for mma.m8n8k4 with .f64") of the real matrix M with ``[Re y; Im y] = M x``: tile ``2j``
        holds the rows of Re, tile ``2j + 1`` those of Im of members ``8j .. 8j + 7``; column
        ``2 m`` multiplies Re and column ``2 m + 1`` Im of input member ``m`` (the order of B in
        shared memory, where each amplitude is copied as it lies).
    """
    k = matrix.shape[0]
    ur, ui = matrix.real, matrix.imag
    rows_re = cp.stack([ur, -ui], axis=2).reshape(k, 2 * k)  # Re y_r = sum Ur x_re - Ui x_im
    rows_im = cp.stack([ui, ur], axis=2).reshape(k, 2 * k)   # Im y_r = sum Ui x_re + Ur x_im
    emb = cp.stack([rows_re.reshape(k // 8, 8, 2 * k), rows_im.reshape(k // 8, 8, 2 * k)], axis=1)
    emb = emb.reshape(k // 4, 8, k // 2, 4).transpose(0, 2, 1, 3)
    return cp.ascontiguousarray(emb, dtype=cp.float64)


def gauss_fragments(matrix):
    """A gate's three real products of Gauss's form as m16n8k8 f64 A fragments of
    ``kernels/dense_gate_mma.cu`` with ``GAUSS = 1`` (its ``gauss_products``).

    Args:
        matrix: ``(K, K)`` complex128 CuPy array ``U = a + ib``, ``K = 2**d >= 16``.

    Returns:
        ``(3, K / 16, K / 8, 2, 32, 2)`` float64 CuPy array: product ``p`` (``a + b``, ``b``,
        ``a``), member pair ``j``, k step ``kp``, half ``h``, lane ``l = 4 g + t``, element
        ``e``: row ``16 j + 8 e + g``, column ``8 kp + 4 h + t`` of product p's matrix (PTX ISA,
        "Matrix Fragments for mma.m16n8k8" with .f64: a0 / a1 for h = 0, a2 / a3 for h = 1).
    """
    k = matrix.shape[0]
    a, b = matrix.real, matrix.imag
    planes = cp.stack([a + b, b, a]).reshape(3, k // 16, 2, 8, k // 8, 2, 4)
    frags = planes.transpose(0, 1, 4, 5, 3, 6, 2).reshape(3, k // 16, k // 8, 2, 32, 2)
    return cp.ascontiguousarray(frags, dtype=cp.float64)


def apply_dense_mma(psi, matrix, positions) -> None:
    """``psi <- U psi`` on the target qubits at ``positions``, in place, in one pass, by FP64
    tensor-core products (``kernels/dense_gate_mma.cu``); arguments as :func:`apply_dense`,
    ``d`` in :data:`MMA_QUBITS`. From d = :data:`REORDER_FROM` the kernel takes the targets in
    :func:`ozsim.gemm._permutation.line_first_order` (the gate's rows and columns permuted to
    match, a ``2**d x 2**d`` copy): the same gate, its k sums in another order.

    Raises:
        ValueError: as :func:`apply_dense`.
    """
    d = _check(psi, matrix, positions, MMA_QUBITS)
    u = cp.ascontiguousarray(matrix, dtype=cp.complex128)
    if d >= REORDER_FROM:
        perm = line_first_order(positions)
        if perm != tuple(range(d)):  # the same gate on the targets in the kernel's best order
            u = cp.ascontiguousarray(permute_gate_qubits(u, perm))
            positions = [positions[j] for j in perm]
    mod = raw_module(_MMA_SOURCE, ("-std=c++17", f"-DGATE_QUBITS={d}") + _mma_options(d))
    kernel = mod.get_function("dense_gate_mma")
    smem = mma_smem_bytes(d)
    if kernel.max_dynamic_shared_size_bytes < smem:
        kernel.max_dynamic_shared_size_bytes = smem
    opts = _options(d)
    frags = (u if opts.get("A_SMEM") == 2 else
             gauss_fragments(u) if opts.get("GAUSS") else mma_fragments(u))
    groups = psi.size >> d
    blocks = int(max(1, min(-(-groups // _mma_columns(d)), 4 * _sms())))
    pos = [int(p) for p in positions] + [0] * (7 - d)
    kernel((blocks,), (_THREADS,), (psi, np.int64(groups), *(np.int32(p) for p in pos), frags),
           shared_mem=smem)


def _check(psi, matrix, positions, sizes) -> int:
    d = len(positions)
    n = int(psi.size).bit_length() - 1
    if d not in sizes or d >= n:
        raise ValueError(f"the one-pass kernel takes {sizes.start}..{sizes.stop - 1} targets "
                         f"below n = {n}; got {d}")
    if len(set(positions)) != d or not all(0 <= int(p) < n for p in positions):
        raise ValueError(f"target bit positions must be distinct and in 0..{n - 1}: {positions}")
    if tuple(matrix.shape) != (1 << d, 1 << d) or psi.size != 1 << n:
        raise ValueError(f"shapes do not match: state {psi.shape}, gate {matrix.shape}")
    return d


def apply_dense(psi, matrix, positions) -> None:
    """``psi <- U psi`` on the target qubits at ``positions``, in place, in one pass: the
    CUDA-core kernel below d = :data:`MMA_FROM`, the tensor-core kernel from there (where the
    device has FP64 tensor cores and the shared memory it needs; else the CUDA-core one), and
    at d = 3 also where a target is among the 5 lowest bits (H200, N = 30, U in shared memory:
    1.10-1.16x the copy floor for 9 of 10 such placements, 1.30x for bit 0 with the two
    highest, against the CUDA-core kernel's 1.41-1.65x; with the targets higher the CUDA cores
    win, 1.03x against 1.14x).

    Args:
        psi: ``(2**n,)`` complex128 CuPy array, C-contiguous (the state in the engine's buffer
            order); complex64 runs the FP32 CUDA-core kernel at every d.
        matrix: ``(2**d, 2**d)`` complex128 CuPy array, little-endian over the targets: bit j of
            its row/column index is the amplitude-index bit ``positions[j]``.
        positions: d distinct bit positions in ``0..n-1``, ``d < n``, ``1 <= d <= 6``, or 7
            on FP64 tensor cores (compute capability 8.0 on; faster than the GEMM path where
            :func:`one_pass_qubits` says so).

    Raises:
        ValueError: ``d`` out of range, repeated or out-of-range positions, or shapes that do
            not match.
    """
    d = len(positions)
    if not 1 <= d <= max(MMA_QUBITS):
        raise ValueError(f"the one-pass kernels take 1..{max(MMA_QUBITS)} targets; got {d}")
    # 3 qubits with a target among the 5 lowest bits: the tensor-core kernel (H200, N = 30,
    # U in shared memory: 1.10-1.16x the floor against 1.41-1.54x for the CUDA cores' staged
    # variant; on high bits the CUDA cores' 1.03x)
    low = d == 3 and min(positions) < 5
    if ((MMA_FROM <= d <= max(MMA_QUBITS) or low) and psi.dtype == cp.complex128
            and _mma_fits(d)):
        apply_dense_mma(psi, matrix, positions)
    else:
        apply_dense_cuda_cores(psi, matrix, positions)


def one_pass_qubits() -> int:
    """The largest gate :func:`apply_dense` applies on this device faster than the GEMM path:
    7 where ``mma.sync m16n8k8 f64`` runs Gauss's form at d = 7 (H200, N = 30: 3.1x the copy
    floor against the GEMM path's 4.4x; with m8n8k4 the real embedding took 5.8x), else 6."""
    return 7 if _has_k8(cp.cuda.Device().id) and _mma_fits(7) else MAX_QUBITS


def _mma_fits(d: int) -> bool:
    """Whether this device runs ``dense_gate_mma.cu`` at d: FP64 ``mma.sync`` (compute
    capability 8.0 on) and the shared memory its options need (an A100 has 163 KiB a block, an
    H100 227 KiB)."""
    return _device_fits(cp.cuda.Device().id, mma_smem_bytes(d))


@functools.lru_cache(maxsize=None)
def _device_fits(device: int, smem: int) -> bool:
    dev = cp.cuda.Device(device)
    return (int(dev.compute_capability) >= 80
            and smem <= dev.attributes["MaxSharedMemoryPerBlockOptin"])


def apply_dense_cuda_cores(psi, matrix, positions) -> None:
    """:func:`apply_dense` by fused multiply-adds on CUDA cores (``kernels/dense_gate.cu``),
    any ``1 <= d <= MAX_QUBITS``: FP64 for a complex128 ``psi``, FP32 for a complex64 one (the
    single-precision backends' one-pass kernel; the gate is rounded to complex64).

    Raises:
        ValueError: as :func:`apply_dense`.
    """
    d = _check(psi, matrix, positions, range(1, MAX_QUBITS + 1))
    single = psi.dtype == cp.complex64
    mod = _module(d, cp.cuda.Device().id, single)
    u = cp.ascontiguousarray(matrix, dtype=cp.complex64 if single else cp.complex128)
    launch_cuda_cores(mod, psi, positions, {"gate_u": u})


def launch_cuda_cores(mod, psi, positions, constants: dict) -> None:
    """Copy ``constants`` (name -> CuPy array) into ``mod``'s constant memory and launch its
    ``dense_gate`` (or, targets among the 5 lowest bits, ``dense_gate_low``) over ``psi``: the
    launch of :func:`apply_dense_cuda_cores` and of the multiword gates of
    :mod:`ozsim.gemm.single.onepass` (``mod`` from :func:`_module`)."""
    d = len(positions)
    single = psi.dtype == cp.complex64
    stream = cp.cuda.get_current_stream()
    for name, value in constants.items():
        cp.cuda.runtime.memcpyAsync(mod.get_global(name).ptr, value.data.ptr, value.nbytes,
                                    _MEMCPY_D2D, stream.ptr)
    groups = psi.size >> d
    threads = groups * (2 if d >= 6 else 1)
    pos = [int(p) for p in positions] + [0] * (6 - d)
    args = (psi, np.int64(groups), *(np.int32(p) for p in pos))
    if min(positions) < 5 and groups % _THREADS == 0 and d <= (4 if single else 3):
        # targets among the 5 lowest bits: the shared-memory-staged variant (coalesced)
        mod.get_function("dense_gate_low")((groups // _THREADS,), (_THREADS,), args)
        return
    mod.get_function("dense_gate")((int(-(-threads // _THREADS)),), (_THREADS,), args)
