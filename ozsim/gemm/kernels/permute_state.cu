// Permute the qubits (index bits) of a state vector: dst[o] = src[in(o)], one read and one write
// of each amplitude (StateVector._permute on the GPU; its tables: ozsim/gemm/_permutation.py).
//
// in(o) moves each bit of the output index o to the input bit that holds the same qubit. The host
// splits the qubits in two:
//   * inner: the qubits at input bits 0 .. L-1 (2**L * ELEM_BYTES = 64 contiguous input bytes),
//     numbered by i; inner_out[i] is i's bits deposited at those qubits' output bits.
//   * the other N - L qubits, numbered by a work index w in ascending output bit order.
// Element e = (w << L) | i: consecutive threads read consecutive amplitudes (whole sectors) and
// write, for each i, runs of consecutive outputs (consecutive w), or pairs interleaving within
// one sector where an inner qubit holds output bit 0.
//
// w's deposits into the output and input indices are sums over its bit fields (the qubits are
// disjoint bits), read from tables of (output, input) offsets: lo for w's low B bits (shared
// memory, one 16-byte read an element), mid and top for the bits above (one read each per chunk
// of 2**B values of w, the same for the whole block). No index arithmetic per qubit, so any
// permutation costs about the same: 1.08-1.26x a device copy on an H200 (N = 30), where CuPy's
// strided copy of the same permutation takes 1.03x (targets all above bit 20) to 24x (a
// scrambled layout back to canonical order). Rejected: warps writing consecutive outputs
// (reads 64 bytes apart: 1.5-2.6x); the next chunk's table reads issued a chunk ahead (same).
//
// Compile-time: ELEM_BYTES (16: complex128, 8: complex64), L (inner qubits), CHUNK_BITS (11: a
// chunk is 2**11 elements, UNROLL = 8 per thread of a 256-thread block, loads before stores;
// ozsim.gemm._permutation.CHUNK_BITS), B = CHUNK_BITS - L.
#ifndef ELEM_BYTES
#define ELEM_BYTES 16
#endif
#ifndef L
#define L 2
#endif
#if ELEM_BYTES == 16
typedef double2 elem_t;
#else
typedef float2 elem_t;
#endif
#define INNER (1 << L)
#ifndef CHUNK_BITS
#define CHUNK_BITS 11
#endif
#define B (CHUNK_BITS - L)
#define THREADS 256
#define UNROLL ((1 << CHUNK_BITS) / THREADS)

// lo: 2**B (output, input) offsets; mid: 2**mid_bits; top: the rest; chunks: 2**(N - CHUNK_BITS).
extern "C" __global__ void __launch_bounds__(THREADS)
permute_state(const elem_t* __restrict__ src, elem_t* __restrict__ dst,
              const longlong2* __restrict__ lo, const longlong2* __restrict__ mid,
              const longlong2* __restrict__ top, const long long* __restrict__ inner_out,
              int mid_bits, long long chunks)
{
    __shared__ longlong2 s_lo[1 << B];
    for (int t = threadIdx.x; t < (1 << B); t += THREADS) s_lo[t] = lo[t];
    __syncthreads();
    const int i = threadIdx.x & (INNER - 1);
    const long long i_out = inner_out[i];
    for (long long c = blockIdx.x; c < chunks; c += gridDim.x) {
        const longlong2 m = mid[c & ((1LL << mid_bits) - 1)], t = top[c >> mid_bits];
        const long long base_out = m.x + t.x + i_out, base_in = m.y + t.y + i;
        elem_t v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            v[u] = src[base_in + s_lo[(u * THREADS + threadIdx.x) >> L].y];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            dst[base_out + s_lo[(u * THREADS + threadIdx.x) >> L].x] = v[u];
    }
}
