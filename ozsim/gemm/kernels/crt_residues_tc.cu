// Scheme II's GEMM path (ozsim.gemm.ozaki2.cuda.residues_tc, for int8_crt_zgemm_gpu): B's
// analysis and residues in one read of B, the residues made on the INT8 tensor cores; for the
// state-vector gates of 7 to 9 qubits, whose B is the state viewed through the target qubits.
//
// The GEMM path read B twice before its products: the analysis (crt_analyse_tile: each row's
// norm exponent f, ozaki2.norm_exponents) and the residues (residues32.cu: per scalar 5 balanced
// FP64 pieces, then per modulus 5 FP32 multiply-adds and a reduction). Here one warp takes a
// whole row of X = B.T at a time (an amplitude group; its k = 2**d columns the members), K / 32
// members a lane, held in registers:
//   1. e, the frexp exponent of the row's largest |Re|, |Im| (0 for a zero row), and NaN/Inf
//      (*flag = 1), by warp shuffles;
//   2. S, the exact sum of the squares of ceil(|x| 2**(NFRAC - e)) (integers below 2**53: any
//      order), and f = e - NFRAC + ceil(bl(S) / 2), written to f_out: the analysis's integers;
//   3. per round, each lane's scalar's integer v = rnd(ldexp(x, gb - f)) as 8 balanced bytes,
//      and four m16n8k32 products with the constant weights 2**(8 i) mod p of every modulus
//      (the one-pass kernel's TC_SPLIT, crt_gate_mma.cu): R = v mod p_l, |R| <= 2**17, reduced
//      to the symmetric residue by residue_byte (crt_gate.cuh). Lane (g, t) gets moduli g and
//      g + 8 of the members of lanes 8 t + 0..7, two words of 4 consecutive members each,
//      stored as one 8-byte word of plane [l][part] (planes [Re, Im], the direct form of
//      ozsim.gemm.ozaki2.wgmma.gemm_mod): the same bytes as residues32.cu's (the symmetric
//      residue is unique; 128 and -128 of p = 256 share the byte 0x80).
// Rows ra > r >= rows (the padding of the planes) get zeros. The scalings by 2**(NFRAC - e) and
// 2**(gb - f) are one multiplication a scalar where the power of 2 is a normal double (a branch
// per row, not per scalar), else ldexp: the same values.
//
// Options: -DGATE_QUBITS=d (5..9: 1..16 members a lane), -DNMOD=N (<= 16), -DROUND=0|1, the
// scheme's constants -DNFRAC -DLBITS; -DTAB=1: X through offset tables (roff, koff), else
// element strides (sr, sc); -DROWFAST=1 where X's rows are adjacent in memory (the targets are
// high bits): a block's 8 rows pass through shared memory (dynamic, 16 K 8 bytes), so that each
// load takes whole 128-byte lines (a warp's own row would touch a line a lane). Needs |v| <=
// 2**62 (gb <= 62) and crt_gate.cuh's tables mod_p, mod_ipu, mod_soff, mod_wd
// (ozsim.gemm.ozaki2.gate_tables.upload_tables).
#define INT_PIECES 1
#include "crt_gate.cuh"
#include "mma_s8.cuh"
#if K < 32 || K > 512
#error "crt_residues_tc: 32 <= 2**d <= 512"
#endif
#if NMOD > 16
#error "crt_residues_tc: at most 16 moduli (the rows of one m16n8k32 product)"
#endif
#ifndef TAB
#define TAB 0
#endif
#define MPL (K / 32)  // members a lane
#define RES_THREADS 256
#define RPB (RES_THREADS / 32)  // rows a block at a time (a warp each)
#ifndef MINB  // blocks an SM the registers must allow: 2 (128 registers; H200, N = 30, 15
#define MINB 2  // moduli, the GEMM path's whole gate: 3 was level at d = 7 and 0.2-0.5x the
#endif          // copy floor slower at 8, 1.6-2x at 9, where it spills)
#ifndef ROWFAST
#define ROWFAST 0
#endif
#ifndef ASYNC  // every layout staged through shared memory, two tiles of rows in flight
#define ASYNC 0  // (cp.async): H200, N = 30, 15 moduli, the GEMM path's whole gate, three target
#endif           // sets a d: 8.70-9.18x against 8.31-8.99x the copy floor at d = 7, 9.62-10.49x
                 // against 9.85-10.16x at 8, 12.60-13.20x against 12.62-12.84x at 9; same bits


// The exact sum of the squares of ceil(|x| 2**sh) over a lane's members (FAST: 2**sh is a
// normal double, one multiplication a scalar; else ldexp)
template <bool FAST>
__device__ __forceinline__ double square_sum(const double2 (&v)[MPL], int sh)
{
    const double scale = pow2(FAST ? sh : 0);
    double s = 0.0;
#pragma unroll
    for (int i = 0; i < MPL; ++i) {
        const double qr = ceil(FAST ? fabs(v[i].x) * scale : ldexp(fabs(v[i].x), sh));
        const double qi = ceil(FAST ? fabs(v[i].y) * scale : ldexp(fabs(v[i].y), sh));
        s += qr * qr;  // exact: integers, |q| <= 2**13
        s += qi * qi;
    }
    return s;
}

// Step 3 for one row: per round a scalar a lane, v = rnd(x 2**sh) (FAST: one multiplication,
// else ldexp: the same values), its residues of every modulus, and lane (g, tq)'s two 8-byte
// stores (members 32 i + 8 tq + 0..7 of moduli g and g + 8, plane [l][part]; dst: row r's
// first byte of plane [0][0] plus 8 tq)
template <bool FAST>
__device__ __forceinline__ void row_residues(const double2 (&v)[MPL], int sh,
                                             const uint4 (&tc_a)[4], const TcRows& tcr, int g,
                                             long long ps, signed char* dst)
{
    const double scale = pow2(FAST ? sh : 0);
#pragma unroll
    for (int part = 0; part < 2; ++part)
#pragma unroll
        for (int i = 0; i < MPL; ++i) {
            const double xv = part ? v[i].y : v[i].x;
            const double y = FAST ? xv * scale : ldexp(xv, sh);  // (as ldexp: exact here)
            const long long vi = ROUND ? __double2ll_rn(y) : __double2ll_rz(y);
            unsigned lo, hi;
            balanced_bytes(vi, lo, hi);  // (|vi| <= 2**62)
            int c[4][4];
#pragma unroll
            for (int t = 0; t < 4; ++t) {
                c[t][0] = c[t][1] = c[t][2] = c[t][3] = 0x4B400000;
                mma_s8(c[t], tc_a[t], lo, hi);
            }
            unsigned wd[4];
            tc_residue_words(c, tcr, wd);
            signed char* d = dst + 32 * i + part * ps;
            if (g < NMOD)
                *reinterpret_cast<uint2*>(d + (long long)g * 2 * ps) = make_uint2(wd[0], wd[1]);
            if (g + 8 < NMOD)
                *reinterpret_cast<uint2*>(d + (long long)(g + 8) * 2 * ps) =
                    make_uint2(wd[2], wd[3]);
        }
}

extern "C" __global__ void __launch_bounds__(RES_THREADS, MINB)
crt_residues_tc(const double2* __restrict__ x, long long rows, long long ra, long long sr,
                long long sc, const long long* __restrict__ roff,
                const long long* __restrict__ koff, int gb, int* __restrict__ f_out,
                signed char* __restrict__ out, unsigned long long* __restrict__ flag)
{
    const int lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
    // the residue products' constant A operand and residue_byte's constants (crt_gate.cuh)
    uint4 tc_a[4];
#pragma unroll
    for (int t = 0; t < 4; ++t) tc_a[t] = tc_weights(g, tq, t);
    const TcRows tcr = tc_rows(g);
    const long long ps = ra * K;  // bytes a plane
    int bad = 0;
    // one row r (valid: r < rows; else a padding row, v zero) whose members this lane holds
    auto row = [&](const double2 (&v)[MPL], long long r, bool valid) {
        // 1. e and NaN/Inf
        double mx = 0.0;
#pragma unroll
        for (int i = 0; i < MPL; ++i) {
            bad |= !(fabs(v[i].x) <= 1.7976931348623157e308) |
                   !(fabs(v[i].y) <= 1.7976931348623157e308);
            mx = fmax(mx, fmax(fabs(v[i].x), fabs(v[i].y)));
        }
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        int e;
        frexp(mx, &e);  // (0 for a zero row)
        // 2. S and f (2**(NFRAC - e) a normal double unless e < -1009)
        double s = NFRAC - e <= 1023 ? square_sum<true>(v, NFRAC - e)
                                     : square_sum<false>(v, NFRAC - e);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        const int f = norm_exponent_of(e, s);
        if (valid && lane == 0) f_out[r] = f;
        // 3. the residues, a scalar a lane a round
        const int sh = gb - f;
        signed char* dst = out + r * K + 8 * tq;
        if (sh >= -1022 && sh <= 1023)
            row_residues<true>(v, sh, tc_a, tcr, g, ps, dst);
        else
            row_residues<false>(v, sh, tc_a, tcr, g, ps, dst);
    };
    const int warp = threadIdx.x >> 5;
    const long long step = (long long)gridDim.x * RPB;
#if ASYNC || ROWFAST
    // the block's 8 rows staged in shared memory ([ASYNC + 1][RPB][K] double2, dynamic), each
    // load instruction whole 128-byte lines: ROWFAST (rows adjacent in memory) 4 members of the
    // 8 rows, else 32 members of one row
    extern __shared__ double2 tile_smem[];
    double2 (*tile)[RPB][K] = reinterpret_cast<double2 (*)[RPB][K]>(tile_smem);
    const int lrow = ROWFAST ? threadIdx.x % RPB : threadIdx.x / 32;
    const int lk0 = ROWFAST ? threadIdx.x / RPB : threadIdx.x % 32;
    constexpr int LSTEP = ROWFAST ? RES_THREADS / RPB : 32, LOADS = K / LSTEP;
#endif
#if ASYNC
    // two tiles in flight: tile t + 1's cp.async loads issued before tile t's rows are taken
    auto issue = [&](long long r0, int buf) {
        const long long rs = r0 + lrow;
        const bool ok = rs < rows;
#pragma unroll
        for (int j = 0; j < LOADS; ++j) {
            const long long kk = lk0 + LSTEP * j;
            const double2* src = ok ? x + (TAB ? roff[rs] + koff[kk] : rs * sr + kk * sc) : x;
            const unsigned dsts = (unsigned)__cvta_generic_to_shared(&tile[buf][lrow][kk]);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                         :: "r"(dsts), "l"(src), "r"(ok ? 16 : 0));  // (zeros past rows)
        }
    };
    long long r0 = (long long)blockIdx.x * RPB;
    if (r0 < ra) issue(r0, 0);
    asm volatile("cp.async.commit_group;\n" ::);
    for (int it = 0; r0 < ra; ++it, r0 += step) {
        if (r0 + step < ra) issue(r0 + step, (it + 1) & 1);
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 1;\n" ::: "memory");  // (this tile's group)
        __syncthreads();
        const long long r = r0 + warp;
        if (r < ra) {
            double2 v[MPL];
#pragma unroll
            for (int i = 0; i < MPL; ++i) v[i] = tile[it & 1][warp][32 * i + lane];
            row(v, r, r < rows);
        }
        __syncthreads();  // (the next iteration's loads overwrite tile it & 1 one tile later)
    }
#elif ROWFAST
    for (long long r0 = (long long)blockIdx.x * RPB; r0 < ra; r0 += step) {
        const long long rs = r0 + lrow;
        __syncthreads();  // (the last tile's rows are read)
#pragma unroll
        for (int j = 0; j < LOADS; ++j) {
            const long long kk = lk0 + LSTEP * j;
            tile[0][lrow][kk] = rs < rows ? x[TAB ? roff[rs] + koff[kk] : rs * sr + kk * sc]
                                          : make_double2(0.0, 0.0);
        }
        __syncthreads();
        const long long r = r0 + warp;
        if (r < ra) {
            double2 v[MPL];
#pragma unroll
            for (int i = 0; i < MPL; ++i) v[i] = tile[0][warp][32 * i + lane];
            row(v, r, r < rows);
        }
    }
#else
    for (long long r = (long long)blockIdx.x * RPB + warp; r < ra; r += step) {
        const bool valid = r < rows;
        double2 v[MPL];
#pragma unroll
        for (int i = 0; i < MPL; ++i) {
            const long long kk = 32 * i + lane;
            v[i] = valid ? x[TAB ? roff[r] + koff[kk] : r * sr + kk * sc]
                         : make_double2(0.0, 0.0);
        }
        row(v, r, valid);
    }
#endif
    if (__any_sync(0xffffffffu, bad) && lane == 0) *flag = 1ull;
}
