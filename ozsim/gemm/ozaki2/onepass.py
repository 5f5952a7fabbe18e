"""One-pass gates by Ozaki scheme II on the GPU (``int8-crt{N}``, ``int8-crt-auto``), ``d <= 6``.

Private; imported only when a CuPy state meets a gate of at most :data:`MAX_QUBITS` qubits. The
GEMM path of a state-vector gate makes many passes over the state (a transposing copy, the
analysis, the residues of every modulus, the INT8 products, the CRT reconstruction: 170 to 330
times the time of one read and one write of the state at d <= 2 on an H100, where the INT8
tiles are nearly empty). This kernel does the whole of
:func:`ozsim.gemm.ozaki2.scheme.int8_crt_zgemm` for one amplitude group in registers and writes
the result in place (algorithm and exactness argument: ``ozsim/gemm/kernels/crt_gate.cu``):
one read and one write of the state, ``int8-crt-auto`` included (its number of moduli depends on
the gate alone: :func:`ozsim.gemm.ozaki2.choose_plan`). Same bits as the CPU path.

Four kernels:

- ``d = 3..6`` with up to 15 moduli (:func:`ozsim.gemm.ozaki2.exact_gate.slices_apply`,
  :data:`SLICE_QUBITS`): ``kernels/crt_gate_slices.cu``, exact products of byte slices on the
  INT8 tensor cores, no residues either. Each scaled integer (below ``2**62``) is 8 balanced
  bytes, and ``C' = sum_{i,j} 2**(8 (i + j)) A'_i B'_j`` with every slice pair kept: one
  ``mma.sync`` m16n8k32 product (m16n8k16 at ``d = 3``) of the real embedding a pair, each level
  ``i + j`` one INT32 accumulator (exact: below ``2**24``), the 15 levels folded into three
  64-bit parts of five levels (``C' = g0 + 2**40 g1 + 2**80 g2``, one part a digit of the CRT's
  base ``2**40``, whose digits follow by 64-bit carries) and rounded as below. A warp takes 8
  amplitude groups and each lane the members whose real and imaginary parts its B fragments
  hold, so the state's slices never touch shared memory; A's 8 slices are ready-made fragments
  there (:func:`slice_fragments`). About 10 warp instructions an amplitude at ``d = 4`` where
  the residue kernel takes 22, and ``2**d / 16`` INT8 products (they bound d = 5, 6). Same
  bits. H200, N = 30, 15
  moduli: 2.08x, 2.29x, 2.96x, 5.07x the copy floor at d = 3..6 (``benchmarks/RESULTS.md``
  section 2), where the kernels before took 2.68x (the exact kernel below), 4.08x, 4.63x,
  5.87x (the residue kernel).
- ``d <= 2`` (``d = 3`` outside :data:`SLICE_QUBITS`) with up to 15 moduli
  (:func:`ozsim.gemm.ozaki2.exact_gate.exact_applies`):
  ``kernels/crt_gate_exact.cu``, one thread per amplitude group on the CUDA cores, no residues
  at all. The scheme's integer product ``C' = A' B'`` is exact, and at ``k = 2**d <= 8`` each
  entry is a sum of ``2 k`` products of integers below ``2**60``: the kernel forms it in 64-bit
  integer arithmetic (Gauss's three real products, 29-bit limbs, ``12 k`` 32 x 32 -> 64-bit
  multiply-adds an amplitude; the sums' bounds: :func:`~ozsim.gemm.ozaki2.exact_gate.
  exact_limb_bounds`) and rounds it as the CRT reconstruction does (balanced base-``2**40``
  digits summed from the lowest up; at a tie between two balanced forms, from the residues
  ``q_p C' mod p`` and the CRT's own digit sums). Same bits. H200, N = 30, 15 moduli: 1.58x,
  1.87x, 2.92x the copy floor at d = 1, 2, 3, against 21.5x, 7.3x (the CUDA-core residue kernel
  below) and 3.76x (the tensor-core one, which 1- and 2-qubit gates were padded to before);
  Nsight Compute at d = 1: integer (ALU) pipe 69% busy, issue slots 68%, 8.4 warp instructions
  an amplitude where the copy floor leaves time for 7.9. At d = 4 its ``192`` multiply-adds an
  amplitude would cost more than the tensor-core kernel.
- ``d <= 2`` with 16 or more moduli: ``kernels/crt_gate.cu``, one thread per amplitude group on
  the CUDA cores (a simulator pads such gates to 3 qubits: the registry's ``pad_gates``). Cost per
  amplitude with N moduli and L digits of P: about ``2 N (NPIECE + 3 + 2 * 2**d)`` FP32 operations
  (residues and products) and ``2 N L`` FP64 multiply-adds (the CRT sums' digits; the quotient
  comes from them, ``crt_gate.cuh``, Q_FROM_LIMBS); the FP64 part is the larger one on an H100.
- ``d = 3..6`` with 16 or more moduli: ``kernels/crt_gate_mma.cu`` on the INT8 tensor
  cores (``mma.sync`` m16n8k32), one block of 16 warps an SM (:data:`_MMA_THREADS`) per tile of
  256 (``d = 3``), 128 (``d = 4``), 64 (``d = 5``) or 32 (``d = 6``) amplitude groups (four
  members a thread in the split: :data:`_SPLIT_MEMBERS`), its warps in groups that run their
  phases apart (``group_sync.cuh``), A's residues as ready-made fragments in shared memory (made
  once per gate and plan; at ``d = 5, 6`` paired, :func:`ozsim.gemm._mma_gate.paired_fragments`:
  at 6 12 KiB a modulus instead of 16, as many moduli in shared memory as fit beside B's residues,
  12 of 15 on an H100 or H200, the others read from global memory: :data:`_PAIRED_QUBITS`), one
  INT8 product per modulus, the CRT sums in FP64 (``2 L`` multiply-adds an amplitude and modulus,
  each residue entering as ``256 + u`` made by integer arithmetic, not the conversion unit; the
  quotient from the digit sums: ``crt_gate.cuh``, CRT_CVT and Q_FROM_LIMBS; the larger part of the
  work).
  B enters the products in one of two forms:

  - ``d = 4..6`` (and ``N > 16``): B's residues of every modulus, ``N`` INT8 planes. For ``N <=
    16`` with integer pieces they come from the INT8 tensor cores too (``TC_SPLIT``): each
    scalar's 8 balanced bytes times the weights ``2**(8 i) mod p`` of all moduli, four
    ``m16n8k32`` products for 32 scalars, one FP32 reduction a scalar and modulus (about 90
    instructions a scalar instead of 200); else each made from 12-bit pieces of the scalar
    (``NPIECE + 4`` FP32 operations a scalar and modulus). ``8 N max(2**d, 16)`` INT8
    operations an amplitude in the products.
  - ``d = 3`` with ``N <= 16`` (:data:`DIGIT_QUBITS`): B's balanced byte digits, one plane for
    every modulus (a conversion to INT64 and two logic operations a scalar), and A's embedding
    column ``kk`` widened to ``8`` columns ``A[:, kk] 2**(8 i) mod p``: the products compute
    ``sum_i A 2**(8 i) b_i = A v`` mod p, 4 times the INT8 operations (``512 N`` an amplitude;
    the residue form pads its inner dimension 16 to 32) for no residue arithmetic on B at all.
    At ``d = 4`` this form needs 8 KiB of A a modulus in shared memory, one block an SM, and runs slower (H100, N = 28, 15 moduli: 6.2x
    the copy floor against 4.5x).

The residue tensor-core kernel, measured on an H200 with 15 moduli, which it no longer takes
(N = 30, ``benchmarks/gate_bench.py``, 2026-11-27): 3.85x, 4.22x,
4.77x, 6.04x the copy floor at d = 3, 4, 5, 6 (an H100, before ``residue_byte``: 2.65x, 2.86x,
3.62x, 4.17x), bound by the per-amplitude arithmetic rather than by memory: Nsight Compute finds
the issue slots 59-78% busy and no pipe above 45%, about 14 instructions a modulus and entry
(B's residues, the CRT sums' 3 FP64 multiply-adds and the reduction of each product mod p). The
phases of a tile load different pipes (the split the integer and FP32 units and the tensor cores,
the CRT sums the FP64 units), so the warp groups of a block run them apart. At d = 6 the GEMM
path took 12.3x (9.2x padded to 7 qubits). With the byte-slice kernel fusion takes QV-30 in 116
blocks of up to 5 qubits (``benchmarks/RESULTS.md`` section 3: 2.67 s end to end, against the
cuBLAS path's 3.27 s in the same run; 4.04 s on the residue kernel, in 6-qubit blocks).
"""

from __future__ import annotations

import functools
from pathlib import Path

import cupy as cp
import numpy as np

from ...errors import NonFiniteError
from .. import _mma_gate
from .._gpu import _sms, persistent_grid, raw_module
from .cuda import prepared_residues
from .exact_gate import EXACT_LIMB_BITS as _EXACT_LIMB_BITS
from .exact_gate import exact_applies, slices_apply
from .gate_tables import PIECE_BITS as _PIECE_BITS
from .gate_tables import upload_tables
from .moduli import LIMB_BITS, NORM_FRAC_BITS, crt_constants

__all__ = ["MAX_QUBITS", "apply"]

#: Largest gate of the one-pass kernels (the tensor-core one keeps the CRT sums of 8 entries a
#: thread: 8 (L + 1) doubles; at d = 5 A's 15 planes are 60 KiB; at d = 6, with tiles of 32
#: columns, A's planes are 12 KiB each as paired fragments, 12 of them in shared memory beside
#: B's 15 planes of residues).
MAX_QUBITS = 6
#: Members a thread splits where ``crt_gate_mma.cu`` narrows ``mma_gate.cuh``'s default: its
#: ``-DMPT`` and the tile shape of :func:`ozsim.gemm._mma_gate.tile`, from here alone.
_SPLIT_MEMBERS = {5: 4, 6: 4}
#: Gates whose A operand is in paired fragments (``crt_gate_mma.cu``, A_PAIRED; at d = 6 each
#: warp one m tile, ``-DWGM=8``): the 6-qubit embedding is 16 KiB a modulus, 12 paired. At d = 5
#: a quarter fewer shared-memory bytes a product (H200, N = 30, 15 moduli: random targets
#: 5.05-5.11x -> 4.72-4.80x the copy floor, the lowest 4.68-4.71x -> 4.74-4.76x; same bits).
_PAIRED_QUBITS = frozenset({5, 6})
#: Shared memory a block keeps for its static arrays beyond the column tables and the member
#: offsets (the residue products' A fragments, 2 KiB, and a margin).
_STATIC_SMEM = 2560
#: Threads a block of the tensor-core kernel (its ``-DTHREADS``; the tile is ``threads / TPC``
#: columns): 16 warps, one block an SM (128 registers a thread), so that each SM holds A's planes
#: once and the warp groups of ``group_sync.cuh`` (two to eight of them) run their phases apart.
#: H200, N = 30, 15 moduli, against two blocks of 8 warps an SM: 3.90x -> 3.75x the copy floor at
#: d = 3, 4.30-4.33x -> 4.09-4.16x at 4, 4.96-5.35x -> 4.79-5.16x at 5 (384 threads: 4.47-4.51x
#: at 4); at d = 6 (A's paired planes fill the shared memory) 6.74-7.23x -> 6.16-6.75x against 8
#: warps. Same bits.
_MMA_THREADS = 512
#: Words between B's residue planes beyond a plane's own (``crt_gate_mma.cu``, PLANE_PAD: the
#: residue products' stores spread over the banks; 3-4% at d = 4..6 on an H200).
_PLANE_PAD = 4
#: Largest gate of the CUDA-core kernel (registers: 2 * 2**d * NPIECE pieces, 2**d (L + 1) sums).
MAX_SCALAR_QUBITS = 2
#: Gates whose tensor-core kernel takes B as byte digits (one INT8 plane for every modulus, the
#: residues folded into A: ``crt_gate_mma.cu``, DIGITS), for ``gB <= 62`` (``N <= 16``).
DIGIT_QUBITS = frozenset({3})
_DIGITS, _DIGIT_BITS, _DIGIT_MAX_BITS = 8, 8, 62
_KERNELS = Path(__file__).resolve().parent.parent / "kernels"
_SOURCE = _KERNELS / "crt_gate.cu"
_EXACT_SOURCE = _KERNELS / "crt_gate_exact.cu"
_SLICES_SOURCE = _KERNELS / "crt_gate_slices.cu"
_MMA_SOURCE = _KERNELS / "crt_gate_mma.cu"
_MEMCPY_H2D, _MEMCPY_D2D = 1, 3


def _num_pieces(bits_b: int) -> int:
    """Pieces of ``_PIECE_BITS`` bits that hold a state scalar's integer, ``|v| <= 2**bits_b``."""
    return -(-(bits_b + 1) // _PIECE_BITS)


def _digits(d: int, plan) -> bool:
    """Whether the tensor-core kernel takes B as byte digits (``crt_gate_mma.cu``, DIGITS)."""
    return d in DIGIT_QUBITS and plan.bits_b <= _DIGIT_MAX_BITS


@functools.cache  # (one device query per device, d, N and form of B)
def _layout(d: int, num_moduli: int, digits: bool, device: int) -> tuple[int, int]:
    """``(threads, a_planes)`` of the tensor-core kernel on device ``device``: a block's threads
    (:data:`_MMA_THREADS`, or 256 where B's residues of a 512-thread tile and A's planes do not
    fit a block's shared memory, as 19 or 20 moduli at d = 3) and the moduli whose A fragments
    it keeps in shared memory (the rest it reads from global memory, through L2): all of them
    at d <= 5; at d = 6 as many as fit beside B's residues (12 of 15 on compute capability
    9.0)."""
    if d <= MAX_SCALAR_QUBITS:  # (the CUDA-core kernel: no shared memory of its own)
        return _MMA_THREADS, num_moduli
    limit = cp.cuda.Device(device).attributes["MaxSharedMemoryPerBlockOptin"]
    kd = (2 << d) * _DIGITS if digits else None
    for threads in (_MMA_THREADS, _mma_gate.THREADS):
        nc, _, w = _mma_gate.tile(d, kd, _SPLIT_MEMBERS.get(d), threads)
        static = 12 * nc + 8 * (1 << d) + _STATIC_SMEM  # column tables, member offsets, tc_a
        room = limit - static - 4 * (1 if digits else num_moduli) * (nc * w + _PLANE_PAD)
        if d in _PAIRED_QUBITS:
            plane = _mma_gate.a_fragment_bytes(d, 1, paired=True)
            return threads, max(0, min(num_moduli, room // plane))
        if _mma_gate.a_fragment_bytes(d, num_moduli, kd) <= room:
            break
    return threads, num_moduli


@functools.cache  # (the constant tables are uploaded once per module)
def _module(d: int, num_moduli: int, rounding: bool, npieces: int, digits: bool, device: int,
            int_pieces: bool = False, smem_planes: int | None = None,
            threads: int = _MMA_THREADS):
    const = crt_constants(num_moduli)
    paired = (("-DA_PAIRED=1", f"-DA_SMEM_PLANES={smem_planes}") if d in _PAIRED_QUBITS
              else ()) + (("-DWGM=8",) if d == 6 else ()) + (f"-DPLANE_PAD={_PLANE_PAD}",
                                                             f"-DTHREADS={threads}")
    mod = raw_module(_MMA_SOURCE if d > MAX_SCALAR_QUBITS else _SOURCE, (
        "-std=c++17", f"-DGATE_QUBITS={d}", f"-DNMOD={num_moduli}",
        f"-DNLIMB={const.num_limbs}", f"-DROUND={int(rounding)}", f"-DNPIECE={npieces}",
        f"-DDIGITS={int(digits)}", f"-DINT_PIECES={int(int_pieces)}",
        f"-DNFRAC={NORM_FRAC_BITS}", f"-DLBITS={LIMB_BITS}")
        + ((f"-DMPT={_SPLIT_MEMBERS[d]}",) if d in _SPLIT_MEMBERS else ()) + paired)
    upload_tables(mod, num_moduli, npieces)
    return mod


#: ``crt_gate_exact.cu``'s block per d: (threads, least blocks an SM its registers must allow).
#: H200, N = 30, 15 moduli, x copy floor (means of 4 target sets): d = 1 1.58 (256 x 2: 1.67,
#: 512: 1.75, 128 x 8 at 64 registers: level); d = 2 1.87 (128: 1.94, 256 x 2: 1.88, 512: 2.35);
#: d = 3 2.92 (128: 3.45, 128 x 6: 3.25, 256 x 3: 3.10, 512: 3.14).
EXACT_LAUNCH = {1: (128, 1), 2: (256, 1), 3: (256, 2)}
#: ``crt_gate_exact.cu``'s KARATSUBA per d: 3 multiplies a real product instead of 4 (and an
#: addition more a scalar). H200, N = 30, 15 moduli: d = 3 2.83x against 3.11x the floor, d = 2
#: 2.05x against 1.92x, level at 1.
EXACT_KARATSUBA = {1: False, 2: False, 3: True}


@functools.cache  # (the constant tables are uploaded once per module)
def _exact_module(d: int, num_moduli: int, rounding: bool, device: int, test: bool = False,
                  launch: tuple[int, int] = (128, 1), karatsuba: bool = True):
    const = crt_constants(num_moduli)
    mod = raw_module(_EXACT_SOURCE, (
        "-std=c++17", "--device-int128", f"-DGATE_QUBITS={d}", f"-DNMOD={num_moduli}",
        f"-DNLIMB={const.num_limbs}", f"-DROUND={int(rounding)}",
        f"-DTBITS={_EXACT_LIMB_BITS}", f"-DNFRAC={NORM_FRAC_BITS}", f"-DLBITS={LIMB_BITS}",
        f"-DTHREADS={launch[0]}", f"-DMIN_BLOCKS={launch[1]}", f"-DKARATSUBA={int(karatsuba)}")
        + (("-DEXACT_TEST",) if test else ()))
    _upload_exact_tables(mod, num_moduli)
    return mod


def _upload_exact_tables(mod, num_moduli: int) -> None:
    """``crt_gate.cuh``'s tables and ``crt_exact.cuh``'s (the CRT weights ``q_p`` and
    ``2**(LIMB_BITS c) mod p`` of its tie path) in ``mod``."""
    const = crt_constants(num_moduli)
    upload_tables(mod, num_moduli)
    pows = [pow(2, LIMB_BITS * c, p) for p in const.moduli for c in range(1, const.num_limbs)]
    for name, host in (("crt_q", const.weights), ("crt_pow", pows or [0])):
        host = np.ascontiguousarray(host, dtype=np.int32)
        cp.cuda.runtime.memcpy(mod.get_global(name).ptr, host.ctypes.data, host.nbytes,
                               _MEMCPY_H2D)


def _scaled_gate(prep, plan):
    """The gate's scaled integers ``A' = rnd(ldexp(A, gA - fA))`` (as the residues take them):
    ``(Re A', Im A')``, ``(K, K)`` int64 CuPy arrays."""
    shift = (plan.bits_a - cp.asarray(prep.norm_exponents, dtype=cp.int32))[:, None]
    rnd = cp.rint if plan.rounding else cp.trunc

    def scaled(x):  # exact: a power-of-two scaling, then the scheme's one rounding
        return rnd(cp.ldexp(cp.ascontiguousarray(x, dtype=cp.float64), shift)).astype(cp.int64)

    return scaled(prep.matrix.real), scaled(prep.matrix.imag)


def exact_limbs(prep, plan):
    """The gate's scaled integers (:func:`_scaled_gate`) in ``crt_gate_exact.cu``'s limbs:
    ``(3, K, K, 3)`` int32, ``[Re A', Im A', Re A' + Im A']`` by ``[high, low, high + low]``,
    cached on ``prep`` per plan."""
    cache = prep.__dict__.setdefault("_exact_limbs", {})
    key = (plan.bits_a, plan.rounding)
    limbs = cache.get(key)
    if limbs is None:
        ar, ai = _scaled_gate(prep, plan)
        v = cp.stack([ar, ai, ar + ai])
        hi, lo = v >> _EXACT_LIMB_BITS, v & ((1 << _EXACT_LIMB_BITS) - 1)
        limbs = cache[key] = cp.ascontiguousarray(
            cp.stack([hi, lo, hi + lo], axis=-1).astype(cp.int32))
    return limbs


def balanced_bytes(v):
    """The 8 balanced bytes of integers ``|v| <= 2**62``: ``(8,) + v.shape`` int8 ``b`` with
    ``sum_i b[i] 2**(8 i) = v``, ``b[i]`` in ``[-128, 127]`` (byte ``i`` of ``v + 0x80..80``
    less 128, as ``crt_gate.cuh``'s ``balanced_bytes``)."""
    w = v.astype(cp.uint64) + cp.uint64(0x8080808080808080)
    return cp.stack([((w >> cp.uint64(8 * i)) & cp.uint64(0xFF)).astype(cp.int16) - 128
                     for i in range(8)]).astype(cp.int8)


def slice_fragments(prep, plan):
    """The real embedding ``[[Re A', -Im A'], [Im A', Re A']]`` of the gate's scaled integers
    (:func:`_scaled_gate`) in 8 balanced-byte slices (``-Im A'`` sliced as an integer of its
    own) as ``crt_gate_slices.cu``'s A fragments: ``(8, K / 8, KD / 32, 32, 4)`` uint32
    (:func:`ozsim.gemm._mma_gate.row_fragments`), cached on ``prep`` per plan. Its columns are
    ``Re b`` then ``Im b`` of the members, at ``d = 3`` interleaved (``k = 2 m + part``), as the
    kernel's lanes hold B."""
    cache = prep.__dict__.setdefault("_slice_fragments", {})
    key = (plan.bits_a, plan.rounding)
    frags = cache.get(key)
    if frags is None:
        ar, ai = _scaled_gate(prep, plan)
        sr, si, sn = balanced_bytes(ar), balanced_bytes(ai), balanced_bytes(-ai)
        join = _interleave if prep.shape[0] == 8 else (lambda a, b: cp.concatenate([a, b], 2))
        frags = cache[key] = _mma_gate.row_fragments(join(sr, sn), join(si, sr))
    return frags


def _interleave(a, b):
    """``(..., K)`` and ``(..., K)`` -> ``(..., 2K)`` with ``a`` at even and ``b`` at odd columns."""
    return cp.stack([a, b], axis=-1).reshape(*a.shape[:-1], 2 * a.shape[-1])


#: Gates that take ``crt_gate_slices.cu`` where :func:`~ozsim.gemm.ozaki2.exact_gate.
#: slices_apply` allows it.
SLICE_QUBITS = frozenset({3, 4, 5, 6})
#: ``crt_gate_slices.cu``'s block per d: (threads, least blocks an SM its registers must allow).
#: H200, N = 30, 15 moduli, x copy floor: d = 3 2.28 (256 x 2: 2.32, 256 x 1: 2.36); d = 4 2.49
#: (256 x 1: 2.58, 256 x 2: 2.60, 128: 2.65); d = 5 3.17 (128 registers; 256 x 1 at 154: 3.53,
#: 256 x 2: 3.27); d = 6 5.07 (176 registers; 512 at 128: 5.51, 256 x 2: 6.60).
SLICE_LAUNCH = {3: (512, 1), 4: (512, 1), 5: (512, 1), 6: (256, 1)}
#: Extra ``-D`` options of ``crt_gate_slices.cu`` per d (none: the kernel's defaults).
SLICE_OPTIONS: dict[int, tuple] = {}


@functools.cache  # (the constant tables are uploaded once per module)
def _slices_module(d: int, num_moduli: int, rounding: bool, device: int,
                   launch: tuple[int, int], options: tuple = ()):
    const = crt_constants(num_moduli)
    mod = raw_module(_SLICES_SOURCE, (
        "-std=c++17", "--device-int128", f"-DGATE_QUBITS={d}", f"-DNMOD={num_moduli}",
        f"-DNLIMB={const.num_limbs}", f"-DROUND={int(rounding)}", f"-DNFRAC={NORM_FRAC_BITS}",
        f"-DLBITS={LIMB_BITS}", f"-DTHREADS={launch[0]}", f"-DMIN_BLOCKS={launch[1]}")
        + tuple(options))
    _upload_exact_tables(mod, num_moduli)
    return mod


def one_pass_kernel(d: int, plan) -> str:
    """Which kernel :func:`apply` runs for a d-qubit gate under ``plan``: ``"slices"``
    (``crt_gate_slices.cu``: :data:`SLICE_QUBITS` where ``slices_apply`` allows it), ``"exact"``
    (``crt_gate_exact.cu``) or ``"residues"`` (``crt_gate.cu``, ``crt_gate_mma.cu``)."""
    if d in SLICE_QUBITS and slices_apply(d, plan):
        return "slices"
    return "exact" if exact_applies(d, plan) else "residues"


def _apply_slices(psi, prep, positions, plan, groups, flag):
    d = len(positions)
    threads = SLICE_LAUNCH[d][0]
    mod = _slices_module(d, plan.num_moduli, plan.rounding, cp.cuda.Device().id,
                         SLICE_LAUNCH[d], SLICE_OPTIONS.get(d, ()))
    kernel = mod.get_function("crt_gate_slices")
    frags = slice_fragments(prep, plan)
    smem = frags.nbytes
    if kernel.max_dynamic_shared_size_bytes < smem:
        kernel.max_dynamic_shared_size_bytes = smem
    fa = cp.ascontiguousarray(prep.norm_exponents, dtype=cp.int32)
    tiles = -(-groups // 8)  # (8 groups a warp)
    blocks = persistent_grid(kernel, threads, smem, -(-tiles // (threads // 32)))
    kernel((blocks,), (threads,),
           (psi, np.int64(groups), *_positions(positions), frags, fa, np.int32(plan.bits_b),
            np.int32(plan.bits_a + plan.bits_b), flag), shared_mem=smem)


def _apply_exact(psi, prep, positions, plan, groups, flag):
    d = len(positions)
    threads, min_blocks = EXACT_LAUNCH[d]
    mod = _exact_module(d, plan.num_moduli, plan.rounding, cp.cuda.Device().id,
                        launch=(threads, min_blocks), karatsuba=EXACT_KARATSUBA[d])
    limbs = exact_limbs(prep, plan)
    fa = cp.ascontiguousarray(prep.norm_exponents, dtype=cp.int32)
    stream = cp.cuda.get_current_stream().ptr
    for name, src in (("a_limbs", limbs), ("a_f", fa)):
        cp.cuda.runtime.memcpyAsync(mod.get_global(name).ptr, src.data.ptr, src.nbytes,
                                    _MEMCPY_D2D, stream)
    mod.get_function("crt_gate_exact")(
        (int(-(-groups // threads)),), (threads,),
        (psi, np.int64(groups), *_positions(positions), np.int32(plan.bits_b),
         np.int32(plan.bits_a + plan.bits_b), flag))


def exact_values(values, num_moduli: int, force_residues: bool = False) -> np.ndarray:
    """``crt_gate_exact.cu``'s rounding of integers ``|C'| < P/2`` (Python ints) to float64, by
    its digits (the residues only at a tie) or, with ``force_residues``, always by the residues
    (for the tests)."""
    mod = _exact_module(1, num_moduli, True, cp.cuda.Device().id, test=True)
    mask = (1 << 64) - 1
    hi = cp.asarray(np.array([v >> 64 for v in values], dtype=np.int64))
    lo = cp.asarray(np.array([v & mask for v in values], dtype=np.uint64))
    out = cp.empty(len(values), dtype=cp.float64)
    mod.get_function("exact_value_test")(
        (-(-len(values) // 128),), (128,), (hi, lo, np.int32(len(values)),
                                           np.int32(force_residues), out))
    return out.get()


def _positions(positions) -> list[np.int32]:
    return [np.int32(p) for p in positions] + [np.int32(0)] * (6 - len(positions))


def apply(psi, prep, positions, plan, check_finite: bool = True) -> None:
    """``psi <- U psi`` by scheme II with ``plan``, in one pass.

    Args:
        psi: ``(2**n,)`` complex128 CuPy state, C-contiguous.
        prep: :class:`~ozsim.gemm.ozaki2.PreparedCRTOperand` of the ``(2**d, 2**d)`` gate
            (CuPy), little-endian over the amplitude-index bits ``positions``.
        positions: d distinct bit positions, ``1 <= d <= MAX_QUBITS``.
        plan: :class:`~ozsim.gemm.ozaki2.CRTPlan` (moduli and kept bits).
        check_finite: wait for the kernel's NaN/Inf flag (one device sync a gate); without it
            a non-finite column is left as it was, unreported here.

    Raises:
        NonFiniteError: NaN or Inf in the state (``check_finite``).
    """
    d = len(positions)
    flag = cp.zeros(1, dtype=cp.int32)
    groups = psi.size >> d
    kernel = one_pass_kernel(d, plan)
    if kernel == "slices":  # (no residue module to build)
        _apply_slices(psi, prep, positions, plan, groups, flag)
    elif kernel == "exact":
        _apply_exact(psi, prep, positions, plan, groups, flag)
    else:
        n_mod = plan.num_moduli
        device = cp.cuda.Device().id
        digits = _digits(d, plan)
        threads, smem_planes = _layout(d, n_mod, digits, device)
        mod = _module(d, n_mod, plan.rounding, _num_pieces(plan.bits_b), digits, device,
                      plan.bits_b <= _DIGIT_MAX_BITS,
                      smem_planes if d in _PAIRED_QUBITS else None, threads)
        if d > MAX_SCALAR_QUBITS:
            _apply_mma(mod, psi, prep, positions, plan, groups, flag, threads, smem_planes)
        else:
            _apply_scalar(mod, psi, prep, positions, plan, groups, flag)
    if check_finite and int(flag.get()[0]):
        raise NonFiniteError("the state vector has NaN or Inf amplitudes")


def _gate_residues(prep, plan):
    """A's weighted residues ``(N, [Ar, Ai], m, k)`` int8 for ``plan``: the GEMM path's one
    residue kernel (:func:`ozsim.gemm.ozaki2.cuda.prepared_residues`, cached on ``prep``)."""
    m, k = prep.shape
    res = prepared_residues(prep, plan.bits_a, plan.num_moduli, -(-k // 4) * 4, plan.rounding,
                            planes=2)
    return res[:, :, :m, :k]


def mma_fragments(prep, plan, digits: bool = False, paired: bool = False):
    """A's residues for ``plan`` as ``mma.sync`` A fragments, one plane per modulus
    (:func:`ozsim.gemm._mma_gate.a_fragments`; ``paired``: in 6 words a lane per pair of k
    steps, :func:`ozsim.gemm._mma_gate.paired_fragments`), made once per gate and plan.

    ``digits``: for B as byte digits (``k = 8 kk + i``), the embedding's column ``kk`` times
    ``2**(8 i) mod p``, reduced to ``[-(p // 2), (p - 1) // 2]``: ``KD = 16 K`` columns (the
    INT32 sums stay below ``16 K 128**2 = 2**21`` at ``d = 3``)."""
    cache = prep.__dict__.setdefault("_mma_fragments", {})
    key = (plan.bits_a, plan.num_moduli, plan.rounding, digits, paired)
    frags = cache.get(key)
    if frags is None:
        res = _gate_residues(prep, plan)  # (N, [Ar, Ai], m, k)
        if paired:
            frags = cache[key] = _mma_gate.paired_fragments(
                _mma_gate.a_fragments(res[:, 0], res[:, 1]))
        elif not digits:
            frags = cache[key] = _mma_gate.a_fragments(res[:, 0], res[:, 1])
        else:
            ar, ai = res[:, 0].astype(cp.int64), res[:, 1].astype(cp.int64)
            moduli = np.array(crt_constants(plan.num_moduli).moduli, dtype=np.int64)
            w = cp.asarray([[pow(2, _DIGIT_BITS * i, int(m)) for i in range(_DIGITS)]
                            for m in moduli], dtype=cp.int64)[:, None, None, :]  # (N, 1, 1, 8)
            p = cp.asarray(moduli)[:, None, None]

            def expand(rows):  # (N, K, 2K) -> (N, K, 2K * _DIGITS), symmetric residues
                x = (rows[..., None] * w).reshape(rows.shape[:2] + (-1,))
                return ((x + p // 2) % p - p // 2).astype(cp.int8)

            k = ar.shape[-1]
            frags = cache[key] = _mma_gate.row_fragments(
                expand(cp.concatenate([ar, -ai], axis=2)), expand(cp.concatenate([ai, ar], axis=2)),
                kd=2 * k * _DIGITS)
    return frags


def _apply_mma(mod, psi, prep, positions, plan, groups, flag, threads, a_planes):
    d = len(positions)
    digits = _digits(d, plan)
    kd = (2 << d) * _DIGITS if digits else None
    nc, _, w = _mma_gate.tile(d, kd, _SPLIT_MEMBERS.get(d), threads)
    n_mod = plan.num_moduli
    paired = d in _PAIRED_QUBITS
    frags = mma_fragments(prep, plan, digits, paired)
    fa = cp.ascontiguousarray(prep.norm_exponents, dtype=cp.int32)
    kernel = mod.get_function("crt_gate_mma")
    smem = (_mma_gate.a_fragment_bytes(d, a_planes, kd, paired)
            + 4 * (1 if digits else n_mod) * (nc * w + _PLANE_PAD))
    if kernel.max_dynamic_shared_size_bytes < smem:
        kernel.max_dynamic_shared_size_bytes = smem
    per_sm = 1 if threads >= _MMA_THREADS else 2  # (the blocks an SM holds: MIN_BLOCKS)
    blocks = int(max(1, min(-(-groups // nc), per_sm * _sms())))
    kernel((blocks,), (threads,),
           (psi, np.int64(groups), *_positions(positions), frags, fa, np.int32(plan.bits_b),
            np.int32(plan.bits_a + plan.bits_b), flag), shared_mem=smem)


def _apply_scalar(mod, psi, prep, positions, plan, groups, flag):
    res = _gate_residues(prep, plan)  # (N, [Ar, Ai], m, k)
    res = cp.ascontiguousarray(res, dtype=cp.float32)
    fa = cp.ascontiguousarray(prep.norm_exponents, dtype=cp.int32)
    stream = cp.cuda.get_current_stream().ptr
    cp.cuda.runtime.memcpyAsync(mod.get_global("a_res").ptr, res.data.ptr, res.nbytes,
                                _MEMCPY_D2D, stream)
    cp.cuda.runtime.memcpyAsync(mod.get_global("a_f").ptr, fa.data.ptr, fa.nbytes, _MEMCPY_D2D,
                                stream)
    mod.get_function("crt_gate")(
        (int(-(-groups // 128)),), (128,),
        (psi, np.int64(groups), *_positions(positions), np.int32(plan.bits_b),
         np.int32(plan.bits_a + plan.bits_b), flag))
