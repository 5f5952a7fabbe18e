// Exact INT32 -> FP64 on the FP64 pipe (the one-pass INT8 gates, int8_gate.cu and mma_gate.cuh,
// and scheme I's fused products, ozaki1/kernels/products_wgmma.cu): cvt.rn.f64.s32 runs on the
// conversion unit, a quarter of the FP64 rate on Hopper. And powers of two and scaling by them
// (the one-pass gates, both schemes' accumulation and reconstruction kernels).
#ifndef OZSIM_EXACT_INT_CUH
#define OZSIM_EXACT_INT_CUH

// (double)v for any int v: 2**52 + 2**31 + v as a double's bits, minus that offset (exact)
__device__ __forceinline__ double small_to_double(int v)
{
    return __hiloint2double(0x43300000, v ^ 0x80000000) - 4503601774854144.0;  // 2**52 + 2**31
}

// 2**e for -1022 <= e <= 1023, made from its bits. (CUDA's ldexp(1.0, e) is not folded into a
// constant even where e is one: four multiplications and about a dozen integer instructions.)
__device__ __forceinline__ double pow2(int e) { return __hiloint2double((e + 1023) << 20, 0); }

// x 2**k, correctly rounded (a multiplication where 2**k is a normal double, else ldexp)
__device__ __forceinline__ double scale2(double x, int k)
{
    return (k >= -1022 && k <= 1023) ? x * __longlong_as_double((long long)(k + 1023) << 52)
                                     : ldexp(x, k);
}

// (x 2**k, y 2**k), each as scale2 rounds it, with one power of two for both where it is normal
// (the write-back of a complex amplitude: crt_gate_exact.cu, crt_gate_slices.cu)
__device__ __forceinline__ double2 scale2_pair(double x, double y, int k)
{
    if (k >= -1022 && k <= 1023) {
        const double m = pow2(k);
        x *= m;
        y *= m;
    } else {
        x = ldexp(x, k);
        y = ldexp(y, k);
    }
    return make_double2(x, y);
}

// x 2**k for k >= -1022 by two multiplications, no branch: 2**k as 2**min(k, 1023) 2**(k -
// min(k, 1023)), so one rounding (as ldexp) where k <= 1023, and above only scalings up (exact
// unless the result overflows)
__device__ __forceinline__ double scale2_up(double x, int k)
{
    const int k1 = min(k, 1023);
    return x * __longlong_as_double((long long)(k1 + 1023) << 52) *
           __longlong_as_double((long long)(k - k1 + 1023) << 52);
}

#endif  // OZSIM_EXACT_INT_CUH
