// One-pass dense gate in FP64 on the tensor cores (DMMA), 3 <= d <= 7: psi <- U psi in place,
// in one read and one write of the state: the zgemm backend's kernel where CUDA-core FP64 runs
// out of arithmetic (8 2**d flops an amplitude; the CUDA-core kernel, dense_gate.cu, keeps d <= 3).
//
// The state viewed as B = (2**d, 2**(n-d)) through the target qubits (one column per amplitude
// group, gate_groups.cuh). A block takes a tile of NC consecutive columns at a time (a
// persistent grid):
//   1. load: TPC threads per column read its K amplitudes (MPT each: members sq, sq + TPC, ...)
//      straight from psi into shared memory as B[column][kk], kk = 2 m + part (Re, Im of member
//      m, each amplitude as it lies; LD = 2K + 4 doubles a column, so that the fragment loads of
//      a half-warp hit 16 distinct 8-byte banks), the next tiles' while this tile's products
//      run: ASYNC = 1 by cp.async (16 bytes, no registers) STAGES - 1 tiles ahead, ASYNC = 0
//      through registers one tile ahead;
//   2. products: the real form M of U (2K x 2K, [Re y; Im y] = M [x interleaved]) times B by
//      mma.sync m8n8k4 f64 (FP64 fused multiply-adds, k in order), or, MMA_K8 = 1 (sm_90), by
//      m16n8k8 f64 on the same fragments, two m tiles by two k steps an instruction (on an H200
//      a products-only loop of m8n8k4 runs at 33 TFLOP/s, m16n8k8 at the FP64 tensor peak, 67;
//      the 6-qubit gate went 2.8-3.0x -> 1.9-2.2x the copy floor), M's rows ordered so that m
//      tile 2j holds the real and m tile 2j + 1 the imaginary rows of members 8j .. 8j + 7, as
//      ready-made A fragments (ozsim.gemm.native_gate.mma_fragments) in global memory (L1) or,
//      A_SMEM = 1, copied to shared memory once per block; or, A_SMEM = 2, U itself (complex,
//      half M's size) in shared memory, rows padded to K + 1 amplitudes: lane (g, t) of k step
//      ks reads U[i][m], i = 8 j + g, m = 2 ks + t / 2, one 16-byte load for both tiles of the
//      pair: (Re U, Im U) for t even, (-Im U, Re U) for t odd, M's very entries; 8 warps in a
//      WGM x WGN grid, each with WMT x WNT accumulator tiles;
//   3. write: a thread's accumulators of m tiles 2j and 2j + 1 are Re and Im of the same output
//      amplitudes (member 8j + lane / 4, two columns): stored straight to psi, no staging.
// GAUSS = 1 (d >= 4, m16n8k8) replaces 2. and 3. by gauss_products: three real K x K products
// instead of the embedding's 2K x 2K one (3/4 of the flops; from d = 5 on an H200 the faster).
//
// Options: -DGATE_QUBITS=d (3..7), -DASYNC, -DSTAGES (default 3), -DA_SMEM (0, 1, 2), -DNC
// (columns a tile), -DMMA_K8, -DMIN_BLOCKS (blocks an SM the registers must allow), -DGAUSS,
// -DWGM, -DGAUSS_UNROLL (GAUSS: warps along m, k steps unrolled). Dynamic shared memory:
// STAGES (NC LD + NC) 8 bytes (one stage with ASYNC = 0), plus R R 8 with A_SMEM = 1 (GAUSS:
// 3 K K 8), K (K + 1) 16 with A_SMEM = 2 (GAUSS: K (K + 4) 16)
// (ozsim.gemm.native_gate.mma_smem_bytes). Measured per d on an H200
// (benchmarks/RESULTS.md): the options ozsim.gemm.native_gate.MMA_OPTIONS gives.

#ifndef GATE_QUBITS
#error "GATE_QUBITS must be defined (3..7)"
#endif
#define D GATE_QUBITS
#define K (1 << D)
#define R (2 * K)                            // rows and inner dimension of the real embedding
#ifndef GAUSS
#define GAUSS 0                              // three real products (Gauss) instead of four
#endif
#if GAUSS
#define LD (R + 8)                           // (16-byte fragment loads: no bank conflict)
#else
#define LD (R + 4)                           // doubles a column of B in shared memory
#endif
#define KST (R / 4)                          // k steps of the m8n8k4 mma
#define MT8 (R / 8)                          // m tiles (8 rows)
#define THREADS 256
#ifndef NC
#define NC (D >= 7 ? 32 : 64)                // columns (amplitude groups) per tile
#endif
#define TPC (THREADS / NC)                   // threads per column
#define MPT (K / TPC)                        // members per thread
#define NT8 (NC / 8)                         // n tiles (8 columns)
#if GAUSS
#ifndef GAUSS_UNROLL
#define GAUSS_UNROLL 2                       // k steps unrolled in gauss_products
#endif
#define MP (K / 16)                          // member pairs (16 rows of each of the 3 products)
#define KP (K / 8)                           // k steps of the m16n8k8 mma
#ifndef WGM
#define WGM (MP < 4 ? MP : 4)                // warps along m
#endif
#define WMP (MP / WGM)                       // member pairs a warp
#define WMT (2 * WMP)                        // (m tiles of each product a warp)
#else
#define WGM_MAX (D >= 7 ? 8 : 4)
#define WGM (MT8 / 2 < WGM_MAX ? MT8 / 2 : WGM_MAX)  // warps along m
#define WMT (MT8 / WGM)                      // m tiles a warp (even: Re and Im pairs)
#endif
#define WGN (8 / WGM)                        // warps along n
#define WNT (NT8 / WGN)                      // n tiles a warp
#ifndef STAGES
#define STAGES 3
#endif
#ifndef ASYNC
#define ASYNC 1                              // loads by cp.async (else registers, one tile ahead)
#endif
#if !ASYNC
#undef STAGES
#define STAGES 1
#endif
#ifndef MMA_K8
#define MMA_K8 0                             // m16n8k8 f64 (sm_90: twice m8n8k4's rate on an H200)
#endif
#ifndef A_SMEM
#define A_SMEM 0                             // A's fragments copied to shared memory (R*R*8 B)
#endif
#include "gate_groups.cuh"
#include "group_sync.cuh"
static_assert(MPT >= 1 && WNT >= 1 && NT8 % WGN == 0 && MT8 % WGM == 0 && WMT % 2 == 0,
              "tile shape: NC too small for this d");
#if GAUSS
static_assert(MMA_K8 && D >= 4 && MP % WGM == 0, "GAUSS: m16n8k8 and d >= 4");
#endif

__device__ __forceinline__ void dmma(double (&c)[2], double a, double b)
{
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};\n"
                 : "+d"(c[0]), "+d"(c[1])
                 : "d"(a), "d"(b));
}

// m16n8k8 (sm_90): the m8n8k4 tiles (m tiles 2j, 2j + 1) x (k steps ks, ks + 1) in one
// instruction: rows g / g + 8 of A are row g of m tiles 2j / 2j + 1, its columns t / t + 4 column
// t of k steps ks / ks + 1 (a0 = (g, t), a1 = (g + 8, t), a2 = (g, t + 4), a3 = (g + 8, t + 4));
// B's b0 / b1 are rows t / t + 4; c0, c1 / c2, c3 are the two tiles' accumulators (PTX ISA,
// "Matrix Fragments for mma.m16n8k8" with .f64)
__device__ __forceinline__ void dmma16(double (&c0)[2], double (&c1)[2], double a00, double a10,
                                       double a01, double a11, double b0, double b1)
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, "
                 "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+d"(c0[0]), "+d"(c0[1]), "+d"(c1[0]), "+d"(c1[1])
                 : "d"(a00), "d"(a10), "d"(a01), "d"(a11), "d"(b0), "d"(b1));
}

// the group (within the tile) that tile column col holds: (col & ~7) | 4 (col & 1) | (col >> 1) & 3,
// so that the 4 lanes writing one member's accumulators (columns 2q + h) write 4 consecutive
// groups (whole 32-byte sectors where the lowest qubit is not a target)
__device__ __forceinline__ int tile_group(int col)
{
    return (col & ~7) | ((col & 1) << 2) | ((col >> 1) & 3);
}

// 16 bytes global -> shared, asynchronously; zeros when !live
__device__ __forceinline__ void copy16(double* dst, const double2* src, bool live)
{
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(d), "l"(src), "r"(live ? 16 : 0));
}

// the thread's MPT members (sq, sq + TPC, ...) of tile column col into stage buffer b; its
// column base into cb[col] (-1 past the last group)
__device__ __forceinline__ void issue_tile(const double2* __restrict__ psi, long long tile,
                                           long long groups, const int (&sorted)[D], int col,
                                           int sq, const long long* moff, double* b,
                                           long long* cb)
{
    const long long gc = tile * NC + tile_group(col);
    const bool live = gc < groups;
    const long long base = live ? group_base(gc, sorted) : 0;
#pragma unroll
    for (int i = 0; i < MPT; ++i) {
        const int m = i * TPC + sq;
        copy16(b + col * LD + 2 * m, psi + base + (live ? moff[m] : 0), live);
    }
    if (sq == 0) cb[col] = live ? base : -1;
}

// the register loader (ASYNC = 0): loads of tile column col, then their store to shared memory
__device__ __forceinline__ long long load_tile(const double2* __restrict__ psi, long long tile,
                                               long long groups, const int (&sorted)[D], int col,
                                               int sq, const long long* moff, double2 (&x)[MPT])
{
    const long long gc = tile * NC + tile_group(col);
    const bool live = gc < groups;
    const long long base = live ? group_base(gc, sorted) : 0;
#pragma unroll
    for (int i = 0; i < MPT; ++i)
        x[i] = live ? psi[base + moff[i * TPC + sq]] : make_double2(0.0, 0.0);
    return live ? base : -1;
}

#if GAUSS
#define UPAD 4                               // U's row padding, A_SMEM = 2 (16-byte loads)
#else
#define UPAD 1
#endif
#if GAUSS
#define A_DOUBLES (3 * K * K)                // the three products' fragments
#else
#define A_DOUBLES (R * R)
#endif

#ifndef MIN_BLOCKS
#define MIN_BLOCKS 1                         // blocks an SM the registers must allow
#endif

#if GAUSS
// Products and write of one tile, GAUSS = 1: y = U x by three real products per element instead
// of four (Gauss's form, as in ZGEMM3M; Higham, "Accuracy and Stability of Numerical
// Algorithms", 2nd ed., section 23.2.4): with U = a + ib, x = c + id,
//   Re y = (a + b) c - b (c + d),   Im y = (a + b) c + a (d - c),
// so three real K x K products P0 = (a + b) c, P1 = b (c + d), P2 = a (d - c), Re y = P0 - P1,
// Im y = P0 + P2: 6 K**2 flops a group against the real embedding's 8 K**2, with the error
// bounded normwise (not componentwise) by a few units in the last place of |U| |x|.
// A's fragments: A_SMEM = 0, 1: afrag[p][j][kp][h][lane] (double2;
// ozsim.gemm.native_gate.gauss_fragments), product p, member pair j (rows 16 j + g and
// 16 j + 8 + g), k step kp, h = 0: (a00, a10) at column 8 kp + t, h = 1: (a01, a11) at
// 8 kp + 4 + t (g = lane / 4, t = lane % 4); A_SMEM = 2: from U itself in shared memory (rows
// of K + 4 amplitudes), four 16-byte loads (a, b) giving all three products' fragments of a
// pair and k step. B's fragments: the lane's member 8 kp + t (+ 4) of its column, one 16-byte
// load (Re, Im) giving c, c + d and d - c for the three products.
__device__ __forceinline__ void gauss_products(const double* __restrict__ bt,
                                               const long long* cb, const double* abase,
                                               double2* __restrict__ psi, const long long* moff,
                                               int wm, int wn, int lane)
{
    const double* bp = bt + ((wn * WNT) * 8 + (lane >> 2)) * LD + 2 * (lane & 3);
#if A_SMEM == 2
    const double2* up =
        (const double2*)abase + (16 * wm * WMP + (lane >> 2)) * (K + UPAD) + (lane & 3);
#else
    const double2* ap = (const double2*)abase + (long long)(wm * WMP) * KP * 64 + lane;
#endif
    double acc[3][WMP][WNT][2][2];  // [product][pair][n tile][rows g, g + 8][column]
#pragma unroll
    for (int p = 0; p < 3; ++p)
#pragma unroll
        for (int j = 0; j < WMP; ++j)
#pragma unroll
            for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[p][j][ni][e / 2][e % 2] = 0.0;
    constexpr int unroll = GAUSS_UNROLL;
#pragma unroll unroll
    for (int kp = 0; kp < KP; ++kp) {
        double b[3][WNT][2];
#pragma unroll
        for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const double2 x = *(const double2*)(bp + ni * 8 * LD + 2 * (8 * kp + 4 * h));
                b[0][ni][h] = x.x;
                b[1][ni][h] = x.x + x.y;
                b[2][ni][h] = x.y - x.x;
            }
#pragma unroll
        for (int j = 0; j < WMP; ++j) {
            double2 a[3][2];  // [product][h]: (rows g, g + 8)
#if A_SMEM == 2
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const double2 lo = up[16 * j * (K + UPAD) + 8 * kp + 4 * h];
                const double2 hi = up[(16 * j + 8) * (K + UPAD) + 8 * kp + 4 * h];
                a[0][h] = make_double2(lo.x + lo.y, hi.x + hi.y);
                a[1][h] = make_double2(lo.y, hi.y);
                a[2][h] = make_double2(lo.x, hi.x);
            }
#else
#pragma unroll
            for (int p = 0; p < 3; ++p) {
                const double2* f = ap + ((long long)(p * MP + j) * KP + kp) * 64;
#if A_SMEM
                a[p][0] = f[0], a[p][1] = f[32];
#else
                a[p][0] = __ldg(f), a[p][1] = __ldg(f + 32);
#endif
            }
#endif
#pragma unroll
            for (int p = 0; p < 3; ++p)
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni)
                    dmma16(acc[p][j][ni][0], acc[p][j][ni][1], a[p][0].x, a[p][0].y, a[p][1].x,
                           a[p][1].y, b[p][ni][0], b[p][ni][1]);
        }
    }
#pragma unroll
    for (int j = 0; j < WMP; ++j)
#pragma unroll
        for (int r = 0; r < 2; ++r) {  // rows g, g + 8 of the pair
            const long long off = moff[16 * (wm * WMP + j) + 8 * r + (lane >> 2)];
#pragma unroll
            for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const long long base = cb[(wn * WNT + ni) * 8 + 2 * (lane & 3) + h];
                    const double p0 = acc[0][j][ni][r][h];
                    if (base >= 0)
                        psi[base + off] = make_double2(p0 - acc[1][j][ni][r][h],
                                                       p0 + acc[2][j][ni][r][h]);
                }
        }
}
#endif

extern "C" __global__ void __launch_bounds__(THREADS, MIN_BLOCKS)
dense_gate_mma(double2* __restrict__ psi, long long groups, int p0, int p1, int p2, int p3,
               int p4, int p5, int p6, const double* __restrict__ afrag)
{
    extern __shared__ double smem[];
    double* bs = smem;                                         // STAGES B tiles, NC x LD each
    long long* cbase = (long long*)(smem + STAGES * NC * LD);  // STAGES x NC column bases
    __shared__ long long moff[K];
    const int pos[7] = {p0, p1, p2, p3, p4, p5, p6};
    for (int c = threadIdx.x; c < K; c += THREADS) moff[c] = member_offset(c, pos);
#if A_SMEM == 2
    double2* uc = (double2*)(smem + STAGES * (NC * LD + NC));   // U, rows of K + UPAD
    for (int i = threadIdx.x; i < K * K; i += THREADS)
        uc[(i / K) * (K + UPAD) + i % K] = ((const double2*)afrag)[i];
#if GAUSS
    const double* abase = (const double*)uc;
#endif
#elif A_SMEM
    double* as = smem + STAGES * (NC * LD + NC);               // A's fragments, R x R
    for (int i = threadIdx.x; i < A_DOUBLES; i += THREADS) as[i] = afrag[i];
    const double* abase = as;
#else
    const double* abase = afrag;
#endif
    int sorted[D];
    sort_positions(pos, sorted);
    __syncthreads();

    const int col = threadIdx.x / TPC, sq = threadIdx.x % TPC;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int wm = warp % WGM, wn = warp / WGM;  // (group_sync.cuh: loaders multiply their columns)
    const long long tiles = (groups + NC - 1) / NC;
#if A_SMEM == 2 && !GAUSS
    // the lane's row of U for pair p of its m tiles: i = 8 (wm WMT / 2 + p) + g; odd t: (-Im, Re)
    const double2* up = uc + (8 * (wm * WMT / 2) + (lane >> 2)) * (K + 1) + ((lane & 3) >> 1);
    const bool odd = lane & 1;
#elif !GAUSS
    const double* ap = abase + (long long)(wm * WMT) * KST * 32 + lane;
#endif
#if !GAUSS
    const int boff = ((wn * WNT) * 8 + (lane >> 2)) * LD + (lane & 3);
#endif

#if ASYNC
    // prologue: the first STAGES - 1 tiles of this block in flight (an empty group past the end)
#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {
        const long long t = blockIdx.x + (long long)st * gridDim.x;
        if (t < tiles) issue_tile(psi, t, groups, sorted, col, sq, moff, bs + st * NC * LD, cbase + st * NC);
        asm volatile("cp.async.commit_group;\n" ::);
    }
#else
    double2 x[MPT];
    long long xbase = -1;
    if (blockIdx.x < tiles) xbase = load_tile(psi, blockIdx.x, groups, sorted, col, sq, moff, x);
#endif
    int stage = 0;
    for (long long tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
#if ASYNC
        asm volatile("cp.async.wait_group %0;\n" :: "n"(STAGES - 2));
        group_sync();  // this tile's B has landed; the previous tile's products are done
        {   // refill the buffer the previous tile used: the tile STAGES - 1 ahead
            const long long t = tile + (long long)(STAGES - 1) * gridDim.x;
            const int st = (stage + STAGES - 1) % STAGES;
            if (t < tiles) issue_tile(psi, t, groups, sorted, col, sq, moff, bs + st * NC * LD, cbase + st * NC);
            asm volatile("cp.async.commit_group;\n" ::);
        }
#else
        group_sync();  // the previous tile's products and writes are done
#pragma unroll
        for (int i = 0; i < MPT; ++i)
            *(double2*)&bs[col * LD + 2 * (i * TPC + sq)] = x[i];
        if (sq == 0) cbase[col] = xbase;
        group_sync();
        if (tile + gridDim.x < tiles)
            xbase = load_tile(psi, tile + gridDim.x, groups, sorted, col, sq, moff, x);
#endif
        const long long* cb = cbase + stage * NC;
#if GAUSS
        gauss_products(bs + stage * NC * LD, cb, abase, psi, moff, wm, wn, lane);
#else
        const double* bp = bs + stage * NC * LD + boff;

        double acc[WMT][WNT][2];
#pragma unroll
        for (int mi = 0; mi < WMT; ++mi)
#pragma unroll
            for (int ni = 0; ni < WNT; ++ni) acc[mi][ni][0] = acc[mi][ni][1] = 0.0;
        // A's and B's fragments of k step ks (m8n8k4 layout)
        auto fragments = [&](int ks, double (&a)[WMT], double (&b)[WNT]) {
#if A_SMEM == 2
#pragma unroll
            for (int mi = 0; mi < WMT; mi += 2) {
                const double2 u = up[(mi / 2) * 8 * (K + 1) + 2 * ks];
                a[mi] = odd ? -u.y : u.x;
                a[mi + 1] = odd ? u.x : u.y;
            }
#else
#pragma unroll
            for (int mi = 0; mi < WMT; ++mi) {
#if A_SMEM
                a[mi] = ap[(mi * KST + ks) * 32];
#else
                a[mi] = __ldg(ap + (mi * KST + ks) * 32);
#endif
            }
#endif
#pragma unroll
            for (int ni = 0; ni < WNT; ++ni) b[ni] = bp[ni * 8 * LD + ks * 4];
        };
#if MMA_K8
#pragma unroll 2
        for (int ks = 0; ks < KST; ks += 2) {
            double a0[WMT], b0[WNT], a1[WMT], b1[WNT];
            fragments(ks, a0, b0);
            fragments(ks + 1, a1, b1);
#pragma unroll
            for (int mi = 0; mi < WMT; mi += 2)
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni)
                    dmma16(acc[mi][ni], acc[mi + 1][ni], a0[mi], a0[mi + 1], a1[mi], a1[mi + 1],
                           b0[ni], b1[ni]);
        }
#else
#pragma unroll 4
        for (int ks = 0; ks < KST; ++ks) {
            double a[WMT], b[WNT];
            fragments(ks, a, b);
#pragma unroll
            for (int mi = 0; mi < WMT; ++mi)
#pragma unroll
                for (int ni = 0; ni < WNT; ++ni) dmma(acc[mi][ni], a[mi], b[ni]);
        }
#endif
#pragma unroll
        for (int mi = 0; mi < WMT; mi += 2) {
            const long long off = moff[8 * ((wm * WMT + mi) / 2) + (lane >> 2)];
#pragma unroll
            for (int ni = 0; ni < WNT; ++ni)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const long long base = cb[(wn * WNT + ni) * 8 + 2 * (lane & 3) + h];
                    if (base >= 0)
                        psi[base + off] = make_double2(acc[mi][ni][h], acc[mi + 1][ni][h]);
                }
        }
#endif
        stage = (stage + 1) % STAGES;
    }
#if ASYNC
    asm volatile("cp.async.wait_all;\n" ::);
#endif
}
