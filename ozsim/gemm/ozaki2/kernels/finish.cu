// Scheme II, stage "crt" (ozsim.gemm.ozaki2.cuda._finish): the CRT reconstruction crt_finish.
// Options: those of crt_common.cuh; -DNMODC=<moduli> -DNLIMBC=<digits of P>; the pass structure
// -DFINISH_PARTS, -DFINISH_PRELOAD, -DFINISH_BLOCKS, -DFINISH_THREADS, -DFINISH_COLS
// (ozaki2.cuda._FINISH_OPTS).
#ifndef NMODC
#define NMODC 1
#define NLIMBC 1
#endif
#include "crt_common.cuh"

// CRT reconstruction (ozaki2._CRTAccumulator), NMODC moduli and NLIMBC digits fixed at compile
// time: u is (NMODC, 2, m, ld) UINT8 (ld a multiple of 4); cst holds 1/p (NMODC), then the digits
// of P/p ((NMODC, NLIMBC), lowest first), the digits of P (NLIMBC), fl(2**(LBITS c) / P)
// (NLIMBC) and the digit sums' starting values (NLIMBC), staged in shared memory
// (ozaki2.cuda._crt_constants_gpu). FINISH_SUMS (default 1): each residue byte enters the digit
// sums as 256 + u made from its bits (one logic operation, no FP64 subtraction), the sums start
// at -256 sum_p digit_c(P/p) (ozaki2.moduli.offset_sum_start: exact), and the quotient comes
// from the digit sums (ozaki2.moduli.quotient_weights), not from a sum of its own: 3 FP64
// operations an entry and modulus instead of 5 (at 15 moduli), the same quotient and digits,
// so the same bits (H200, N = 30, int8-crt-auto T = 0 through StateVector.apply: 9.47-9.82x ->
// 9.40-9.42x the copy floor at d = 7, 11.17-11.25x -> 10.95-11.01x at 8, level at 6 and 10);
// 0: the sums as ozaki2._CRTAccumulator writes them.
// perm: u as crt_gemm_mod's epilogue stores it without its quad transpose (products_wgmma.cu,
// ld % 32 == 0): in each aligned group of 32 columns the byte of column c at s = c with bits 1-2
// and 3-4 swapped; a thread reads stored bytes s0 .. s0 + FINISH_COLS - 1 as before and writes
// columns c(s) (adjacent in pairs: bit 0 stays; with 1 or 2 columns a thread it takes columns
// j0 .. in order, read at s(j0)). The kernel branches once on perm into a body compiled for each
// (finish_body<PERM>): a runtime test per column in one body had taken it from 744 to 856
// instructions (15 moduli, SASS).
// out[i, j] = ldexp(C'_re, fa[i] + fb[j] - gsum) + i ldexp(C'_im, ...). Each thread takes
// FINISH_COLS (4, 2 or 1) adjacent columns of row i (blockIdx.y: i - i0), one word of that many
// bytes a plane, in passes of FINISH_PARTS parts: 2 (re and im
// together, as one pass) or 1 (re, then im: half the live accumulators and loaded words, so
// that 3 blocks of 256 fit per multiprocessor at 80 registers instead of 2 at 96). The kernel is
// latency-bound (ncu, H100, N = 28 d = 8: 23% occupancy, FP64 pipe 51%, DRAM 53%); one part a
// pass took N = 28 d = 8 (15 moduli, 3 digits) from 7.03 to 5.55 ms, but with 16 moduli (4
// digits) it left the second part's loads exposed and was slower, unless every word is loaded
// up front (FINISH_PRELOAD, 2 blocks of 256): ozaki2.cuda._FINISH_OPTS picks per digit count
// (an earlier probe). On an H200 both parts in one pass with 2 columns a thread (62 registers,
// 4 blocks) beat that (ozaki2.cuda._FINISH_OPTS). Per part: NMODC independent loads (one word
// per plane), bytes to FP64 by an exponent trick rather than a conversion; no grid-stride loop
// (so the constants stay in shared memory).
#ifndef FINISH_PARTS
#define FINISH_PARTS 2
#endif
#ifndef FINISH_SUMS
#define FINISH_SUMS 1
#endif
#ifndef FINISH_BLOCKS
#define FINISH_BLOCKS 3
#endif
#ifndef FINISH_THREADS
#define FINISH_THREADS 256
#endif
#ifndef FINISH_COLS  // adjacent columns a thread: 4 (a 4-byte word a plane), 2 or 1
#define FINISH_COLS 4
#endif
#if FINISH_COLS == 4
typedef unsigned int finish_word;
#elif FINISH_COLS == 2
typedef unsigned short finish_word;
#elif FINISH_COLS == 1
typedef unsigned char finish_word;
#else
#error "FINISH_COLS must be 1, 2 or 4"
#endif
#if !defined(FINISH_PRELOAD) || FINISH_PARTS != 1
#undef FINISH_PRELOAD
#define FINISH_PRELOAD 0
#endif
#ifndef FINISH_LOP3  // each byte's high word in one lop3 (x & 0xff000) | 0x40700000 after its
#define FINISH_LOP3 1  // shift, written as inline PTX: ptxas made an and and an or of it (3
#endif  // instructions a byte -> 2; 15 moduli: 776 -> 704 in the permuted body's SASS). H200,
        // N = 30, the stage's medians at d = 7 / 8 / 9: 2.25 / 2.12 / 2.23 -> 2.17 / 2.05 / 2.13
        // times the copy floor (paired, with the columns in stored order); same bits
#ifndef FINISH_CONST  // the constants from the constant bank (1: finish_cst, filled once per
#define FINISH_CONST 0  // module by ozaki2.cuda._finish_kernel; uniform loads, no shared memory),
#endif  // or staged in shared memory from cst (0). H200, N = 30, 15 moduli, d = 7 / 8 / 9:
        // 2.46-2.53 / 2.51-2.56 / 2.89-3.12 -> 2.27-2.38 / 2.27-2.32 / 2.45-2.55 times the copy
        // floor (ozaki2.cuda.FINISH_CONST); same bits
#if FINISH_CONST
__constant__ double finish_cst[NMODC * (NLIMBC + 1) + 3 * NLIMBC];
#endif
#if FINISH_PARTS == 1 || FINISH_COLS != 4  // FINISH_BLOCKS of 256 (15 moduli: one part a
                                           // pass 3 at 80 registers; 2 columns 4 at 62)
#define FINISH_BOUNDS __launch_bounds__(FINISH_THREADS, FINISH_BLOCKS)
#else  // both parts, 4 columns: no bounds (96 registers at N = 15, 128 at N = 16)
#define FINISH_BOUNDS
#endif
template <bool PERM>
__device__ __forceinline__ void finish_body(
    const unsigned char* __restrict__ u, long long m, long long nb, long long ld,
    const double* sc, const int* __restrict__ fa, const int* __restrict__ fb, int gsum,
    double2* __restrict__ out, long long so_r, long long so_c, long long i0)
{
    constexpr int PP = FINISH_PARTS;
    const long long i = i0 + blockIdx.y;
    // j0: the thread's first column, or with PERM and 4 columns the first stored byte of its
    // word (4 adjacent columns are not adjacent bytes there: columns c(s0 .. s0 + 3)); with 1 or
    // 2 columns (adjacent bytes at s(j0)) the thread takes j0, j0 + 1 and reads them at s(j0),
    // so that the stores and fb's loads run in column order as without PERM (15 moduli, H200,
    // N = 30, the reconstruction stage at d = 7, times the copy floor: the columns c(s)
    // 2.14-2.21 against 1.93-1.94 in order; this form 1.93-1.96 against 1.93-1.94)
    constexpr bool SPERM = PERM && FINISH_COLS == 4;  // the thread's columns in stored order
    const long long j0 = FINISH_COLS * ((long long)blockIdx.x * blockDim.x + threadIdx.x);
    if ((SPERM ? (j0 & ~31LL) : j0) >= nb) return;
    // (PERM, 1-2 columns) where column j0 is stored
    const long long js = PERM && !SPERM ? (j0 & ~31LL) + swap_col_bits((int)(j0 & 31)) : j0;
    // one part per pass: volatile, so that the constants are read where used, once per pass,
    // not hoisted out of the pass loop into registers (N (NLIMBC + 1) doubles would undo the
    // halved state); both parts in one pass: plain (volatile reads there took 222-254 registers)
#if FINISH_PARTS == 1 && !FINISH_CONST
#define FINISH_CV volatile
#else
#define FINISH_CV
#endif
#if !FINISH_SUMS
    const FINISH_CV double* invp = sc;
#endif
    const FINISH_CV double* lm = sc + NMODC;
    const FINISH_CV double* lp = sc + NMODC + NMODC * NLIMBC;
    const FINISH_CV double* qw = lp + NLIMBC;
    const FINISH_CV double* start = qw + NLIMBC;
    const long long plane = m * ld / FINISH_COLS;  // words from one plane to the next
    const finish_word* ui = (const finish_word*)(u + i * ld + js);  // js + FINISH_COLS <= ld
    double res[2][FINISH_COLS];
#if FINISH_PRELOAD  // one part per pass, but every word loaded up front (the loads overlap)
    unsigned int w_re[NMODC], w_im[NMODC];
#pragma unroll
    for (int l = 0; l < NMODC; ++l) {
        w_re[l] = ui[(2 * l) * plane];
        w_im[l] = ui[(2 * l + 1) * plane];
    }
#endif
#pragma unroll 1
    for (int p0 = 0; p0 < 2; p0 += PP) {  // not unrolled: one pass's state live at a time
        unsigned int w[NMODC][PP];
#pragma unroll
        for (int l = 0; l < NMODC; ++l) {
#pragma unroll
            for (int pp = 0; pp < PP; ++pp) {
#if FINISH_PRELOAD
                w[l][pp] = p0 ? w_im[l] : w_re[l];
#else
                w[l][pp] = ui[(2 * l + p0 + pp) * plane];
#endif
            }
        }
        // per output (FINISH_COLS columns x PP parts): the quotient estimate and the digit sums; the
        // moduli loop outermost, so that each constant read from shared memory serves all
        double d[FINISH_COLS][PP][NLIMBC];
#if !FINISH_SUMS
        double q[FINISH_COLS][PP];
#endif
#pragma unroll
        for (int col = 0; col < FINISH_COLS; ++col) {
#pragma unroll
            for (int pp = 0; pp < PP; ++pp) {
#if !FINISH_SUMS
                q[col][pp] = 0.0;
#endif
#pragma unroll
                for (int c = 0; c < NLIMBC; ++c) d[col][pp][c] = FINISH_SUMS ? start[c] : 0.0;
            }
        }
#pragma unroll
        for (int l = 0; l < NMODC; ++l) {
#if !FINISH_SUMS
            const double ip = invp[l];
#endif
            double lml[NLIMBC];
#pragma unroll
            for (int c = 0; c < NLIMBC; ++c) lml[c] = lm[l * NLIMBC + c];
#pragma unroll
            for (int col = 0; col < FINISH_COLS; ++col) {
#pragma unroll
                for (int pp = 0; pp < PP; ++pp) {
#if FINISH_SUMS  // 256 + byte = 2**8 (1 + byte 2**-8): high word 0x40700000 | byte << 12
                    const unsigned int x = col < 2 ? w[l][pp] << (12 - 8 * col)
                                                   : w[l][pp] >> (8 * col - 12);
                    unsigned int hi;
#if FINISH_LOP3  // the mask and the or in one lop3 (FINISH_LOP3)
                    asm("lop3.b32 %0, %1, 0xff000, 0x40700000, 0xea;" : "=r"(hi) : "r"(x));
#else
                    hi = 0x40700000 | (x & 0xff000u);
#endif
                    const double v = __hiloint2double(hi, 0);
#else  // 2**52 + byte, exactly, minus 2**52
                    const unsigned int byte = (w[l][pp] >> (8 * col)) & 0xffu;
                    const double v = __hiloint2double(0x43300000, byte) - 4503599627370496.0;
#endif
#if !FINISH_SUMS  // only rint(q) is used: exact (|C'| < P/2 (1 - 2**-40))
                    q[col][pp] += v * ip;
#endif
#pragma unroll
                    for (int c = 0; c < NLIMBC; ++c) d[col][pp][c] += v * lml[c];  // exact
                }
            }
        }
        double lpr[NLIMBC];
#pragma unroll
        for (int c = 0; c < NLIMBC; ++c) lpr[c] = lp[c];
#pragma unroll
        for (int col = 0; col < FINISH_COLS; ++col) {
#pragma unroll
            for (int pp = 0; pp < PP; ++pp) {
#if FINISH_SUMS  // the quotient from the digit sums (q's sum unused: never made)
                const double qq = crt_quotient(d[col][pp], qw);
#else
                const double qq = rint_small(q[col][pp]);
#endif
                const double v = crt_value(d[col][pp], qq, lpr);
                if (PP == 2) res[pp][col] = v;
                else if (p0) res[1][col] = v;
                else res[0][col] = v;
            }
        }
    }
    const int sha = fa[i] - gsum;
#pragma unroll
    for (int col = 0; col < FINISH_COLS; ++col) {
        const long long j = SPERM ? (j0 & ~31LL) + swap_col_bits((int)(j0 & 31) + col)
                                  : j0 + col;
        if (j >= nb) continue;
        const int sh = sha + fb[j];
        out[i * so_r + j * so_c] = make_double2(scale2(res[0][col], sh), scale2(res[1][col], sh));
    }
}

// perm (a uniform branch): u's columns as the fused products kernel stores them (above), or in
// order
extern "C" __global__ void FINISH_BOUNDS crt_finish(
    const unsigned char* __restrict__ u, long long m, long long nb, long long ld,
    const double* __restrict__ cst, const int* __restrict__ fa, const int* __restrict__ fb,
    int gsum, double2* __restrict__ out, long long so_r, long long so_c, long long i0, int perm)
{
#if FINISH_CONST
    const double* sc = finish_cst;
#else
    __shared__ double sc[NMODC * (NLIMBC + 1) + 3 * NLIMBC];
    const int ncst = NMODC * (NLIMBC + 1) + 3 * NLIMBC;
    for (int t = threadIdx.x; t < ncst; t += blockDim.x) sc[t] = cst[t];
    __syncthreads();
#endif
    if (perm) {
        finish_body<true>(u, m, nb, ld, sc, fa, fb, gsum, out, so_r, so_c, i0);
    } else {
        finish_body<false>(u, m, nb, ld, sc, fa, fb, gsum, out, so_r, so_c, i0);
    }
}
