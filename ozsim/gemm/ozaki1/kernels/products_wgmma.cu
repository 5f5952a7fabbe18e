// Scheme I, fused INT8 products and FP64 accumulation on Hopper (ozsim.gemm.ozaki1.wgmma:
// oz_gemm_acc). Compiled by NVRTC for sm_90a with -std=c++17. Options: the tile -DBM, -DBN, -DBK
// (rows of A's image, columns of B, bytes of K per stage) and -DSTAGES (the shared-memory ring):
// ozaki1.wgmma's BM, BN, BK, STAGES.
//
// The cuBLAS path computes each group's INT32 plane P_t = sum_{i+j=t} A_i B_j in HBM (16 bytes an
// output amplitude a group) and oz_accumulate reads the planes back; here each output tile's P_t
// stays in registers: per tile, for t = s+1 down to 2, one INT32 chain of wgmma products over the
// group's slice pairs, then S = fma(S, 2**-b, P_t) in FP64, and out = ldexp(S, eA + eB - 2 b).
//
// Complex products as one real GEMM: A's image row (output row i, part h) holds, per slice a,
// [Ar_a[i], -Ai_a[i]] (h = 0, the real part) or [Ai_a[i], Ar_a[i]] (h = 1) over K = 2 kpad, and
// B's slice of column j is [Br_b[j]; Bi_b[j]] (B's stored rows j and nbp + j), so that one chain
// gives Re = Ar Br - Ai Bi and Im = Ai Br + Ar Bi exactly (|P_t| <= (t - 1) 2 kpad (2**b - 1)**2
// < 2**31: the caller checks it). The image's rows are ordered so that wgmma's accumulator rows
// r and r + 8 of each 16 are the real and imaginary parts of one output row: every thread holds
// both parts of its outputs and writes whole complex128 values.
//
// Bitwise the CPU's _accumulate: it forms acc = P_{s+1} w_{s+1}, then acc = acc + P_t w_t for
// t = s .. 2 (w_t = 2**(-t b), products exact), then ldexp(acc, eA + eB). With S_t = acc_t / w_t
// (powers of two: scaling commutes with rounding far from the subnormal range, |P| < 2**31 and
// t b <= 133), S_t = fl(S_{t+1} 2**-b + P_t), one FMA whose product is exact, and ldexp(acc_2, e)
// = ldexp(S_2, e - 2 b).
#if !defined(BM) || !defined(BN) || !defined(BK) || !defined(STAGES)
#error "products_wgmma.cu needs -DBM, -DBN, -DBK and -DSTAGES (ozsim.gemm.ozaki1.wgmma)"
#endif
#include "../../ozaki2/kernels/hopper.cuh"
#include "../../kernels/exact_int.cuh"  // small_to_double: the epilogue's INT32 -> FP64

#if BM != 128 || BN != 128
#error "oz_gemm_acc: two consumer warpgroups of m64n128k32 (BM = BN = 128)"
#endif
#define A_BYTES (BM * BK)
#define STAGE_BYTES ((BM + BN) * BK)

#define OZ_D64                                                                                   \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
    "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, "   \
    "%38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, "   \
    "%56, %57, %58, %59, %60, %61, %62, %63}"
#define OZ_R8(d, i) "+r"(d[i]), "+r"(d[i + 1]), "+r"(d[i + 2]), "+r"(d[i + 3]), "+r"(d[i + 4]), \
    "+r"(d[i + 5]), "+r"(d[i + 6]), "+r"(d[i + 7])

// D (64 x 128 INT32 of the warpgroup) = A B (+ D if accumulate), both operands by descriptor
__device__ __forceinline__ void mma_n128(int (&d)[64], u64 da, u64 db, int accumulate)
{
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 " OZ_D64 ", %64, %65, p;\n}\n"
                 : OZ_R8(d, 0), OZ_R8(d, 8), OZ_R8(d, 16), OZ_R8(d, 24), OZ_R8(d, 32),
                   OZ_R8(d, 40), OZ_R8(d, 48), OZ_R8(d, 56)
                 : "l"(da), "l"(db), "r"(accumulate));
}

__device__ __forceinline__ void fence_acc64(int (&d)[64])
{
#pragma unroll
    for (int i = 0; i < 64; ++i) asm volatile("" : "+r"(d[i]) :: "memory");
}

// work item w -> (row tile, first column): grouped raster, `group` column tiles x all row tiles
// per group, row tiles fastest inside a group (the CTAs of one column tile share its B panel in
// L2)
__device__ __forceinline__ void decode(int w, int mtiles, int ntiles, int group, int& m0, int& n0)
{
    const int grp = w / (group * mtiles);
    const int first = grp * group;
    const int rem = w - grp * group * mtiles;
    m0 = (rem % mtiles) * BM;
    n0 = (first + rem / mtiles) * BN;
}

// Persistent: CTA b does work items b, b + gridDim.x, ...; the stage ring runs on across items.
// ta: A's image, (rows_img, s * 2 * kpad) INT8, K = slice a, then part (0: with Br, 1: with Bi);
// tb: B's slices (2 nbp, s * kpad) INT8 as ozaki1.cuda.split stores them (reversed: group t
// pairs A's slice a with B's stored slice s - t + 1 + a; imaginary parts from row nbp);
// kbs = kpad / BK; m output rows, nb columns written (out[i * so_r + j * so_c], complex128);
// eA (m,), eB (nb,) int32 exponents.
extern "C" __global__ void __launch_bounds__(384, 1) oz_gemm_acc(
    const __grid_constant__ TMap ta, const __grid_constant__ TMap tb, int s, int kbs, int nbp,
    int m, int nb, int mtiles, int ntiles, int group, int bits, const int* __restrict__ eA,
    const int* __restrict__ eB, double2* __restrict__ out, long long so_r, long long so_c)
{
    extern __shared__ unsigned char smem_raw[];
    __shared__ __align__(8) u64 bars[2 * STAGES];
    const u32 base = (smem_addr(smem_raw) + 1023u) & ~1023u;
    const u32 full0 = smem_addr(&bars[0]), empty0 = smem_addr(&bars[STAGES]);
    const int total = mtiles * ntiles;
    const int wg = threadIdx.x >> 7;
    if (threadIdx.x == 0) {
        for (int q = 0; q < STAGES; ++q) {
            mbar_init(full0 + 8 * q, 1);
            mbar_init(empty0 + 8 * q, 8);  // one arrival per consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {  // producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (threadIdx.x == 0) {
            int it = 0;
            for (int w = blockIdx.x; w < total; w += gridDim.x) {
                int m0, n0;
                decode(w, mtiles, ntiles, group, m0, n0);
                for (int t = s + 1; t >= 2; --t) {
                    for (int a = 0; a <= t - 2; ++a) {
                        const int bk = (s - t + 1 + a) * kbs;
                        for (int h = 0; h < 2; ++h) {
                            const int ak = (2 * a + h) * kbs, rb = n0 + h * nbp;
                            for (int kb = 0; kb < kbs; ++kb, ++it) {
                                const int q = it % STAGES;
                                if (it >= STAGES)
                                    mbar_wait(empty0 + 8 * q, ((it / STAGES) - 1) & 1);
                                const u32 full = full0 + 8 * q, sa = base + q * STAGE_BYTES;
                                mbar_expect_tx(full, STAGE_BYTES);
                                tma_load(sa, &ta, (ak + kb) * BK, m0, full);
                                tma_load(sa + A_BYTES, &tb, (bk + kb) * BK, rb, full);
                            }
                        }
                    }
                }
            }
        }
        return;
    }

    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int c = wg - 1, wq = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
    const double w = pow2(-bits);
    int d[64];
#pragma unroll
    for (int i = 0; i < 64; ++i) d[i] = 0;
    int it = 0;
    for (int wi = blockIdx.x; wi < total; wi += gridDim.x) {
        int m0, n0;
        decode(wi, mtiles, ntiles, group, m0, n0);
        double S[64];
        for (int t = s + 1; t >= 2; --t) {
            const int nk = (t - 1) * 2 * kbs;
            for (int kq = 0; kq < nk; ++kq, ++it) {
                const int q = it % STAGES;
                mbar_wait(full0 + 8 * q, (it / STAGES) & 1);
                const u32 sa = base + q * STAGE_BYTES;
                const u64 da = desc(sa + c * 64 * BK), db = desc(sa + A_BYTES);
                fence_acc64(d);
                wg_fence();
                mma_n128(d, da, db, kq > 0);
                mma_n128(d, da + 2, db + 2, 1);  // +32 bytes of K: the next k32 step
                mma_n128(d, da + 4, db + 4, 1);
                mma_n128(d, da + 6, db + 6, 1);
                wg_commit();
                fence_acc64(d);
                if (kq > 0) {  // the previous stage's products are done: release it
                    wg_wait<1>();
                    fence_acc64(d);
                    if (lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % STAGES));
                }
            }
            wg_wait<0>();
            fence_acc64(d);
            if (lane == 0) mbar_arrive(empty0 + 8 * ((it - 1) % STAGES));
            if (t == s + 1) {
#pragma unroll
                for (int i = 0; i < 64; ++i) S[i] = small_to_double(d[i]);
            } else {
#pragma unroll
                for (int i = 0; i < 64; ++i) S[i] = fma(S[i], w, small_to_double(d[i]));
            }
        }
        // accumulator i = 4 j + 2 h + e: image row 16 wq + (lane / 4) + 8 h (h: real, imaginary
        // part of one output row), column 8 j + 2 (lane % 4) + e
        const int row = m0 / 2 + c * 32 + 8 * wq + (lane >> 2);
        if (row < m) {
            const int ea = eA[row] - 2 * bits;
            double2* orow = out + (long long)row * so_r;
#pragma unroll
            for (int j = 0; j < 16; ++j) {
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int col = n0 + 8 * j + 2 * (lane & 3) + e;
                    if (col < nb) {
                        const int ex = ea + eB[col];
                        orow[col * so_c] = make_double2(scale2(S[4 * j + e], ex),
                                                        scale2(S[4 * j + 2 + e], ex));
                    }
                }
            }
        }
    }
}
