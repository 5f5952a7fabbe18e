"""Which gates scheme II's exact-product kernels take (``ozsim/gemm/kernels/crt_gate_exact.cu``,
``crt_gate_slices.cu``).

For a gate of ``d <= 3`` qubits the first one-pass kernel forms each entry of scheme II's
integer product ``C' = A' B'`` (:mod:`ozsim.gemm.ozaki2.scheme`, steps 2 and 5) directly, as a
sum of ``2 * 2**d`` products of the scaled integers in 64-bit integer arithmetic, instead of from
its residues; the second, for ``d = 3..6``, from INT8 products of the integers' balanced bytes
(all 64 slice pairs, exact). The CRT's rounding of ``C'`` is then applied to the exact integer
(same bits). This module holds the host-side rule, importable without CuPy: the bounds that keep
the kernels' integers in range (:func:`exact_limb_bounds`), the plans they take
(:func:`exact_applies`, :func:`slices_apply`) and the padding rule of the backend registry
(:func:`padded_qubits`).
"""

from __future__ import annotations

import math

from .moduli import crt_constants
from .scheme import CRTPlan, fixed_plan

__all__ = ["EXACT_LIMB_BITS", "EXACT_QUBITS", "SLICE_MAX_QUBITS", "exact_applies",
           "exact_limb_bounds", "padded_qubits", "slices_apply"]

#: Largest gate of the exact-product kernel: its products cost ``12 * 2**d`` 32 x 32 -> 64-bit
#: multiply-adds an amplitude (at d = 4 more than the tensor-core kernel's residues and CRT sums).
EXACT_QUBITS = 3
#: Largest gate of the byte-slice kernel (``crt_gate_slices.cu``: ``64 * 2**d / 16`` INT8
#: products an amplitude, A's fragments ``2**(2d + 4)`` bytes of shared memory).
SLICE_MAX_QUBITS = 6
#: Bits of the kernel's low limbs (its ``-DTBITS``).
EXACT_LIMB_BITS = 29
#: The gate size a scheme II gate of fewer qubits is padded to where the exact-product kernel
#: does not take its plan (the tensor-core kernel's smallest).
PADDED_QUBITS = 3


def exact_limb_bounds(d: int, bits_a: int, bits_b: int, limb_bits: int = EXACT_LIMB_BITS
                      ) -> dict[str, int]:
    """Bounds on the integers of ``crt_gate_exact.cu`` for a d-qubit gate and kept bits ``gA``,
    ``gB`` (Python integers; :func:`exact_applies` asks each to fit its type).

    A row of the scaled gate ``A'`` (its ``2 K`` real scalars, ``K = 2**d``) has norm below
    ``A = 2**gA + 2**8`` (:mod:`ozsim.gemm.ozaki2.scheme`, step 2), a column of the scaled
    state ``B'`` below ``B = 2**gB + 2**8``. So ``Re a``, ``Im a`` have norms ``<= A`` and ``Re a
    + Im a`` ``<= sqrt(2) A``; the same for a column. Each vector is cut into high limbs ``h =
    floor(v / 2**t)`` (``||h|| <= ||v|| / 2**t + sqrt(K)``) and low ones ``l`` in ``[0, 2**t)``
    (``||l|| < sqrt(K) 2**t``). By Cauchy-Schwarz ``|sum h h'| <= ||h|| ||h'||``, ``|sum (h l' +
    l h')| <= ||h|| ||l'|| + ||l|| ||h'||`` and ``0 <= sum l l' < K 4**t``; Re is ``S1 - S2``
    and Im ``S3 - S1 - S2`` (Gauss), so each combined sum is at most the sum of its parts'
    bounds (every partial sum along the way too: a sum over fewer terms).

    Returns:
        ``{"limb": ..., "mid": ..., "hh": ..., "hl": ..., "ll": ...}``: the largest magnitude of
        a high limb and of a limb sum ``h + l`` (Karatsuba's factors; INT32 in the kernel), and
        of the combined limb sums of Re and Im (INT64; the sums along the way may wrap mod
        ``2**64``, as Karatsuba's ``sum (h + l)(h' + l')`` can, where these are in range).
    """
    k = 1 << d
    rk = math.isqrt(k - 1) + 1  # >= sqrt(K)
    big_a, big_b = (1 << bits_a) + 256, (1 << bits_b) + 256

    def root2(x):  # >= sqrt(2) x
        return math.isqrt(2 * x * x) + 1

    def hi(x):  # >= ||h|| for ||v|| <= x
        return -(-x >> limb_bits) + rk

    lo = rk << limb_bits
    re_hl = 2 * (hi(big_a) + hi(big_b)) * lo
    limb = max(root2(big_a), root2(big_b)) // (1 << limb_bits) + 1
    return {"limb": limb, "mid": limb + (1 << limb_bits),
            "hh": hi(root2(big_a)) * hi(root2(big_b)) + 2 * hi(big_a) * hi(big_b),
            "hl": (hi(root2(big_a)) + hi(root2(big_b))) * lo + re_hl,
            "ll": 2 * k << (2 * limb_bits)}


def exact_applies(d: int, plan: CRTPlan) -> bool:
    """Whether ``crt_gate_exact.cu`` applies a d-qubit gate under ``plan``: ``d <=``
    :data:`EXACT_QUBITS` and its integers fit (:func:`exact_limb_bounds`; up to 15 moduli)."""
    if d > EXACT_QUBITS:
        return False
    b = exact_limb_bounds(d, plan.bits_a, plan.bits_b)
    return b["mid"] < 1 << 31 and max(b["hh"], b["hl"], b["ll"]) < 1 << 63



def slices_apply(d: int, plan: CRTPlan) -> bool:
    """Whether ``crt_gate_slices.cu`` can apply a d-qubit gate under ``plan``: ``3 <= d <=``
    :data:`SLICE_MAX_QUBITS`, every scaled integer of A and B within ``2**62`` (8 balanced
    bytes; an entry is at most its row's or column's norm, below ``2**g + 2**8``) and ``C'``
    within 128 bits (``P`` of at most 3 digits of ``LIMB_BITS``: up to 15 moduli). The level
    sums of its slice products stay below ``8 * 2**(d+1) * 128**2 <= 2**24`` at d = 6."""
    if not 3 <= d <= SLICE_MAX_QUBITS:
        return False
    limit = 1 << 62
    return ((1 << plan.bits_a) + 256 <= limit and (1 << plan.bits_b) + 256 <= limit
            and crt_constants(plan.num_moduli).num_limbs <= 3)


def padded_qubits(count: int | None, d: int) -> int:
    """Scheme II's padding rule (:attr:`ozsim.gemm.registry.Scheme.pad_gates`): a gate of
    ``d <= 2`` qubits is applied as ``I (x) U`` on :data:`PADDED_QUBITS` qubits only under a
    fixed number of moduli ``count`` whose plan the exact-product kernel does not take (16 or
    more: the CUDA-core residue kernel took 21x / 7.3x the copy floor at d = 1 / 2, the padded
    tensor-core one 3.8x, H200); ``int8-crt-auto`` (``count`` None) and up to 15 moduli run as
    they are (1.6x, 1.9x). A function of the backend and d alone, so CPU and GPU pad alike."""
    if d > 2 or count is None or exact_applies(d, fixed_plan(count)):
        return d
    return PADDED_QUBITS
