// Scheme II, stage "reduce" (ozsim.gemm.ozaki2.cuda._products_cublas): the INT32 planes of
// cuBLAS's three products of one modulus reduced to the UINT8 residues of the result. No options.

// One modulus: t holds the INT32 planes T1, T2, T3 (each (mp, ld) row-major, plane elements
// apart, ld a multiple of 4); u gets u_re = (T1 - T2) mod p and u_im = (T3 - T1 - T2) mod p in
// [0, p) as UINT8, (2, m, ld) (columns >= nb: residues of the zero padding). Integer arithmetic:
// |T| <= k 2**14 < 2**31, and for 128 < p <= 256, a < 2**31 and M = floor(2**39 / p) + 1 < 2**32,
// floor(a M / 2**39) = floor(a / p) (the excess a (M - 2**39/p) / 2**39 < 2**-8 <= 1/p cannot
// carry past the next integer). Each thread takes 4 adjacent columns: three 16-byte loads and
// two 4-byte stores.
__device__ __forceinline__ int crt_modp(int t, int p, unsigned int M)
{
    const unsigned int a = t < 0 ? (unsigned int)(-t) : (unsigned int)t;
    const int r = (int)(a - (__umulhi(a, M) >> 7) * (unsigned int)p);
    return (t < 0 && r) ? p - r : r;  // in [0, p)
}

extern "C" __global__ void crt_reduce(
    const int* __restrict__ t, long long m, long long ld, long long plane, int p,
    unsigned int M, unsigned char* __restrict__ u)
{
    const long long nq = ld / 4;
    const long long total = m * nq;
    const int4* t1p = (const int4*)t;
    const int4* t2p = (const int4*)(t + plane);
    const int4* t3p = (const int4*)(t + 2 * plane);
    unsigned int* ure = (unsigned int*)u;
    unsigned int* uim = (unsigned int*)(u + m * ld);
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (long long)gridDim.x * blockDim.x) {
        const int4 a = t1p[idx], b = t2p[idx], c = t3p[idx];
        const int t1[4] = {a.x, a.y, a.z, a.w}, t2[4] = {b.x, b.y, b.z, b.w};
        const int t3[4] = {c.x, c.y, c.z, c.w};
        unsigned int wre = 0u, wim = 0u;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int r1 = crt_modp(t1[e], p, M), r2 = crt_modp(t2[e], p, M);
            const int r3 = crt_modp(t3[e], p, M);
            int re = r1 - r2;
            re += re < 0 ? p : 0;
            int im = r3 - r1 - r2;
            im += im < 0 ? p : 0;
            im += im < 0 ? p : 0;
            wre |= (unsigned int)re << (8 * e);
            wim |= (unsigned int)im << (8 * e);
        }
        ure[idx] = wre;
        uim[idx] = wim;
    }
}
