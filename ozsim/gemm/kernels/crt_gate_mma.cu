// One-pass gate by Ozaki scheme II on INT8 tensor cores (int8-crt{N}, int8-crt-auto), d = 3, 4:
// psi <- U psi in place, in one read and one write of the state.
//
// The same numbers as ozsim.gemm.ozaki2.scheme.int8_crt_zgemm on U (the A operand: its weighted
// residues q_p [Ar, Ai] mod p, made once per gate into mma fragments) and the state viewed as
// B = (2**d, 2**(n-d)) through the target qubits, with the tiles of mma_gate.cuh:
//   1. split: a column's norm exponent f (norm_exponents: e from its largest |Re|, |Im|, the
//      exact sum S of the squares of ceil(|x| 2**(NFRAC - e)) over its K amplitudes, reduced
//      over the column's threads, f = e - NFRAC + ceil(bl(S) / 2)); each scalar's integer v =
//      rnd(ldexp(x, gB - f)) in NPIECE pieces (crt_gate.cuh), and per modulus p its residue
//      sum_i h_i (2**(13 i) mod p) less rint(. fl32(1/p)) p, moved into [-128, 127] (any
//      representative serves: the products are reduced mod p), one INT8 plane per modulus in
//      shared memory;
//   2. per modulus, one mma product of the real embedding of A's residues and B's plane (|sum|
//      <= KD 128**2 < 2**22: exact), u = Re, Im mod p in [0, p) (exact in FP32): the unique
//      residues of q_p C' that the GEMM path's Karatsuba products reduce to as well;
//   3. the CRT sums of ozaki2._CRTAccumulator in FP64 in the moduli's order (the quotient
//      estimate sum u fl(1/p) and the base-2**LBITS digit sums, exact), the carries and the one
//      rounding (crt_finish), ldexp by fA[row] + f - (gA + gB), written back in place.
// Same bits as the CPU path. NaN or Inf in a column sets *flag and leaves the column as it was.
//
// Options: -DGATE_QUBITS=d (3, 4) -DNMOD=N -DNLIMB=<digits of P> -DROUND=0|1 and the scheme's
// constants -DNFRAC -DLBITS (ozsim.gemm.ozaki2.moduli). Shared memory (dynamic): A's
// fragments, NMOD * A_STRIDE * 16 bytes, and B's residues, NMOD * NC * W * 4 bytes.

#include "crt_gate.cuh"
#include "mma_gate.cuh"

#if WMT * WNT > 2
#error "crt_gate_mma.cu keeps the CRT sums of 8 entries a thread (d <= 4)"
#endif

__device__ __forceinline__ float small_to_float(int v) { return __int_as_float(0x4B400000 + v) - RMAGIC32; }
__device__ __forceinline__ int float_to_small(float v) { return __float_as_int(v + RMAGIC32) - 0x4B400000; }

// The column's norm exponent f (ozaki2.norm_exponents) from its exponent e: the exact sum of the
// squares of ceil(|x| 2**(NFRAC - e)) over the column (integers below 2**53: any order)
__device__ __forceinline__ int norm_exponent(const double2 (&x)[MPT], int e)
{
    double s = 0.0;
#pragma unroll
    for (int i = 0; i < MPT; ++i) {
        const double qr = ceil(scale2(fabs(x[i].x), NFRAC - e));  // exact, <= 2**13
        const double qi = ceil(scale2(fabs(x[i].y), NFRAC - e));
        s += qr * qr;
        s += qi * qi;
    }
#pragma unroll
    for (int o = 1; o < TPC; o <<= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    int bl;
    frexp(s, &bl);
    return s > 0.0 ? e - NFRAC + (bl + 1) / 2 : 0;
}

extern "C" __global__ void __launch_bounds__(THREADS, 2)
crt_gate_mma(double2* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3, int p4,
             int p5, const uint4* __restrict__ a_frag, const int* __restrict__ a_f, int gb,
             int gsum, int* __restrict__ flag)
{
    extern __shared__ uint4 smem[];  // [A's fragments [NMOD][A_STRIDE]][B's residues [NMOD][NC][W]]
    unsigned* b_res = reinterpret_cast<unsigned*>(smem + NMOD * A_STRIDE);
    for (int i = threadIdx.x; i < NMOD * A_STRIDE; i += THREADS) smem[i] = __ldg(a_frag + i);
    __shared__ long long moff[K], col_base[NC];
    __shared__ int col_f[NC];
    const int pos[6] = {p0, p1, p2, p3, p4, p5};  // bit j of the gate index at pos[j]
    int sorted[D];
    sort_positions(pos, sorted);
    member_table(moff, pos);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int scol = tid / TPC, sq = tid % TPC;  // the split's column and place in it
    const int wm = warp % WGM, wn = warp / WGM;  // the warp's place in the output tile
    const int g = lane >> 2, tq = lane & 3;      // mma fragment coordinates
    const int a_lane = wm * WMT * KS * 32 + lane;
    const unsigned b_lane = ldmatrix_lane(b_res, wn, lane);
    const long long tiles = (groups + NC - 1) / NC;
    __syncthreads();
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        // 1. B's residues of every modulus into shared memory
        {
            double2 x[MPT];
            long long base;
            fetch(psi, tile * NC + scol, groups, sorted, sq, moff, x, base);
            int e;
            bool finite;
            column_scale(x, e, finite);
            const int f = norm_exponent(x, e);
            const bool live = base >= 0;
            if (sq == 0) {
                col_base[scol] = base;
                col_f[scol] = (live && finite) ? f : NOT_FINITE;
                if (live && !finite) atomicOr(flag, 1);
            }
#pragma unroll
            for (int part = 0; part < 2; ++part) {
#pragma unroll
                for (int i0 = 0; i0 < MPT; i0 += 4) {
                    float h[4][NPIECE];
#pragma unroll
                    for (int u = 0; u < 4; ++u)
                        scalar_pieces(scale2(part ? x[i0 + u].y : x[i0 + u].x, gb - f), h[u]);
                    unsigned* dst = b_res + scol * W + (part * K + sq * MPT + i0) / 4;
#pragma unroll 4
                    for (int l = 0; l < NMOD; ++l) {
                        const float p = mod_p[l], ip = mod_ip[l];
                        unsigned word = 0;
#pragma unroll
                        for (int u = 0; u < 4; ++u) {
                            float acc = 0.0f;  // an integer below 6 * 2**13 * 128 < 2**23: exact
#pragma unroll
                            for (int i = 0; i < NPIECE; ++i) acc = fmaf(h[u][i], mod_w[l * NPIECE + i], acc);
                            float r = rem32(acc, p, ip);  // |r| <= p/2 + 1/2
                            r = r > 127.0f ? r - p : (r < -128.0f ? r + p : r);  // into INT8
                            word |= ((unsigned)float_to_small(r) & 0xffu) << (8 * u);
                        }
                        dst[l * NC * W] = word;
                    }
                }
            }
        }
        __syncthreads();
        // 2.-3. per modulus one product, its residues mod p, the CRT sums
        double q[WMT][WNT][4], dl[WMT][WNT][4][NLIMB];
#pragma unroll
        for (int mi = 0; mi < WMT; ++mi)
#pragma unroll
            for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                for (int v = 0; v < 4; ++v) {
                    q[mi][ni][v] = 0.0;
#pragma unroll
                    for (int c = 0; c < NLIMB; ++c) dl[mi][ni][v][c] = 0.0;
                }
#pragma unroll 1
        for (int l = 0; l < NMOD; ++l) {
            int pr[WMT][WNT][4];
#pragma unroll
            for (int mi = 0; mi < WMT; ++mi)
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                    for (int v = 0; v < 4; ++v) pr[mi][ni][v] = 0;
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                uint4 a[WMT];
                unsigned b[WNT][2];
#pragma unroll
                for (int mi = 0; mi < WMT; ++mi) a[mi] = smem[a_lane + l * A_STRIDE + (mi * KS + ks) * 32];
#pragma unroll
                for (int ni = 0; ni < WNT; ni += 2)
                    ldmatrix_x4(b_lane + (unsigned)(l * NC * W * 4 + ks * 32 + ni * 8 * W * 4),
                                b[ni][0], b[ni][1], b[ni + 1][0], b[ni + 1][1]);
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                    for (int mi = 0; mi < WMT; ++mi) mma_s8(pr[mi][ni], a[mi], b[ni][0], b[ni][1]);
            }
            const float p = mod_p[l], ip = mod_ip[l];
            const double invp = crt_invp[l];
            double m[NLIMB];
#pragma unroll
            for (int c = 0; c < NLIMB; ++c) m[c] = crt_m[l * NLIMB + c];
#pragma unroll
            for (int mi = 0; mi < WMT; ++mi)
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                    for (int v = 0; v < 4; ++v) {
                        float u = rem32(small_to_float(pr[mi][ni][v]), p, ip);  // exact
                        if (u < 0.0f) u += p;  // [0, p)
                        const double ud = (double)u;
                        q[mi][ni][v] = fma(ud, invp, q[mi][ni][v]);  // only rint(q) is used
#pragma unroll
                        for (int c = 0; c < NLIMB; ++c)
                            dl[mi][ni][v][c] = fma(ud, m[c], dl[mi][ni][v][c]);  // exact
                    }
        }
        // write back (out_member, out_column)
#pragma unroll
        for (int mi = 0; mi < WMT; ++mi) {
            const int member = out_member(wm, mi, g);
            const int fa = __ldg(a_f + member);
            const long long off = moff[member];
#pragma unroll
            for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int col = out_column(wn, ni, tq, h);
                    const int fb = col_f[col];
                    if (fb == NOT_FINITE) continue;
                    const int sh = fa + fb - gsum;
                    const double re = crt_finish(q[mi][ni][h], dl[mi][ni][h]);
                    const double im = crt_finish(q[mi][ni][2 + h], dl[mi][ni][2 + h]);
                    psi[col_base[col] + off] = make_double2(scale2(re, sh), scale2(im, sh));
                }
        }
        __syncthreads();  // the next tile's split overwrites the residues and the column tables
    }
}
