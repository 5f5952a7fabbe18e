// Exact INT32 -> FP64 on the FP64 pipe (the one-pass INT8 gates, int8_gate.cu and mma_gate.cuh,
// and scheme I's fused products, ozaki1/kernels/products_wgmma.cu): cvt.rn.f64.s32 runs on the
// conversion unit, a quarter of the FP64 rate on Hopper.
#ifndef OZSIM_EXACT_INT_CUH
#define OZSIM_EXACT_INT_CUH

// (double)v for any int v: 2**52 + 2**31 + v as a double's bits, minus that offset (exact)
__device__ __forceinline__ double small_to_double(int v)
{
    return __hiloint2double(0x43300000, v ^ 0x80000000) - 4503601774854144.0;  // 2**52 + 2**31
}

#endif  // OZSIM_EXACT_INT_CUH
