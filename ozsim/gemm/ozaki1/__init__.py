"""Ozaki scheme I over INT8 (ozIMMU): slices with shared exponents, exact INT8 slice products,
FP64 accumulation, and INT8-AUTO's choice of the number of slices.

=============  ==================================================================================
module         what it holds
=============  ==================================================================================
``scheme``     the algorithm, written once against an array namespace, and its CPU products
               (the exactness argument and ozsim's INT8-AUTO rule are in its docstring)
``cuda``       the GPU part (private; imported only when a CuPy array arrives): analysis, split
               and accumulation kernels from ``kernels/*.cu``, cuBLAS INT8 products
``cublaslt``   cuBLASLt INT8 GEMMs for long K (private, GPU)
=============  ==================================================================================
"""

from .scheme import (
    MAX_SPLITS,
    MIN_SPLITS,
    PreparedOperand,
    SIGNIFICAND_BITS,
    SplitOperand,
    analyse_rows,
    bits_per_slice,
    choose_num_splits,
    default_workspace_bytes,
    int8_zgemm,
    loss_histogram,
    mean_loss,
    row_exponents,
    split_columns,
    split_rows,
)

__all__ = ['MAX_SPLITS', 'MIN_SPLITS', 'PreparedOperand', 'SIGNIFICAND_BITS', 'SplitOperand', 'analyse_rows', 'bits_per_slice', 'choose_num_splits', 'default_workspace_bytes', 'int8_zgemm', 'loss_histogram', 'mean_loss', 'row_exponents', 'split_columns', 'split_rows']
