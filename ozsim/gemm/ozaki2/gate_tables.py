"""The ``__constant__`` tables of ``ozsim/gemm/kernels/crt_gate.cuh`` (private, GPU).

Scheme II's one-pass gate kernels (:mod:`ozsim.gemm.ozaki2.onepass`) and the GEMM path's
tensor-core residues (:func:`ozsim.gemm.ozaki2.cuda.residues_tc`) compile ``crt_gate.cuh``;
:func:`upload_tables` fills its per-modulus constants in a compiled module, once per module.
"""

from __future__ import annotations

from fractions import Fraction

import cupy as cp
import numpy as np

from .moduli import (byte_weight_words, crt_constants, offset_sum_start, quotient_weights,
                     split_offsets, symmetric_powers)

__all__ = ["PIECE_BITS", "upload_tables"]

#: Bits of the pieces a state scalar's integer is cut into (``crt_gate.cuh``: below 8 pieces,
#: a residue's FP32 sum of pieces times weights stays under 2**22).
PIECE_BITS = 12
_MAGIC32 = 3 << 22  # 1.5 * 2**23
_MEMCPY_H2D = 1


def _inverse_rounded_up(p: int) -> np.float32:
    """The least float32 at or above ``1/p``."""
    ip = np.float32(1) / np.float32(p)
    return ip if Fraction(float(ip)) >= Fraction(1, p) else np.nextafter(ip, np.float32(1))


def _c1s_table(moduli, offset) -> np.ndarray:
    """``mod_pc`` of ``crt_gate.cuh`` (C1S_TABLE): per modulus ``p`` and ``residue_double``'s
    ``c1s = (c1 << 12) + 0x40700000`` with ``c1 = OFF + 0x4B000000 p - 0x4B400000``, mod 2**32."""
    out = []
    for p, off in zip(moduli, offset):
        c1 = (off + 0x4B000000 * p - 0x4B400000) % (1 << 32)
        out += [p, ((c1 << 12) + 0x40700000) % (1 << 32)]
    return np.array(out, dtype=np.uint32)


def upload_tables(mod, num_moduli: int, npieces: int = 1) -> None:
    """Fill the ``__constant__`` tables of ``crt_gate.cuh`` in ``mod`` (a ``cupy.RawModule``)
    for the first ``num_moduli`` moduli (:func:`ozsim.gemm.ozaki2.crt_constants`; ``npieces``:
    the pieces of :data:`PIECE_BITS` bits whose weights ``mod_w`` holds)."""
    const = crt_constants(num_moduli)
    p = np.array(const.moduli, dtype=np.float32)
    w = symmetric_powers(const.moduli, PIECE_BITS, npieces).astype(np.float32)
    offset = [m * -(-(1 << 21) // m) for m in const.moduli]  # least multiple of p >= 2**21
    tables = {"mod_p": p, "mod_ip": (np.float32(1) / p).astype(np.float32),
              "mod_ipu": np.array([_inverse_rounded_up(m) for m in const.moduli], np.float32),
              "mod_moff": np.array([_MAGIC32 - o for o in offset], np.float32), "mod_w": w,
              "crt_invp": const.inv_p, "crt_m": const.limbs_M, "crt_big_p": const.limbs_P,
              "crt_start": offset_sum_start(num_moduli),
              "mod_pc": _c1s_table(const.moduli, offset),
              "mod_soff": split_offsets(const.moduli),
              "mod_wd": byte_weight_words(const.moduli),
              "crt_qw": quotient_weights(num_moduli)}
    for name, host in tables.items():
        host = np.ascontiguousarray(host)
        cp.cuda.runtime.memcpy(mod.get_global(name).ptr, host.ctypes.data, host.nbytes,
                               _MEMCPY_H2D)
