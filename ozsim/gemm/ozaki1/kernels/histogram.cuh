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

// add the block's shared histogram into the global one
__device__ __forceinline__ void oz_hist_flush(const unsigned int* sh,
                                              unsigned long long* __restrict__ hist)
{
    __syncthreads();
    for (int i = threadIdx.x; i <= MAXD; i += blockDim.x)
        if (sh[i]) atomicAdd(&hist[i], (unsigned long long)sh[i]);
}

#endif  // OZSIM_OZAKI1_HISTOGRAM_CUH
