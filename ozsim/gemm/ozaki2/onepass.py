"""One-pass gates by Ozaki scheme II on the GPU (``int8-crt{N}``, ``int8-crt-auto``), ``d <= 4``.

Private; imported only when a CuPy state meets a gate of at most :data:`MAX_QUBITS` qubits. The
GEMM path of a state-vector gate makes many passes over the state (a transposing copy, the
analysis, the residues of every modulus, the INT8 products, the CRT reconstruction: 170 to 330
times the time of one read and one write of the state at d <= 2 on an H100, where the INT8
tiles are nearly empty). This kernel does the whole of
:func:`ozsim.gemm.ozaki2.scheme.int8_crt_zgemm` for one amplitude group in registers and writes
the result in place (algorithm and exactness argument: ``ozsim/gemm/kernels/crt_gate.cu``):
one read and one write of the state, ``int8-crt-auto`` included (its number of moduli depends on
the gate alone: :func:`ozsim.gemm.ozaki2.choose_plan`). Same bits as the CPU path.

Two kernels:

- ``d <= 2``: ``kernels/crt_gate.cu``, one thread per amplitude group on the CUDA cores. Cost per
  amplitude with N moduli and L digits of P: about ``2 N (6 + 3 + 2 * 2**d)`` FP32 operations
  (residues and products) and ``2 N (L + 1)`` FP64 multiply-adds (the CRT sums); the FP64 part
  is the larger one on an H100.
- ``d = 3, 4``: ``kernels/crt_gate_mma.cu`` on the INT8 tensor cores (``mma.sync`` m16n8k32), a
  block per tile of 128 (``d = 3``) or 64 amplitude groups, B's residues of every modulus in
  shared memory, A's as ready-made fragments (made once per gate and plan): one INT8 product per
  modulus (``8 N max(2**d, 16)`` INT8 operations an amplitude), the same residue and CRT-sum
  arithmetic as above without the FP32 products.
"""

from __future__ import annotations

import functools
from pathlib import Path

import cupy as cp
import numpy as np

from ...errors import NonFiniteError
from .. import _mma_gate
from .._gpu import _sms, raw_module
from .moduli import LIMB_BITS, NORM_FRAC_BITS, crt_constants

__all__ = ["MAX_QUBITS", "apply"]

#: Largest gate of the one-pass kernels (the tensor-core one keeps the CRT sums of 8 entries a
#: thread: 8 (L + 1) doubles).
MAX_QUBITS = 4
#: Largest gate of the CUDA-core kernel (registers: 2 * 2**d * 6 pieces, 2**d (L + 1) sums).
MAX_SCALAR_QUBITS = 2
_PIECES, _PIECE_BITS = 6, 13
_KERNELS = Path(__file__).resolve().parent.parent / "kernels"
_SOURCE = _KERNELS / "crt_gate.cu"
_MMA_SOURCE = _KERNELS / "crt_gate_mma.cu"
_MEMCPY_D2D, _MEMCPY_H2D = 3, 1


@functools.cache  # (the constant tables are uploaded once per module)
def _module(d: int, num_moduli: int, rounding: bool, device: int):
    const = crt_constants(num_moduli)
    mod = raw_module(_MMA_SOURCE if d > MAX_SCALAR_QUBITS else _SOURCE, (
        "-std=c++17", f"-DGATE_QUBITS={d}", f"-DNMOD={num_moduli}",
        f"-DNLIMB={const.num_limbs}", f"-DROUND={int(rounding)}", f"-DNFRAC={NORM_FRAC_BITS}",
        f"-DLBITS={LIMB_BITS}"))
    p = np.array(const.moduli, dtype=np.float32)
    w = np.array([[((1 << (_PIECE_BITS * i)) % m + m // 2) % m - m // 2 for i in range(_PIECES)]
                  for m in const.moduli], dtype=np.float32)  # symmetric 2**(13 i) mod p
    tables = {"mod_p": p, "mod_ip": (np.float32(1) / p).astype(np.float32), "mod_w": w,
              "crt_invp": const.inv_p, "crt_m": const.limbs_M, "crt_big_p": const.limbs_P}
    for name, host in tables.items():
        host = np.ascontiguousarray(host)
        cp.cuda.runtime.memcpy(mod.get_global(name).ptr, host.ctypes.data, host.nbytes,
                               _MEMCPY_H2D)
    return mod


def _positions(positions) -> list[np.int32]:
    return [np.int32(p) for p in positions] + [np.int32(0)] * (6 - len(positions))


def apply(psi, prep, positions, plan) -> None:
    """``psi <- U psi`` by scheme II with ``plan``, in one pass.

    Args:
        psi: ``(2**n,)`` complex128 CuPy state, C-contiguous.
        prep: :class:`~ozsim.gemm.ozaki2.PreparedCRTOperand` of the ``(2**d, 2**d)`` gate
            (CuPy), little-endian over the amplitude-index bits ``positions``.
        positions: d distinct bit positions, ``1 <= d <= MAX_QUBITS``.
        plan: :class:`~ozsim.gemm.ozaki2.CRTPlan` (moduli and kept bits).

    Raises:
        NonFiniteError: NaN or Inf in the state.
    """
    d = len(positions)
    n_mod = plan.num_moduli
    mod = _module(d, n_mod, plan.rounding, cp.cuda.Device().id)
    flag = cp.zeros(1, dtype=cp.int32)
    groups = psi.size >> d
    if d > MAX_SCALAR_QUBITS:
        _apply_mma(mod, psi, prep, positions, plan, groups, flag)
    else:
        _apply_scalar(mod, psi, prep, positions, plan, groups, flag)
    if int(flag.get()[0]):
        raise NonFiniteError("the state vector has NaN or Inf amplitudes")


def mma_fragments(prep, plan):
    """A's residues for ``plan`` as ``mma.sync`` A fragments, one plane per modulus
    (:func:`ozsim.gemm._mma_gate.a_fragments`), made once per gate and plan."""
    cache = prep.__dict__.setdefault("_mma_fragments", {})
    key = (plan.bits_a, plan.num_moduli, plan.rounding)
    frags = cache.get(key)
    if frags is None:
        res = prep.residues(plan.bits_a, plan.num_moduli, plan.rounding)  # (N, 3, m, k)
        frags = cache[key] = _mma_gate.a_fragments(res[:, 0], res[:, 1])
    return frags


def _apply_mma(mod, psi, prep, positions, plan, groups, flag):
    d = len(positions)
    nc, _, w = _mma_gate.tile(d)
    n_mod = plan.num_moduli
    frags = mma_fragments(prep, plan)
    fa = cp.ascontiguousarray(prep.norm_exponents, dtype=cp.int32)
    kernel = mod.get_function("crt_gate_mma")
    smem = _mma_gate.a_fragment_bytes(d, n_mod) + 4 * n_mod * nc * w
    if kernel.max_dynamic_shared_size_bytes < smem:
        kernel.max_dynamic_shared_size_bytes = smem
    blocks = int(max(1, min(-(-groups // nc), 8 * _sms())))
    kernel((blocks,), (_mma_gate.THREADS,),
           (psi, np.int64(groups), *_positions(positions), frags, fa, np.int32(plan.bits_b),
            np.int32(plan.bits_a + plan.bits_b), flag), shared_mem=smem)


def _apply_scalar(mod, psi, prep, positions, plan, groups, flag):
    n_mod = plan.num_moduli
    res = prep.residues(plan.bits_a, n_mod, plan.rounding)[:, :2]  # (N, [Ar, Ai], m, k)
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
