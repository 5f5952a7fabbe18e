"""Ozaki scheme II over INT8: CRT over INT8 moduli, Karatsuba complex products, and
``int8-crt-auto``'s choice of the number of moduli.

=============  ==================================================================================
module         what it holds
=============  ==================================================================================
``moduli``     the moduli, CRT constants and bit budgets (shared by the CPU and GPU parts)
``scheme``     the algorithm, written once against an array namespace, and its CPU products
               (derivations and the auto rule in its docstring)
``cuda``       the GPU part (private; imported only when a CuPy array arrives): analysis,
               residue, reduction and reconstruction kernels from ``kernels/*.cu``
``wgmma``      the Hopper products kernel with the reduction mod p fused in (private, GPU)
=============  ==================================================================================
"""

from .moduli import (
    LIMB_BITS,
    MAX_K,
    MAX_MODULI,
    MIN_MODULI,
    MODULI,
    crt_constants,
    kept_bits,
    rounds_to_nearest,
)
from .scheme import (
    BoundStats,
    CRTPlan,
    PreparedCRTOperand,
    analyse_rows,
    bound_stats,
    check_inner_dimension,
    choose_plan,
    crt_reconstruct,
    crt_zgemm,
    fixed_plan,
    int8_crt_zgemm,
    norm_exponents,
    residues,
    scaled_pieces,
    scaling_error_factor,
    sym_mod,
)

__all__ = ['BoundStats', 'CRTPlan', 'LIMB_BITS', 'MAX_K', 'MAX_MODULI', 'MIN_MODULI', 'MODULI', 'PreparedCRTOperand', 'analyse_rows', 'bound_stats', 'check_inner_dimension', 'choose_plan', 'crt_constants', 'crt_reconstruct', 'crt_zgemm', 'fixed_plan', 'int8_crt_zgemm', 'kept_bits', 'norm_exponents', 'residues', 'rounds_to_nearest', 'scaled_pieces', 'scaling_error_factor', 'sym_mod']
