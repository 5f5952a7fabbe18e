// Scheme I's loss histogram (ozsim.gemm.ozaki1.loss_histogram), counted per block in shared
// memory by the analysis kernels (analyse.cu). Bins 0..MAXD: MAXD must be defined before this
// header is included.
#ifndef OZSIM_OZAKI1_HISTOGRAM_CUH
#define OZSIM_OZAKI1_HISTOGRAM_CUH
#ifndef MAXD
#error "histogram.cuh needs MAXD (the last bin)"
#endif

// count nonzero x in bin clamp(e - exponent(x), 0, MAXD) of the block's shared histogram
__device__ __forceinline__ void oz_hist_add(unsigned int* sh, int e, double x)
{
    if (x != 0.0) {
        int ev;
        frexp(x, &ev);
        int d = e - ev;
        d = d < 0 ? 0 : (d > MAXD ? MAXD : d);
        atomicAdd(&sh[d], 1u);
    }
}

// frexp's exponent of a nonzero finite v, from its bits (frexp itself for a subnormal)
__device__ __forceinline__ int oz_exponent(double v)
{
    const int ex = (int)((__double_as_longlong(v) >> 52) & 0x7ff);
    if (ex != 0) return ex - 1022;
    int e;
    frexp(v, &e);
    return e;
}

// Losses 0..7 (most scalars of a column: a state's amplitudes sit within a few binades of the
// column's largest) counted in registers, 8 bits each in lo (0..3) and hi (4..7), the rest by
// shared atomics: one atomic a value on a few hot bins serialises. The caller flushes with
// oz_flush_counts before a counter can pass 255.
__device__ __forceinline__ void oz_count_loss(unsigned* sh, unsigned& lo, unsigned& hi, int e,
                                              double x)
{
    if (x != 0.0) {
        const int b = min(e - oz_exponent(x), MAXD);  // e: the column's exponent, e >= x's
        if (b < 8) {
            const unsigned inc = 1u << (8 * (b & 3));
            if (b < 4) lo += inc; else hi += inc;
        } else {
            atomicAdd(&sh[b], 1u);
        }
    }
}

// the packed counters of oz_count_loss into the shared histogram
__device__ __forceinline__ void oz_flush_counts(unsigned* sh, unsigned& lo, unsigned& hi)
{
#pragma unroll
    for (int b = 0; b < 4; ++b) {
        const unsigned cl = (lo >> (8 * b)) & 0xffu, ch = (hi >> (8 * b)) & 0xffu;
        if (cl) atomicAdd(&sh[b], cl);
        if (ch) atomicAdd(&sh[4 + b], ch);
    }
    lo = hi = 0;
}

// add the block's shared histogram into the global one
__device__ __forceinline__ void oz_hist_flush(const unsigned int* sh,
                                              unsigned long long* __restrict__ hist)
{
    __syncthreads();
    for (int i = threadIdx.x; i <= MAXD; i += blockDim.x)
        if (sh[i]) atomicAdd(&hist[i], (unsigned long long)sh[i]);
}

#endif  // OZSIM_OZAKI1_HISTOGRAM_CUH
