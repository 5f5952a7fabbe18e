// One-pass gate by Ozaki scheme II on INT8 tensor cores (int8-crt{N}, int8-crt-auto), d = 3..6:
// psi <- U psi in place, in one read and one write of the state. (With up to 15 moduli these
// gates take crt_gate_slices.cu's exact byte-slice products instead: ozsim.gemm.ozaki2.onepass.)
//
// The same numbers as ozsim.gemm.ozaki2.scheme.int8_crt_zgemm on U (the A operand: its weighted
// residues q_p [Ar, Ai] mod p, made once per gate into mma fragments) and the state viewed as
// B = (2**d, 2**(n-d)) through the target qubits, with the tiles of mma_gate.cuh:
//   1. split: a column's norm exponent f (norm_exponents: e from its largest |Re|, |Im|, the
//      exact sum S of the squares of ceil(|x| 2**(NFRAC - e)) over its K amplitudes, reduced
//      over the column's threads, f = e - NFRAC + ceil(bl(S) / 2)); each scalar's integer v =
//      rnd(ldexp(x, gB - f)) in NPIECE pieces of 12 bits (crt_gate.cuh), and per modulus p its
//      residue sum_i h_i (2**(12 i) mod p) less rint(. fl32(1/p)) p, in [-128, 128] and taken
//      as a byte (residue_magic: any representative serves, the products are reduced mod p), one
//      INT8 plane per modulus in shared memory; at d >= 4 with N <= 16 (TC_SPLIT, below) the same
//      symmetric residues from v's 8 balanced bytes by INT8 products on the tensor cores;
//   2. per modulus, one mma product of the real embedding of A's residues and B's plane (|sum|
//      <= 2 K 128**2 <= 2**19: exact), u = Re, Im mod p in [0, p) (residue_double, exact): the
//      unique residues of q_p C' that the GEMM path's Karatsuba products reduce to as well;
//   3. the base-2**LBITS digit sums of ozaki2._CRTAccumulator in FP64 (exact; each u enters as
//      256 + u, the sums start at -256 sum_p digit_c(P/p): crt_gate.cuh, residue_double), the
//      quotient from them (crt_finish, Q_FROM_LIMBS: the CPU's quotient), the carries and the one
//      rounding, ldexp by fA[row] + f - (gA + gB), written back in place.
// Same bits as the CPU path. NaN or Inf in a column sets *flag and leaves the column as it was.
//
// Options: -DGATE_QUBITS=d (3..6; at d = 5, 6 also -DMPT=4, ozsim.gemm.ozaki2.onepass: the
// split takes 4 members a thread, so that the CRT sums stay at 8 entries a thread) -DTHREADS=512
// (one block an SM, ozsim.gemm.ozaki2.onepass._MMA_THREADS; at d = 6 with -DWGM=8, each warp one
// m tile of 8 members, two warps along n)
// -DNMOD=N -DNLIMB=<digits of P> -DROUND=0|1 -DNPIECE=ceil((gB + 1) / 12) and the scheme's
// constants -DNFRAC -DLBITS (ozsim.gemm.ozaki2.moduli); -DA_PAIRED=1 (d >= 5: A's fragments
// of k steps ks and ks + KS / 2 from 6 words a lane, not 8: the second is (-y, x, -w, z) of the
// first's (x, y, z, w), the embedding's -Ai and Ar; ozsim.gemm._mma_gate.paired_fragments) and
// -DA_SMEM_PLANES=n (A's first n moduli in shared memory, the others read from global memory,
// L2: at d = 6 with 512 threads the shared memory holds 12 of 15); -DPLANE_PAD=4
// (ozsim.gemm.ozaki2.onepass, _PLANE_PAD). Each measured option (TC_SPLIT, MEMBER_MAP, PLANE_PAD, MOD_UNROLL, PREFETCH,
// MIN_BLOCKS, GROUP_SYNC; crt_gate.cuh's CRT_CVT, Q_FROM_LIMBS, SIGNED_MAGIC, C1S_TABLE) says
// what it measured where it is defined. Shared memory (dynamic): A's fragments, A_SMEM_PLANES *
// A_PLANE * 16 bytes, and B's residues, NMOD * (NC * W + PLANE_PAD) * 4 bytes.

#include "crt_gate.cuh"
#ifndef DIGITS
#define DIGITS 0
#endif
#if DIGITS  // B's byte digits, k = 8 kk + i (one plane for every modulus)
#define KD (16 * K)
#endif
// TC_SPLIT: B's residues on the tensor cores (d >= 4, N <= 16, integer pieces): each lane takes
// one scalar a round, its integer v as 8 balanced bytes b_i (the lo, hi words of v + 0x80..80,
// top bits flipped, as DIGITS makes them), and four m16n8k32 products with the constant A_t =
// [W rows: moduli][k: 4t..4t+3 = b_0..b_3, 16+4t..16+4t+3 = b_4..b_7, zero elsewhere], W[l][i]
// = 2**(8 i) mod p_l (symmetric), take the bytes of lanes with t = lane % 4 only: R = sum_i b_i
// W[l][i] = v mod p_l, |R| <= 8 128**2 = 2**17, from an accumulator started at 0x4B400000 (the
// float 1.5 * 2**23 + R), reduced by residue_byte (crt_gate.cuh; the same symmetric residue as
// residue_magic's, so the same bytes: same products, same bits). Lane (g, t) gets moduli g and
// g + 8 of the scalars of lanes 8 t + 0..7: with the members interleaved (thread sq takes members i TPC + sq), four bytes of
// consecutive members of one column, a word of B's plane. About 90 instructions a scalar
// instead of 200 (pieces, NPIECE + 4 FP32 operations a modulus). H200, N = 30, 15 moduli, with
// PLANE_PAD = 4, two machines (without the padding: 4.52-4.63x, 5.15-5.41x, level at 6):
// 4.87-4.94x -> 4.36-4.52x the copy floor at d = 4; 5.31-5.61x -> 5.04-5.60x at 5 (level with
// the targets spread, 4-5% with them lowest); 7.01-7.46x -> 6.72-7.31x at 6; same bits.
#ifndef TC_SPLIT
#define TC_SPLIT (!DIGITS && INT_PIECES && NMOD <= 16 && GATE_QUBITS >= 4)
#endif
#if TC_SPLIT
#ifndef SPLIT_FLOOR  // each residue of the products by residue_byte (1: 3 operations), or by
#define SPLIT_FLOOR 1  // reduce_magic (0: 4): H200, N = 30, 15 moduli, lowest / two random target
#endif  // sets: d = 4 level, 5 4.96-5.29x -> 4.74-5.17x, 6 6.05-6.31x -> 5.74-6.02x; same bits
#ifndef MEMBER_MAP  // which members a thread takes (4 lanes hold 4 consecutive members a round):
// (0) thread sq member i TPC + sq, (1) 4 i + sq % 4 in block sq / 4 of 4 MPT members: H200, N =
// 30, 15 moduli, 1 against 0 level at d = 4 and 5 (4.41-4.50x / 4.44-4.52x the floor at 4),
// slower at 6 (7.18-7.63x against 6.84-7.31x)
#define MEMBER_MAP 0
#endif
#if MEMBER_MAP
#define FETCH_MEMBER(sq, i) (((sq) & ~3) * MPT + 4 * (i) + ((sq) & 3))
#else
#define FETCH_MEMBER(sq, i) ((i) * TPC + (sq))
#endif
#endif
#ifndef PLANE_PAD  // words between B's residue planes beyond NC W: 4 spreads TC_SPLIT's stores
#define PLANE_PAD 0  // of the 8 lanes' rows g over 8 bank quads (4-way conflicts, not 8-way)
#endif
#ifndef GROUP_SYNC  // group barriers (group_sync.cuh): the warps of one set of columns apart
#define GROUP_SYNC 1  // from the others'. H200, N = 30, 15 moduli, lowest / two random target
#endif  // sets, against block-wide barriers: d = 3 5.08 -> 4.89x the copy floor; d = 4 4.36-4.48x
// -> 4.32-4.35x (4 groups of 2 warps); 5 5.03-5.46x -> 4.97-5.26x (2 of 4); 6 6.12-6.66x ->
// 5.87-6.22x (2 of 8: one block an SM, whose halves now overlap their phases); same bits
#include "mma_gate.cuh"
#define PS (NC * W + PLANE_PAD)  // words a plane of B's residues
#if TC_SPLIT && (TPC < 4 || NMOD > 16 || DIGITS)
#error "TC_SPLIT: d >= 4 (4 threads a column at least), N <= 16, B's residues"
#endif

#ifndef A_PAIRED
#define A_PAIRED 0
#endif
#if A_PAIRED
#if KS % 2 || DIGITS
#error "A_PAIRED needs an even number of k steps (d >= 5) and B's residues"
#endif
#define KSH (KS / 2)
#define A_PLANE (MT * KS * 24)  // uint4 a plane: [mt][kh][lane] uint4, then [mt][kh][lane] uint2
#else
#define A_PLANE A_STRIDE
#endif
#ifndef A_SMEM_PLANES
#define A_SMEM_PLANES NMOD
#endif

#ifndef MOD_UNROLL  // the products' modulus loop unrolled (constants as immediate operands):
#define MOD_UNROLL (!DIGITS && NLIMB <= 3)  // 4-10% faster at d = 3..5 (H200); spills beyond
#endif
#ifndef SPLIT_UNROLL
#define SPLIT_UNROLL (NMOD <= 16 ? NMOD : 5)  // the split's modulus loop (whole: more spill)
#endif
constexpr int kSplitUnroll = SPLIT_UNROLL;

#if WMT * WNT > 2
#error "crt_gate_mma.cu keeps the CRT sums of 8 entries a thread (d <= 6; at d = 5, 6 -DMPT=4)"
#endif

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
    return norm_exponent_of(e, s);
}

#ifndef MIN_BLOCKS  // blocks an SM the registers must allow: one of 512 threads (128 registers;
// ozsim.gemm.ozaki2.onepass._MMA_THREADS), two of 256 (3: 80 registers and spills, H200, N = 30,
#define MIN_BLOCKS (THREADS >= 512 ? 1 : 2)  // 15 moduli: 4.08-4.15x -> 4.38-4.54x the floor at
#endif                                       // d = 3, 5.03x -> 5.47x at 4)
extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
crt_gate_mma(double2* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3, int p4,
             int p5, const uint4* __restrict__ a_frag, const int* __restrict__ a_f, int gb,
             int gsum, int* __restrict__ flag)
{
    extern __shared__ uint4 smem[];  // [A's fragments [A_SMEM_PLANES][A_PLANE]][B's residues
                                     //  [NMOD][NC][W] or B's digits [NC][W]]
    unsigned* b_res = reinterpret_cast<unsigned*>(smem + A_SMEM_PLANES * A_PLANE);
    for (int i = threadIdx.x; i < A_SMEM_PLANES * A_PLANE; i += THREADS)
        smem[i] = __ldg(a_frag + i);
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
#if TC_SPLIT
    // A_t of the residue products (crt_gate.cuh, tc_weights) in shared memory, and this lane's
    // moduli g, g + 8 (rows past NMOD: no store)
    __shared__ uint4 tc_a[4][32];
    if (warp == 0)
#pragma unroll
        for (int t = 0; t < 4; ++t) tc_a[t][lane] = tc_weights(g, tq, t);
#if SPLIT_FLOOR
    const TcRows tcr = tc_rows(g);
#else
    const int row0 = g < NMOD ? g : NMOD - 1, row1 = g + 8 < NMOD ? g + 8 : NMOD - 1;
    const float rp0 = mod_p[row0], rip0 = mod_ip[row0];
    const float rp1 = mod_p[row1], rip1 = mod_ip[row1];
#endif
    // the words this lane stores: columns of lanes 8 tq + 0 and 8 tq + 4, their first members
    const int src0 = warp * 32 + 8 * tq, src1 = src0 + 4;
    const int col0 = src0 / TPC, sq0 = src0 % TPC, col1 = src1 / TPC, sq1 = src1 % TPC;
#endif
#if !A_PAIRED
    const int a_lane = wm * WMT * KS * 32 + lane;
#endif
    const unsigned b_lane = ldmatrix_lane(b_res, wn, lane);
    const long long tiles = (groups + NC - 1) / NC;
    __syncthreads();
#ifndef PREFETCH  // the next tile's amplitudes loaded while this tile's products run (H200,
#define PREFETCH 1  // N = 30, 15 moduli: 4.88 -> 4.64x the copy floor at d = 3, 5.59 -> 5.27x at
#endif              // 4, 6.12 -> 5.75x at 5; no spills)
    double2 x[MPT];
    long long base;
#if PREFETCH
    if (blockIdx.x < tiles)
        fetch(psi, blockIdx.x * (long long)NC + scol, groups, sorted, sq, moff, x, base);
#endif
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        // 1. B's residues of every modulus into shared memory
        {
#if !PREFETCH
            fetch(psi, tile * NC + scol, groups, sorted, sq, moff, x, base);
#endif
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
#if DIGITS
#pragma unroll
            for (int part = 0; part < 2; ++part)
#pragma unroll
                for (int i = 0; i < MPT; ++i) {
                    const double y = scale2(part ? x[i].y : x[i].x, gb - f);
                    const long long v = ROUND ? __double2ll_rn(y) : __double2ll_rz(y);
                    unsigned lo, hi;
                    balanced_bytes(v, lo, hi);  // (|v| <= 2**62)
                    *reinterpret_cast<uint2*>(b_res + scol * W + 2 * (part * K + sq * MPT + i)) =
                        make_uint2(lo, hi);
                }
#elif TC_SPLIT
#pragma unroll
            for (int part = 0; part < 2; ++part) {
#pragma unroll
                for (int i = 0; i < MPT; ++i) {
                    const double y = scale2(part ? x[i].y : x[i].x, gb - f);
                    const long long v = ROUND ? __double2ll_rn(y) : __double2ll_rz(y);
                    unsigned lo, hi;
                    balanced_bytes(v, lo, hi);
                    int c[4][4];
#pragma unroll
                    for (int t = 0; t < 4; ++t) {
                        c[t][0] = c[t][1] = c[t][2] = c[t][3] = 0x4B400000;
                        mma_s8(c[t], tc_a[t][lane], lo, hi);
                    }
                    unsigned wd[4];
#if SPLIT_FLOOR
                    tc_residue_words(c, tcr, wd);
#else
#pragma unroll
                    for (int e = 0; e < 4; ++e) {  // (row g, col 2 tq), (g, 2 tq + 1), (g + 8, ..)
                        const float rp = e < 2 ? rp0 : rp1, rip = e < 2 ? rip0 : rip1;
                        float r[4];
#pragma unroll
                        for (int t = 0; t < 4; ++t)
                            r[t] = reduce_magic(__int_as_float(c[t][e]), rp, rip);
                        wd[e] = pack_low_bytes(r[0], r[1], r[2], r[3]);
                    }
#endif
                    const int w0 = col0 * W + (part * K + FETCH_MEMBER(sq0, i)) / 4;
                    const int w1 = col1 * W + (part * K + FETCH_MEMBER(sq1, i)) / 4;
                    if (g < NMOD) {
                        b_res[g * PS + w0] = wd[0];
                        b_res[g * PS + w1] = wd[1];
                    }
                    if (g + 8 < NMOD) {
                        b_res[(g + 8) * PS + w0] = wd[2];
                        b_res[(g + 8) * PS + w1] = wd[3];
                    }
                }
            }
#else
#pragma unroll
            for (int part = 0; part < 2; ++part) {
#pragma unroll
                for (int i0 = 0; i0 < MPT; i0 += 4) {
                    float h[4][NPIECE];
#pragma unroll
                    for (int u = 0; u < 4; ++u)
                        scalar_pieces(scale2(part ? x[i0 + u].y : x[i0 + u].x, gb - f), h[u]);
                    unsigned* dst = b_res + scol * W + (part * K + sq * MPT + i0) / 4;
#pragma unroll kSplitUnroll
                    for (int l = 0; l < NMOD; ++l)
                        dst[l * PS] = pack_low_bytes(residue_magic(h[0], l), residue_magic(h[1], l),
                                                         residue_magic(h[2], l), residue_magic(h[3], l));
                }
            }
#endif
        }
        group_sync();
#if PREFETCH
        {
            const long long next = tile + gridDim.x;
            if (next < tiles) fetch(psi, next * NC + scol, groups, sorted, sq, moff, x, base);
        }
#endif
        // 2.-3. per modulus one product, its residues mod p, the CRT sums
        double q[WMT][WNT][4], dl[WMT][WNT][4][NLIMB];
#pragma unroll
        for (int mi = 0; mi < WMT; ++mi)
#pragma unroll
            for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                for (int v = 0; v < 4; ++v) {
                    q[mi][ni][v] = crt_sum_start(-1);
#pragma unroll
                    for (int c = 0; c < NLIMB; ++c) dl[mi][ni][v][c] = crt_sum_start(c);
                }
#if DIGITS
        unsigned bd[KS][WNT][2];  // B's digit fragments, the same for every modulus
#pragma unroll
        for (int ks = 0; ks < KS; ++ks)
#pragma unroll
            for (int ni = 0; ni < WNT; ni += 2)
                ldmatrix_x4(b_lane + (unsigned)(ks * 32 + ni * 8 * W * 4), bd[ks][ni][0], bd[ks][ni][1],
                            bd[ks][ni + 1][0], bd[ks][ni + 1][1]);
#endif
#if MOD_UNROLL
#pragma unroll
#else
#pragma unroll 1
#endif
        for (int l = 0; l < NMOD; ++l) {
            int pr[WMT][WNT][4];
#pragma unroll
            for (int mi = 0; mi < WMT; ++mi)
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                    for (int v = 0; v < 4; ++v) pr[mi][ni][v] = PRODUCT_START;
#if A_PAIRED
#pragma unroll
            for (int kh = 0; kh < KSH; ++kh) {
                uint4 a[WMT], a2[WMT];
#pragma unroll
                for (int mi = 0; mi < WMT; ++mi) {
                    const int i = ((wm * WMT + mi) * KSH + kh) * 32 + lane;
                    uint4 x;
                    uint2 y;
                    if (l < A_SMEM_PLANES) {
                        x = smem[l * A_PLANE + i];
                        y = reinterpret_cast<const uint2*>(smem + l * A_PLANE + MT * KSH * 32)[i];
                    } else {
                        x = __ldg(a_frag + l * A_PLANE + i);
                        y = __ldg(reinterpret_cast<const uint2*>(a_frag + l * A_PLANE +
                                                                 MT * KSH * 32) + i);
                    }
                    a[mi] = x;
                    a2[mi] = make_uint4(y.x, x.x, y.y, x.z);  // k step kh + KSH: -Ai, Ar
                }
                unsigned b[WNT][2], b2[WNT][2];
#pragma unroll
                for (int ni = 0; ni < WNT; ni += 2) {
                    ldmatrix_x4(b_lane + (unsigned)(l * PS * 4 + kh * 32 + ni * 8 * W * 4),
                                b[ni][0], b[ni][1], b[ni + 1][0], b[ni + 1][1]);
                    ldmatrix_x4(b_lane + (unsigned)(l * PS * 4 + (kh + KSH) * 32 + ni * 8 * W * 4),
                                b2[ni][0], b2[ni][1], b2[ni + 1][0], b2[ni + 1][1]);
                }
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                    for (int mi = 0; mi < WMT; ++mi) {
                        mma_s8(pr[mi][ni], a[mi], b[ni][0], b[ni][1]);
                        mma_s8(pr[mi][ni], a2[mi], b2[ni][0], b2[ni][1]);
                    }
            }
#else
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                uint4 a[WMT];
#pragma unroll
                for (int mi = 0; mi < WMT; ++mi) {
                    const int i = a_lane + (mi * KS + ks) * 32;
                    a[mi] = l < A_SMEM_PLANES ? smem[l * A_PLANE + i]
                                              : __ldg(a_frag + l * A_PLANE + i);
                }
#if DIGITS
                const unsigned (&b)[WNT][2] = bd[ks];
#else
                unsigned b[WNT][2];
#pragma unroll
                for (int ni = 0; ni < WNT; ni += 2)
                    ldmatrix_x4(b_lane + (unsigned)(l * PS * 4 + ks * 32 + ni * 8 * W * 4),
                                b[ni][0], b[ni][1], b[ni + 1][0], b[ni + 1][1]);
#endif
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                    for (int mi = 0; mi < WMT; ++mi) mma_s8(pr[mi][ni], a[mi], b[ni][0], b[ni][1]);
            }
#endif
            const float p = mod_p[l], ipu = mod_ipu[l], moff = mod_moff[l];
#if !Q_FROM_LIMBS
            const double invp = crt_invp[l];
#endif
#if C1S_TABLE
            const unsigned pi = mod_pc[2 * l], c1s = mod_pc[2 * l + 1];
#else
            const unsigned pi = (unsigned)p, c1s = residue_c1s(p, moff);
#endif
            double m[NLIMB];
#pragma unroll
            for (int c = 0; c < NLIMB; ++c) m[c] = crt_m[l * NLIMB + c];
#pragma unroll
            for (int mi = 0; mi < WMT; ++mi)
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                    for (int v = 0; v < 4; ++v) {
                        const double ud = residue_double(pr[mi][ni][v], p, ipu, moff, c1s, pi);
#if !Q_FROM_LIMBS
                        q[mi][ni][v] = fma(ud, invp, q[mi][ni][v]);  // only rint(q) is used
#endif
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
        group_sync();  // the next tile's split overwrites the residues and the column tables
    }
}
