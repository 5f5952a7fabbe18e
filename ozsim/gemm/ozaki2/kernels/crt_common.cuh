// Scheme II (CRT): definitions shared by the stages (analyse.cu, residues.cu, residues32.cu,
// finish.cu). The scheme's constants come from ozsim.gemm.ozaki2.moduli as options of every
// scheme II module (ozaki2/cuda.py, _CONSTANTS): -DNFRAC=<NORM_FRAC_BITS>,
// -DLBITS=<LIMB_BITS>.
#ifndef OZSIM_CRT_COMMON_CUH
#define OZSIM_CRT_COMMON_CUH
#if !defined(NFRAC) || !defined(LBITS)
#error "scheme II kernels need -DNFRAC and -DLBITS (ozsim.gemm.ozaki2.moduli)"
#endif

#define DMAX 1.7976931348623157e308
#define EMIN_ (-2147483647 - 1)
// (y + RMAGIC) - RMAGIC = rint(y) for |y| < 2**51 (two FP64 adds instead of a conversion-unit
// rounding), and the low 32 bits of y + RMAGIC are rint(y) as a two's-complement int32.
#define RMAGIC 6755399441055744.0

__device__ __forceinline__ double rint_small(double y) { return (y + RMAGIC) - RMAGIC; }
__device__ __forceinline__ int int_small(double y) { return __double2loint(y + RMAGIC); }

__device__ __forceinline__ double symmod(double x, double p, double ip, double hi, double lo)
{
    // exact for integer-valued |x| <= 2**45 (ozaki2.sym_mod): q is within 1 of round(x / p)
    // (with or without FMA contraction), q*p and x - q*p are exact; one correction each way
    double r = x - rint_small(x * ip) * p;
    if (r > hi) r -= p;
    if (r < lo) r += p;
    return r;
}

// x * 2**e as ldexp does (exact, or correctly rounded on underflow), by one multiplication
// where 2**e is a normal number
__device__ __forceinline__ double pow2(int e) { return __hiloint2double((e + 1023) << 20, 0); }

#endif  // OZSIM_CRT_COMMON_CUH
