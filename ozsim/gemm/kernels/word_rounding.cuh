// Rounding FP32 values to TF32 and FP16 on their bits: the device functions of
// ozsim.gemm.single.rounding (round_tf32, round_fp16; the module docstring has the reasoning),
// the same bits as the NumPy functions there. Used by the split kernels of
// ozsim.gemm.single.cuda and by the multiword one-pass gates (dense_gate.cu, WORDS = 1, 2).
// __fadd_rn / __fsub_rn are never contracted or reassociated.
#ifndef OZSIM_WORD_ROUNDING_CUH
#define OZSIM_WORD_ROUNDING_CUH

__device__ __forceinline__ float ozs_round_tf32(float x) {
    unsigned int u = __float_as_uint(x);
    if ((u & 0x7F800000u) == 0x7F800000u) return x;            // Inf, NaN: unchanged
    unsigned int r = (u + 0x0FFFu + ((u >> 13) & 1u)) & 0xFFFFE000u;
    if ((r & 0x7F800000u) == 0x7F800000u) r = u & 0xFFFFE000u;  // would round to Inf: truncate
    return __uint_as_float(r);
}

__device__ __forceinline__ float ozs_round_fp16(float x) {     // |x| < 65520
    if (fabsf(x) < 6.103515625e-05f) return copysignf(__fsub_rn(__fadd_rn(x, 0.75f), 0.75f), x);
    return ozs_round_tf32(x);
}

#endif  // OZSIM_WORD_ROUNDING_CUH
