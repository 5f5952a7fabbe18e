// Scheme I, stage "split" (ozsim.gemm.ozaki1.cuda.split): the INT8 slices of the rows of X.
// Options: -DCH=<4, 8 or 16> (k per thread: the largest that divides the stored k).
#ifndef CH
#error "split.cu needs -DCH=<4, 8 or 16>"
#endif

// Split the rows of X (rows, k) complex128, element strides (sr, sc), into ns INT8 slices of
// `bits` bits each ([ozIMMU] Alg. 3), written K-major to out (2 ra, ns, kpad): rows 0..rows-1
// real parts, ra..ra+rows-1 imaginary parts (ra >= rows; rows rows..ra-1 of each half and
// entries k..kpad-1 are zero); slice i at position i (rev: ns-1-i). Each thread handles CH
// consecutive k of one row and stores CH bytes per slice.
// qb == 0: adjacent threads take adjacent k-chunks of a row (rows contiguous along k, sc == 1).
// qb > 0 (rows adjacent in memory, |sr| == 1): a warp takes a tile of 32/qb rows x qb chunks,
// so that its loads cover 32/qb adjacent rows (full sectors) and its stores qb*CH contiguous
// bytes of each slice row.
extern "C" __global__ void oz_split(
    const double2* __restrict__ x, long long rows, long long ra, long long k, long long kpad,
    long long sr, long long sc, const int* __restrict__ exps, int bits, int ns, int rev,
    signed char* __restrict__ out, int qb)
{
    const long long nq = kpad / CH;
    const int rb = qb ? 32 / qb : 1;
    const long long nrt = (ra + rb - 1) / rb;
    const long long total = qb ? nrt * ((nq + qb - 1) / qb) * 32 : ra * nq;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const double radix = (double)(1 << bits);
    for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += stride) {
        long long r, q;
        if (qb) {
            const int lane = (int)(idx & 31);
            const long long tile = idx >> 5;
            r = (tile % nrt) * rb + lane / qb;
            q = (tile / nrt) * qb + lane % qb;
            if (r >= ra || q >= nq) continue;
        } else {
            q = idx % nq; r = idx / nq;
        }
        const bool valid = r < rows;
        const int scale = valid ? bits - exps[r] : 0;
        double2 v[CH];
#pragma unroll
        for (int c = 0; c < CH; ++c) {
            long long kk = q * CH + c;
            v[c] = (valid && kk < k) ? x[r * sr + kk * sc] : make_double2(0.0, 0.0);
        }
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            double rem[CH];
#pragma unroll
            for (int c = 0; c < CH; ++c) rem[c] = ldexp(half ? v[c].y : v[c].x, scale);
            signed char* dst = out + ((half * ra + r) * ns) * kpad + q * CH;
            for (int i = 0; i < ns; ++i) {
                unsigned int w[CH / 4];
#pragma unroll
                for (int c = 0; c < CH / 4; ++c) w[c] = 0u;
#pragma unroll
                for (int c = 0; c < CH; ++c) {
                    // round to nearest (ties to even, as np.rint), clipped to the INT8 slice
                    // range: the CPU's split_rows, bit for bit
                    double t = fmin(fmax(rint(rem[c]), -(radix - 1.0)), radix - 1.0);
                    w[c / 4] |= ((unsigned int)(int)t & 0xffu) << (8 * (c % 4));
                    rem[c] = (rem[c] - t) * radix;  // exact; unused after the last slice
                }
                signed char* p = dst + (long long)(rev ? ns - 1 - i : i) * kpad;
#if CH == 16
                *(uint4*)p = make_uint4(w[0], w[1], w[2], w[3]);
#elif CH == 8
                *(uint2*)p = make_uint2(w[0], w[1]);
#else
                *(unsigned int*)p = w[0];
#endif
            }
        }
    }
}
