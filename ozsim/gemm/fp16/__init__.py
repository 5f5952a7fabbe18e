"""The Ozaki scheme over FP16 slices with FP32 accumulation ([DGEMM-TC]: Mukunoki, Ozaki, Ogita,
Imamura, ISC 2020): ``fp16x{s}`` and ``fp16-auto``; the correctly rounded ``fp16-cr`` is in
:mod:`ozsim.gemm.exact`.

=============  ==================================================================================
module         what it holds
=============  ==================================================================================
``scheme``     the slice width rule, ``fp16-auto``'s rule and the product, written once against an
               array namespace on top of scheme I's split and accumulation (its docstring has
               the exactness argument)
``backend``    the registry's ``run`` and ``prepare``
``cuda``       the GPU part (private; imported only when a CuPy array arrives): FP16 slices and
               ``cublasGemmEx`` FP16 -> FP32 Tensor Core products
=============  ==================================================================================
"""

from .scheme import (
    FP16_MAX_SLICE,
    MAX_SPLITS,
    MIN_SPLITS,
    bits_per_slice,
    choose_num_splits,
    fp16_zgemm,
    max_loss,
    prepared_fp16_slices,
)

__all__ = ["FP16_MAX_SLICE", "MAX_SPLITS", "MIN_SPLITS", "bits_per_slice", "choose_num_splits",
           "fp16_zgemm", "max_loss", "prepared_fp16_slices"]
