"""The GPU half of :mod:`ozsim.gemm.ozaki2` (Ozaki scheme II): CUDA kernels and cuBLAS INT8 GEMMs.

Private; imported only when a CuPy array reaches :mod:`ozsim.gemm.ozaki2`. It computes the CPU
path's integers and its one final rounding with the same operations in the same order, so
``int8-crt{N}`` and ``int8-crt-auto`` give the same bits on CPU and GPU (signed zeros aside).
Every intermediate is an exact integer (module docstring of :mod:`ozsim.gemm.ozaki2`), so FMA
contraction changes nothing: the one inexact FP64 sum, the quotient estimate ``sum u_p / p``, is
only used through ``rint``, which the margin of ``|C'| < (P / 2)(1 - 2**-40)`` makes exact.

============  ===================================================================================
stage         what runs
============  ===================================================================================
analyse       (``kernels/analyse.cu``) the ozIMMU exponent ``e`` per row and a NaN/Inf flag
              (pass 1), the exact integer sum of rounded-up squares (pass 2, which needs ``e``),
              then the norm exponents ``f``. For ``k <= 8192``
              ``crt_analyse_tile``: one kernel, X read once, a block taking whole rows with their
              values in registers. Above, ``crt_scan`` and ``crt_sumsq`` with k split in segments
              across the GPU (atomics combine integers, so the order is irrelevant), then
              ``crt_fin``.
residues      ``crt_residues32`` (``kernels/residues32.cu``; plans keeping <= 70 bits) or
              ``crt_residues`` (``kernels/residues.cu``, in FP64; both start from
              ``kernels/pieces.cuh``): reads each complex value once, scales it to its integer
              (``rint`` or ``trunc`` of ``ldexp(x, g - f)``), splits that exactly into 1..5 balanced
              pieces ``h_i`` of 13..16 bits (:func:`pieces32`), so that one FP32 FMA chain
              ``acc = sum h_i (2**(PB i) mod p)`` below ``2**23`` and one quotient
              ``rint(acc fl32(1/p))`` give each symmetric residue with no correction step (the CPU's
              integers by other exact steps), and writes the INT8 residues ``[Re, Im, Re + Im]`` (or
              the direct form's planes) of **all** N moduli, K-major, zero-padded:
              ``(N, planes, rows_p, kpad)``. A's residues (CRT weights folded in) are cached on the
              :class:`~ozsim.gemm.ozaki2.PreparedCRTOperand`; B's are made per column block.
analyse +     :func:`residues_tc` (``ozsim/gemm/kernels/crt_residues_tc.cu``), where
residues      :func:`residues_tc_fits` (``k = 32..512``: the state-vector gates of 7 to 9
              qubits; the direct form's planes, at most 16 moduli, ``g <= 62``): B's analysis
              and residues in one read of B, a warp a row, the residues from each scalar's 8
              balanced bytes by INT8 products on the tensor cores (the one-pass gates'
              TC_SPLIT): the same integers and bytes.
INT8 GEMMs    per modulus three ``cublasGemmEx`` INT8 -> INT32 "TN" products (Karatsuba
              ``T1 = Ar Br``, ``T2 = Ai Bi``, ``T3 = (Ar+Ai)(Br+Bi)``) through
              :func:`ozsim.gemm._gpu.gemm_tn_long`: ``cublasGemmEx`` in pieces of ``K <= 8192``
              added with beta = 1, or a cuBLASLt algorithm for the whole K, whichever was faster
              when the shape was first seen (exact: ``k 2**14 < 2**31``).
reduce        ``crt_reduce`` (``kernels/reduce.cu``): per modulus, reads the three INT32 planes and
              writes the residues ``u_re = (T1 - T2) mod p`` and ``u_im = (T3 - T1 - T2) mod p`` as
              UINT8 (2 bytes per output instead of 12), in integer arithmetic (multiply-high by a
              reciprocal).
crt           ``crt_finish`` (``kernels/finish.cu``, compiled per N): a thread takes 2 or 4
              adjacent outputs of a row and reads their UINT8 residues as ``2 N`` words, forms per
              output the quotient and the base-2**40 digit sums in registers, carries, rounds once,
              ``ldexp`` by the row and column exponents and writes the complex128 result (any
              strides).
============  ===================================================================================

What still reaches HBM and need not: the INT32 planes (12 bytes per output per modulus, written by
cuBLAS and read back by ``crt_reduce``). :mod:`ozsim.gemm.ozaki2.wgmma` removes them (the three
products of a modulus and the reduction in one Hopper ``wgmma`` kernel,
``kernels/products_wgmma.cu``, 2 bytes per output and modulus); :func:`_fused_form` uses it by
default where it was measured faster (``K <= 8192``: the state-vector shapes of gates up to 13
qubits, squares up to 8192; ``benchmarks/RESULTS.md``).

Small integers are rounded and converted with FP64 exponent tricks (``rint_small``,
``int_small``, ``__hiloint2double``) instead of the conversion unit, which runs at a quarter of
the FP64 rate on Hopper; each trick is exact in the range where it is used (noted at its use).

The kernels' sources are package data, ``kernels/*.cu`` (one file a stage) with the definitions
they share in ``kernels/crt_common.cuh`` and ``kernels/pieces.cuh``, compiled by NVRTC through
:func:`ozsim.gemm._gpu.raw_module` (local headers inlined) once per file and ``-D`` options: the
scheme's constants (:data:`_CONSTANTS`) and per variant the halves (``-DNH``), the FP32 pieces
and the moduli's constants (:func:`_residue32_kernel`) or the moduli and digits of
``crt_finish`` (:func:`_finish_options`).

References:
    [Ozaki2] K. Ozaki, Y. Uchino, T. Imamura, arXiv:2504.08009 (2025).
    cuBLAS documentation, ``cublasGemmEx`` (INT8 inputs, INT32 compute, "TN").
"""

from __future__ import annotations

import warnings
from pathlib import Path

import cupy as cp
import numpy as np

from ... import config
from ...errors import NonFiniteError
from .. import _gpu
from .._gpu import raw_module
from . import wgmma as _crt_wgmma
from .gate_tables import upload_tables
from .moduli import (LIMB_BITS, NORM_FRAC_BITS, crt_constants, digit_unit_fragments,
                     digit_units, offset_sum_start, quotient_weights)

__all__ = ["GatheredMatrix", "analyse", "analyse_launch",
           "default_workspace_bytes", "deposit_offsets", "int8_crt_zgemm_gpu", "last_stats",
           "residues_gpu", "settle"]

_THREADS = _gpu._THREADS
#: The CUDA sources of the stages (package data: ``kernels/*.cu``, ``kernels/*.cuh``).
_KERNELS = Path(__file__).parent / "kernels"
_GATE_KERNELS = Path(__file__).parent.parent / "kernels"  # (the one-pass gates' files)
#: ``-D`` options of every scheme II module (``kernels/crt_common.cuh``): the scheme's constants.
_CONSTANTS = (f"-DNFRAC={NORM_FRAC_BITS}", f"-DLBITS={LIMB_BITS}")

_functions: dict = {}
#: Bits per exact half of a scaled integer in ``crt_residues`` (``6 * 26 >= 154 = gamma(20)``).
HALF_BITS = 26
MAX_HALVES = 6
#: Chunks of 4 k per warp row in ``crt_residues`` for B's strided columns (``qb``, a power of 2
#: <= 32): a warp covers 32 / qb adjacent columns x 4 qb k. H100, B^T of 16384 x 16384, N = 16:
#: qb = 4 / 8 / 16 / 32 took 61 / 22 / 11 / 9.4 ms (the stores, 3 N bytes per value, want long
#: runs; the loads' half-used sectors are served from L2 to the neighbouring warp).
_TILE_CHUNKS = 32
#: Threads per block of the residue kernels: 96 registers per thread allow 2 blocks of 256 per
#: multiprocessor (16 warps) or 5 of 128 (20). H100 (an earlier probe): B of
#: the N = 28, d = 8 state GEMM 9.70 -> 8.48 ms, A of a 16384 square 9.21 -> 8.60 ms.
_RESIDUE_THREADS = 128
#: At most this many balanced pieces in ``crt_residues32`` (FP32 arithmetic): plans keeping
#: <= 70 bits (:func:`pieces32`).
PIECES32 = 5


def pieces32(bits: int) -> tuple[int, int] | None:
    """``(NP, PB)``: the fewest balanced pieces (and their bits, 13..16) in which
    ``crt_residues32`` holds a scaled integer of ``bits`` bits, or ``None`` (more than
    :data:`PIECES32`: the FP64 kernel).

    The condition is the kernel's exactness bound (``crt_residues32``,
    ``kernels/residues32.cu``):
    ``|acc| = |sum_i h_i W_i| <= 128 ((NP - 1) 2**(PB - 1) + 2**max(0, bits - PB (NP - 1)))
    < 2**23``, so that one quotient ``rint(acc fl32(1/p))`` gives the symmetric residue with no
    correction. Examples: 58 bits -> 4 pieces of 15; 62 -> 5 of 13; 70 -> 5 of 14.
    """
    for np_ in range(1, PIECES32 + 1):
        for pb in range(13, 17):
            top = max(0, bits - pb * (np_ - 1))
            if 128 * ((np_ - 1) * 2 ** (pb - 1) + 2**top) < 2**23:
                return np_, pb
    return None


_INT_MIN = -(2**31)
#: ``crt_analyse_tile``'s geometry (:func:`_tile_threads`; the instances in
#: ``kernels/analyse.cu`` are compiled for it): threads per block below 128 threads a row,
#: ``AT_VPT`` values per thread, the threads per row (the fewest that hold k are used) and the
#: largest k. H100 (2026-11-24), B of N = 26 gates, d = 8 / 9 / 10: 256 threads, 4 blocks
#: per multiprocessor, 0.48-0.54 ms; 512 threads (2 blocks) 0.48-0.57; 4 values per thread
#: (512 x 3, 256 x 6, 1024 x 1) no better; the segmented passes 0.85-1.60. Square 8192: A 0.79
#: -> 0.52 ms, B's columns (one a block, half-used sectors) 0.78 -> 0.72.
_TILE_THREADS, _TILE_VALUES = 256, 8
_TILE_ROW_THREADS = (8, 16, 32, 64, 128, 256, 512, 1024)
_TILE_K = _TILE_ROW_THREADS[-1] * _TILE_VALUES


def _tile_threads(tpr: int) -> int:
    """Threads per block of ``crt_analyse_tile`` at ``tpr`` threads a row: 256 (several rows)
    up to 128 a row, else two rows' threads, at most 1024 (one row)."""
    return _TILE_THREADS if tpr <= _TILE_THREADS // 2 else min(1024, 2 * tpr)


#: ``crt_finish``'s pass structure per digit count, and (``_FINISH_COLS``) the adjacent columns a
#: thread takes (``finish.cu``'s FINISH_COLS; the rest: both parts in one pass, 4 columns). 3 digits
#: (11..15 moduli): both parts in one pass, 2 columns a thread, 4 blocks of 256 (62 registers).
#: H200, N = 30, 15 moduli, the GEMM path's reconstruction stage at d = 7 / 8 / 9, alternating in
#: one process: 2.27-2.33 / 2.36-2.43 / 2.50-2.95 -> 2.06-2.33 / 2.11-2.21 / 2.30-2.46 times the
#: copy floor against one part a pass with 4 columns and 3 blocks (80 registers; 5 blocks at 48:
#: 2.12-2.18 / 2.20-2.27 / 2.31-2.42; 1 column, 6 blocks: 2.47-2.87), same bits. 4 digits (16..20
#: moduli, measured at 16 on the H100, an earlier probe): one part a pass with every word loaded up
#: front, 2 blocks (d = 10: 6.39 -> 6.27 ms, square 8192: 1.62 -> 1.54 ms; one part a pass without
#: the preload was slower there, 7.57 and 1.91).
_FINISH_OPTS = {3: ("-DFINISH_PARTS=2", "-DFINISH_BLOCKS=4"),
                4: ("-DFINISH_PARTS=1", "-DFINISH_PRELOAD=1", "-DFINISH_BLOCKS=2")}
_FINISH_COLS = {3: 2}


#: The kernels of the analysis (``kernels/analyse.cu``) besides the ``crt_analyse_tile_*``.
_ANALYSE_PASSES = ("crt_scan", "crt_sumsq", "crt_fin", "crt_col_sumsq")


#: ``crt_finish`` reads its constants from the constant bank (``finish.cu``, FINISH_CONST; filled
#: once per module by :func:`_finish_kernel`), not from shared memory. H200, N = 30, 15 moduli,
#: the GEMM path's reconstruction stage at d = 7 / 8 / 9: 2.46-2.53 / 2.51-2.56 / 2.89-3.12 ->
#: 2.27-2.38 / 2.27-2.32 / 2.45-2.55 times the copy floor (same bits).
FINISH_CONST = True


def _finish_options(num_moduli: int) -> tuple[str, ...]:
    """``crt_finish``'s options for ``num_moduli`` moduli: ``-DNMODC``, ``-DNLIMBC``, the pass
    structure of :data:`_FINISH_OPTS` and :data:`FINISH_CONST` (none for 0: the file's
    defaults)."""
    if not num_moduli:
        return ()
    limbs = crt_constants(num_moduli).num_limbs
    return (f"-DNMODC={num_moduli}", f"-DNLIMBC={limbs}",
            *_FINISH_OPTS.get(limbs, ("-DFINISH_PARTS=2",)),
            f"-DFINISH_COLS={_finish_columns(num_moduli)}", f"-DFINISH_CONST={int(FINISH_CONST)}")


def _finish_columns(num_moduli: int) -> int:
    """Adjacent columns a ``crt_finish`` thread takes for ``num_moduli`` moduli
    (:data:`_FINISH_COLS` by digit count, else 4)."""
    return _FINISH_COLS.get(crt_constants(num_moduli).num_limbs, 4)


#: The CRT digit sums of the reconstruction on the INT8 tensor cores (``kernels/finish_tc.cu``,
#: ``crt_finish_tc``: byte digits of ``P/p`` as the B operand of ``mma.m16n8k16.u8.u8``,
#: :func:`ozsim.gemm.ozaki2.moduli.digit_units`; about 32 FP64 operations an entry against
#: ``crt_finish``'s ~110 multiply-adds), the same digit sums (exact integers), so the same bits.
#: ``None``: where FP64 runs at 1/32 of FP32 or less (compute capability 8.0 or later other than
#: the full-FP64 8.0, 9.0 and 10.0), where those multiply-adds, not the bytes, would bound
#: ``crt_finish`` (an operation count, not measured on such a GPU); ``True``: wherever it applies
#: (sm_80+, at most 16 moduli); ``False``: never. H200, N = 30, 15 moduli, the GEMM path's
#: reconstruction stage at d = 7 / 8 / 9, alternating in one process: 1.94-1.98 / 1.98-2.02 /
#: 1.99-2.12 times the copy floor with ``crt_finish``, 2.25-2.28 / 2.31-2.33 / 2.32-2.35 with
#: ``crt_finish_tc`` (latency-bound at 32 warps a multiprocessor: ncu's long-scoreboard stalls
#: twice ``crt_finish``'s, DRAM 57% of peak against 71%).
FINISH_TC = None
#: Full-rate FP64 GPUs (compute capability as CuPy writes it), where :data:`FINISH_TC` ``None``
#: keeps ``crt_finish``.
_FULL_FP64 = ("80", "90", "100")
#: Groups of 32 columns a warp of ``crt_finish_tc`` takes (a block: ``256 * _FINISH_TC_GROUPS``).
_FINISH_TC_GROUPS = 4


def _finish_tc_applies(num_moduli: int) -> bool:
    """Whether :func:`_finish_kernel` gives ``crt_finish_tc`` for ``num_moduli`` moduli:
    ``num_moduli <= 16`` (one k16 step of the moduli), compute capability 8.0 or later, and
    :data:`FINISH_TC` (``None``: not a full-FP64 GPU, :data:`_FULL_FP64`)."""
    cc = cp.cuda.Device().compute_capability
    if FINISH_TC is False or num_moduli > 16 or int(cc) < 80:
        return False
    return FINISH_TC or cc not in _FULL_FP64


def _finish_tc_options(num_moduli: int) -> tuple[str, ...]:
    """``crt_finish_tc``'s options (``kernels/finish_tc.cu``): the moduli and digits and the
    units of :func:`ozsim.gemm.ozaki2.moduli.digit_units` as hexadecimal nibbles."""
    units, _ = digit_units(num_moduli)
    limb = sum(c << (4 * k) for k, (c, _) in enumerate(units))
    shift = sum((sh // 16) << (4 * k) for k, (_, sh) in enumerate(units))
    return (f"-DNMODC={num_moduli}", f"-DNLIMBC={crt_constants(num_moduli).num_limbs}",
            f"-DTC_UNITS={len(units)}", f"-DTC_UNIT_LIMB={limb:#x}",
            f"-DTC_UNIT_SHIFT={shift:#x}", f"-DTC_GROUPS={_FINISH_TC_GROUPS}")


def _finish_kernel(num_moduli: int):
    """The reconstruction for ``num_moduli`` moduli as ``(kernel, tc_bfrag)``: ``crt_finish_tc``
    and its B fragments (:func:`ozsim.gemm.ozaki2.moduli.digit_unit_fragments`, on the device)
    where :func:`_finish_tc_applies`, else ``crt_finish`` and ``None``; the module's constant
    bank filled (FINISH_CONST: :func:`_crt_constants_host`, which :func:`_crt_constants_gpu`
    passes otherwise) once per module."""
    tc = _finish_tc_applies(num_moduli)
    file, opts = (("finish_tc.cu", _CONSTANTS + _finish_tc_options(num_moduli)) if tc else
                  ("finish.cu", _CONSTANTS + _finish_options(num_moduli)))
    key = ("finish_cst", file, opts, cp.cuda.Device().id)
    if (tc or FINISH_CONST) and key not in _const_cache:
        host = np.ascontiguousarray(_crt_constants_host(num_moduli))
        mod = raw_module(_KERNELS / file, opts)
        cp.cuda.runtime.memcpy(mod.get_global("finish_cst").ptr, host.ctypes.data, host.nbytes,
                               _MEMCPY_H2D)
        _const_cache[key] = cp.asarray(digit_unit_fragments(num_moduli)) if tc else None
    if tc:
        return _function(file, opts, "crt_finish_tc"), _const_cache[key]
    return _kernel("crt_finish", num_moduli=num_moduli), None


def _kernel(name: str, halves: int = 1, num_moduli: int = 0):
    """A kernel of the stage files in ``kernels/``, each module compiled once per options:
    the analysis (``analyse.cu``: ``crt_scan``, ``crt_sumsq``, ``crt_fin``,
    ``crt_analyse_tile_*``, ``crt_col_sumsq``), the FP64 residues (``residues.cu``, per number
    of 26-bit halves: ``-DNH``), ``crt_reduce`` (``reduce.cu``) and ``crt_finish``
    (``finish.cu``, per number of moduli: :func:`_finish_options`). The FP32 residues:
    :func:`_residue32_kernel`."""
    if name.startswith("crt_analyse_tile") or name in _ANALYSE_PASSES:
        file, opts = "analyse.cu", _CONSTANTS
    elif name in ("crt_residues", "crt_residues_tab"):
        file, opts = "residues.cu", _CONSTANTS + (f"-DNH={halves}",)
    elif name == "crt_reduce":
        file, opts = "reduce.cu", ()
    elif name == "crt_finish":
        file, opts = "finish.cu", _CONSTANTS + _finish_options(num_moduli)
    else:
        raise KeyError(name)
    return _function(file, opts, name)


def _function(file: str, options: tuple, name: str):
    """Kernel ``name`` of ``kernels/<file>`` compiled with ``options``
    (:func:`ozsim.gemm._gpu.raw_module`: one module per file and options), cached per device:
    ``RawModule.get_function`` costs ~20 us of host time a call, several times a GEMM."""
    key = (file, options, name, cp.cuda.runtime.getDevice())
    fn = _functions.get(key)
    if fn is None:
        fn = _functions[key] = raw_module(_KERNELS / file, options).get_function(name)
    return fn


def _f32(v: float) -> str:
    """A CUDA float literal that parses to ``fl32(v)`` exactly (shortest round-trip digits)."""
    return np.format_float_scientific(np.float32(v), unique=True) + "f"


def _residue32_options(num_moduli: int, weighted: bool, piece_bits: int) -> tuple[str, ...]:
    """The constants of the first ``num_moduli`` moduli as ``-D`` options of float literals
    (:func:`_residue_table_host`'s values, weighted by the CRT weights ``q_p`` (A) or not (B)):
    ``-DRES32_P<l>=p``, ``-DRES32_IP<l>=fl32(1/p)``, ``-DRES32_W<l>_<i>=W_i`` (i < 5), one
    value an option. ``res32_all`` in ``kernels/residues32.cu`` calls ``res32_mod`` once per
    modulus with them, so the constants are literals of the code."""
    table = _residue_table_host(num_moduli, weighted, piece_bits, np.float32)
    opts: list[str] = []
    for i, row in enumerate(table):
        opts += [f"-DRES32_P{i}={_f32(row[0])}", f"-DRES32_IP{i}={_f32(row[1])}"]
        opts += [f"-DRES32_W{i}_{j}={_f32(w)}" for j, w in enumerate(row[4:4 + PIECES32])]
    return tuple(opts)


def _residue32_kernel(pieces: int, piece_bits: int, num_moduli: int, weighted: bool,
                      planes: int, tables: bool = False):
    """``crt_residues32_<planes>`` (``_tab``: reading through offset tables) of
    ``kernels/residues32.cu``, compiled once per number of balanced pieces and their bits
    (``-DNP``, ``-DPB32``; :func:`pieces32`), number of moduli (``-DNMODR``) and weighting (the
    moduli's constants: :func:`_residue32_options`)."""
    opts = _CONSTANTS + (f"-DNP={pieces}", f"-DPB32={piece_bits}", f"-DNMODR={num_moduli}",
                         *_residue32_options(num_moduli, weighted, piece_bits))
    return _function("residues32.cu", opts,
                     f"crt_residues32_{planes}" + ("_tab" if tables else ""))


class GatheredMatrix:
    """A ``(k, n)`` complex128 matrix on the GPU read through offset tables, no copy:
    ``B[i, j] = data[row_offsets[i] + col_offsets[j]]`` (element offsets).

    The state-vector engine passes the state this way to the ``int8-crt*`` backends when the
    next gate's target qubits are not the leading axes: ``row_offsets`` deposit the gate index
    into the target qubits' bit positions, ``col_offsets`` the column index into the other
    qubits' (:func:`deposit_offsets`), so that the analysis and residue kernels read the
    permuted state directly and the transposing copy of the state (a read and a write of
    ``16 * 2**N`` bytes per gate) is skipped. Only these backends' GPU kernels read it;
    elsewhere it is materialised (:meth:`materialize`).

    Args:
        data (cupy.ndarray): 1-D complex128, the buffer.
        row_offsets (cupy.ndarray): ``(k,)`` int64.
        col_offsets (cupy.ndarray): ``(n,)`` int64.
        strides: ``(row stride, column stride)`` in elements of the lowest index bit of each
            (which index is adjacent in memory: the kernels' thread mapping).
        view (cupy.ndarray): the same matrix as a strided N-d view of ``data`` whose C-order
            reshape is ``(k, n)`` (for :meth:`materialize`), or ``None``.
    """

    _ozsim_gathered = True  # ozsim._array.is_cupy_array: a CuPy operand

    def __init__(self, data, row_offsets, col_offsets, strides, view=None):
        self.data, self.row_offsets, self.col_offsets = data, row_offsets, col_offsets
        self.shape = (int(row_offsets.size), int(col_offsets.size))
        self.dtype, self.ndim = data.dtype, 2
        self.strides_elements = (int(strides[0]), int(strides[1]))
        self._view = view

    @property
    def T(self) -> GatheredMatrix:  # noqa: N802 - the array attribute's name
        """The transpose (the tables swapped; not materialisable from a view)."""
        return GatheredMatrix(self.data, self.col_offsets, self.row_offsets,
                              self.strides_elements[::-1])

    def __getitem__(self, key):
        """``[:, j0:j1]`` and ``[i0:i1, :]`` (contiguous slices of the tables)."""
        if not (isinstance(key, tuple) and len(key) == 2 and all(
                isinstance(s, slice) and s.step in (None, 1) for s in key)):
            raise TypeError(f"GatheredMatrix supports [slice, slice] only, not {key!r}")
        return GatheredMatrix(self.data, self.row_offsets[key[0]], self.col_offsets[key[1]],
                              self.strides_elements)

    def materialize(self):
        """The matrix as a new C-contiguous ``(k, n)`` CuPy array (one state-sized
        allocation; from the N-d view where there is one, else by a gather)."""
        if self._view is not None:
            return cp.ascontiguousarray(self._view).reshape(self.shape)
        return self.data[self.row_offsets[:, None] + self.col_offsets[None, :]]


_DEPOSIT = cp.ElementwiseKernel(  # compiled on first use
    "raw int32 bits, int32 nb", "int64 y",
    "long long v = 0; for (int t = 0; t < nb; ++t) "
    "v |= (long long)((i >> (nb - 1 - t)) & 1) << bits[t]; y = v;", "ozsim_deposit")


def deposit_offsets(bits) -> cp.ndarray:
    """``(2**len(bits),)`` int64 element offsets: entry ``i`` has bit ``len(bits) - 1 - t`` of
    ``i`` moved to bit ``bits[t]`` (``bits[0]`` the most significant index bit: the order of
    the axes of a row-major tensor of 2s).

    Raises:
        ValueError: a bit position outside 0..62 or repeated.
    """
    bits = [int(b) for b in bits]
    if len(set(bits)) != len(bits) or any(not 0 <= b < 63 for b in bits):
        raise ValueError(f"bit positions must be distinct and in 0..62, got {bits}")
    out = cp.empty(1 << len(bits), dtype=cp.int64)
    _DEPOSIT(cp.asarray(np.array(bits, dtype=np.int32)), np.int32(len(bits)), out)
    return out


def _geometry(x) -> tuple[int, int, object, object]:
    """``(sr, sc, roff, koff)`` of the analysis and residue kernels on ``x`` ``(rows, k)``:
    element strides and offset tables (``np.uint64(0)``, null pointers, for a strided array)."""
    if isinstance(x, GatheredMatrix):
        sr, sc = x.strides_elements
        return sr, sc, x.row_offsets, x.col_offsets
    sr, sc = _gpu._strides(x)
    return sr, sc, np.uint64(0), np.uint64(0)


def _grid1(items: int) -> int:
    """Blocks of a grid-stride loop over ``items``: at most ~8 resident blocks per SM."""
    return int(max(1, min(-(-items // _THREADS), 8 * _gpu._sms())))


#: Sizes and layout of the last :func:`int8_crt_zgemm_gpu` call (working-memory report).
last_stats: dict = {}


def _segments(tiles: int, k: int, step: int) -> int:
    """k-segment length of the analysis passes: enough blocks (tiles x segments) to fill the GPU
    four times over, segments of at least 64 steps."""
    want = max(1, -(-4 * 8 * _gpu._sms() // max(tiles, 1)))
    nseg = max(1, min(want, k // (64 * step)))
    return -(-k // nseg)


def _check_flag(host) -> None:
    """Raise on the NaN/Inf flag of one analysis, on the host."""
    if host[0]:
        raise NonFiniteError("GEMM operand has NaN or Inf entries")


def analyse(x):
    """Norm exponents of the rows of ``x`` on the GPU.

    Pass 1 finds each row's ozIMMU exponent ``e`` (and NaN/Inf); pass 2 the exact integer ``S``
    of the norm bound; then ``f``. For ``k <= 8192`` one kernel (``crt_analyse_tile``) does all
    three, each block holding whole rows in registers (X read once); above, ``crt_scan`` and
    ``crt_sumsq`` split k into segments, so that B's columns (``b.T``, rows adjacent in memory)
    are read by the whole GPU, not one thread per column, and ``crt_fin`` forms ``f``. The same
    integers either way (maxima and exact integer sums).

    Args:
        x (cupy.ndarray): ``(rows, k)`` complex128, any strides (``b.T`` for B's columns).

    Returns:
        ``(rows,)`` int32 CuPy, equal to :func:`ozsim.gemm.ozaki2.norm_exponents`.

    Raises:
        NonFiniteError: NaN or Inf in ``x`` (checked on the host after the kernels: one sync).
    """
    f, flag = analyse_launch(x)
    _check_flag(flag.get())
    return f


def analyse_launch(x):
    """:func:`analyse`'s kernels on ``x`` without waiting: ``(f, flag)``, ``f`` ``(rows,)``
    int32 CuPy (usable by later kernels on the stream at once), ``flag`` ``(1,)`` uint64 CuPy,
    1 on NaN/Inf, which :func:`settle` brings to the host. ``x`` may be a
    :class:`GatheredMatrix`."""
    rows, k = x.shape
    tile = 0 < k <= _TILE_K
    f = (cp.empty if tile else cp.zeros)(rows, dtype=cp.int32)  # the tile kernel writes all
    flag = cp.zeros(1, dtype=cp.uint64)
    if rows and k:
        sr, sc, roff, koff = _geometry(x)
        geo = (_data(x), np.int64(rows), np.int64(k), np.int64(sr), np.int64(sc), roff, koff)
        rowfast = abs(sr) <= abs(sc)
        with _gpu._stage("analyse"):
            if tile:  # one kernel, X read once (its values held in registers)
                tpr = next(t for t in _TILE_ROW_THREADS if k <= _TILE_VALUES * t)
                threads = _tile_threads(tpr)
                name = f"crt_analyse_tile_{tpr}" + ("_tab" if isinstance(x, GatheredMatrix)
                                                    else "")
                _kernel(name)((-(-rows // (threads // tpr)),), (threads,),
                              geo + (np.int32(rowfast), f, flag))
            else:  # two passes with k split in segments, then crt_fin
                tiles = -(-rows // (32 if rowfast else 8))
                seg = _segments(tiles, k, 8 if rowfast else 32)
                emax = cp.full(rows, _INT_MIN, dtype=cp.int32)
                sq = cp.zeros(rows, dtype=cp.uint64)
                geo += (np.int64(seg), np.int32(rowfast))
                grid = (tiles, -(-k // seg))
                _kernel("crt_scan")(grid, (_THREADS,), geo + (emax, flag))
                _kernel("crt_sumsq")(grid, (_THREADS,), geo + (emax, sq))
                _kernel("crt_fin")((_grid1(rows),), (_THREADS,), (np.int64(rows), emax, sq, f))
    return f, flag


def settle(prep, *flags) -> None:
    """The pending NaN/Inf flag of the prepared operand ``prep`` (``None``, or one whose
    ``_pending`` was launched by :func:`analyse_launch`) and ``flags`` in one device-to-host
    transfer.

    Raises:
        NonFiniteError: NaN or Inf in ``prep``'s matrix or in an operand of ``flags``.
    """
    pending = getattr(prep, "_pending", None)
    rows = ([pending] if pending is not None else []) + list(flags)
    if not rows:
        return
    host = rows[0].get()[None] if len(rows) == 1 else cp.stack(rows).get()
    for h in host:
        _check_flag(h)
    if pending is not None:
        prep._pending = None


def bound_stats_parts(x, frac: int):
    """The integers of :func:`ozsim.gemm.ozaki2.bound_stats` of the CuPy matrix ``x`` (``(m, k)``
    complex128, any strides) on the host: column exponents ``e`` (int32), ``S`` (int64), the
    row-nonzero mask and whether ``x`` is finite. Three passes spread over the GPU as the
    analysis's: ``crt_scan`` of ``x.T`` (each column's exponent, NaN/Inf), ``crt_col_sumsq`` of
    ``x.T`` (``S``) and ``crt_scan`` of ``x`` (which rows are nonzero)."""
    m, k = x.shape
    flag = cp.zeros(1, dtype=cp.uint64)
    ecol = cp.full(k, _INT_MIN, dtype=cp.int32)
    erow = cp.full(m, _INT_MIN, dtype=cp.int32)
    sq = cp.zeros(k, dtype=cp.uint64)
    if m and k:
        for xx, emax in ((x.T, ecol), (x, erow)):
            rows, kk = xx.shape
            sr, sc, roff, koff = _geometry(xx)
            rowfast = abs(sr) <= abs(sc)
            tiles = -(-rows // (32 if rowfast else 8))
            seg = _segments(tiles, kk, 8 if rowfast else 32)
            geo = (_data(xx), np.int64(rows), np.int64(kk), np.int64(sr), np.int64(sc), roff, koff,
                   np.int64(seg), np.int32(rowfast))
            grid = (tiles, -(-kk // seg))
            _kernel("crt_scan")(grid, (_THREADS,), geo + (emax, flag))
            if emax is ecol:
                _kernel("crt_col_sumsq")(grid, (_THREADS,), geo + (emax, np.int32(frac), sq))
    e = cp.where(ecol == _INT_MIN, 0, ecol)
    return (e.get(), sq.get().view(np.int64), (erow != _INT_MIN).get(),
            not int(flag.get()[0]))


_const_cache: dict = {}
_MEMCPY_H2D = 1  # cudaMemcpyHostToDevice


def _residue_constants(num_moduli: int, weighted: bool):
    """``crt_residues``' (FP64) constants: :func:`_residue_table_host` with 26-bit halves,
    cached on the current device."""
    key = (num_moduli, weighted, cp.cuda.Device().id)
    c = _const_cache.get(key)
    if c is None:
        c = _const_cache[key] = cp.asarray(
            _residue_table_host(num_moduli, weighted, HALF_BITS, np.float64))
    return c


def _residue_table_host(num_moduli: int, weighted: bool, piece_bits: int, dtype) -> np.ndarray:
    """``(N, 12)`` ``dtype`` (NumPy): ``p, fl(1/p), hi, lo`` and ``W_i = 2**(piece_bits i) *
    weight mod p`` (symmetric, i = 0..5 (FP64 kernel) or 0..4 (FP32 kernel)), the weight being
    the CRT weight ``q_p`` for A and 1 for B."""
    const = crt_constants(num_moduli)
    count = MAX_HALVES if dtype == np.float64 else PIECES32
    rows = []
    for p, w in zip(const.moduli, const.weights):
        weight = w if weighted else 1
        ws = []
        for i in range(count):
            v = ((1 << (piece_bits * i)) * weight) % p
            ws.append(float(v - p if v > (p - 1) // 2 else v))
        row = [float(p), float(dtype(1.0) / dtype(p)), float((p - 1) // 2), float(-(p // 2))]
        rows.append(row + ws + [0.0] * (8 - count))
    return np.array(rows, dtype=dtype)


def residues_gpu(x, f, bits: int, num_moduli: int, *, weighted: bool, kpad: int, rows_alloc: int,
                 rounding: bool = True, out=None, planes: int = 3):
    """INT8 residues of the rows of ``x`` for all moduli, K-major: :func:`ozaki2.residues` on GPU.

    Args:
        x (cupy.ndarray): ``(rows, k)`` complex128, any strides.
        f (cupy.ndarray): ``(rows,)`` int32 norm exponents.
        bits: kept bits ``g`` (``<= 156``).
        num_moduli: ``N``.
        weighted: fold the CRT weights ``q_p`` in (the A operand).
        kpad: stored inner dimension (a multiple of 4).
        rows_alloc: stored rows (``>= rows``, a multiple of 4).
        rounding: round the scaled integers to nearest (else truncate): ``CRTPlan.rounding``.
        out (cupy.ndarray): ``(N, planes, rows_alloc, kpad)`` int8 buffer, or ``None``.
        planes: 3: ``[r, i, r + i]`` (Karatsuba products); 2: ``[r, i]``; 4: ``[r, -i, r, i]``
            (the direct form of :func:`ozsim.gemm.ozaki2.wgmma.gemm_mod`; ``-i`` of ``-128`` mod
            256 is ``-128``, the same residue).

    Returns:
        ``(N, planes, rows_alloc, kpad)`` int8: for ``planes = 3``, ``[l, :, :rows, :k]`` equals
        ``ozaki2.residues(pieces_re, pieces_im, p_l, q_l or 1)`` (pieces from
        ``ozaki2.scaled_pieces(..., rounding=rounding)``); the padding is 0.
    """
    if planes not in (2, 3, 4):
        raise ValueError(f"planes must be 2, 3 or 4, not {planes}")
    rows, k = x.shape
    halves = max(1, -(-bits // HALF_BITS))
    plan32 = pieces32(bits)
    if halves > MAX_HALVES:
        raise ValueError(f"kept bits {bits} exceed the {HALF_BITS * MAX_HALVES} this kernel holds")
    if out is None:
        out = cp.empty((num_moduli, planes, rows_alloc, kpad), dtype=cp.int8)
    if rows_alloc == 0 or kpad == 0:
        return out
    sr, sc, roff, koff, qb, total = _residue_items(x, rows_alloc, kpad)
    grid = int(max(1, min(-(-total // _RESIDUE_THREADS), 64 * _gpu._sms())))
    geo = (_data(x), np.int64(rows), np.int64(rows_alloc), np.int64(k), np.int64(kpad),
           np.int64(sr), np.int64(sc), roff, koff, f, np.int32(bits))
    tab = isinstance(x, GatheredMatrix)
    if plan32 is not None:  # FP32 arithmetic (issue-bound kernel, twice the FP64 rate)
        _residue32_kernel(*plan32, num_moduli, weighted, planes, tab)(
            (grid,), (_RESIDUE_THREADS,), geo + (out, np.int32(qb), np.int32(bool(rounding))))
    else:
        _kernel("crt_residues_tab" if tab else "crt_residues", halves)(
            (grid,), (_RESIDUE_THREADS,),
            geo + (np.int32(num_moduli), _residue_constants(num_moduli, weighted), out,
                   np.int32(qb), np.int32(bool(rounding)), np.int32(planes)))
    return out


#: Inner dimensions (``2**d``) of :func:`residues_tc`.
RESIDUES_TC_K = (32, 64, 128, 256, 512)
_RES_TC_THREADS = 256
_RES_TC_MAX_BITS = 62
#: Inner dimensions at which :func:`residues_tc` stages every layout through shared memory with
#: two tiles of rows in flight (``crt_residues_tc.cu``, ASYNC): none. H200, N = 30, 15 moduli,
#: the whole gate, three target sets a d, against the form without: d = 7 8.70-9.18x against
#: 8.31-8.99x the copy floor, 8 9.62-10.49x against 9.85-10.16x, 9 12.60-13.20x against
#: 12.62-12.84x (same bits).
RESIDUES_TC_ASYNC: frozenset = frozenset()


def residues_tc_fits(k: int, num_moduli: int, bits_b: int) -> bool:
    """Whether :func:`residues_tc` takes B's analysis and residues for inner dimension ``k``
    and a plan of ``num_moduli`` moduli keeping ``bits_b`` bits: ``k`` in
    :data:`RESIDUES_TC_K` (a warp a row), at most 16 moduli (one m16n8k32 product's rows),
    integers below ``2**62`` (8 balanced bytes), compute capability 8.0 (``mma.sync``)."""
    return (k in RESIDUES_TC_K and num_moduli <= 16 and bits_b <= _RES_TC_MAX_BITS
            and int(cp.cuda.Device().compute_capability) >= 80)


_res_tc_kernels: dict = {}


def _residues_tc_kernel(d: int, num_moduli: int, rounding: bool, tab: bool, rowfast: bool,
                        staged: bool):
    """``crt_residues_tc`` (``ozsim/gemm/kernels/crt_residues_tc.cu``) for these options, its
    ``crt_gate.cuh`` tables filled, and its dynamic shared memory in bytes (the staged rows of
    ``-DROWFAST``, two tiles of them with ``-DASYNC``: ``staged``); once per device and
    options."""
    key = (d, num_moduli, rounding, tab, rowfast, staged, cp.cuda.Device().id)
    hit = _res_tc_kernels.get(key)
    if hit is None:
        mod = raw_module(_GATE_KERNELS / "crt_residues_tc.cu", (
            "-std=c++17", f"-DGATE_QUBITS={d}", f"-DNMOD={num_moduli}",
            f"-DROUND={int(rounding)}", f"-DNLIMB={crt_constants(num_moduli).num_limbs}",
            f"-DTAB={int(tab)}", f"-DROWFAST={int(rowfast)}", f"-DASYNC={int(staged)}",
            *_CONSTANTS))
        upload_tables(mod, num_moduli)
        kernel = mod.get_function("crt_residues_tc")
        tiles = 2 if staged else int(rowfast)  # (tiles of 8 rows in shared memory)
        smem = 16 * (1 << d) * (_RES_TC_THREADS // 32) * tiles
        if kernel.max_dynamic_shared_size_bytes < smem:  # (above 48 KiB a kernel must ask)
            kernel.max_dynamic_shared_size_bytes = smem
        hit = _res_tc_kernels[key] = (kernel, smem)
    return hit


def residues_tc(x, f_out, bits: int, num_moduli: int, *, rows_alloc: int, rounding: bool,
                out, flag) -> None:
    """B's norm exponents and INT8 residues in one read of B, the residues on the INT8 tensor
    cores (``ozsim/gemm/kernels/crt_residues_tc.cu``): the integers of :func:`analyse_launch`
    and the bytes of :func:`residues_gpu` with ``planes=2`` (the direct form's ``[Re, Im]``),
    from one kernel instead of two, each reading B.

    Where :func:`residues_tc_fits`. H200, N = 30, ``int8-crt-auto`` T = 0 through
    ``StateVector.apply``, three target sets a d, alternating in one process (the analysis and
    the residues 2.6-3.4 times the copy floor together, this kernel 2.2-2.9): 8.7-9.3x ->
    8.3-9.0x the floor at d = 7, 10.2-11.1x -> 9.9-10.2x at 8, 13.3-13.6x -> 12.6-12.8x at 9.

    Args:
        x (cupy.ndarray | GatheredMatrix): ``X = B.T``, ``(rows, k)`` complex128, any strides.
        f_out (cupy.ndarray): ``(rows,)`` int32, B's column norm exponents (written).
        bits, num_moduli, rounding: the plan's ``bits_b``, ``N`` and rounding.
        rows_alloc: stored rows of ``out`` (``>= rows``; the padding rows get zeros).
        out (cupy.ndarray): ``(num_moduli, 2, rows_alloc, k)`` int8 (written).
        flag (cupy.ndarray): ``(1,)`` uint64, set to 1 on NaN/Inf in X (:func:`settle`).
    """
    rows, k = x.shape
    sr, sc, roff, koff = _geometry(x)
    rowfast = abs(sr) <= abs(sc)  # (rows adjacent in memory: staged, whole lines a load)
    kernel, smem = _residues_tc_kernel(k.bit_length() - 1, num_moduli, rounding,
                                       isinstance(x, GatheredMatrix), rowfast,
                                       k in RESIDUES_TC_ASYNC)
    blocks = _gpu.persistent_grid(kernel, _RES_TC_THREADS, smem, -(-rows_alloc // 8))
    kernel((blocks,), (_RES_TC_THREADS,),
           (_data(x), np.int64(rows), np.int64(rows_alloc), np.int64(sr), np.int64(sc), roff,
            koff, np.int32(bits), f_out, out, flag), shared_mem=smem)


def _residue_items(x, rows_alloc: int, kpad: int) -> tuple:
    """``(sr, sc, roff, koff, qb, total)`` of the residue kernels on ``x`` ``(rows, k)``:
    :func:`_geometry`, chunks per warp row (0: rows contiguous along k, adjacent threads take
    adjacent chunks; else :data:`_TILE_CHUNKS` at most, tiles of ``32 / qb`` rows) and
    grid-stride items."""
    rows, k = x.shape
    sr, sc, roff, koff = _geometry(x) if rows and k else (1, 1, np.uint64(0), np.uint64(0))
    nq = kpad // 4
    qb = 0
    if abs(sr) <= abs(sc):  # rows adjacent in memory: tiles of rows x chunks per warp
        qb = 1
        while qb * 2 <= min(nq, _TILE_CHUNKS):
            qb *= 2
    total = rows_alloc * nq if qb == 0 else -(-rows_alloc // (32 // qb)) * -(-nq // qb) * 32
    return sr, sc, roff, koff, qb, total


def _data(x):
    """The buffer the kernels index: ``x`` itself, or a :class:`GatheredMatrix`'s data."""
    return x.data if isinstance(x, GatheredMatrix) else x


def _pad4(x: int) -> int:
    return -(-x // 4) * 4


def prepared_residues(prep, bits: int, num_moduli: int, kpad: int, rounding: bool = True,
                      planes: int = 3):
    """A's residues ``(N, planes, mp, kpad)`` int8 (:func:`residues_gpu`), cached on the prepared
    operand by ``(bits, N, kpad, rounding, planes)`` (a larger ``N`` with the same bits and
    rounding is reused: residues do not depend on ``N``)."""
    r = _cached_residues(prep, bits, num_moduli, kpad, rounding, planes)
    if r is not None:
        return r
    m = prep.shape[0]
    with _gpu._stage("residues_a"):
        r = residues_gpu(prep.matrix, prep.norm_exponents, bits, num_moduli, weighted=True,
                         kpad=kpad, rows_alloc=_pad4(m), rounding=rounding, planes=planes)
    prep._device_cache[(bits, num_moduli, kpad, rounding, planes)] = r
    return r


def _cached_residues(prep, bits: int, num_moduli: int, kpad: int, rounding: bool, planes: int):
    """A's cached residues for this layout (the first ``num_moduli`` of a larger ``N``), or
    ``None``."""
    for (b, n, kp, rd, pl), r in prep._device_cache.items():
        if b == bits and kp == kpad and rd == rounding and pl == planes and n >= num_moduli:
            return r[:num_moduli]
    return None


def _crt_constants_host(num_moduli: int) -> np.ndarray:
    """``crt_finish``'s constants (``finish.cu``: 1/p, the digits of P/p and of P, the quotient
    weights, the digit sums' starting values) as one float64 array."""
    c = crt_constants(num_moduli)
    return np.concatenate([c.inv_p, c.limbs_M.ravel(), c.limbs_P, quotient_weights(num_moduli),
                           offset_sum_start(num_moduli)[1:]])


def _crt_constants_gpu(num_moduli: int):
    key = ("crt", num_moduli, cp.cuda.Device().id)
    dev = _const_cache.get(key)
    if dev is None:
        dev = _const_cache[key] = cp.asarray(_crt_constants_host(num_moduli))
    return dev


#: Largest default working memory of one scheme II GEMM: B's residues, one modulus' INT32 planes
#: and the UINT8 residues of all moduli take ~92 bytes per output column and row at N = 16
#: (24.7 GB for n = 16384), and one block of all columns runs the INT8 GEMMs ~5% faster than
#: two (H100: 48 x 6.12 ms at 16384 columns against 48 x (4.48 + 1.98) ms at 11396 + 4988).
WORKSPACE_CAP = 32 << 30


def default_workspace_bytes(prep, plan) -> int:
    """Default working memory of :func:`int8_crt_zgemm_gpu`: half the free device memory left
    after A's residues (if not yet cached), at most :data:`WORKSPACE_CAP` bytes."""
    m, k = prep.shape
    _, pa, _, kpad = _layout(k, prep.is_real)
    cached = _cached_residues(prep, plan.bits_a, plan.num_moduli, kpad, plan.rounding, pa)
    reserve = 0 if cached is not None else pa * plan.num_moduli * _pad4(m) * kpad
    return _gpu.default_workspace_bytes(reserve, WORKSPACE_CAP)


#: Largest padded K for which :func:`_fused_form` picks the fused products by default.
#: H100 (2026-11-24; ``benchmarks/RESULTS.md`` section 7), fused (Karatsuba form) against cuBLAS
#: INT8 GEMMs + ``crt_reduce`` (an earlier probe): state shapes K = 256..2048 1.10-1.85x, K =
#: 4096 (d = 12) 0.96-1.03x, square 8192 1.06-1.16x in four runs; end to end (``crt_bench.py``,
#: T = 0): square 8192 52.5 -> 50.4 ms, state d = 12 118.8 -> 111.4 ms. Square 16384 is left to
#: cuBLAS: 322-429 ms fused on different machines against a steady 336-345 (the GPU sits at its
#: 700 W cap during the INT8 products, SM clocks 1320-1590 MHz, and the fused kernel's rate
#: follows it).
FUSED_MAX_K = 8192
#: Largest padded K for which the default fused products take the direct form (4 products,
#: B in 2 residue planes, an epilogue of two reductions) instead of Karatsuba's (3 products).
#: H100, N = 28, 15 moduli, whole-sector stores and one Karatsuba epilogue per chain
#: (2026-11-24), products alone, direct / Karatsuba ms: d = 8 9.9 / 18.1, d = 9 17.4 / 20.4, d = 10
#: 30.2 / 28.4, d = 11 52.4 / 44.5, d = 12 113 / 78.6, square 8192 52.7 / 37.2. At d = 10 end
#: to end (same machine): state GEMM 50.8 / 50.2 ms, brickwork N = 26 0.102 / 0.116 s: direct.
DIRECT_MAX_K = 1024


def _fused_form(kpad: int) -> int:
    """How :func:`int8_crt_zgemm_gpu` runs the INT8 products: 0 = cuBLAS INT32 planes and
    ``crt_reduce``; 3 or 4 = fused with the reduction mod p (:mod:`ozsim.gemm.ozaki2.wgmma`), in
    Karatsuba's (3) or the direct (4) form. The results are the same integers in every case.

    ``OZSIM_CRT_FUSED``: ``0`` never fused; ``1`` or ``3`` always fused (Karatsuba) where the
    GPU has it (compute capability 9.0; elsewhere a warning once and cuBLAS); ``4`` always the
    direct form (``kpad <= 32768``, else Karatsuba); unset or ``auto``: fused where available and
    ``kpad <= FUSED_MAX_K``, in the direct form for ``kpad <= DIRECT_MAX_K`` (where the epilogue
    dominates) and Karatsuba's above (where the tensor cores
    do: a quarter fewer products).
    """
    mode = config.get("OZSIM_CRT_FUSED")
    if mode == "0":
        return 0
    form = 4 if mode == "4" and kpad <= 32768 else 3
    if mode not in ("1", "3", "4"):
        if kpad > FUSED_MAX_K or not _crt_wgmma.available():
            return 0
        return 4 if kpad <= DIRECT_MAX_K else 3
    if _crt_wgmma.available():
        return form
    state = _crt_wgmma._state
    if not state.get("warned"):  # asked for, not there: say so once, then the cuBLAS path
        state["warned"] = True
        warnings.warn(f"OZSIM_CRT_FUSED={mode}, but the fused scheme II kernel is unavailable "
                      f"({state.get('error')}): cuBLAS products are used (same results)",
                      RuntimeWarning, stacklevel=3)
    return 0


def _pad16(x: int) -> int:
    return -(-x // 16) * 16


def _layout(k: int, real_a: bool = False) -> tuple[int, int, int, int]:
    """``(form, A planes, B planes, stored K)`` of :func:`int8_crt_zgemm_gpu` for inner
    dimension ``k``: the fused products (:func:`_fused_form`) need TMA rows of 16-byte multiples
    and 4/2 residue planes in the direct form; cuBLAS's K is :func:`_gpu.padded_k`. A real A
    (``real_a``) takes cuBLAS's products unless ``OZSIM_CRT_FUSED`` forces the fused kernel:
    two products a modulus (``T2 = 0``) beat the fused kernel's three (H200,
    :func:`ozsim.gemm.dgemm` at n = 8192: 18.8 against 21.4 ms; 4096: 3.95 against 4.23 ms)."""
    form = _fused_form(_pad16(k))
    if real_a and form and config.get("OZSIM_CRT_FUSED") not in ("1", "3", "4"):
        form = 0
    pa, pb = (4, 2) if form == 4 else (3, 3)
    return form, pa, pb, (_pad16(k) if form else _gpu.padded_k(k))


def reduce_multiplier(p: int) -> np.uint32:
    """``crt_reduce``'s ``M = floor(2**39 / p) + 1``: ``floor(a M / 2**39) = floor(a / p)`` for
    ``0 <= a < 2**31``, ``128 < p <= 256`` (the kernel's comment has the argument)."""
    return np.uint32((1 << 39) // p + 1)


_pm_cache: dict = {}


def modulus_table(num_moduli: int):
    """``(N, 2)`` int32 CuPy: ``p`` and :func:`reduce_multiplier` (as uint32 bits) per modulus,
    the fused kernel's constants; cached per device."""
    key = (num_moduli, cp.cuda.Device().id)
    t = _pm_cache.get(key)
    if t is None:
        t = _pm_cache[key] = cp.asarray(np.array(
            [[p, reduce_multiplier(p).view(np.int32)] for p in crt_constants(num_moduli).moduli],
            dtype=np.int32))
    return t


def int8_crt_zgemm_gpu(prep, b, plan, *, b_exponents=None, out=None, workspace_bytes: int):
    """``C = A @ B`` by Ozaki scheme II on the GPU; see :func:`ozsim.gemm.ozaki2.int8_crt_zgemm`.

    Args:
        prep: :class:`~ozsim.gemm.ozaki2.PreparedCRTOperand` of A ``(m, k)`` (CuPy).
        b (cupy.ndarray): ``(k, n)`` complex128, any strides.
        plan: :class:`~ozsim.gemm.ozaki2.CRTPlan`.
        b_exponents (cupy.ndarray): ``(n,)`` int32 norm exponents of B's columns, or ``None``
            (then B's analysis runs here: with its residues in one kernel where
            :func:`residues_tc_fits`, else before them).
        out (cupy.ndarray): ``(m, n)`` complex128 (any strides, not overlapping ``b``).
        workspace_bytes: bound on B's residues, one modulus' INT32 planes (none with the fused
            products of :mod:`ozsim.gemm.ozaki2.wgmma`) and the UINT8 residues of one column block.

    Returns:
        ``out``.

    Raises:
        NonFiniteError: NaN or Inf in A or B (B's found by its analysis: before the products,
            or with :func:`residues_tc` after them, ``out`` then holding no result).
    """
    global last_stats
    m, k = prep.shape
    n = b.shape[1]
    N, ga, gb = plan.num_moduli, plan.bits_a, plan.bits_b
    form, pa, pb, kpad = _layout(k, prep.is_real)
    # B's analysis and residues in one read (kernels/crt_residues_tc.cu) where it fits: the same
    # integers and bytes; its NaN/Inf flag is read after the products
    tc = (b_exponents is None and pb == 2 and m > 0 and n > 0 and kpad == k
          and residues_tc_fits(k, N, gb))
    flag_b = None
    if tc:
        b_exponents = cp.empty(n, dtype=cp.int32)
        flag_b = cp.zeros(1, dtype=cp.uint64)
        settle(prep)
    elif b_exponents is None:  # one sync: B's counters and A's pending ones (NaN/Inf checks)
        b_exponents, acc_b = analyse_launch(b.T)
        settle(prep, acc_b)
    elif getattr(prep, "_pending", None) is not None:
        settle(prep)
    if out is None:
        out = cp.empty((m, n), dtype=cp.complex128)
    if m == 0 or n == 0:
        return out
    fused = form > 0
    mp = _pad4(m)
    # B residues, INT32 planes (not with the fused products), UINT8 u
    per_col = pb * N * kpad + (0 if fused else 12 * mp) + 2 * N * m + 16
    nb = max(4, min(_pad4(n), int(workspace_bytes) // per_col // 4 * 4))
    if fused:  # TMA row coordinates (l pb + t) nbp + j are int32
        nb = min(nb, (2**31 - 2**20) // (pb * N) // 16 * 16)
    nb = min(nb, n)
    nbp = _pad4(nb)
    b_res = cp.empty((N, pb, nbp, kpad), dtype=cp.int8)
    a_res = None
    for j0 in range(0, n, nb):
        nbj = min(n, j0 + nb) - j0
        nbpj = _pad4(nbj)
        bres = b_res if nbpj == nbp else \
            b_res.ravel()[: N * pb * nbpj * kpad].reshape(N, pb, nbpj, kpad)
        # one block (the state-vector gates): no slices (~70 us of host time while the GPU waits)
        bj, fj, oj = (b, b_exponents, out) if nbj == n else (
            b[:, j0 : j0 + nbj], b_exponents[j0 : j0 + nbj], out[:, j0 : j0 + nbj])
        with _gpu._stage("residues_b"):
            if tc:
                residues_tc(bj.T, fj, gb, N, rows_alloc=nbpj, rounding=plan.rounding,
                            out=bres, flag=flag_b)
            else:
                residues_gpu(bj.T, fj, gb, N, weighted=False, kpad=kpad, rows_alloc=nbpj,
                             rounding=plan.rounding, out=bres, planes=pb)
        if a_res is None:  # after B's first residues: the GPU runs them while the host sets up
            a_res = prepared_residues(prep, ga, N, kpad, plan.rounding, planes=pa)
            planes = None if fused else cp.empty((3, mp, nbp), dtype=cp.int32)
            ldu = _pad16(nb) if fused else nbp
            u = cp.empty((N, 2, m, ldu), dtype=cp.uint8)
            const = crt_constants(N)
            cst = _crt_constants_gpu(N)
            so_r, so_c = _gpu._strides(out)
            last_stats = {"m": m, "k": k, "n": n, "num_moduli": N, "bits": (ga, gb),
                          "kpad": kpad, "block_columns": nb, "blocks": -(-n // nb),
                          "fused": fused, "form": form, "a_residue_bytes": int(a_res.nbytes),
                          "workspace_bytes": int(b_res.nbytes + u.nbytes + (
                              0 if planes is None else planes.nbytes))}
            if not fused:
                handle = cp.cuda.device.get_cublas_handle()
                _gpu.cublas.setStream(handle, cp.cuda.get_current_stream().ptr)
                _gpu.cublas.setPointerMode(handle, _gpu._POINTER_MODE_HOST)
            finish_k = _finish_kernel(N)
        ld = _pad16(nbj) if fused else nbpj
        uj = u.ravel()[: N * 2 * m * ld].reshape(N, 2, m, ld)
        perm = fused and ld % 32 == 0 and _crt_wgmma.PERMUTED
        if fused:
            with _gpu._stage("gemm"):
                _crt_wgmma.gemm_mod(a_res, bres, modulus_table(N), uj, m, ld, permuted=perm)
        else:
            _products_cublas(handle, a_res, bres, planes, uj, const.moduli, m, kpad,
                             prep.is_real)
        _finish(finish_k, uj, m, nbj, ld, cst, prep, fj, ga + gb, oj, so_r, so_c, perm)
    if flag_b is not None:
        settle(None, flag_b)
    return out


def _products_cublas(handle, a_res, bres, planes, u, moduli, m, kpad, real_a=False):
    """``u[l] = [(T1 - T2) mod p_l, (T3 - T1 - T2) mod p_l]`` per modulus: three cuBLAS INT8
    GEMMs into the INT32 ``planes`` (``T1 = Ar Br``, ``T2 = Ai Bi``, ``T3 = As Bs``), then
    ``crt_reduce``. ``a_res`` ``(N, 3, mp, kpad)``, ``bres`` ``(N, 3, nbp, kpad)``, ``u``
    ``(N, 2, m, nbp)``. ``real_a``: A's imaginary residues are zero, so ``T2 = 0`` (its plane
    zeroed once, two products a modulus: :func:`ozsim.gemm.dgemm`, real gates)."""
    mp, nbp = a_res.shape[2], bres.shape[2]
    pl = planes.ravel()[: 3 * mp * nbp]
    reduce_k = _kernel("crt_reduce")
    if real_a:
        pl[mp * nbp : 2 * mp * nbp] = 0
    for i, p in enumerate(moduli):
        with _gpu._stage("gemm"):
            for t in ((0, 2) if real_a else (0, 1, 2)):
                _gpu.gemm_tn_long(handle, nbp, mp, kpad, bres[i, t].data.ptr, kpad,
                                   a_res[i, t].data.ptr, kpad,
                                   pl.data.ptr + 4 * t * mp * nbp, nbp)
        with _gpu._stage("reduce"):
            reduce_k((_grid1(m * nbp // 4),), (_THREADS,),
                     (pl, np.int64(m), np.int64(nbp), np.int64(mp * nbp), np.int32(p),
                      reduce_multiplier(p), u[i]))


def _finish(finish_k, u, m, nbj, ld, cst, prep, fb, gsum, out, so_r, so_c, perm=False):
    """``crt_finish`` over the ``(N, 2, m, ld)`` residues of one column block into ``out``;
    ``perm``: ``u`` as :func:`ozsim.gemm.ozaki2.wgmma.gemm_mod` stores it ``permuted`` (its
    threads then cover every aligned group of 32 stored bytes that holds a column below
    ``nbj``). ``finish_k``: :func:`_finish_kernel`'s pair (``crt_finish_tc`` with its B
    fragments, or ``crt_finish``)."""
    kernel, bfrag = finish_k
    stored = -(-nbj // 32) * 32 if perm else nbj
    cols = _finish_columns(u.shape[0])
    with _gpu._stage("crt"):
        for i0 in range(0, m, 65535):  # grid y: rows
            rows = min(m - i0, 65535)
            if bfrag is not None:
                kernel((-(-stored // (256 * _FINISH_TC_GROUPS)), rows), (256,),
                       (u, np.int64(m), np.int64(nbj), np.int64(ld), prep.norm_exponents, fb,
                        np.int32(gsum), out, np.int64(so_r), np.int64(so_c), np.int64(i0),
                        np.int32(perm), bfrag))
                continue
            kernel((-(-stored // (cols * _THREADS)), rows), (_THREADS,),
                   (u, np.int64(m), np.int64(nbj), np.int64(ld), cst, prep.norm_exponents,
                    fb, np.int32(gsum), out, np.int64(so_r), np.int64(so_c), np.int64(i0),
                    np.int32(perm)))
